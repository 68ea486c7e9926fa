"""Leftovers of crashed writes: what a dead process staged but never moved into place.

Two kinds exist, both under hidden names that readers and vacuum's data listing skip:

* temporary log files (``_delta_log/.<name>.<32 hex>.tmp``, also under ``_sidecars/``) that an
  atomic write stages before linking or renaming it to its final name;
* Spark staging folders (``_delta_ops_staging/<uuid>/``) where executors write data files
  before the driver commits them.

A write that fails removes its own; these are what a killed process left. `inspect` reports
them and vacuum deletes them once the newest file of each is older than both the retention and
`MIN_LEFTOVER_AGE_MS` (a write that has touched nothing for that long is dead):

    for item in find_leftovers(storage):
        print(item.path, item.kind, item.size)
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from dataclasses import dataclass

from delta_ops.storage import LOG_DIR, FileEntry, Storage, is_temporary_name

STAGING_DIR = "_delta_ops_staging"
MIN_LEFTOVER_AGE_MS = 3_600_000  # one hour
TEMPORARY_LOG_FILE = "temporary log file"
SPARK_STAGING = "spark staging"


@dataclass(frozen=True)
class Leftover:
    """One file a crashed write left: table-relative path, size, mtime, kind, and the group it
    belongs to (the staging folder, or the file itself), which is deleted as a whole."""

    path: str
    size: int
    modification_time: int
    kind: str
    group: str


def find_leftovers(storage: Storage, log_tree: Sequence[FileEntry] | None = None) -> list[Leftover]:
    """Every leftover of a write in progress or a crashed one (young ones included);
    `log_tree` is ``storage.list_tree(LOG_DIR)`` when the caller has listed it already."""
    out: list[Leftover] = []
    log_tree, staging_tree = _list_both(storage, log_tree)
    for e in log_tree:
        if is_temporary_name(posixpath.basename(e.name)):
            path = f"{LOG_DIR}/{e.name}"
            out.append(Leftover(path, e.size, e.modification_time, TEMPORARY_LOG_FILE, path))
    for e in staging_tree:
        group = f"{STAGING_DIR}/{e.name.split('/', 1)[0]}"
        out.append(
            Leftover(f"{STAGING_DIR}/{e.name}", e.size, e.modification_time, SPARK_STAGING, group)
        )
    return out


def _list_both(
    storage: Storage, log_tree: Sequence[FileEntry] | None
) -> tuple[Sequence[FileEntry], Sequence[FileEntry]]:
    """The log's and the staging folder's trees; on a store, both listings at once (each is a
    round trip, and a vacuum waits for them one after the other otherwise)."""
    if log_tree is not None or storage.is_local:
        log = storage.list_tree(LOG_DIR) if log_tree is None else log_tree
        return log, storage.list_tree(STAGING_DIR)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="delta-ops-list") as pool:
        staging = pool.submit(storage.list_tree, STAGING_DIR)
        return storage.list_tree(LOG_DIR), staging.result()


def stale_leftovers(storage: Storage, older_than_ms: int) -> list[Leftover]:
    """Leftovers whose whole group was last written before `older_than_ms`."""
    items = find_leftovers(storage)
    newest: dict[str, int] = {}
    for item in items:
        newest[item.group] = max(newest.get(item.group, 0), item.modification_time)
    return [item for item in items if newest[item.group] < older_than_ms]


def staging_directories(leftovers: list[Leftover]) -> list[str]:
    """The staging folders (and their subfolders) the given leftovers leave empty once
    deleted, deepest first."""
    dirs: set[str] = set()
    for item in leftovers:
        if item.kind != SPARK_STAGING:
            continue
        d = posixpath.dirname(item.path)
        while d and d != STAGING_DIR:
            dirs.add(d)
            d = posixpath.dirname(d)
    return sorted(dirs, key=lambda d: (-d.count("/"), d))
