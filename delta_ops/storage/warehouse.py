"""The Delta tables under a local warehouse folder: what a fleet or a DAG factory maintains
when given a root instead of a list.

A table is a directory holding a ``_delta_log`` directory, found up to ``max_depth`` levels
below the root; hidden and ``_`` directories are skipped, and nothing under a table is searched.
Each is named by its path under the root, with ``__`` for ``/``::

    find_tables("/data/warehouse")   # [("events", "/data/warehouse/events"),
                                     #  ("sales__orders", "/data/warehouse/sales/orders")]
"""

from __future__ import annotations

import os


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


__all__ = ["find_tables", "name_for"]
