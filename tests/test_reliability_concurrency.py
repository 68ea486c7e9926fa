"""Concurrency in real processes: writers committing while our maintenance runs (issue 11).

Appender processes commit through our Transaction API while other processes run vacuum (forced
zero retention, the most aggressive setting), checkpoints and log cleanup in a loop, and while
two of the same op run at once. Afterwards every committed append is in the table, every file
the latest version references exists (`deltalake` reads it), and no process failed.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa

from delta_ops.table.snapshot import load_snapshot
from delta_ops.table.writer import write_arrow
from tests.support import REPO, deltalake_rows

_APPEND = """
import sys, time
import pyarrow as pa
from delta_ops.table.writer import write_arrow
table, worker, n, start = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
while time.time() < start:
    time.sleep(0.001)
for i in range(n):
    write_arrow(table, pa.table({"id": pa.array([worker * 1000 + i], pa.int64())}))
print("ok")
"""

_MAINTAIN = """
import sys, time
from delta_ops.clock import now_ms
from delta_ops.ops.checkpoint import checkpoint
from delta_ops.ops.cleanup import execute_cleanup, plan_cleanup
from delta_ops.ops.vacuum import execute_vacuum, plan_vacuum
from delta_ops.table.snapshot import load_snapshot
table, op, until = sys.argv[1], sys.argv[2], float(sys.argv[3])
runs = 0
while time.time() < until:
    if op == "vacuum":
        plan = plan_vacuum(load_snapshot(table), now_ms(), retention_ms=0, force=True)
        execute_vacuum(plan)
    elif op == "checkpoint":
        checkpoint(table)
    else:
        execute_cleanup(plan_cleanup(load_snapshot(table), now_ms(), retention_ms=0))
    runs += 1
print(runs)
"""


def _spawn(code: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_appends_land_and_read_while_vacuum_checkpoint_and_cleanup_run_twice_each(
    tmp_path: Path,
) -> None:
    table = tmp_path / "t"
    write_arrow(table, pa.table({"id": pa.array([-1], pa.int64())}))
    start = time.time() + 2.0
    until = start + 6.0
    writers = [_spawn(_APPEND, str(table), str(w), "8", str(start)) for w in range(4)]
    maintainers = [
        _spawn(_MAINTAIN, str(table), op, str(until))
        for op in ("vacuum", "vacuum", "checkpoint", "checkpoint", "cleanup", "cleanup")
    ]
    outputs = [(p, *p.communicate(timeout=240)) for p in writers + maintainers]
    failed = [(p.args[3:], err[-1500:]) for p, _, err in outputs if p.returncode != 0]
    assert failed == []
    runs = [int(out.strip()) for p, out, _ in outputs[len(writers) :]]
    assert all(r > 0 for r in runs), runs
    expected = sorted([-1] + [w * 1000 + i for w in range(4) for i in range(8)])
    assert sorted(r["id"] for r in deltalake_rows(table)) == expected
    snapshot = load_snapshot(table)
    missing = [p for p in snapshot.files.column("path").to_pylist() if not (table / p).exists()]
    assert missing == []
