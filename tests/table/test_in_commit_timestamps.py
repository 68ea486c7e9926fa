"""Tables with in-commit timestamps: every commit of ours carries one, monotonic (issue 17).

Delta 4 and Databricks keep `inCommitTimestamp` in each commit's first action so that time
travel by timestamp does not depend on file modification times. A commit of ours on such a
table must carry `max(now, previous + 1)`, or readers would see time go backwards.
"""

from __future__ import annotations

import itertools
import json
import os
import time
from pathlib import Path

import pyarrow as pa

from delta_ops.clock import fixed_wall_clock
from delta_ops.log.file_names import checksum_file_name, commit_file_name
from delta_ops.ops.checkpoint import checkpoint
from delta_ops.ops.cleanup import execute_cleanup, plan_cleanup
from delta_ops.ops.vacuum import execute_vacuum, plan_vacuum
from delta_ops.table.commit_times import version_at
from delta_ops.table.scan import read_table
from delta_ops.table.snapshot import load_head, load_snapshot
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


DAY = 86_400_000


def _set_mtime(path: Path, when_ms: int) -> None:
    os.utime(path, ns=(when_ms * 1_000_000, when_ms * 1_000_000))


def _commit(table: Path, version: int) -> Path:
    return table / "_delta_log" / commit_file_name(version)


def _enable_midway(table: Path, enabled_at_ms: int) -> int:
    """Enable in-commit timestamps in a new commit, as Delta Spark does (enablement version
    and timestamp recorded in the same metaData); returns its version."""
    snapshot = load_snapshot(table)
    version = snapshot.version + 1
    metadata = snapshot.metadata.to_action()
    metadata["configuration"] = {
        **metadata.get("configuration", {}),
        "delta.enableInCommitTimestamps": "true",
        "delta.inCommitTimestampEnablementVersion": str(version),
        "delta.inCommitTimestampEnablementTimestamp": str(enabled_at_ms),
    }
    protocol = snapshot.protocol.with_features("inCommitTimestamp").to_action()
    info = {"timestamp": enabled_at_ms, "inCommitTimestamp": enabled_at_ms, "operation": "SET"}
    lines = [{"commitInfo": info}, {"protocol": protocol}, {"metaData": metadata}]
    _commit(table, version).write_text("".join(json.dumps(a) + "\n" for a in lines))
    return version


def _mixed_table(tmp_path: Path, now: int) -> Path:
    """v0, v1 by file time (10 and 9 days ago); v2 enables in-commit timestamps 5 days ago;
    v3 4 days ago. The files of v2 and v3 say 20 days ago: they disagree with the commits."""
    table = tmp_path / "t"
    for n in range(2):
        write_arrow(table, pa.table({"id": pa.array([n], pa.int64())}))
    _set_mtime(_commit(table, 0), now - 10 * DAY)
    _set_mtime(_commit(table, 1), now - 9 * DAY)
    _enable_midway(table, now - 5 * DAY)
    with fixed_wall_clock(now - 4 * DAY):
        write_arrow(table, pa.table({"id": pa.array([3], pa.int64())}))
    for version in (2, 3):
        _set_mtime(_commit(table, version), now - 20 * DAY)
    return table


def test_time_travel_by_timestamp_follows_the_protocols_rules_across_enablement(
    tmp_path: Path,
) -> None:
    now = time.time_ns() // 1_000_000
    table = _mixed_table(tmp_path, now)
    assert (
        json.loads(_commit(table, 3).read_text().splitlines()[0])["commitInfo"]["inCommitTimestamp"]
        == now - 4 * DAY
    )
    head = load_head(table)
    expected = {
        now - 11 * DAY: None,  # before the first commit
        now - 10 * DAY: 0,  # exactly at v0's file time
        now - 9 * DAY + 1: 1,
        now - 6 * DAY: 1,  # before enablement: only versions before it, by file time
        now - 5 * DAY: 2,  # at enablement: v2's in-commit timestamp, not its old file time
        now - 4 * DAY - 1: 2,
        now: 3,
    }
    for at, version in expected.items():
        assert version_at(head, at) == version, (now - at) / DAY
        assert version_at(load_snapshot(table), at) == version
    # after a checkpoint the older commits are read from their files: same answers
    checkpoint(table)
    assert {at: version_at(load_head(table), at) for at in expected} == expected


def test_cleanup_cutoff_uses_in_commit_timestamps_when_file_times_are_fresh(
    tmp_path: Path,
) -> None:
    # A copied table: every file is new, but the commits say versions 0-3 are two months old.
    now = time.time_ns() // 1_000_000
    table = tmp_path / "t"
    for n, age in enumerate((60, 59, 58, 57)):
        with fixed_wall_clock(now - age * DAY):
            write_arrow(
                table,
                pa.table({"id": pa.array([n], pa.int64())}),
                configuration=ICT if n == 0 else None,
            )
            if n == 2:
                checkpoint(table)
    with fixed_wall_clock(now - DAY):
        write_arrow(table, pa.table({"id": pa.array([4], pa.int64())}))
        checkpoint(table)
    write_arrow(table, pa.table({"id": pa.array([5], pa.int64())}))
    plan = plan_cleanup(load_head(table), now, retention_ms=30 * DAY)
    log = "_delta_log/"
    assert sorted(plan.deleted) == sorted(
        [commit_file_name(v) for v in range(4)]
        + [checksum_file_name(v) for v in range(4)]
        + ["00000000000000000002.checkpoint.parquet"]
    ), plan.to_dict()
    assert plan.boundary_checkpoint_version == 4
    execute_cleanup(plan)
    assert not (table / log / commit_file_name(3)).exists()
    assert sorted(r["id"] for r in deltalake_rows(table)) == list(range(6))
    assert sorted(r["id"] for r in read_table(load_snapshot(table, 4)).to_pylist()) == list(
        range(5)
    )


def test_cleanup_keeps_commits_whose_in_commit_timestamps_are_recent_despite_old_files(
    tmp_path: Path,
) -> None:
    # The opposite disagreement: the commits are from today, their files say 60 days ago
    # (a restored backup). By file times everything before the checkpoint would go; the
    # versions are inside the retention by the times readers travel by, so nothing may.
    now = time.time_ns() // 1_000_000
    table = tmp_path / "t"
    write_arrow(table, pa.table({"id": pa.array([0], pa.int64())}), configuration=ICT)
    for n in range(1, 4):
        write_arrow(table, pa.table({"id": pa.array([n], pa.int64())}))
    checkpoint(table)
    write_arrow(table, pa.table({"id": pa.array([4], pa.int64())}))
    for path in (table / "_delta_log").iterdir():
        _set_mtime(path, now - 60 * DAY)
    plan = plan_cleanup(load_head(table), now, retention_ms=30 * DAY)
    assert plan.deleted == (), plan.to_dict()


def test_cleanup_mixes_file_times_before_enablement_with_commit_times_after(
    tmp_path: Path,
) -> None:
    now = time.time_ns() // 1_000_000
    table = _mixed_table(tmp_path, now)  # v0-v1 by file time 10/9 days ago, v2-v3 recent ICTs
    checkpoint(table)  # at v3
    write_arrow(table, pa.table({"id": pa.array([4], pa.int64())}))
    checkpoint(table)  # at v4
    write_arrow(table, pa.table({"id": pa.array([5], pa.int64())}))
    # 7 days: v0-v1 (file times) are out, v2 (ICT 5 days ago, file 20 days ago) is in
    plan = plan_cleanup(load_head(table), now, retention_ms=7 * DAY)
    assert plan.deleted == (), plan.to_dict()  # no checkpoint right after v1 to cut at
    # 3 days: v2 and v3 are out by their commits too; the cut is at the v4 checkpoint
    plan = plan_cleanup(load_head(table), now, retention_ms=3 * DAY)
    assert plan.boundary_checkpoint_version == 4
    assert set(plan.deleted) >= {commit_file_name(v) for v in range(4)}
