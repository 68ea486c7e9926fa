"""`df.write.format("delta")`: the write half of the `delta` Python data source.

Each Spark task writes its rows as parquet files inside the table (one per partition value set,
with `delta_ops.table.writer.write_data_files`) and reports them; the driver commits every
task's files as one version through the commit layer (conflict detection, per-file statistics,
row ids where row tracking is on), or deletes them if the job failed:

    df.write.format("delta").mode("append").save("/warehouse/events")
    df.write.format("delta").mode("overwrite").option("partitionBy", "day").save(path)

Options: ``partitionBy`` (comma-separated, for a new table; an existing table keeps its own),
``mergeSchema`` (``true`` adds the DataFrame's new columns to the table's schema in the same
commit), ``replaceWhere`` (an overwrite replaces only the partitions the predicate selects),
``txnAppId`` with ``txnVersion`` (Delta's idempotent writes: the write is skipped, its files
deleted, when the table has recorded that version or a later one for that application, and
the commit records it otherwise, as a ``txn`` action), ``storage.*`` (the table's storage
options), and ``delta.*`` table properties for a new table.
`delta_ops.spark.write_delta` is the function form of the same write.

Types: every Spark SQL type Delta has (see `delta_ops.spark.writer`); timestamps reach
the tasks as instants in the session time zone and are stored as UTC microseconds, so the
session's zone changes nothing in the table. Types without a Delta type are refused before
any task runs.

Failures: a task whose rows the table refuses (nulls in a NOT NULL column) deletes what it
wrote and reports the refusal instead of failing, so Spark neither retries it nor logs a
worker traceback; the driver then deletes every task's files and raises the refusal, which
reaches the caller as one line (`delta_ops.spark.worker_errors`). Any other task failure
fails the job as usual, and the job's abort deletes the files the finished tasks wrote.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from delta_ops.errors import DeltaOpsError, TaskFailed
from delta_ops.layout.write_order import WriteOrder
from delta_ops.spark.options import write_options
from delta_ops.spark.writer import spark_schema_to_arrow
from delta_ops.storage import Storage
from delta_ops.table.write_target import WriteTarget, resolve_write_target
from delta_ops.table.writer import (
    DataFile,
    SetTransaction,
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


def task_partition_id() -> int:
    """The running Spark task's partition id (0 outside a task): it numbers the file names."""
    from pyspark import TaskContext

    context = TaskContext.get()
    return context.partitionId() if context is not None else 0


def write_task_rows(
    storage: Storage,
    target: WriteTarget,
    schema: pa.Schema,
    batches: Iterator[pa.RecordBatch],
    order: WriteOrder | None = None,
) -> tuple[list[DataFile], str | None]:
    """A task's share of the rows written as data files for `target` (not yet committed),
    and the refusal that stopped it, if any; on a clustered table (`order`) the rows go in
    the order of its curve. A refusal retrying cannot cure (nulls in a NOT NULL column) is
    returned, not raised, so Spark neither retries the task nor logs a worker traceback; the
    files written before it are deleted already."""
    rows = list(batches)
    if not rows:
        return [], None
    data = pa.Table.from_batches(rows).cast(schema)
    if order is not None:
        data = order.sort(data)
    try:
        return write_data_files(storage, data, target, task=task_partition_id()), None
    except DeltaOpsError as exc:
        if exc.retryable:
            raise  # another attempt may succeed: Spark retries the task
        return [], str(exc)


def files_of(messages: Sequence[Any]) -> list[DataFile]:
    """Every file the tasks' messages report."""
    return [f for m in messages if isinstance(m, WrittenFiles) for f in m.files]


def raise_refusal(storage: Storage, messages: Sequence[Any]) -> None:
    """When a task reported a refusal: delete every task's files, then raise it in one line."""
    refused = [m.refused for m in messages if isinstance(m, WrittenFiles) and m.refused]
    if refused:
        discard_uncommitted(storage, [f.relative_path for f in files_of(messages)])
        raise TaskFailed(refused[0])


class DeltaWriter(DataSourceArrowWriter):
    """Writes in the tasks, commits (or cleans up) on the driver."""

    def __init__(self, options: dict[str, str], schema: SparkStructType, overwrite: bool) -> None:
        parsed = write_options(options)
        self.path = parsed.path
        self.storage_options = parsed.storage_options
        self.schema = spark_schema_to_arrow(schema, self.path)
        self.mode = "overwrite" if overwrite else "append"
        self.configuration = parsed.configuration
        self.set_transaction = (
            SetTransaction(*parsed.app_transaction) if parsed.app_transaction else None
        )
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
        return WrittenFiles(*write_task_rows(self._storage(), self.target, self.schema, iterator))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        storage = self._storage()
        raise_refusal(storage, messages)
        files = files_of(messages)
        result = commit_data_files(
            storage, files, self.target, set_transaction=self.set_transaction
        )
        if result.attempts == 0:  # txnAppId's txnVersion was committed before: skipped
            discard_uncommitted(storage, [f.relative_path for f in files])

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Delete what the tasks wrote, unless the log references it (a commit whose
        response was lost did land)."""
        discard_uncommitted(self._storage(), [f.relative_path for f in files_of(messages)])


__all__ = [
    "DeltaWriter",
    "WrittenFiles",
    "files_of",
    "raise_refusal",
    "task_partition_id",
    "write_task_rows",
]
