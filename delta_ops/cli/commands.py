"""The `delta-ops` command: the operations for people and scripts.

Thin by design: parse arguments, call the library, print the result (JSON with `--json`).
Errors print one line naming the file and problem on stderr and exit non-zero: 2 for the
user's input (a value, a location, argparse's usage errors), 1 for an operation that failed
(a conflict, a corrupt log) or a reader of stdout that went away (a cut-off result), 70 for an
internal error (a bug: the one line names the exception; -v or DELTA_OPS_TRACEBACK=1 prints
the traceback too).
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import gc
import json
import logging
import os
import sys
import traceback
from collections.abc import Sequence
from typing import Any, NoReturn

from delta_ops import clock
from delta_ops.cli.own_process import chosen_by_user, keep_pandas_unloaded
from delta_ops.errors import (
    DeltaOpsError,
    InvalidLocation,
    InvalidValue,
    MissingExtra,
    NotADeltaTable,
    VersionNotFound,
    file_being_read,
)
from delta_ops.ops import progress
from delta_ops.ops.engines import LOCAL, Engine
from delta_ops.ops.operation import AnyOperation, OptionKind
from delta_ops.ops.registry import OPERATIONS
from delta_ops.ops.results import to_data
from delta_ops.table.snapshot import load_snapshot
from delta_ops.version import __version__

#: the exit code of an internal error (a bug): EX_SOFTWARE of sysexits.h, apart from a user
#: error (2, as argparse's) and a failed operation (1)
EXIT_INTERNAL_ERROR = 70


def _add_table_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("table", help="table path or URL (file://, memory://, s3://, ...)")
    _add_storage_option(
        p, "storage option (repeatable); KEY:=JSON passes a JSON value, not a string"
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")


def _add_storage_option(p: argparse.ArgumentParser, help_text: str) -> None:
    """The repeatable ``--storage-option KEY=VALUE`` (read by `_storage_options`)."""
    p.add_argument(
        "--storage-option", action="append", default=[], metavar="KEY=VALUE", help=help_text
    )


def _storage_options(pairs: Sequence[str]) -> dict[str, Any]:
    """``KEY=VALUE`` options as strings; ``KEY:=JSON`` ones as the JSON value, for a client
    option that is not a string (s3fs' ``retries:=2``, ``config_kwargs:={...}``)."""
    options: dict[str, Any] = {}
    for key, value in _pairs(pairs, "--storage-option", "KEY=VALUE or KEY:=JSON").items():
        if not key.endswith(":"):
            options[key] = value
            continue
        try:
            options[key[:-1]] = json.loads(value)
        except ValueError:
            raise InvalidValue(
                f"--storage-option {key}={value}: not JSON (KEY:=JSON takes a JSON value, such as"
                ' 2, true or {"a": 1}; KEY=VALUE a string)'
            ) from None
    return options


def _pairs(pairs: Sequence[str], flag: str, form: str) -> dict[str, str]:
    """``A=B`` arguments of a repeatable `flag` as a dict; one not in that `form` is refused."""
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise InvalidValue(f"{flag}: {pair!r} is not {form}")
        out[key] = value
    return out


def _cmd_inspect(args: argparse.Namespace) -> int:
    snapshot = load_snapshot(
        args.table, args.version, storage_options=_storage_options(args.storage_option)
    )
    # the command's own stack (the planners it asks for advice), imported only after the load:
    # their modules' memory then lands below the load's peak instead of on top of it
    from delta_ops.service.inspect import format_summary, summarize

    summary = summarize(snapshot, include_files=args.files)
    _output(json.dumps(summary.to_dict()) if args.json else format_summary(summary))
    return 0


def _cmd_plan(args: argparse.Namespace) -> int:
    """Rank a lake's tables by what maintenance would gain (`delta_ops.service.fleet`)."""
    # the command's own stack: loaded only when the command runs
    from delta_ops.service.fleet import (
        describe_fleet_plan,
        fleet_from_spec,
        fleet_from_warehouse,
        plan_fleet,
    )

    options = _storage_options(args.storage_option)
    if os.path.isfile(args.lake):
        tables = fleet_from_spec(_read_lake_file(args.lake), options)
    elif os.path.isdir(args.lake):
        tables = fleet_from_warehouse(args.lake, options)
    else:
        raise InvalidLocation(f"{args.lake}: neither a warehouse folder nor a lake file")
    limits = _pairs(args.max_per_action, "--max-per-action", "ACTION=N")
    plan = plan_fleet(
        tables,
        clock.now_ms(),
        max_tables=args.max_tables,
        max_per_action={action: _count(n, "--max-per-action") for action, n in limits.items()},
    )
    _print(args, to_data(plan), describe_fleet_plan(plan))
    return 0


def _read_lake_file(path: str) -> Any:
    """A lake file's content: YAML (JSON is YAML too)."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if path.endswith(".json"):
        return json.loads(text)
    try:
        # PyYAML comes with the dagster and airflow extras, not with the core
        import yaml  # type: ignore[import-untyped]
    except ImportError:
        raise InvalidValue(
            f"{path}: reading YAML needs PyYAML (pip install pyyaml); or write the lake as JSON"
        ) from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InvalidValue(f"{path}: not YAML: {' '.join(str(exc).split())}") from None


def _count(raw: str, flag: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise InvalidValue(f"{flag}: {raw!r} is not a whole number") from None
    if value < 0:
        raise InvalidValue(f"{flag}: {value} is below 0")
    return value


def _print(args: argparse.Namespace, data: dict[str, Any], human: str) -> None:
    _output(json.dumps(data) if args.json else human)


class _ReaderGone(Exception):
    """The reader of stdout went away before the result was written
    (`delta-ops inspect t --json | head -c 100`)."""


def _output(text: str) -> None:
    """Print the command's result on stdout; a closed pipe is `_ReaderGone` (any other
    broken pipe, such as a store's connection, stays an error of its own)."""
    try:
        print(text)
    except BrokenPipeError as exc:
        raise _ReaderGone from exc


def _discard(stream: Any) -> None:
    """Send what is left of `stream` to /dev/null, so neither a later flush nor the
    interpreter's teardown fails again on a closed pipe (Python's `signal` docs, SIGPIPE)."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)


def _run_operation(operation: AnyOperation, args: argparse.Namespace) -> int:
    """Plan one registered operation; print the plan (dry run) or execute it and print what
    it did. Text by default, one JSON object with --json."""
    # imported when an operation runs: `inspect` (and a bare load) need neither
    from delta_ops.service.history import HISTORY_ENV, OperationHistory
    from delta_ops.service.runs import run_operation

    values = operation.parse({o.name: getattr(args, o.name) for o in operation.options})
    engine = _engine(operation.engine_name(values), getattr(args, "spark_remote", None))
    version = args.version if operation.at_version else None
    options = _storage_options(args.storage_option)
    dry_run = bool(args.dry_run)
    say = (lambda m: print(f"delta-ops: {m}", file=sys.stderr)) if args.verbose else None
    location = None if dry_run else (args.history or os.environ.get(HISTORY_ENV) or None)
    with progress.reporting(None if dry_run else _progress_reporter(say)):
        run = run_operation(
            operation,
            args.table,
            values,
            engine,
            version=version,
            storage_options=options,
            dry_run=dry_run,
            progress=None if dry_run else say,
            history=OperationHistory(location, options or None) if location else None,
            front_end="cli",
        )
    if dry_run:
        for warning in run.warnings:
            print(f"delta-ops: warning: {warning}", file=sys.stderr)
        data = {**to_data(run.plan), "dry_run": True, "warnings": list(run.warnings)}
        _print(args, data, operation.describe_plan(run.plan))
        return 0
    result = run.result
    _print(args, {**to_data(result), "dry_run": False}, operation.describe_result(result))
    return 0


def _engine(name: str, spark_remote: str | None = None) -> Engine:
    """The engine ``--engine`` names (`delta_ops.ops.engines`); for spark, on the Spark
    Connect server ``--spark-remote`` names, else on a session of this process."""
    if spark_remote and name != "spark":
        raise InvalidValue(f"--spark-remote {spark_remote}: needs --engine spark")
    if name == "spark":
        # the spark extra (PySpark) is optional: imported only when asked for
        from delta_ops.spark.engine import SparkEngine

        if not spark_remote:
            return SparkEngine()
        if not spark_remote.startswith("sc://"):
            raise InvalidValue(
                f"--spark-remote {spark_remote}: not a Spark Connect URL (sc://HOST:PORT)"
            )
        # the same optional extra, with PySpark's Connect client
        from delta_ops.spark.session import get_spark_remote

        return SparkEngine(get_spark_remote(spark_remote))
    return LOCAL


def _progress_reporter(say: Any) -> progress.Reporter | None:
    """A bar on an interactive terminal; progress lines with --verbose when output goes to a
    file or pipe; otherwise nothing (scripts read one clean result)."""
    if sys.stderr.isatty():
        return progress.TerminalBar(sys.stderr)
    return progress.LogLines(say) if say is not None else None


def _literal(text: str) -> str:
    """`text` as an argparse help string shows it: argparse %-formats every help string
    (``%(default)s``), so a ``%`` written in the registry ("10%") must be doubled."""
    return text.replace("%", "%%")


def _add_operation(sub: Any, operation: AnyOperation) -> None:
    """A subcommand generated from the registry: the table, the op's options, --dry-run. Every
    text from the registry passes through `_literal` (a bare ``%`` broke `--help`)."""
    # with the operation's own modules: `inspect` and a bare load need no history
    from delta_ops.service.history import HISTORY_ENV

    parser = _add_subcommand(sub, operation.command, operation.help)
    _add_table_args(parser)
    if operation.at_version:
        parser.add_argument(
            "--version", type=int, default=None, help="version to act on (default: latest)"
        )
    for option in operation.options:
        if option.positional:
            parser.add_argument(
                option.name, metavar=option.name.upper(), help=_literal(option.help)
            )
            continue
        if option.kind is OptionKind.FLAG:
            parser.add_argument(option.flag, action="store_true", help=_literal(option.help))
            continue
        hint = option.hint
        default = f"; default {option.default}" if option.default not in (None, False) else ""
        parser.add_argument(
            option.flag,
            dest=option.name,
            default=None,
            metavar=option.name.upper(),
            help=_literal(f"{option.help} ({hint}{default})"),
        )
    if any(option.name == "engine" for option in operation.options):
        parser.add_argument(
            "--spark-remote",
            default=None,
            metavar="URL",
            help="with --engine spark: run the tasks through the Spark Connect server at URL"
            " (sc://HOST:PORT; Databricks Connect's URLs too)",
        )
    parser.add_argument("--dry-run", action="store_true", help="print the plan; change nothing")
    parser.add_argument(
        "--history",
        default=None,
        metavar="PATH",
        help=f"record the run in the operation history, a Delta table at PATH (default"
        f" ${HISTORY_ENV}; none when neither is set)",
    )
    parser.set_defaults(func=lambda args: _run_operation(operation, args))


def _add_subcommand(sub: Any, name: str, text: str) -> argparse.ArgumentParser:
    """A subcommand whose `text` (what it does) is both its line in ``delta-ops --help`` and
    the opening of its own ``--help``."""
    parser: argparse.ArgumentParser = sub.add_parser(
        name,
        help=_literal(text),
        # argparse formats a description only when it holds "%(prog)", and then all of it
        description=_literal(text) if "%(prog)" in text else text,
    )
    return parser


class _OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line naming the problem and where help is, exit 2
    (argparse prints the whole usage block first)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"delta-ops: error: {message} (see {self.prog} --help)\n")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The `delta-ops` parser. Given the command being run, only that operation's subcommand
    is generated (so only its module is imported, `delta_ops.ops.registry`); without one, or
    for a name that is no operation, every subcommand (for --help and usage errors)."""
    parser = _OneLineParser(prog="delta-ops", description="Maintenance for Delta Lake tables.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress to stderr")
    parser.add_argument("-V", "--version", action="version", version=f"delta-ops {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    inspect = _add_subcommand(sub, "inspect", "show a table's state and what it needs doing")
    _add_table_args(inspect)
    inspect.add_argument(
        "--version", type=int, default=None, help="version to inspect (default: latest)"
    )
    inspect.add_argument("--files", action="store_true", help="list the live files")
    inspect.set_defaults(func=_cmd_inspect)

    plan = _add_subcommand(
        sub, "plan", "rank a lake's tables by what maintenance would gain, within a budget"
    )
    plan.add_argument("lake", help="a warehouse folder (its tables are found), or a lake file")
    _add_storage_option(
        plan, "storage option for every table (repeatable); KEY:=JSON passes a JSON value"
    )
    plan.add_argument(
        "--max-tables",
        type=int,
        default=None,
        metavar="N",
        help="choose at most N tables (default: every table with work)",
    )
    plan.add_argument(
        "--max-per-action",
        action="append",
        default=[],
        metavar="ACTION=N",
        help="choose an action for at most N tables (repeatable), e.g. vacuum=10",
    )
    plan.add_argument("--json", action="store_true", help="print one JSON object")
    plan.set_defaults(func=_cmd_plan)
    for name in _operations_to_add(command):
        _add_operation(sub, OPERATIONS[name])
    return parser


BUILT_IN_COMMANDS = frozenset({"inspect", "plan"})


def _operations_to_add(command: str | None) -> list[str]:
    """The operations whose subcommands the parser for `command` needs: that operation; none
    for a built-in command (so `inspect` imports no operation's module before it loads the
    table); every one for anything else (--help, usage errors)."""
    if command is not None and (name := command.replace("-", "_")) in OPERATIONS:
        return [name]
    if command in BUILT_IN_COMMANDS:
        return []
    return list(OPERATIONS)


def _command(argv: Sequence[str]) -> str | None:
    """The subcommand `argv` names: its first word that is not an option (the top-level
    options take no value)."""
    return next((arg for arg in argv if not arg.startswith("-")), None)


def use_system_allocator() -> None:
    """Make the system allocator pyarrow's default pool for this process.

    pyarrow's default (mimalloc) keeps freed scratch memory, so one big log load would hold
    its peak for the life of the process; the system allocator returns it. Skipped when the
    user chose a pool with ARROW_DEFAULT_MEMORY_POOL (the `delta-ops` process's own choice
    of it, `delta_ops.cli.OWN_PROCESS_ENVIRONMENT`, is no user's).

    A process forked from this one (a worker of an operation's map, such as a compaction's
    rewrite) goes back to mimalloc: it ends with its map, taking what mimalloc kept along,
    and decoding thousands of small parquet files costs ~10% less CPU with it.
    """
    global _FORK_HOOK_REGISTERED
    if not chosen_by_user("ARROW_DEFAULT_MEMORY_POOL"):
        import pyarrow as pa

        pa.set_memory_pool(pa.system_memory_pool())
        if not _FORK_HOOK_REGISTERED:  # once a process, however often `main` runs
            os.register_at_fork(after_in_child=_mimalloc_in_forked_worker)
            _FORK_HOOK_REGISTERED = True


_FORK_HOOK_REGISTERED = False


def _mimalloc_in_forked_worker() -> None:
    import pyarrow as pa

    try:
        pa.set_memory_pool(pa.mimalloc_memory_pool())
    except NotImplementedError:  # a pyarrow built without mimalloc
        pass


def main(argv: Sequence[str] | None = None, *, own_process: bool = False) -> int:
    """Run one command; its exit code. `own_process`: the process is this command's alone
    (the `delta-ops` entry point, `run`), not a caller's that goes on (tests)."""
    use_system_allocator()
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(_command(argv))
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # usage errors (one line, printed), --help, --version
        return exit_.code if isinstance(exit_.code, int) else 2
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="delta-ops: %(levelname)s: %(message)s",
    )
    if own_process:
        # what is loaded by now (modules, the parser) lives as long as the process: the
        # collector no longer walks it in the collections the command's own objects trigger
        # (a compaction of 10,000 files: one full collection, ~10 ms less)
        gc.freeze()
        if getattr(args, "engine", "local") != "spark":
            keep_pandas_unloaded()
    try:
        code: int = args.func(args)
        return code
    except _ReaderGone:
        # the reader went away (`delta-ops inspect t | head -c 100`): it got a cut-off result,
        # which must not look like success; quiet, exit 1 as Python's SIGPIPE notes advise
        _discard(sys.stdout)
        return 1
    except (InvalidValue, InvalidLocation, MissingExtra, NotADeltaTable, VersionNotFound) as exc:
        # the user's input is wrong (a value, a location, a store without its extra): a usage
        # error, exit 2 as argparse's own
        print(f"delta-ops: error: {exc}", file=sys.stderr)
        return 2
    except DeltaOpsError as exc:
        print(f"delta-ops: error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"delta-ops: error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - a bug: one line (a traceback on request)
        _report_internal_error(args.command, exc, args.verbose)
        return EXIT_INTERNAL_ERROR


def _report_internal_error(command: str, exc: Exception, verbose: bool) -> None:
    """One line on stderr for an exception delta-ops did not expect (a bug, here or in a
    library under it), naming the operation, the file it was reading if known, and the
    exception; the traceback too with -v or DELTA_OPS_TRACEBACK=1."""
    show = verbose or os.environ.get("DELTA_OPS_TRACEBACK", "") not in ("", "0")
    if show:
        traceback.print_exception(exc, file=sys.stderr)
    path = file_being_read(exc)
    where = f" while reading {path}" if path else ""
    message = " ".join(str(exc).split())  # one line, whatever the exception says
    what = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    how = (
        "please report it, with the traceback above, at the project's issue tracker"
        if show
        else "run with -v, or set DELTA_OPS_TRACEBACK=1, for the traceback;"
        " please report it at the project's issue tracker"
    )
    print(f"delta-ops: internal error in {command}{where}: {what} ({how})", file=sys.stderr)


def run() -> NoReturn:
    """The `delta-ops` process: `main`, then `exit_now` with its code."""
    exit_now(main(own_process=True))


def exit_now(code: int) -> NoReturn:
    """End the process once the command's work and output are done, without the interpreter's
    teardown: freeing every object of a loaded table one by one took ~50 ms after compacting
    10,000 files, and the operating system reclaims the memory at once. Exit handlers still
    run (logging's flush, a Spark gateway's shutdown) and the output is flushed first. Under a
    profiler or tracer (pyinstrument, cProfile, coverage), which reports at teardown, the
    process exits the usual way. Output that cannot be delivered (its reader went away) makes
    a successful code 1: the reader got a cut-off result."""
    traced = sys.getprofile() is not None or sys.gettrace() is not None
    if not traced:
        atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        if stream is None:  # started with that descriptor closed: nothing to deliver
            continue
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: nothing left to deliver
            code = code or 1
            _discard(stream)
    if traced:
        sys.exit(code)
    os._exit(code)
