"""When each commit happened, by the protocol's rules, and which version was current at a time.

A commit's timestamp is its in-commit timestamp (`commitInfo.inCommitTimestamp`, the first
action) from the version that enabled in-commit timestamps on, and its file's modification
time before that (made monotonic, as Delta Spark's history does: a commit is never older than
the one before it). Time travel by timestamp, log cleanup's cutoff and vacuum's retention
window all resolve times here, so they agree with each other and with other readers.

In-commit timestamps only grow, so the version current at a time is found by binary search,
reading O(log n) commit files; commits the snapshot already read cost nothing.

For example:

    head = load_head("/data/events")
    version_at(head, timestamp_ms)       # newest version committed at or before that time
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from delta_ops.log.file_names import LogFile, LogFileKind
from delta_ops.log.reader import read_commit_actions
from delta_ops.table.snapshot import Snapshot, TableHead


@dataclass(frozen=True)
class CommitClock:
    """The listed commits of a table up to its version, and where in-commit timestamps start.

    Attributes:
        commits: the listed commit files, oldest first.
        ict_from: the first version whose timestamp is its in-commit timestamp; None when the
            table does not keep them.
        ict_since_ms: `delta.inCommitTimestampEnablementTimestamp` when the table records it.
    """

    head: Snapshot | TableHead
    commits: Sequence[LogFile]
    ict_from: int | None
    ict_since_ms: int | None

    @classmethod
    def of(cls, head: Snapshot | TableHead) -> CommitClock:
        commits = sorted(
            (
                f
                for f in head.segment.listing
                if f.kind is LogFileKind.COMMIT and f.version <= head.version
            ),
            key=lambda f: f.version,
        )
        props = head.properties
        ict_from: int | None = None
        since: int | None = None
        if props.enable_in_commit_timestamps and head.protocol.supports("inCommitTimestamp"):
            ict_from = props.in_commit_timestamp_enablement_version or 0
            since = props.in_commit_timestamp_enablement_timestamp
        return cls(head, commits, ict_from, since)

    def uses_ict(self, version: int) -> bool:
        return self.ict_from is not None and version >= self.ict_from

    def version_at(self, timestamp_ms: int) -> int | None:
        """The newest listed version whose commit timestamp is at or before `timestamp_ms`
        (None when every listed commit is newer).

        As the protocol says: at or after the enablement timestamp only versions from the
        enablement version on are considered, before it only the older ones."""
        with_ict = [f.version for f in self.commits if self.uses_ict(f.version)]
        by_mtime = [f for f in self.commits if not self.uses_ict(f.version)]
        if with_ict and (self.ict_since_ms is None or timestamp_ms >= self.ict_since_ms):
            found = self._newest_ict_at_or_before(with_ict, timestamp_ms)
            if found is not None or self.ict_since_ms is not None:
                return found
        best = None
        for version, stamp in _monotonic(by_mtime):
            if stamp > timestamp_ms:
                break
            best = version
        return best

    def newest_ict_version_at_or_before(self, timestamp_ms: int) -> int | None:
        """Among versions that keep in-commit timestamps only: the newest one at or before
        `timestamp_ms` (None when there is none)."""
        with_ict = [f.version for f in self.commits if self.uses_ict(f.version)]
        return self._newest_ict_at_or_before(with_ict, timestamp_ms)

    def _newest_ict_at_or_before(self, versions: Sequence[int], timestamp_ms: int) -> int | None:
        lo, hi = 0, len(versions)  # the first index whose in-commit timestamp is too late
        while lo < hi:
            mid = (lo + hi) // 2
            if in_commit_timestamp(self.head, versions[mid]) <= timestamp_ms:
                lo = mid + 1
            else:
                hi = mid
        return versions[lo - 1] if lo else None


def _monotonic(commits: Sequence[LogFile]) -> list[tuple[int, int]]:
    """(version, timestamp) by file modification time, each at least 1 ms after the last."""
    out: list[tuple[int, int]] = []
    previous = None
    for f in commits:
        stamp = f.modification_time
        if previous is not None and stamp <= previous:
            stamp = previous + 1
        out.append((f.version, stamp))
        previous = stamp
    return out


def version_at(head: Snapshot | TableHead, timestamp_ms: int) -> int | None:
    """The newest version of `head`'s table committed at or before `timestamp_ms`."""
    return CommitClock.of(head).version_at(timestamp_ms)


def in_commit_timestamp(head: Snapshot | TableHead, version: int) -> int:
    """A commit's in-commit timestamp (0 when it lacks one, which the protocol forbids)."""
    if isinstance(head, Snapshot):
        try:
            return head.commit_timestamp(version)  # commits after the checkpoint: already read
        except KeyError:
            pass
    actions = read_commit_actions(head.storage, version)
    info = actions[0].get("commitInfo") if actions else None
    stamp = info.get("inCommitTimestamp") if isinstance(info, dict) else None
    return stamp if isinstance(stamp, int) else 0


__all__ = ["CommitClock", "in_commit_timestamp", "version_at"]
