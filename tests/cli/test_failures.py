"""How the `delta-ops` command fails: exit codes and the one line on stderr when its reader goes
away, a data file is missing, or delta-ops itself has a bug."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from delta_ops.cli import main
from delta_ops.table.snapshot import load_snapshot
from tests.support import TABLES
from tests.support import log_builder as lb
from tests.support.rewrite_support import dv_table


def _table_with_many_files(root: Path, files: int) -> Path:
    """A table whose log lists `files` files (inspect reads only the log)."""
    table = root / "many"
    adds = [lb.add(f"part-{i:05d}-{'x' * 60}.snappy.parquet") for i in range(files)]
    lb.write_commit(table, 0, [lb.commit_info(), lb.protocol(), lb.metadata(), *adds])
    return table


@pytest.mark.parametrize(
    "output",
    [
        "bigger than the pipe",  # the result's print fails (the command's own path)
        "within stdout's buffer",  # the final flush fails (exit_now)
    ],
)
def test_a_reader_that_goes_away_gets_exit_1_and_no_traceback(tmp_path, output):
    """`delta-ops inspect T --files --json | head -c 100`: the result was cut off, so the
    command must not report success (Python's `signal` docs: exit 1 on a broken pipe)."""
    if output == "bigger than the pipe":
        table = _table_with_many_files(tmp_path, 4000)  # ~350 kB of JSON, pipes hold 64 kB
        command = ["inspect", str(table), "--files", "--json"]
    else:
        command = ["inspect", str(TABLES / "delta-rs/simple_table"), "--json"]
    # buffered stdout whatever the environment says: a small result then waits in the buffer
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    child = subprocess.Popen(
        [sys.executable, "-m", "delta_ops.cli", *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert child.stdout is not None and child.stderr is not None
    if output == "bigger than the pipe":
        assert len(child.stdout.read(100)) == 100
    child.stdout.close()  # before the command is done: it starts in far more than no time
    stderr = child.stderr.read().decode()
    assert child.wait(timeout=60) == 1
    assert stderr == ""


def _sha256_of_every_file(root: Path) -> dict[str, str]:
    """Every file under `root` and the sha256 of its bytes, read now (never cached)."""
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


@pytest.mark.parametrize("command", ["compact", "purge"])
def test_a_missing_data_file_says_what_to_do_and_changes_nothing(tmp_path, capsys, command):
    table = dv_table(tmp_path)  # two small files, both with deletion vectors
    missing = load_snapshot(table).files.column("path")[0].as_py()
    (table / missing).unlink()
    before = _sha256_of_every_file(table)
    code = main([command, str(table)])
    out, err = capsys.readouterr()
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and err.startswith(f"delta-ops: error: {missing}: ")
    assert "missing from storage" in err and "restore it from a backup" in err
    assert "`delta-ops repair`" in err
    assert _sha256_of_every_file(table) == before
    # what the message says to do works: the repair (forced: half the table is gone) removes
    # the file, and the command that failed runs
    assert main(["repair", str(table), "--force"]) == 0
    assert main([command, str(table)]) == 0


HINT = (
    "(run with -v, or set DELTA_OPS_TRACEBACK=1, for the traceback;"
    " please report it at the project's issue tracker)"
)


def _inspect_fails_with(monkeypatch, exc: BaseException) -> None:
    """`inspect` raises `exc` once it has loaded the table (a bug in the summary)."""
    from delta_ops.service import inspect  # the CLI imports it when the command runs

    def broken(*args, **kwargs):
        raise exc

    monkeypatch.setattr(inspect, "summarize", broken)


def test_an_internal_error_is_one_line_and_exit_70(capsys, monkeypatch):
    monkeypatch.delenv("DELTA_OPS_TRACEBACK", raising=False)
    _inspect_fails_with(monkeypatch, KeyError("boom"))
    code = main(["inspect", str(TABLES / "delta-rs/simple_table")])
    out, err = capsys.readouterr()
    assert code == 70 and out == ""
    assert err == f"delta-ops: internal error in inspect: KeyError: 'boom' {HINT}\n"
    assert "Traceback" not in err


@pytest.mark.parametrize("ask", ["DELTA_OPS_TRACEBACK=1", "-v"])
def test_the_traceback_of_an_internal_error_on_request(capsys, monkeypatch, ask):
    monkeypatch.delenv("DELTA_OPS_TRACEBACK", raising=False)
    if ask == "-v":
        flags = ["-v"]
    else:
        flags = []
        monkeypatch.setenv("DELTA_OPS_TRACEBACK", "1")
    _inspect_fails_with(monkeypatch, KeyError("boom"))
    code = main([*flags, "inspect", str(TABLES / "delta-rs/simple_table")])
    err = capsys.readouterr().err
    assert code == 70
    assert err.startswith("Traceback (most recent call last):\n")
    assert "in broken\n" in err and "\nKeyError: 'boom'\n" in err
    last = err.splitlines()[-1]
    assert last.startswith("delta-ops: internal error in inspect: KeyError: 'boom' (please report")


def test_an_internal_error_names_the_file_being_read(capsys, monkeypatch, tmp_path):
    """An unexpected exception while storage reads a file names that file (here pyarrow's,
    with a message of two lines, still reported in one)."""
    import builtins

    import pyarrow as pa

    from delta_ops.storage import local_backend

    def open_(path, *args, **kwargs):
        if str(path).endswith("_last_checkpoint"):
            raise pa.ArrowInvalid("bad\nthing")
        return builtins.open(path, *args, **kwargs)

    monkeypatch.delenv("DELTA_OPS_TRACEBACK", raising=False)
    monkeypatch.setattr(local_backend, "open", open_, raising=False)
    table = TABLES / "delta-spark/dv-partitioned-with-checkpoint"
    code = main(["inspect", str(table)])
    err = capsys.readouterr().err
    hint = table / "_delta_log" / "_last_checkpoint"
    assert code == 70
    assert err == (
        f"delta-ops: internal error in inspect while reading {hint}: ArrowInvalid: bad thing"
        f" {HINT}\n"
    )


def test_a_keyboard_interrupt_is_no_internal_error(tmp_path):
    """Ctrl-C ends the command as Python does (killed by SIGINT: 130 in a shell)."""
    script = (
        "import sys, delta_ops.service.inspect as i\n"
        "def stop(*a, **k): raise KeyboardInterrupt\n"
        "i.summarize = stop\n"
        f"sys.argv = ['delta-ops', 'inspect', {str(TABLES / 'delta-rs/simple_table')!r}]\n"
        "from delta_ops.cli import run\n"
        "run()\n"
    )
    child = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False
    )
    assert child.returncode == -signal.SIGINT
    assert "internal error" not in child.stderr


def test_reading_notes_the_innermost_file_on_unexpected_exceptions_only():
    import pickle

    from delta_ops.errors import CorruptLog, file_being_read, reading

    with pytest.raises(KeyError) as bug, reading("outer"), reading("inner"):
        raise KeyError("boom")
    assert file_being_read(bug.value) == "inner"
    again = pickle.loads(pickle.dumps(bug.value))  # as from a worker process
    assert file_being_read(again) == "inner"
    with pytest.raises(CorruptLog) as known, reading("f"):
        raise CorruptLog("f", "bad")  # names its file itself
    assert file_being_read(known.value) is None
    with pytest.raises(KeyboardInterrupt) as stop, reading("f"):
        raise KeyboardInterrupt
    assert file_being_read(stop.value) is None


@pytest.mark.parametrize("option", ["retries=3", "no_such_option=1", "config_kwargs=x"])
def test_an_option_the_s3_client_refuses_is_a_usage_error(capsys, option):
    """s3fs passes options it does not know to botocore's session, which refused them only at
    the first request: an internal error (exit 70) for the user's typo, or for a value of the
    wrong type (a string where a dict belongs). The session is set up when the table is
    opened (no request: the endpoint is a closed port)."""
    code = main(
        ["inspect", "s3://bucket/table", "--storage-option", option]
        + [f"--storage-option={o}" for o in ("client=fsspec", "key=k", "secret=s")]
        + ["--storage-option", "endpoint_url=http://127.0.0.1:9"]
    )
    out, err = capsys.readouterr()
    name = option.split("=")[0]
    assert code == 2 and out == "" and len(err.splitlines()) == 1, err
    assert err.startswith("delta-ops: error: s3://bucket/table: the s3:// client refuses a")
    assert "internal error" not in err
    assert repr(name) in err or name == "config_kwargs"  # a wrong type: s3fs names no option
