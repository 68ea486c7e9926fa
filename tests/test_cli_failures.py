"""How the `delta-ops` command fails: exit codes and the one line on stderr when its reader goes
away, a data file is missing, or delta-ops itself has a bug."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import log_builder as lb
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
