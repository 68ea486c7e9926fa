"""Which tables a maintenance DAG covers: explicit ones, URLs, or a discovered warehouse.

The same rules as Dagster's targets (`delta_ops.dagster.targets`): a table has a short unique
name (task groups, pools, assets and alerts use it), its URL, its own storage options or
connection, and opt-ins; a warehouse root is searched for directories holding a
``_delta_log`` (two levels deep, hidden and ``_`` directories skipped), each named by its path
under the root with ``__`` for ``/``::

    as_tables("/data/warehouse")                     # discovered
    as_tables(["s3://lake/events", DeltaTable("orders", "s3://lake/orders",
                                                delta_ops_conn_id="lake_s3")])
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class DeltaTable:
    """One table to maintain.

    Args:
        name: short unique name: task group, pool and asset names, alerts.
        url: path or fsspec URL of the table root.
        delta_ops_conn_id: the Airflow connection holding its storage options (default: the
            DAG's).
        storage_options: options over the connection's.
        enable_row_tracking: add the row-tracking backfill before the checkpoint (a change of
            the table's semantics, so it is opt-in).
        asset_uri: the URI of the table's Airflow asset (default: the URL; a local path as
            ``file://``): what a commit-watching DAG is scheduled on, and what other DAGs may
            name.
    """

    name: str
    url: str
    delta_ops_conn_id: str | None = None
    storage_options: Mapping[str, Any] = field(default_factory=dict)
    enable_row_tracking: bool = False
    asset_uri: str | None = None

    @property
    def safe_name(self) -> str:
        """The name as an Airflow identifier (letters, digits, underscores)."""
        return re.sub(r"[^A-Za-z0-9_]", "_", self.name)

    @property
    def uri(self) -> str:
        """The table asset's URI."""
        if self.asset_uri:
            return self.asset_uri
        if "://" in self.url:
            return self.url
        return "file://" + os.path.abspath(self.url)


def discover_tables(warehouse: str, *, max_depth: int = 2) -> list[DeltaTable]:
    """Local directories under `warehouse` (up to `max_depth` levels) that hold a `_delta_log`."""
    found: list[DeltaTable] = []
    root = os.path.abspath(warehouse)
    if not os.path.isdir(root):
        return found
    for current, dirs, _ in os.walk(root):
        depth = os.path.relpath(current, root).count(os.sep) + (0 if current == root else 1)
        if "_delta_log" in dirs and current != root:
            rel = os.path.relpath(current, root)
            found.append(DeltaTable(name=rel.replace(os.sep, "__"), url=current))
            dirs[:] = []
            continue
        dirs[:] = [d for d in dirs if not d.startswith((".", "_"))] if depth < max_depth else []
    return sorted(found, key=lambda t: t.name)


def as_tables(tables: Iterable[DeltaTable | str] | str) -> list[DeltaTable]:
    """The factory's `tables` argument as tables: tables, URLs, or one warehouse root; names
    must stay unique, also as identifiers."""
    if isinstance(tables, str):
        return discover_tables(tables)
    out = []
    for table in tables:
        if isinstance(table, DeltaTable):
            out.append(table)
        else:
            name = os.path.basename(str(table).rstrip("/")) or "table"
            out.append(DeltaTable(name=name, url=str(table)))
    names = [t.name for t in out]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"table names must be unique within a DAG: {duplicates}")
    by_safe: dict[str, list[str]] = {}
    for table in out:
        by_safe.setdefault(table.safe_name, []).append(table.name)
    clashes = [sorted(group) for group in by_safe.values() if len(group) > 1]
    if clashes:
        raise ValueError(
            f"table names must stay unique as Airflow identifiers (letters, digits, _): {clashes}"
        )
    return out


__all__ = ["DeltaTable", "as_tables", "discover_tables"]
