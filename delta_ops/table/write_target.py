"""Where and how new rows go into a table: one decision shared by every writer.

A data write must lay its files out as the table says, not as the data happens to look:

* partition columns are the table's own (a new table takes the caller's); asking for others,
  or leaving out one the table has, is an error;
* under column mapping, files name columns by their physical names (with parquet field ids in
  ``id`` mode) and ``partitionValues`` are keyed by physical names too, so a writer that used
  the logical names would write columns every reader sees as null;
* columns are typed as the table declares them (data of a narrower type is cast), missing
  nullable columns are written as nulls, and columns the table does not have are refused,
  unless `merge_schema` adds them to the table's schema (nullable) in the same commit;
* rules delta-ops cannot enforce refuse the write before any file exists: CHECK constraints,
  invariants, generated and identity columns, DEFAULT values of columns the data leaves out
  (their SQL expressions would have to be evaluated), and an overwrite of an append-only
  table. NOT NULL columns are checked on the rows themselves (`check_not_null`).

`resolve_write_target` makes these decisions once, on the driver; the result is plain
data that Spark tasks can carry. `to_file_table` turns rows into what a data file holds.

For example:

    target = resolve_write_target(storage, data.schema, partition_by=["day"])
    file_rows = to_file_table(data, target)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from delta_ops.errors import (
    InvalidValue,
    NotADeltaTable,
    OperationRefused,
    SchemaMismatch,
)
from delta_ops.protocol.features import Access, Protocol
from delta_ops.protocol.partition_predicate import PartitionPredicate, parse_partition_predicate
from delta_ops.protocol.properties import COLUMN_MAPPING_MAX_COLUMN_ID, TableProperties
from delta_ops.protocol.schema import (
    StructField,
    StructType,
    assign_column_mapping,
    from_arrow_schema,
    parse_schema,
    physical_name,
    to_arrow_field,
)
from delta_ops.storage import Storage
from delta_ops.table.new_table import new_table_actions
from delta_ops.table.snapshot import Snapshot, load_snapshot

WRITE_MODES = ("append", "overwrite")

#: field metadata keys that carry rules a writer must evaluate (SQL expressions, sequences)
_FIELD_RULES = {
    "delta.invariants": "an invariant",
    "delta.generationExpression": "a generation expression",
    "delta.identity.start": "identity values",
}
_CONSTRAINT_PREFIX = "delta.constraints."


@dataclass(frozen=True)
class WriteTarget:
    """How rows are written into one table (plain data, picklable for Spark tasks).

    Attributes:
        url: the table's URL.
        version: the table version this was decided on; None when the write creates the table.
        partition_columns: logical names, in the table's order.
        file_schema: the data files' Arrow schema (physical names and field ids under column
            mapping, the table's types; partition columns only where materialized).
        file_names: logical top-level column name -> its name in files and `partitionValues`.
        not_null: logical names of top-level columns the table declares NOT NULL.
        new_table: the `protocol` and `metaData` actions that create the table (new tables).
        mode: ``append`` or ``overwrite``.
        data_schema: the schema of the rows, as asked (checked again at commit).
        schema_update: the `metaData` action's body that adds the data's new columns to the
            table (``merge_schema``); None when the schema stays.
        base_schema: the table's schemaString the update was made from (the commit refuses
            to apply it over any other).
        replace_where: an overwrite replaces only the partitions this predicate selects
            (`delta_ops.protocol.partition_predicate`), and every written row must be in them.
    """

    url: str
    version: int | None
    partition_columns: tuple[str, ...]
    file_schema: pa.Schema
    file_names: Mapping[str, str]
    not_null: tuple[str, ...] = ()
    new_table: tuple[Mapping[str, Any], ...] = ()
    mode: str = "append"
    data_schema: pa.Schema | None = None
    schema_update: Mapping[str, Any] | None = None
    base_schema: str | None = None
    replace_where: str | None = None
    partition_types: Mapping[str, Any] = field(default_factory=dict)  # column -> Delta type

    @property
    def exists(self) -> bool:
        return self.version is not None

    def file_name(self, column: str) -> str:
        """The name of logical column `column` in data files and `partitionValues`."""
        return self.file_names.get(column, column)

    def replace_predicate(self, text: str | None = None) -> PartitionPredicate | None:
        """`replace_where` (or `text`) parsed against this target's partition columns."""
        text = text if text is not None else self.replace_where
        if text is None:
            return None
        columns = [StructField(c, self.partition_types[c]) for c in self.partition_columns]
        return parse_partition_predicate(
            text,
            StructType(tuple(columns)),
            self.partition_columns,
            keys={c: self.file_name(c) for c in self.partition_columns},
            option="replaceWhere",
        )

    def same_layout(self, other: WriteTarget) -> bool:
        """Whether files written for `self` are laid out as `other` needs them, and both
        targets agree that the table exists."""
        return self.exists == other.exists and self.writes_files_like(other)

    def writes_files_like(self, other: WriteTarget) -> bool:
        """Whether files written for `self` are laid out as `other` needs them: the same
        partition columns, file schema (physical names, field ids, types) and file names. A
        target decided before its write created the table writes files like one decided on
        the table it created."""
        return (
            self.partition_columns == other.partition_columns
            and self.file_schema.equals(other.file_schema, check_metadata=True)
            and dict(self.file_names) == dict(other.file_names)
        )


def resolve_write_target(
    storage: Storage,
    schema: pa.Schema,
    *,
    partition_by: Sequence[str] | None = None,
    mode: str = "append",
    configuration: Mapping[str, str] | None = None,
    snapshot: Snapshot | None = None,
    merge_schema: bool = False,
    replace_where: str | None = None,
) -> WriteTarget:
    """Decide how rows of `schema` are written into the table at `storage`.

    Args:
        storage: the table (it need not exist yet).
        schema: the data's Arrow schema.
        partition_by: the partition columns asked for; None or empty means the table's own
            (none for a new table).
        mode: ``append`` or ``overwrite``.
        configuration: table properties of a new table (ignored for an existing one).
        snapshot: the table's latest snapshot when the caller already loaded it.
        merge_schema: columns of the data the table lacks are added to its schema (nullable,
            with column-mapping ids and physical names where the table maps columns), in the
            same commit as the rows; otherwise they are refused.
        replace_where: with ``overwrite``, replace only the partitions this predicate on
            partition columns selects (Delta's replaceWhere); the rows must all fall in them.

    Raises:
        UnsupportedFeature: a table feature does not allow data writes.
        InvalidValue: the mode, or replaceWhere without an overwrite, or a predicate that
            is not in the grammar.
        SchemaMismatch: the data's columns, types or partitioning do not fit the table.
        OperationRefused: the table has rules delta-ops cannot enforce (CHECK constraints,
            generated or identity columns, an overwrite of an append-only table), or new
            columns need a table feature the table lacks.
    """
    if mode not in WRITE_MODES:
        raise InvalidValue(f"write mode {mode!r} is not one of {', '.join(WRITE_MODES)}")
    if snapshot is None:
        try:
            snapshot = load_snapshot(storage)
        except NotADeltaTable:
            snapshot = None
    columns = schema.names
    wanted = list(partition_by or [])
    if snapshot is None:
        _check_columns_exist(storage.url, wanted, columns, "partition columns")
        actions = new_table_actions(schema, wanted, configuration or {})
        metadata = actions[1]["metaData"]
        table_schema = parse_schema(metadata["schemaString"])
        props = TableProperties.from_configuration(metadata["configuration"])
        protocol = Protocol.from_action(actions[0]["protocol"])
        target = _target(storage.url, None, table_schema, wanted, props, protocol, tuple(actions))
    else:
        target = _existing_target(storage, snapshot, schema, wanted, mode, merge_schema)
    if replace_where is not None:
        if mode != "overwrite":
            raise InvalidValue(f"replaceWhere {replace_where!r} needs mode overwrite, not {mode}")
        target.replace_predicate(replace_where)  # refuse a bad predicate before any file
    return replace(target, mode=mode, data_schema=schema, replace_where=replace_where)


def _existing_target(
    storage: Storage,
    snapshot: Snapshot,
    schema: pa.Schema,
    wanted: Sequence[str],
    mode: str,
    merge_schema: bool = False,
) -> WriteTarget:
    columns = schema.names
    snapshot.protocol.check_allows(Access.WRITE)
    _refuse_unenforced_rules(snapshot, mode)
    existing = list(snapshot.partition_columns)
    if wanted and [c.lower() for c in wanted] != [c.lower() for c in existing]:
        raise SchemaMismatch(f"{storage.url} is partitioned by {existing}, not {wanted}")
    table_schema = snapshot.schema
    by_lower = {f.name.lower(): f for f in table_schema.fields}
    extra = [c for c in columns if c.lower() not in by_lower]
    schema_update = None
    if extra and not merge_schema:
        raise SchemaMismatch(
            f"{storage.url}: the data has columns the table does not: {extra} "
            f"(the table has {table_schema.names}); write with merge_schema=True "
            "(Spark: option mergeSchema=true) to add them"
        )
    if extra:
        table_schema, schema_update = _merged_schema(snapshot, schema, extra)
        by_lower = {f.name.lower(): f for f in table_schema.fields}
    present = {c.lower() for c in columns}
    missing_required = [
        f.name for f in table_schema.fields if not f.nullable and f.name.lower() not in present
    ]
    if missing_required:
        raise SchemaMismatch(f"{storage.url}: the data lacks NOT NULL columns {missing_required}")
    defaulted = [
        f.name
        for f in table_schema.fields
        if "CURRENT_DEFAULT" in f.metadata and f.name.lower() not in present
    ]
    if defaulted:
        raise SchemaMismatch(
            f"{storage.url}: the data lacks columns {defaulted}, whose DEFAULT values delta-ops "
            "cannot evaluate; include them in the data"
        )
    _check_columns_exist(storage.url, existing, columns, "the table's partition columns")
    target = _target(
        storage.url,
        snapshot.version,
        table_schema,
        [by_lower[c.lower()].name for c in existing],
        TableProperties.from_configuration(schema_update["configuration"])
        if schema_update
        else snapshot.properties,
        snapshot.protocol,
    )
    if schema_update is None:
        return target
    return replace(target, schema_update=schema_update, base_schema=snapshot.metadata.schema_string)


def _merged_schema(
    snapshot: Snapshot, data_schema: pa.Schema, extra: Sequence[str]
) -> tuple[StructType, dict[str, Any]]:
    """The table schema with the data's `extra` columns appended (nullable; ids and physical
    names under column mapping, numbered after delta.columnMapping.maxColumnId) and the
    `metaData` action that records it."""
    added = from_arrow_schema(pa.schema([data_schema.field(c) for c in extra]))
    props = snapshot.properties
    metadata = snapshot.metadata.to_action()
    configuration = dict(metadata.get("configuration") or {})
    if props.column_mapping_mode != "none":
        added, highest = assign_column_mapping(added, start=props.column_mapping_max_column_id)
        configuration[COLUMN_MAPPING_MAX_COLUMN_ID] = str(highest)
    if '"timestamp_ntz"' in added.to_json() and not snapshot.protocol.supports("timestampNtz"):
        raise OperationRefused(
            f"{snapshot.storage.url}: new columns {list(extra)} need the timestampNtz table "
            "feature, which adding columns does not enable; add it first"
        )
    merged = StructType((*snapshot.schema.fields, *added.fields))
    metadata.update(schemaString=merged.to_json(), configuration=configuration)
    return merged, metadata


def _target(
    url: str,
    version: int | None,
    table_schema: StructType,
    partition_columns: Sequence[str],
    props: TableProperties,
    protocol: Protocol,
    new_table: tuple[Mapping[str, Any], ...] = (),
) -> WriteTarget:
    mapped = props.column_mapping_mode != "none"
    return WriteTarget(
        url=url,
        version=version,
        partition_columns=tuple(partition_columns),
        file_schema=data_file_schema(
            table_schema,
            partition_columns,
            mapped=mapped,
            partitions_in_files=protocol.supports("materializePartitionColumns"),
        ),
        file_names={f.name: physical_name(f) if mapped else f.name for f in table_schema.fields},
        not_null=tuple(f.name for f in table_schema.fields if not f.nullable),
        new_table=new_table,
        partition_types={
            f.name: f.type
            for f in table_schema.fields
            if f.name.lower() in {c.lower() for c in partition_columns}
        },
    )


def data_file_schema(
    table_schema: StructType,
    partition_columns: Sequence[str],
    *,
    mapped: bool,
    partitions_in_files: bool = False,
) -> pa.Schema:
    """The Arrow schema of a table's data files: its columns by the names files use
    (physical names and field ids when `mapped`, i.e. column mapping is on) and typed by the
    table schema; partition columns only where the table materializes them in data files."""
    partition_lower = {c.lower() for c in partition_columns}
    return pa.schema(
        [
            to_arrow_field(f, physical=mapped)
            for f in table_schema.fields
            if partitions_in_files or f.name.lower() not in partition_lower
        ]
    )


def to_file_table(data: pa.Table, target: WriteTarget) -> pa.Table:
    """The rows of `data` as a data file of `target` holds them: the table's file schema
    (physical names, field ids, table types; missing nullable columns null). Partition
    columns are left out unless the table materializes them."""
    check_not_null(data, target)
    logical = {target.file_name(c): c for c in target.file_names}
    by_lower = {c.lower(): c for c in data.column_names}
    arrays = []
    for f in target.file_schema:
        source = by_lower.get(logical.get(f.name, f.name).lower())
        if source is None:
            arrays.append(pa.nulls(data.num_rows, f.type))
        else:
            arrays.append(_as_type(data.column(source).combine_chunks(), f.type, f.name))
    return pa.Table.from_arrays(arrays, schema=target.file_schema)


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """`table` (already named as files name columns) in `schema`: columns in its order,
    missing ones null, types cast; columns the schema lacks (dropped under column mapping)
    left out."""
    if table.schema.equals(schema):
        return table  # a file already in the schema (the common case): nothing to rebuild
    columns = []
    for f in schema:
        if f.name in table.column_names:
            columns.append(_as_type(table.column(f.name), f.type, f.name))
        else:
            columns.append(pa.nulls(table.num_rows, f.type))
    return pa.Table.from_arrays(columns, schema=schema)


def check_not_null(data: pa.Table, target: WriteTarget) -> None:
    """Refuse rows with nulls in columns the table declares NOT NULL."""
    by_lower = {c.lower(): c for c in data.column_names}
    for column in target.not_null:
        source = by_lower.get(column.lower())
        if source is not None and data.column(source).null_count:
            raise SchemaMismatch(
                f"{target.url}: column {column!r} is NOT NULL but "
                f"{data.column(source).null_count} rows have no value"
            )


def _as_type(
    values: pa.Array | pa.ChunkedArray, typ: pa.DataType, name: str
) -> pa.Array | pa.ChunkedArray:
    """`values` as `typ`. Structs are rebuilt field by field in order, so logical nested names
    become physical ones, also inside arrays and maps (a cast matches struct fields by name,
    so it would turn every renamed field into nulls); everything else is cast."""
    if values.type == typ:
        return values
    array = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    if array.offset and pa.types.is_nested(array.type):  # rebuilt below from offsets
        array = array.take(pa.array(range(len(array)), pa.int64()))
    mask = pc.is_null(array) if array.null_count else None
    if pa.types.is_struct(typ) and pa.types.is_struct(array.type):
        assert isinstance(array, pa.StructArray)
        if array.type.num_fields == typ.num_fields:
            children = [
                _as_type(array.field(i), typ.field(i).type, f"{name}.{typ.field(i).name}")
                for i in range(typ.num_fields)
            ]
            return pa.StructArray.from_arrays(children, fields=list(typ), mask=mask)
    if _is_list(typ) and _is_list(array.type):
        assert isinstance(array, pa.ListArray | pa.LargeListArray)
        elements = _as_type(array.values, typ.value_type, f"{name}[]")
        rebuilt: pa.Array = type(array).from_arrays(array.offsets, elements, mask=mask)
        return rebuilt.cast(typ)
    if pa.types.is_map(typ) and pa.types.is_map(array.type):
        assert isinstance(array, pa.MapArray)
        keys = _as_type(array.keys, typ.key_type, f"{name}.key")
        items = _as_type(array.items, typ.item_type, f"{name}.value")
        rebuilt = pa.MapArray.from_arrays(array.offsets, keys, items, mask=mask)
        return rebuilt.cast(typ)
    try:
        return values.cast(typ)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise SchemaMismatch(
            f"column {name}: the data holds {values.type}, the table says {typ}: {exc}"
        ) from exc


def _is_list(typ: pa.DataType) -> bool:
    return bool(pa.types.is_list(typ) or pa.types.is_large_list(typ))


def _check_columns_exist(
    url: str, wanted: Iterable[str], columns: Sequence[str], what: str
) -> None:
    lower = {c.lower() for c in columns}
    missing = [c for c in wanted if c.lower() not in lower]
    if missing:
        raise SchemaMismatch(
            f"{url}: {what} {missing} are not in the data's columns {list(columns)}"
        )


def _refuse_unenforced_rules(snapshot: Snapshot, mode: str) -> None:
    url = snapshot.storage.url
    props = snapshot.properties
    if mode == "overwrite" and props.append_only:
        raise OperationRefused(
            f"{url} is append-only (delta.appendOnly=true): an overwrite would remove rows; "
            "append instead"
        )
    constraints = sorted(
        k[len(_CONSTRAINT_PREFIX) :]
        for k in snapshot.metadata.configuration
        if k.startswith(_CONSTRAINT_PREFIX)
    )
    if constraints:
        raise OperationRefused(
            f"{url} has CHECK constraints ({', '.join(constraints)}) that delta-ops cannot "
            "evaluate; write with an engine that enforces them (Delta Spark)"
        )
    for path, rule in _field_rules(snapshot.schema, ""):
        raise OperationRefused(
            f"{url}: column {path} has {rule} that delta-ops cannot evaluate; write with an "
            "engine that enforces it (Delta Spark)"
        )


def _field_rules(struct: StructType, parent: str) -> Iterable[tuple[str, str]]:
    for f in struct.fields:
        path = f"{parent}.{f.name}" if parent else f.name
        for key, rule in _FIELD_RULES.items():
            if key in f.metadata:
                yield path, rule
        if isinstance(f.type, StructType):
            yield from _field_rules(f.type, path)


__all__ = [
    "WRITE_MODES",
    "WriteTarget",
    "check_not_null",
    "conform",
    "data_file_schema",
    "resolve_write_target",
    "to_file_table",
]
