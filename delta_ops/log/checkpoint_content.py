"""Checkpoint content: the reconciled state as Delta Spark lays it out in parquet.

The workflow of writing a checkpoint, in order (see `delta_ops.ops.checkpoint_writer` for the
plan/execute operation that drives it):

1. `checkpoint_state` takes a loaded snapshot and `now` and applies expiry: tombstones
   are kept only while `deletionTimestamp > now - delta.deletedFileRetentionDuration`; txns
   expire only when `delta.setTransactionRetentionDuration` is set (then a txn without
   `lastUpdated` goes); removed domains are dropped. `commitInfo` and `cdc` never appear.
   `streamed_checkpoint_state` does the same for a table too big to load, from a
   `delta_ops.log.state_stream.StreamedState`. Either way the file actions are handed
   out a batch at a time, never as one table.
2. `checkpoint_schema` builds Spark's V1 schema for this table: columns `txn, add,
   remove, metaData, protocol, domainMetadata`, everything nullable; `add` has every field Spark
   writes, `stats` as JSON and, when `delta.checkpoint.writeStatsAsStruct` is true,
   `partitionValues_parsed` / `stats_parsed` typed from the table schema by physical name.
3. `checkpoint_rows` turns the state into tables of that schema, one row group each
   (a part's share by path for multi-part, `part_of_paths`; a window of the stream for
   a V2 sidecar, `even_windows`); `v2_top_level_rows` gives the V2 top-level
   file. Each file is written from its own pass, so files can be written in parallel. File
   actions carry `dataChange=false`; `remove` has no `tags`/`stats`.

Everything is vectorised over Arrow tables of bounded size. The table comes in as what a
snapshot offers (`TableState`, `TableDescription`), so the log layer never
imports the table layer.

For example:

    state = checkpoint_state(snapshot, now_ms)
    for row_group in checkpoint_rows(state, checkpoint_schema(snapshot), parsed_columns(snapshot)):
        writer.write_table(row_group)
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from delta_ops.log import state_stream
from delta_ops.log.actions import (
    ADD_FIELDS,
    DELETION_VECTOR_TYPE,
    REMOVE_FIELDS,
    STRING_MAP,
    from_numpy,
    restrict_partition_values,
)
from delta_ops.log.replay import DomainMetadata, Txn
from delta_ops.protocol.features import Protocol as TableProtocol
from delta_ops.protocol.properties import TableProperties
from delta_ops.protocol.schema import (
    StructType,
    arrow_leaf_paths,
    from_arrow_schema,
    parse_partition_values,
    parse_stats,
    partition_schema,
    physical_name,
    stats_schema,
)

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


#: typed copies of `add` fields a checkpoint may hold (written when writeStatsAsStruct is on)
PARSED_FIELDS = ("stats_parsed", "partitionValues_parsed")
#: rows [start, end) of a checkpoint's file actions (live adds, then kept tombstones, batch by
#: batch), the share of one V2 sidecar
Window = tuple[int, int]
#: (offset of the batch's first row in the file-action stream, adds, kept tombstones)
OffsetBatch = tuple[int, pa.Table, pa.Table]


class TableDescription(Protocol):
    """What a table's checkpoint schema depends on. A loaded snapshot and a table head
    (`delta_ops.table.snapshot`, which this layer does not import) are both one."""

    @property
    def protocol(self) -> TableProtocol: ...

    @property
    def properties(self) -> TableProperties: ...

    @property
    def schema(self) -> StructType: ...

    @property
    def partition_columns(self) -> tuple[str, ...]: ...


class MetadataAction(Protocol):
    """The table's `metaData` action, as it writes itself back to the log."""

    def to_action(self) -> dict[str, Any]: ...


class TableState(TableDescription, Protocol):
    """A table's reconciled state held in memory, as a loaded snapshot holds it."""

    @property
    def version(self) -> int: ...

    @property
    def metadata(self) -> MetadataAction: ...

    @property
    def files(self) -> pa.Table: ...

    @property
    def tombstones(self) -> pa.Table: ...

    @property
    def txns(self) -> Mapping[str, Txn]: ...

    @property
    def domains(self) -> Mapping[str, DomainMetadata]: ...


class FileActions(Protocol):
    """Where a checkpoint's file actions come from; picklable, so that Spark tasks can write
    their share of a checkpoint from it."""

    def batches(self, window: Window | None = None) -> Iterator[OffsetBatch]:
        """Every batch, in stream order; with a window, batches wholly outside it may be left
        out (the offsets still say where each batch starts)."""
        ...


@dataclass
class LoadedFileActions:
    """The file actions of a loaded snapshot, after expiry, handed out in slices."""

    files: pa.Table
    tombstones: pa.Table

    def batches(self, window: Window | None = None) -> Iterator[OffsetBatch]:
        step = state_stream.STREAM_BATCH_ROWS
        offset = 0
        for start in range(0, max(self.files.num_rows, self.tombstones.num_rows, 1), step):
            adds, tombstones = self.files.slice(start, step), self.tombstones.slice(start, step)
            count = adds.num_rows + tombstones.num_rows
            if window is None or (offset < window[1] and offset + count > window[0]):
                yield offset, adds, tombstones
            offset += count


@dataclass
class StreamedFileActions:
    """The file actions of a streamed state, with the expiry and partition-value clean-up
    a loaded snapshot gets; `unit_rows` (from the plan's counting pass) lets a window skip
    the units it does not need without reading them."""

    streamed: state_stream.StreamedState
    partition_keys: set[str]
    cutoff_ms: int
    unit_rows: list[tuple[state_stream.Unit, int]]

    def batches(self, window: Window | None = None) -> Iterator[OffsetBatch]:
        units, starts, offset = [], {}, 0
        for unit, count in self.unit_rows:
            if window is None or (offset < window[1] and offset + count > window[0]):
                units.append(unit)
                starts[unit] = offset
            offset += count
        fields = (*ADD_FIELDS, *PARSED_FIELDS)  # passed through when their type still fits
        position: dict[state_stream.Unit, int] = {}
        for unit, adds, tombstones in self.streamed.file_batches(
            fields, REMOVE_FIELDS, units=units
        ):
            adds = restrict_partition_values(adds, self.partition_keys)
            kept = unexpired_tombstones(
                restrict_partition_values(tombstones, self.partition_keys), self.cutoff_ms
            )
            at = position.get(unit, starts[unit])
            yield at, adds, kept
            position[unit] = at + adds.num_rows + kept.num_rows


@dataclass
class CheckpointState:
    """What a checkpoint at `version` holds, after expiry. The file actions are not held as
    one table: `files.batches()` hands them out a batch at a time, as often as needed."""

    version: int
    protocol: dict[str, Any]
    metadata: dict[str, Any]
    txns: list[Txn]
    domains: list[DomainMetadata]
    num_adds: int
    num_tombstones: int
    expired_tombstones: int
    expired_txns: int
    files: FileActions

    @property
    def num_non_file_actions(self) -> int:
        return 2 + len(self.txns) + len(self.domains)

    @property
    def num_file_actions(self) -> int:
        return self.num_adds + self.num_tombstones

    @property
    def num_actions(self) -> int:
        return self.num_non_file_actions + self.num_file_actions


def unexpired_tombstones(tombstones: pa.Table, cutoff_ms: int) -> pa.Table:
    """Tombstones a checkpoint keeps: deleted after the cutoff (a missing time counts as 0)."""
    if "deletionTimestamp" not in tombstones.column_names or not tombstones.num_rows:
        return tombstones
    deleted_at = pc.fill_null(tombstones.column("deletionTimestamp"), 0)
    return tombstones.filter(pc.greater(deleted_at, cutoff_ms))


def _kept_txns(txns: Mapping[str, Txn], props: TableProperties, now_ms: int) -> list[Txn]:
    ordered = sorted(txns.values(), key=lambda t: t.app_id)
    if props.set_transaction_retention_ms is None:
        return ordered
    cutoff = now_ms - props.set_transaction_retention_ms
    return [t for t in ordered if t.last_updated is not None and t.last_updated > cutoff]


def checkpoint_state(snapshot: TableState, now_ms: int) -> CheckpointState:
    """The state of a loaded snapshot with tombstone and txn expiry applied as of `now_ms`."""
    props = snapshot.properties
    files = snapshot.files
    kept = unexpired_tombstones(snapshot.tombstones, now_ms - props.deleted_file_retention_ms)
    txns = _kept_txns(snapshot.txns, props, now_ms)
    return CheckpointState(
        version=snapshot.version,
        protocol=snapshot.protocol.to_action(),
        metadata=snapshot.metadata.to_action(),
        txns=txns,
        domains=sorted(snapshot.domains.values(), key=lambda d: d.domain),
        num_adds=files.num_rows,
        num_tombstones=kept.num_rows,
        expired_tombstones=snapshot.tombstones.num_rows - kept.num_rows,
        expired_txns=len(snapshot.txns) - len(txns),
        files=LoadedFileActions(files, kept),
    )


def streamed_checkpoint_state(
    streamed: state_stream.StreamedState,
    *,
    protocol: dict[str, Any],
    metadata: dict[str, Any],
    properties: TableProperties,
    partition_keys: set[str],
    now_ms: int,
) -> CheckpointState:
    """The state of a table too big to load, streamed from its checkpoint: one pass over the
    checkpoint's key columns counts what the new checkpoint will hold (its part and sidecar
    names depend on it) and how many rows each unit gives; `files.batches()` passes over the
    whole actions again."""
    cutoff = now_ms - properties.deleted_file_retention_ms
    num_adds = num_tombstones = expired = 0
    rows: dict[state_stream.Unit, int] = {}
    for unit, adds, tombstones in streamed.file_batches((), ("deletionTimestamp",)):
        kept = unexpired_tombstones(tombstones, cutoff)
        num_adds += adds.num_rows
        num_tombstones += kept.num_rows
        expired += tombstones.num_rows - kept.num_rows
        rows[unit] = rows.get(unit, 0) + adds.num_rows + kept.num_rows
    replayed = streamed.replayed
    txns = _kept_txns(replayed.txns, properties, now_ms)
    return CheckpointState(
        version=streamed.segment.version,
        protocol=protocol,
        metadata=metadata,
        txns=txns,
        domains=sorted(replayed.domains.values(), key=lambda d: d.domain),
        num_adds=num_adds,
        num_tombstones=num_tombstones,
        expired_tombstones=expired,
        expired_txns=len(replayed.txns) - len(txns),
        files=StreamedFileActions(streamed, partition_keys, cutoff, list(rows.items())),
    )


# ----------------------------------------------------------------------------------- schema
@dataclass(frozen=True)
class ParsedColumns:
    """How to type `partitionValues_parsed` / `stats_parsed` for one table (None = omitted)."""

    partition_schema: pa.Schema | None
    partition_keys: tuple[str, ...]  # physical names, as the partitionValues map keys
    partition_delta_types: tuple[Any, ...]
    stats_schema: pa.Schema | None


def parsed_columns(snapshot: TableDescription) -> ParsedColumns:
    """The typed columns Spark adds to `add` when writeStatsAsStruct is true."""
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


def writes_json_stats(snapshot: TableDescription) -> bool:
    """Whether a checkpoint carries `add.stats` as JSON: as `delta.checkpoint.writeStatsAsJson`
    says (true by default), and always on a table with geospatial columns, whose bounding-box
    stats exist only in the JSON (`stats_parsed` leaves them out): without it the checkpoint
    would drop them for every reader."""
    return snapshot.properties.checkpoint_write_stats_as_json or snapshot.protocol.supports(
        "geospatial"
    )


def checkpoint_schema(snapshot: TableDescription) -> pa.Schema:
    """Spark's V1 classic checkpoint schema for this table (all fields nullable)."""
    parsed = parsed_columns(snapshot)
    return pa.schema(
        [
            ("txn", TXN_TYPE),
            (
                "add",
                add_type(parsed, write_stats_as_json=writes_json_stats(snapshot)),
            ),
            ("remove", REMOVE_TYPE),
            ("metaData", METADATA_TYPE),
            ("protocol", PROTOCOL_TYPE),
            ("domainMetadata", DOMAIN_TYPE),
        ]
    )


#: fields of a file action whose values repeat from file to file: the only ones a parquet
#: dictionary pays for. The others (path, size, times, stats, row ids) are all but unique per
#: file, so a dictionary for them is built only to overflow to plain (a fifth of the write).
_REPEATING_FILE_FIELDS = (
    "partitionValues",
    "partitionValues_parsed",
    "tags",
    "deletionVector.storageType",
    "clusteringProvider",
    "dataChange",
    "extendedFileMetadata",
)


def dictionary_columns(schema: pa.Schema) -> list[str]:
    """The parquet leaf columns of a checkpoint `schema` to dictionary-encode (the writer's
    ``use_dictionary``): every leaf but the per-file unique ones of ``add`` and ``remove``.
    The encoding changes no value a reader gets, only the write's cost and the file's size."""
    leaves = [
        ".".join(path)
        for field in schema
        for path, _ in arrow_leaf_paths(field.type, (field.name,), False)
    ]
    return [
        leaf
        for leaf in leaves
        if not leaf.startswith(("add.", "remove."))
        or leaf.split(".", 1)[1].startswith(_REPEATING_FILE_FIELDS)
    ]


# ----------------------------------------------------------------------------------- arrays
def _column(table: pa.Table, name: str, typ: pa.DataType) -> pa.Array:
    if name not in table.column_names:
        return pa.nulls(table.num_rows, typ)
    col = table.column(name)
    col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    return col if col.type == typ else col.cast(typ)


def _partition_values_parsed(pv: pa.MapArray, parsed: ParsedColumns) -> pa.Array:
    keys = list(parsed.partition_keys)
    columns = _values_in_key_order(pv, keys)
    children = []
    for i, (key, delta_type) in enumerate(zip(keys, parsed.partition_delta_types)):
        if columns is not None:
            raw = columns[i]
        elif len(pv):
            raw = pc.map_lookup(pv, pa.scalar(key, pa.string()), "first")
        else:
            raw = pa.array([], pa.string())
        children.append(parse_partition_values(raw, delta_type))
    assert parsed.partition_schema is not None
    return pa.StructArray.from_arrays(children, fields=list(parsed.partition_schema))


def _values_in_key_order(pv: pa.MapArray, keys: list[str]) -> list[pa.Array] | None:
    """Each key's value per row when every row's map holds exactly `keys`, in that order (as
    writers write partition values): strided slices of the map's values, instead of a lookup
    per row and key (a fifth of the time). None when any row differs."""
    n, k = len(pv), len(keys)
    if n == 0 or k == 0 or pv.null_count or len(set(keys)) != k:
        return None
    offsets = pv.offsets.to_numpy()
    if not bool((np.diff(offsets) == k).all()):
        return None
    first = int(offsets[0])  # a sliced map's keys and items are its parent's, whole
    flat_keys, flat_values = pv.keys.slice(first, n * k), pv.items.slice(first, n * k)
    columns = []
    for j, key in enumerate(keys):
        rows = from_numpy(np.arange(j, n * k, k, dtype=np.int64)) if k > 1 else None
        row_keys = flat_keys if rows is None else flat_keys.take(rows)
        if not pc.all(pc.equal(row_keys, pa.scalar(key, pa.string()))).as_py():
            return None
        columns.append(flat_values if rows is None else flat_values.take(rows))
    return columns


def _stats_parsed(stats: pa.Array, parsed: ParsedColumns) -> pa.Array:
    assert parsed.stats_schema is not None
    result = parse_stats(stats, parsed.stats_schema)
    return (
        result.cast(pa.struct(list(parsed.stats_schema)))
        if result.type != pa.struct(list(parsed.stats_schema))
        else result
    )


def _stored(adds: pa.Table, name: str, typ: pa.DataType, source: str) -> pa.Array | None:
    """A typed column the previous checkpoint already holds (`stats_parsed`, ...), when it has
    exactly the type this checkpoint writes and a value wherever `source` has one: then it
    is what parsing `source` again would give, and is copied instead."""
    if name not in adds.column_names or adds.schema.field(name).type != typ:
        return None
    column = adds.column(name).combine_chunks()
    if source in adds.column_names:
        source_column = adds.column(source)
        if not pc.all(pc.or_(source_column.is_null(), column.is_valid())).as_py():
            return None
    return column


def add_struct(adds: pa.Table, typ: pa.StructType, parsed: ParsedColumns) -> pa.StructArray:
    """The `add` column for live files: every Spark field, `dataChange=false`."""
    n = adds.num_rows
    combined: dict[str, pa.Array] = {}

    def column(name: str, typ: pa.DataType) -> pa.Array:
        # `stats` and `partitionValues` are written as they are and parsed into their typed
        # columns: their chunks are combined once for both (twice copied the stats twice)
        if name not in combined or combined[name].type != typ:
            combined[name] = _column(adds, name, typ)
        return combined[name]

    children = []
    for field in typ:
        if field.name == "dataChange":
            children.append(from_numpy(np.zeros(n, dtype=bool)))
        elif field.name == "partitionValues_parsed":
            stored = _stored(adds, field.name, field.type, "partitionValues")
            children.append(
                stored
                if stored is not None
                else _partition_values_parsed(column("partitionValues", STRING_MAP), parsed)
            )
        elif field.name == "stats_parsed":
            stored = _stored(adds, field.name, field.type, "stats")
            children.append(
                stored
                if stored is not None
                else _stats_parsed(column("stats", pa.string()), parsed)
            )
        else:
            children.append(column(field.name, field.type))
    return pa.StructArray.from_arrays(children, fields=list(typ))


def remove_struct(tombstones: pa.Table) -> pa.StructArray:
    """The `remove` column for unexpired tombstones: no tags/stats, `dataChange=false`."""
    n = tombstones.num_rows
    children = []
    for field in REMOVE_TYPE:
        if field.name == "dataChange":
            children.append(from_numpy(np.zeros(n, dtype=bool)))
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


def checkpoint_rows(
    state: CheckpointState,
    schema: pa.Schema,
    parsed: ParsedColumns,
    *,
    non_file_actions: bool = True,
    part: tuple[int, int] | None = None,
    window: Window | None = None,
) -> Iterator[pa.Table]:
    """The rows of a checkpoint file as tables of `schema` (Spark's V1 schema, or a V2
    sidecar's `add` / `remove` only), a batch at a time, to be written one row group each: the
    non-file actions first (unless `non_file_actions` is false), then each batch's adds and
    removes.

    `part=(i, n)` keeps only the file actions of part `i` of `n` (`part_of_paths`);
    `window` keeps rows [start, end) of the file actions (a V2 sidecar's share). Spark sorts
    file actions by path; readers must not depend on order, so we do not.
    """
    if non_file_actions:
        leading = non_file_rows(state)
        yield _rows(schema, {k: v for k, v in leading.items() if k in schema.names})
    add_type = schema.field("add").type
    for offset, adds, tombstones in state.files.batches(window):
        if window is not None:
            adds, tombstones = _in_window(offset, adds, tombstones, window)
        if part is not None:
            index, count = part
            adds = adds.filter(part_of_paths(adds.column("path"), count) == index)
            tombstones = tombstones.filter(part_of_paths(tombstones.column("path"), count) == index)
        if adds.num_rows:
            yield _rows(schema, {"add": add_struct(adds, add_type, parsed)})
        if tombstones.num_rows and "remove" in schema.names:
            yield _rows(schema, {"remove": remove_struct(tombstones)})


def _in_window(
    offset: int, adds: pa.Table, tombstones: pa.Table, window: Window
) -> tuple[pa.Table, pa.Table]:
    """The rows of one batch (adds, then tombstones, starting at `offset`) inside `window`."""
    start, end = window[0] - offset, window[1] - offset

    def cut(table: pa.Table, first: int) -> pa.Table:
        lo, hi = max(start - first, 0), min(end - first, table.num_rows)
        return table.slice(lo, max(0, hi - lo))

    return cut(adds, 0), cut(tombstones, adds.num_rows)


def part_of_paths(paths: pa.Array | pa.ChunkedArray, num_parts: int) -> np.ndarray:
    """The multi-part checkpoint part (0-based) of each file action, from its path alone, so
    that every action on one path shares a part (Spark clusters parts by path). The hash is
    computed over each path's bytes with numpy: stable across batches, runs and processes."""
    paths = paths.combine_chunks() if isinstance(paths, pa.ChunkedArray) else paths
    if num_parts <= 1 or not len(paths):
        return np.zeros(len(paths), dtype=np.int64)
    paths = paths.cast(pa.large_string()) if paths.type != pa.large_string() else paths
    offsets = np.frombuffer(paths.buffers()[1], dtype=np.int64)[
        paths.offset : paths.offset + len(paths) + 1
    ]
    data = np.frombuffer(paths.buffers()[2], dtype=np.uint8)
    first, last = int(offsets[0]), int(offsets[-1])
    lengths = np.diff(offsets)
    position = np.arange(first, last, dtype=np.int64) - np.repeat(offsets[:-1], lengths)
    weights = (position.astype(np.uint64) * np.uint64(2654435761) + np.uint64(97)) & np.uint64(
        0xFFFFFFFF
    )
    contributions = data[first:last].astype(np.uint64) * weights
    if not len(contributions):
        return np.zeros(len(paths), dtype=np.int64)
    starts = np.minimum(offsets[:-1] - first, len(contributions) - 1)
    sums = np.add.reduceat(contributions, starts)
    sums[lengths == 0] = 0  # reduceat gives an empty run its next element
    return (sums % np.uint64(num_parts)).astype(np.int64)


def even_windows(total: int, count: int) -> list[Window]:
    """`total` rows in `count` consecutive windows of (nearly) equal size, the last ones the
    shortest."""
    size = -(-total // count) if total else 0
    return [(min(i * size, total), min((i + 1) * size, total)) for i in range(count)]


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
    parsed: dict[str, Any] = json.loads(from_arrow_schema(schema).to_json())
    return parsed
