"""The Delta table schema: parsing, Arrow types, partition values and file statistics.

A Delta table records its schema as Spark's JSON (`metaData.schemaString`), its partition
values as strings (`add.partitionValues`) and its per-file statistics as a JSON string
(`add.stats`). Everything that reads or writes those needs the same three translations, so
they live here, in one place:

1. `parse_schema` turns a `schemaString` into frozen dataclasses (`StructType`,
   `StructField`, `ArrayType`, `MapType`; primitive types are plain strings such as
   ``"long"`` or ``"decimal(10,2)"``) and `StructType.to_json` writes it back exactly as
   Spark does (compact, keys in Spark's order), so a schema read and rewritten by delta-ops is
   byte-identical.
2. `to_arrow_schema` / `to_arrow_type` map Delta types to Arrow (`physical=True` renames every
   column, at every nesting level, to its column-mapping physical name, the name used in data
   files, partition values and statistics); `from_arrow_schema` is the inverse used when a
   table is created from Arrow data.
3. `parse_partition_values` converts the protocol's partition-value strings to typed Arrow
   arrays; `stats_schema` says which statistics Delta Spark collects for a table (its
   data-skipping rules) and `parse_stats` turns a column of `stats` JSON strings into a typed
   `StructArray`, the `stats_parsed` column of a checkpoint.

For example:

    >>> import pyarrow as pa
    >>> schema = parse_schema(
    ...     '{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{}},'
    ...     '{"name":"day","type":"date","nullable":true,"metadata":{}}]}')
    >>> to_arrow_schema(schema)
    id: int64
    day: date32[day]
    >>> parse_partition_values(pa.array(["2024-01-31", "", None]), "date").to_pylist()
    [datetime.date(2024, 1, 31), None, None]
    >>> sschema = stats_schema(schema, ["day"])
    >>> parse_stats(pa.array(['{"numRecords":3,"minValues":{"id":1}}']), sschema)[0]["numRecords"]
    <pyarrow.Int64Scalar: 3>

Decisions (where the protocol text leaves room, we follow Delta Spark):

* Stats follow Delta Spark's `StatisticsCollection.statsSchema`: the data columns without the
  partition columns, cut to the first `delta.dataSkippingNumIndexedCols` (default 32) leaves in
  schema order (a struct counts its leaves; an array or map counts as one leaf), or exactly the
  columns named in `delta.dataSkippingStatsColumns` (case-insensitive). `minValues` /
  `maxValues` hold only the types of Spark's `SkippingEligibleDataType`: numbers, decimal,
  date, timestamp, timestamp_ntz and string (not boolean, binary, variant, arrays or maps);
  structs are kept when some leaf is eligible. `nullCount` has an int64 for every leaf,
  arrays and maps included. Field order is `numRecords, minValues, maxValues, nullCount,
  tightBounds`; Spark adds `tightBounds` only when the table supports deletion vectors, which
  is what `tight_bounds=` selects.
* Statistics that Spark itself could not parse become a null row (like `from_json` in its
  permissive mode), unless `strict=True`. Quoted non-finite floats (``"NaN"``, Jackson's
  default) are accepted.
* Partition values: an empty string is null for every type (the protocol says so); timestamp
  strings without an offset are read in `timezone` (UTC by default), strings with an offset
  (newer writers: ``1970-01-01T00:00:00.123456Z``) are read as the instant they name.
* Arrow: ``string`` is `pa.string()`, ``timestamp`` is ``timestamp('us', tz='UTC')``, list
  elements are named ``element`` like Spark's parquet files, map entries are non-null keys,
  ``variant`` is ``struct<value: binary, metadata: binary>`` (both required) and ``void`` is
  `pa.null()`. With `physical=True`, fields carrying `delta.columnMapping.id` get the
  ``PARQUET:field_id`` Arrow metadata that parquet writers turn into field ids (id mode).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from delta_ops.errors import CorruptLog, InvalidSchema, UnsupportedType
from delta_ops.protocol.string_bytes import any_holds, data_buffer

__all__ = [
    "PRIMITIVE_TYPES",
    "ArrayType",
    "DeltaType",
    "MapType",
    "StatsColumn",
    "StructField",
    "StructType",
    "arrow_leaf_paths",
    "fields_with_metadata",
    "from_arrow_schema",
    "from_arrow_type",
    "is_list_type",
    "parse_column_names",
    "parse_partition_values",
    "parse_schema",
    "parse_stats",
    "partition_schema",
    "physical_name",
    "stats_columns_of",
    "stats_schema",
    "to_arrow_field",
    "to_arrow_schema",
    "to_arrow_type",
    "without_field_metadata",
]

logger = logging.getLogger(__name__)

PHYSICAL_NAME_KEY = "delta.columnMapping.physicalName"
COLUMN_ID_KEY = "delta.columnMapping.id"
PARQUET_FIELD_ID_KEY = b"PARQUET:field_id"

PRIMITIVE_TYPES = frozenset(
    {
        "string",
        "long",
        "integer",
        "short",
        "byte",
        "float",
        "double",
        "boolean",
        "binary",
        "date",
        "timestamp",
        "timestamp_ntz",
        "variant",
        "void",
    }
)

_DECIMAL = re.compile(r"decimal\(\s*(\d+)\s*,\s*(-?\d+)\s*\)")
# Spark stores CHAR/VARCHAR as string plus metadata, but its parser accepts these names too.
_CHAR_VARCHAR = re.compile(r"(?:char|varchar)\(\s*\d+\s*\)")
_MAX_DECIMAL_PRECISION = 38
# Geospatial types (the `geospatial` feature): `geometry(<crs>)`, `geography(<crs>[, <alg>])`
# or the bare names. Values are WKB binaries; stats hold bounding boxes we do not interpret.
_GEOSPATIAL = re.compile(r"(?:geometry|geography)(?:\(\s*[\w:-]+\s*(?:,\s*\w+\s*)?\))?")


@dataclass(frozen=True)
class StructField:
    """A (possibly nested) column: name, type, nullability and the column's metadata."""

    name: str
    type: DeltaType
    nullable: bool = True
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def physical_name(self) -> str:
        """The name in data files, partition values and stats (column mapping), else `name`."""
        return physical_name(self)


@dataclass(frozen=True)
class StructType:
    """A struct type; the table schema is the top-level one."""

    fields: tuple[StructField, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "fields", tuple(self.fields))

    def __iter__(self) -> Iterator[StructField]:
        return iter(self.fields)

    def __len__(self) -> int:
        return len(self.fields)

    @property
    def names(self) -> list[str]:
        """The field names, in order."""
        return [f.name for f in self.fields]

    def field(self, name: str) -> StructField:
        """The field called `name` (exact match). Raises `KeyError` when absent."""
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(name)

    def to_json(self) -> str:
        """Spark's compact JSON, the form of `metaData.schemaString`."""
        return json.dumps(_type_to_json(self), separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True)
class ArrayType:
    """An array; `contains_null` says whether elements may be null."""

    element_type: DeltaType
    contains_null: bool = True


@dataclass(frozen=True)
class MapType:
    """A map; keys are never null, `value_contains_null` says whether values may be."""

    key_type: DeltaType
    value_type: DeltaType
    value_contains_null: bool = True


DeltaType = str | StructType | ArrayType | MapType


# --------------------------------------------------------------------------- JSON

#: where a schema error is, for `InvalidSchema` (a reader of the log names the file)
_SCHEMA_STRING = "schemaString"


def parse_schema(schema_string: str) -> StructType:
    """Parse a `metaData.schemaString` (Spark's JSON schema) into a `StructType`.

    Args:
        schema_string: the JSON text.

    Returns:
        The table schema.

    Raises:
        InvalidSchema: the text is not JSON, not a struct, or names an unknown type (the
            message names the type and the column path; the caller that knows the log file
            names it instead of `schemaString`).
    """
    try:
        value = json.loads(schema_string)
    except (TypeError, ValueError) as exc:
        raise InvalidSchema(_SCHEMA_STRING, f"not valid JSON: {exc}") from None
    parsed = _parse_type(value, "")
    if not isinstance(parsed, StructType):
        raise InvalidSchema(_SCHEMA_STRING, f"must describe a struct, found {value!r:.80}")
    return parsed


def _parse_type(value: Any, path: str) -> DeltaType:
    where = f" (column {path})" if path else ""
    if isinstance(value, str):
        return _parse_primitive(value, where)
    if not isinstance(value, dict):
        raise InvalidSchema(_SCHEMA_STRING, f"bad data type {value!r:.80}{where}")
    kind = value.get("type")
    try:
        if kind == "struct":
            return StructType(tuple(_parse_field(f, path) for f in value.get("fields", [])))
        if kind == "array":
            return ArrayType(
                _parse_type(value["elementType"], _join(path, "element")),
                bool(value.get("containsNull", True)),
            )
        if kind == "map":
            return MapType(
                _parse_type(value["keyType"], _join(path, "key")),
                _parse_type(value["valueType"], _join(path, "value")),
                bool(value.get("valueContainsNull", True)),
            )
    except KeyError as exc:
        raise InvalidSchema(_SCHEMA_STRING, f"{kind} type without {exc.args[0]!r}{where}") from None
    raise InvalidSchema(_SCHEMA_STRING, f"unknown data type {kind!r}{where}")


def _parse_primitive(name: str, where: str) -> str:
    if name in PRIMITIVE_TYPES:
        return name
    if name == "decimal":  # Spark's default precision and scale
        return "decimal(10,0)"
    match = _DECIMAL.fullmatch(name)
    if match:
        precision, scale = int(match.group(1)), int(match.group(2))
        if not 0 < precision <= _MAX_DECIMAL_PRECISION or scale > precision:
            raise InvalidSchema(_SCHEMA_STRING, f"unsupported data type {name!r}{where}")
        return f"decimal({precision},{scale})"
    if _CHAR_VARCHAR.fullmatch(name):
        return name.replace(" ", "")
    if _GEOSPATIAL.fullmatch(name):
        return name
    raise InvalidSchema(_SCHEMA_STRING, f"unknown data type {name!r}{where}")


def _parse_field(value: Any, parent: str) -> StructField:
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        raise InvalidSchema(_SCHEMA_STRING, f"bad struct field {value!r:.80}")
    path = _join(parent, value["name"])
    if "type" not in value:
        raise InvalidSchema(_SCHEMA_STRING, f"field without a type (column {path})")
    metadata = value.get("metadata") or {}
    return StructField(
        name=value["name"],
        type=_parse_type(value["type"], path),
        nullable=bool(value.get("nullable", True)),  # Spark's parser defaults it to true
        metadata=dict(metadata),
    )


def _join(parent: str, name: str) -> str:
    return f"{parent}.{name}" if parent else name


def _type_to_json(t: DeltaType) -> Any:
    # Key order is Spark's (json4s render of DataType.jsonValue), needed for byte-exact output.
    if isinstance(t, str):
        return t
    if isinstance(t, StructType):
        return {
            "type": "struct",
            "fields": [
                {
                    "name": f.name,
                    "type": _type_to_json(f.type),
                    "nullable": f.nullable,
                    "metadata": f.metadata,
                }
                for f in t.fields
            ],
        }
    if isinstance(t, ArrayType):
        return {
            "type": "array",
            "elementType": _type_to_json(t.element_type),
            "containsNull": t.contains_null,
        }
    if isinstance(t, MapType):
        return {
            "type": "map",
            "keyType": _type_to_json(t.key_type),
            "valueType": _type_to_json(t.value_type),
            "valueContainsNull": t.value_contains_null,
        }
    raise TypeError(f"not a Delta type: {t!r}")


# --------------------------------------------------------------------------- column mapping


def assign_column_mapping(struct: StructType, start: int = 0) -> tuple[StructType, int]:
    """`struct` with a column-mapping id and a fresh physical name (``col-<uuid>``) on every
    field at every nesting level that lacks them, as Delta Spark assigns them to a new table;
    and the highest id used (the table's ``delta.columnMapping.maxColumnId``)."""
    import uuid

    highest = start

    def assign_type(t: DeltaType) -> DeltaType:
        if isinstance(t, StructType):
            return StructType(tuple(assign_field(f) for f in t.fields))
        if isinstance(t, ArrayType):
            return ArrayType(assign_type(t.element_type), t.contains_null)
        if isinstance(t, MapType):
            return MapType(
                assign_type(t.key_type), assign_type(t.value_type), t.value_contains_null
            )
        return t

    def assign_field(f: StructField) -> StructField:
        nonlocal highest
        metadata = dict(f.metadata)
        if not isinstance(metadata.get(COLUMN_ID_KEY), int):
            highest += 1
            metadata[COLUMN_ID_KEY] = highest
        else:
            highest = max(highest, metadata[COLUMN_ID_KEY])
        metadata.setdefault(PHYSICAL_NAME_KEY, f"col-{uuid.uuid4()}")
        return StructField(f.name, assign_type(f.type), f.nullable, metadata)

    return StructType(tuple(assign_field(f) for f in struct.fields)), highest


def fields_with_metadata(struct: StructType, keys: frozenset[str]) -> list[str]:
    """The dotted paths of the fields, at every nesting level (in structs, arrays and maps),
    whose metadata holds any of `keys` (``delta.typeChanges``, the column-mapping keys)."""
    found: list[str] = []

    def walk_type(t: DeltaType, path: str) -> None:
        if isinstance(t, StructType):
            for f in t.fields:
                name = f"{path}.{f.name}" if path else f.name
                if keys & f.metadata.keys():
                    found.append(name)
                walk_type(f.type, name)
        elif isinstance(t, ArrayType):
            walk_type(t.element_type, f"{path}.element")
        elif isinstance(t, MapType):
            walk_type(t.key_type, f"{path}.key")
            walk_type(t.value_type, f"{path}.value")

    walk_type(struct, "")
    return found


def without_field_metadata(struct: StructType, keys: frozenset[str]) -> StructType:
    """`struct` with `keys` taken out of every field's metadata at every nesting level (what
    Delta Spark's drop of type widening or column mapping leaves of a schema)."""

    def strip_type(t: DeltaType) -> DeltaType:
        if isinstance(t, StructType):
            return StructType(
                tuple(
                    StructField(
                        f.name,
                        strip_type(f.type),
                        f.nullable,
                        {k: v for k, v in f.metadata.items() if k not in keys},
                    )
                    for f in t.fields
                )
            )
        if isinstance(t, ArrayType):
            return ArrayType(strip_type(t.element_type), t.contains_null)
        if isinstance(t, MapType):
            return MapType(strip_type(t.key_type), strip_type(t.value_type), t.value_contains_null)
        return t

    stripped = strip_type(struct)
    assert isinstance(stripped, StructType)
    return stripped


def physical_name(field: StructField) -> str:
    """The column-mapping physical name of `field`, or its logical name when it has none."""
    name = field.metadata.get(PHYSICAL_NAME_KEY)
    return name if isinstance(name, str) and name else field.name


# --------------------------------------------------------------------------- Arrow


def _decimal_parts(t: str) -> tuple[int, int] | None:
    match = _DECIMAL.fullmatch(t)
    return (int(match.group(1)), int(match.group(2))) if match else None


_PRIMITIVE_TO_ARROW: dict[str, pa.DataType] = {
    "string": pa.string(),
    "long": pa.int64(),
    "integer": pa.int32(),
    "short": pa.int16(),
    "byte": pa.int8(),
    "float": pa.float32(),
    "double": pa.float64(),
    "boolean": pa.bool_(),
    "binary": pa.binary(),
    "date": pa.date32(),
    "timestamp": pa.timestamp("us", tz="UTC"),
    "timestamp_ntz": pa.timestamp("us"),
    "void": pa.null(),
    "variant": pa.struct(
        [
            pa.field("value", pa.binary(), nullable=False),
            pa.field("metadata", pa.binary(), nullable=False),
        ]
    ),
}


def to_arrow_type(delta_type: DeltaType, *, physical: bool = False) -> pa.DataType:
    """The Arrow type of a Delta type (see the module doc for the mapping).

    Args:
        delta_type: a primitive type name or a struct, array or map type.
        physical: name nested struct fields by their column-mapping physical names.
    """
    if isinstance(delta_type, str):
        arrow = _PRIMITIVE_TO_ARROW.get(delta_type)
        if arrow is not None:
            return arrow
        parts = _decimal_parts(delta_type)
        if parts:
            return pa.decimal128(*parts)
        if _CHAR_VARCHAR.fullmatch(delta_type):
            return pa.string()
        if _GEOSPATIAL.fullmatch(delta_type):
            return pa.binary()  # well-known binary, as parquet stores it
        raise UnsupportedType(f"unknown Delta data type {delta_type!r}")
    if isinstance(delta_type, StructType):
        return pa.struct([to_arrow_field(f, physical=physical) for f in delta_type.fields])
    if isinstance(delta_type, ArrayType):
        element = to_arrow_type(delta_type.element_type, physical=physical)
        return pa.list_(pa.field("element", element, nullable=delta_type.contains_null))
    if isinstance(delta_type, MapType):
        return pa.map_(
            pa.field("key", to_arrow_type(delta_type.key_type, physical=physical), nullable=False),
            pa.field(
                "value",
                to_arrow_type(delta_type.value_type, physical=physical),
                nullable=delta_type.value_contains_null,
            ),
        )
    raise TypeError(f"not a Delta type: {delta_type!r}")


def to_arrow_field(field: StructField, *, physical: bool = False) -> pa.Field:
    """The Arrow field of a Delta field (physical name and parquet field id if `physical`)."""
    metadata = None
    if physical and isinstance(field.metadata.get(COLUMN_ID_KEY), int):
        metadata = {PARQUET_FIELD_ID_KEY: str(field.metadata[COLUMN_ID_KEY]).encode()}
    return pa.field(
        physical_name(field) if physical else field.name,
        to_arrow_type(field.type, physical=physical),
        nullable=field.nullable,
        metadata=metadata,
    )


def to_arrow_schema(struct: StructType, *, physical: bool = False) -> pa.Schema:
    """The Arrow schema of a Delta schema.

    Args:
        struct: the table schema.
        physical: use column-mapping physical names at every nesting level (the names in the
            data files); pass ``mode != "none"``. Fields without a physical name keep theirs.
    """
    return pa.schema([to_arrow_field(f, physical=physical) for f in struct.fields])


def is_list_type(t: pa.DataType) -> bool:
    """Whether `t` is one of Arrow's list layouts (plain, large, fixed-size, list views): a
    Delta array either way."""
    return bool(
        pa.types.is_list(t)
        or pa.types.is_large_list(t)
        or pa.types.is_fixed_size_list(t)
        or pa.types.is_list_view(t)
        or pa.types.is_large_list_view(t)
    )


def from_arrow_type(arrow_type: pa.DataType, *, keep_nullability: bool = False) -> DeltaType:
    """The Delta type of an Arrow type: widened where Delta has no exact match.

    Unsigned integers widen to the next signed type (uint64 to ``decimal(20,0)``, like Spark's
    parquet reader), large/view strings and binaries map to ``string``/``binary``, any
    timestamp unit maps to ``timestamp`` (with a zone) or ``timestamp_ntz`` (without).

    Raises:
        UnsupportedType: no Delta type can hold the Arrow type (e.g. durations, unions).
    """
    t = arrow_type
    if isinstance(t, pa.ExtensionType):
        return from_arrow_type(t.storage_type, keep_nullability=keep_nullability)
    if pa.types.is_dictionary(t):
        return from_arrow_type(t.value_type, keep_nullability=keep_nullability)
    simple = _simple_from_arrow(t)
    if simple is not None:
        return simple
    if pa.types.is_struct(t):
        return StructType(
            tuple(_field_from_arrow(t.field(i), keep_nullability) for i in range(t.num_fields))
        )
    if pa.types.is_map(t):
        return MapType(
            from_arrow_type(t.key_type, keep_nullability=keep_nullability),
            from_arrow_type(t.item_type, keep_nullability=keep_nullability),
            t.item_field.nullable if keep_nullability else True,
        )
    if is_list_type(t):
        return ArrayType(
            from_arrow_type(t.value_type, keep_nullability=keep_nullability),
            t.value_field.nullable if keep_nullability else True,
        )
    raise UnsupportedType(f"Arrow type {t} has no Delta equivalent")


def _simple_from_arrow(t: pa.DataType) -> str | None:
    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_integer(t):
        signed = {8: "byte", 16: "short", 32: "integer", 64: "long"}
        widened = {8: "short", 16: "integer", 32: "long", 64: "decimal(20,0)"}
        return (signed if pa.types.is_signed_integer(t) else widened)[t.bit_width]
    if pa.types.is_float16(t) or pa.types.is_float32(t):
        return "float"
    if pa.types.is_float64(t):
        return "double"
    if pa.types.is_decimal(t):
        if t.precision > _MAX_DECIMAL_PRECISION:
            raise UnsupportedType(f"Arrow type {t} has no Delta equivalent (precision > 38)")
        return f"decimal({t.precision},{t.scale})"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "string"
    if (
        pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_binary_view(t)
        or pa.types.is_fixed_size_binary(t)
    ):
        return "binary"
    if pa.types.is_date(t):
        return "date"
    if pa.types.is_timestamp(t):
        return "timestamp" if t.tz is not None else "timestamp_ntz"
    return None


def _field_from_arrow(f: pa.Field, keep_nullability: bool) -> StructField:
    return StructField(
        name=f.name,
        type=from_arrow_type(f.type, keep_nullability=keep_nullability),
        nullable=f.nullable if keep_nullability else True,
        metadata={},
    )


def from_arrow_schema(schema: pa.Schema, *, keep_nullability: bool = False) -> StructType:
    """The Delta schema for Arrow data, for creating a table.

    Args:
        schema: the Arrow schema.
        keep_nullability: keep Arrow's nullability; by default every field, array element
            and map value is nullable, as Delta Spark makes a DataFrame's schema on write.
    """
    return StructType(tuple(_field_from_arrow(f, keep_nullability) for f in schema))


# --------------------------------------------------------------------------- partition values


def partition_schema(
    struct: StructType, partition_columns: Sequence[str], *, physical: bool = True
) -> pa.Schema:
    """The Arrow schema of `partitionValues_parsed`: partition columns in the table's order.

    Raises:
        InvalidSchema: a partition column is not a top-level column of `struct`.
    """
    by_name = {f.name.lower(): f for f in struct.fields}
    fields = []
    for column in partition_columns:
        f = by_name.get(column.lower())
        if f is None:
            raise InvalidSchema(
                "partitionColumns", f"partition column {column!r} is not in the table schema"
            )
        fields.append(pa.field(physical_name(f) if physical else f.name, to_arrow_type(f.type)))
    return pa.schema(fields)


_OFFSET_SUFFIX = r"(?:Z|[+-]\d{2}(?::?\d{2})?)$"


def parse_partition_values(
    values: pa.Array | pa.ChunkedArray, delta_type: DeltaType, *, timezone: str = "UTC"
) -> pa.Array:
    """Convert serialized partition values (strings) to a typed Arrow array.

    Null and empty strings become null for every type, as the protocol says. Dates are
    ``YYYY-MM-DD``; timestamps ``YYYY-MM-DD HH:MM:SS[.ffffff]`` (read in `timezone`, the
    writer's session zone, UTC by default) or ISO 8601 with an offset such as
    ``1970-01-01T00:00:00.123456Z``; binary values are the string's UTF-8 bytes.

    Args:
        values: string values, one per file.
        delta_type: the partition column's Delta type (a primitive type name).
        timezone: zone of timestamp values written without an offset.

    Returns:
        An array of `to_arrow_type(delta_type)`, aligned with `values`.

    Raises:
        InvalidSchema: a value cannot be read as `delta_type` (the message names it), or
            the type is not primitive.
    """
    if not isinstance(delta_type, str):
        raise InvalidSchema(
            _SCHEMA_STRING, f"partition columns must have a primitive type, not {delta_type!r}"
        )
    target = to_arrow_type(delta_type)
    strings = _combined(values)
    if not (pa.types.is_string(strings.type) or pa.types.is_large_string(strings.type)):
        strings = strings.cast(pa.string())
    present = pc.fill_null(pc.greater(pc.binary_length(strings), 0), False)
    strings = pc.if_else(present, strings, pa.scalar(None, strings.type))
    try:
        if delta_type == "string" or _CHAR_VARCHAR.fullmatch(delta_type):
            return strings.cast(target)
        if delta_type == "binary":
            return pc.cast(strings, pa.binary())
        if delta_type == "timestamp":
            return _parse_timestamps(strings, timezone)
        if delta_type == "boolean":
            return _parse_booleans(strings)
        return pc.cast(pc.utf8_trim_whitespace(strings), target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise InvalidSchema(
            "partitionValues", f"a value cannot be read as {delta_type}: {exc}"
        ) from None


def _parse_timestamps(strings: pa.Array, timezone: str) -> pa.Array:
    utc = pa.timestamp("us", tz="UTC")
    null = pa.scalar(None, strings.type)
    with_offset = pc.fill_null(pc.match_substring_regex(strings, _OFFSET_SUFFIX), False)
    instants = pc.cast(pc.if_else(with_offset, strings, null), utc)
    local = pc.cast(pc.if_else(with_offset, null, strings), pa.timestamp("us"))
    if timezone.upper() in ("UTC", "Z", "ETC/UTC", "GMT"):
        local = local.cast(utc)
    else:
        # Like java.time: the earlier instant in a DST overlap, past the gap when skipped.
        local = pc.assume_timezone(
            local, timezone, ambiguous="earliest", nonexistent="latest"
        ).cast(utc)
    return pc.if_else(with_offset, instants, local)


def _parse_booleans(strings: pa.Array) -> pa.Array:
    lowered = pc.utf8_lower(pc.utf8_trim_whitespace(strings))
    valid = pc.or_(pc.is_in(lowered, pa.array(["true", "false"])), pc.is_null(lowered))
    if not pc.all(valid).as_py():
        bad = pc.filter(strings, pc.invert(valid))[0].as_py()
        raise pa.ArrowInvalid(f"{bad!r} is not 'true' or 'false'")
    return pc.equal(lowered, "true")


def _combined(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(values, pa.ChunkedArray):
        return values.combine_chunks() if values.num_chunks != 1 else values.chunk(0)
    return values


# --------------------------------------------------------------------------- statistics

NUM_RECORDS = "numRecords"
MIN_VALUES = "minValues"
MAX_VALUES = "maxValues"
NULL_COUNT = "nullCount"
TIGHT_BOUNDS = "tightBounds"

_MIN_MAX_TYPES = frozenset(
    {
        "long",
        "integer",
        "short",
        "byte",
        "float",
        "double",
        "date",
        "timestamp",
        "timestamp_ntz",
        "string",
    }
)


def _min_max_eligible(t: DeltaType) -> bool:
    return isinstance(t, str) and (
        t in _MIN_MAX_TYPES or _decimal_parts(t) is not None or bool(_CHAR_VARCHAR.fullmatch(t))
    )


def stats_schema(
    struct: StructType,
    partition_columns: Iterable[str],
    *,
    num_indexed_cols: int = 32,
    stats_columns: str | Sequence[str] | Sequence[Sequence[str]] | None = None,
    physical: bool = True,
    tight_bounds: bool = True,
) -> pa.Schema:
    """The Arrow schema of a file's parsed `stats` under Delta Spark's data-skipping rules.

    Args:
        struct: the table schema.
        partition_columns: `metaData.partitionColumns` (never in stats).
        num_indexed_cols: `delta.dataSkippingNumIndexedCols`; negative means every column.
        stats_columns: `delta.dataSkippingStatsColumns` (the property's comma-separated text
            or a list of dotted names); when given it wins over `num_indexed_cols`.
        physical: name columns by their physical names (as stats are written when column
            mapping is on).
        tight_bounds: include the `tightBounds` field (Spark does when the table supports
            deletion vectors).

    Returns:
        ``numRecords: int64``, then ``minValues`` / ``maxValues`` (eligible leaves only) and
        ``nullCount`` (int64 per leaf) when they have fields, then ``tightBounds: bool``.
    """
    indexed = _indexed_columns(struct, partition_columns, num_indexed_cols, stats_columns)
    fields = [pa.field(NUM_RECORDS, pa.int64())]
    min_max = _min_max_struct(indexed, physical)
    if min_max is not None:
        fields += [pa.field(MIN_VALUES, min_max), pa.field(MAX_VALUES, min_max)]
    null_count = _null_count_struct(indexed, physical)
    if null_count is not None:
        fields.append(pa.field(NULL_COUNT, null_count))
    if tight_bounds:
        fields.append(pa.field(TIGHT_BOUNDS, pa.bool_()))
    return pa.schema(fields)


def _indexed_columns(
    struct: StructType,
    partition_columns: Iterable[str],
    num_indexed_cols: int,
    stats_columns: str | Sequence[str] | Sequence[Sequence[str]] | None,
) -> StructType:
    """The part of the table schema whose columns get stats (see `stats_schema`)."""
    excluded = {c.lower() for c in partition_columns}
    data = StructType(tuple(f for f in struct.fields if f.name.lower() not in excluded))
    if stats_columns is not None:
        return _select_columns(data, _parse_column_list(stats_columns))
    if num_indexed_cols < 0:
        return data
    return _first_leaves(data, num_indexed_cols)[0]


@dataclass(frozen=True)
class StatsColumn:
    """One leaf column that a file's stats cover under the table's data-skipping rules."""

    logical: tuple[str, ...]  # its names from the top, as the schema spells them
    physical: tuple[str, ...]  # ... and as stats and data files name it under column mapping
    type: DeltaType

    @property
    def name(self) -> str:
        """The dotted logical name, parts holding a dot or a backtick quoted (``a.`b.c` ``)."""
        return ".".join(
            part if "." not in part and "`" not in part else "`" + part.replace("`", "``") + "`"
            for part in self.logical
        )

    @property
    def has_min_max(self) -> bool:
        """Whether stats carry min/max for it (numbers, dates, timestamps, strings)."""
        return _min_max_eligible(self.type)


def stats_columns_of(
    struct: StructType,
    partition_columns: Iterable[str],
    *,
    num_indexed_cols: int = 32,
    stats_columns: str | Sequence[str] | Sequence[Sequence[str]] | None = None,
) -> list[StatsColumn]:
    """The leaf columns `stats_schema` gives stats for, in schema order (arrays, maps and
    variants are leaves here, as in Delta Spark's `nullCount`)."""
    out: list[StatsColumn] = []

    def walk(
        fields: Sequence[StructField], logical: tuple[str, ...], phys: tuple[str, ...]
    ) -> None:
        for f in fields:
            names, physicals = logical + (f.name,), phys + (physical_name(f),)
            if isinstance(f.type, StructType):
                walk(f.type.fields, names, physicals)
            else:
                out.append(StatsColumn(names, physicals, f.type))

    walk(
        _indexed_columns(struct, partition_columns, num_indexed_cols, stats_columns).fields,
        (),
        (),
    )
    return out


def parse_column_names(text: str) -> list[tuple[str, ...]]:
    """Name paths from a comma-separated list such as ``a, b.c, `d.e`.f`` (backticks quote a
    name holding a dot or comma; ``` `` ``` is a backtick), as `delta.dataSkippingStatsColumns`
    is written; names keep their case."""
    out = []
    for item in _split_unquoted(text, ",", keep_quotes=True):
        if item.strip():
            out.append(tuple(_split_unquoted(item.strip(), ".", keep_quotes=False)))
    return out


def _first_leaves(struct: StructType, limit: int) -> tuple[StructType, int]:
    kept: list[StructField] = []
    count = 0
    for f in struct.fields:
        if count >= limit:
            break
        if isinstance(f.type, StructType):
            inner, used = _first_leaves(f.type, limit - count)
            kept.append(StructField(f.name, inner, f.nullable, f.metadata))
            count += used
        else:
            kept.append(f)
            count += 1
    return StructType(tuple(kept)), count


def _parse_column_list(
    columns: str | Sequence[str] | Sequence[Sequence[str]],
) -> list[list[str]]:
    """Lower-cased name paths from ``a, b.c, `d.e`.f`` (backticks quote, `` is `), from dotted
    names, or from name paths already split (as `TableProperties` holds them)."""
    items = _split_unquoted(columns, ",", keep_quotes=True) if isinstance(columns, str) else columns
    paths: list[list[str]] = []
    for item in items:
        if isinstance(item, str):
            if item.strip():
                paths.append(
                    [p.lower() for p in _split_unquoted(item.strip(), ".", keep_quotes=False)]
                )
        elif item:
            paths.append([part.lower() for part in item])
    return paths


def _split_unquoted(text: str, separator: str, *, keep_quotes: bool) -> list[str]:
    parts: list[str] = []
    current: list[str] = []
    quoted = False
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "`":
            if quoted and text[i + 1 : i + 2] == "`":
                current.append("``" if keep_quotes else "`")
                i += 2
                continue
            quoted = not quoted
            if keep_quotes:
                current.append(ch)
        elif ch == separator and not quoted:
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(ch)
        i += 1
    parts.append("".join(current).strip())
    return parts


def _select_columns(struct: StructType, paths: list[list[str]]) -> StructType:
    kept = []
    for f in struct.fields:
        tails = [p[1:] for p in paths if p and p[0] == f.name.lower()]
        if not tails:
            continue
        if all(not t for t in tails):
            kept.append(f)
        elif isinstance(f.type, StructType):
            inner = _select_columns(f.type, [t for t in tails if t])
            kept.append(StructField(f.name, inner, f.nullable, f.metadata))
    return StructType(tuple(kept))


def _min_max_struct(struct: StructType, physical: bool) -> pa.StructType | None:
    fields = []
    for f in struct.fields:
        name = physical_name(f) if physical else f.name
        if isinstance(f.type, StructType):
            inner = _min_max_struct(f.type, physical)
            if inner is not None:
                fields.append(pa.field(name, inner))
        elif _min_max_eligible(f.type):
            fields.append(pa.field(name, to_arrow_type(f.type)))
    return pa.struct(fields) if fields else None


def _null_count_struct(struct: StructType, physical: bool) -> pa.StructType | None:
    fields = []
    for f in struct.fields:
        name = physical_name(f) if physical else f.name
        if isinstance(f.type, StructType):
            inner = _null_count_struct(f.type, physical)
            if inner is not None:
                fields.append(pa.field(name, inner))
        else:
            fields.append(pa.field(name, pa.int64()))
    return pa.struct(fields) if fields else None


def arrow_leaf_paths(
    t: pa.DataType, path: tuple[str, ...], repeated: bool
) -> Iterator[tuple[tuple[str, ...], bool]]:
    """(path, inside a list or map) of each leaf under `t` at `path`, in parquet's column
    order: a map's leaves under ``key_value.key`` / ``key_value.value``, a list's under
    ``list.element``."""
    if pa.types.is_struct(t):
        for i in range(t.num_fields):
            yield from arrow_leaf_paths(t.field(i).type, path + (t.field(i).name,), repeated)
    elif pa.types.is_map(t):
        yield from arrow_leaf_paths(t.key_type, path + ("key_value", "key"), True)
        yield from arrow_leaf_paths(t.item_type, path + ("key_value", "value"), True)
    elif is_list_type(t):
        yield from arrow_leaf_paths(t.value_type, path + ("list", "element"), True)
    else:
        yield path, repeated


def parse_stats(
    stats_json: pa.Array | pa.ChunkedArray, schema: pa.Schema, *, strict: bool = False
) -> pa.StructArray:
    """Parse a column of `add.stats` JSON strings into a typed struct array (vectorised).

    The strings are joined into one buffer (one row per line, without a Python loop) and
    read by Arrow's JSON reader with `schema` as the explicit schema; unknown fields are
    ignored and missing ones are null. Timestamps such as ``2021-01-01T00:00:00.000Z`` (any
    offset) become UTC instants. Only when that fails (quoted ``"NaN"`` in a float field,
    blank or malformed JSON) are the rows repaired one by one in Python.

    Args:
        stats_json: one JSON string per file; null or empty means "no stats".
        schema: usually `stats_schema(...)`.
        strict: raise on stats that cannot be read instead of making that row null.

    Returns:
        A `StructArray` of `pa.struct(schema)`, one row per input row, null where there are
        no stats (or unreadable ones).

    Raises:
        CorruptLog: with `strict`, a row's stats cannot be read (the message gives its
            index).
    """
    strings = _combined(stats_json)
    target = pa.struct(list(schema))
    if len(strings) == 0:
        return pa.array([], target)
    if not pa.types.is_large_string(strings.type):
        strings = strings.cast(pa.large_string())
    present = pc.fill_null(pc.greater(pc.binary_length(strings), 0), False)
    documents = strings
    if strings.null_count or not pc.all(present).as_py():
        documents = pc.if_else(present, strings, pa.scalar("null", pa.large_string()))
    read_schema = pa.schema([pa.field(_WRAPPER, _json_read_type(target))])
    try:
        parsed = _read_wrapped(documents, read_schema)
    except pa.ArrowInvalid:
        # Rare: quoted "NaN" in a float field, blank or malformed JSON. Row by row.
        parsed = _read_wrapped(_repair(documents.to_pylist(), target, strict), read_schema)
    return _conform(parsed, target)


# Each row is read as {"s": <stats>}: Arrow then yields exactly one record per row, or fails
# (a blank row or two concatenated objects are syntax errors instead of shifting rows).
_WRAPPER = "s"


def _json_read_type(t: pa.DataType) -> pa.DataType:
    # Arrow's JSON reader cannot turn "YYYY-MM-DD" strings into date32; read them as text.
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _json_read_type(f.type)) for f in t])
    if pa.types.is_date(t):
        return pa.string()
    return t


def _read_wrapped(documents: pa.Array | list[str], read_schema: pa.Schema) -> pa.Array:
    if isinstance(documents, list):
        documents = pa.array(documents, pa.large_string())
    text = pa.large_string()
    lines = pc.binary_join_element_wise(
        pa.scalar('{"' + _WRAPPER + '":', text),
        documents,
        pa.scalar("}\n", text),
        pa.scalar("", text),
    )
    longest = pc.max(pc.binary_length(lines)).as_py() or 0
    table = pa_json.read_json(
        pa.BufferReader(data_buffer(lines)),
        read_options=pa_json.ReadOptions(block_size=max(1 << 20, longest + 1)),
        parse_options=pa_json.ParseOptions(
            explicit_schema=read_schema,
            unexpected_field_behavior="ignore",
            # pretty-printed stats need it, but it makes the reader serial: only when present
            newlines_in_values=any_holds(documents, b"\n"),
        ),
    )
    if table.num_rows != len(documents):  # cannot happen with the wrapper; never misalign
        raise pa.ArrowInvalid(f"{table.num_rows} JSON records for {len(documents)} rows")
    return _combined(table.column(_WRAPPER))


_NON_FINITE = {
    "NaN": float("nan"),
    "Infinity": float("inf"),
    "+Infinity": float("inf"),
    "-Infinity": float("-inf"),
}


def _repair(documents: list[str], target: pa.StructType, strict: bool) -> list[str]:
    """One compact JSON document per row: quoted NaN/Infinity unquoted in float fields, and
    ``null`` for rows that stay unreadable (or an error with `strict`)."""
    read_schema = pa.schema([pa.field(_WRAPPER, _json_read_type(target))])

    def reject(i: int, problem: object) -> str:
        if strict:
            raise CorruptLog("stats", f"row {i} cannot be read: {problem}")
        logger.warning("ignoring unreadable stats in row %d: %s", i, problem)
        return "null"

    repaired: list[str] = []
    for i, text in enumerate(documents):
        if not text.strip():
            repaired.append("null")
            continue
        try:
            value = json.loads(text)
        except ValueError as exc:
            repaired.append(reject(i, f"invalid JSON: {exc}"))
            continue
        if value is not None and not isinstance(value, dict):
            repaired.append(reject(i, f"not a JSON object: {text:.80}"))
            continue
        if value is not None:
            _unquote_non_finite(value, target)
        repaired.append(json.dumps(value, separators=(",", ":"), ensure_ascii=False))
    try:
        _read_wrapped(repaired, read_schema)
    except pa.ArrowInvalid:
        # Some value does not fit its type (e.g. a string in a long field): find the rows.
        for i, document in enumerate(repaired):
            try:
                _read_wrapped([document], read_schema)
            except pa.ArrowInvalid as exc:
                repaired[i] = reject(i, exc)
    return repaired


def _unquote_non_finite(value: dict[str, Any], schema: pa.Schema | pa.StructType) -> None:
    for f in schema:
        item = value.get(f.name)
        if isinstance(item, dict) and pa.types.is_struct(f.type):
            _unquote_non_finite(item, f.type)
        elif isinstance(item, str) and pa.types.is_floating(f.type) and item in _NON_FINITE:
            value[f.name] = _NON_FINITE[item]


def _conform(array: pa.Array, target: pa.DataType) -> pa.Array:
    if array.type == target:
        return array
    if pa.types.is_struct(target):
        children = [_conform(array.field(f.name), f.type) for f in target]
        mask = pc.invert(array.is_valid()) if array.null_count else None
        return pa.StructArray.from_arrays(children, fields=list(target), mask=mask)
    if pa.types.is_date(target) and pa.types.is_string(array.type):
        days = pc.strptime(array, format="%Y-%m-%d", unit="s", error_is_null=True)
        return days.cast(pa.date32()).cast(target)
    return array.cast(target)
