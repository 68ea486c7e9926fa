"""VACUUM: delete data files no version inside the retention window needs, never one that is.

Plan (pure apart from listing):

* Retention: ``--retention`` if given (honoured, never silently replaced), else the table's
  ``delta.deletedFileRetentionDuration`` (7 days). Shorter than the table's property is refused
  with `RetentionTooShort` unless forced; negative is always refused.
* Clock: ``now_ms`` is clamped to the wall clock (`delta_ops.clock.clamp`): a plan "as of"
  a later moment can never delete more than the real clock allows (the retention window and
  the in-flight grace both use the clamped time; the plan records what was asked).
* Protected set: every live file and every tombstone with ``deletionTimestamp >= now -
  retention``, their deletion-vector files (``u`` descriptors) and every parent directory.
  Beyond Spark: a DV file referenced by *any* live or unexpired file is protected even if it
  looks old (delta-rs' full vacuum deletes such files and corrupts the table).
* The window's own history: every file removed by a commit after the window's start (the
  newest commit at or before ``now - retention``, which time travel to that moment reads) is
  protected too, read from those commits' JSON while it is present, since a checkpoint may
  have dropped their tombstones by the table property, not by this vacuum's retention. Where
  the window starts before the oldest version the log can rebuild, the plan says so
  (``window_reaches_past_history``).
* Leftovers of crashed writes (hidden temporary log files, Spark staging folders; see
  `delta_ops.ops.leftovers`) are deleted once older than the retention and one hour.
* FULL (default, Spark's algorithm): list the table recursively, skipping hidden names at every
  level (``_`` or ``.`` prefixes, except ``_change_data``, ``_delta_index`` and partition
  directories ``col=``), symlinks and anything outside the root; candidates are unprotected
  files modified before ``now - retention``; then empty unprotected directories.
* LITE: candidates come from the ``remove`` and ``cdc`` actions of the commits since the last
  vacuum (``_delta_log/_last_vacuum_info``) up to the newest commit older than the retention;
  refused like Spark when cleaned-up history makes that incomplete.

* In-flight writes: a file no commit has removed (one the log does not reference, an
  unreferenced DV or change-data file) that is younger than ``in_flight_grace_ms`` (1 minute)
  is kept even with retention 0: it may belong to a write that has not committed yet, and
  deleting it would corrupt that write. Expired tombstones, their deletion vectors and change
  data a commit's ``cdc`` action names are not affected (a commit named them);
  ``in_flight_grace_ms=0`` is exactly Spark.
* Before deleting, each path's real location on disk must still be inside the table (a
  symlinked directory never leads a delete outside the root).

Execute (only when something is to be deleted): commit ``VACUUM START`` (numFilesToDelete,
sizeOfDataToDelete), re-read the log and keep every file that commits landing meanwhile
reference, delete in parallel, remove empty directories non-recursively, commit ``VACUUM END``
(COMPLETED, or FAILED before re-raising), then record ``_last_vacuum_info``.

For example:

    plan = plan_vacuum(load_snapshot(path), now_ms=now, retention_ms=0, force=True)
    for c in plan.candidates: print(c.path, c.size, c.reason)      # dry run
    execute_vacuum(plan)
"""

from __future__ import annotations

import json
import logging
import posixpath
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from delta_ops import clock
from delta_ops.errors import InvalidValue, OperationRefused, RetentionTooShort
from delta_ops.log.file_names import LogFile, LogFileKind, parse_listing
from delta_ops.log.reader import read_commit_actions, read_commits
from delta_ops.log.segment import complete_checkpoints
from delta_ops.ops import progress
from delta_ops.ops.engines import LOCAL, Engine
from delta_ops.ops.leftovers import MIN_LEFTOVER_AGE_MS, staging_directories, stale_leftovers
from delta_ops.ops.operation import (
    ENGINE_OPTION,
    EnginePlan,
    Operation,
    Option,
    OptionKind,
    Timed,
    requested_now,
    timed,
)
from delta_ops.ops.results import fields_data
from delta_ops.protocol.deletion_vectors import DeletionVectorDescriptor, dv_relative_paths
from delta_ops.protocol.features import Access, Protocol
from delta_ops.protocol.units import format_bytes, format_duration
from delta_ops.storage import Storage
from delta_ops.table.commit_times import version_at
from delta_ops.table.file_paths import relative_path, relative_paths
from delta_ops.table.snapshot import Snapshot
from delta_ops.table.transaction import Transaction

logger = logging.getLogger(__name__)

LAST_VACUUM_INFO = "_last_vacuum_info"
DEFAULT_IN_FLIGHT_GRACE_MS = 60_000


class VacuumMode(StrEnum):
    """How a vacuum finds its candidates."""

    FULL = "full"  # list the table (Spark's default)
    LITE = "lite"  # the log's removes since the last vacuum


class Reason(StrEnum):
    """Why a file is a vacuum candidate."""

    #: no version the log holds references it: a file never committed (an orphan), or one
    #: removed so long ago that a checkpoint has dropped its tombstone; the log cannot tell
    #: which, so it is not called an orphan
    UNREFERENCED = "unreferenced"
    EXPIRED_TOMBSTONE = "expired tombstone"  # removed before the retention window
    #: the deletion vector of a file removed before the retention window (a commit names it)
    EXPIRED_TOMBSTONE_DV = "expired tombstone's deletion vector"
    #: a deletion vector no action the log holds names
    UNREFERENCED_DV = "unreferenced deletion vector"
    CHANGE_DATA = "change data"
    LEFTOVER = "leftover of a crashed write"


LEFTOVER = Reason.LEFTOVER
#: reasons for files a commit named, so no running write owns them: no in-flight grace
COMMITTED_REASONS = frozenset({Reason.EXPIRED_TOMBSTONE, Reason.EXPIRED_TOMBSTONE_DV})


class VacuumLiteRefused(OperationRefused):
    """LITE cannot see every eligible file because log history was cleaned up (run FULL)."""


@dataclass(frozen=True)
class Candidate:
    """A file (or directory) the vacuum deletes, with why."""

    path: str  # relative to the table root, decoded
    size: int
    modification_time: int
    reason: Reason

    def to_dict(self, now_ms: int) -> dict[str, Any]:
        return {
            "path": self.path,
            "size": self.size,
            "age_ms": now_ms - self.modification_time,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class VacuumPlan(EnginePlan):
    table: str
    mode: VacuumMode
    now_ms: int
    retention_ms: int
    table_retention_ms: int
    specified_retention: bool
    delete_before_ms: int
    candidates: tuple[Candidate, ...]
    directories: tuple[str, ...]  # empty-directory candidates, deepest first
    latest_commit_outside_retention: int | None
    kept_in_flight: tuple[str, ...] = ()  # young untracked files a running write may own
    requested_now_ms: int | None = None  # what the caller asked for, when the clock clamped it
    oldest_reconstructable_version: int = 0
    snapshot: Snapshot | None = field(default=None, repr=False, compare=False)

    @property
    def window_reaches_past_history(self) -> bool:
        """Whether the retention window starts before the oldest version the log can rebuild:
        versions older than that were already unreadable, so nothing can protect them."""
        start = self.latest_commit_outside_retention
        return (start is None and self.oldest_reconstructable_version > 0) or (
            start is not None and start < self.oldest_reconstructable_version
        )

    @property
    def bytes(self) -> int:
        return sum(c.size for c in self.candidates)

    @property
    def nothing_to_do(self) -> bool:
        return not self.candidates and not self.directories

    @property
    def idle_reason(self) -> str:
        """Why the plan has nothing to do (when it has nothing to do)."""
        return f"nothing to vacuum ({self.mode}, retention {format_duration(self.retention_ms)})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "mode": self.mode,
            "engine": self.engine.name,
            "retention_ms": self.retention_ms,
            "table_retention_ms": self.table_retention_ms,
            "now_ms": self.now_ms,
            "requested_now_ms": self.requested_now_ms,
            "delete_before_ms": self.delete_before_ms,
            "oldest_reconstructable_version": self.oldest_reconstructable_version,
            "window_reaches_past_history": self.window_reaches_past_history,
            "files": [c.to_dict(self.now_ms) for c in self.candidates],
            "directories": list(self.directories),
            "kept_in_flight": list(self.kept_in_flight),
            "num_files": len(self.candidates),
            # the shape of the result it would produce, so a dry run reads like the real run
            "deleted": [c.path for c in self.candidates],
            "num_deleted": len(self.candidates),
            "commits": [],
            "bytes": self.bytes,
            "reasons": _reason_totals(self.candidates),
        }


@dataclass(frozen=True)
class VacuumResult(Timed):
    table: str
    mode: str
    retention_ms: int
    deleted: tuple[str, ...]
    num_deleted: int
    bytes: int
    num_vacuumed_directories: int
    kept_after_recheck: tuple[str, ...]
    commits: tuple[int, ...]

    def to_dict(self) -> dict[str, Any]:
        return fields_data(self)


def _reason_totals(candidates: tuple[Candidate, ...]) -> dict[str, dict[str, int]]:
    totals: dict[str, dict[str, int]] = {}
    for c in candidates:
        t = totals.setdefault(c.reason, {"files": 0, "bytes": 0})
        t["files"] += 1
        t["bytes"] += c.size
    return totals


# ----------------------------------------------------------------------------- protected set
def is_hidden(name: str, partition_columns: tuple[str, ...]) -> bool:
    """Spark's per-name hidden rule (`DeltaTableUtils.isHiddenDirectory`)."""
    if not name.startswith(("_", ".")):
        return False
    if name.startswith(("_delta_index", "_change_data")):
        return False
    return not any(name.startswith(f"{col}=") for col in partition_columns)


def parent_directories(paths: pa.Array) -> set[str]:
    """Every ancestor directory of the given relative paths (vectorised over the paths)."""
    if len(paths) == 0:
        return set()
    has_dir = pc.fill_null(pc.match_substring(paths, "/"), False)
    parents = pc.replace_substring_regex(paths.filter(has_dir), pattern=r"/[^/]*$", replacement="")
    dirs: set[str] = set()
    for d in pc.unique(parents).to_pylist():
        while d and d not in dirs:
            dirs.add(d)
            d = posixpath.dirname(d)
    return dirs


def _dv_relative_paths(table: pa.Table) -> pa.Array:
    if table.num_rows == 0 or table.column("deletionVector").null_count == table.num_rows:
        return pa.array([], pa.string())
    return dv_relative_paths(table.column("deletionVector")).drop_null()


def protected_array(snapshot: Snapshot, delete_before_ms: int) -> pa.Array:
    """Relative paths of live files, unexpired tombstones and their DV files (may repeat)."""
    storage = snapshot.storage
    tombstones = snapshot.tombstones
    if tombstones.num_rows:
        kept = pc.greater_equal(
            pc.fill_null(tombstones.column("deletionTimestamp"), 0), delete_before_ms
        )
        tombstones = tombstones.filter(kept)
    parts = [
        relative_paths(storage, snapshot.file_index.column("path"))
        if snapshot.file_index.num_rows
        else pa.array([], pa.string()),
        relative_paths(storage, tombstones.column("path"))
        if tombstones.num_rows
        else pa.array([], pa.string()),
        _dv_relative_paths(snapshot.file_index),
        _dv_relative_paths(tombstones),
    ]
    return pa.concat_arrays([p.cast(pa.string()) for p in parts]).drop_null()


@dataclass(frozen=True)
class RemovedFiles:
    """The `remove` actions of some commits, columnar: table-relative paths (null: outside the
    root), their deletion timestamps (null when absent), the deletion-vector files the
    removed files carried, with the same timestamps, and the change-data (`cdc`) files."""

    paths: pa.Array
    timestamps: pa.Array
    dv_paths: pa.Array
    dv_timestamps: pa.Array
    change_data: pa.Array

    @property
    def all_paths(self) -> pa.Array:
        return pa.concat_arrays([self.paths, self.dv_paths]).drop_null()


def removed_files(storage: Storage, commits: list[LogFile]) -> RemovedFiles:
    """What the given commits removed (read through the log reader, columnar)."""
    empty = pa.array([], pa.string())
    no_times = pa.array([], pa.int64())
    paths, times, dv_paths, dv_times, cdc_paths = [empty], [no_times], [empty], [no_times], [empty]
    if commits:
        for src in read_commits(storage, commits, seq_start=0).batch.sources:
            table = src.table
            if "cdc" in table.column_names and pa.types.is_struct(table.schema.field("cdc").type):
                cdc = table.column("cdc").combine_chunks()
                cdc_path = pc.struct_field(cdc.filter(cdc.is_valid()), "path")
                cdc_paths.append(relative_paths(storage, cdc_path).cast(pa.string()))
            if "remove" not in table.column_names:
                continue
            if not pa.types.is_struct(table.schema.field("remove").type):
                continue
            column = table.column("remove").combine_chunks()
            rows = column.filter(column.is_valid())
            if not len(rows):
                continue
            row_type = rows.type
            stamps = (
                pc.struct_field(rows, "deletionTimestamp").cast(pa.int64())
                if row_type.get_field_index("deletionTimestamp") >= 0
                else pa.nulls(len(rows), pa.int64())
            )
            paths.append(relative_paths(storage, pc.struct_field(rows, "path")).cast(pa.string()))
            times.append(stamps)
            if row_type.get_field_index("deletionVector") >= 0:
                dv = pc.struct_field(rows, "deletionVector")
                if not pa.types.is_null(dv.type):
                    dv_paths.append(dv_relative_paths(dv).cast(pa.string()))
                    dv_times.append(stamps)
    return RemovedFiles(
        pa.concat_arrays(paths),
        pa.concat_arrays(times),
        pa.concat_arrays(dv_paths),
        pa.concat_arrays(dv_times),
        pa.concat_arrays(cdc_paths).drop_null(),
    )


def window_removes(snapshot: Snapshot, latest_outside: int | None) -> pa.Array:
    """Paths removed by commits inside the retention window that the snapshot may not hold.

    Versions from `latest_outside` (the newest commit at or before the window's start: time
    travel to the window's start reads it) up to the snapshot stay readable, so every file a
    commit after `latest_outside` removed is still needed by the version before that commit.
    The snapshot holds the removes of commits after its checkpoint as tombstones, but the
    checkpoint itself may have dropped older tombstones (as the protocol lets it, judged by its
    writer's clock and the table property, not by this vacuum's retention), so the commits
    between the window's start and the checkpoint are read again while their JSON is present.
    """
    checkpoint = snapshot.segment.checkpoint_version
    if checkpoint is None:
        return pa.array([], pa.string())
    start = -1 if latest_outside is None else latest_outside
    commits = sorted(
        (
            f
            for f in snapshot.segment.listing
            if f.kind is LogFileKind.COMMIT and start < f.version <= checkpoint
        ),
        key=lambda f: f.version,
    )
    return removed_files(snapshot.storage, commits).all_paths


def oldest_reconstructable_version(snapshot: Snapshot) -> int:
    """The oldest version the log can still rebuild: a checkpoint (or version 0) followed by
    every commit up to the snapshot."""
    commits = {f.version for f in snapshot.segment.listing if f.kind is LogFileKind.COMMIT}
    lowest = snapshot.version
    while lowest - 1 in commits:
        lowest -= 1
    if lowest == 0 and 0 in commits:
        return 0
    checkpoints = [
        c.version
        for c in complete_checkpoints(snapshot.segment.listing)
        if lowest - 1 <= c.version <= snapshot.version
    ]
    return min(checkpoints, default=snapshot.segment.checkpoint_version or snapshot.version)


# ----------------------------------------------------------------------------- listing (FULL)
def hidden_filter(partition_columns: tuple[str, ...]) -> Callable[[str], bool]:
    """The names a listing of the data area prunes: hidden ones (``_``/``.``) that are not
    partition directories or change data (Spark's rule)."""
    return lambda name: name[0] in "_." and is_hidden(name, partition_columns)


def _reason(path: str, tombstone_paths: set[str], *, removed: bool = False) -> Reason:
    """Why `path` is a candidate. `tombstone_paths`: the snapshot's tombstones and their
    deletion vectors; `removed`: a commit's remove names it or its DV (LITE read it)."""
    name = posixpath.basename(path)
    is_dv = name.startswith("deletion_vector_") and name.endswith(".bin")
    if path in tombstone_paths or (removed and is_dv):
        return Reason.EXPIRED_TOMBSTONE_DV if is_dv else Reason.EXPIRED_TOMBSTONE
    if is_dv:
        return Reason.UNREFERENCED_DV
    if path.startswith("_change_data/") or "/_change_data/" in path:
        return Reason.CHANGE_DATA
    return Reason.EXPIRED_TOMBSTONE if removed else Reason.UNREFERENCED


def _change_data_commits_name(snapshot: Snapshot, young: list[Candidate]) -> set[str]:
    """The young change-data candidates a commit's `cdc` action names: committed, so no running
    write owns them. Only commits written since the oldest of them are read (a commit is
    written after the files it names), so this costs nothing when there are none."""
    change_data = [c for c in young if c.reason is Reason.CHANGE_DATA]
    if not change_data:
        return set()
    since = min(c.modification_time for c in change_data)
    recent = [
        f
        for f in snapshot.segment.listing
        if f.kind is LogFileKind.COMMIT and f.modification_time >= since
    ]
    named = set(removed_files(snapshot.storage, recent).change_data.to_pylist())
    return {c.path for c in change_data if c.path in named}


# ----------------------------------------------------------------------------- plan
def resolve_retention(snapshot: Snapshot, retention_ms: int | None, force: bool) -> tuple[int, int]:
    """(retention to use, the table's own); refuses unsafe values."""
    table_retention = snapshot.properties.deleted_file_retention_ms
    if retention_ms is None:
        return table_retention, table_retention
    if retention_ms < 0:
        raise RetentionTooShort(
            f"vacuum retention must not be negative, got {format_duration(retention_ms)}"
        )
    if retention_ms < table_retention and not force:
        raise RetentionTooShort(
            f"{snapshot.storage.url}: a retention of {format_duration(retention_ms)} is shorter "
            f"than the table's delta.deletedFileRetentionDuration "
            f"({format_duration(table_retention)}); files still needed by readers or time travel "
            "inside that window could be deleted. Vacuum with force to go ahead (CLI --force, "
            "Dagster config force: true)."
        )
    return retention_ms, table_retention


def plan_vacuum(
    snapshot: Snapshot,
    now_ms: int,
    *,
    retention_ms: int | None = None,
    mode: VacuumMode | str = VacuumMode.FULL,
    force: bool = False,
    in_flight_grace_ms: int = DEFAULT_IN_FLIGHT_GRACE_MS,
    engine: Engine = LOCAL,
) -> VacuumPlan:
    """Plan a vacuum of `snapshot`'s table as of `now_ms`.

    Args:
        retention_ms: delete files older than this (default: the table's
            delta.deletedFileRetentionDuration); shorter than the table's needs `force`.
        mode: `VacuumMode` (or its value): list the table, or read the removes since
            the last vacuum.
        force: allow a retention shorter than the table's.
        in_flight_grace_ms: keep files no commit removed that are younger than this.
        engine: where the listing (FULL) and the deletes run (`delta_ops.ops.engines`);
            the plan is the same either way.
    """
    if mode not in tuple(VacuumMode):
        raise InvalidValue(f"vacuum mode must be 'full' or 'lite', got {mode!r}")
    mode = VacuumMode(mode)
    snapshot.protocol.check_allows(Access.VACUUM)
    retention, table_retention = resolve_retention(snapshot, retention_ms, force)
    clamped = clock.clamp(now_ms)  # never more destructive than the real clock
    now_ms = clamped.now_ms
    delete_before = now_ms - retention
    storage = snapshot.storage
    latest_outside = version_at(snapshot, delete_before)
    protected = pa.concat_arrays(
        [protected_array(snapshot, delete_before), window_removes(snapshot, latest_outside)]
    )
    tombstones = snapshot.tombstones
    # a tombstone's file and its deletion vector: a commit named both, no running write owns them
    tombstone_paths = (
        set(relative_paths(storage, tombstones.column("path")).drop_null().to_pylist())
        | set(_dv_relative_paths(tombstones).to_pylist())
        if tombstones.num_rows
        else set()
    )
    oldest = oldest_reconstructable_version(snapshot)
    directories: list[str] = []
    protected_set = set(pc.unique(protected).drop_null().to_pylist())
    if mode is VacuumMode.FULL:
        known: list[str] = []
        if not storage.is_local:  # cut points for a parallel listing of the store
            known = [*protected_set, *tombstone_paths]
        listing = engine.list_unprotected(
            storage, hidden_filter(snapshot.partition_columns), protected_set, known
        )
        mtimes = pa.array(listing.mtimes, pa.int64())
        chosen = pc.indices_nonzero(pc.less(mtimes, delete_before)).to_pylist()
        candidates = [
            Candidate(
                listing.paths[i],
                listing.sizes[i],
                listing.mtimes[i],
                _reason(listing.paths[i], tombstone_paths),
            )
            for i in chosen
            # the engine already left protected files out; a deleting op checks again
            if listing.paths[i] not in protected_set
        ]
        protected_dirs = parent_directories(protected)
        directories = sorted(
            (d for d in listing.dirs if d not in protected_dirs), key=lambda d: (-d.count("/"), d)
        )
    else:
        candidates = _lite_candidates(
            snapshot, delete_before, latest_outside, protected_set, tombstone_paths
        )
        # a tombstone through a local symlink leading out, or a deletion vector whose prefix
        # leaves the root: never deleted, so never planned
        candidates = [c for c in candidates if storage.stays_inside(c.path)]
    leftovers = stale_leftovers(storage, min(delete_before, now_ms - MIN_LEFTOVER_AGE_MS))
    candidates.extend(
        Candidate(item.path, item.size, item.modification_time, LEFTOVER) for item in leftovers
    )
    directories.extend(staging_directories(leftovers))
    in_flight_cutoff = now_ms - max(0, in_flight_grace_ms)
    young = [
        c
        for c in candidates
        if c.reason not in COMMITTED_REASONS and c.modification_time > in_flight_cutoff
    ]
    named = _change_data_commits_name(snapshot, young)
    young = [c for c in young if c.path not in named]
    if young:
        young_paths = {c.path for c in young}
        candidates = [c for c in candidates if c.path not in young_paths]
        directories = [
            d for d in directories if not any(p.startswith(d + "/") for p in young_paths)
        ]
    candidates.sort(key=lambda c: c.path)
    return VacuumPlan(
        table=storage.url,
        mode=mode,
        now_ms=now_ms,
        retention_ms=retention,
        table_retention_ms=table_retention,
        specified_retention=retention_ms is not None,
        delete_before_ms=delete_before,
        candidates=tuple(candidates),
        directories=tuple(directories),
        latest_commit_outside_retention=latest_outside,
        kept_in_flight=tuple(sorted(c.path for c in young)),
        requested_now_ms=clamped.requested_ms,
        oldest_reconstructable_version=oldest,
        engine=engine,
        snapshot=snapshot,
    )


def read_last_vacuum_info(storage: Storage) -> int | None:
    try:
        data = json.loads(storage.read_bytes(storage.log_file(LAST_VACUUM_INFO)))
    except (FileNotFoundError, json.JSONDecodeError, UnicodeDecodeError):
        return None
    value = (
        data.get("latestCommitVersionOutsideOfRetentionWindow") if isinstance(data, dict) else None
    )
    return value if isinstance(value, int) else None


def _lite_candidates(
    snapshot: Snapshot,
    delete_before: int,
    end: int | None,
    protected_files: set[str],
    tombstone_paths: set[str],
) -> list[Candidate]:
    storage = snapshot.storage
    commits = sorted(
        (f for f in snapshot.segment.listing if f.kind is LogFileKind.COMMIT),
        key=lambda f: f.version,
    )
    if end is None or not commits:
        return []
    earliest = commits[0].version
    last = read_last_vacuum_info(storage)
    if earliest != 0 and (last is None or last < earliest):
        raise VacuumLiteRefused(
            f"{storage.url}: VACUUM LITE cannot delete all eligible files as some files are not referenced "
            f"by the Delta log (commits before version {earliest} were cleaned up"
            + (
                f", last vacuum covered up to {last})"
                if last is not None
                else ", and no previous vacuum is recorded)"
            )
            + ". Run a FULL vacuum."
        )
    start = min(snapshot.version, last + 1 if last is not None else earliest)
    scan = [f for f in commits if start <= f.version <= end]
    removed = removed_files(storage, scan)
    seen: dict[str, int] = {}  # relative path -> deletion time (0: change data, always old)
    for path, stamp in zip(
        pa.concat_arrays([removed.paths, removed.dv_paths]).to_pylist(),
        pa.concat_arrays([removed.timestamps, removed.dv_timestamps]).to_pylist(),
    ):
        if path is not None:
            seen[path] = stamp or 0
    for path in removed.change_data.to_pylist():
        seen[path] = 0
    out = []
    for rel, deleted_at in seen.items():
        if rel in protected_files or deleted_at >= delete_before:
            continue
        info = storage.stat(storage.join(rel))
        if info is None:
            continue  # already gone
        out.append(
            Candidate(rel, info.size, deleted_at, _reason(rel, tombstone_paths, removed=True))
        )
    return out


# ----------------------------------------------------------------------------- execute
@timed
def execute_vacuum(plan: VacuumPlan) -> VacuumResult:
    """Delete what the plan lists, bracketed by VACUUM START / END commits."""
    snapshot = plan.snapshot
    assert snapshot is not None
    storage = snapshot.storage
    if plan.nothing_to_do:
        _write_last_vacuum_info(storage, plan)
        return VacuumResult(plan.table, plan.mode, plan.retention_ms, (), 0, 0, 0, (), ())
    params = {
        "retentionCheckEnabled": True,
        "defaultRetentionMillis": plan.table_retention_ms,
        **({"specifiedRetentionMillis": plan.retention_ms} if plan.specified_retention else {}),
    }
    start_txn = Transaction(
        snapshot, operation="VACUUM START", parameters=params, purpose=Access.VACUUM
    )
    start_txn.metrics = {"numFilesToDelete": len(plan.candidates), "sizeOfDataToDelete": plan.bytes}
    start_version = start_txn.commit().version
    # re-read the log: files that commits landing since the plan reference must survive
    seen_version, referenced = committed_since(storage, snapshot.version)
    to_delete = [c for c in plan.candidates if c.path not in referenced]
    kept = tuple(c.path for c in plan.candidates if c.path in referenced)
    referenced_dirs = parent_directories(pa.array(sorted(referenced), pa.string()))
    deleted: list[Candidate] = []
    dirs_removed = 0
    status, error = "COMPLETED", None
    try:
        deleted = _delete_files(storage, to_delete, plan.engine)
        dirs_removed = storage.remove_empty_dirs(
            [d for d in plan.directories if d not in referenced_dirs]
        )
    except Exception as exc:  # noqa: BLE001 - recorded in VACUUM END, then re-raised
        status, error = "FAILED", exc
    end_txn = Transaction(
        snapshot,
        operation="VACUUM END",
        parameters={"status": status},
        known_version=max(seen_version, start_version),
        purpose=Access.VACUUM,
    )
    if status == "COMPLETED":
        end_txn.metrics = {"numDeletedFiles": len(deleted), "numVacuumedDirectories": dirs_removed}
    end_version = end_txn.commit().version
    if error is not None:
        raise error
    _write_last_vacuum_info(storage, plan)
    return VacuumResult(
        table=plan.table,
        mode=plan.mode,
        retention_ms=plan.retention_ms,
        deleted=tuple(c.path for c in deleted),
        num_deleted=len(deleted),
        bytes=sum(c.size for c in deleted),
        num_vacuumed_directories=dirs_removed,
        kept_after_recheck=kept,
        commits=(start_version, end_version),
    )


def committed_since(storage: Storage, version: int) -> tuple[int, set[str]]:
    """(newest version, relative paths of files and DV files added) of commits after `version`.

    Only the new commits are read, so the re-check before deleting costs what landed since the
    plan. A protocol change among them that delta-ops cannot write stops the vacuum.
    """
    newer = sorted(
        f.version
        for f in parse_listing(storage.list_log(from_version=version + 1))
        if f.kind is LogFileKind.COMMIT and f.version > version
    )
    referenced: set[str] = set()
    latest = version
    for v in newer:
        if v != latest + 1:
            break  # a gap: versions after it are not committed yet
        latest = v
        for action in read_commit_actions(storage, v):
            if "protocol" in action:
                Protocol.from_action(action["protocol"]).check_allows(Access.VACUUM)
            add = action.get("add")
            if add is None:
                continue
            rel = relative_path(storage, add["path"])
            if rel is not None:
                referenced.add(rel)
            if add.get("deletionVector"):
                dv_path = DeletionVectorDescriptor.from_dict(add["deletionVector"]).relative_path()
                if dv_path:
                    referenced.add(dv_path)
    return latest, referenced


def _delete_files(storage: Storage, candidates: list[Candidate], engine: Engine) -> list[Candidate]:
    """Delete the candidates' files (never outside the root), reporting progress; the ones
    deleted or already gone."""
    sizes = {c.path: c.size for c in candidates}
    with progress.task(
        "vacuum: deleting", files=len(candidates), bytes=sum(sizes.values())
    ) as task:

        def done(paths: Sequence[str]) -> None:
            task.advance(files=len(paths), bytes=sum(sizes[p] for p in paths))

        deleted = set(engine.delete(storage, list(sizes), done))
    return [c for c in candidates if c.path in deleted]


def _write_last_vacuum_info(storage: Storage, plan: VacuumPlan) -> None:
    """Record how far this vacuum looked, so the next LITE vacuum can start there.

    Spark writes `{}` after FULL, which makes the next LITE refuse once history is cleaned up;
    a FULL vacuum has seen every file up to that commit, so we record it too.
    """
    if plan.latest_commit_outside_retention is None:
        return
    data = json.dumps(
        {"latestCommitVersionOutsideOfRetentionWindow": plan.latest_commit_outside_retention}
    ).encode()
    storage.write_atomic(storage.log_file(LAST_VACUUM_INFO), data)


# ------------------------------------------------------------------------------ the operation
@dataclass(frozen=True)
class VacuumOptions:
    """The vacuum operation's options (see its `OPERATION`)."""

    retention: int | None = None
    mode: str = "full"
    force: bool = False
    engine: str = "local"
    now: int | None = None
    in_flight_grace: int | None = None


def _plan_vacuum(snapshot: Snapshot, options: VacuumOptions, engine: Engine) -> VacuumPlan:
    grace = options.in_flight_grace
    return plan_vacuum(
        snapshot,
        requested_now(options.now),
        retention_ms=options.retention,
        mode=options.mode,
        force=options.force,
        engine=engine,
        **({"in_flight_grace_ms": grace} if grace is not None else {}),
    )


def describe_plan(plan: VacuumPlan) -> str:
    head = (
        f"would delete {len(plan.candidates)} files ({format_bytes(plan.bytes)}) and"
        f" {len(plan.directories)} empty directories at most ({plan.mode},"
        f" retention {format_duration(plan.retention_ms)})"
    )
    if plan.window_reaches_past_history:
        head += (
            "; the retention window starts before version"
            f" {plan.oldest_reconstructable_version}, the oldest the log can still rebuild"
        )
    lines = [head]
    lines += [
        f"{c.path}\t{format_bytes(c.size)}\t"
        f"{format_duration((plan.now_ms - c.modification_time) // 3_600_000 * 3_600_000)} old"
        f"\t{c.reason}"
        for c in plan.candidates
    ]
    return "\n".join(lines)


def describe_result(result: VacuumResult) -> str:
    return (
        f"deleted {result.num_deleted} files ({format_bytes(result.bytes)}),"
        f" {result.num_vacuumed_directories} directories; commits {list(result.commits) or 'none'}"
    )


OPERATION: Operation[VacuumOptions, VacuumPlan, VacuumResult] = Operation(
    name="vacuum",
    needs=Access.VACUUM,
    help="delete data files no retained version needs",
    options=(
        Option(
            "retention",
            OptionKind.DURATION,
            "delete files unneeded for this long (default: delta.deletedFileRetentionDuration)",
        ),
        Option(
            "mode",
            OptionKind.CHOICE,
            "full (list the table) or lite (the log's removes)",
            "full",
            ("full", "lite"),
        ),
        Option("force", OptionKind.FLAG, "allow a retention shorter than the table's", False),
        ENGINE_OPTION,
        Option(
            "now",
            OptionKind.TIME,
            "judge ages as of this time (never later than now)",
            cli_only=True,
        ),
        Option(
            "in_flight_grace",
            OptionKind.DURATION,
            "keep untracked files younger than this (default 1m; 0s = exactly Spark)",
            cli_only=True,
        ),
    ),
    options_type=VacuumOptions,
    plan_with=_plan_vacuum,
    execute_with=lambda plan, progress: execute_vacuum(plan),
    describe_plan=describe_plan,
    describe_result=describe_result,
    touched=lambda result: (result.num_deleted, result.bytes),
)


__all__ = [
    "OPERATION",
    "Candidate",
    "VacuumLiteRefused",
    "VacuumPlan",
    "VacuumResult",
    "execute_vacuum",
    "is_hidden",
    "plan_vacuum",
]
