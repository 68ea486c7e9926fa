"""A table's clustering: the columns its rows are clustered by, the tags that say which files
are clustered, and how well its files separate on those columns.

A table with the `clustering` feature (liquid clustering) names its columns in the
`delta.clustering` domain; files a clustering wrote carry Delta's Z-cube tags (``ZCUBE_ID``,
``ZCUBE_ZORDER_BY``, ``ZCUBE_ZORDER_CURVE``). Compaction's clustering mode
(`delta_ops.ops.cluster`) reads and writes them, `cluster_by` sets the columns, the Spark
writers order rows along the table's curve (`write_order`), and the health check reports the
layout (`clustering_layout`):

    columns = table_clustering_columns(snapshot)      # None: not clustered by columns
    layout = clustering_layout(snapshot)
    print(layout.unskippable_share if layout else "not clustered")
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from delta_ops.errors import InvalidValue, OperationRefused
from delta_ops.layout.curves import column_keys, curve_for_clustering
from delta_ops.layout.write_order import WriteOrder
from delta_ops.protocol.schema import (
    StatsColumn,
    parse_column_names,
    parse_stats,
    stats_columns_of,
    stats_schema,
)
from delta_ops.table.snapshot import Snapshot

ZCUBE_ID = "ZCUBE_ID"
ZCUBE_ZORDER_BY = "ZCUBE_ZORDER_BY"
ZCUBE_ZORDER_CURVE = "ZCUBE_ZORDER_CURVE"
#: the domain where Delta keeps a clustered table's columns: {"clusteringColumns": [["a"], ...]}
#: (physical names, one path per column)
CLUSTERING_DOMAIN = "delta.clustering"
#: where tables clustered with the pre-release `liquid` feature keep them (Databricks wrote
#: them): {"clusteringColumns": [{"physicalName": ["a"]}, ...], "domainName": "delta.liquid"}
LIQUID_DOMAIN = "delta.liquid"
#: `add.clusteringProvider` of a file liquid clustering wrote
CLUSTERING_PROVIDER = "liquid"


@dataclass(frozen=True)
class ClusteringColumn:
    """A column rows are clustered by: its name path as the schema spells it and as data files
    and stats name it (they differ under column mapping)."""

    logical: tuple[str, ...]
    physical: tuple[str, ...]

    @property
    def name(self) -> str:
        return StatsColumn(self.logical, self.physical, "long").name


def resolve_columns(
    snapshot: Snapshot, names: Sequence[tuple[str, ...]], option: str
) -> tuple[ClusteringColumn, ...]:
    """The table's columns `names` (name paths, any letter case, as Spark resolves them);
    refuses, in one line naming `option`, a column the table lacks, a partition column, a
    column named twice and one without min/max statistics (its type has none, or the table's
    `delta.dataSkipping*` properties leave it out): clustering by it would skip nothing."""
    if not names:
        raise InvalidValue(f"{option}: name at least one column")
    partition = {c.lower() for c in snapshot.partition_columns}
    every = {
        tuple(p.lower() for p in c.logical): c
        for c in stats_columns_of(snapshot.schema, snapshot.partition_columns, num_indexed_cols=-1)
    }
    props = snapshot.properties
    indexed = {
        c.logical
        for c in stats_columns_of(
            snapshot.schema,
            snapshot.partition_columns,
            num_indexed_cols=props.data_skipping_num_indexed_cols,
            stats_columns=props.data_skipping_stats_columns,
        )
        if c.has_min_max
    }
    out: list[ClusteringColumn] = []
    for path in names:
        shown = ".".join(path)
        if len(path) == 1 and path[0].lower() in partition:
            raise InvalidValue(
                f"{option} {shown}: a partition column; files are clustered within each"
                " partition, by data columns"
            )
        column = every.get(tuple(p.lower() for p in path))
        if column is None:
            columns = ", ".join(c.name for c in every.values()) or "none"
            raise InvalidValue(f"{option} {shown}: no such column (data columns: {columns})")
        if not column.has_min_max:
            raise InvalidValue(
                f"{option} {shown}: its type ({column.type}) has no min/max statistics, so"
                " clustering by it would let readers skip nothing"
            )
        if column.logical not in indexed:
            raise InvalidValue(
                f"{option} {shown}: the table collects no statistics for it (see"
                " delta.dataSkippingNumIndexedCols / delta.dataSkippingStatsColumns), so"
                " clustering by it would let readers skip nothing"
            )
        resolved = ClusteringColumn(column.logical, column.physical)
        if resolved in out:
            raise InvalidValue(f"{option} {shown}: named twice")
        out.append(resolved)
    return tuple(out)


def parse_column_list(text: str, snapshot: Snapshot, option: str) -> tuple[ClusteringColumn, ...]:
    """`a,b` (backticks quote a name holding a dot or a comma; `s.x` is a nested field) as the
    table's columns (`resolve_columns`)."""
    return resolve_columns(snapshot, parse_column_names(text), option)


def table_clustering_columns(snapshot: Snapshot) -> tuple[ClusteringColumn, ...] | None:
    """The clustering columns of a table with the `clustering` feature, from its
    `delta.clustering` domain (physical names, mapped to logical ones), or, on a table
    clustered with the pre-release `liquid` feature, its `delta.liquid` domain; None for a
    table without the feature, or without columns (``CLUSTER BY NONE``, or no domain yet)."""
    if not snapshot.protocol.supports("clustering"):
        return None
    name = CLUSTERING_DOMAIN
    domain = snapshot.domains.get(name)
    if domain is None:  # a table clustered with the pre-release feature
        name = LIQUID_DOMAIN
        domain = snapshot.domains.get(name)
    if domain is None or domain.removed:
        return None
    try:
        entries = json.loads(domain.configuration)["clusteringColumns"]
        paths = [
            tuple(str(p) for p in (e["physicalName"] if isinstance(e, dict) else e))
            for e in entries
        ]
    except (ValueError, KeyError, TypeError) as exc:
        raise OperationRefused(
            f"{snapshot.storage.url}: the {name} domain is not"
            f" {{'clusteringColumns': [[...], ...]}}: {domain.configuration!r}"
        ) from exc
    if not paths:
        return None
    by_physical = {
        tuple(p.lower() for p in c.physical): c
        for c in stats_columns_of(snapshot.schema, snapshot.partition_columns, num_indexed_cols=-1)
    }
    out = []
    for path in paths:
        column = by_physical.get(tuple(p.lower() for p in path))
        if column is None:
            raise OperationRefused(
                f"{snapshot.storage.url}: clustering column {'.'.join(path)} (from the"
                f" {name} domain) is not a data column of the table"
            )
        out.append(ClusteringColumn(column.logical, column.physical))
    return tuple(out)


def write_order(snapshot: Snapshot) -> WriteOrder | None:
    """The order a write to this table gives its rows: along the curve over its clustering
    columns (logical names, as a writer's data names them), None for a table not clustered
    by columns."""
    columns = table_clustering_columns(snapshot)
    if not columns:
        return None
    return WriteOrder(tuple(c.logical for c in columns), curve_for_clustering(len(columns)))


def cube_of(
    tags: Mapping[str, str], provider: str | None, logical: list[str], curve: str
) -> str | None:
    """The file's ZCUBE_ID when its tags say it was clustered by these columns with this
    curve (a file without a curve tag: any curve, as Delta's own tags omit it)."""
    cube = tags.get(ZCUBE_ID)
    if cube is None or provider not in (None, CLUSTERING_PROVIDER):
        return None
    try:
        by = json.loads(tags.get(ZCUBE_ZORDER_BY) or "null")
    except ValueError:
        return None
    if not isinstance(by, list) or [str(c).lower() for c in by] != [c.lower() for c in logical]:
        return None
    if tags.get(ZCUBE_ZORDER_CURVE, curve) != curve:
        return None
    return cube


def file_bounds(
    snapshot: Snapshot, files: pa.Table, columns: Sequence[ClusteringColumn]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each file's (`files`: rows of `snapshot.files`) min and max of each column as curve
    keys (rows x columns, uint64), and whether both are known for every column (a file
    without stats, or without bounds for a column, may hold any value). The stats are parsed
    columnar (`parse_stats`), not file by file."""
    props = snapshot.properties
    schema = stats_schema(
        snapshot.schema,
        snapshot.partition_columns,
        num_indexed_cols=props.data_skipping_num_indexed_cols,
        stats_columns=props.data_skipping_stats_columns,
        physical=True,
        tight_bounds=False,
    )
    n = files.num_rows
    lows = np.zeros((n, len(columns)), dtype=np.uint64)
    highs = np.zeros((n, len(columns)), dtype=np.uint64)
    known = np.ones(n, dtype=bool)
    if not n:
        return lows, highs, known
    names = set(schema.names)
    if "minValues" not in names:
        return lows, highs, np.zeros(n, dtype=bool)
    parsed = parse_stats(files.column("stats"), schema)
    for i, column in enumerate(columns):
        for side, out in (("minValues", lows), ("maxValues", highs)):
            values: pa.Array | None = parsed.field(side)
            for part in column.physical:
                typ = values.type if values is not None else None
                if typ is None or typ.get_field_index(part) < 0:
                    values = None
                    break
                values = pc.struct_field(values, part)
            if values is None:
                known[:] = False
                continue
            out[:, i] = column_keys(values)
            known &= pc.is_valid(values).to_numpy(zero_copy_only=False)
    return lows, highs, known


@dataclass(frozen=True)
class ClusteringLayout:
    """How well a clustered table's files separate on its clustering columns: the Dagster
    layout check's facts."""

    columns: tuple[str, ...]
    files: int
    #: live files not clustered by these columns (what `compact` would pick up)
    unclustered_files: int
    #: over 100 points of the data (a random file's box, a random point in it), the mean
    #: share of files whose min/max stats cannot exclude the point: 1.0 when every file
    #: spans everything, about 1/files when the files tile the columns' space
    unskippable_share: float


def clustering_layout(snapshot: Snapshot, points: int = 100) -> ClusteringLayout | None:
    """The layout facts of a table clustered by columns (None for one that is not)."""
    columns = table_clustering_columns(snapshot)
    if not columns:
        return None
    files = snapshot.files
    logical = [".".join(c.logical) for c in columns]
    curve = curve_for_clustering(len(columns))
    tags = files.column("tags").to_pylist()
    providers = files.column("clusteringProvider").to_pylist()
    unclustered = sum(
        1
        for t, provider in zip(tags, providers, strict=True)
        if cube_of(dict(t or ()), provider, logical, curve) is None
    )
    lows, highs, known = file_bounds(snapshot, files, columns)
    share = 1.0
    if files.num_rows:
        rng = np.random.default_rng(0)
        chosen = rng.integers(0, files.num_rows, points)
        fraction = rng.random((points, len(columns)))
        low = lows[chosen].astype(np.float64)
        high = highs[chosen].astype(np.float64)
        at = low + (high - low) * fraction
        shares = []
        for point in at:
            inside = (lows.astype(np.float64) <= point) & (highs.astype(np.float64) >= point)
            shares.append(float(np.mean(inside.all(axis=1) | ~known)))
        share = float(np.mean(shares))
    return ClusteringLayout(
        columns=tuple(c.name for c in columns),
        files=files.num_rows,
        unclustered_files=unclustered,
        unskippable_share=round(share, 4),
    )


__all__ = [
    "CLUSTERING_DOMAIN",
    "CLUSTERING_PROVIDER",
    "LIQUID_DOMAIN",
    "ZCUBE_ID",
    "ZCUBE_ZORDER_BY",
    "ZCUBE_ZORDER_CURVE",
    "ClusteringColumn",
    "ClusteringLayout",
    "clustering_layout",
    "cube_of",
    "file_bounds",
    "parse_column_list",
    "resolve_columns",
    "table_clustering_columns",
    "write_order",
]
