"""Commits under contention and against a concurrent vacuum (issue 11).

Real processes race for versions through the filesystem's exclusive create; every blind append
must land (they never logically conflict), and a commit must never reference a file a vacuum
deleted while it was being written.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest

from delta_ops.clock import fixed_wall_clock
from delta_ops.errors import ConcurrentModification
from delta_ops.ops.vacuum import execute_vacuum, plan_vacuum
from delta_ops.table.snapshot import load_snapshot
from delta_ops.table.transaction import Transaction
from delta_ops.table.writer import write_arrow
from tests.support import REPO, add_action, deltalake_rows


def _ids(n: int, start: int = 0) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64())})


def _now() -> int:
    return time.time_ns() // 1_000_000


def test_a_commit_never_references_a_file_a_vacuum_deleted(tmp_path: Path) -> None:
    # A slow writer staged its file two minutes ago (Spark stamps task-start times), older than
    # vacuum's one-minute in-flight grace; a forced zero-retention vacuum deletes it; the late
    # commit must fail, retryably, instead of committing a dangling file.
    table = tmp_path / "t"
    write_arrow(table, _ids(3))
    snapshot = load_snapshot(table)
    txn = Transaction(snapshot, operation="WRITE")
    txn.add_action(add_action(table, "slow.parquet", 2, 100))
    two_minutes_ago = (_now() - 120_000) / 1000
    os.utime(table / "slow.parquet", (two_minutes_ago, two_minutes_ago))

    result = execute_vacuum(plan_vacuum(load_snapshot(table), _now(), retention_ms=0, force=True))
    assert result.deleted == ("slow.parquet",)
    with pytest.raises(ConcurrentModification, match="slow.parquet") as info:
        txn.commit()
    assert info.value.retryable
    after = load_snapshot(table)
    assert after.version == 2  # VACUUM START and END only
    assert sorted(r["id"] for r in deltalake_rows(table)) == [0, 1, 2]


def test_a_commit_after_a_vacuum_that_spared_its_file_lands(tmp_path: Path) -> None:
    table = tmp_path / "t"
    write_arrow(table, _ids(3))
    (table / "orphan.parquet").write_bytes(b"x")
    month_ago = (_now() - 30 * 86_400_000) / 1000
    os.utime(table / "orphan.parquet", (month_ago, month_ago))
    txn = Transaction(load_snapshot(table), operation="WRITE")
    txn.add_action(add_action(table, "fresh.parquet", 2, 100))  # young: inside the grace

    with fixed_wall_clock(_now()):
        plan = plan_vacuum(load_snapshot(table), _now(), retention_ms=0, force=True)
    assert [c.path for c in plan.candidates] == ["orphan.parquet"]
    execute_vacuum(plan)
    assert txn.commit().version == 3
    assert sorted(r["id"] for r in deltalake_rows(table)) == [0, 1, 2, 100, 101]


_APPENDER = """
import json, sys, time
import pyarrow as pa, pyarrow.parquet as pq
from pathlib import Path
from delta_ops.table.snapshot import load_snapshot
from delta_ops.table.transaction import Transaction

table, worker, appends, files_per_commit, start_at = (
    Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
)
while time.time() < start_at:
    time.sleep(0.001)
for i in range(appends):
    txn = Transaction(load_snapshot(table), operation="WRITE")
    for f in range(files_per_commit):
        first = (worker * 1000 + i) * 10_000 + f
        name = f"w{worker}-c{i}-f{f}.parquet"
        if f == 0 or files_per_commit < 50:
            pq.write_table(pa.table({"id": pa.array([first], pa.int64())}), table / name)
        else:
            (table / name).write_bytes((table / f"w{worker}-c{i}-f0.parquet").read_bytes())
        size = (table / name).stat().st_size
        txn.add_action({"add": {"path": name, "partitionValues": {}, "size": size,
                                "modificationTime": 0, "dataChange": True,
                                "stats": json.dumps({"numRecords": 1})}})
    txn.commit()
print("ok")
"""


def _race(
    table: Path, workers: list[tuple[int, int, int]]
) -> list[subprocess.CompletedProcess[str]]:
    """Start (worker, appends, files per commit) processes together; wait for all."""
    start_at = str(time.time() + 2.0)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _APPENDER, str(table), str(w), str(n), str(files), start_at],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w, n, files in workers
    ]
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=240)
        out.append(subprocess.CompletedProcess(p.args, p.returncode, stdout, stderr))
    return out


def test_twelve_concurrent_blind_appenders_all_land(tmp_path: Path) -> None:
    table = tmp_path / "t"
    write_arrow(table, _ids(1, -1))
    results = _race(table, [(w, 4, 1) for w in range(12)])
    assert [r.returncode for r in results] == [0] * 12, [r.stderr[-800:] for r in results]
    snapshot = load_snapshot(table)
    assert snapshot.version == 48 and snapshot.num_files == 49
    assert len(deltalake_rows(table)) == 49


def test_a_bulk_commit_lands_while_small_appenders_race_it(tmp_path: Path) -> None:
    table = tmp_path / "t"
    write_arrow(table, _ids(1, -1))
    results = _race(table, [(0, 1, 4000)] + [(w, 5, 1) for w in range(1, 8)])
    assert [r.returncode for r in results] == [0] * 8, [r.stderr[-800:] for r in results]
    snapshot = load_snapshot(table)
    assert snapshot.version == 1 + 35 and snapshot.num_files == 1 + 4000 + 35
    assert len(deltalake_rows(table)) == 1 + 4000 + 35
