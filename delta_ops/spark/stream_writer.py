"""`df.writeStream.format("delta")`: a Structured Streaming sink that commits each micro-batch
exactly once.

Each micro-batch is written as the batch writer writes (`delta_ops.spark.source_writer`):
Spark's tasks write the rows as data files inside the table and report them; then the driver
commits all of them as ONE version with a `txn` action (``appId`` = the query's id, ``version``
= the batch id) and the operation ``STREAMING UPDATE``, as Delta Spark's sink does:

    query = (
        events.writeStream.format("delta")
        .option("checkpointLocation", "/checkpoints/events")
        .start("/warehouse/events")
    )

Exactly once: a query restarted from its checkpoint location keeps its id and re-runs the
batches whose end Spark had not recorded. Before committing, the driver reads the table's
`txn` for the query (on the same snapshot the transaction commits after): a batch the table
has already recorded (the query died after our commit, before Spark's own commit log) is not
committed again, and the files its re-run wrote are deleted. A batch that died before its
commit left only unreferenced files (vacuum removes them after its in-flight grace); its re-run
commits it. A concurrent commit recording the same query (a second run of it) is a conflict.

The task side learns the query and batch ids from Spark's local properties, which Spark sets
for every job of a micro-batch; the writer's target (partitioning, column mapping, the new
table's protocol and metadata) is decided once when the query starts and travels with each
task's report, so the commit lays out every batch's files as its tasks did. A table changed
under a running query (re-partitioned, columns added by another writer) fails the next batch
in one line; restart the query.

Output modes: ``append``; ``complete`` replaces the table's live files with each batch's rows
in the same commit. Options as the batch writer's (``partitionBy``, ``mergeSchema``,
``storage.*``, ``delta.*``), except ``replaceWhere``, ``txnAppId`` and ``txnVersion``.
Needs PySpark 4.1 or later (its Arrow stream writer).

Failures: a task's refusal (nulls in a NOT NULL column) deletes every task's files and fails
the query with a one-line DeltaOpsError; a failed commit deletes the batch's files too.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamArrowWriter

from delta_ops.errors import InvalidValue, OperationRefused
from delta_ops.layout.clustering import write_order
from delta_ops.spark.options import write_options
from delta_ops.spark.source_writer import (
    WrittenFiles,
    files_of,
    raise_refusal,
    write_task_rows,
)
from delta_ops.spark.writer import spark_schema_to_arrow
from delta_ops.storage import Storage
from delta_ops.table.snapshot import Snapshot
from delta_ops.table.write_target import WriteTarget, resolve_write_target
from delta_ops.table.writer import (
    SetTransaction,
    commit_data_files,
    discard_uncommitted,
    latest_snapshot,
)

if TYPE_CHECKING:
    from pyspark.sql.types import StructType as SparkStructType

logger = logging.getLogger(__name__)

#: the local properties Spark sets for a micro-batch's jobs (StreamExecution.QUERY_ID_KEY,
#: MicroBatchExecution.BATCH_ID_KEY); the query id is kept in the checkpoint location
QUERY_ID_PROPERTY = "sql.streaming.queryId"
BATCH_ID_PROPERTY = "streaming.sql.batchId"
OPERATION = "STREAMING UPDATE"


@dataclass
class BatchFiles(WrittenFiles):
    """What one task of a micro-batch wrote, with the target it wrote for and the query's
    and batch's ids as the task saw them."""

    target: WriteTarget | None = None
    query_id: str | None = None
    batch_id: int | None = None


class DeltaStreamWriter(DataSourceStreamArrowWriter):
    """Writes each micro-batch in the tasks, commits it once on the driver.

    Spark builds one writer when the query starts (pickled to the tasks) and another for each
    batch's commit, both from the same options."""

    def __init__(self, options: dict[str, str], schema: SparkStructType, overwrite: bool) -> None:
        parsed = write_options(options)
        for name, given in (
            ("replaceWhere", parsed.replace_where is not None),
            ("txnAppId/txnVersion", parsed.app_transaction is not None),
        ):
            if given:
                raise InvalidValue(
                    f"option {name} is for batch writes; a streaming write records the query's"
                    " id and batch id itself"
                )
        self.path = parsed.path
        self.storage_options = parsed.storage_options
        self.schema = spark_schema_to_arrow(schema, self.path)
        self.mode = "overwrite" if overwrite else "append"
        storage = self._storage()
        snapshot = latest_snapshot(storage)
        self.target = resolve_write_target(
            storage,
            self.schema,
            partition_by=parsed.partition_by,
            mode=self.mode,
            configuration=parsed.configuration or None,
            snapshot=snapshot,
            merge_schema=parsed.merge_schema,
        )
        self._snapshot: Snapshot | None = snapshot  # the commit's starting point; not pickled
        # a clustered table's batches are written in its curve's order (each task's rows)
        self.order = write_order(snapshot) if snapshot is not None else None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_snapshot"] = None  # the tasks need no snapshot (it may be large)
        return state

    def _storage(self) -> Storage:
        return Storage.open(self.path, self.storage_options or None)

    # ------------------------------------------------------------------------ in the tasks
    def write(self, iterator: Iterator[pa.RecordBatch]) -> BatchFiles:
        from pyspark import TaskContext

        files, refused = write_task_rows(
            self._storage(), self.target, self.schema, iterator, self.order
        )
        context = TaskContext.get()
        query_id = context.getLocalProperty(QUERY_ID_PROPERTY) if context else None
        batch_id = context.getLocalProperty(BATCH_ID_PROPERTY) if context else None
        return BatchFiles(
            files,
            refused,
            target=self.target,
            query_id=query_id,
            batch_id=int(batch_id) if batch_id is not None else None,
        )

    # ------------------------------------------------------------------------ on the driver
    def commit(self, messages: list[Any], batchId: int) -> None:
        """Commit the batch's files as one version recording (query id, `batchId`), unless
        the table has recorded this batch already: then delete them."""
        storage = self._storage()
        raise_refusal(storage, messages)
        files = files_of(messages)
        query_id = self._query_id(messages, batchId)
        if query_id is None:
            return  # no task ran: the batch has no rows, and nothing to record
        paths = [f.relative_path for f in files]
        try:
            result = commit_data_files(
                storage,
                files,
                self._target_for(messages, batchId),
                known=self._snapshot,
                operation=OPERATION,
                operation_parameters={
                    "outputMode": "Complete" if self.mode == "overwrite" else "Append",
                    "queryId": query_id,
                    "epochId": str(batchId),
                },
                set_transaction=SetTransaction(query_id, batchId),
            )
        except BaseException:
            discard_uncommitted(storage, paths)
            raise
        if result.attempts == 0:
            logger.info(
                "%s: batch %d of query %s was committed before (the query restarted after"
                " committing it); deleting the %d files its re-run wrote",
                storage.url,
                batchId,
                query_id,
                len(paths),
            )
            discard_uncommitted(storage, paths)
        else:
            logger.info(
                "%s: batch %d of query %s committed as version %d (%d files)",
                storage.url,
                batchId,
                query_id,
                result.version,
                len(paths),
            )

    def abort(self, messages: list[Any], batchId: int) -> None:
        """Delete what the batch's tasks wrote, unless the log references it."""
        discard_uncommitted(self._storage(), [f.relative_path for f in files_of(messages)])

    def _query_id(self, messages: Sequence[Any], batch_id: int) -> str | None:
        """The query's id as the batch's tasks saw it (None when no task reported)."""
        reports = [m for m in messages if isinstance(m, BatchFiles)]
        ids = {m.query_id for m in reports}
        batches = {m.batch_id for m in reports}
        if not reports:
            return None
        if len(ids) != 1 or None in ids or batches != {batch_id}:
            raise OperationRefused(
                f"{self.path}: the tasks of streaming batch {batch_id} report queries"
                f" {sorted(map(str, ids))} and batches {sorted(map(str, batches))}; nothing"
                " was committed"
            )
        return ids.pop()

    def _target_for(self, messages: Sequence[Any], batch_id: int) -> WriteTarget:
        """The target the batch commits with: the one its tasks wrote for, when the table is
        still at the version it was decided on (or still absent); else the target decided
        now, if files written for the tasks' fit it (a table this query created, or a schema
        this query merged, since it started)."""
        written = next(
            (m.target for m in messages if isinstance(m, BatchFiles) and m.target is not None),
            None,
        )
        if written is None or written.version == self.target.version:
            return written or self.target
        if written.writes_files_like(self.target) and written.mode == self.target.mode:
            return self.target
        raise OperationRefused(
            f"{self.path} changed since the streaming query started (re-partitioned, or its"
            f" columns changed): batch {batch_id}'s files do not fit it; nothing was"
            " committed, restart the query"
        )


__all__ = [
    "BATCH_ID_PROPERTY",
    "OPERATION",
    "QUERY_ID_PROPERTY",
    "BatchFiles",
    "DeltaStreamWriter",
]
