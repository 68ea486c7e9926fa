"""Which tables a maintenance DAG covers: explicit ones, URLs, or a discovered warehouse.

The same rules as Dagster's targets (`delta_ops.dagster.targets`): a table has a short unique
name (task groups, pools, assets and alerts use it), its URL, its own storage options or
connection, and opt-ins; a warehouse root is searched for directories holding a
``_delta_log`` (two levels deep, hidden and ``_`` directories skipped), each named by its path
under the root with ``__`` for ``/``:

    as_tables("/data/warehouse")                     # discovered
    as_tables(["s3://lake/events", DeltaTable("orders", "s3://lake/orders",
                                                delta_ops_conn_id="lake_s3")])
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from delta_ops.service.table_names import check_unique, safe_identifier
from delta_ops.storage.warehouse import find_tables, name_for


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
        return safe_identifier(self.name)

    @property
    def uri(self) -> str:
        """The table asset's URI."""
        if self.asset_uri:
            return self.asset_uri
        if "://" in self.url:
            return self.url
        return "file://" + os.path.abspath(self.url)


def discover_tables(warehouse: str, *, max_depth: int = 2) -> list[DeltaTable]:
    """Local directories under `warehouse` (up to `max_depth` levels) that hold a `_delta_log`
    (`delta_ops.storage.warehouse`)."""
    return [DeltaTable(name=n, url=u) for n, u in find_tables(warehouse, max_depth=max_depth)]


def as_tables(tables: Iterable[DeltaTable | str] | str) -> list[DeltaTable]:
    """The factory's `tables` argument as tables: tables, URLs, or one warehouse root; names
    must stay unique, also as identifiers."""
    if isinstance(tables, str):
        return discover_tables(tables)
    out = [
        table
        if isinstance(table, DeltaTable)
        else DeltaTable(name=name_for(str(table)), url=str(table))
        for table in tables
    ]
    check_unique([t.name for t in out], "a DAG", "Airflow")
    return out


__all__ = ["DeltaTable", "as_tables", "discover_tables"]
