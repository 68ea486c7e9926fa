"""Checkpoint content: the reconciled state as Delta Spark lays it out in parquet.

The workflow of writing a checkpoint, in order (see :mod:`delta_ops.ops.checkpoint` for the
plan/execute operation that drives it):

1. :func:`checkpoint_state` takes a snapshot and `now` and applies expiry: tombstones are kept
   only while `deletionTimestamp > now - delta.deletedFileRetentionDuration`; txns expire only
   when `delta.setTransactionRetentionDuration` is set (then a txn without `lastUpdated` goes);
   removed domains are dropped. `commitInfo` and `cdc` never appear.
2. :func:`checkpoint_schema` builds Spark's V1 schema for this table: columns `txn, add,
   remove, metaData, protocol, domainMetadata`, everything nullable; `add` has every field Spark
   writes, `stats` as JSON and, when `delta.checkpoint.writeStatsAsStruct` is true,
   `partitionValues_parsed` / `stats_parsed` typed from the table schema by physical name.
3. :func:`build_checkpoint_parts` turns the state into row groups per part (file actions
   clustered by path for multi-part); :func:`sidecar_parts` and :func:`v2_top_level_rows` give
   the V2 layout.
   File actions carry `dataChange=false`; `remove` has no `tags`/`stats`.

Everything is vectorised over the snapshot's Arrow tables.

Example::

    state = checkpoint_state(snapshot, now_ms)
    [row_groups] = build_checkpoint_parts(state, checkpoint_schema(snapshot), parsed_columns(snapshot))
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from delta_ops.log.actions import DELETION_VECTOR_TYPE, STRING_MAP
from delta_ops.log.replay import DomainMetadata, Txn

if TYPE_CHECKING:
    from delta_ops.table.snapshot import Snapshot

TXN_TYPE = pa.struct([("appId", pa.string()), ("version", pa.int64()), ("lastUpdated", pa.int64())])
METADATA_TYPE = pa.struct(
    [
        ("id", pa.string()),
        ("name", pa.string()),
        ("description", pa.string()),
        ("format", pa.struct([("provider", pa.string()), ("options", STRING_MAP)])),
        ("schemaString", pa.string()),
        ("partitionColumns", pa.list_(pa.string())),
        ("configuration", STRING_MAP),
        ("createdTime", pa.int64()),
    ]
)
PROTOCOL_TYPE = pa.struct(
    [
        ("minReaderVersion", pa.int32()),
        ("minWriterVersion", pa.int32()),
        ("readerFeatures", pa.list_(pa.string())),
        ("writerFeatures", pa.list_(pa.string())),
    ]
)
DOMAIN_TYPE = pa.struct(
    [("domain", pa.string()), ("configuration", pa.string()), ("removed", pa.bool_())]
)
REMOVE_TYPE = pa.struct(
    [
        ("path", pa.string()),
        ("deletionTimestamp", pa.int64()),
        ("dataChange", pa.bool_()),
        ("extendedFileMetadata", pa.bool_()),
        ("partitionValues", STRING_MAP),
        ("size", pa.int64()),
        ("deletionVector", DELETION_VECTOR_TYPE),
        ("baseRowId", pa.int64()),
        ("defaultRowCommitVersion", pa.int64()),
    ]
)
ADD_BASE_FIELDS = [
    ("path", pa.string()),
    ("partitionValues", STRING_MAP),
    ("size", pa.int64()),
    ("modificationTime", pa.int64()),
    ("dataChange", pa.bool_()),
    ("tags", STRING_MAP),
    ("deletionVector", DELETION_VECTOR_TYPE),
    ("baseRowId", pa.int64()),
    ("defaultRowCommitVersion", pa.int64()),
    ("clusteringProvider", pa.string()),
    ("stats", pa.string()),
]
CHECKPOINT_METADATA_TYPE = pa.struct([("version", pa.int64()), ("tags", STRING_MAP)])
SIDECAR_TYPE = pa.struct(
    [
        ("path", pa.string()),
        ("sizeInBytes", pa.int64()),
        ("modificationTime", pa.int64()),
        ("tags", STRING_MAP),
    ]
)


@dataclass
class CheckpointState:
    """What a checkpoint at `version` holds, after expiry."""

    version: int
    protocol: dict[str, Any]
    metadata: dict[str, Any]
    txns: list[Txn]
    domains: list[DomainMetadata]
    adds: pa.Table
    tombstones: pa.Table
    expired_tombstones: int
    expired_txns: int

    @property
    def num_non_file_actions(self) -> int:
        return 2 + len(self.txns) + len(self.domains)

    @property
    def num_actions(self) -> int:
        return int(self.num_non_file_actions + self.adds.num_rows + self.tombstones.num_rows)


def checkpoint_state(snapshot: Snapshot, now_ms: int) -> CheckpointState:
    """The snapshot's state with tombstone and txn expiry applied as of `now_ms`."""
    props = snapshot.properties
    tombstones = snapshot.tombstones
    cutoff = now_ms - props.deleted_file_retention_ms
    deleted_at = pc.fill_null(tombstones.column("deletionTimestamp"), 0)
    kept_tombstones = tombstones.filter(pc.greater(deleted_at, cutoff))
    txns = sorted(snapshot.txns.values(), key=lambda t: t.app_id)
    kept_txns = txns
    if props.set_transaction_retention_ms is not None:
        txn_cutoff = now_ms - props.set_transaction_retention_ms
        kept_txns = [t for t in txns if t.last_updated is not None and t.last_updated > txn_cutoff]
    return CheckpointState(
        version=snapshot.version,
        protocol=snapshot.protocol.to_action(),
        metadata=snapshot.metadata.to_action(),
        txns=kept_txns,
        domains=sorted(snapshot.domains.values(), key=lambda d: d.domain),
        adds=snapshot.files,
        tombstones=kept_tombstones,
        expired_tombstones=tombstones.num_rows - kept_tombstones.num_rows,
        expired_txns=len(txns) - len(kept_txns),
    )


# ----------------------------------------------------------------------------------- schema
@dataclass(frozen=True)
class ParsedColumns:
    """How to type `partitionValues_parsed` / `stats_parsed` for one table (None = omitted)."""

    partition_schema: pa.Schema | None
    partition_keys: tuple[str, ...]  # physical names, as the partitionValues map keys
    partition_delta_types: tuple[Any, ...]
    stats_schema: pa.Schema | None


def parsed_columns(snapshot: Snapshot) -> ParsedColumns:
    """The typed columns Spark adds to `add` when writeStatsAsStruct is true."""
    from delta_ops.protocol.schema import partition_schema, physical_name, stats_schema

    props = snapshot.properties
    if not props.checkpoint_write_stats_as_struct:
        return ParsedColumns(None, (), (), None)
    schema = snapshot.schema
    partition_columns = list(snapshot.partition_columns)
    part_schema = None
    keys: tuple[str, ...] = ()
    types: tuple[Any, ...] = ()
    if partition_columns:
        part_schema = partition_schema(schema, partition_columns, physical=True)
        by_name = {f.name.lower(): f for f in schema.fields}
        fields = [by_name[c.lower()] for c in partition_columns]
        keys = tuple(physical_name(f) for f in fields)
        types = tuple(f.type for f in fields)
    stats = stats_schema(
        schema,
        partition_columns,
        num_indexed_cols=props.data_skipping_num_indexed_cols,
        stats_columns=props.data_skipping_stats_columns,
        physical=True,
        tight_bounds=snapshot.protocol.supports("deletionVectors"),
    )
    return ParsedColumns(part_schema, keys, types, stats if len(stats) else None)


def add_type(parsed: ParsedColumns, *, write_stats_as_json: bool = True) -> pa.StructType:
    fields = [f for f in ADD_BASE_FIELDS if write_stats_as_json or f[0] != "stats"]
    if parsed.partition_schema is not None:
        fields.append(("partitionValues_parsed", pa.struct(list(parsed.partition_schema))))
    if parsed.stats_schema is not None:
        fields.append(("stats_parsed", pa.struct(list(parsed.stats_schema))))
    return pa.struct(fields)


def checkpoint_schema(snapshot: Snapshot) -> pa.Schema:
    """Spark's V1 classic checkpoint schema for this table (all fields nullable)."""
    parsed = parsed_columns(snapshot)
    return pa.schema(
        [
            ("txn", TXN_TYPE),
            (
                "add",
                add_type(
                    parsed, write_stats_as_json=snapshot.properties.checkpoint_write_stats_as_json
                ),
            ),
            ("remove", REMOVE_TYPE),
            ("metaData", METADATA_TYPE),
            ("protocol", PROTOCOL_TYPE),
            ("domainMetadata", DOMAIN_TYPE),
        ]
    )


# ----------------------------------------------------------------------------------- arrays
def _column(table: pa.Table, name: str, typ: pa.DataType) -> pa.Array:
    if name not in table.column_names:
        return pa.nulls(table.num_rows, typ)
    col = table.column(name)
    col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    return col if col.type == typ else col.cast(typ)


def _partition_values_parsed(adds: pa.Table, parsed: ParsedColumns) -> pa.Array:
    from delta_ops.protocol.schema import parse_partition_values

    pv = _column(adds, "partitionValues", STRING_MAP)
    children = []
    for key, delta_type in zip(parsed.partition_keys, parsed.partition_delta_types):
        raw = (
            pc.map_lookup(pv, pa.scalar(key, pa.string()), "first")
            if len(pv)
            else pa.array([], pa.string())
        )
        children.append(parse_partition_values(raw, delta_type))
    assert parsed.partition_schema is not None
    return pa.StructArray.from_arrays(children, fields=list(parsed.partition_schema))


def _stats_parsed(adds: pa.Table, parsed: ParsedColumns) -> pa.Array:
    from delta_ops.protocol.schema import parse_stats

    assert parsed.stats_schema is not None
    result = parse_stats(_column(adds, "stats", pa.string()), parsed.stats_schema)
    return (
        result.cast(pa.struct(list(parsed.stats_schema)))
        if result.type != pa.struct(list(parsed.stats_schema))
        else result
    )


def add_struct(adds: pa.Table, typ: pa.StructType, parsed: ParsedColumns) -> pa.StructArray:
    """The `add` column for live files: every Spark field, `dataChange=false`."""
    n = adds.num_rows
    children = []
    for field in typ:
        if field.name == "dataChange":
            children.append(pa.array(np.zeros(n, dtype=bool)))
        elif field.name == "partitionValues_parsed":
            children.append(_partition_values_parsed(adds, parsed))
        elif field.name == "stats_parsed":
            children.append(_stats_parsed(adds, parsed))
        else:
            children.append(_column(adds, field.name, field.type))
    return pa.StructArray.from_arrays(children, fields=list(typ))


def remove_struct(tombstones: pa.Table) -> pa.StructArray:
    """The `remove` column for unexpired tombstones: no tags/stats, `dataChange=false`."""
    n = tombstones.num_rows
    children = []
    for field in REMOVE_TYPE:
        if field.name == "dataChange":
            children.append(pa.array(np.zeros(n, dtype=bool)))
        else:
            children.append(_column(tombstones, field.name, field.type))
    return pa.StructArray.from_arrays(children, fields=list(REMOVE_TYPE))


def to_arrow_value(value: Any, typ: pa.DataType) -> Any:
    """Python action values in the shape pa.array expects (maps as lists of pairs)."""
    if value is None:
        return None
    if pa.types.is_map(typ):
        return [(k, v) for k, v in value.items()] if isinstance(value, dict) else value
    if pa.types.is_struct(typ):
        return {f.name: to_arrow_value(value.get(f.name), f.type) for f in typ}
    if pa.types.is_list(typ):
        return list(value)
    return value


def non_file_rows(state: CheckpointState) -> dict[str, pa.Array]:
    """Arrays (one row per action) for protocol, metaData, domains and txns, in Spark's order."""
    protocol = dict(state.protocol)
    rows: list[tuple[str, Any]] = [("protocol", protocol), ("metaData", state.metadata)]
    rows += [
        ("domainMetadata", {"domain": d.domain, "configuration": d.configuration, "removed": False})
        for d in state.domains
    ]
    rows += [
        ("txn", {"appId": t.app_id, "version": t.version, "lastUpdated": t.last_updated})
        for t in state.txns
    ]
    types = {
        "protocol": PROTOCOL_TYPE,
        "metaData": METADATA_TYPE,
        "domainMetadata": DOMAIN_TYPE,
        "txn": TXN_TYPE,
    }
    out = {}
    for name, typ in types.items():
        out[name] = pa.array([to_arrow_value(v, typ) if k == name else None for k, v in rows], typ)
    return out


def _rows(schema: pa.Schema, filled: dict[str, pa.Array]) -> pa.Table:
    """A table of `schema` where only the columns in `filled` have values (all others null)."""
    n = len(next(iter(filled.values())))
    return pa.Table.from_arrays(
        [filled[f.name] if f.name in filled else pa.nulls(n, f.type) for f in schema], schema=schema
    )


def checkpoint_row_groups(
    schema: pa.Schema, leading: dict[str, pa.Array], adds: pa.Array | None, removes: pa.Array | None
) -> list[pa.Table]:
    """The rows of one checkpoint file as separate tables (written as row groups, in order):
    the non-file actions, then the adds, then the removes. Writing them one after another
    avoids concatenating (copying) the file actions into one table."""
    groups = []
    if leading:
        groups.append(_rows(schema, {k: v for k, v in leading.items() if k in schema.names}))
    if adds is not None and len(adds):
        groups.append(_rows(schema, {"add": adds}))
    if removes is not None and len(removes) and "remove" in schema.names:
        groups.append(_rows(schema, {"remove": removes}))
    if not groups:
        groups.append(schema.empty_table())
    return groups


def parts_of_paths(
    add_paths: pa.Array, remove_paths: pa.Array, num_parts: int
) -> tuple[np.ndarray, np.ndarray]:
    """A part (0-based) per add and per remove such that one path's actions share a part.

    One dictionary encoding over both path columns gives every distinct path one code; the
    part is the code modulo `num_parts`, which also spreads paths evenly.
    """
    if num_parts <= 1:
        return np.zeros(len(add_paths), dtype=np.int64), np.zeros(len(remove_paths), dtype=np.int64)
    codes = (
        pc.dictionary_encode(pa.concat_arrays([add_paths, remove_paths]))
        .indices.to_numpy()
        .astype(np.int64)
    )
    parts = codes % num_parts
    return parts[: len(add_paths)], parts[len(add_paths) :]


def build_checkpoint_parts(
    state: CheckpointState, schema: pa.Schema, parsed: ParsedColumns, num_parts: int = 1
) -> list[list[pa.Table]]:
    """Row groups per checkpoint part; non-file actions go to the first part.

    Spark sorts file actions by path; readers must not depend on order, so we skip the sort.
    """
    adds = add_struct(state.adds, schema.field("add").type, parsed)
    removes = remove_struct(state.tombstones)
    leading = non_file_rows(state)
    if num_parts <= 1:
        return [checkpoint_row_groups(schema, leading, adds, removes)]
    add_part, remove_part = parts_of_paths(
        pc.struct_field(adds, "path"), pc.struct_field(removes, "path"), num_parts
    )
    return [
        checkpoint_row_groups(
            schema,
            leading if part == 0 else {},
            adds.filter(pa.array(add_part == part)),
            removes.filter(pa.array(remove_part == part)),
        )
        for part in range(num_parts)
    ]


def sidecar_parts(
    state: CheckpointState, schema: pa.Schema, parsed: ParsedColumns, actions_per_sidecar: int
) -> list[list[pa.Table]]:
    """V2 sidecars: only `add` and `remove` columns, about `actions_per_sidecar` rows each."""
    sidecar_schema = pa.schema([schema.field("add"), schema.field("remove")])
    adds = add_struct(state.adds, schema.field("add").type, parsed)
    removes = remove_struct(state.tombstones)
    total = len(adds) + len(removes)
    count = max(1, -(-total // actions_per_sidecar))
    size = -(-total // count) if total else 0
    parts = []
    for i in range(count):
        lo, hi = i * size, min(total, (i + 1) * size)
        add_slice = (
            adds.slice(lo, max(0, min(hi, len(adds)) - lo)) if lo < len(adds) else adds.slice(0, 0)
        )
        r_lo, r_hi = max(0, lo - len(adds)), max(0, hi - len(adds))
        parts.append(
            checkpoint_row_groups(sidecar_schema, {}, add_slice, removes.slice(r_lo, r_hi - r_lo))
        )
    return parts


def v2_top_level_rows(
    state: CheckpointState, sidecars: Sequence[dict[str, Any]], checkpoint_tags: dict[str, str]
) -> list[dict[str, Any]]:
    """The V2 top-level file as JSON actions: checkpointMetadata, sidecars, then non-file actions."""
    rows: list[dict[str, Any]] = [
        {"checkpointMetadata": {"version": state.version, "tags": checkpoint_tags}}
    ]
    rows += [{"sidecar": s} for s in sidecars]
    rows.append({"protocol": state.protocol})
    rows.append({"metaData": state.metadata})
    rows += [
        {
            "txn": {
                "appId": t.app_id,
                "version": t.version,
                **({"lastUpdated": t.last_updated} if t.last_updated is not None else {}),
            }
        }
        for t in state.txns
    ]
    rows += [
        {"domainMetadata": {"domain": d.domain, "configuration": d.configuration, "removed": False}}
        for d in state.domains
    ]
    return rows


def spark_schema_json(schema: pa.Schema) -> dict[str, Any]:
    """The checkpoint schema as Spark's StructType JSON (for `_last_checkpoint.checkpointSchema`)."""
    from delta_ops.protocol.schema import from_arrow_schema

    parsed: dict[str, Any] = json.loads(from_arrow_schema(schema).to_json())
    return parsed
