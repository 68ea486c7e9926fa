"""`spark.read.format("delta")`: Delta tables read by Spark through delta-ops' protocol core.

No Delta jars: a PySpark Python data source plans the scan on the driver (the snapshot's live
files, by version or timestamp) and each Spark task reads its share of the files with
`delta_ops.table.scan` (deletion vectors applied, column mapping, typed partition values,
type widening), handing Spark Arrow batches:

    from delta_ops.spark import get_spark          # registers the source
    spark = get_spark()
    df = spark.read.format("delta").load("/warehouse/events")
    df = spark.read.format("delta").option("versionAsOf", 3).load(path)
    df = spark.read.format("delta").option("timestampAsOf", "2026-11-20T00:00:00Z").load(path)
    df = spark.read.format("delta").option("storage.endpoint_url", url).load("s3://lake/t")

For a session made elsewhere, call `register` once. Options starting with ``storage.``
are the table's storage options (credentials, endpoints). Filters on partition columns prune
files before any is read; Spark still evaluates every filter on the rows.

The source answers to two names: ``delta_ops`` in every session, and ``delta`` unless the
session already has a JVM data source of that name (Delta Spark's jars on its class path, a
Databricks cluster). Spark itself refuses a Python source the name of a JVM one
(``DATA_SOURCE_ALREADY_EXISTS``), so there ``format("delta")`` stays Delta Spark's, delta-ops
logs one line saying so, and ``format("delta_ops")`` reads and writes through delta-ops;
`register` returns the name that does:

    fmt = register(spark)                          # "delta", or "delta_ops" beside Delta Spark
    df = spark.read.format(fmt).load("/warehouse/events")

The same source writes (`delta_ops.spark.source_writer`) and streams:
``spark.readStream.format("delta")`` reads a table's appends
(`delta_ops.spark.stream_reader`) and ``df.writeStream.format("delta")`` commits each
micro-batch exactly once (`delta_ops.spark.stream_writer`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.errors import AnalysisException
from pyspark.sql import datasource
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
)

from delta_ops import clock
from delta_ops.errors import InvalidValue, OperationRefused
from delta_ops.protocol.schema import parse_partition_values
from delta_ops.spark.options import read_options, storage_options, timestamp_as_of_ms
from delta_ops.spark.scan_tasks import FilesPartition, group_files
from delta_ops.spark.source_writer import DeltaWriter
from delta_ops.spark.stream_reader import DeltaStreamReader
from delta_ops.spark.workers import set_up_workers
from delta_ops.storage import Storage
from delta_ops.table.commit_times import version_at as committed_version_at
from delta_ops.table.scan import FileToRead, ScanSpec, plan_scan, read_batches
from delta_ops.table.snapshot import Snapshot, load_snapshot

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType as SparkStructType


logger = logging.getLogger(__name__)

#: the format name of delta-ops' source in every session
OWN_FORMAT = "delta_ops"
#: the format name it also takes where no JVM source has it
DELTA_FORMAT = "delta"


def register(spark: SparkSession) -> str:
    """Make `format("delta_ops")`, and `format("delta")` where the session has no JVM `delta`
    source (Delta Spark), read and write through delta-ops in this session (and let Python
    sources take filters, which prune files by partition values); delta-ops errors in its
    workers reach the caller as one line (`delta_ops.spark.worker_errors`).

    Returns the name `spark.read.format("delta")` should be given to read through delta-ops:
    ``"delta"``, or ``"delta_ops"`` when Delta Spark keeps ``delta`` (logged, one line).
    """
    set_up_workers(spark)
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    spark.dataSource.register(DeltaOpsDataSource)
    if claim(spark, DeltaDataSource):
        return DELTA_FORMAT
    logger.info(
        "this Spark session has a JVM data source named %r (Delta Spark): format(%r) stays "
        "Delta Spark's; format(%r) reads and writes through delta-ops",
        DELTA_FORMAT,
        DELTA_FORMAT,
        OWN_FORMAT,
    )
    return OWN_FORMAT


def claim(spark: SparkSession, source: type[DataSource]) -> bool:
    """Register the Python data source `source` under its name, unless a JVM data source of
    the session has that name: Spark refuses such a registration (its
    ``DATA_SOURCE_ALREADY_EXISTS``, whereas a Python source registered again is replaced).
    True when `source` has the name."""
    try:
        spark.dataSource.register(source)
    except AnalysisException as exc:
        if exc.getCondition() != "DATA_SOURCE_ALREADY_EXISTS":
            raise
        return False
    return True


class DeltaDataSource(DataSource):
    """The `delta` format: options `path`, `versionAsOf`, `timestampAsOf`, `storage.*`."""

    _loaded: Snapshot | None = None

    @classmethod
    def name(cls) -> str:
        return DELTA_FORMAT

    def _snapshot(self) -> Snapshot:
        cached = self._loaded
        if cached is None:
            cached = load_for_read(dict(self.options))
            self._loaded = cached
        return cached

    def schema(self) -> SparkStructType:
        from pyspark.sql.pandas.types import from_arrow_schema

        return from_arrow_schema(self._snapshot().arrow_schema)

    def writer(self, schema: SparkStructType, overwrite: bool) -> DataSourceWriter:
        return DeltaWriter(dict(self.options), schema, overwrite)

    def streamWriter(self, schema: SparkStructType, overwrite: bool) -> DataSourceStreamWriter:
        if not hasattr(datasource, "DataSourceStreamArrowWriter"):
            raise OperationRefused(
                "df.writeStream.format('delta') needs PySpark 4.1 or later (its Arrow stream"
                " writer); write each micro-batch with foreachBatch and write_delta instead"
            )
        # the module subclasses a class PySpark 4.0 lacks: imported once known to exist
        from delta_ops.spark.stream_writer import DeltaStreamWriter

        return DeltaStreamWriter(dict(self.options), schema, overwrite)

    def streamReader(self, schema: SparkStructType) -> DataSourceStreamReader:
        snapshot = self._snapshot()
        self._loaded = None  # the reader is pickled to the executors: no snapshot inside
        return DeltaStreamReader(snapshot, dict(self.options), list(schema.fieldNames()))

    def reader(self, schema: SparkStructType) -> DeltaReader:
        snapshot = self._snapshot()
        self._loaded = None  # the reader is pickled to the executors: no snapshot inside
        return DeltaReader(snapshot, dict(self.options), list(schema.fieldNames()))


class DeltaOpsDataSource(DeltaDataSource):
    """The same source as `DeltaDataSource`, by the name no JVM source takes (`OWN_FORMAT`)."""

    @classmethod
    def name(cls) -> str:
        return OWN_FORMAT


def load_for_read(options: dict[str, str]) -> Snapshot:
    """The snapshot a read asks for: the latest, `versionAsOf`, or `timestampAsOf`."""
    read = read_options(options)
    storage = Storage.open(read.path, read.storage_options)
    if read.version is not None:
        return load_snapshot(storage, read.version)
    if read.timestamp is not None:
        return load_snapshot(storage, version_at(storage, read.timestamp))
    return load_snapshot(storage)


def version_at(storage: Storage, timestamp_text: str) -> int:
    """The newest version committed at or before the timestamp (in-commit timestamps where
    the table has them), as Delta's timestampAsOf; refused before the first commit we have."""
    wanted = timestamp_as_of_ms(timestamp_text, clock.now_ms())
    latest = load_snapshot(storage)
    version = committed_version_at(latest, wanted)
    if version is None:
        raise InvalidValue(
            f"timestampAsOf={timestamp_text!r} is before the table's earliest available commit"
        )
    return version


class DeltaReader(DataSourceReader):
    """Plans on the driver (picklable state only); reads files in the tasks."""

    def __init__(self, snapshot: Snapshot, options: dict[str, str], columns: list[str]) -> None:
        self.path = options["path"]
        self.storage_options = storage_options(options)
        self.spec, self.files = plan_scan(snapshot, columns)

    def pushFilters(self, filters: list[Filter]) -> Sequence[Filter]:
        """Prune files by partition values; every filter stays with Spark for the rows."""
        partition_columns = set(self.spec.partition_columns)
        usable = [f for f in filters if len(_column(f)) == 1 and _column(f)[0] in partition_columns]
        if usable:
            self.files = [f for f in self.files if _may_match(self.spec, f, usable)]
        return filters

    def partitions(self) -> list[FilesPartition]:
        return group_files(self.files)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, FilesPartition)
        storage = Storage.open(self.path, self.storage_options or None)
        yield from read_batches(storage, self.spec, partition.files)


def _column(flt: Filter) -> tuple[str, ...]:
    """The column path a filter tests."""
    return tuple(getattr(flt, "attribute", ()))


def _may_match(spec: ScanSpec, file: FileToRead, filters: list[Filter]) -> bool:
    """False only when a partition filter rules the file out for certain."""
    values = dict(file.partition_values)
    fields = {f.name: f for f in spec.schema.fields}
    for flt in filters:
        name = _column(flt)[0]
        field = fields[name]
        raw = values.get(field.physical_name, values.get(name))
        value = parse_partition_values(pa.array([raw], pa.string()), field.type)[0].as_py()
        try:
            ok = _holds(flt, value)
        except TypeError:
            ok = True  # values Spark and Arrow type differently: never prune on doubt
        if not ok:
            return False
    return True


def _holds(flt: Filter, value: Any) -> bool:
    """Whether a partition value passes one filter (True for filters we do not interpret)."""
    if isinstance(flt, IsNull):
        return value is None
    if isinstance(flt, IsNotNull):
        return value is not None
    comparisons: dict[type, Callable[[Any, Any], bool]] = {
        EqualTo: lambda v, x: v == x,
        In: lambda v, x: v in x,
        GreaterThan: lambda v, x: v > x,
        GreaterThanOrEqual: lambda v, x: v >= x,
        LessThan: lambda v, x: v < x,
        LessThanOrEqual: lambda v, x: v <= x,
    }
    compare = comparisons.get(type(flt))
    if compare is None:
        return True
    if value is None:
        return False  # a comparison with null is never true: Spark drops every such row
    return bool(compare(value, getattr(flt, "value", None)))


__all__ = [
    "DELTA_FORMAT",
    "OWN_FORMAT",
    "DeltaDataSource",
    "DeltaOpsDataSource",
    "DeltaReader",
    "claim",
    "load_for_read",
    "register",
    "version_at",
]
