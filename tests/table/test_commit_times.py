"""Commit times by file modification time, made monotonic as Delta Spark's history makes them.

Stores date files coarsely (S3's `LastModified` to the second), so commits written close
together share a time. Delta Spark dates a commit that is not later than the one before it a
millisecond after it, so each version has a time of its own and "the version current at T" is
the first of a run of equal times at T, not the last. Time travel, restore by timestamp and
vacuum's window start (`version_at(now - retention)`) all resolve through this rule: taking
the last of the run would move a vacuum's window start to a newer version and leave the
older one, which Delta promises to keep readable, unprotected.
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa

from delta_ops.log.file_names import commit_file_name
from delta_ops.table.commit_times import version_at
from delta_ops.table.snapshot import load_snapshot
from delta_ops.table.writer import write_arrow

T_MS = 1_700_000_000_000  # a whole second, as S3 would date all three commits


def _table_of_commits_dated_alike(tmp_path: Path) -> Path:
    table = tmp_path / "t"
    for ids in ([1], [2], [3]):
        write_arrow(table, pa.table({"id": pa.array(ids, pa.int64())}))
    for version in range(3):
        commit = table / "_delta_log" / commit_file_name(version)
        os.utime(commit, ns=(T_MS * 1_000_000, T_MS * 1_000_000))
    return table


def test_commits_dated_alike_are_a_millisecond_apart(tmp_path: Path) -> None:
    snapshot = load_snapshot(_table_of_commits_dated_alike(tmp_path))
    assert version_at(snapshot, T_MS - 1) is None
    assert version_at(snapshot, T_MS) == 0  # the first of the run, not the last
    assert version_at(snapshot, T_MS + 1) == 1
    assert version_at(snapshot, T_MS + 2) == 2
    assert version_at(snapshot, T_MS + 60_000) == 2


def test_a_later_commit_dated_earlier_comes_after_the_one_before_it(tmp_path: Path) -> None:
    """A writer whose clock runs behind: its commit is dated before the previous one's, and
    counts as a millisecond after it."""
    table = _table_of_commits_dated_alike(tmp_path)
    log = table / "_delta_log"
    os.utime(log / commit_file_name(1), ns=((T_MS + 10_000) * 1_000_000,) * 2)
    os.utime(log / commit_file_name(2), ns=((T_MS + 5_000) * 1_000_000,) * 2)
    snapshot = load_snapshot(table)
    assert version_at(snapshot, T_MS + 5_000) == 0  # v2's own time, but v1 is not yet
    assert version_at(snapshot, T_MS + 10_000) == 1
    assert version_at(snapshot, T_MS + 10_001) == 2
