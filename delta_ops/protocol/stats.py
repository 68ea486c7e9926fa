"""Per-file statistics (`add.stats`) computed from a parquet footer, and from the data where
the footer lacks a value.

Delta writers record, for every data file, ``{"numRecords", "minValues", "maxValues",
"nullCount"}`` in its `add` action; data skipping, `numRecords`-based row counts and deletion
vector checks rely on them. Files added without stats (old writers, `CONVERT TO DELTA`, external
tools) can get them back from what parquet already stores: the row-group statistics in the
footer. This module computes the stats object Delta Spark would have written for a file from
that footer alone (a few KB read from the end of the file), following the same rules:

* Which columns: `schema.stats_schema` (Delta Spark's `StatisticsCollection`): no partition
  columns, the first `delta.dataSkippingNumIndexedCols` leaves or the columns of
  `delta.dataSkippingStatsColumns`; min/max only for numbers, decimals, dates, timestamps and
  strings; `nullCount` for every leaf. Columns are named by physical name under column mapping.
* Combining row groups: min of the mins, max of the maxes, sum of the null counts. A row group
  whose values are all null has no min/max and needs none. When another row group has no
  min/max for a column (statistics not written, dropped for size, or unordered like INT96) the
  column's min/max are unknown and left out; `nullCount` is left out when a row group's null
  count is unknown. Leaving a value out is always safe: readers then just cannot skip the file.
* Values as Spark's `to_json` writes them: dates ``2024-01-31``; timestamps cut to
  milliseconds, ``2024-01-31T10:00:00.123Z`` (``timestamp``, in UTC) and
  ``2024-01-31T10:00:00.123`` (``timestamp_ntz``); Delta readers add one millisecond to a max
  timestamp for that reason (`DataSkippingReader.getAdjustedTimestamp`); decimals as exact
  JSON numbers with the column's scale (``12.50``); floats as the shortest text that reads back
  as the same float32; non-finite floats as quoted ``"NaN"`` / ``"Infinity"`` (Jackson's
  default); strings: the min cut to 32 characters, the max cut to 32 UTF-16 units and closed
  with the tie-breaker ``U+FFFD`` (`StatisticsCollection.truncateMaxStringAgg`) so that it stays
  above every value of the file.
* What the footer cannot give (no statistics written, INT96 timestamps, a null count for an
  array or map) is computed from the column itself when a row-group reader is handed in
  (`read_row_group`, `stats_json_from_parquet_file(read_data=True)`: `recompute-stats`), one
  row group at a time, by the same rules (NaN left out of float bounds, as parquet writers do).
* A column of the table that the file does not have reads as null: ``nullCount = numRecords``
  and no min/max, like Spark's `count(*)` for such columns. Arrays and maps get no `nullCount`:
  parquet counts null or empty lists and null elements alike in the leaf, so the number of null
  arrays cannot be known from the footer. A variant (`struct<value, metadata>` in parquet,
  both required) gets its `nullCount` from its `value` leaf, null exactly where the variant is,
  as Delta Spark counts it; never min/max.

Known differences with stats collected from the data: parquet writers leave NaN out of float
min/max while Spark orders NaN above every number, so a column holding NaN gets the largest
non-NaN value as its max here. Footer values are trusted as written; parquet-rs before 53.1
omitted a zero null count, which is read back as 0 for its files (as parquet-rs itself did).

For example:

    >>> import tempfile
    >>> import fsspec, pyarrow as pa, pyarrow.parquet as pq
    >>> from delta_ops.protocol.schema import parse_schema
    >>> schema = parse_schema('{"type":"struct","fields":[{"name":"id","type":"long",'
    ...                       '"nullable":true,"metadata":{}}]}')
    >>> folder = tempfile.TemporaryDirectory()
    >>> path = f"{folder.name}/part-0.parquet"
    >>> pq.write_table(pa.table({"id": pa.array([1, 2, 3], pa.int64())}), path)
    >>> fs = fsspec.filesystem("file")
    >>> stats_json_from_parquet_file(fs, path, schema, [])
    '{"numRecords":3,"minValues":{"id":1},"maxValues":{"id":3},"nullCount":{"id":0}}'
    >>> folder.cleanup()
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math
import re
import struct
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from delta_ops.protocol.schema import (
    MAX_VALUES,
    MIN_VALUES,
    NULL_COUNT,
    NUM_RECORDS,
    TIGHT_BOUNDS,
    StructType,
    arrow_leaf_paths,
    stats_schema,
)

__all__ = [
    "STRING_PREFIX_LENGTH",
    "num_records_from_parquet_file",
    "read_parquet_metadata",
    "stats_from_parquet_metadata",
    "stats_json_from_parquet_file",
    "stats_to_json",
    "truncate_max_string",
    "truncate_min_string",
]

# Delta Spark's `spark.databricks.delta.stats.skipping.stringPrefixLength` default.
STRING_PREFIX_LENGTH = 32
# Appended to a cut max string; only safe when the character cut off was smaller.
_TIE_BREAKER = "\ufffd"

_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_DATE = dt.date(1970, 1, 1)
_MICROS_PER_UNIT = {"milliseconds": 1_000, "microseconds": 1, "nanoseconds": 0}
_PARQUET_RS_VERSION = re.compile(r"parquet-rs version (\d+)\.(\d+)")
# parquet-rs wrote no null_count when it was 0 until 53.1.0 (apache/arrow-rs#6490).
_PARQUET_RS_NULL_COUNT_FIXED = (53, 1)


# --------------------------------------------------------------------------- public API


def stats_from_parquet_metadata(
    metadata: pq.FileMetaData,
    table_schema: StructType,
    partition_columns: Sequence[str],
    *,
    num_indexed_cols: int = 32,
    stats_columns: str | Sequence[str] | Sequence[Sequence[str]] | None = None,
    column_mapping: bool = False,
    tight_bounds: bool | None = None,
    read_row_group: RowGroupReader | None = None,
) -> dict[str, Any]:
    """The Delta stats object of a data file, from its parquet footer (and, given
    `read_row_group`, from the data of the columns whose footer values are missing).

    Args:
        metadata: the file's footer (`pyarrow.parquet.ParquetFile(...).metadata`).
        table_schema: the table schema (`metaData.schemaString`, parsed).
        partition_columns: `metaData.partitionColumns` (never in stats).
        num_indexed_cols: `delta.dataSkippingNumIndexedCols`; negative means every column.
        stats_columns: `delta.dataSkippingStatsColumns`: the property text, dotted names, or
            name paths such as `TableProperties.data_skipping_stats_columns`; wins over
            `num_indexed_cols` when given.
        column_mapping: the table uses column mapping (name or id): columns are found in the
            file and named in the stats by their physical names.
        tight_bounds: when not None, add ``"tightBounds"`` with this value (Delta Spark writes
            ``true`` on tables that support deletion vectors).
        read_row_group: reads some top-level columns of one row group (index, names) as Arrow;
            when given, a column whose footer lacks min/max (statistics not written, INT96
            timestamps, a writer that wrote none) or a null count (arrays, maps) is
            read, one row group at a time, and its values computed by the same rules.

    Returns:
        ``{"numRecords": n, "minValues": {...}, "maxValues": {...}, "nullCount": {...}}`` in
        Spark's key order, nested dicts for struct columns; unknown values are left out (see
        the module doc). Decimals are `decimal.Decimal`; use `stats_to_json` to write it.
    """
    schema = stats_schema(
        table_schema,
        partition_columns,
        num_indexed_cols=num_indexed_cols,
        stats_columns=_stats_columns_arg(stats_columns),
        physical=column_mapping,
        tight_bounds=False,
    )
    footer = _Footer(metadata)
    stats: dict[str, Any] = {NUM_RECORDS: footer.num_records}
    if MIN_VALUES in schema.names:
        mins: dict[str, Any] = {}
        maxs: dict[str, Any] = {}
        _fill_min_max(footer, schema.field(MIN_VALUES).type, (), mins, maxs)
        stats[MIN_VALUES] = mins
        stats[MAX_VALUES] = maxs
    if NULL_COUNT in schema.names:
        stats[NULL_COUNT] = _null_counts(footer, schema.field(NULL_COUNT).type, ())
    if read_row_group is not None and footer.gaps:
        _fill_from_data(footer, read_row_group, stats)
        for key in (MIN_VALUES, MAX_VALUES, NULL_COUNT):
            if key in stats:
                stats[key] = _in_schema_order(stats[key], schema.field(key).type)
    if tight_bounds is not None:
        stats[TIGHT_BOUNDS] = tight_bounds
    return stats


def stats_to_json(stats: Mapping[str, Any]) -> str:
    """Compact JSON of a stats object, as Spark writes it.

    Unlike `json.dumps`, decimals are written exactly (``12.50``, `BigDecimal.toString`) and
    non-finite floats as quoted ``"NaN"`` / ``"Infinity"`` / ``"-Infinity"`` (Jackson's
    default, which `schema.parse_stats` reads back); other characters are written unescaped.
    """
    return _encode(stats)


def read_parquet_metadata(fs: Any, path: str) -> pq.FileMetaData:
    """The footer of a parquet file on an fsspec filesystem (only the footer is read)."""
    with fs.open(path, "rb") as f:
        return pq.ParquetFile(f).metadata


def stats_json_from_parquet_file(
    fs: Any,
    path: str,
    table_schema: StructType,
    partition_columns: Sequence[str],
    *,
    read_data: bool = False,
    **kwargs: Any,
) -> str:
    """The `add.stats` JSON of a parquet file, reading its footer (and, with `read_data`, the
    columns whose footer values are missing, one row group at a time).

    Args:
        fs: an fsspec filesystem (or anything with ``open(path, "rb")``).
        path: the file's path on `fs`.
        table_schema: the table schema.
        partition_columns: `metaData.partitionColumns`.
        read_data: compute from the data what the footer lacks (see `stats_from_parquet_metadata`).
        **kwargs: the keyword options of `stats_from_parquet_metadata`.

    Returns:
        Compact JSON (``separators=(",", ":")``), e.g. ``{"numRecords":3,...}``.
    """
    with fs.open(path, "rb") as f:
        # INT96 (Spark's timestamps) read as microseconds: nanoseconds overflow before 1677
        parquet = pq.ParquetFile(f, coerce_int96_timestamp_unit="us")

        def read_row_group(index: int, columns: list[str]) -> pa.Table:
            return parquet.read_row_group(index, columns=columns, use_threads=False)

        stats = stats_from_parquet_metadata(
            parquet.metadata,
            table_schema,
            partition_columns,
            read_row_group=read_row_group if read_data else None,
            **kwargs,
        )
    return stats_to_json(stats)


def num_records_from_parquet_file(fs: Any, path: str) -> int:
    """The number of rows of a parquet file (the sum over its row groups), from its footer."""
    return _Footer(read_parquet_metadata(fs, path)).num_records


def truncate_min_string(value: str, prefix_length: int = STRING_PREFIX_LENGTH) -> str:
    """A min string as Spark stores it: its first `prefix_length` characters (code points,
    Spark's `substring`), which is still <= the value."""
    return value[:prefix_length]


def truncate_max_string(value: str, prefix_length: int = STRING_PREFIX_LENGTH) -> str:
    """A max string as Spark stores it: a prefix of the value plus ``U+FFFD``, still >= it.

    Spark (`StatisticsCollection.truncateMaxStringAgg`) keeps the first `prefix_length` UTF-16
    units, then every following character not smaller than ``U+FFFD``, then appends
    ``U+FFFD``. Two fixes where Spark's Java-char view breaks the guarantee in UTF-8 order
    (the order of parquet and of Spark's string comparisons): a surrogate pair is never split,
    and characters beyond the BMP (above ``U+FFFD`` in UTF-8 order, below it as Java chars)
    are kept too. Strings of BMP characters get exactly Spark's result.
    """
    if _utf16_length(value) <= prefix_length:
        return value
    units = 0
    cut = 0
    while units < prefix_length:
        units += 2 if ord(value[cut]) > 0xFFFF else 1
        cut += 1
    while cut < len(value) and value[cut] >= _TIE_BREAKER:
        cut += 1
    return value[:cut] + _TIE_BREAKER


# --------------------------------------------------------------------------- stats arguments


def _stats_columns_arg(
    columns: str | Sequence[str] | Sequence[Sequence[str]] | None,
) -> str | list[str] | None:
    """`stats_schema` takes the property text or dotted names; name paths are quoted."""
    if columns is None or isinstance(columns, str):
        return columns
    names = []
    for column in columns:
        if isinstance(column, str):
            names.append(column)
        else:
            names.append(".".join("`" + part.replace("`", "``") + "`" for part in column))
    return names


# --------------------------------------------------------------------------- footer access


class _Footer:
    """A parquet footer indexed by column path, with the writer quirks handled once."""

    def __init__(self, metadata: pq.FileMetaData) -> None:
        self.metadata = metadata
        self.row_groups = [metadata.row_group(i) for i in range(metadata.num_row_groups)]
        self.num_records: int = sum(rg.num_rows for rg in self.row_groups)
        self.zero_null_count_omitted = _omits_zero_null_count(metadata.created_by or "")
        paths = _leaf_paths(metadata)
        self.leaves = {path: i for i, path in enumerate(paths)}
        #: variant groups (struct<value, metadata>, both required) by path, to their value leaf
        self.variants = _variant_groups(metadata, self.leaves)
        self.groups = {path[:n] for path in paths for n in range(1, len(path))}
        self._folded: dict[tuple[str, ...], tuple[str, ...]] = {}
        #: values the footer cannot give: (stats path, file path, Arrow type or None for a
        #: null count), for `_fill_from_data`
        self.gaps: list[tuple[tuple[str, ...], tuple[str, ...], pa.DataType | None]] = []
        for path in list(self.leaves) + list(self.groups):
            # Spark resolves parquet columns case-insensitively by default.
            self._folded.setdefault(tuple(p.lower() for p in path), path)

    def resolve(self, path: tuple[str, ...]) -> tuple[str, ...] | None:
        """The file's spelling of `path` (exact, else case-insensitive), None when absent."""
        if path in self.leaves or path in self.groups:
            return path
        return self._folded.get(tuple(p.lower() for p in path))

    def chunks(self, index: int) -> Iterator[tuple[int, Any]]:
        """(row count, statistics or None) of column `index` in each non-empty row group."""
        for rg in self.row_groups:
            if rg.num_rows == 0:
                continue
            chunk = rg.column(index)
            yield rg.num_rows, chunk.statistics if chunk.is_stats_set else None

    def null_count(self, stats: Any) -> int | None:
        if stats is None:
            return None
        if stats.has_null_count:
            return int(stats.null_count)
        return 0 if self.zero_null_count_omitted else None


def _omits_zero_null_count(created_by: str) -> bool:
    match = _PARQUET_RS_VERSION.match(created_by)
    if match is None:
        return False
    return (int(match.group(1)), int(match.group(2))) < _PARQUET_RS_NULL_COUNT_FIXED


def _variant_groups(
    metadata: pq.FileMetaData, leaves: Mapping[tuple[str, ...], int]
) -> dict[tuple[str, ...], int]:
    """The groups outside lists and maps shaped as an unshredded variant (`struct<value:
    binary, metadata: binary>`, both required), to the column index of their `value` leaf:
    that leaf is null exactly where the variant is (or a struct above it is), so its null
    count is the variant's, as Delta Spark counts it."""
    try:
        arrow = metadata.schema.to_arrow_schema()
    except (pa.ArrowException, NotImplementedError, ValueError):
        return {}
    found: dict[tuple[str, ...], int] = {}

    def walk(f: pa.Field, path: tuple[str, ...]) -> None:
        if not pa.types.is_struct(f.type):
            return
        children = {f.type.field(i).name: f.type.field(i) for i in range(f.type.num_fields)}
        if children.keys() == {"value", "metadata"} and all(
            pa.types.is_binary(c.type) and not c.nullable for c in children.values()
        ):
            index = leaves.get(path + ("value",))
            if index is not None:
                found[path] = index
            return
        for child in children.values():
            walk(child, path + (child.name,))

    for f in arrow:
        walk(f, (f.name,))
    return found


def _leaf_paths(metadata: pq.FileMetaData) -> list[tuple[str, ...]]:
    """Each leaf column's path as a tuple of names.

    The names come from Arrow's view of the schema tree, so names containing dots stay whole;
    list and map levels get Arrow's names, which only serve to mark those paths as groups.
    Falls back to splitting parquet's dotted paths when the two views disagree.
    """
    schema = metadata.schema
    dotted = [schema.column(i).path for i in range(metadata.num_columns)]
    try:
        arrow = schema.to_arrow_schema()
    except (pa.ArrowException, NotImplementedError, ValueError):
        arrow = None
    if arrow is not None:
        found = [leaf for f in arrow for leaf in arrow_leaf_paths(f.type, (f.name,), False)]
        if len(found) == len(dotted) and all(
            d.startswith(path[0] + ".") if repeated else d == ".".join(path)
            for (path, repeated), d in zip(found, dotted, strict=True)
        ):
            return [path for path, _ in found]
    return [tuple(d.split(".")) for d in dotted]


# --------------------------------------------------------------------------- nullCount


def _null_counts(footer: _Footer, schema: pa.StructType, prefix: tuple[str, ...]) -> dict[str, Any]:
    counts: dict[str, Any] = {}
    for f in schema:
        path = prefix + (f.name,)
        if pa.types.is_struct(f.type):
            counts[f.name] = _null_counts(footer, f.type, path)
            continue
        found = footer.resolve(path)
        if found is None:
            # Not in the file: every row reads as null (Spark: count(*) for such columns).
            counts[f.name] = footer.num_records
            continue
        # a leaf's own count, a variant's its value leaf's; an array or map (a parquet group)
        # has none that leaf counts can give
        leaf = footer.leaves.get(found, footer.variants.get(found))
        total = None if leaf is None else _leaf_null_count(footer, leaf)
        if total is not None:
            counts[f.name] = total
        else:
            footer.gaps.append((path, found, None))
    return counts


def _leaf_null_count(footer: _Footer, index: int) -> int | None:
    total = 0
    for _, stats in footer.chunks(index):
        count = footer.null_count(stats)
        if count is None:
            return None
        total += count
    return total


# --------------------------------------------------------------------------- min/max


def _fill_min_max(
    footer: _Footer,
    schema: pa.StructType,
    prefix: tuple[str, ...],
    mins: dict[str, Any],
    maxs: dict[str, Any],
) -> None:
    for f in schema:
        path = prefix + (f.name,)
        if pa.types.is_struct(f.type):
            # Spark writes the nested object even when all its leaves are null/unknown.
            inner_min: dict[str, Any] = {}
            inner_max: dict[str, Any] = {}
            _fill_min_max(footer, f.type, path, inner_min, inner_max)
            mins[f.name] = inner_min
            maxs[f.name] = inner_max
            continue
        found = footer.resolve(path)
        if found is None or found not in footer.leaves:
            continue
        bounds = _column_bounds(footer, footer.leaves[found], f.type)
        if bounds is not None:
            mins[f.name], maxs[f.name] = bounds
        elif _may_hold_values(footer, footer.leaves[found]):
            footer.gaps.append((path, found, f.type))


def _column_bounds(footer: _Footer, index: int, target: pa.DataType) -> tuple[Any, Any] | None:
    """The (min, max) JSON values of leaf `index` read as `target`, None when unknown."""
    descriptor = footer.metadata.schema.column(index)
    if descriptor.max_repetition_level > 0:
        return None
    decode = _decoder(descriptor, target)
    if decode is None:
        return None
    low = high = None
    for num_rows, stats in footer.chunks(index):
        if stats is None:
            return None
        if not stats.has_min_max:
            nulls = footer.null_count(stats)
            if nulls is not None and nulls >= num_rows:
                continue  # all null: nothing to bound
            return None
        try:
            chunk_low, chunk_high = decode(stats.min_raw), decode(stats.max_raw)
        except (ValueError, ArithmeticError):
            return None
        if _is_nan(chunk_low) or _is_nan(chunk_high):
            return None
        low = chunk_low if low is None or chunk_low < low else low
        high = chunk_high if high is None or chunk_high > high else high
    if low is None or high is None:
        return None  # every value is null: Spark's min/max are null, written as absent
    try:
        return _to_json_value(low, target, is_max=False), _to_json_value(high, target, is_max=True)
    except (ValueError, ArithmeticError):  # out of range dates, invalid UTF-8, rescaling
        return None


def _may_hold_values(footer: _Footer, index: int) -> bool:
    """Whether leaf `index` may hold a value (not known to be null in every row)."""
    nulls = _leaf_null_count(footer, index)
    return footer.num_records > 0 and (nulls is None or nulls < footer.num_records)


def _is_nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


def _decoder(descriptor: pq.ColumnSchema, target: pa.DataType) -> Any:
    """A function from a raw footer value to a comparable value for `target`, or None when
    the parquet column cannot be read as `target` (or its statistics have no usable order)."""
    physical = descriptor.physical_type
    logical = descriptor.logical_type.type
    plain_int = physical in ("INT32", "INT64") and logical in ("NONE", "INT")
    if pa.types.is_integer(target):
        return _integer_decoder(descriptor) if plain_int else None
    if pa.types.is_floating(target):
        if physical in ("FLOAT", "DOUBLE"):
            return float
        return _integer_decoder(descriptor) if plain_int else None  # type widening
    if pa.types.is_decimal(target):
        if logical == "DECIMAL":
            if descriptor.scale > target.scale:
                return None
            return _decimal_decoder(physical, descriptor.scale)
        if plain_int:  # type widening: integer to decimal
            to_int = _integer_decoder(descriptor)
            return lambda raw: decimal.Decimal(to_int(raw))
        return None
    if pa.types.is_date(target):
        return int if physical == "INT32" and logical == "DATE" else None
    if pa.types.is_timestamp(target):
        if physical == "INT64" and logical == "TIMESTAMP":
            return _timestamp_decoder(descriptor)
        if physical == "INT32" and logical == "DATE" and target.tz is None:
            return lambda raw: int(raw) * 86_400_000_000  # type widening: date to ntz
        # INT96 (Spark's default timestamp encoding) has no defined sort order in parquet:
        # its min/max, when written at all, cannot be trusted.
        return None
    if pa.types.is_string(target) or pa.types.is_large_string(target):
        if physical == "BYTE_ARRAY" and logical in ("STRING", "ENUM", "JSON", "NONE"):
            return bytes  # UTF-8 byte order is code point order: compare before decoding
        return None
    return None


def _integer_decoder(descriptor: pq.ColumnSchema) -> Any:
    # pyarrow hands unsigned statistics over in their signed physical form.
    if descriptor.logical_type.type == "INT" and '"isSigned":false' in _logical_json(descriptor):
        bits = 32 if descriptor.physical_type == "INT32" else 64
        mask = (1 << bits) - 1
        return lambda raw: int(raw) & mask
    return int


def _decimal_decoder(physical: str, scale: int) -> Any:
    def decode(raw: Any) -> decimal.Decimal:
        unscaled = int.from_bytes(raw, "big", signed=True) if isinstance(raw, bytes) else int(raw)
        return decimal.Decimal(unscaled).scaleb(-scale, _EXACT)

    if physical not in ("INT32", "INT64", "FIXED_LEN_BYTE_ARRAY", "BYTE_ARRAY"):
        return None
    return decode


def _timestamp_decoder(descriptor: pq.ColumnSchema) -> Any:
    unit = json.loads(_logical_json(descriptor)).get("timeUnit")
    factor = _MICROS_PER_UNIT.get(unit)
    if factor is None:
        return None
    if factor == 0:  # nanoseconds, floored to microseconds like Spark's reader
        return lambda raw: int(raw) // 1_000
    return lambda raw: int(raw) * factor


def _logical_json(descriptor: pq.ColumnSchema) -> str:
    return str(descriptor.logical_type.to_json()).replace(" ", "")


# Enough digits for decimal(38, s) and its rescaling, never rounding.
_EXACT = decimal.Context(prec=100, traps=[decimal.Inexact, decimal.InvalidOperation])


def _to_json_value(value: Any, target: pa.DataType, *, is_max: bool) -> Any:
    if pa.types.is_integer(target):
        return value
    if pa.types.is_float32(target) or pa.types.is_float16(target):
        return _shortest_float32(float(value))
    if pa.types.is_floating(target):
        return float(value)
    if pa.types.is_decimal(target):
        return value.quantize(decimal.Decimal(1).scaleb(-target.scale), context=_EXACT)
    if pa.types.is_date(target):
        return _format_date(_EPOCH_DATE + dt.timedelta(days=value))
    if pa.types.is_timestamp(target):
        return _format_timestamp(value, utc=target.tz is not None)
    text = value.decode("utf-8")
    return truncate_max_string(text) if is_max else truncate_min_string(text)


def _shortest_float32(value: float) -> float:
    """The float32 `value` as the shortest decimal that reads back as it (Java's
    `Float.toString`), so ``0.1f`` is written ``0.1``, not ``0.10000000149011612``."""
    if not math.isfinite(value):
        return value
    for digits in range(1, 10):
        candidate = float(f"{value:.{digits}g}")
        if struct.unpack("<f", struct.pack("<f", candidate))[0] == value:
            return candidate
    return value


def _format_date(day: dt.date) -> str:
    return f"{day.year:04d}-{day.month:02d}-{day.day:02d}"


def _format_timestamp(micros: int, *, utc: bool) -> str:
    """Spark's JSON timestamp: milliseconds (floored), ``Z`` for `timestamp` (UTC), no zone
    for `timestamp_ntz` (`JSONOptions` ``yyyy-MM-dd'T'HH:mm:ss[.SSS][XXX]``)."""
    millis = micros // 1_000
    t = _EPOCH + dt.timedelta(milliseconds=millis)
    text = (
        f"{_format_date(t.date())}T{t.hour:02d}:{t.minute:02d}:{t.second:02d}"
        f".{t.microsecond // 1_000:03d}"
    )
    return text + "Z" if utc else text


def _utf16_length(value: str) -> int:
    return len(value) + sum(1 for ch in value if ord(ch) > 0xFFFF)


# --------------------------------------------------------------------------- from the data


RowGroupReader = Callable[[int, list[str]], pa.Table]


def _fill_from_data(footer: _Footer, read_row_group: RowGroupReader, stats: dict[str, Any]) -> None:
    """Compute the footer's gaps from the columns themselves, one row group at a time: null
    counts as Spark counts them (a value inside a null struct is null; an array or map is null
    only itself), min/max by the footer's rules (NaN left out, strings cut as Spark cuts them).
    A column that cannot be read as its table type keeps its gap: leaving a value out is safe."""
    tops = sorted({found[0] for _, found, _ in footer.gaps})
    nulls: dict[tuple[str, ...], int | None] = {}
    bounds: dict[tuple[str, ...], tuple[Any, Any] | None] = {}
    for index, rg in enumerate(footer.row_groups):
        if rg.num_rows == 0:
            continue
        data = read_row_group(index, tops)
        for path, found, target in footer.gaps:
            column = _column_at(data, found)
            if target is None:
                if path in nulls and nulls[path] is None:
                    continue
                nulls[path] = None if column is None else (nulls.get(path) or 0) + column.null_count
                continue
            if path in bounds and bounds[path] is None:
                continue
            low_high = None if column is None else _data_bounds(column, target)
            if low_high is _UNKNOWN:
                bounds[path] = None
            elif low_high is not None:
                seen = bounds.get(path)
                bounds[path] = low_high if seen is None else _widen(seen, low_high)
    for path, count in nulls.items():
        if count is not None:
            _nested_set(stats[NULL_COUNT], path, count)
    for path, found, target in footer.gaps:
        if target is None or bounds.get(path) is None:
            continue
        low, high = bounds[path]  # type: ignore[misc]
        try:
            low_json = _to_json_value(low, target, is_max=False)
            high_json = _to_json_value(high, target, is_max=True)
        except (ValueError, ArithmeticError):
            continue
        _nested_set(stats[MIN_VALUES], path, low_json)
        _nested_set(stats[MAX_VALUES], path, high_json)


#: a row group whose bounds cannot be computed (compared by identity)
_UNKNOWN: tuple[Any, Any] = (object(), object())


def _column_at(data: pa.Table, path: tuple[str, ...]) -> pa.Array | None:
    """The column at `path` in `data` (a struct's fields followed; a value under a null struct
    is null), None when the file's data does not have it."""
    if path[0] not in data.column_names:
        return None
    column = data.column(path[0]).combine_chunks()
    for name in path[1:]:
        if not pa.types.is_struct(column.type):
            return None
        index = column.type.get_field_index(name)
        if index < 0:
            return None
        column = pc.struct_field(column, [index])
    result: pa.Array = column
    return result


def _data_bounds(column: pa.Array, target: pa.DataType) -> tuple[Any, Any] | None:
    """(min, max) of a row group's values as `_to_json_value` takes them (None: all null or
    NaN; _UNKNOWN: not readable as `target`)."""
    try:
        if pa.types.is_string(target) or pa.types.is_large_string(target):
            if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
                column = column.cast(pa.string())
        elif column.type != target:
            column = column.cast(target)
        result = pc.min_max(column)
    except (pa.ArrowException, NotImplementedError):
        return _UNKNOWN
    low, high = result["min"], result["max"]
    if not low.is_valid or not high.is_valid:
        return None
    raw_low, raw_high = _raw(low, target), _raw(high, target)
    return None if raw_low is None or raw_high is None else (raw_low, raw_high)


def _raw(value: pa.Scalar, target: pa.DataType) -> Any:
    """A min/max scalar in the form the footer's decoders give: days, microseconds, UTF-8."""
    if pa.types.is_date(target):
        return value.cast(pa.int32()).as_py()
    if pa.types.is_timestamp(target):
        micros = value.cast(pa.timestamp("us", target.tz)).cast(pa.int64())
        return micros.as_py()
    if pa.types.is_string(target) or pa.types.is_large_string(target):
        return value.as_py().encode("utf-8")
    plain = value.as_py()
    return None if _is_nan(plain) else plain


def _widen(seen: tuple[Any, Any], new: tuple[Any, Any]) -> tuple[Any, Any]:
    return min(seen[0], new[0]), max(seen[1], new[1])


def _nested_set(target: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for name in path[:-1]:
        target = target.setdefault(name, {})
    target[path[-1]] = value


def _in_schema_order(values: dict[str, Any], schema: pa.StructType) -> dict[str, Any]:
    """`values` with keys in the order of `schema`'s fields, at every depth (Spark's order)."""
    out: dict[str, Any] = {}
    for f in schema:
        if f.name in values:
            value = values[f.name]
            out[f.name] = (
                _in_schema_order(value, f.type)
                if isinstance(value, dict) and pa.types.is_struct(f.type)
                else value
            )
    return out


# --------------------------------------------------------------------------- JSON


_NON_FINITE = {math.inf: '"Infinity"', -math.inf: '"-Infinity"'}


def _encode(value: Any) -> str:
    if isinstance(value, Mapping):
        items = (f"{_encode_str(str(k))}:{_encode(v)}" for k, v in value.items())
        return "{" + ",".join(items) + "}"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, decimal.Decimal):
        if not value.is_finite():
            raise ValueError(f"decimal {value} cannot be written to JSON")
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return '"NaN"'
        if math.isinf(value):
            return _NON_FINITE[value]
        return repr(value)
    if isinstance(value, str):
        return _encode_str(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_encode(v) for v in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} to stats JSON")


def _encode_str(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)
