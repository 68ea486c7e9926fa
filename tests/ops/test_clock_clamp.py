"""A future `now` never makes a write more destructive than the real clock allows (issue 11).

`--now` plans "as of" a moment; for every destructive decision it is clamped to the wall
clock: checkpoint tombstone and `txn` expiry, the log-cleanup cutoff (vacuum's window is
covered in test_vacuum_window.py).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from delta_ops import cli
from delta_ops.ops.checkpoint import execute_checkpoint, plan_checkpoint
from delta_ops.ops.cleanup import execute_cleanup, plan_cleanup
from delta_ops.table.snapshot import load_snapshot
from tests.support import log_builder as lb

DAY = 86_400_000


def _now() -> int:
    return time.time_ns() // 1_000_000


def test_a_future_now_keeps_tombstones_and_txns_the_real_clock_keeps(tmp_path: Path) -> None:
    table = tmp_path / "t"
    hour_ago = _now() - 3_600_000
    config = {"delta.setTransactionRetentionDuration": "interval 1 day"}
    lb.write_commit(table, 0, [lb.protocol(), lb.metadata(config), lb.add("a.parquet")])
    lb.write_commit(
        table,
        1,
        [
            lb.remove("a.parquet", deletion_timestamp=hour_ago),
            {"txn": {"appId": "ingest", "version": 7, "lastUpdated": hour_ago}},
        ],
    )
    next_month = _now() + 30 * DAY
    plan = plan_checkpoint(load_snapshot(table), next_month)
    assert (plan.expired_tombstones, plan.expired_txns) == (0, 0)
    assert plan.requested_now_ms == next_month and plan.now_ms <= _now()
    execute_checkpoint(plan)
    after = load_snapshot(table)
    assert after.tombstones.column("path").to_pylist() == ["a.parquet"]
    assert after.txns["ingest"].version == 7  # an idempotent writer will not write twice


def test_a_future_now_keeps_log_younger_than_the_retention(tmp_path: Path, capsys: object) -> None:
    table = tmp_path / "t"
    lb.write_commit(table, 0, [lb.protocol(), lb.metadata(), lb.add("a.parquet")])
    for v in range(1, 4):
        lb.write_commit(table, v, [lb.add(f"f{v}.parquet")])
    execute_checkpoint(plan_checkpoint(load_snapshot(table), _now()))
    lb.write_commit(table, 4, [lb.add("f4.parquet")])
    ten_days_ago = (_now() - 10 * DAY) / 1000
    for commit in (table / "_delta_log").glob("*.json"):
        os.utime(commit, (ten_days_ago, ten_days_ago))  # inside the 30-day log retention
    before = sorted(p.name for p in (table / "_delta_log").iterdir())

    plan = plan_cleanup(load_snapshot(table), _now() + 365 * DAY)
    assert plan.deleted == () and plan.requested_now_ms is not None
    execute_cleanup(plan)
    far = str(_now() + 365 * DAY) + "ms"
    assert cli.main(["cleanup", str(table), "--now", far, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)  # type: ignore[attr-defined]
    assert out["deleted"] == []
    assert sorted(p.name for p in (table / "_delta_log").iterdir()) == before
