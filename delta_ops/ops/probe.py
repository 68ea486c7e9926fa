"""Cheap read-only probes of a table, for sensors and schedules that watch many tables.

A commit sensor must not replay a table's log on every tick. :func:`probe_commits` reads
`_last_checkpoint` and then checks for `N+1.json`, `N+2.json`, ... starting from the newest
version already known (the sensor's cursor, or the checkpoint), so its cost grows with the
number of *new* commits, not with the size of the log. The checkpoint interval is read from
the metaData of new commits when one changes it, and otherwise remembered by the caller.

:func:`maintenance_work` answers "is there anything to do?" for a scheduled run from one log
read: commits since the last checkpoint, log files past the cleanup cutoff, expired tombstones.

Example::

    probe = probe_commits(storage, known_version=41, known_interval=10)
    if probe.commits_since_checkpoint >= probe.checkpoint_interval: ...
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow.compute as pc

from delta_ops.errors import NotADeltaTable
from delta_ops.log.file_names import commit_file_name
from delta_ops.log.last_checkpoint import read_last_checkpoint
from delta_ops.log.reader import parse_action_lines
from delta_ops.protocol.features import KEEPS_DATA, Access
from delta_ops.protocol.properties import TableProperties
from delta_ops.storage import Storage
from delta_ops.table.commit_times import version_at
from delta_ops.table.snapshot import Snapshot, load_head

DEFAULT_CHECKPOINT_INTERVAL = 10


@dataclass(frozen=True)
class CommitProbe:
    """What a commit sensor needs to know about one table."""

    latest_version: int
    last_checkpoint_version: int | None
    checkpoint_interval: int
    files_checked: int  # existence checks made: the probe's cost

    @property
    def commits_since_checkpoint(self) -> int:
        base = self.last_checkpoint_version if self.last_checkpoint_version is not None else -1
        return self.latest_version - base


def _interval_from_commit(storage: Storage, version: int) -> int | None:
    """The checkpoint interval set by a metaData action in commit `version`, if any."""
    name = commit_file_name(version)
    data = storage.read_bytes(storage.log_file(name))
    if b'"metaData"' not in data:
        return None  # the common case: no parse at all
    for action in parse_action_lines(name, data):
        metadata = action.get("metaData")
        if isinstance(metadata, dict):
            configuration = metadata.get("configuration") or {}
            return TableProperties.from_configuration(configuration).checkpoint_interval
    return None


def probe_commits(
    storage: Storage, *, known_version: int | None = None, known_interval: int | None = None
) -> CommitProbe:
    """Latest version and checkpoint lag, reading only what changed since `known_version`.

    Args:
        storage: the table.
        known_version: a version known to exist (a sensor's cursor); None on first sight.
        known_interval: the checkpoint interval remembered with it; None to read it once.
    """
    hint = read_last_checkpoint(storage).info
    checkpoint_version = hint.version if hint is not None else None
    # from the cursor when known: commits between it and a newer checkpoint may change the
    # interval; without a cursor, from the checkpoint (the interval is then read once below)
    start = (
        known_version
        if known_version is not None
        else (checkpoint_version if checkpoint_version is not None else -1)
    )
    if start < 0 and not storage.exists(storage.log_path):
        raise NotADeltaTable(storage.url, "no _delta_log directory")
    interval = known_interval
    checked = 0
    version = start
    while True:
        checked += 1
        if not storage.exists(storage.log_file(commit_file_name(version + 1))):
            break
        version += 1
        changed = _interval_from_commit(storage, version)
        if changed is not None:
            interval = changed
    if version < 0:
        raise NotADeltaTable(storage.url, "_delta_log has no commits")
    if interval is None:  # first sight only: the light head, never the file state
        interval = load_head(storage, version).properties.checkpoint_interval
    return CommitProbe(version, checkpoint_version, interval, checked)


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
    stamps = pc.fill_null(tombstones.column("deletionTimestamp"), 0)
    # a file given a deletion vector (or re-added) is removed and added under the same path:
    # it is live, and vacuum keeps it
    live = pc.is_in(tombstones.column("path"), value_set=snapshot.file_index.column("path"))
    expired = tombstones.filter(pc.and_(pc.less(stamps, cutoff_ms), pc.invert(live)))
    if not expired.num_rows:
        return 0, 0
    expired = expired.sort_by([("deletionTimestamp", "ascending")])
    storage = snapshot.storage
    count = size = 0
    looked = expired.slice(0, STAT_LIMIT)
    for path, recorded in zip(looked.column("path").to_pylist(), looked.column("size").to_pylist()):
        entry = storage.stat(storage.table_path(path))
        if entry is not None and entry.modification_time < cutoff_ms:
            count += 1
            size += entry.size if recorded is None else int(recorded)
    rest = expired.slice(STAT_LIMIT)
    count += rest.num_rows
    size += int(pc.sum(pc.fill_null(rest.column("size"), 0)).as_py() or 0)
    return count, size


@dataclass(frozen=True)
class MaintenanceWork:
    """Which maintenance actions have work, and why not for the others."""

    checkpoint: bool
    cleanup: bool
    vacuum: bool
    reasons: tuple[str, ...]

    @property
    def any(self) -> bool:
        return self.checkpoint or self.cleanup or self.vacuum


def maintenance_work(snapshot: Snapshot, now_ms: int) -> MaintenanceWork:
    """Decide from the log alone whether checkpoint, cleanup or vacuum would do anything."""
    from delta_ops.ops.cleanup import plan_cleanup

    reasons: list[str] = []
    refused = {
        op: why
        for op in (Access.CHECKPOINT, Access.CLEANUP, Access.VACUUM)
        if (why := snapshot.protocol.refusal(op)) is not None
    }
    reasons.extend(f"{op.name.lower()}: {why}" for op, why in refused.items())
    checkpoint_version = snapshot.segment.checkpoint_version
    needs_checkpoint = checkpoint_version != snapshot.version and Access.CHECKPOINT not in refused
    if checkpoint_version == snapshot.version:
        reasons.append(f"checkpoint: version {snapshot.version} is already checkpointed")
    needs_cleanup = False
    if Access.CLEANUP not in refused:
        cleanup_plan = plan_cleanup(snapshot, now_ms)
        needs_cleanup = not cleanup_plan.nothing_to_do
        if not needs_cleanup:
            reasons.append("log cleanup: " + "; ".join(cleanup_plan.kept_reasons))
    if Access.VACUUM in refused:
        return MaintenanceWork(needs_checkpoint, needs_cleanup, False, tuple(reasons))
    cutoff = now_ms - snapshot.properties.deleted_file_retention_ms
    expired, _ = reclaimable_tombstones(snapshot, cutoff)
    # Checkpoints drop expired tombstones, so they alone would hide work: commits that aged past
    # the retention since the last vacuum looked (`_last_vacuum_info`) may hold removes too.
    from delta_ops.ops.vacuum import read_last_vacuum_info

    aged = version_at(snapshot, cutoff)
    last = read_last_vacuum_info(snapshot.storage)
    newly_aged = aged is not None and (last is None or aged > last)
    needs_vacuum = expired > 0 or newly_aged
    if not needs_vacuum:
        reasons.append(
            "vacuum: no file of a tombstone past delta.deletedFileRetentionDuration is left to"
            " delete, and no commit has aged past it since the last vacuum"
        )
    return MaintenanceWork(needs_checkpoint, needs_cleanup, needs_vacuum, tuple(reasons))


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
    row_tracking: str  # off | supported | enabled
    files_without_row_ids: int
    small_files: int = 0  # files a compaction to the default target would rewrite
    num_records: int | None = None  # physical rows in live files (None: a file lacks stats)
    deleted_records: int = 0  # rows hidden by deletion vectors, still in the files


def table_health(snapshot: Snapshot, now_ms: int) -> TableHealth:
    from delta_ops.ops.inspect import row_tracking_state

    props = snapshot.properties
    checkpoint_version = snapshot.segment.checkpoint_version
    since = (
        snapshot.version - checkpoint_version
        if checkpoint_version is not None
        else snapshot.version + 1
    )
    expired_count, reclaimable = reclaimable_tombstones(
        snapshot, now_ms - props.deleted_file_retention_ms
    )
    files = snapshot.file_index
    without_ids = int(files.column("baseRowId").null_count) if files.num_rows else 0
    return TableHealth(
        version=snapshot.version,
        commits_since_checkpoint=since,
        checkpoint_interval=props.checkpoint_interval,
        expired_tombstones=expired_count,
        reclaimable_bytes=reclaimable,
        unsupported_writer_features=tuple(
            sorted(frozenset().union(*(snapshot.protocol.refusing(op) for op in KEEPS_DATA)))
        ),
        log_retention_ms=props.log_retention_ms,
        deleted_file_retention_ms=props.deleted_file_retention_ms,
        row_tracking=row_tracking_state(snapshot),
        files_without_row_ids=without_ids,
        small_files=_small_files(snapshot),
        num_records=snapshot.num_records,
        deleted_records=snapshot.num_deleted_records,
    )


def _small_files(snapshot: Snapshot) -> int:
    """How many files a compaction would rewrite (0 where the table's features refuse it)."""
    from delta_ops.errors import UnsupportedFeature
    from delta_ops.ops.compact import plan_compact

    try:
        return plan_compact(snapshot).files_to_rewrite
    except UnsupportedFeature:
        return 0
