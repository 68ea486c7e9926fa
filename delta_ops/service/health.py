"""What maintenance a table needs now: the facts, gathered from its log by asking the
operations' planners.

The Dagster sensors, schedules and asset checks, the fleet planner and `delta-ops inspect`
ask the same questions: is a checkpoint due, does log cleanup or vacuum have work, how many
files would a compaction rewrite, is row tracking fully on? This module gathers the facts from
a loaded snapshot and a look at the ages of a bounded number of files (`due_facts`,
`table_health`); `delta_ops.service.due` holds the rule that turns them into what is
due. It sits above the ops whose plans it reads (cleanup, compaction, vacuum), so none of them
depends on it.

For example:

    verdicts = judge(due_facts(snapshot, clock.now_ms()))     # what is due (service.due)
    facts = table_health(snapshot, clock.now_ms())            # what the asset checks judge
    advice = health(snapshot, clock.now_ms(), leftovers=0).advice   # what inspect prints
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

import pyarrow as pa
import pyarrow.compute as pc

from delta_ops.errors import OperationRefused, UnsafePath, UnsupportedFeature
from delta_ops.layout.clustering import ClusteringLayout, clustering_layout
from delta_ops.log.file_names import SIDECARS_DIR, LogFileKind
from delta_ops.ops.compact import files_to_compact
from delta_ops.ops.log_cleanup import plan_cleanup
from delta_ops.ops.vacuum import read_last_vacuum_info
from delta_ops.protocol.features import KEEPS_DATA, Access
from delta_ops.protocol.units import format_duration
from delta_ops.service.due import Action, DueFacts, Verdict, Verdicts, judge
from delta_ops.storage import FileEntry
from delta_ops.table.checksum import ChecksumCheck, check_checksum
from delta_ops.table.commit_times import version_at
from delta_ops.table.deletion_vector_check import DeletionVectorCheck, check_deletion_vectors
from delta_ops.table.snapshot import Snapshot

STAT_LIMIT = 1000  # expired tombstones whose files a probe looks at (oldest first)


def reclaimable_tombstones(snapshot: Snapshot, cutoff_ms: int) -> tuple[int, int]:
    """(count, bytes) of expired tombstones whose files vacuum would really delete: the file
    still exists and is older than the cutoff (vacuum judges files by age too).

    A tombstone stays in the log after vacuum deleted its file (until a checkpoint drops it),
    a file that got a deletion vector is a tombstone and a live file under one path, and a
    copied table has fresh files under old tombstones; counting those would make a
    schedule launch a vacuum that deletes nothing every day, and a check warn forever. Only the
    oldest STAT_LIMIT are looked at; the rest are counted as the log says.
    """
    tombstones = snapshot.tombstones
    if not tombstones.num_rows:
        return 0, 0
    # one path can have several tombstones (one per deletion vector it was removed with):
    # its file is expired only once the newest of them is
    by_path = tombstones
    if tombstones.num_rows > 1:
        newest = (
            tombstones.select(["path", "deletionTimestamp", "size"])
            .set_column(
                1, "deletionTimestamp", pc.fill_null(tombstones.column("deletionTimestamp"), 0)
            )
            .group_by("path")
            .aggregate([("deletionTimestamp", "max"), ("size", "max")])
        )
        by_path = pa.table(
            {
                "path": newest.column("path"),
                "deletionTimestamp": newest.column("deletionTimestamp_max"),
                "size": newest.column("size_max"),
            }
        )
    stamps = pc.fill_null(by_path.column("deletionTimestamp"), 0)
    # a file given a deletion vector (or re-added) is removed and added under the same path:
    # it is live, and vacuum keeps it
    live = pc.is_in(by_path.column("path"), value_set=snapshot.file_index.column("path"))
    expired = by_path.filter(pc.and_(pc.less(stamps, cutoff_ms), pc.invert(live)))
    if not expired.num_rows:
        return 0, 0
    expired = expired.sort_by([("deletionTimestamp", "ascending")])
    storage = snapshot.storage
    count = size = 0
    looked = expired.slice(0, STAT_LIMIT)
    for path, recorded in zip(looked.column("path").to_pylist(), looked.column("size").to_pylist()):
        try:
            relative = storage.relative_inside_root(path)
        except UnsafePath:
            continue  # outside the table: vacuum never deletes it, so it reclaims nothing
        if not storage.stays_inside(relative):
            continue  # through a symlink leading out: the same
        entry = storage.stat(storage.join(relative))
        if entry is not None and entry.modification_time < cutoff_ms:
            count += 1
            size += entry.size if recorded is None else int(recorded)
    rest = expired.slice(STAT_LIMIT)
    count += rest.num_rows
    size += int(pc.sum(pc.fill_null(rest.column("size"), 0)).as_py() or 0)
    return count, size


def _commits_past(snapshot: Snapshot, cutoff_ms: int) -> bool:
    """Whether a commit before the latest version was last modified before `cutoff_ms`."""
    return any(
        f.kind is LogFileKind.COMMIT
        and f.version < snapshot.version
        and 0 < f.modification_time < cutoff_ms
        for f in snapshot.segment.listing
    )


#: the operations' protocol checks behind each judged action
_ACCESS = {
    Action.CHECKPOINT: Access.CHECKPOINT,
    Action.CLEANUP: Access.CLEANUP,
    Action.VACUUM: Access.VACUUM,
    Action.COMPACT: Access.COMPACT,
    Action.PURGE: Access.REWRITE,
}


def due_facts(
    snapshot: Snapshot,
    now_ms: int,
    *,
    log_retention_ms: int | None = None,
    file_retention_ms: int | None = None,
    log: Sequence[FileEntry] | None = None,
    rewrites: bool = True,
) -> DueFacts:
    """What `delta_ops.service.due.judge` reads, from a loaded snapshot and the ages of a
    bounded number of files, with the retentions the runs will use (None: the table's
    ``delta.logRetentionDuration`` and ``delta.deletedFileRetentionDuration``). `log`: the
    files directly in `_delta_log`, when the caller listed them already. `rewrites=False`
    leaves compaction and purge unjudged (the small-file count packs every live file as a
    compaction would: on a 300k-file table the most costly fact)."""
    refused = {
        action: why
        for action, access in _ACCESS.items()
        if (rewrites or access in KEEPS_DATA)
        and (why := snapshot.protocol.refusal(access)) is not None
    }
    idle: dict[Action, str] = {}
    checkpoint_version = snapshot.segment.checkpoint_version
    since = (
        snapshot.version - checkpoint_version
        if checkpoint_version is not None
        else snapshot.version + 1
    )
    interval = snapshot.properties.checkpoint_interval
    cleanup_files, waits = 0, False
    if Action.CLEANUP not in refused:
        cleanup_plan = plan_cleanup(snapshot, now_ms, retention_ms=log_retention_ms)
        cleanup_files = len(cleanup_plan.deleted)
        # a checkpoint of the latest version, written first in the same run, lets commits past
        # the log retention go (Delta Spark cleans up after each checkpoint as well)
        waits = (
            cleanup_plan.nothing_to_do
            and checkpoint_version != snapshot.version
            and snapshot.properties.enable_expired_log_cleanup
            and _commits_past(snapshot, cleanup_plan.cutoff_ms)
        )
        if cleanup_plan.nothing_to_do and not waits:
            idle[Action.CLEANUP] = "; ".join(cleanup_plan.kept_reasons)
    vacuum_work: bool | None = None
    reclaimable = (0, 0)
    if Action.VACUUM not in refused:
        retention = file_retention_ms
        if retention is None:
            retention = snapshot.properties.deleted_file_retention_ms
        cutoff = now_ms - retention
        reclaimable = reclaimable_tombstones(snapshot, cutoff)
        # Checkpoints drop expired tombstones, so they alone would hide work: commits that aged
        # past the retention since the last vacuum looked (`_last_vacuum_info`) may hold
        # removes too.
        aged = version_at(snapshot, cutoff)
        last = read_last_vacuum_info(snapshot.storage)
        vacuum_work = reclaimable[0] > 0 or (aged is not None and (last is None or aged > last))
        if not vacuum_work:
            past = (
                "delta.deletedFileRetentionDuration"
                if file_retention_ms is None
                else f"the file retention ({format_duration(file_retention_ms)})"
            )
            idle[Action.VACUUM] = (
                f"no file of a tombstone past {past} is left to delete, and no commit has aged"
                " past it since the last vacuum"
            )
    if log is None:
        log = log_files(snapshot)
    hint = snapshot.segment.last_checkpoint
    return DueFacts(
        version=snapshot.version,
        commits_since_checkpoint=since,
        checkpoint_interval=interval,
        log_files=len(log),
        log_bytes=sum(entry.size for entry in log),
        cleanup_files=cleanup_files,
        cleanup_waits_for_checkpoint=waits,
        vacuum_work=vacuum_work,
        reclaimable_files=reclaimable[0],
        reclaimable_bytes=reclaimable[1],
        files=snapshot.num_files,
        table_bytes=snapshot.size_bytes,
        small_files=_small_files(snapshot) if rewrites else None,
        hidden_rows=snapshot.num_deleted_records if rewrites else None,
        physical_rows=snapshot.num_records,
        refused=refused,
        idle=idle,
        unjudged="not judged by this caller" if not rewrites else "not judged",
        hint_problem=hint.problem if hint.info is None and checkpoint_version is not None else None,
    )


@dataclass(frozen=True)
class TableHealth:
    """Facts the asset checks judge: lag, backlog, retention settings, feature support."""

    version: int
    commits_since_checkpoint: int
    checkpoint_interval: int
    expired_tombstones: int
    reclaimable_bytes: int
    # features that stop checkpoint, cleanup or vacuum (data writes aside: maintenance only)
    unsupported_writer_features: tuple[str, ...]
    log_retention_ms: int
    deleted_file_retention_ms: int
    row_tracking: RowTracking
    files_without_row_ids: int
    small_files: int = 0  # files a compaction to the default target would rewrite
    num_records: int | None = None  # physical rows in live files (None: a file lacks stats)
    deleted_records: int = 0  # rows hidden by deletion vectors, still in the files
    #: the version's checksum (`N.crc`) against the replay: missing, agrees, disagrees (a
    #: corruption alarm) or unreadable
    checksum: ChecksumCheck | None = None
    #: how well the files separate on the clustering columns (None: the table is not
    #: clustered by columns)
    layout: ClusteringLayout | None = None


def table_health(
    snapshot: Snapshot,
    now_ms: int,
    *,
    count_small_files: bool = True,
    reclaimable: tuple[int, int] | None = None,
) -> TableHealth:
    """The facts the asset checks judge; `count_small_files=False` leaves `small_files` at 0
    for a caller that does not report it (the count packs every live file as a compaction
    would: on a 300k-file table the most costly fact). `reclaimable`: the (count, bytes) of
    expired tombstones by the table's file retention, when the caller has them already
    (`due_facts` looks at up to STAT_LIMIT files' ages for them)."""
    props = snapshot.properties
    checkpoint_version = snapshot.segment.checkpoint_version
    since = (
        snapshot.version - checkpoint_version
        if checkpoint_version is not None
        else snapshot.version + 1
    )
    if reclaimable is None:
        reclaimable = reclaimable_tombstones(snapshot, now_ms - props.deleted_file_retention_ms)
    expired_count, reclaimable_bytes = reclaimable
    files = snapshot.file_index
    without_ids = int(files.column("baseRowId").null_count) if files.num_rows else 0
    return TableHealth(
        version=snapshot.version,
        commits_since_checkpoint=since,
        checkpoint_interval=props.checkpoint_interval,
        expired_tombstones=expired_count,
        reclaimable_bytes=reclaimable_bytes,
        unsupported_writer_features=tuple(
            sorted(frozenset().union(*(snapshot.protocol.refusing(op) for op in KEEPS_DATA)))
        ),
        log_retention_ms=props.log_retention_ms,
        deleted_file_retention_ms=props.deleted_file_retention_ms,
        row_tracking=row_tracking_state(snapshot),
        files_without_row_ids=without_ids,
        small_files=_small_files(snapshot) if count_small_files else 0,
        num_records=snapshot.num_records,
        deleted_records=snapshot.num_deleted_records,
        checksum=check_checksum(snapshot),
        layout=_layout(snapshot),
    )


def _layout(snapshot: Snapshot) -> ClusteringLayout | None:
    """The clustering layout of a table clustered by columns; None for another table, or one
    whose `delta.clustering` domain cannot be read (the compact job says why)."""
    try:
        return clustering_layout(snapshot)
    except OperationRefused:
        return None


def _small_files(snapshot: Snapshot) -> int:
    """How many files a compaction would rewrite (0 where the table's features refuse it)."""
    try:
        return files_to_compact(snapshot)
    except UnsupportedFeature:
        return 0


class RowTracking(StrEnum):
    """How far row tracking is on a table."""

    OFF = "off"  # the protocol lacks the rowTracking feature
    SUPPORTED = "supported"  # the feature is there; delta.enableRowTracking is not true
    ENABLED = "enabled"  # delta.enableRowTracking=true


def row_tracking_state(snapshot: Snapshot) -> RowTracking:
    """How far row tracking is on `snapshot`'s table."""
    if not snapshot.protocol.supports("rowTracking"):
        return RowTracking.OFF
    return RowTracking.ENABLED if snapshot.properties.enable_row_tracking else RowTracking.SUPPORTED


@dataclass(frozen=True)
class Health:
    """What maintenance a table needs, from its log and a look at the files' ages."""

    log_files: int
    log_bytes: int
    expired_log_files: int
    reclaimable_files: int
    reclaimable_bytes: int
    advice: list[dict[str, str]]
    checksum: ChecksumCheck | None = None  # the version's `N.crc` against the replay
    #: every maintenance action's verdict (`delta_ops.service.due`): what `advice` is from
    verdicts: Verdicts | None = None
    #: the live deletion vectors against their files' row counts
    deletion_vectors: DeletionVectorCheck | None = None


def health(
    snapshot: Snapshot,
    now_ms: int,
    leftovers: int,
    *,
    log: Sequence[FileEntry] | None = None,
    missing_files: Sequence[str] = (),
) -> Health:
    """Each thing worth doing to the table now, with the command that does it; `log` is the
    log's files as log cleanup sees them (directly in `_delta_log`, as `Storage.list_log`
    lists them, and the V2 checkpoints' sidecars), when the caller has listed them already
    (`inspect` derives them from its one walk of the log). `missing_files`: live files the
    caller found missing from storage (`inspect --files` looks; nothing here lists the
    table's data)."""
    log = log_files(snapshot) if log is None else log
    verdicts = judge(due_facts(snapshot, now_ms, log=log))
    # the tombstones' file ages were looked at once, for the verdicts
    known = (verdicts.facts.reclaimable_files, verdicts.facts.reclaimable_bytes)
    facts = table_health(snapshot, now_ms, count_small_files=False, reclaimable=known)
    protocol = snapshot.protocol
    allowed = {op for op in Access if protocol.refusal(op) is None}
    table = _quoted(snapshot.storage.url)
    advice = []
    if missing_files and Access.RECOMMIT in allowed:
        advice.append(
            {
                "problem": f"{len(missing_files)} live files are missing from storage (e.g."
                f" {missing_files[0]}): every reader of the table fails on them",
                "command": f"delta-ops repair {table} --dry-run  # then without --dry-run",
            }
        )
    if facts.unsupported_writer_features:
        features = ", ".join(facts.unsupported_writer_features)
        advice.append(
            {
                "problem": f"delta-ops cannot maintain this table's features ({features})",
                "command": "",
            }
        )
    if facts.checksum is not None and facts.checksum.corrupt:
        advice.append(
            {
                "problem": f"version {facts.version}'s checksum ({facts.checksum.file_name})"
                f" {facts.checksum.problem} (the log or the checksum changed after the commit:"
                " a corruption alarm)",
                "command": f"delta-ops checksum {table} --dry-run",
            }
        )
    deletion_vectors = check_deletion_vectors(snapshot)
    if deletion_vectors.corrupt:
        advice.append(
            {
                "problem": f"version {facts.version}: {deletion_vectors.problem} (a corruption"
                " alarm: readers disagree on which rows such a file holds)",
                "command": "",
            }
        )
    for verdict in verdicts.due:
        advice.append(_advice(verdict, table))
    vacuum = verdicts[Action.VACUUM]
    if leftovers and not vacuum.due and Access.VACUUM in allowed:
        advice.append(
            {
                "problem": f"{leftovers} leftovers of unfinished writes",
                "command": f"delta-ops vacuum {table} --dry-run  # then without --dry-run",
            }
        )
    if Access.ENABLE_ROW_TRACKING in allowed and (
        facts.row_tracking is RowTracking.SUPPORTED
        or (facts.row_tracking is RowTracking.ENABLED and facts.files_without_row_ids)
    ):
        advice.append(
            {
                "problem": f"row tracking is not fully on ({facts.files_without_row_ids} files "
                "without row ids)",
                "command": f"delta-ops enable-row-tracking {table}",
            }
        )
    lacking = int(snapshot.record_counts.null_count) if snapshot.num_files else 0
    if lacking and Access.RECOMMIT in allowed:
        advice.append(
            {
                "problem": f"{lacking} live files have no numRecords in their stats: readers"
                " cannot skip them, row counts and the row-tracking backfill read their footers",
                "command": f"delta-ops recompute-stats {table}",
            }
        )
    for feature in unused_reader_features(snapshot) if Access.WRITE in allowed else ():
        advice.append(
            {
                "problem": f"the protocol has {feature}, which nothing uses any more, and readers"
                " without it (deltalake's pyarrow reader, older engines) refuse the table",
                "command": f"delta-ops drop-feature {table} {feature} --dry-run",
            }
        )
    return Health(
        log_files=verdicts.facts.log_files,
        log_bytes=verdicts.facts.log_bytes,
        expired_log_files=verdicts.facts.cleanup_files,
        reclaimable_files=verdicts.facts.reclaimable_files,
        reclaimable_bytes=verdicts.facts.reclaimable_bytes,
        advice=advice,
        checksum=facts.checksum,
        verdicts=verdicts,
        deletion_vectors=deletion_vectors,
    )


#: what `inspect` advises for a due action: the command, and whether to look first
_COMMANDS = {
    Action.COMPACT: ("compact", True),
    Action.PURGE: ("purge", True),
    Action.CHECKPOINT: ("checkpoint", False),
    Action.CLEANUP: ("cleanup", False),
    Action.VACUUM: ("vacuum", True),
}


def _advice(verdict: Verdict, table: str) -> dict[str, str]:
    command, look_first = _COMMANDS[verdict.action]
    line = f"delta-ops {command} {table}"
    if look_first:
        line += " --dry-run  # then without --dry-run"
    return {"problem": f"{verdict.action} is due: {verdict.reason}", "command": line}


def log_files(snapshot: Snapshot) -> list[FileEntry]:
    """The log's files as log cleanup sees them: those directly in `_delta_log` and, on a
    table with V2 checkpoints, their sidecars (as ``_sidecars/<name>``); no hidden name."""
    storage = snapshot.storage
    files = list(storage.list_log())
    if snapshot.protocol.supports("v2Checkpoint"):
        files += [
            dataclasses.replace(e, name=f"{SIDECARS_DIR}/{e.name}")
            for e in storage.list_log(SIDECARS_DIR)
            if not e.name.startswith(".")
        ]
    return files


def unused_reader_features(snapshot: Snapshot) -> list[str]:
    """Reader-writer features `drop-feature` drops that the table no longer uses: deletion
    vectors turned off with none live, V2 checkpoints with the classic policy."""
    unused = []
    protocol = snapshot.protocol
    if protocol.supports("deletionVectors") and not snapshot.properties.enable_deletion_vectors:
        files = snapshot.file_index
        if not files.num_rows or files.column("deletionVector").null_count == files.num_rows:
            unused.append("deletionVectors")
    if protocol.supports("v2Checkpoint") and snapshot.properties.checkpoint_policy == "classic":
        unused.append("v2Checkpoint")
    return unused


def _quoted(url: str) -> str:
    return url if all(c.isalnum() or c in "/._-:=+@" for c in url) else f"'{url}'"
