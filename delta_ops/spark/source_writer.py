"""`df.write.format("delta")`: the write half of the `delta` Python data source.

Each Spark task writes its rows as parquet files inside the table (one per partition value set,
with :func:`delta_ops.table.writer.write_data_files`) and reports them; the driver commits every
task's files as one version through the commit layer (conflict detection, per-file statistics,
row ids where row tracking is on), or deletes them if the job failed::

    df.write.format("delta").mode("append").save("/warehouse/events")
    df.write.format("delta").mode("overwrite").option("partitionBy", "day").save(path)

Options: ``partitionBy`` (comma-separated, for a new table; an existing table keeps its own),
``mergeSchema`` (``true`` adds the DataFrame's new columns to the table's schema in the same
commit), ``replaceWhere`` (an overwrite replaces only the partitions the predicate selects),
``storage.*`` (the table's storage options), and ``delta.*`` table properties for a
new table.
:func:`delta_ops.spark.write_delta` is the function form of the same write.

Types: every Spark SQL type Delta has (see :mod:`delta_ops.spark.writer`); timestamps reach
the tasks as instants in the session time zone and are stored as UTC microseconds, so the
session's zone changes nothing in the table. Types without a Delta type are refused before
any task runs.

Failures: a task whose rows the table refuses (nulls in a NOT NULL column) deletes what it
wrote and reports the refusal instead of failing, so Spark neither retries it nor logs a
worker traceback; the driver then deletes every task's files and raises the refusal, which
reaches the caller as one line (:mod:`delta_ops.spark.worker_errors`). Any other task failure
fails the job as usual, and the job's abort deletes the files the finished tasks wrote.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from delta_ops.errors import DeltaOpsError, TaskFailed
from delta_ops.spark.options import write_options
from delta_ops.spark.writer import spark_schema_to_arrow
from delta_ops.storage import Storage
from delta_ops.table.write_target import resolve_write_target
from delta_ops.table.writer import (
    DataFile,
    commit_data_files,
    discard_uncommitted,
    write_data_files,
)

if TYPE_CHECKING:
    from pyspark.sql.types import StructType as SparkStructType


@dataclass
class WrittenFiles(WriterCommitMessage):
    """What one task wrote (not yet committed), or why it wrote nothing: `refused` is the
    one-line message of a DeltaOpsError that retrying cannot cure."""

    files: list[DataFile]
    refused: str | None = None


class DeltaWriter(DataSourceArrowWriter):
    """Writes in the tasks, commits (or cleans up) on the driver."""

    def __init__(self, options: dict[str, str], schema: SparkStructType, overwrite: bool) -> None:
        parsed = write_options(options)
        self.path = parsed.path
        self.storage_options = parsed.storage_options
        self.schema = spark_schema_to_arrow(schema, self.path)
        self.mode = "overwrite" if overwrite else "append"
        self.configuration = parsed.configuration
        # decided once, before any task writes a file: refusals, partitioning, column mapping
        self.target = resolve_write_target(
            self._storage(),
            self.schema,
            partition_by=parsed.partition_by,
            mode=self.mode,
            configuration=self.configuration or None,
            merge_schema=parsed.merge_schema,
            replace_where=parsed.replace_where,
        )

    def _storage(self) -> Storage:
        return Storage.open(self.path, self.storage_options or None)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WrittenFiles:
        from pyspark import TaskContext

        batches = list(iterator)
        if not batches:
            return WrittenFiles([])
        context = TaskContext.get()
        task = context.partitionId() if context is not None else 0
        data = pa.Table.from_batches(batches).cast(self.schema)
        try:
            # on failure, the files this task wrote so far are deleted before the error
            return WrittenFiles(write_data_files(self._storage(), data, self.target, task=task))
        except DeltaOpsError as exc:
            if exc.retryable:
                raise  # another attempt may succeed: Spark retries the task
            return WrittenFiles([], refused=str(exc))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        refused = [m.refused for m in messages if isinstance(m, WrittenFiles) and m.refused]
        if refused:
            self.abort(messages)
            raise TaskFailed(refused[0])
        files = [f for m in messages if isinstance(m, WrittenFiles) for f in m.files]
        commit_data_files(self._storage(), files, self.target)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Delete what the tasks wrote, unless the log references it (a commit whose
        response was lost did land)."""
        written = [
            f.relative_path for m in messages if isinstance(m, WrittenFiles) for f in m.files
        ]
        discard_uncommitted(self._storage(), written)


__all__ = ["DeltaWriter", "WrittenFiles"]
