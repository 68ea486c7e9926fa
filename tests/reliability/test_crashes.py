"""Crash and I/O fault injection at every storage call of every op (issues 11 and 27.d).

The history (`history`) is Delta Spark's deletion-vector table plus writes by `deltalake`,
dated so that old history (40 days) is past every retention and recent history inside them:
unexpired tombstones (one with a deletion vector), DV files only expired tombstones name, old
and young orphans, stale and running leftovers of crashed writes. What an op promises comes
from those dates alone (`History.inside`): the versions younger than the retention it uses
(vacuum: the file retention; cleanup: the log retention; the ops that delete nothing: every
version), plus the one time travel to the window's start reads.

Each op runs once uncrashed on each storage path, counting its writes, reads and listings; then
for each fault point it runs on a fresh copy with that fault:

* the fsspec path (`faultyfile://`): a crash before or after the k-th write;
* the local path users take (`local_faults`: temp file + link or replace, unlink, rmdir): a
  crash before or after the k-th write, or a torn write (a prefix of a temp file's bytes);
* the local path: the k-th read or directory listing failing with EIO (a listing at once or
  after half of its entries).

After the fault, and again after a re-run without faults, every promised version reads back
with its rows in `deltalake` (the latest in DuckDB too), our snapshot loads, no visible log file
is torn and the files every op must keep are there; after the re-run the end state equals the
uncrashed run's and the files the op must delete are gone.

CI sweeps a sample of the fault points chosen by the run's seed (`_points`: points of
different kinds of write, read or listing first; RELIABILITY_SEED replays it); ``make soak`` (HYPOTHESIS_PROFILE=soak) or CRASH_SWEEP=full
sweeps all of them. Real `kill -9`s of the CLI, and crashes of purge and compaction on the
Spark table as it is, complete the picture.

Two ops need a table to work on first (`Op.prepare`, on every fresh copy): `repair` finds a data
file of the last commit lost (the versions before it stay promised; the latest reads again,
without its rows, once repaired), `recompute-stats` finds the last two commits' files without
stats (one commit per file, so a crash can fall between them).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, PostCommitHookProperties, write_deltalake

from delta_ops.clock import fixed_wall_clock
from delta_ops.errors import CheckpointInProgress, InvalidValue
from delta_ops.layout.clustering import parse_column_list
from delta_ops.ops import cluster
from delta_ops.ops.checkpoint import checkpoint
from delta_ops.ops.checkpoint_writer import IN_PROGRESS_GRACE_MS
from delta_ops.ops.checksum import execute_checksum, plan_checksum
from delta_ops.ops.cleanup import execute_cleanup, plan_cleanup
from delta_ops.ops.cluster import execute_cluster, plan_cluster
from delta_ops.ops.compact import execute_compact, plan_compact
from delta_ops.ops.drop_feature import execute_drop_feature, plan_drop_feature
from delta_ops.ops.purge import execute_purge, plan_purge
from delta_ops.ops.recompute_stats import execute_recompute_stats, plan_recompute_stats
from delta_ops.ops.repair import execute_repair, plan_repair
from delta_ops.ops.restore import execute_restore, plan_restore
from delta_ops.ops.row_tracking import execute_enable_row_tracking, plan_enable_row_tracking
from delta_ops.ops.vacuum import execute_vacuum, plan_vacuum
from delta_ops.table.checksum import VersionChecksum, check_checksum
from delta_ops.table.snapshot import load_snapshot
from tests.support import (
    REPO,
    _row_key,
    copy_fixture,
    deltalake_rows,
    duckdb_connection,
    duckdb_rows,
    is_hadoop_checksum,
    read_each,
)
from tests.support.faults import (
    LISTING_FAULTS,
    WHEN,
    FaultPlan,
    InjectedCrash,
    InjectedIOError,
    faulty_options,
    faulty_url,
    local_faults,
)

# deltalake is only the independent writer here: no checkpoints or log cleanup of its own
NO_HOOKS = PostCommitHookProperties(create_checkpoint=False, cleanup_expired_logs=False)
HOUR = 3_600_000
DAY = 24 * HOUR
AGE_DAYS = 40  # old history is this old: past every default retention


def _now() -> int:
    return time.time_ns() // 1_000_000


def _rows(path: Path, version: int | None = None) -> list[tuple[Any, ...]]:
    data = DeltaTable(str(path), version=version).to_pyarrow_table()
    return sorted((r["id"], r["part"]) for r in data.to_pylist())


def _date_everything(path: Path, when_ms: int) -> None:
    """Make the whole table (files, commits and the timestamps inside them) `when_ms` old,
    one second apart per version so the log's times increase with its versions."""
    for file in path.rglob("*"):
        if not file.is_file():
            continue
        when = when_ms
        name = file.name
        if file.parent.name == "_delta_log" and name[:20].isdigit():
            when = when_ms + int(name[:20]) * 1000
            if name.endswith(".json"):
                actions = [json.loads(x) for x in file.read_text().splitlines() if x.strip()]
                for a in actions:
                    for kind, key in (
                        ("commitInfo", "timestamp"),
                        ("remove", "deletionTimestamp"),
                        ("add", "modificationTime"),
                    ):
                        if kind in a and key in a[kind]:
                            a[kind][key] = when
                file.write_text("".join(json.dumps(a) + "\n" for a in actions))
        os.utime(file, (when / 1000, when / 1000))


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The `kill -9` tests' table, a real history by `deltalake`: appends, a delete, an overwrite, more appends, an
    orphan, all of it 40 days old; then our checkpoint of version 3 (which drops the expired
    tombstones, as checkpoints do) and one fresh append."""
    path = tmp_path_factory.mktemp("pristine") / "t"

    def write(start: int, mode: str) -> None:
        ids = pa.array(range(start, start + 4), pa.int64())
        data = pa.table({"id": ids, "part": pa.array([0, 1, 0, 1])})
        write_deltalake(
            str(path), data, mode=mode, partition_by=["part"], post_commithook_properties=NO_HOOKS
        )

    write(0, "error")
    write(10, "append")
    DeltaTable(str(path)).delete("id < 2", post_commithook_properties=NO_HOOKS)
    write(20, "overwrite")
    write(30, "append")
    (path / "part=0" / "orphan.parquet").write_bytes(b"nobody references me")
    old = _now() - AGE_DAYS * DAY
    _date_everything(path, old)
    checkpoint(path, version=3)
    for written in path.glob("_delta_log/00000000000000000003.checkpoint*"):
        os.utime(written, (old / 1000 + 3, old / 1000 + 3))
    write(40, "append")
    return path


# ------------------------------------------------------------------ the rich history (27.d)
#: a real table by Delta Spark: 15 live files in 10 partitions, deletion vectors updated
#: over 16 commits (older DVs referenced only by tombstones), a checkpoint at version 10
DV_FIXTURE = "delta-spark/dv-partitioned-with-checkpoint"
LOG_RETENTION = 30 * DAY  # the table property defaults: delta.logRetentionDuration
FILE_RETENTION = 7 * DAY  # ... and delta.deletedFileRetentionDuration
FORCED_RETENTION = 0  # a forced vacuum that keeps only what the in-flight grace keeps


@dataclass(frozen=True)
class History:
    """The pristine table and what the sweep knows of it independently of delta-ops: when
    each version was committed (set by the builder), its rows (read by `deltalake`), the
    untracked files every op must keep and the files each op must delete."""

    path: Path
    now: int  # the moment every op runs "as of" (a past --now is honoured)
    times: dict[int, int]
    rows: dict[int, list[dict[str, Any]]]
    keep: tuple[str, ...]  # young orphans, a running write's staging folder, a young temp file
    gone: dict[str, tuple[str, ...]]  # op -> files that op deletes (and need not keep)

    @property
    def latest(self) -> int:
        return max(self.times)

    def version_at(self, when_ms: int) -> int | None:
        """The version time travel to `when_ms` reads: the newest committed at or before it."""
        return max((v for v, t in self.times.items() if t <= when_ms), default=None)

    def inside(self, retention_ms: int) -> list[int]:
        """Versions younger than the retention, and the one time travel to its start reads."""
        start = self.now - retention_ms
        young = {v for v, t in self.times.items() if t > start}
        at_start = self.version_at(start)
        return sorted(young | ({at_start} if at_start is not None else set()))


def _set_mtime(path: Path, when_ms: int) -> None:
    os.utime(path, ns=(when_ms * 1_000_000, when_ms * 1_000_000))


def _date_commit(path: Path, version: int, when_ms: int) -> None:
    """Commit `version` written at `when_ms`: the times inside it and its file's mtime."""
    commit = path / "_delta_log" / f"{version:020d}.json"
    actions = [json.loads(x) for x in commit.read_text().splitlines() if x.strip()]
    for a in actions:
        for kind, key in (
            ("commitInfo", "timestamp"),
            ("remove", "deletionTimestamp"),
            ("add", "modificationTime"),
        ):
            if kind in a:
                a[kind][key] = when_ms
    commit.write_text("".join(json.dumps(a) + "\n" for a in actions))
    _set_mtime(commit, when_ms)


def _commit_times(now: int) -> dict[int, int]:
    """Old history (40 days, past every default retention), one version just inside the log
    retention but before the next UTC midnight after its start (a cleanup cutoff a day late
    would take it), history between the two retentions, then inside the file retention: the
    first version there half a day inside (a vacuum window a day short would take the file it
    removed, which the version before it, the window's start, reads)."""
    log_start = now - LOG_RETENTION
    next_midnight = (log_start // DAY + 1) * DAY
    times = {v: now - AGE_DAYS * DAY + v * 1000 for v in range(9)}
    times[9] = log_start + max(1, (next_midnight - log_start) // 2)
    ages = {10: 20 * DAY, 11: 12 * DAY, 12: 10 * DAY, 13: FILE_RETENTION - 12 * HOUR}
    ages |= {14: 3 * DAY, 15: 2 * DAY, 16: DAY, 17: 2 * HOUR}
    times |= {v: now - age for v, age in ages.items()}
    return times


def _untracked(path: Path, relative: str, when_ms: int, data: bytes = b"untracked") -> str:
    target = path / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    _set_mtime(target, when_ms)
    return relative


def _dv_file(descriptor: dict[str, Any]) -> str:
    from delta_ops.protocol.deletion_vectors import DeletionVectorDescriptor

    relative = DeletionVectorDescriptor.from_dict(descriptor).relative_path()
    assert relative is not None
    return relative


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Iterator[History]:
    """Delta Spark's DV table (versions 0-15: deletion vectors written, replaced and
    removed), then an overwrite of one partition and an append by `deltalake` (16, 17), all
    dated (`_commit_times`): versions 0-8 forty days ago, 9 just inside the log retention,
    10-12 between the file and the log retention, 13-17 inside both (13-16 remove files:
    unexpired tombstones, one with a deletion vector). Data and DV files all look forty days
    old (a restored copy): only the log may protect them. Our checkpoints of versions 5 and
    15 join Spark's of version 10; the one of 15, written then, dropped the tombstones past
    the table's file retention (11 and 12's) that a 30-day vacuum's window still needs.

    Untracked files: old orphans (a data file, a DV file, a file alone in its directory, an
    empty directory), a Spark staging folder of a dead write and a stale temporary log file
    (all go, and the directories they leave empty); orphans younger than the in-flight grace
    (which alone keeps them from a forced vacuum with retention 0), a young temporary log file
    and the staging folder of a running write (one old file, one young) (all stay); an orphan
    an hour old (only the forced vacuum takes it).
    """
    path = copy_fixture(DV_FIXTURE, tmp_path_factory.mktemp("rich"))
    for crc in (path / "_delta_log").glob(".*crc"):
        crc.unlink()  # Hadoop checksums of the commits we are about to re-date
    part1 = pa.table(
        {
            "part": pa.array([1, 1, 1], pa.int32()),
            "col1": pa.array([1000, 1001, 1002], pa.int32()),
            "col2": pa.array(["x", "y", "z"]),
        }
    )
    write_deltalake(
        str(path),
        part1,
        mode="overwrite",
        predicate="part = 1",
        post_commithook_properties=NO_HOOKS,
    )
    extra = pa.table(
        {
            "part": pa.array([3, 10], pa.int32()),
            "col1": pa.array([2000, 2001], pa.int32()),
            "col2": pa.array(["p", "q"]),
        }
    )
    write_deltalake(str(path), extra, mode="append", post_commithook_properties=NO_HOOKS)

    now = _now()
    times = _commit_times(now)
    assert max(times) == DeltaTable(str(path)).version()
    old = now - AGE_DAYS * DAY
    dv_owners: dict[str, set[str]] = {}  # DV file -> "add" / "remove" of the actions naming it
    for version, when in times.items():
        _date_commit(path, version, when)
        for line in (path / "_delta_log" / f"{version:020d}.json").read_text().splitlines():
            action = json.loads(line)
            for kind in ("add", "remove"):
                dv = action.get(kind, {}).get("deletionVector")
                if dv and dv["storageType"] == "u":
                    dv_owners.setdefault(_dv_file(dv), set()).add(kind)
    for file in path.rglob("*"):
        if file.is_file() and "_delta_log" not in file.parts:
            _set_mtime(file, old)
    for version in (5, 15):
        with fixed_wall_clock(times[version] + 500, all_threads=True):
            checkpoint(path, version=version)
    for version in (5, 10, 15):
        for name in path.glob(f"_delta_log/{version:020d}.checkpoint*"):
            _set_mtime(name, times[version] + 500)
    assert json.loads((path / "_delta_log" / "_last_checkpoint").read_text())["version"] == 15
    _set_mtime(path / "_delta_log" / "_last_checkpoint", times[15] + 600)

    young = now - 10_000
    tmp = "_delta_log/.{:020d}.json.{}.tmp"
    an_hour_old = _untracked(path, "part=5/part-77778-an-hour-old.snappy.parquet", now - HOUR)
    keep = (
        an_hour_old,  # inside every retention but the forced vacuum's
        _untracked(path, "part=7/part-77777-in-flight.snappy.parquet", young),
        _untracked(path, "deletion_vector_7d9a2a0c-0000-4000-8000-00000000aaaa.bin", young),
        _untracked(path, tmp.format(18, "a" * 32), young),
        _untracked(path, "_delta_ops_staging/running/part=0/part-0.parquet", old),
        _untracked(path, "_delta_ops_staging/running/part=1/part-1.parquet", young),
    )
    orphans = (
        _untracked(path, "part=3/part-66666-orphan.snappy.parquet", old),
        _untracked(path, "deletion_vector_7d9a2a0c-0000-4000-8000-00000000bbbb.bin", old),
        _untracked(path, "part=11/part-66667-alone.snappy.parquet", old),
    )
    (path / "part=12").mkdir()
    _set_mtime(path / "part=12", old)
    leftovers = (
        _untracked(path, tmp.format(18, "b" * 32), old),
        _untracked(path, "_delta_ops_staging/dead/part=0/part-0.parquet", old),
    )
    # DV files only tombstones ever named (never the DV of a version inside a window: 13
    # removed its file with a DV, and that DV, like the ones live files carry, must stay)
    expired_dvs = tuple(sorted(f for f, kinds in dv_owners.items() if kinds == {"add", "remove"}))
    inside_dvs = {
        _dv_file(a["remove"]["deletionVector"])
        for v in (13, 14, 15, 16)
        for a in map(json.loads, (path / "_delta_log" / f"{v:020d}.json").read_text().splitlines())
        if a.get("remove", {}).get("deletionVector")
    }
    expired_dvs = tuple(f for f in expired_dvs if f not in inside_dvs)
    assert len(expired_dvs) >= 5 and inside_dvs, (expired_dvs, inside_dvs)
    emptied = ("part=11", "part=12")  # directories left empty
    gone = {
        "vacuum-full": orphans + leftovers + expired_dvs + emptied,
        "vacuum-lite": leftovers + expired_dvs,
        "vacuum-forced": orphans + leftovers + expired_dvs + emptied + (an_hour_old,),
        "vacuum-30-days": orphans + leftovers + emptied,
        "cleanup": tuple(f"_delta_log/{v:020d}.json" for v in range(5)),
    }
    rows = {v: deltalake_rows(path, version=v) for v in times}
    before = _fingerprint(path)
    yield History(path, now, times, rows, keep, gone)
    assert _fingerprint(path) == before, "a sweep changed the pristine table's files"


# ------------------------------------------------------------------ the operations
@dataclass(frozen=True)
class Op:
    """How to run an op (on a location with storage options, as of a time) and which
    versions it promises to keep readable."""

    run: Callable[[str, dict[str, Any] | None, int], Any]
    promised: Callable[[History], list[int]]
    #: the version whose rows the latest reads once the op has finished (None: the history's
    #: latest, as for every op but a restore); until then the latest reads as before
    reads_as: Callable[[History], int] | None = None
    #: what the table is put through on each fresh copy before the op runs (a data file lost,
    #: stats stripped), and the rows its latest version reads once the op has finished
    prepare: Callable[[Path, History], None] | None = None
    rows_after: Callable[[History], list[dict[str, Any]]] | None = None
    #: the prepared latest version cannot be read until the op has finished (a lost file)
    breaks_latest: bool = False


def _every_version(h: History) -> list[int]:
    """Checkpoints, row tracking, purge and compaction delete no data and no log: every
    version whose log is present stays readable."""
    return sorted(h.times)


def _cleanup(url: str, so: dict[str, Any] | None, now: int) -> Any:
    """A cleanup "as of" next month: clamped to the wall clock, it deletes what one now would."""
    return execute_cleanup(plan_cleanup(load_snapshot(url, storage_options=so), now + 30 * DAY))


def _vacuum(mode: str, retention_ms: int | None = None, ahead_ms: int = 0) -> Callable[..., Any]:
    def run(url: str, so: dict[str, Any] | None, now: int) -> Any:
        snapshot = load_snapshot(url, storage_options=so)
        plan = plan_vacuum(
            snapshot,
            now + ahead_ms,
            mode=mode,
            retention_ms=retention_ms,
            force=retention_ms is not None,
        )
        return execute_vacuum(plan)

    return run


def _row_tracking(url: str, so: dict[str, Any] | None, now: int) -> Any:
    return execute_enable_row_tracking(
        plan_enable_row_tracking(load_snapshot(url, storage_options=so), batch_files=4)
    )


def _purge(url: str, so: dict[str, Any] | None, now: int = 0) -> Any:
    return execute_purge(plan_purge(load_snapshot(url, storage_options=so)))


def _compact(url: str, so: dict[str, Any] | None, now: int = 0) -> Any:
    return execute_compact(plan_compact(load_snapshot(url, storage_options=so)))


def _zorder(url: str, so: dict[str, Any] | None, now: int = 0) -> Any:
    """`compact --zorder-by` of the table's first data column (issue 36): every file of every
    partition rewritten in curve order, tagged as a Z-cube."""
    snapshot = load_snapshot(url, storage_options=so)
    first = next(f.name for f in snapshot.schema.fields if f.name not in snapshot.partition_columns)
    columns = parse_column_list(first, snapshot, "--zorder-by")
    return execute_cluster(plan_cluster(snapshot, columns, target_size=128 * 1024 * 1024))


def _zorder_spilled(url: str, so: dict[str, Any] | None, now: int = 0) -> Any:
    """`_zorder` with every cube range partitioned through spill files (the path of cubes
    past `cluster.IN_MEMORY_BYTES`)."""
    limit = cluster.IN_MEMORY_BYTES
    cluster.IN_MEMORY_BYTES = 0
    try:
        return _zorder(url, so, now)
    finally:
        cluster.IN_MEMORY_BYTES = limit


#: the version a restore goes back to: inside the file retention, deletion vectors changed since
RESTORED_VERSION = 14


def _restore(url: str, so: dict[str, Any] | None, now: int = 0) -> Any:
    snapshot = load_snapshot(url, storage_options=so)
    return execute_restore(plan_restore(snapshot, version=RESTORED_VERSION))


def _lost_file(h: History) -> str:
    """The data file `repair` finds lost: the first one the last commit (deltalake's append)
    added, which no older version reads."""
    commit = h.path / "_delta_log" / f"{h.latest:020d}.json"
    adds = [json.loads(x).get("add") for x in commit.read_text().splitlines()]
    return min(a["path"] for a in adds if a)


def _lose_a_file(table: Path, h: History) -> None:
    (table / _lost_file(h)).unlink(missing_ok=True)


def _rows_without_the_lost_file(h: History) -> list[dict[str, Any]]:
    """The latest's rows less those of the lost file (read from the pristine table)."""
    lost = _lost_file(h)
    part = int(lost.split("/")[0].split("=")[1])
    gone = [{"part": part, **row} for row in pq.read_table(h.path / lost).to_pylist()]
    rows = list(h.rows[h.latest])
    for row in gone:
        rows.remove(row)
    return rows


def _repair(url: str, so: dict[str, Any] | None, now: int = 0) -> Any:
    return execute_repair(plan_repair(load_snapshot(url, storage_options=so), force=True))


def _strip_stats(table: Path, h: History) -> None:
    """The commits after the last checkpoint (deltalake's) lose the stats of the files they
    add without a deletion vector, as an old writer would have written them (mtimes kept)."""
    for version in (16, 17):
        commit = table / "_delta_log" / f"{version:020d}.json"
        stat = commit.stat()
        actions = [json.loads(x) for x in commit.read_text().splitlines() if x.strip()]
        for action in actions:
            if "add" in action and not action["add"].get("deletionVector"):
                action["add"].pop("stats", None)
        commit.write_text("".join(json.dumps(a) + "\n" for a in actions))
        os.utime(commit, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def _recompute_stats(url: str, so: dict[str, Any] | None, now: int = 0) -> Any:
    snapshot = load_snapshot(url, storage_options=so)
    return execute_recompute_stats(plan_recompute_stats(snapshot, batch_files=1))


def _drop_feature(url: str, so: dict[str, Any] | None, now: int = 0) -> Any:
    """The fast drop of deletion vectors. A re-run after a crash past the drop's last write
    finds no feature to drop and is refused, as Delta Spark refuses it: the drop is done."""
    snapshot = load_snapshot(url, storage_options=so)
    try:
        plan = plan_drop_feature(snapshot, feature="deletionVectors")
    except InvalidValue:
        assert not snapshot.protocol.supports("deletionVectors")
        return None
    return execute_drop_feature(plan)


def _checksum(url: str, so: dict[str, Any] | None, now: int = 0) -> Any:
    return execute_checksum(plan_checksum(load_snapshot(url, storage_options=so)))


OPS: dict[str, Op] = {
    "checkpoint": Op(lambda url, so, now: checkpoint(url, storage_options=so), _every_version),
    # the re-run finds the crashed run's young parts: it would wait up to 30 s for them to
    # complete before writing the rest (tests/ops/test_checkpoint_races.py); here it does not wait
    "checkpoint-3-parts": Op(
        lambda url, so, now: checkpoint(url, parts=3, storage_options=so, wait_ms=0),
        _every_version,
    ),
    "cleanup": Op(_cleanup, lambda h: h.inside(LOG_RETENTION)),
    "vacuum-full": Op(_vacuum("full"), lambda h: h.inside(FILE_RETENTION)),
    # "as of" next month: clamped to the wall clock, it deletes what a vacuum now would
    "vacuum-lite": Op(_vacuum("lite", ahead_ms=30 * DAY), lambda h: h.inside(FILE_RETENTION)),
    "vacuum-forced": Op(_vacuum("full", FORCED_RETENTION), lambda h: h.inside(FORCED_RETENTION)),
    # longer than the table's retention: the tombstones our checkpoint of 15 dropped are needed
    "vacuum-30-days": Op(_vacuum("full", LOG_RETENTION), lambda h: h.inside(LOG_RETENTION)),
    "enable-row-tracking": Op(_row_tracking, _every_version),
    "purge": Op(_purge, _every_version),
    "compact": Op(_compact, _every_version),
    "zorder": Op(_zorder, _every_version),
    # deletes nothing: every version stays readable, and the latest reads as version 14 did
    "restore": Op(_restore, _every_version, reads_as=lambda h: RESTORED_VERSION),
    # purge, tombstones, barrier checkpoints, the downgrade, a checkpoint: deletes nothing,
    # changes no row; every version reads as it did (the older ones with their DVs)
    "drop-feature": Op(_drop_feature, _every_version),
    # a data file of the last commit lost: versions before it stay readable, the latest reads
    # without its rows once repaired (and not at all until then)
    "repair": Op(
        _repair,
        lambda h: sorted(v for v in h.times if v < h.latest),
        prepare=_lose_a_file,
        rows_after=_rows_without_the_lost_file,
        breaks_latest=True,
    ),
    # one commit per file (batch_files=1): a crash between them leaves some done
    "recompute-stats": Op(_recompute_stats, _every_version, prepare=_strip_stats),
    # the latest version (deltalake's) has no checksum: one write, of N.crc
    "checksum": Op(_checksum, _every_version),
}


def _fresh(h: History, op: str, dest: Path) -> Path:
    """A copy of the pristine table put through the op's `prepare`."""
    table = _link_copy(h.path, dest)
    prepare = OPS[op].prepare
    if prepare is not None:
        prepare(table, h)
    return table


def _run(op: str, location: str, storage_options: dict[str, Any] | None, h: History) -> Any:
    """Run `op` at the history's "now", with the wall clock standing there too (in every
    thread): ages stay what the history says however long the sweep takes."""
    with fixed_wall_clock(h.now, all_threads=True):
        return OPS[op].run(location, storage_options, h.now)


def _end_state(path: Path, op: str) -> Any:
    """What a finished run of `op` leaves (compared between a re-run and an uncrashed run)."""
    snapshot = load_snapshot(path)
    rows = deltalake_rows(path)
    if op.startswith("checkpoint"):
        hint = json.loads((path / "_delta_log" / "_last_checkpoint").read_text())
        return snapshot.segment.checkpoint_version, hint["version"], rows
    if op == "cleanup":
        return sorted(p.name for p in (path / "_delta_log").glob("*.json")), rows
    if op.startswith("vacuum"):
        # (Hadoop's checksum sidecars are not the table's: the local client deletes them with
        # their files, the fsspec client leaves them, and no reader looks at them)
        data = sorted(
            str(p.relative_to(path))
            for p in path.rglob("*")
            if p.is_file() and "_delta_log" not in p.parts and not is_hadoop_checksum(p.name)
        )
        return data, rows
    if op == "drop-feature":
        # a re-run after a crash adds its own barrier: versions differ, the outcome does not
        protected = snapshot.properties.require_checkpoint_protection_before_version
        checkpointed = snapshot.segment.checkpoint_version
        assert checkpointed is not None and checkpointed >= protected > 0, "drop: checkpoint"
        files = snapshot.file_index
        dvs = files.num_rows - files.column("deletionVector").null_count
        return snapshot.protocol.to_action(), dvs, _pyarrow_rows(path)
    if op == "restore":
        assert rows == deltalake_rows(path, version=RESTORED_VERSION), "restore: rows"
        return snapshot.num_files, rows
    if op == "checksum":
        crcs = sorted(p.name for p in (path / "_delta_log").glob("*.crc"))
        return crcs, check_checksum(snapshot).status.value, rows
    if op == "repair":
        return snapshot.num_files, rows
    if op == "recompute-stats":
        stats = snapshot.files.select(["path", "stats"]).to_pylist()
        assert all('"numRecords"' in (f["stats"] or "") for f in stats), "recompute-stats"
        return sorted((f["path"], f["stats"]) for f in stats), rows
    if op in ("purge", "compact", "zorder"):
        files = snapshot.file_index
        with_dv = files.num_rows - files.column("deletionVector").null_count
        return files.num_rows, with_dv, rows
    ids = snapshot.files.column("baseRowId").to_pylist()
    return snapshot.properties.enable_row_tracking, None not in ids, rows


def _pyarrow_rows(path: Path) -> list[dict[str, Any]]:
    """The rows `deltalake`'s pyarrow reader returns: it reads no table with deletion
    vectors, so the latest of a finished drop must read through it."""
    data = DeltaTable(str(path)).to_pyarrow_table()
    return sorted(data.to_pylist(), key=_row_key)


def _copy(source: Path, dest: Path) -> Path:
    shutil.copytree(source, dest, copy_function=shutil.copy2, symlinks=True)
    return dest


def _link_copy(source: Path, dest: Path) -> Path:
    """A copy of a table whose `_delta_log` is copied and whose other files are hard links
    (a tenth of the cost): nothing rewrites a data file in place (every write goes to a new
    name, through a temp file), and `history` checks at the end that the pristine files
    are untouched."""

    def copy(src: str, dst: str) -> None:
        if f"{os.sep}_delta_log{os.sep}" in os.path.relpath(src, source.parent):
            shutil.copy2(src, dst)
        else:
            os.link(src, dst)

    shutil.copytree(source, dest, copy_function=copy, symlinks=True)
    return dest


def _fingerprint(path: Path) -> dict[str, tuple[int, int]]:
    """Size and mtime of every file under `path`."""
    return {
        str(f.relative_to(path)): (f.stat().st_size, f.stat().st_mtime_ns)
        for f in path.rglob("*")
        if f.is_file()
    }


# ------------------------------------------------------------------ the checks
@functools.cache
def _duckdb() -> Any:
    """One DuckDB connection for the sweep (loading the delta extension takes most of a
    second; a scan reads the log afresh every time)."""
    return duckdb_connection()


def _duckdb_rows(path: Path) -> list[dict[str, Any]]:
    data = _duckdb().sql(f"SELECT * FROM delta_scan('{path}')").to_arrow_table()
    return sorted(data.to_pylist(), key=_row_key)


_MULTI_PART = re.compile(r"^(\d{20})\.checkpoint\.(\d{10})\.(\d{10})\.parquet$")


def _log_files_whole(table: Path) -> None:
    """No reader ever sees a torn log file: every file in `_delta_log` a reader may read
    parses whole (hidden temp files and the parts of an incomplete multi-part checkpoint,
    which readers ignore, aside)."""
    files = [f for f in (table / "_delta_log").rglob("*") if f.is_file()]
    sets: dict[tuple[str, str], set[str]] = {}
    for f in files:
        if m := _MULTI_PART.match(f.name):
            sets.setdefault((m[1], m[3]), set()).add(m[2])
    for file in sorted(files):
        m = _MULTI_PART.match(file.name)
        if file.name.startswith(".") or (m and len(sets[(m[1], m[3])]) < int(m[3])):
            continue
        if file.suffix == ".parquet":
            pq.read_metadata(file)
        elif file.suffix == ".json":
            for line in file.read_text().splitlines():
                json.loads(line)
        elif file.name in ("_last_checkpoint", "_last_vacuum_info"):
            json.loads(file.read_text())
        elif file.suffix == ".crc" and file.stem.isdigit():
            VersionChecksum.from_json(file.read_bytes(), int(file.stem))


def _check_promises(table: Path, h: History, op: str, moment: str, done: bool = False) -> None:
    """Every version `op` promises reads back with its rows (`deltalake`; the latest through
    DuckDB too), our own snapshot loads, no log file is torn and the untracked files every
    op must keep are there."""
    promised = list(OPS[op].promised(h))
    read = read_each(lambda version: deltalake_rows(table, version=version), promised)
    for version, rows in zip(promised, read, strict=True):
        assert rows == h.rows[version], f"{op}: version {version} {moment}"
    spec = OPS[op]
    readings = [] if spec.breaks_latest else [h.rows[h.latest]]
    if spec.reads_as is not None:
        readings.append(h.rows[spec.reads_as(h)])
    if spec.rows_after is not None:
        readings.append(spec.rows_after(h))
    try:
        latest = _duckdb_rows(table)
    except Exception:  # noqa: BLE001 - only a lost file, not yet repaired, may stop a read
        assert spec.breaks_latest and not done, f"{op}: DuckDB cannot read the latest {moment}"
    else:
        assert latest in readings, f"{op}: DuckDB's latest {moment}"
        if spec.rows_after is not None and done:
            assert latest == spec.rows_after(h), f"{op}: the latest's rows {moment}"
    load_snapshot(table)
    _log_files_whole(table)
    missing = [f for f in h.keep if f not in h.gone.get(op, ()) and not (table / f).exists()]
    assert not missing, f"{op}: {moment} deleted {missing}"


def _check_finished(table: Path, h: History, op: str, expected: Any, moment: str) -> None:
    _check_promises(table, h, op, moment, done=True)
    assert _end_state(table, op) == expected, f"{op}: end state {moment}"
    left = [f for f in h.gone.get(op, ()) if (table / f).exists()]
    assert not left, f"{op}: {moment} left {left}"


#: every fault point when soaking (``make soak``) or with CRASH_SWEEP=full; else (CI, a
#: developer's run) a sample of at most CRASH_SWEEP_POINTS per op and fault, a point of a
#: different kind first, chosen by the run's seed (RELIABILITY_SEED, printed at the end of the
#: run: setting it replays the same sample), so that successive runs cover different points
FULL_SWEEP = (
    os.environ.get("HYPOTHESIS_PROFILE") == "soak" or os.environ.get("CRASH_SWEEP") == "full"
)
SAMPLE_POINTS = int(os.environ.get("CRASH_SWEEP_POINTS", "1"))
SEED = int(os.environ.get("RELIABILITY_SEED", "0"))


def _signature(label: str, root: Path) -> str:
    """A write, read or listing with the table's root, ids and numbers blanked out: points
    that differ only in which commit or data file they touch look alike."""
    text = label.replace(str(root), "")
    text = re.sub(r"[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}", "U", text)
    text = re.sub(r"[0-9a-f]{32}", "H", text)
    return re.sub(r"\d+", "N", text)


def _points(labels: list[str], root: Path, salt: int = 0) -> list[int]:
    """Which of the points 1..n (labelled by what each touches) to sweep: all of them on a
    full sweep; else at most SAMPLE_POINTS: first one point of every kind (evenly spread
    among the kinds, moved by `salt` and the run's seed, when there are more kinds), then
    points spread evenly over the rest."""
    salt += SEED
    n = len(labels)
    if FULL_SWEEP or n <= SAMPLE_POINTS:
        return list(range(1, n + 1))
    firsts: dict[str, int] = {}
    for k, label in enumerate(labels, start=1):
        firsts.setdefault(_signature(label, root), k)
    kinds = sorted(firsts.values())
    if len(kinds) >= SAMPLE_POINTS:
        step = len(kinds) / SAMPLE_POINTS
        return sorted({kinds[(int(i * step) + salt) % len(kinds)] for i in range(SAMPLE_POINTS)})
    picks = set(kinds)
    rest = [k for k in range(1, n + 1) if k not in picks]
    want = SAMPLE_POINTS - len(picks)
    picks |= {rest[(int(i * len(rest) / want) + salt) % len(rest)] for i in range(want)}
    return sorted(picks)


@dataclass
class Reference:
    """An uncrashed run of an op on one storage path: what it counted, on which copy of the
    table (the root of the paths it counted), and where it ends."""

    counts: FaultPlan
    root: Path
    end: Any

    @property
    def writes(self) -> list[str]:
        return [f"{op}:{path}" for op, path in self.counts.writes]


_REFERENCES: dict[tuple[str, str], Reference] = {}


def _reference(h: History, op: str, path: str, tmp_path: Path) -> Reference:
    """The uncrashed run of `op` on the "local" or "fsspec" path (once per module)."""
    key = (op, path)
    if key not in _REFERENCES:
        table = _fresh(h, op, tmp_path / f"reference-{path}")
        counting = FaultPlan()
        if path == "local":
            with local_faults(counting):
                _run(op, str(table), None, h)
        else:
            _run(op, faulty_url(table), faulty_options(counting), h)
        _check_finished(table, h, op, _end_state(table, op), "after an uncrashed run")
        _REFERENCES[key] = Reference(counting, table, _end_state(table, op))
        shutil.rmtree(table)
    return _REFERENCES[key]


def _after_fault(table: Path, h: History, op: str, expected: Any, what: str) -> None:
    _check_promises(table, h, op, f"after {what}")
    _run(op, str(table), None, h)  # the re-run, no faults
    _check_finished(table, h, op, expected, f"after {what} and a re-run")


@pytest.mark.parametrize("op", list(OPS))
def test_a_crash_at_any_write_leaves_a_readable_table_and_a_rerun_finishes(
    op: str, history: History, tmp_path: Path
) -> None:
    """The fsspec path (`faultyfile://`): a crash before or after a write."""
    reference = _reference(history, op, "fsspec", tmp_path)
    writes = reference.writes
    assert writes, f"{op} wrote nothing: the sweep would test nothing"
    for salt, when in enumerate(("before", "after")):
        for k in _points(writes, reference.root, salt):
            table = _fresh(history, op, tmp_path / f"k{k}-{when}")
            faults = FaultPlan(crash_on=k, when=when, dies=True)
            with _dies(writes[k - 1]):
                _run(op, faulty_url(table), faulty_options(faults), history)
            _after_fault(table, history, op, reference.end, f"a crash {when} {writes[k - 1]}")
            shutil.rmtree(table)


#: ops that only delete on the local path (nothing of theirs can be torn)
ONLY_DELETES = frozenset({"cleanup"})


@pytest.mark.parametrize(
    ("op", "when"),
    [(op, when) for when in WHEN for op in OPS if not (when == "torn" and op in ONLY_DELETES)],
)
def test_a_crash_on_the_local_path_keeps_every_promised_version(
    op: str, when: str, history: History, tmp_path: Path
) -> None:
    """The path local tables take (a temp file linked or renamed into place, unlink, rmdir),
    crashed before a write, after it, or torn: only a prefix of a file's bytes written (a
    temp file, which is then never linked into place)."""
    reference = _reference(history, op, "local", tmp_path)
    writes = reference.writes
    points = _points(writes, reference.root, WHEN.index(when))
    if when == "torn":  # only a file's content can be torn; a link or a delete cannot
        contents = [k for k, w in enumerate(writes, start=1) if w.startswith("open:")]
        assert contents, f"{op} writes no file: list it in ONLY_DELETES"
        points = [
            contents[i - 1] for i in _points([writes[k - 1] for k in contents], reference.root)
        ]
    for k in points:
        table = _fresh(history, op, tmp_path / f"k{k}")
        faults = FaultPlan(crash_on=k, when=when, dies=True)
        with local_faults(faults), _dies(writes[k - 1]):
            _run(op, str(table), None, history)
        _after_fault(table, history, op, reference.end, f"a crash {when} {writes[k - 1]}")
        shutil.rmtree(table)


@pytest.mark.parametrize("fault", ["read", "listing"])
@pytest.mark.parametrize("op", list(OPS))
def test_a_failed_read_or_listing_deletes_nothing_a_version_needs(
    op: str, fault: str, history: History, tmp_path: Path
) -> None:
    """The k-th read or directory listing of the local path raises EIO; a listing fails at
    once or after half of its entries (every other point; both at soak size). The op fails,
    or carries on where it may, but never deletes what it could not see, and every promised
    version reads; a re-run finishes."""
    reference = _reference(history, op, "local", tmp_path)
    seen = reference.counts.reads if fault == "read" else reference.counts.listings
    assert seen, f"{op}: no {fault} to fail"
    plans: list[FaultPlan] = []
    for i, k in enumerate(_points(seen, reference.root, 1)):
        if fault == "read":
            plans.append(FaultPlan(fail_read_on=k))
        else:
            kinds = LISTING_FAULTS if FULL_SWEEP else LISTING_FAULTS[i % 2 :][:1]
            plans.extend(FaultPlan(fail_listing_on=k, listing_fault=kind) for kind in kinds)
    for i, faults in enumerate(plans):
        table = _fresh(history, op, tmp_path / f"p{i}")
        k = faults.fail_read_on or faults.fail_listing_on or 0
        what = f"a failed {fault} of {seen[k - 1]} ({faults})"
        try:
            with local_faults(faults):
                _run(op, str(table), None, history)
        except Exception as exc:  # noqa: BLE001 - failing is fine; what it leaves is checked
            assert _caused_by_injection(exc), f"{op}: {what} raised {exc!r}"
        assert faults.failed, f"{op}: {what} was never reached"
        _after_fault(table, history, op, reference.end, what)
        shutil.rmtree(table)


def _age_new_log_files(table: Path, h: History, age_ms: int) -> None:
    """The log files a crashed run left, made `age_ms` old: a re-run that much later."""
    for file in (table / "_delta_log").rglob("*"):
        if file.is_file() and not (h.path / file.relative_to(table)).exists():
            _set_mtime(file, h.now - age_ms)


@pytest.mark.parametrize("op", ["checkpoint", "checkpoint-3-parts"])
def test_a_torn_checkpoint_part_is_ignored_then_rewritten(
    op: str, history: History, tmp_path: Path
) -> None:
    """On a store whose writes are not atomic (fsspec writes a file in place) a crash can
    leave a prefix of a checkpoint part under its final name. Our snapshot ignores it (its
    footer does not read), and a re-run detects it and writes the checkpoint whole; then every
    promised version reads and no log file is torn. (Local writes tear only a temp file.)

    A young torn part of a multi-part set may be another run's part still being written: an
    immediate re-run says so (retryable), one after the in-flight grace replaces it."""
    reference = _reference(history, op, "fsspec", tmp_path)
    writes = reference.writes
    parts = [k for k, w in enumerate(writes, start=1) if ".checkpoint." in w]
    assert parts, f"{op} wrote no checkpoint part: {writes}"
    for k in parts:
        table = _link_copy(history.path, tmp_path / f"k{k}")
        faults = FaultPlan(crash_on=k, when="torn", dies=True)
        with pytest.raises(InjectedCrash):
            _run(op, faulty_url(table), faulty_options(faults), history)
        assert load_snapshot(table).version == history.latest
        try:
            _run(op, str(table), None, history)  # the re-run, no faults
        except CheckpointInProgress as exc:
            assert exc.retryable and op == "checkpoint-3-parts", exc
            _age_new_log_files(table, history, 2 * IN_PROGRESS_GRACE_MS)
            _run(op, str(table), None, history)
        _check_finished(table, history, op, reference.end, f"after {writes[k - 1]} torn")
        shutil.rmtree(table)


_CHECKSUM_WRITE = re.compile(r"\d{20}\.crc\b")


def _dies(write: str) -> contextlib.AbstractContextManager[Any]:
    """The op dies of the crash injected at `write`. A crash at a checksum's write may let it
    finish: the checksum follows its commit best-effort (the op carries on, and dies at its
    next write if it has one), so the op can end with a version that has none."""
    if _CHECKSUM_WRITE.search(write):
        return contextlib.suppress(InjectedCrash)
    return pytest.raises(InjectedCrash)


def _caused_by_injection(exc: BaseException | None) -> bool:
    """Whether the injected error is `exc` or in its chain (ops may wrap an OSError)."""
    while exc is not None:
        if isinstance(exc, InjectedIOError):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


_SLOW_VACUUM = """
import sys, time
import delta_ops.storage.tree as tree
real = tree.os.unlink
def slow(path, *a, **k):
    time.sleep(0.02)
    return real(path, *a, **k)
tree.os.unlink = slow
from delta_ops.cli import main
sys.exit(main(["vacuum", sys.argv[1], "--retention", "0h", "--force", "--in-flight-grace", "0s"]))
"""


@pytest.mark.parametrize("delay", [0.5, 1.0, 1.5])
def test_kill_9_during_a_vacuum_then_a_rerun(pristine: Path, tmp_path: Path, delay: float) -> None:
    # A real process killed with SIGKILL mid-delete (deletes slowed so the kill lands inside).
    table = _copy(pristine, tmp_path / "t")
    extra = table / "part=1"
    for i in range(100):
        (extra / f"orphan-{i}.parquet").write_bytes(b"x")
    latest = DeltaTable(str(table)).version()
    rows = _rows(table, latest)
    proc = subprocess.Popen([sys.executable, "-c", _SLOW_VACUUM, str(table)], cwd=REPO)
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert _rows(table) == rows and load_snapshot(table).version >= latest
    rerun = subprocess.run(
        [
            sys.executable,
            "-m",
            "delta_ops.cli",
            "vacuum",
            str(table),
            "--retention",
            "0h",
            "--force",
            "--in-flight-grace",
            "0s",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert rerun.returncode == 0, rerun.stderr
    assert not list(extra.glob("orphan-*")) and _rows(table) == rows


# ------------------------------------------------------------------ rewrites (issue 18)
#: a real table by Delta Spark: 15 live files in 10 partitions, 2 with a deletion vector, and
#: a checkpoint
REWRITE_FIXTURE = DV_FIXTURE


REWRITE_OPS: dict[str, Callable[[str, dict[str, Any] | None], Any]] = {
    "purge": _purge,
    "compact": _compact,
    "zorder": _zorder,
    "zorder-spilled": _zorder_spilled,
}


def _rewrite_end_state(path: Path) -> tuple[int, int, list[dict[str, Any]]]:
    """What a finished rewrite leaves: live files, how many still have a DV, and the rows."""
    files = load_snapshot(path).file_index
    with_dv = files.num_rows - files.column("deletionVector").null_count
    return files.num_rows, with_dv, deltalake_rows(path)


@pytest.mark.parametrize("op", list(REWRITE_OPS))
def test_a_crash_at_any_write_of_a_rewrite_keeps_every_version_and_a_rerun_finishes(
    op: str, tmp_path: Path
) -> None:
    """Purge and compaction delete nothing: after a crash at any write (the sample of
    `_points`, or every write on a full sweep), every version reads back with its rows (the
    latest through both peers), and a re-run ends where an uncrashed run does."""
    source = copy_fixture(REWRITE_FIXTURE, tmp_path / "source")
    latest = DeltaTable(str(source)).version()
    promised = {v: deltalake_rows(source, version=v) for v in (latest - 1, latest)}
    reference = _copy(source, tmp_path / "reference")
    counting = FaultPlan()
    REWRITE_OPS[op](faulty_url(reference), faulty_options(counting))
    expected = _rewrite_end_state(reference)
    # 15 live files in 10 partitions, 2 with a DV: purge rewrites those 2 (then a commit and
    # its checksum), compaction each partition's pair and each lone file with a DV (7 files,
    # then a commit and its checksum), Z-ordering every partition's files (10 files, a commit
    # and its checksum)
    assert expected[:2] == ((15, 0) if op == "purge" else (10, 0))
    writes = {"purge": 4, "compact": 9, "zorder": 12, "zorder-spilled": 12}
    assert counting.count == writes[op], f"{op}: {counting.writes}"

    labels = [f"{op}:{path}" for op, path in counting.writes]
    for salt, when in enumerate(("before", "after")):
        for k in _points(labels, reference, salt):
            table = _copy(source, tmp_path / f"k{k}-{when}")
            with _dies(counting.writes[k - 1][1]):
                REWRITE_OPS[op](faulty_url(table), faulty_options(FaultPlan(crash_on=k, when=when)))
            for version, rows in promised.items():
                assert deltalake_rows(table, version=version) == rows, f"{op}: {when} write {k}"
            assert duckdb_rows(table) == promised[latest]
            REWRITE_OPS[op](str(table), None)  # the re-run, no faults
            assert _rewrite_end_state(table) == expected, f"{op}: re-run after {when} write {k}"
            shutil.rmtree(table)
