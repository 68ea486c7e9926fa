"""The Delta tables under a local warehouse folder: what a fleet or a DAG factory maintains
when given a root instead of a list.

A table is a directory holding a ``_delta_log`` directory, found up to ``max_depth`` levels
below the root; hidden and ``_`` directories are skipped, and nothing under a table is searched.
Each is named by its path under the root, with ``__`` for ``/``:

    find_tables("/data/warehouse")   # [("events", "/data/warehouse/events"),
                                     #  ("sales__orders", "/data/warehouse/sales/orders")]

The fleet's operation history (`delta_ops.service.history`) lives in `HISTORY_FOLDER` of the
folder that holds its tables (`history_location`), which discovery skips.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Sequence
from urllib.parse import urlsplit

#: the operation history's folder in a warehouse (``_``: never found as one of its tables)
HISTORY_FOLDER = "_delta_ops_history"


def find_tables(warehouse: str, *, max_depth: int = 2) -> list[tuple[str, str]]:
    """(name, absolute path) of every table under `warehouse`, sorted by name; none when the
    folder does not exist."""
    found: list[tuple[str, str]] = []
    root = os.path.abspath(warehouse)
    if not os.path.isdir(root):
        return found
    for current, dirs, _ in os.walk(root):
        depth = os.path.relpath(current, root).count(os.sep) + (0 if current == root else 1)
        if "_delta_log" in dirs and current != root:
            found.append((os.path.relpath(current, root).replace(os.sep, "__"), current))
            dirs[:] = []
            continue
        dirs[:] = [d for d in dirs if not d.startswith((".", "_"))] if depth < max_depth else []
    return sorted(found)


def name_for(url: str) -> str:
    """The default name of a table given by its URL or path: its last path segment."""
    return os.path.basename(url.rstrip("/")) or "table"


def history_location(tables: str | Sequence[str]) -> str | None:
    """Where a fleet's history goes by default: `HISTORY_FOLDER` in the warehouse root
    (`tables` a string, as the fleets' factories take a root), else in the folder holding all
    of `tables` (local paths or URLs); None when they share none (two stores or buckets)."""
    if isinstance(tables, str):
        return posixpath.join(tables.rstrip("/"), HISTORY_FOLDER)
    parents = [_store_and_parent(table) for table in tables]
    stores = {store for store, _ in parents}
    if len(stores) != 1:
        return None
    common = posixpath.commonpath([parent for _, parent in parents])
    return f"{stores.pop()}{posixpath.join(common, HISTORY_FOLDER)}"


def _store_and_parent(table: str) -> tuple[str, str]:
    """(``scheme://netloc`` of an object store, or "" for a local path; the table's parent)."""
    parts = urlsplit(table)
    if len(parts.scheme) > 1 and parts.scheme != "file":  # one letter: a Windows drive
        return f"{parts.scheme}://{parts.netloc}", posixpath.dirname("/" + parts.path.strip("/"))
    local = parts.path if parts.scheme == "file" else table
    return "", os.path.dirname(os.path.abspath(local))


__all__ = ["HISTORY_FOLDER", "find_tables", "history_location", "name_for"]
