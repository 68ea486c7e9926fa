"""How the `delta-ops` command fails: exit codes and the one line on stderr when its reader goes
away, a data file is missing, or delta-ops itself has a bug."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from delta_ops.cli import main
from delta_ops.table.snapshot import load_snapshot
from tests import log_builder as lb
from tests.rewrite_support import dv_table
from tests.support import TABLES


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
    assert "repair" in err and "FSCK REPAIR TABLE" in err
    assert _sha256_of_every_file(table) == before
