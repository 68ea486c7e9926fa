"""Metadata (log) cleanup with Delta Spark's truncated-day cutoff and whole-segment rule: what
the cleanup operation (`delta_ops.ops.cleanup`) runs, drop-feature's history truncation (with a
minute cutoff) as well, and what the health check and the fleet planner ask of a table.

Plan (pure except for listing and reading the log):

1. ``cutoff = floor_to_utc_midnight(now - retention)``; retention is ``--retention`` or the
   table's ``delta.logRetentionDuration`` (30 days). ``delta.enableExpiredLogCleanup=false``
   means nothing is deleted. A file's time is its commit's in-commit timestamp on tables that
   keep them (from the enabling version on, as time travel resolves times), its modification
   time otherwise.
2. Without a readable ``_last_checkpoint`` nothing is deleted; otherwise versions up to
   ``_last_checkpoint.version - 1`` may go.
3. Walk commits, checkpoints of every form and ``.crc`` files in name order (per version:
   checkpoint < crc < json), making modification times monotonic. A complete, non-empty
   checkpoint whose time needed no adjustment is a flush point: if the newest file before it
   and every commit before it are older than the cutoff and within the version cap, and so was
   every segment before, that whole segment is deleted (Spark looks only at the newest file,
   which with skewed clocks can hide a younger commit: a version's later files keep their own
   times). So
   every retained version can be rebuilt from the boundary checkpoint C plus JSON. Another
   complete checkpoint of a flush point's version (left by concurrent writers) is no flush
   point: it stays with the files after C.
4. The boundary checkpoint must be readable (it is read before anything is deleted; an
   unreadable one falls back to the previous boundary). Compacted files ending below C, and
   (V2 tables) sidecars no remaining checkpoint references that are older than the cutoff, go
   too. Nothing at or after C is ever deleted.

Execute: write the V2 compatibility checkpoint first when the boundary is UUID-named (so old
readers still find the protocol), delete oldest first, then load the latest snapshot and the
oldest retained version as a self-check.

For example:

    plan = plan_cleanup(load_snapshot(path), now_ms=now)
    print(plan.to_dict())      # dry run, with what is kept and why
    execute_cleanup(plan)
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from delta_ops import clock
from delta_ops.errors import ConcurrentModification, CorruptLog, InvalidValue
from delta_ops.log.checkpoint_content import (
    ADD_BASE_FIELDS,
    CHECKPOINT_METADATA_TYPE,
    DOMAIN_TYPE,
    METADATA_TYPE,
    PROTOCOL_TYPE,
    REMOVE_TYPE,
    SIDECAR_TYPE,
    TXN_TYPE,
    to_arrow_value,
)
from delta_ops.log.file_names import (
    SIDECARS_DIR,
    LogFile,
    LogFileKind,
    classic_checkpoint_name,
    parse_listing,
)
from delta_ops.log.reader import parse_action_lines, sidecar_names, verify_checkpoint
from delta_ops.log.segment import build_log_segment, complete_checkpoints
from delta_ops.ops.operation import Timed, timed
from delta_ops.ops.results import fields_data
from delta_ops.protocol.features import Access
from delta_ops.protocol.units import format_duration, format_time_ms
from delta_ops.storage import Storage
from delta_ops.table.commit_times import CommitClock
from delta_ops.table.snapshot import Snapshot, TableHead, load_head

logger = logging.getLogger(__name__)

_KIND_ORDER = {
    LogFileKind.CLASSIC_CHECKPOINT: 0,
    LogFileKind.MULTI_PART_CHECKPOINT: 0,
    LogFileKind.V2_CHECKPOINT: 0,
    LogFileKind.CHECKSUM: 1,
    LogFileKind.COMMIT: 2,
}


DAY_MS = 86_400_000


@dataclass(frozen=True)
class CleanupPlan:
    """What log cleanup will delete; `to_dict()` is the dry-run report."""

    table: str
    cutoff_ms: int
    retention_ms: int
    boundary_checkpoint_version: int | None
    deleted: tuple[str, ...]  # names under _delta_log (sidecars as "_sidecars/<name>")
    kept_reasons: tuple[str, ...]
    write_compat_checkpoint: str | None  # V2 boundary: classic-named copy to write first
    oldest_retained_version: int | None
    snapshot: Snapshot | TableHead = field(repr=False, compare=False)
    now_ms: int = 0  # the clock the cutoff was judged by (never later than the wall clock)
    requested_now_ms: int | None = None  # what the caller asked for, when it was clamped
    #: checkpointProtection's `delta.requireCheckpointProtectionBeforeVersion` (0: none): the
    #: log before it goes in one go or not at all, commits before checkpoints
    protected_before_version: int = 0

    @property
    def nothing_to_do(self) -> bool:
        return not self.deleted

    @property
    def idle_reason(self) -> str:
        """Why the plan has nothing to do (when it has nothing to do)."""
        return "; ".join(self.kept_reasons) or "no expired log files"

    def to_dict(self) -> dict[str, Any]:
        return fields_data(
            self, cutoff=format_time_ms(self.cutoff_ms), num_deleted=len(self.deleted)
        )


@dataclass(frozen=True)
class CleanupResult(Timed):
    table: str
    cutoff: str
    boundary_checkpoint_version: int | None
    deleted: tuple[str, ...]
    num_deleted: int
    compat_checkpoint_written: str | None
    oldest_retained_version: int | None
    kept_reasons: tuple[str, ...] = ()  # why older log files were kept (the plan's)

    def to_dict(self) -> dict[str, Any]:
        return fields_data(self)


def _sort_key(f: LogFile) -> tuple[int, int, str]:
    return (f.version, _KIND_ORDER.get(f.kind, 3), f.name)


@dataclass
class _Segment:
    """Files buffered before one flush-point checkpoint, and whether they may be deleted."""

    checkpoint_version: int
    checkpoint_files: list[LogFile]
    files: list[LogFile]
    deletable: bool


def _segments(
    files: list[LogFile], expired: Callable[[LogFile, int], bool], max_version: int
) -> list[_Segment]:
    """Spark's BufferingLogDeletionIterator: the segments between complete checkpoints.
    `expired(file, adjusted_mtime)` says whether a file is past the cutoff."""
    candidates = sorted((f for f in files if f.kind in _KIND_ORDER), key=_sort_key)
    segments: list[_Segment] = []
    buffer: list[tuple[LogFile, int]] = []
    pending_parts: dict[tuple[int, int], list[tuple[LogFile, int]]] = defaultdict(list)
    spoiled: set[tuple[int, int]] = set()
    prev_version, prev_time = -1, -1
    for f in candidates:
        adjusted = f.modification_time
        was_adjusted = False
        # a newer version must be newer in time; copies and clock skew are corrected forward
        if f.version > prev_version and adjusted <= prev_time:
            adjusted, was_adjusted = prev_time + 1, True
        prev_version, prev_time = f.version, adjusted
        flush_files: list[tuple[LogFile, int]] | None = None
        if f.kind is LogFileKind.MULTI_PART_CHECKPOINT:
            # parts wait on the side until all n are seen; one adjusted or empty part spoils
            # the whole checkpoint as a flush point, and parts of an incomplete one are kept
            key = (f.version, f.num_parts or 0)
            pending_parts[key].append((f, adjusted))
            if was_adjusted or f.size == 0:
                spoiled.add(key)
            if len({p.part for p, _ in pending_parts[key]}) < key[1]:
                continue
            parts = pending_parts.pop(key)
            if key in spoiled:
                buffer.extend(parts)  # an ordinary file, as Spark treats adjusted checkpoints
                continue
            flush_files = parts
        elif f.is_checkpoint and f.size > 0 and not was_adjusted:
            flush_files = [(f, adjusted)]
        if flush_files is None:
            buffer.append((f, adjusted))
            continue
        if segments and segments[-1].checkpoint_version == f.version:
            # a second complete checkpoint of the flush point's version (concurrent writers):
            # not a boundary of its own, whose segment would hold the first one's files
            buffer.extend(flush_files)
            continue
        # Spark judges a segment by its newest file. Times are monotonic across versions but
        # not within one (a version's later files keep their own times), so with writers'
        # clocks skewed a young commit can sit before an old-looking file: every commit of
        # the segment must be past the cutoff too (a checksum or checkpoint written later
        # says nothing of its version's age), and so must every segment before it
        deletable = (
            bool(buffer)
            and all(s.deletable or not s.files for s in segments)
            and buffer[-1][0].version <= max_version
            and expired(*buffer[-1])
            and all(expired(b, t) for b, t in buffer if b.kind is LogFileKind.COMMIT)
        )
        segments.append(
            _Segment(f.version, [p for p, _ in flush_files], [b for b, _ in buffer], deletable)
        )
        buffer = list(flush_files)
    return segments


def _expiry(snapshot: Snapshot | TableHead, cutoff_ms: int) -> Callable[[LogFile, int], bool]:
    """Whether a log file is past the cutoff: by its commit's in-commit timestamp from the
    version that enabled them on (the newest such commit at or before the cutoff is found
    by binary search), by its (monotonic) modification time before that."""
    commit_clock = CommitClock.of(snapshot)
    newest_expired: list[int | None] = []  # looked up once, when first needed

    def expired(f: LogFile, adjusted_mtime: int) -> bool:
        if not commit_clock.uses_ict(f.version):
            return adjusted_mtime <= cutoff_ms
        if not newest_expired:
            newest_expired.append(commit_clock.newest_ict_version_at_or_before(cutoff_ms))
        boundary = newest_expired[0]
        return boundary is not None and f.version <= boundary

    return expired


def _readable(storage: Storage, checkpoint: list[LogFile]) -> bool:
    """Whether a checkpoint can serve as the boundary: every part's footer parses and its
    action paths read, and so do all the sidecars it references (a truncated, damaged or
    missing file fails here, so the older log it would replace is kept)."""
    try:
        verify_checkpoint(storage, checkpoint)
        return True
    except CorruptLog as exc:
        logger.warning(
            "%s: checkpoint %s is not readable (%s); not using it as a cleanup boundary",
            storage.url,
            checkpoint[0].name,
            exc,
        )
        return False


def plan_cleanup(
    snapshot: Snapshot | TableHead,
    now_ms: int,
    *,
    retention_ms: int | None = None,
    truncate_to_ms: int = DAY_MS,
    even_if_disabled: bool = False,
) -> CleanupPlan:
    """Plan log cleanup of `snapshot`'s table as of `now_ms`, which is clamped to the wall
    clock (`delta_ops.clock.clamp`): a later time never deletes log the real clock keeps.

    `truncate_to_ms` is the cutoff's granularity (Spark's: a UTC day; a feature drop that
    truncates history uses a minute), and `even_if_disabled` cleans up a table whose
    `delta.enableExpiredLogCleanup` is false (as DROP FEATURE ... TRUNCATE HISTORY does)."""
    clamped = clock.clamp(now_ms)
    plan = _plan_cleanup(snapshot, clamped.now_ms, retention_ms, truncate_to_ms, even_if_disabled)
    return replace(plan, now_ms=clamped.now_ms, requested_now_ms=clamped.requested_ms)


def _plan_cleanup(
    snapshot: Snapshot | TableHead,
    now_ms: int,
    retention_ms: int | None,
    truncate_to_ms: int = DAY_MS,
    even_if_disabled: bool = False,
) -> CleanupPlan:
    storage = snapshot.storage
    snapshot.protocol.check_allows(Access.CLEANUP)
    props = snapshot.properties
    retention = props.log_retention_ms if retention_ms is None else retention_ms
    if retention < 0:
        raise InvalidValue(f"log retention must not be negative, got {retention} ms")
    cutoff = (now_ms - retention) // truncate_to_ms * truncate_to_ms

    def nothing(reason: str, boundary: int | None = None) -> CleanupPlan:
        return CleanupPlan(
            storage.url, cutoff, retention, boundary, (), (reason,), None, None, snapshot
        )

    if not props.enable_expired_log_cleanup and not even_if_disabled:
        return nothing(
            "delta.enableExpiredLogCleanup is false: log cleanup is disabled for this table"
        )
    # the hint the load read with its listing: a newer one (another writer's checkpoint since)
    # only raises the version cap, so the older one errs on the side of keeping
    hint = snapshot.segment.last_checkpoint
    if hint.info is None:
        return nothing(
            f"no readable _last_checkpoint ({hint.problem}): nothing is deleted without it"
            " (a checkpoint run writes it)"
        )
    files = list(snapshot.segment.listing)  # the listing the table was just loaded from
    segments = _segments(files, _expiry(snapshot, cutoff), hint.info.version - 1)
    deletable = [s for s in segments if s.deletable]
    while deletable and not _readable(storage, deletable[-1].checkpoint_files):
        deletable.pop()  # fall back to the previous boundary
    if not deletable:
        reasons = [
            (
                "no complete, readable checkpoint has all older log files past the cutoff "
                f"{format_time_ms(cutoff)} (everything newer is inside the log retention of"
                f" {format_duration(retention)})"
            )
        ]
        return nothing(reasons[0])
    boundary = deletable[-1]
    c = boundary.checkpoint_version
    doomed = {
        f.name for s in segments if s.deletable and s.checkpoint_version <= c for f in s.files
    }
    doomed |= {
        f.name for f in files if f.kind is LogFileKind.COMPACTED and (f.end_version or 0) < c
    }
    assert all(not (f.version >= c and f.name in doomed) for f in files), (
        "never delete at or after the boundary"
    )

    compat = None
    supports_v2 = snapshot.protocol.supports("v2Checkpoint")
    if supports_v2 and boundary.checkpoint_files[0].kind is LogFileKind.V2_CHECKPOINT:
        has_classic = any(
            f.version == c
            and f.kind in (LogFileKind.CLASSIC_CHECKPOINT, LogFileKind.MULTI_PART_CHECKPOINT)
            for f in files
        )
        if not has_classic:
            compat = classic_checkpoint_name(c)
    protected = protection_version(snapshot)
    if protected:
        refusal = _protection_refusal(storage, files, doomed, c, protected, compat is not None)
        if refusal is not None:
            return nothing(refusal, c)
    checkpoint_names = {f.name for f in files if f.is_checkpoint}
    if supports_v2 and not doomed.isdisjoint(checkpoint_names):
        doomed |= {f"{SIDECARS_DIR}/{n}" for n in _orphan_sidecars(storage, files, doomed, cutoff)}
    kept = [
        f"boundary checkpoint {boundary.checkpoint_files[0].name}: it and everything newer are kept"
    ]
    return CleanupPlan(
        table=storage.url,
        cutoff_ms=cutoff,
        retention_ms=retention,
        boundary_checkpoint_version=c,
        deleted=tuple(sorted(doomed)),
        kept_reasons=tuple(kept),
        write_compat_checkpoint=compat,
        oldest_retained_version=c,
        snapshot=snapshot,
        protected_before_version=protected,
    )


def protection_version(snapshot: Snapshot | TableHead) -> int:
    """`delta.requireCheckpointProtectionBeforeVersion` where the table supports
    checkpointProtection; 0 where it protects nothing."""
    if not snapshot.protocol.supports("checkpointProtection"):
        return 0
    return snapshot.properties.require_checkpoint_protection_before_version


def _protection_refusal(
    storage: Storage,
    files: list[LogFile],
    doomed: set[str],
    boundary: int,
    protected: int,
    writes_compat: bool,
) -> str | None:
    """Why checkpointProtection forbids this cleanup (None: it allows it), as Delta Spark's
    `metadataCleanupAllowed` reads the protocol's writer requirements: the commits before
    the protected version `protected` go all at once, or the cleanup stops at a complete
    checkpoint of the version after the last commit it deletes (so no checkpoint is needed
    there: none is created below `protected`); the V2 compatibility checkpoint, a checkpoint
    created below `protected`, only where delta-ops supports that version's protocol."""
    deleted = sorted(
        f.version
        for f in files
        if f.kind is LogFileKind.COMMIT and f.name in doomed and f.version < protected
    )
    if deleted and deleted[-1] < protected - 1:
        after = deleted[-1] + 1
        complete = {ref.version for ref in complete_checkpoints(files)}
        if after not in complete:
            return (
                f"checkpointProtection: the log before version {protected} may only go at once,"
                f" and no checkpoint of version {after} stands where this cleanup would stop"
            )
    if writes_compat and boundary < protected:
        refusal = load_head(storage, boundary).protocol.refusal(Access.CHECKPOINT)
        if refusal is not None:
            return (
                f"checkpointProtection: the compatibility checkpoint of version {boundary} (below"
                f" the protected version {protected}) needs that version's protocol: {refusal}"
            )
    return None


def _orphan_sidecars(
    storage: Storage, files: list[LogFile], doomed: set[str], cutoff_ms: int
) -> list[str]:
    """Sidecars referenced by no remaining checkpoint and older than the cutoff."""
    kept = [f for f in files if f.is_checkpoint and f.name not in doomed]
    try:
        referenced = set(sidecar_names(storage, kept))
    except CorruptLog as exc:
        # a kept checkpoint we cannot read may reference any sidecar: delete none
        logger.warning("%s: not deleting sidecars: %s", storage.url, exc)
        return []
    # hidden names (e.g. Hadoop's `.<sidecar>.crc`) are not sidecars: Spark never lists them
    return [
        e.name
        for e in storage.list_log(SIDECARS_DIR)
        if not e.name.startswith(".")
        and e.name not in referenced
        and e.modification_time < cutoff_ms
    ]


def _write_compat_checkpoint(plan: CleanupPlan) -> str | None:
    """Classic-named copy of the V2 boundary checkpoint: the same rows, pointing at the same
    sidecars, so readers that only know classic names find the protocol and fail cleanly."""
    storage = plan.snapshot.storage
    name = plan.write_compat_checkpoint
    assert name is not None and plan.boundary_checkpoint_version is not None
    files = parse_listing(storage.list_log())
    tops = [
        f
        for f in files
        if f.version == plan.boundary_checkpoint_version and f.kind is LogFileKind.V2_CHECKPOINT
    ]
    if not tops:
        raise ConcurrentModification(
            f"V2 boundary checkpoint at version {plan.boundary_checkpoint_version} disappeared"
            " while cleaning up; run again"
        )
    top = tops[0]
    data = storage.read_bytes(storage.log_file(top.name))
    if top.format == "parquet":
        created = storage.put_if_absent(storage.log_file(name), data)  # same rows: same bytes
    else:
        table = compat_table_from_json(data)
        created, _ = storage.create_new(
            storage.log_file(name), lambda sink: pq.write_table(table, sink, compression="snappy")
        )
    return name if created else None


def _deletion_order(name: str, plan: CleanupPlan) -> tuple[bool, bool, str]:
    """Oldest first, sidecars last; under checkpointProtection every commit before any
    checkpoint (the protocol's writer requirement (d): a crash leaves the checkpoints)."""
    checkpoint = plan.protected_before_version > 0 and ".checkpoint." in name
    return name.startswith(SIDECARS_DIR), checkpoint, name


def compat_table_from_json(data: bytes) -> pa.Table:
    """The rows of a JSON V2 top-level checkpoint as a typed checkpoint table."""
    schema = pa.schema(
        [
            ("txn", TXN_TYPE),
            ("add", pa.struct(ADD_BASE_FIELDS)),
            ("remove", REMOVE_TYPE),
            ("metaData", METADATA_TYPE),
            ("protocol", PROTOCOL_TYPE),
            ("domainMetadata", DOMAIN_TYPE),
            ("checkpointMetadata", CHECKPOINT_METADATA_TYPE),
            ("sidecar", SIDECAR_TYPE),
        ]
    )
    rows = parse_action_lines("V2 checkpoint", data)
    columns = []
    for f in schema:
        columns.append(pa.array([to_arrow_value(r.get(f.name), f.type) for r in rows], f.type))
    return pa.Table.from_arrays(columns, schema=schema)


@timed
def execute_cleanup(plan: CleanupPlan) -> CleanupResult:
    """Delete what the plan lists, oldest first, after the V2 compatibility checkpoint."""
    storage = plan.snapshot.storage
    compat = None
    if plan.deleted:
        if plan.write_compat_checkpoint:
            compat = _write_compat_checkpoint(plan)
        ordered = sorted(plan.deleted, key=lambda n: _deletion_order(n, plan))
        storage.delete(storage.log_file(n) for n in ordered)
        # self-check from one listing after the deletes: the latest version and the oldest
        # kept one still have a checkpoint and contiguous commits (build_log_segment raises
        # otherwise)
        latest = build_log_segment(storage)
        if plan.oldest_retained_version is not None:
            build_log_segment(
                storage,
                plan.oldest_retained_version,
                listing=latest.listing,
                last_checkpoint=latest.last_checkpoint,
            )
    return CleanupResult(
        table=plan.table,
        cutoff=format_time_ms(plan.cutoff_ms),
        boundary_checkpoint_version=plan.boundary_checkpoint_version,
        deleted=plan.deleted,
        num_deleted=len(plan.deleted),
        compat_checkpoint_written=compat,
        oldest_retained_version=plan.oldest_retained_version,
        kept_reasons=plan.kept_reasons,
    )
