"""Listing a big table on S3 in parallel key ranges, skipping the `_delta_log`.

A recursive listing of one prefix is a chain of ListObjectsV2 pages (1000 keys each) that S3
serves one after another: 100k files are 100 sequential round trips. S3 starts a listing at any
key (`StartAfter`), so the key space can be cut into ranges listed concurrently; the cut points
come from names the caller already knows (the table's live files and tombstones), so ranges hold
similar numbers of keys. Every key under the prefix lands in exactly one range: range i covers
(cut[i-1], cut[i]]. The `_delta_log/` key range is jumped over when the caller skips it:

    entries = list_in_ranges(fs, "bucket/table", known_names, skip_prefixes=["_delta_log/"])

Two clients: s3fs (`list_in_ranges`, its raw `call_s3`) and the native client
(`list_in_ranges_native`, obstore's listing from an offset, run in threads: the requests and
the parsing of their replies happen in Rust, outside the GIL). A range ends at its last
known key, so it asks for no page past it, and keeps the other keys of a page that holds
skipped ones, jumping over a skipped prefix only when a page ends inside it. Other stores
list with one recursive listing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from delta_ops.storage.native_store import NativeStore

#: at most this many known names per range: a range fits one 1000-key page, with room for 100
#: names the caller does not know (orphans, log files), so its listing is one round trip
KEYS_PER_RANGE = 900
#: ranges listed at once (S3 serves thousands of listings per second per prefix); a bigger
#: table has more pages per range
MAX_RANGES = 64


@dataclass(frozen=True)
class ListedObject:
    """One key under the listed prefix: path relative to it, size, mtime in ms."""

    relative: str
    size: int
    modification_time: int


def is_s3(fs: Any) -> bool:
    """Whether `fs` is s3fs (its raw client calls serve the range listing and bulk deletes)."""
    return hasattr(fs, "_call_s3") and hasattr(fs, "split_path")


def cut_points(known_names: Sequence[str]) -> list[str]:
    """Up to MAX_RANGES - 1 names splitting the sorted known names into even ranges of at most
    KEYS_PER_RANGE names (while MAX_RANGES allows)."""
    names = sorted(known_names)
    ranges = max(1, min(MAX_RANGES, -(-len(names) // KEYS_PER_RANGE)))
    return [names[len(names) * i // ranges] for i in range(1, ranges)]


def list_in_ranges(
    fs: Any, root: str, known_names: Sequence[str], skip_prefixes: Sequence[str] = ()
) -> list[ListedObject]:
    """Every object under `root` (an s3fs path, bucket/prefix) whose relative key does not start
    with one of `skip_prefixes`, listed in concurrent key ranges."""
    from fsspec.asyn import sync

    bucket, key_prefix, _ = fs.split_path(root)
    prefix = key_prefix.rstrip("/") + "/" if key_prefix else ""
    cuts = [prefix + name for name in cut_points(known_names)]
    bounds = list(zip([None, *cuts], [*cuts, None], strict=True))
    # the key just past every key under a skipped prefix ending in "/": "/" + 1 is "0"
    jumps = {prefix + p: prefix + p[:-1] + "0" for p in skip_prefixes if p.endswith("/")}

    async def one_range(after: str | None, last: str | None) -> list[ListedObject]:
        found: list[ListedObject] = []
        request: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix}
        if after is not None:
            request["StartAfter"] = after
        while True:
            page = await fs._call_s3("list_objects_v2", **request)
            restart = None
            for obj in page.get("Contents", []):
                key = obj["Key"]
                if last is not None and key > last:
                    return found
                skipped = next((j for p, j in jumps.items() if key.startswith(p)), None)
                if skipped is not None:
                    restart = skipped
                    break
                found.append(
                    ListedObject(
                        key[len(prefix) :],
                        int(obj.get("Size") or 0),
                        int(obj["LastModified"].timestamp() * 1000),
                    )
                )
            if restart is not None:
                if last is not None and restart > last:
                    return found
                request.pop("ContinuationToken", None)
                request["StartAfter"] = restart
                continue
            if not page.get("IsTruncated"):
                return found
            request["ContinuationToken"] = page["NextContinuationToken"]

    import asyncio  # here: importing asyncio costs every CLI start 20 ms

    async def all_ranges() -> list[list[ListedObject]]:
        return list(await asyncio.gather(*(one_range(a, b) for a, b in bounds)))

    return [obj for part in sync(fs.loop, all_ranges) for obj in part]


def list_in_ranges_native(
    store: NativeStore, root: str, known_names: Sequence[str], skip_prefixes: Sequence[str] = ()
) -> list[ListedObject]:
    """`list_in_ranges` on the native client: every object under `root` (``bucket/prefix``)
    whose relative key does not start with one of `skip_prefixes`."""
    from concurrent.futures import ThreadPoolExecutor

    base = store.key(root).rstrip("/")
    prefix = base + "/" if base else ""
    cuts = [prefix + name for name in cut_points(known_names)]
    bounds = list(zip([None, *cuts], [*cuts, None], strict=True))
    jumps = {prefix + p: prefix + p[:-1] + "0" for p in skip_prefixes if p.endswith("/")}

    def one_range(after: str | None, last: str | None) -> list[ListedObject]:
        found: list[ListedObject] = []
        while True:
            restart = None
            offset = store.path(after) if after is not None else None
            for page in store.list_tree(root, offset=offset):
                for obj in page:
                    key = store.key(obj.path)
                    if last is not None and key > last:
                        return found
                    if any(key.startswith(p) for p in jumps):
                        continue  # a skipped key: left out, the page's others are kept
                    found.append(ListedObject(key[len(prefix) :], obj.size, obj.modification_time))
                    if key == last:  # the range's end is a key that exists: no further page
                        return found
                # a page ending inside a skipped prefix (a long log): jump past it instead
                # of paging through it
                tail = store.key(page[-1].path) if page else ""
                restart = next((j for p, j in jumps.items() if tail.startswith(p)), None)
                if restart is not None:
                    break
            if restart is None:
                return found
            if last is not None and restart > last:
                return found
            after = restart

    with ThreadPoolExecutor(max_workers=len(bounds)) as pool:
        parts = list(pool.map(lambda bound: one_range(*bound), bounds))
    return [obj for part in parts for obj in part]


__all__ = ["ListedObject", "cut_points", "is_s3", "list_in_ranges", "list_in_ranges_native"]
