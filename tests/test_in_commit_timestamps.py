"""Tables with in-commit timestamps: every commit of ours carries one, monotonic (issue 17).

Delta 4 and Databricks keep `inCommitTimestamp` in each commit's first action so that time
travel by timestamp does not depend on file modification times. A commit of ours on such a
table must carry `max(now, previous + 1)`, or readers would see time go backwards.
"""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path

import pyarrow as pa

from delta_ops.clock import fixed_wall_clock
from delta_ops.ops.checkpoint import checkpoint
from delta_ops.ops.vacuum import execute_vacuum, plan_vacuum
from delta_ops.table.snapshot import load_snapshot
from delta_ops.table.writer import write_arrow
from tests.support import deltalake_rows

ICT = {"delta.enableInCommitTimestamps": "true"}


def _first_actions(table: Path) -> list[dict]:
    out = []
    for commit in sorted((table / "_delta_log").glob("*.json")):
        out.append(json.loads(commit.read_text().splitlines()[0]))
    return out


def test_every_commit_carries_a_monotonic_in_commit_timestamp(tmp_path: Path) -> None:
    table = tmp_path / "t"
    now = time.time_ns() // 1_000_000
    write_arrow(table, pa.table({"id": pa.array([1], pa.int64())}), configuration=ICT)
    assert "inCommitTimestamp" in (load_snapshot(table).protocol.writer_features or ())
    write_arrow(table, pa.table({"id": pa.array([2], pa.int64())}))
    with fixed_wall_clock(now - 3_600_000):  # a writer whose clock runs an hour behind
        write_arrow(table, pa.table({"id": pa.array([3], pa.int64())}))
    (table / "orphan.parquet").write_bytes(b"x")
    with fixed_wall_clock(time.time_ns() // 1_000_000 + 10):
        plan = plan_vacuum(
            load_snapshot(table),
            time.time_ns() // 1_000_000,
            retention_ms=0,
            force=True,
            in_flight_grace_ms=0,
        )
        execute_vacuum(plan)  # VACUUM START / END: commits on an ICT table are allowed now

    firsts = _first_actions(table)
    assert len(firsts) == 5 and all(list(a) == ["commitInfo"] for a in firsts)
    stamps = [a["commitInfo"]["inCommitTimestamp"] for a in firsts]
    assert all(later > earlier for earlier, later in itertools.pairwise(stamps)), stamps
    assert stamps[2] == stamps[1] + 1  # the slow clock's commit still moves time forward
    snapshot = load_snapshot(table)
    assert [snapshot.commit_timestamp(v) for v in range(5)] == stamps
    assert sorted(r["id"] for r in deltalake_rows(table)) == [1, 2, 3]
    assert not (table / "orphan.parquet").exists()


def test_tables_without_the_property_get_none(tmp_path: Path) -> None:
    table = tmp_path / "t"
    write_arrow(table, pa.table({"id": pa.array([1], pa.int64())}))
    write_arrow(table, pa.table({"id": pa.array([2], pa.int64())}))
    assert all("inCommitTimestamp" not in a["commitInfo"] for a in _first_actions(table))


def test_vacuum_window_starts_by_in_commit_timestamps_not_file_times(tmp_path: Path) -> None:
    # The files were copied today (fresh mtimes), but the commits say versions 0-2 are 40 days
    # old: the window of a 7-day vacuum starts at version 2, which time travel to a week ago
    # reads, as the in-commit timestamps (not the mtimes) say.
    table = tmp_path / "t"
    day = 86_400_000
    now = time.time_ns() // 1_000_000
    with fixed_wall_clock(now - 40 * day):
        write_arrow(table, pa.table({"id": pa.array([1], pa.int64())}), configuration=ICT)
        write_arrow(table, pa.table({"id": pa.array([2], pa.int64())}))
        write_arrow(table, pa.table({"id": pa.array([3], pa.int64())}))
    write_arrow(table, pa.table({"id": pa.array([4], pa.int64())}))
    snapshot = load_snapshot(table)
    plan = plan_vacuum(snapshot, now, retention_ms=7 * day)
    assert plan.latest_commit_outside_retention == 2
    assert plan_vacuum(snapshot, now, retention_ms=50 * day).latest_commit_outside_retention is None
    # after a checkpoint the older commits' timestamps are read from their files
    checkpoint(table)
    assert load_snapshot(table).segment.checkpoint_version == 3
    again = plan_vacuum(load_snapshot(table), now, retention_ms=7 * day)
    assert again.latest_commit_outside_retention == 2
