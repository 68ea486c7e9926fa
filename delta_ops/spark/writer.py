"""Writing a Spark DataFrame into a Delta table without Delta's Spark jars.

Spark writes the data; delta-ops commits it. `write_delta` works in four steps, each
leaving the table valid if the process dies right after it:

1. Spark writes the DataFrame as parquet (Hive-style partition directories when the table is
   partitioned; on a table clustered by columns each task's rows in the order of the table's
   curve, `delta_ops.layout.write_order`) into a fresh staging directory inside the table,
   ``<table>/_delta_ops_staging/<uuid>/``. Its leading underscore hides it from readers and
   from vacuum, so a crash here leaves only that directory behind.
2. Each data file Spark produced (``_SUCCESS``, ``.crc`` and other hidden files are skipped)
   moves to its final place in the table, ``<partition dirs>/<file name>``. Spark's names
   (``part-<task>-<job uuid>.c000.snappy.parquet``) are unique per job and directory, and the
   partition values come from the directory names (Spark's escaping undone,
   ``__HIVE_DEFAULT_PARTITION__`` read as null). Timestamp partition columns are written
   as epoch microseconds (``unix_micros``) and become the protocol's UTC text here, so the
   values are exact in any session time zone (Spark would name the directory by the session's
   local time, which Delta readers take as UTC and which repeats in a daylight-saving
   fall-back hour). Files that are moved but not committed are orphans, which vacuum removes.
3. `delta_ops.table.writer.commit_data_files` commits them: per-file statistics from the
   parquet footers, the table created when absent (protocol, metadata, a Delta schema from the
   DataFrame's schema), live files removed for ``mode="overwrite"``, row ids assigned when
   the table supports row tracking.
4. The staging directory is removed.

If the write, a move or the commit fails, the moved files are deleted again (after checking
that the log does not reference them) and the error propagates.

Both Spark writers (this one and ``df.write.format("delta")``) take every Spark SQL type Delta
has: booleans, integers, floats, decimals, strings, binary, dates, ``timestamp`` (stored as
UTC microseconds) and ``timestamp_ntz`` (local microseconds, no zone), and arrays, maps and
structs of them; `spark_schema_to_arrow` refuses the rest (intervals, void, variant) in
one line before anything is written.

For example:

    from delta_ops.spark import get_spark, write_delta

    spark = get_spark()
    events = spark.range(1000).selectExpr("id", "cast(id % 7 as string) as day")
    write_delta(events, "/warehouse/events", partition_by=["day"])
    write_delta(events, "/warehouse/events", mode="overwrite")
"""

from __future__ import annotations

import datetime as dt
import logging
import posixpath
import re
import threading
import uuid
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from delta_ops.errors import (
    DataFileError,
    InvalidValue,
    OperationRefused,
    SchemaMismatch,
    UnsupportedType,
)
from delta_ops.layout.clustering import write_order
from delta_ops.layout.write_order import WriteOrder
from delta_ops.ops.leftovers import STAGING_DIR  # the name vacuum knows as a leftover
from delta_ops.protocol.schema import PARQUET_FIELD_ID_KEY, to_arrow_type
from delta_ops.spark.workers import activate, functions_for
from delta_ops.storage import Location, Storage
from delta_ops.table.transaction import CommitResult
from delta_ops.table.write_target import WriteTarget, resolve_write_target
from delta_ops.table.writer import (
    HIVE_DEFAULT_PARTITION,
    DataFile,
    commit_data_files,
    discard_uncommitted,
    latest_snapshot,
    partition_directory,
    partition_value_string,
)

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import DataType as SparkDataType
    from pyspark.sql.types import StructType as SparkStructType

logger = logging.getLogger(__name__)

OUTPUT_TIMESTAMP_TYPE = "spark.sql.parquet.outputTimestampType"
SESSION_TIME_ZONE = "spark.sql.session.timeZone"
_EPOCH = dt.datetime(1970, 1, 1)
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")


@dataclass(frozen=True)
class StagedFile:
    """A data file Spark wrote into the staging directory, and where it goes in the table."""

    staged_path: str  # filesystem path inside the staging directory
    relative_path: str  # final path relative to the table root, decoded
    partition_values: Mapping[str, str | None]


def write_delta(
    df: DataFrame,
    url: Location,
    *,
    mode: str = "append",
    partition_by: Sequence[str] | str | None = None,
    configuration: Mapping[str, str] | None = None,
    storage_options: Mapping[str, Any] | None = None,
    spark_url: str | None = None,
    merge_schema: bool = False,
    replace_where: str | None = None,
) -> CommitResult:
    """Write a DataFrame into a Delta table (created when absent) and commit it as one version.

    Args:
        df: the data. Its schema becomes the table's when the table is created; an existing
            table refuses columns it does not have (unless `merge_schema`) and columns of a
            type its own cannot hold without losing values (narrower types are cast).
        url: the table: a local path, ``file://`` or any fsspec URL.
        mode: ``"append"`` adds the rows; ``"overwrite"`` replaces every live file in the same
            commit; ``"error"`` refuses an existing table; ``"ignore"`` writes nothing to an
            existing table (its result has ``attempts=0``).
        partition_by: partition columns of a new table. For an existing table None means its
            own partitioning; anything else must match it.
        configuration: table properties of a new table, e.g. ``{"delta.enableRowTracking":
            "true"}`` (ignored for an existing table).
        storage_options: fsspec options for `url`.
        spark_url: the table's location as Spark's Hadoop filesystems name it, when that
            differs from `url` (``s3a://`` is derived from ``s3://``; local paths become
            ``file://``).
        merge_schema: add the DataFrame's columns the table lacks to its schema, in the same
            commit (nullable; column-mapped where the table maps columns).
        replace_where: with ``mode="overwrite"``, replace only the partitions this predicate
            on partition columns selects (``day >= '2026-11-01'``); every row must be in them.

    Returns:
        The commit's `delta_ops.table.transaction.CommitResult` (version, attempts, row id
        high-water mark).

    Raises:
        DeltaOpsError: partitioning or schema do not match the existing table, a column's
            Spark type has no Delta type (UnsupportedType), the table exists and `mode` is
            ``"error"`` (OperationRefused), or the commit is refused (nothing is left behind
            in the table).

    Example (a Spark DataFrame `df`):

        write_delta(df, "/warehouse/events", partition_by=["day"])
        # CommitResult(version=0, attempts=1, num_actions=5, row_id_high_water_mark=None)
    """
    if mode not in ("append", "overwrite", "error", "errorifexists", "ignore"):
        raise InvalidValue(
            f"mode={mode!r}: use append, overwrite, error (refuse an existing table) or ignore"
            " (leave an existing table alone)"
        )
    storage = Storage.open(url, storage_options)
    snapshot = latest_snapshot(storage)  # loaded once: the checks, the target and the commit
    if mode in ("error", "errorifexists", "ignore"):
        if snapshot is not None:
            if mode == "ignore":
                return CommitResult(version=snapshot.version, attempts=0, num_actions=0)
            raise OperationRefused(
                f"{storage.url} is already a Delta table (version {snapshot.version})"
            )
        mode = "append"
    wanted = [partition_by] if isinstance(partition_by, str) else list(partition_by or [])
    # refusals, partitioning and column mapping, decided before Spark writes a file
    target = resolve_write_target(
        storage,
        spark_schema_to_arrow(df.schema, storage.url),
        partition_by=wanted,
        mode=mode,
        configuration=configuration,
        snapshot=snapshot,
        merge_schema=merge_schema,
        replace_where=replace_where,
    )
    partition_columns = list(target.partition_columns)
    order = write_order(snapshot) if snapshot is not None else None
    spark = activate(df.sparkSession)  # a worker thread has no active session of its own
    file_partitions = [target.file_name(c) for c in partition_columns]
    staging_relative = f"{STAGING_DIR}/{uuid.uuid4()}"
    target_dir = f"{spark_location(storage, spark_url)}/{staging_relative}"
    root_existed = not storage.is_local or storage.exists(storage.root)
    moved: list[str] = []
    committed = False
    try:
        with parquet_timestamps_in_micros(spark):
            rows = df if order is None else _sorted_in_tasks(df, order)
            # "error": Spark Connect's writer refuses the spelling "errorifexists"
            writer = _in_file_layout(rows, target).write.mode("error")
            if file_partitions:
                writer = writer.partitionBy(*file_partitions)
            writer.parquet(target_dir)
        files = []
        instants = _timestamp_partitions(target)
        for staged in staged_files(storage, staging_relative, file_partitions, instants):
            _move(storage, staged.staged_path, staged.relative_path)
            moved.append(staged.relative_path)
            files.append(DataFile(staged.relative_path, staged.partition_values))
        logger.info("Spark wrote %d files for %s; committing", len(files), storage.url)
        result = commit_data_files(storage, files, target, known=snapshot)
        committed = True
        return result
    finally:
        if not committed:
            discard_uncommitted(storage, moved)
        remove_staging(storage, staging_relative)
        if not committed and not root_existed:
            storage.remove_empty_dirs([""])  # the failed write created the table's folder


# ------------------------------------------------------------------------------ decisions
def _sorted_in_tasks(df: DataFrame, order: WriteOrder) -> DataFrame:
    """`df` with each task's rows in `order` (a clustered table's curve, fitted to the task's
    rows), the step before Spark writes them: a task holds its rows in its Python worker."""

    def sort(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa  # in the Python worker

        rows = list(batches)
        if rows:
            yield from order.sort(pa.Table.from_batches(rows)).to_batches()

    return df.mapInArrow(sort, df.schema)


def _in_file_layout(df: DataFrame, target: WriteTarget) -> DataFrame:
    """The DataFrame's columns as the table's data files name and type them: under column
    mapping, physical names (nested ones too: Spark casts structs by position) with parquet
    field ids; columns of a narrower type than the table's cast to it (`_casts`);
    partition columns renamed only, timestamp ones as epoch microseconds (see
    `staged_files`)."""
    F = functions_for(df.sparkSession)

    instants = _timestamp_partitions(target)
    mapped = any(target.file_name(c) != c for c in target.file_names)
    casts = _casts(target)
    if not mapped and not instants and not casts:
        return df  # files name and type columns as the DataFrame does
    by_lower = {c.lower(): c for c in df.columns}

    def column(logical: str) -> Any:
        source = F.col(f"`{by_lower[logical.lower()]}`")
        wanted = casts.get(logical.lower())
        return source if wanted is None else source.cast(_spark_type(wanted))

    def partition(logical: str) -> Any:
        name = target.file_name(logical)
        value = column(logical)
        return (F.unix_micros(value) if name in instants else value).alias(name)

    if not mapped:
        partitions = {c.lower(): c for c in target.partition_columns}
        return df.select(
            *[
                partition(partitions[c.lower()]) if c.lower() in partitions else column(c).alias(c)
                for c in df.columns
            ]
        )
    logical = {target.file_name(c): c for c in target.file_names}
    columns = []
    for field in target.file_schema:
        source = by_lower.get(logical.get(field.name, field.name).lower())
        if source is None:
            continue  # a missing nullable column: readers take it as null
        cast = F.col(f"`{source}`").cast(_spark_type(field.type))
        columns.append(cast.alias(field.name, metadata=_field_id_metadata(field)))
    written = {field.name for field in target.file_schema}
    for name in target.partition_columns:
        if target.file_name(name) not in written:
            columns.append(partition(name))
    return df.select(*columns)


def _casts(target: WriteTarget) -> dict[str, pa.DataType]:
    """The DataFrame's columns (lower-cased logical names) whose type differs from the
    table's, with the table's Arrow type: each a cast no value can lose (a wider integer,
    float to double, a decimal with room for every digit).

    Raises:
        SchemaMismatch: columns whose type would need a lossy or impossible cast (long to
            int, string to int, timestamp_ntz to timestamp), all named in one line; Spark's
            cast would turn the values that do not fit into nulls or fail in a task.
    """
    if target.data_schema is None:
        return {}
    table_types = {
        logical.lower(): target.file_schema.field(target.file_name(logical)).type
        for logical in target.file_names
        if target.file_name(logical) in target.file_schema.names
    }
    for logical, delta_type in target.partition_types.items():
        table_types[logical.lower()] = to_arrow_type(delta_type)
    casts: dict[str, pa.DataType] = {}
    refused = []
    for field in target.data_schema:
        wanted = table_types.get(field.name.lower())
        if wanted is None or _shape(field.type) == _shape(wanted):
            continue
        if _lossless(field.type, wanted):
            casts[field.name.lower()] = wanted
        else:
            refused.append(f"{field.name} ({field.type} into {wanted})")
    if refused:
        raise SchemaMismatch(
            f"{target.url}: the DataFrame's {_columns(refused)} not fit the table's types "
            "without losing values; cast to the table's types first"
        )
    return casts


def _shape(arrow_type: pa.DataType) -> str:
    """An Arrow type without its nested field names and nullability (physical and logical
    names differ under column mapping)."""
    import pyarrow as pa

    if pa.types.is_struct(arrow_type):
        return "struct<" + ",".join(_shape(f.type) for f in arrow_type) + ">"
    if pa.types.is_map(arrow_type):
        return f"map<{_shape(arrow_type.key_type)},{_shape(arrow_type.item_type)}>"
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        return f"list<{_shape(arrow_type.value_type)}>"
    return str(arrow_type)


_INTEGER_DIGITS = {8: 3, 16: 5, 32: 10, 64: 19}


def _lossless(source: pa.DataType, target: pa.DataType) -> bool:
    """Whether every value of `source` has an exact value in `target` (atomic types)."""
    import pyarrow as pa

    types = pa.types
    if types.is_signed_integer(source):
        if types.is_signed_integer(target):
            return bool(target.bit_width >= source.bit_width)
        if types.is_float64(target):
            return bool(source.bit_width <= 32)
        if types.is_decimal(target):
            return bool(target.precision - target.scale >= _INTEGER_DIGITS[source.bit_width])
        return False
    if types.is_float32(source):
        return bool(types.is_float64(target))
    if types.is_decimal(source) and types.is_decimal(target):
        return bool(
            target.scale >= source.scale
            and target.precision - target.scale >= source.precision - source.scale
        )
    return False


def _timestamp_partitions(target: WriteTarget) -> set[str]:
    """File names of the target's `timestamp` partition columns (written as microseconds)."""
    return {
        target.file_name(c)
        for c in target.partition_columns
        if target.partition_types.get(c) == "timestamp"
    }


def _field_id_metadata(field: pa.Field) -> dict[str, Any]:
    """Spark's column metadata that makes its parquet writer store `field`'s field id."""
    field_id = (field.metadata or {}).get(PARQUET_FIELD_ID_KEY)
    return {"parquet.field.id": int(field_id)} if field_id else {}


def _spark_type(arrow_type: pa.DataType) -> Any:
    """The Spark type of an Arrow type, nested fields keeping their field ids."""
    import pyarrow as pa
    from pyspark.sql import types as T
    from pyspark.sql.pandas.types import from_arrow_type

    if pa.types.is_struct(arrow_type):
        return T.StructType(
            [
                T.StructField(f.name, _spark_type(f.type), f.nullable, _field_id_metadata(f))
                for f in arrow_type
            ]
        )
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        element = arrow_type.value_field
        return T.ArrayType(_spark_type(element.type), element.nullable)
    if pa.types.is_map(arrow_type):
        item = arrow_type.item_field
        return T.MapType(_spark_type(arrow_type.key_type), _spark_type(item.type), item.nullable)
    return from_arrow_type(arrow_type)


def spark_location(storage: Storage, spark_url: str | None = None) -> str:
    """The table root as a Spark (Hadoop) path: `spark_url`, ``file://<root>``, or the URL.

    Local roots stay unescaped: Hadoop's ``Path`` escapes characters itself, so a
    percent-encoded URI would name a different directory.
    """
    if spark_url is not None:
        return spark_url.rstrip("/")
    if storage.is_local:
        return "file://" + storage.root.rstrip("/")
    url = storage.url.rstrip("/")
    if url.startswith("s3://"):
        return "s3a://" + url[len("s3://") :]
    return url


def spark_schema_to_arrow(schema: SparkStructType, where: str = "") -> pa.Schema:
    """The DataFrame's schema in Arrow as Delta stores it: ``timestamp`` as UTC instants
    (``timestamp('us', tz='UTC')``; the instants are the same in any session time zone),
    ``timestamp_ntz`` without a zone.

    Raises:
        UnsupportedType: columns (at any depth) whose Spark types have no Delta type, all
            named in one line (`where`, the table, leads it).
    """
    from pyspark.sql.pandas.types import to_arrow_schema

    refused = [
        f"{path} ({kind.simpleString()})"
        for field in schema.fields
        for path, kind in _unwritable(field.dataType, field.name)
    ]
    if refused:
        raise UnsupportedType(
            f"{where + ': ' if where else ''}{_columns(refused, 'have', 'has')} no Delta type "
            "that delta-ops writes (intervals and void have none; variant needs the "
            "variantType feature); cast or drop them"
        )
    return to_arrow_schema(schema, timezone="UTC")


def _columns(described: Sequence[str], plural: str = "do", singular: str = "does") -> str:
    """`column a (...) does` or `columns a (...), b (...) do`."""
    if len(described) == 1:
        return f"column {described[0]} {singular}"
    return f"columns {', '.join(described)} {plural}"


def _unwritable(kind: SparkDataType, path: str) -> Iterator[tuple[str, SparkDataType]]:
    """The paths (and types) under `path` whose Spark type no Delta type holds."""
    from pyspark.sql import types as T

    if isinstance(kind, T.StructType):
        for field in kind.fields:
            yield from _unwritable(field.dataType, f"{path}.{field.name}")
    elif isinstance(kind, T.ArrayType):
        yield from _unwritable(kind.elementType, f"{path}[]")
    elif isinstance(kind, T.MapType):
        yield from _unwritable(kind.keyType, f"{path}.key")
        yield from _unwritable(kind.valueType, f"{path}.value")
    elif not isinstance(kind, _delta_atomic_types()):
        yield path, kind


def _delta_atomic_types() -> tuple[type, ...]:
    """Spark's atomic types that have a Delta type (char and varchar are strings)."""
    from pyspark.sql import types as T

    return (
        T.BooleanType,
        T.ByteType,
        T.ShortType,
        T.IntegerType,
        T.LongType,
        T.FloatType,
        T.DoubleType,
        T.DecimalType,
        T.StringType,
        T.CharType,
        T.VarcharType,
        T.BinaryType,
        T.DateType,
        T.TimestampType,
        T.TimestampNTZType,
    )


# ------------------------------------------------------------------------------ staging
def unescape_path_name(text: str) -> str:
    """Undo Spark's (Hive's) escaping of a partition directory name: ``%XX`` is one character."""
    return _ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), text)


def partition_value_from_directory(escaped: str) -> str | None:
    """A partition value as the log stores it, from the escaped value in a directory name."""
    return None if escaped == HIVE_DEFAULT_PARTITION else unescape_path_name(escaped)


def _is_hidden(name: str) -> bool:
    return name.startswith(("_", "."))


def staged_files(
    storage: Storage,
    staging: str,
    partition_columns: Sequence[str],
    timestamp_columns: Collection[str] = (),
) -> list[StagedFile]:
    """The data files Spark wrote under `staging` (table-relative), with their final paths
    and partition values.

    Hidden names (``_SUCCESS``, ``.part-*.crc``, ``_temporary``) are skipped; any other file
    outside the expected ``col=value/`` layout is an error, never a guess. Partition columns
    in `timestamp_columns` were written as epoch microseconds: their values become the
    protocol's UTC text (``2026-11-01 08:30:00.000000``), and their directories are named
    by it.
    """
    out = []
    for entry in storage.list_tree(staging):
        path = storage.join(f"{staging}/{entry.name}")
        *directories, name = entry.name.split("/")
        if _is_hidden(name):
            continue
        values = _partition_values(directories, partition_columns)
        if values is None:
            if any(_is_hidden(d) for d in directories):
                continue
            raise DataFileError(
                f"unexpected file {path} in Spark's output: expected {'/'.join(c + '=...' for c in partition_columns) or 'no'} partition directories"
            )
        for column in timestamp_columns:
            values[column] = _micros_to_partition_value(values[column], path)
        directories = [
            partition_directory([c], values) if c in timestamp_columns else d
            for c, d in zip(partition_columns, directories, strict=True)
        ]
        out.append(StagedFile(path, posixpath.join(*directories, name), values))
    return out


def _micros_to_partition_value(micros: str | None, path: str) -> str | None:
    """A timestamp partition value written as epoch microseconds, as the protocol's UTC text."""
    if micros is None:
        return None
    try:
        return partition_value_string(_EPOCH + dt.timedelta(microseconds=int(micros)))
    except (ValueError, OverflowError):
        raise SchemaMismatch(
            f"{path}: timestamp partition value {micros} (microseconds) is outside years 1-9999"
        ) from None


def _partition_values(
    directories: Sequence[str], partition_columns: Sequence[str]
) -> dict[str, str | None] | None:
    if len(directories) != len(partition_columns):
        return None
    values: dict[str, str | None] = {}
    for directory, column in zip(directories, partition_columns):
        key, eq, escaped = directory.partition("=")
        if not eq or unescape_path_name(key) != column:
            return None
        values[column] = partition_value_from_directory(escaped)
    return values


def _move(storage: Storage, source: str, relative: str) -> None:
    """Move a staged file to its final table path, never over an existing file (its mtime
    becomes the staging time, which vacuum's in-flight grace measures)."""
    if not storage.move_new(source, relative):
        raise OperationRefused(
            f"{storage.url}: {relative} already exists; refusing to overwrite it"
        )


def remove_staging(storage: Storage, staging: str) -> None:
    """Remove this write's (table-relative) staging directory, and the staging root when
    nothing else is in it (kept while another write stages)."""
    try:
        storage.remove_tree(staging)
        storage.remove_empty_dirs([posixpath.dirname(staging)])
    except OSError:
        pass
    except Exception:
        logger.warning("could not remove the staging directory %s", staging, exc_info=True)


# ------------------------------------------------------------------------------ session options
_override_lock = threading.Lock()
_overrides: dict[int, list[Any]] = {}  # id(session) -> [active writes, value to restore]


@contextmanager
def parquet_timestamps_in_micros(spark: SparkSession) -> Iterator[None]:
    """Make Spark write timestamps as INT64 microseconds for the duration of a write.

    Spark's default, INT96, is deprecated, has no statistics, and Delta readers may refuse it.
    A session that already writes microseconds is left alone; otherwise the option is set and
    restored when the last concurrent write on that session finishes.
    """
    key = id(spark)
    with _override_lock:
        state = _overrides.get(key)
        if state is None:
            previous = spark.conf.get(OUTPUT_TIMESTAMP_TYPE)
            if (previous or "").upper() != "TIMESTAMP_MICROS":
                logger.info(
                    "writing parquet timestamps as TIMESTAMP_MICROS (the session has %s)", previous
                )
                spark.conf.set(OUTPUT_TIMESTAMP_TYPE, "TIMESTAMP_MICROS")
                state = _overrides[key] = [0, previous]
        if state is not None:
            state[0] += 1
    try:
        yield
    finally:
        if state is not None:
            with _override_lock:
                state[0] -= 1
                if state[0] == 0:
                    del _overrides[key]
                    spark.conf.set(OUTPUT_TIMESTAMP_TYPE, state[1])


__all__ = [
    "STAGING_DIR",
    "StagedFile",
    "discard_uncommitted",
    "parquet_timestamps_in_micros",
    "partition_value_from_directory",
    "remove_staging",
    "spark_location",
    "spark_schema_to_arrow",
    "staged_files",
    "unescape_path_name",
    "write_delta",
]
