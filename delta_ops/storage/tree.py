"""Walking and pruning a table's directory tree: the listing vacuum needs and safe deletes.

Everything here is reached through `delta_ops.storage.Storage` methods
(``walk``, ``delete_many``, ``remove_empty_dirs``), which hand these functions their
`delta_ops.storage.filesystem.TableRoot`; ops never see `os` or fsspec:

    tree = storage.walk(skip_name=lambda name: name.startswith("_"))
    deleted = storage.delete_many(["part-0.parquet", "p=1/part-1.parquet"])

Local trees use ``os.scandir`` (no fsspec overhead per entry), never follow symlinks, and
tolerate entries vanishing under them (a concurrent vacuum). Deletes skip, on every store, any
path that leaves the root as written (absolute, or ``..`` above it: `filesystem.leaves_root`),
and on a local disk any path whose directory resolves outside the root through a symlink or
that is itself a symlink (not even the link is deleted). A local file goes
with its Hadoop checksum sidecar (``.name.crc``, which Spark writes beside every file on a
local file system): `unlink_local`.
"""

from __future__ import annotations

import logging
import os
import posixpath
from collections.abc import Callable, Container, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from delta_ops.storage.bulk_delete import delete_batch
from delta_ops.storage.filesystem import TableRoot, leaves_root, mtime_ms
from delta_ops.storage.s3_listing import is_s3, list_in_ranges, list_in_ranges_native

logger = logging.getLogger(__name__)

DELETE_WORKERS = 16
DELETE_BATCH = 1000  # keys per bulk delete (S3's DeleteObjects limit)
LOCAL_CHUNK = 256  # local unlinks per task: small enough for steady progress


@dataclass
class TreeListing:
    """Files under the root, columnar (relative path, size, mtime in ms), and directories."""

    paths: list[str] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    mtimes: list[int] = field(default_factory=list)
    dirs: list[str] = field(default_factory=list)


def walk(
    files: TableRoot,
    skip_name: Callable[[str], bool],
    known_names: Sequence[str] = (),
    omit: Container[str] = frozenset(),
    *,
    under: str = "",
    recursive: bool = True,
) -> TreeListing:
    """Every file and directory under the root except names (at any level) that `skip_name`
    accepts; symlinks are skipped, entries deleted meanwhile are not errors. `known_names`
    (relative paths the caller expects, such as the table's files) let S3 list in parallel
    key ranges. Files in `omit` are left out of the listing; locally they are not even
    `stat`ed (vacuum omits the files the table protects: most of a table's files).

    `under` walks one directory's subtree only (paths stay relative to the root);
    ``recursive=False`` lists that directory's own entries (a parallel walk's first step)."""
    listing = TreeListing()
    native = files.native
    if not under and recursive and native is not None and native.kind == "s3":
        return _omitted(_walk_ranges(files, skip_name, known_names), omit)
    if native is not None:
        return _omitted(_walk_native(files, skip_name, under, recursive), omit)
    if not under and recursive and not files.is_local and is_s3(files.filesystem):
        return _omitted(_walk_ranges(files, skip_name, known_names), omit)
    if files.is_local:
        stack = [under]
        while stack:
            rel = stack.pop()
            try:
                _scan_local(files, rel, skip_name, listing, stack if recursive else [], omit)
            except FileNotFoundError:
                continue  # removed meanwhile: nothing left to list
        return listing
    root = files.root.rstrip("/")
    top = f"{root}/{under}" if under else root
    files.filesystem.invalidate_cache(top)
    if recursive:
        found_items = files.filesystem.find(top, withdirs=True, detail=True).items()
    else:
        found_items = ((i["name"], i) for i in files.filesystem.ls(top, detail=True))
    for path, info in found_items:
        found = path[len(root) :].lstrip("/") if path.startswith(root) else None
        if not found or any(skip_name(part) for part in found.split("/")):
            continue
        if info.get("type") == "directory":
            listing.dirs.append(found)
        elif not info.get("islink"):
            listing.paths.append(found)
            listing.sizes.append(int(info.get("size") or 0))
            listing.mtimes.append(mtime_ms(info))
    return _omitted(listing, omit)


def _omitted(listing: TreeListing, omit: Container[str]) -> TreeListing:
    if not omit:
        return listing
    kept = [i for i, path in enumerate(listing.paths) if path not in omit]
    return TreeListing(
        paths=[listing.paths[i] for i in kept],
        sizes=[listing.sizes[i] for i in kept],
        mtimes=[listing.mtimes[i] for i in kept],
        dirs=listing.dirs,
    )


def _walk_ranges(
    files: TableRoot, skip_name: Callable[[str], bool], known_names: Sequence[str]
) -> TreeListing:
    skip = [f"{name}/" for name in ("_delta_log",) if skip_name(name)]
    listing = TreeListing()
    dirs: set[str] = set()
    if files.native is not None:
        listed = list_in_ranges_native(files.native, files.root, known_names, skip)
    else:
        listed = list_in_ranges(files.filesystem, files.root, known_names, skip)
    for obj in listed:
        parts = obj.relative.split("/")
        if not obj.relative or any(skip_name(part) for part in parts):
            continue
        listing.paths.append(obj.relative)
        listing.sizes.append(obj.size)
        listing.mtimes.append(obj.modification_time)
        dirs.update("/".join(parts[:i]) for i in range(1, len(parts)))
    listing.dirs = sorted(dirs)
    return listing


def _walk_native(
    files: TableRoot, skip_name: Callable[[str], bool], under: str, recursive: bool
) -> TreeListing:
    """`walk` on the native client: one recursive listing (directories are the keys'
    prefixes, as object stores have none), or one level with the store's delimiter."""
    store = files.native
    assert store is not None
    root = files.root.rstrip("/")
    top = f"{root}/{under}" if under else root
    listing = TreeListing()

    def relative(path: str) -> str | None:
        found = path[len(root) :].lstrip("/") if path.startswith(root + "/") else None
        if not found or any(skip_name(part) for part in found.split("/")):
            return None
        return found

    if not recursive:
        objects, subdirs = store.list_dir(top)
        listing.dirs.extend(d for d in map(relative, subdirs) if d is not None)
        pages: list[list[Any]] = [objects]
    else:
        pages = list(store.list_tree(top))
    dirs: set[str] = set()
    for page in pages:
        for obj in page:
            found = relative(obj.path)
            if found is None:
                continue
            listing.paths.append(found)
            listing.sizes.append(obj.size)
            listing.mtimes.append(obj.modification_time)
            if recursive:
                parts = found.split("/")
                dirs.update("/".join(parts[:i]) for i in range(1, len(parts)))
    if recursive:
        below = f"{under}/" if under else ""
        listing.dirs = sorted(d for d in dirs if d.startswith(below) and d != under)
    return listing


def _scan_local(
    files: TableRoot,
    rel: str,
    skip_name: Callable[[str], bool],
    listing: TreeListing,
    stack: list[str],
    omit: Container[str] = frozenset(),
) -> None:
    # the hot loop of a full vacuum's listing (one pass per entry of a 100k-file table): each
    # path is built once and the lists' appends are bound once
    prefix = f"{rel}/" if rel else ""
    paths, sizes, mtimes = listing.paths.append, listing.sizes.append, listing.mtimes.append
    with os.scandir(files.join(rel) if rel else files.root) as it:
        for entry in it:
            name = entry.name
            if skip_name(name) or entry.is_symlink():
                continue
            path = prefix + name
            if entry.is_dir(follow_symlinks=False):
                listing.dirs.append(path)
                stack.append(path)
                continue
            if path in omit:
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            paths(path)
            sizes(st.st_size)
            mtimes(st.st_mtime_ns // 1_000_000)


def checksum_sidecar(path: str) -> str:
    """Hadoop's checksum file of `path` (``dir/.name.crc``): Spark on a local file system
    writes one beside every file, and Hadoop deletes it with its file."""
    directory, name = os.path.split(path)
    return os.path.join(directory, f".{name}.crc")


def unlink_local(path: str) -> None:
    """Delete a local file with its Hadoop checksum sidecar, if it has one (either gone
    already is no error): a hidden `.name.crc` left without its file is litter no listing of
    the data shows (Delta Spark hides such names from vacuum), so it goes with its file."""
    for doomed in (path, checksum_sidecar(path)):
        try:
            os.unlink(doomed)
        except FileNotFoundError:
            pass


def really_inside(root_real: str, directory: str) -> bool:
    """True when a local directory, its symlinks resolved, is the root or under it (the
    root's own real path: `os.path.realpath` of the root)."""
    real = os.path.realpath(directory)
    return real == root_real or real.startswith(root_real + os.sep)


def delete_many(
    files: TableRoot,
    relative_paths: Sequence[str],
    on_deleted: Callable[[Sequence[str]], object] | None = None,
) -> list[str]:
    """Delete table-relative files in parallel; return those deleted (a file already gone
    counts). `on_deleted` hears about each finished batch (from worker threads), for progress.
    Paths that leave the root as written are skipped with a warning on every store, as are
    local paths whose directory resolves outside the root, or that are symlinks. On object
    stores, keys the store refused to delete are not returned."""
    if any(map(leaves_root, relative_paths)):
        for rel in filter(leaves_root, relative_paths):
            logger.warning("%s: not deleting %s: it is outside the table root", files.root, rel)
        relative_paths = [rel for rel in relative_paths if not leaves_root(rel)]
    if not relative_paths:
        return []
    report = on_deleted or (lambda batch: None)
    if not files.is_local:
        batches = [
            relative_paths[i : i + DELETE_BATCH]
            for i in range(0, len(relative_paths), DELETE_BATCH)
        ]

        def delete_and_report(batch: Sequence[str]) -> list[str]:
            done = delete_batch(files, batch)
            report(done)
            return done

        with ThreadPoolExecutor(max_workers=min(DELETE_WORKERS, len(batches))) as pool:
            return [p for done in pool.map(delete_and_report, batches) for p in done]
    root_real = os.path.realpath(files.root)
    parents = [posixpath.dirname(p) for p in relative_paths]  # once a path, not once a use
    safe_dirs = {
        d for d in set(parents) if really_inside(root_real, files.join(d) if d else files.root)
    }

    def delete_chunk(start: int) -> list[str]:
        done = []
        for rel, parent in zip(
            relative_paths[start : start + LOCAL_CHUNK],
            parents[start : start + LOCAL_CHUNK],
            strict=True,
        ):
            full = files.join(rel)
            if parent not in safe_dirs or os.path.islink(full):
                logger.warning(
                    "%s: not deleting %s: it resolves outside the table root", files.root, rel
                )
                continue
            unlink_local(full)
            done.append(rel)
        report(done)
        return done

    starts = range(0, len(relative_paths), LOCAL_CHUNK)
    with ThreadPoolExecutor(max_workers=min(DELETE_WORKERS, len(starts))) as pool:
        return [p for part in pool.map(delete_chunk, starts) for p in part]


def remove_empty_dirs(files: TableRoot, relative_dirs: Sequence[str]) -> int:
    """Remove the given directories that are empty, in order, never recursively (never one
    outside the root)."""
    removed = 0
    if files.native is not None:
        return 0  # object stores have no directories: one with no keys is gone by itself
    root_real = os.path.realpath(files.root) if files.is_local else ""
    for d in relative_dirs:
        if leaves_root(d):
            continue
        full = files.join(d)
        try:
            if files.is_local:
                if os.path.islink(full) or not really_inside(root_real, full):
                    continue  # through a symlink: a directory elsewhere
                os.rmdir(full)
            else:
                if files.filesystem.ls(full):
                    continue
                files.filesystem.rmdir(full)
            removed += 1
        except OSError:
            continue  # not empty, or already gone
    return removed
