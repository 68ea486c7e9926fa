"""A fuzzed log (issue 52.1): one log file of a real table replaced by hostile bytes, then a
read-only command of delta-ops run on it, and the outcome judged.

The targets (`TARGETS`) are the files a reader trusts: the latest commit, a classic checkpoint,
a V2 checkpoint's sidecar, ``_last_checkpoint``, a version checksum (``N.crc``) and a
deletion-vector file, each in a Delta Spark or kernel fixture table (tests/data/tables). The
commands (`COMMANDS`) load the table and plan: ``inspect`` (which also checks live deletion
vectors against their files), and the dry runs of vacuum, checkpoint and cleanup.

The judgement (`run_case`): the command exits 0 (the file was read or ignored, as Delta Spark
ignores a bad ``_last_checkpoint`` or checksum), or 1 or 2 with one line naming the file
(docs/guarantees.md: a log that is wrong exits 1); never 70 (an internal error: a bug), never
a traceback, and no file of the table changes (a dry run writes nothing, whatever it read).
A hang or runaway memory is the fuzzer's to catch (libFuzzer's ``-timeout`` and
``-rss_limit_mb``).

Two drivers use it: hypothesis strategies in ``tests/log/test_fuzz.py`` (a short run in CI,
longer under ``make soak``), and this module's :func:`main`, a coverage-guided run with atheris
(``make fuzz``, part of ``make soak``)::

    python -m tests.support.log_fuzz --seconds 600 --corpus build/fuzz-corpus

Every input that fails the judgement is saved under ``tests/data/fuzz_corpus/`` (first byte:
the target and command; the rest: the file's bytes), where ``tests/log/test_fuzz.py`` replays
each as a regression test.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from delta_ops.cli.commands import main as cli
from tests.support import DATA, TABLES, copy_fixture, file_digests

CORPUS = DATA / "fuzz_corpus"
#: the exit codes a command may end with on a hostile log (0: read or ignored as Delta Spark
#: does; 1: the log is wrong; 2: what was asked for is not there)
ACCEPTED = (0, 1, 2)


@dataclass(frozen=True)
class Target:
    """One log file of a fixture table that the fuzzer replaces."""

    kind: str
    table: str  # a fixture under tests/data/tables
    file: str  # table-relative


TARGETS = (
    Target(
        "commit",
        "delta-spark/dv-partitioned-with-checkpoint",
        "_delta_log/00000000000000000015.json",
    ),
    Target(
        "checkpoint",
        "delta-spark/dv-partitioned-with-checkpoint",
        "_delta_log/00000000000000000010.checkpoint.parquet",
    ),
    Target(
        "last_checkpoint",
        "delta-spark/dv-partitioned-with-checkpoint",
        "_delta_log/_last_checkpoint",
    ),
    Target(
        "deletion_vector",
        "delta-spark/dv-partitioned-with-checkpoint",
        "deletion_vector_f34fad76-197a-4fd7-9382-f7773fc8eff9.bin",
    ),
    Target(
        "sidecar",
        "delta-spark/v2-checkpoint-parquet",
        "_delta_log/_sidecars/00000000000000000002.checkpoint.0000000001.0000000002."
        "055454d8-329c-4e0e-864d-7f867075af33.parquet",
    ),
    Target("crc", "kernel/crc-full", "_delta_log/00000000000000000000.crc"),
)
COMMANDS = (
    ("inspect", "--json"),
    ("vacuum", "--dry-run", "--json"),
    ("checkpoint", "--dry-run", "--json"),
    ("cleanup", "--dry-run", "--json"),
)


@dataclass(frozen=True)
class Outcome:
    code: int
    out: str
    err: str


class BaseTables:
    """Pristine copies of every target's fixture, made once; each case runs on a fresh copy."""

    def __init__(self, root: Path) -> None:
        self.root = root
        names = sorted({t.table for t in TARGETS})
        self.tables = {name: copy_fixture(name, root / "base") for name in names}

    def fresh(self, target: Target, scratch: Path) -> Path:
        table = scratch / "t"
        if table.exists():
            shutil.rmtree(table)
        shutil.copytree(self.tables[target.table], table)
        return table


def run_command(table: Path, command: tuple[str, ...]) -> Outcome:
    """A delta-ops command on `table`, in this process, its output captured."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli([command[0], str(table), *command[1:]])
    return Outcome(code, out.getvalue(), err.getvalue())


def judge(target: Target, outcome: Outcome, before: dict[str, str], after: dict[str, str]) -> None:
    """Raise AssertionError naming what is wrong with the outcome of a command on a table
    whose `target` file holds hostile bytes."""
    assert outcome.code in ACCEPTED, f"exit {outcome.code}: {outcome.err.strip()[-2000:]}"
    assert "Traceback" not in outcome.err, outcome.err[-2000:]
    if outcome.code != 0:
        lines = outcome.err.strip().splitlines()
        assert len(lines) == 1, f"not one line: {outcome.err[-2000:]}"
        assert Path(target.file).name in lines[0], f"the file is not named: {lines[0]}"
    assert after == before, "a dry run changed the table"


def decode(data: bytes) -> tuple[Target, tuple[str, ...], bytes]:
    """An input as the fuzzers give it: its first byte chooses the target and the command,
    the rest is the file's new content."""
    choice = data[0] if data else 0
    target = TARGETS[choice % len(TARGETS)]
    command = COMMANDS[(choice // len(TARGETS)) % len(COMMANDS)]
    return target, command, data[1:]


def encode(target: Target, command: tuple[str, ...], content: bytes) -> bytes:
    return bytes([TARGETS.index(target) + len(TARGETS) * COMMANDS.index(command)]) + content


def run_case(
    bases: BaseTables, scratch: Path, target: Target, command: tuple[str, ...], content: bytes
) -> Outcome:
    """Replace `target` with `content` in a fresh copy, run `command`, judge the outcome."""
    table = bases.fresh(target, scratch)
    (table / target.file).write_bytes(content)
    before = file_digests(table)
    outcome = run_command(table, command)
    judge(target, outcome, before, file_digests(table))
    return outcome


def save(data: bytes) -> Path:
    """Keep a failing input in the regression corpus (named by its digest)."""
    CORPUS.mkdir(parents=True, exist_ok=True)
    path = CORPUS / f"{hashlib.sha256(data).hexdigest()[:16]}.bin"
    path.write_bytes(data)
    return path


def seeds() -> list[bytes]:
    """Every target's original bytes, under every command: where mutation starts."""
    return [
        encode(target, command, (TABLES / target.table / target.file).read_bytes())
        for target in TARGETS
        for command in COMMANDS
    ]


def main(argv: list[str] | None = None) -> int:
    """A coverage-guided run with atheris for `--seconds`, its working corpus in `--corpus`;
    an input failing the judgement is saved to the regression corpus and ends the run."""
    parser = argparse.ArgumentParser(prog="python -m tests.support.log_fuzz")
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--corpus", type=Path, default=Path("build/fuzz-corpus"))
    args = parser.parse_args(argv)
    import atheris  # a dev dependency where it installs (Linux, CPython wheels)

    args.corpus.mkdir(parents=True, exist_ok=True)
    artifacts = args.corpus.parent / "fuzz-artifacts"  # libFuzzer's copy of a failing input
    artifacts.mkdir(parents=True, exist_ok=True)
    for data in seeds():
        (args.corpus / f"seed-{hashlib.sha256(data).hexdigest()[:16]}").write_bytes(data)
    work = Path(tempfile.mkdtemp(prefix="delta-ops-fuzz-"))
    bases = BaseTables(work)

    def one_input(data: bytes) -> None:
        target, command, content = decode(data)
        try:
            run_case(bases, work / "case", target, command, content)
        except BaseException:
            print(f"saved {save(data)}", file=sys.stderr)
            raise

    atheris.instrument_all()  # coverage of every loaded Python function: delta_ops' among them
    atheris.Setup(
        [
            sys.argv[0],
            str(args.corpus),
            f"-max_total_time={args.seconds}",
            "-timeout=30",
            "-rss_limit_mb=3072",
            "-print_final_stats=1",
            f"-artifact_prefix={artifacts}/",
        ],
        one_input,
    )
    atheris.Fuzz()
    return 0


if __name__ == "__main__":
    sys.exit(main())
