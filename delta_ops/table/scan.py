"""A table's rows as Arrow: each live file of a snapshot read as every Delta reader must read it.

    table = read_table(load_snapshot("/data/events"), columns=["id", "day"])

Reading one file (`read_file`) means: its parquet columns found by their physical names
(column mapping) and renamed to the logical schema at every nesting level; values cast to the
table's types (a file written before a type widening holds the narrower type); columns added
after the file was written filled with nulls; INT96 timestamps read as microseconds (so year
9999 fits); partition columns built from the file's `partitionValues`, typed by the schema;
and the rows its deletion vector names dropped.

Files are independent, so the work splits: `plan_scan` describes the scan and the files as
plain, picklable data (what a Spark task needs), and any process that can open the table's
storage reads a file with `read_file`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import pyarrow as pa

from delta_ops.errors import DataFileError, InvalidValue
from delta_ops.protocol.deletion_vectors import DeletionVectorDescriptor, load_deletion_vector
from delta_ops.protocol.features import Access
from delta_ops.protocol.schema import (
    ArrayType,
    DeltaType,
    MapType,
    StructField,
    StructType,
    parse_partition_values,
    parse_schema,
    to_arrow_field,
    to_arrow_type,
)
from delta_ops.storage import Storage
from delta_ops.table.snapshot import Snapshot


@dataclass(frozen=True)
class FileToRead:
    """One live file: its path as the log has it, size, partition values, deletion vector."""

    path: str
    size: int
    partition_values: tuple[tuple[str, str | None], ...]
    deletion_vector: tuple[tuple[str, Any], ...] | None  # the descriptor's fields


@dataclass(frozen=True)
class ScanSpec:
    """What reading any file of the scan needs: the schema (JSON), partition columns, whether
    column mapping is on, and the logical columns wanted (None: all, in schema order)."""

    schema_json: str
    partition_columns: tuple[str, ...]
    column_mapping: bool
    columns: tuple[str, ...] | None = None

    @cached_property
    def schema(self) -> StructType:
        """The parsed schema (once per spec: every file read asks for it)."""
        return parse_schema(self.schema_json)

    def fields(self) -> list[StructField]:
        """The output fields, in output order."""
        schema = self.schema
        if self.columns is None:
            return list(schema.fields)
        known = {f.name: f for f in schema.fields}
        missing = [c for c in self.columns if c not in known]
        if missing:
            raise InvalidValue(
                f"no column {missing[0]!r} in the table; its columns: {', '.join(known)}"
            )
        return [known[c] for c in self.columns]

    def arrow_schema(self) -> pa.Schema:
        return pa.schema([to_arrow_field(f) for f in self.fields()])


def scan_spec(snapshot: Snapshot, columns: Sequence[str] | None = None) -> ScanSpec:
    """How any file of the snapshot's table is read (no file list); refused as
    `plan_scan` is."""
    snapshot.protocol.check_allows(Access.READ_ROWS)
    spec = ScanSpec(
        schema_json=snapshot.schema.to_json(),
        partition_columns=tuple(snapshot.partition_columns),
        column_mapping=snapshot.properties.column_mapping_mode != "none",
        columns=tuple(columns) if columns is not None else None,
    )
    spec.fields()  # unknown columns are refused before any file is read
    return spec


def plan_scan(
    snapshot: Snapshot, columns: Sequence[str] | None = None
) -> tuple[ScanSpec, list[FileToRead]]:
    """The scan of a snapshot's live files, as plain data; refused (UnsupportedFeature) when a
    table feature changes rows in ways this reader does not implement."""
    spec = scan_spec(snapshot, columns)
    files = [
        FileToRead(
            path=row["path"],
            size=int(row["size"] or 0),
            partition_values=tuple(row["partitionValues"] or ()),
            deletion_vector=(
                tuple((k, v) for k, v in row["deletionVector"].items() if v is not None)
                if row["deletionVector"] is not None
                else None
            ),
        )
        for row in snapshot.file_index.select(
            ["path", "size", "partitionValues", "deletionVector"]
        ).to_pylist()
    ]
    return spec, files


def read_table(snapshot: Snapshot, columns: Sequence[str] | None = None) -> pa.Table:
    """Every row of the snapshot (deletion vectors applied), as one Arrow table."""
    spec, files = plan_scan(snapshot, columns)
    parts = [read_file(snapshot.storage, spec, f) for f in files]
    return pa.concat_tables(parts) if parts else spec.arrow_schema().empty_table()


def read_batches(
    storage: Storage, spec: ScanSpec, files: Sequence[FileToRead]
) -> Iterator[pa.RecordBatch]:
    """The rows of `files`, one file after another, as record batches."""
    for file in files:
        yield from read_file(storage, spec, file).to_batches()


def read_file(storage: Storage, spec: ScanSpec, file: FileToRead) -> pa.Table:
    """One file's rows in the scan's logical schema, deletion vector applied."""
    import pyarrow.parquet as pq

    path = storage.table_path(file.path)
    fields = spec.fields()
    partition_values = dict(file.partition_values)
    data_fields = [f for f in fields if f.name not in spec.partition_columns]
    try:
        with storage.open_input(path) as handle:
            parquet = pq.ParquetFile(handle, coerce_int96_timestamp_unit="us")
            in_file = set(parquet.schema_arrow.names)
            wanted = [_name_in_file(f, spec) for f in data_fields]
            data = parquet.read(columns=[n for n in wanted if n in in_file])
    except (OSError, pa.ArrowException) as exc:
        raise DataFileError(f"{file.path}: unreadable data file: {exc}") from exc
    rows = data.num_rows
    columns: list[pa.Array] = []
    for f in fields:
        if f.name in spec.partition_columns:
            columns.append(_partition_column(f, partition_values, rows))
            continue
        name = _name_in_file(f, spec)
        if name not in data.column_names:
            columns.append(pa.nulls(rows, to_arrow_type(f.type)))
            continue
        column = (
            data.column(name).combine_chunks()
            if rows
            else pa.array([], data.schema.field(name).type)
        )
        columns.append(_conform(column, f.type, spec.column_mapping))
    table = pa.Table.from_arrays(columns, schema=spec.arrow_schema()) if fields else pa.table({})
    if fields and not rows:
        return table
    if file.deletion_vector is not None:
        descriptor = DeletionVectorDescriptor.from_dict(dict(file.deletion_vector))
        deleted = np.fromiter(
            load_deletion_vector(descriptor, storage.root, storage.reader), dtype=np.int64
        )
        keep = np.ones(rows, dtype=bool)
        keep[deleted[deleted < rows]] = False
        table = table.filter(pa.array(keep))
    return table


def _name_in_file(field: StructField, spec: ScanSpec) -> str:
    return field.physical_name if spec.column_mapping else field.name


def _partition_column(field: StructField, values: dict[str, str | None], rows: int) -> pa.Array:
    target = to_arrow_type(field.type)
    raw = values.get(field.physical_name, values.get(field.name))
    typed = parse_partition_values(pa.array([raw], pa.string()), field.type)
    return pa.repeat(typed[0], rows).cast(target) if rows else pa.array([], target)


def _conform(array: pa.Array, delta_type: DeltaType, mapped: bool) -> pa.Array:
    """`array` as read from a file, in the table's logical type: nested fields renamed from
    physical names, missing nested fields as nulls, narrower types widened."""
    target = to_arrow_type(delta_type)
    if isinstance(delta_type, StructType):
        if not pa.types.is_struct(array.type):
            raise DataFileError(f"a file holds {array.type} where the schema says a struct")
        present = {array.type.field(i).name: i for i in range(array.type.num_fields)}
        children = []
        for f in delta_type.fields:
            name = f.physical_name if mapped else f.name
            if name in present:
                children.append(_conform(array.field(present[name]), f.type, mapped))
            else:
                children.append(pa.nulls(len(array), to_arrow_type(f.type)))
        return pa.StructArray.from_arrays(
            children, fields=list(target), mask=array.is_null() if array.null_count else None
        )
    if isinstance(delta_type, ArrayType) and pa.types.is_list(array.type):
        values = _conform(array.values, delta_type.element_type, mapped)
        rebuilt = pa.ListArray.from_arrays(
            array.offsets, values, mask=array.is_null() if array.null_count else None
        )
        return rebuilt.cast(target)
    if isinstance(delta_type, MapType) and pa.types.is_map(array.type):
        keys = _conform(array.keys, delta_type.key_type, mapped)
        items = _conform(array.items, delta_type.value_type, mapped)
        rebuilt = pa.MapArray.from_arrays(
            array.offsets, keys, items, mask=array.is_null() if array.null_count else None
        )
        return rebuilt.cast(target)
    return array if array.type == target else array.cast(target)


__all__ = [
    "FileToRead",
    "ScanSpec",
    "plan_scan",
    "read_batches",
    "read_file",
    "read_table",
    "scan_spec",
]
