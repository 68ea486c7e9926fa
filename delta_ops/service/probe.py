"""A cheap read-only probe of a table's new commits, for sensors that watch many tables.

A commit sensor must not replay a table's log on every tick. `probe_commits` reads
`_last_checkpoint` and then checks for `N+1.json`, `N+2.json`, ... starting from the newest
version already known (the sensor's cursor, or the checkpoint), so its cost grows with the
number of *new* commits, not with the size of the log. The checkpoint interval is read from
the metaData of new commits when one changes it, and otherwise remembered by the caller; a
``protocol`` action among the new commits is returned too (``protocol``), so a caller that
remembers the table's protocol (`delta_ops.airflow.triggers`) never replays the log for it.

What a table needs beyond new commits (cleanup, vacuum, compaction) is judged by
`delta_ops.service.health`, from a loaded snapshot.

For example:

    probe = probe_commits(storage, known_version=41, known_interval=10)
    if probe.commits_since_checkpoint >= probe.checkpoint_interval: ...
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from delta_ops.errors import NotADeltaTable
from delta_ops.log.file_names import commit_file_name
from delta_ops.log.last_checkpoint import read_last_checkpoint
from delta_ops.log.reader import parse_action_lines
from delta_ops.protocol.properties import TableProperties
from delta_ops.storage import Storage
from delta_ops.table.snapshot import load_head


@dataclass(frozen=True)
class CommitProbe:
    """What a commit sensor needs to know about one table."""

    latest_version: int
    last_checkpoint_version: int | None
    checkpoint_interval: int
    files_checked: int  # existence checks made: the probe's cost
    #: the newest ``protocol`` action among the commits read (None: they changed none)
    protocol: Mapping[str, Any] | None = None

    @property
    def commits_since_checkpoint(self) -> int:
        base = self.last_checkpoint_version if self.last_checkpoint_version is not None else -1
        return self.latest_version - base


def _changes_in_commit(
    storage: Storage, version: int
) -> tuple[int | None, Mapping[str, Any] | None]:
    """The checkpoint interval a metaData action in commit `version` sets and the protocol
    action it holds, each None when it has none."""
    name = commit_file_name(version)
    data = storage.read_bytes(storage.log_file(name))
    if b'"metaData"' not in data and b'"protocol"' not in data:
        return None, None  # the common case: no parse at all
    interval: int | None = None
    protocol: Mapping[str, Any] | None = None
    for action in parse_action_lines(name, data):
        metadata = action.get("metaData")
        if isinstance(metadata, dict):
            configuration = metadata.get("configuration") or {}
            interval = TableProperties.from_configuration(configuration).checkpoint_interval
        if isinstance(action.get("protocol"), dict):
            protocol = action["protocol"]
    return interval, protocol


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
    protocol: Mapping[str, Any] | None = None
    checked = 0
    version = start
    while True:
        checked += 1
        if not storage.exists(storage.log_file(commit_file_name(version + 1))):
            break
        version += 1
        changed, new_protocol = _changes_in_commit(storage, version)
        if changed is not None:
            interval = changed
        protocol = new_protocol or protocol
    if version < 0:
        raise NotADeltaTable(storage.url, "_delta_log has no commits")
    if interval is None:  # first sight only: the light head, never the file state
        interval = load_head(storage, version).properties.checkpoint_interval
    return CommitProbe(version, checkpoint_version, interval, checked, protocol)
