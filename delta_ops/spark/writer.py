"""Writing a Spark DataFrame into a Delta table without Delta's Spark jars.

Spark writes the data; delta-ops commits it. :func:`write_delta` works in four steps, each
leaving the table valid if the process dies right after it:

1. Spark writes the DataFrame as parquet (Hive-style partition directories when the table is
   partitioned) into a fresh staging directory inside the table,
   ``<table>/_delta_ops_staging/<uuid>/``. Its leading underscore hides it from readers and
   from vacuum, so a crash here leaves only that directory behind.
2. Each data file Spark produced (``_SUCCESS``, ``.crc`` and other hidden files are skipped)
   moves to its final place in the table, ``<partition dirs>/<file name>``. Spark's names
   (``part-<task>-<job uuid>.c000.snappy.parquet``) are unique per job and directory, and the
   partition values come from the directory names (Spark's escaping undone,
   ``__HIVE_DEFAULT_PARTITION__`` read as null). Files that are moved but not committed are
   orphans, which vacuum removes.
3. :func:`delta_ops.table.writer.commit_data_files` commits them: per-file statistics from the
   parquet footers, the table created when absent (protocol, metadata, a Delta schema from the
   DataFrame's schema), live files removed for ``mode="overwrite"``, row ids assigned when
   the table supports row tracking.
4. The staging directory is removed.

If the write, a move or the commit fails, the moved files are deleted again (after checking
that the log does not reference them) and the error propagates.

Example::

    from delta_ops.spark import get_spark, write_delta

    spark = get_spark()
    events = spark.range(1000).selectExpr("id", "cast(id % 7 as string) as day")
    write_delta(events, "/warehouse/events", partition_by=["day"])
    write_delta(events, "/warehouse/events", mode="overwrite")
"""

from __future__ import annotations

import logging
import posixpath
import re
import threading
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from delta_ops.errors import DeltaOpsError, InvalidValue
from delta_ops.ops.leftovers import STAGING_DIR  # the name vacuum knows as a leftover
from delta_ops.spark.session import activate
from delta_ops.storage import Location, Storage
from delta_ops.table.transaction import CommitResult
from delta_ops.table.write_target import WriteTarget, resolve_write_target
from delta_ops.table.writer import (
    HIVE_DEFAULT_PARTITION,
    DataFile,
    commit_data_files,
    discard_uncommitted,
    latest_snapshot,
)

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType as SparkStructType

logger = logging.getLogger(__name__)

OUTPUT_TIMESTAMP_TYPE = "spark.sql.parquet.outputTimestampType"
SESSION_TIME_ZONE = "spark.sql.session.timeZone"
_UTC_NAMES = {
    "UTC",
    "ETC/UTC",
    "GMT",
    "ETC/GMT",
    "UCT",
    "ETC/UCT",
    "Z",
    "ZULU",
    "UNIVERSAL",
    "+00:00",
}
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
            table refuses columns it does not have (no schema evolution).
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
        The commit's :class:`~delta_ops.table.transaction.CommitResult` (version, attempts, row id
        high-water mark).

    Raises:
        DeltaOpsError: partitioning or schema do not match the existing table, a timestamp
            partition column in a non-UTC session, or the commit is refused (nothing is left
            behind in the table).

    Examples:
        >>> write_delta(df, "/warehouse/events", partition_by=["day"])  # doctest: +SKIP
        CommitResult(version=0, attempts=1, num_actions=5, row_id_high_water_mark=None)
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
            raise DeltaOpsError(
                f"{storage.url} is already a Delta table (version {snapshot.version})"
            )
        mode = "append"
    wanted = [partition_by] if isinstance(partition_by, str) else list(partition_by or [])
    # refusals, partitioning and column mapping, decided before Spark writes a file
    target = resolve_write_target(
        storage,
        spark_schema_to_arrow(df.schema),
        partition_by=wanted,
        mode=mode,
        configuration=configuration,
        snapshot=snapshot,
        merge_schema=merge_schema,
        replace_where=replace_where,
    )
    partition_columns = list(target.partition_columns)
    spark = activate(df.sparkSession)  # a worker thread has no active session of its own
    _check_timestamp_partitions(spark, df.schema, partition_columns, storage.url)
    file_partitions = [target.file_name(c) for c in partition_columns]
    staging_relative = f"{STAGING_DIR}/{uuid.uuid4()}"
    target_dir = f"{spark_location(storage, spark_url)}/{staging_relative}"
    root_existed = not storage.is_local or storage.exists(storage.root)
    moved: list[str] = []
    committed = False
    try:
        with parquet_timestamps_in_micros(spark):
            writer = _in_file_layout(df, target).write.mode("errorifexists")
            if file_partitions:
                writer = writer.partitionBy(*file_partitions)
            writer.parquet(target_dir)
        files = []
        for staged in staged_files(storage, staging_relative, file_partitions):
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
def _in_file_layout(df: DataFrame, target: WriteTarget) -> DataFrame:
    """The DataFrame's columns as the table's data files name and type them: under column
    mapping, physical names (nested ones too: Spark casts structs by position) with parquet
    field ids; partition columns renamed only."""
    if all(target.file_name(c) == c for c in target.file_names):
        return df  # no column mapping: files name columns as the DataFrame does
    from pyspark.sql import functions as F

    by_lower = {c.lower(): c for c in df.columns}
    logical = {target.file_name(c): c for c in target.file_names}
    columns = []
    for field in target.file_schema:
        source = by_lower.get(logical.get(field.name, field.name).lower())
        if source is None:
            continue  # a missing nullable column: readers take it as null
        cast = F.col(f"`{source}`").cast(_spark_type(field.type))
        columns.append(cast.alias(field.name, metadata=_field_id_metadata(field)))
    written = {field.name for field in target.file_schema}
    for column in target.partition_columns:
        name = target.file_name(column)
        if name not in written:
            columns.append(F.col(f"`{by_lower[column.lower()]}`").alias(name))
    return df.select(*columns)


def _field_id_metadata(field: pa.Field) -> dict[str, Any]:
    """Spark's column metadata that makes its parquet writer store `field`'s field id."""
    from delta_ops.protocol.schema import PARQUET_FIELD_ID_KEY

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


def _check_timestamp_partitions(
    spark: SparkSession, schema: SparkStructType, partition_columns: Sequence[str], where: str
) -> None:
    """Refuse timestamp partition columns unless the session renders them in UTC.

    Spark names a timestamp partition directory in the session time zone without an offset;
    Delta readers take such a value as UTC, so any other zone would shift the partition values.
    """
    from pyspark.sql.types import TimestampType

    timestamps = [
        f.name
        for f in schema.fields
        if f.name in partition_columns and isinstance(f.dataType, TimestampType)
    ]
    if not timestamps:
        return
    zone = spark.conf.get(SESSION_TIME_ZONE)
    if (zone or "").upper() not in _UTC_NAMES:
        raise DeltaOpsError(
            f"{where}: timestamp partition columns {timestamps} need {SESSION_TIME_ZONE}=UTC "
            f"(the session uses {zone!r}; Spark would write the partition values in that zone)"
        )


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


def spark_schema_to_arrow(schema: SparkStructType) -> pa.Schema:
    """The DataFrame's schema in Arrow, with Spark's timestamps as UTC instants (Delta's ``timestamp``)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, timezone="UTC")


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
    storage: Storage, staging: str, partition_columns: Sequence[str]
) -> list[StagedFile]:
    """The data files Spark wrote under `staging` (table-relative), with their final paths
    and partition values.

    Hidden names (``_SUCCESS``, ``.part-*.crc``, ``_temporary``) are skipped; any other file
    outside the expected ``col=value/`` layout is an error, never a guess.
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
            raise DeltaOpsError(
                f"unexpected file {path} in Spark's output: expected {'/'.join(c + '=...' for c in partition_columns) or 'no'} partition directories"
            )
        out.append(StagedFile(path, posixpath.join(*directories, name), values))
    return out


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
        raise DeltaOpsError(f"{storage.url}: {relative} already exists; refusing to overwrite it")


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
