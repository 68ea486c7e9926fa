"""Data-file paths as the log writes them, turned into the table-relative keys storage reads.

A log's ``add`` and ``remove`` paths are usually relative and plain, but may be
percent-encoded, absolute (inside the table's root or not) or carry a scheme. Vacuum (which
files a version references) and repair (which live files storage lacks) compare them with a
listing, so both decode them the same way:

    relative = relative_paths(storage, snapshot.file_index.column("path"))
    key = relative_path(storage, add["path"])      # one path; None: outside the root
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from delta_ops.errors import UnsafePath
from delta_ops.protocol.string_bytes import any_holds
from delta_ops.storage import Storage


def relative_path(storage: Storage, path_in_log: str) -> str | None:
    """Decoded table-relative path, or None for paths outside the root (never touched)."""
    try:
        return storage.relative_inside_root(path_in_log)
    except UnsafePath:
        return None


def relative_paths(storage: Storage, paths: pa.Array) -> pa.Array:
    """Paths as written in the log, decoded and relative to the root (null: outside it).

    Vectorised: only paths that need work (percent-escapes, absolute, `..`, a scheme) go
    through Python; plain relative paths are already what they mean.
    """
    paths = paths.combine_chunks() if isinstance(paths, pa.ChunkedArray) else paths
    if len(paths) == 0:
        return pa.array([], pa.string())
    if not any_holds(paths, b"%", b"..", b"://") and not pc.any(pc.starts_with(paths, "/")).as_py():
        return paths  # one search over the paths' bytes: no row needs decoding
    special = pc.or_(
        pc.or_(pc.match_substring(paths, "%"), pc.match_substring(paths, "..")),
        pc.or_(pc.starts_with(paths, "/"), pc.match_substring(paths, "://")),
    )
    special = pc.fill_null(special, False)
    if not pc.any(special).as_py():
        return paths
    fixed = pa.array(
        [relative_path(storage, p) for p in paths.filter(special).to_pylist()], pa.string()
    )
    return pc.replace_with_mask(paths, special, fixed)
