"""The log segment of a version: the checkpoint to start from and the commits after it.

Built from one listing of `_delta_log` (recognised names only) like Delta Spark:

1. Complete checkpoints are candidates: a classic or V2 file of non-zero size, or a multi-part
   checkpoint with all `n` parts present and non-empty. Ties at one version prefer V2, then
   multi-part (more parts first), then classic (Spark's `CheckpointInstance` order).
2. The newest candidate at or below the target version is used, unless the caller excludes it
   (an unreadable checkpoint: the snapshot loader retries with an older one or with JSON).
3. Every commit from the checkpoint (or version 0) up to the target must exist; a hole is a
   `VersionGap` naming the first file after it.

`_last_checkpoint` is read and validated and kept on the segment as a hint, but the listing
decides, so a stale, corrupt or missing hint never breaks a read.

For example:

    segment = build_log_segment(storage)                 # latest version
    old = build_log_segment(storage, version=3)          # time travel
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from delta_ops.errors import NotADeltaTable, VersionGap, VersionNotFound
from delta_ops.log.file_names import LogFile, LogFileKind, parse_listing
from delta_ops.log.last_checkpoint import LastCheckpointRead, read_last_checkpoint
from delta_ops.storage import Storage

_FORMAT_RANK = {
    LogFileKind.CLASSIC_CHECKPOINT: 0,
    LogFileKind.MULTI_PART_CHECKPOINT: 1,
    LogFileKind.V2_CHECKPOINT: 2,
}


@dataclass(frozen=True)
class CheckpointRef:
    """A complete checkpoint: its version and every file of it (parts, or the V2 top file)."""

    version: int
    kind: LogFileKind
    files: tuple[LogFile, ...]

    @property
    def sort_key(self) -> tuple[int, int, int, str]:
        return (self.version, _FORMAT_RANK[self.kind], len(self.files), self.files[0].name)

    @property
    def name(self) -> str:
        return self.files[0].name


@dataclass(frozen=True)
class LogSegment:
    """What to read to reconstruct `version`."""

    version: int
    checkpoint: CheckpointRef | None
    commits: tuple[LogFile, ...]
    listing: tuple[LogFile, ...]
    last_checkpoint: LastCheckpointRead

    @property
    def checkpoint_version(self) -> int | None:
        return self.checkpoint.version if self.checkpoint else None


def complete_checkpoints(listing: Iterable[LogFile]) -> list[CheckpointRef]:
    """Every complete, non-empty checkpoint in a listing, oldest first (Spark's order)."""
    refs: list[CheckpointRef] = []
    parts: dict[tuple[int, int], dict[int, LogFile]] = defaultdict(dict)
    for f in listing:
        if not f.is_checkpoint or f.size == 0:
            continue
        if f.kind is LogFileKind.MULTI_PART_CHECKPOINT:
            parts[(f.version, f.num_parts or 0)][f.part or 0] = f
        else:
            refs.append(CheckpointRef(f.version, f.kind, (f,)))
    for (version, n), seen in parts.items():
        if n > 0 and sorted(seen) == list(range(1, n + 1)):
            refs.append(
                CheckpointRef(
                    version,
                    LogFileKind.MULTI_PART_CHECKPOINT,
                    tuple(seen[i] for i in range(1, n + 1)),
                )
            )
    refs.sort(key=lambda r: r.sort_key)
    return refs


def list_log_files(storage: Storage) -> list[LogFile]:
    """Recognised files of `_delta_log`, in name order."""
    return parse_listing(storage.list_log())


def build_log_segment(
    storage: Storage,
    version: int | None = None,
    *,
    listing: Sequence[LogFile] | None = None,
    exclude_checkpoints: Iterable[str] = (),
    last_checkpoint: LastCheckpointRead | None = None,
) -> LogSegment:
    """Choose the checkpoint and commits that reconstruct `version` (latest when None)."""
    files = list(listing) if listing is not None else list_log_files(storage)
    hint = last_checkpoint if last_checkpoint is not None else read_last_checkpoint(storage)
    commits = {f.version: f for f in files if f.kind is LogFileKind.COMMIT}
    excluded = set(exclude_checkpoints)
    checkpoints = [c for c in complete_checkpoints(files) if c.name not in excluded]
    if not commits and not checkpoints:
        raise NotADeltaTable(storage.url, "_delta_log has no commit or complete checkpoint")

    latest = max([*commits, *(c.version for c in checkpoints)])
    target = latest if version is None else version
    if target < 0 or target > latest:
        raise VersionNotFound(
            f"{storage.url}: version {target} does not exist (latest is {latest})"
        )

    usable = [c for c in checkpoints if c.version <= target]
    checkpoint = usable[-1] if usable else None
    start = checkpoint.version + 1 if checkpoint else 0
    if checkpoint is None and 0 not in commits:
        earliest = min(commits) if commits else None
        raise VersionNotFound(
            f"{storage.url}: version {target} cannot be reconstructed: no checkpoint at or before it "
            f"and the log starts at version {earliest}"
        )
    needed: list[LogFile] = []
    for v in range(start, target + 1):
        f = commits.get(v)
        if f is None:
            found = min((c for c in commits if c > v), default=None)
            name = commits[found].name if found is not None else f"{v:020d}.json"
            raise VersionGap(name, expected=v, found=found if found is not None else v)
        needed.append(f)
    return LogSegment(
        version=target,
        checkpoint=checkpoint,
        commits=tuple(needed),
        listing=tuple(files),
        last_checkpoint=hint,
    )
