"""The Spark engine: an operation's listing and deletes run as Spark tasks on executors.

`delta_ops.ops.engines.engine_named("spark")` loads :data:`ENGINE`; operations pass it their
storage and get back what the local engine would give, computed elsewhere:

* listing: the driver lists only the table root's own entries; each top-level directory (a
  partition, `_change_data`, ...) is walked by one task, which leaves out the protected paths
  (broadcast to the executors) and returns only the rest. The driver therefore receives the
  files that may be candidates, never the table's whole file list.
* deleting: the paths are spread over tasks that delete through the same storage layer (never
  outside the root, batch deletes and retries on object stores).
* counting rows: parquet footers are read by tasks, 200 files each (the row-tracking backfill
  of files whose stats lack `numRecords`).
* rewriting: each unit (a compaction bin, a file purge rewrites) is one task that reads its
  files and writes the new one; the driver commits every task's file, or deletes them all.
* checkpoints: each part (multi-part) or sidecar (V2) is one task writing it from its share of
  the state; a streamed state (a big table) is read by the tasks themselves, each only the
  row groups its share needs. The driver writes the V2 top-level file and the hint.

The session is the running one (`get_spark()` reuses it: a `PySparkResource`'s session in
Dagster, the pipeline's own in a script), so executors are wherever that session's are.
Executors open the table by its URL and storage options, so credentials must reach them the
way they reach the driver (instance roles, environment, or the storage options).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from delta_ops.errors import DeltaOpsError
from delta_ops.spark.worker_errors import final_exception_line
from delta_ops.storage import Storage
from delta_ops.storage.tree import TreeListing

if TYPE_CHECKING:
    from delta_ops.ops.checkpoint import CheckpointFile, CheckpointFileWriter
    from delta_ops.ops.rewrite import Rewriter, RewriteUnit, Rewritten

#: files per delete task
DELETE_BATCH = 1000
#: parquet footers per counting task
FOOTER_BATCH = 200


#: the last line of a failed task's Python traceback when it raised one of ours or an
#: operating-system error (a file, a store); anything else is a bug and keeps Spark's report
_TASK_ERROR = re.compile(
    r"^(?:delta_ops\.errors\.\w+|OSError|FileNotFoundError|PermissionError|TimeoutError"
    r"|ConnectionError): (.+)$",
    re.MULTILINE,
)


def _collect(rdd: Any) -> list[Any]:
    """`rdd.collect()`; a task that failed with a delta-ops error or an OSError (an unreadable
    file, a store that refused a request) fails the job as a DeltaOpsError with the task's
    message, one line, instead of Spark's report of the worker's traceback."""
    try:
        rows: list[Any] = rdd.collect()
        return rows
    except Exception as exc:
        if type(exc).__name__ not in ("PythonException", "Py4JJavaError"):
            raise
        cause = _TASK_ERROR.match(final_exception_line(str(exc)))
        if cause is None:
            raise
        raise DeltaOpsError(f"a Spark task failed: {cause.group(1)}") from exc


class SparkEngine:
    """Lists and deletes with Spark tasks (see the module doc)."""

    name = "spark"

    def _spark(self) -> Any:
        """The running session (a PySparkResource's, the pipeline's, on whatever thread it
        was started), else a new one."""
        from delta_ops.spark.session import running_session

        return running_session()

    def list_unprotected(
        self,
        storage: Storage,
        skip_name: Callable[[str], bool],
        protected: set[str],
        known_names: Sequence[str] = (),
    ) -> TreeListing:
        listing = storage.walk(skip_name, omit=protected, recursive=False)
        top = list(listing.dirs)  # the tasks' directories; their findings are appended
        if not top:
            return listing
        spark = self._spark()
        context = spark.sparkContext
        shared = context.broadcast(protected)
        url, options = storage.location, storage.options

        def walk_subtree(directories: Iterator[str]) -> Iterator[tuple[str, int, int, bool]]:
            task_storage = Storage.open(url, options or None)
            for directory in directories:
                found = task_storage.walk(
                    skip_name, omit=shared.value, under=directory, recursive=True
                )
                for path, size, mtime in zip(found.paths, found.sizes, found.mtimes):
                    yield path, size, mtime, False
                for d in found.dirs:
                    yield d, 0, 0, True

        rows = _collect(
            context.parallelize(
                top, max(1, min(len(top), context.defaultParallelism * 4))
            ).mapPartitions(walk_subtree)
        )
        shared.unpersist()
        for path, size, mtime, is_dir in rows:
            if is_dir:
                listing.dirs.append(path)
            else:
                listing.paths.append(path)
                listing.sizes.append(size)
                listing.mtimes.append(mtime)
        return listing

    def delete(
        self,
        storage: Storage,
        relative_paths: Sequence[str],
        on_deleted: Callable[[Sequence[str]], object] | None = None,
    ) -> list[str]:
        if not relative_paths:
            return []
        context = self._spark().sparkContext
        url, options = storage.location, storage.options

        def delete_batch(paths: Iterator[str]) -> Iterator[str]:
            batch = list(paths)
            if batch:
                yield from Storage.open(url, options or None).delete_many(batch)

        slices = max(1, -(-len(relative_paths) // DELETE_BATCH))
        deleted: list[str] = _collect(
            context.parallelize(list(relative_paths), slices).mapPartitions(delete_batch)
        )
        if on_deleted is not None:
            on_deleted(deleted)
        return deleted

    def count_rows(self, storage: Storage, paths: Sequence[str]) -> list[int]:
        if not paths:
            return []
        context = self._spark().sparkContext
        url, options = storage.location, storage.options

        def count(batch: Iterator[tuple[int, str]]) -> Iterator[tuple[int, int]]:
            from delta_ops.protocol.stats import num_records_from_parquet_file

            reader = Storage.open(url, options or None).reader
            for index, path in batch:
                yield index, num_records_from_parquet_file(reader, path)

        slices = max(1, -(-len(paths) // FOOTER_BATCH))
        counted = dict(
            _collect(context.parallelize(list(enumerate(paths)), slices).mapPartitions(count))
        )
        return [counted[i] for i in range(len(paths))]

    def rewrite(self, rewriter: Rewriter, units: Sequence[RewriteUnit]) -> list[Rewritten]:
        if not units:
            return []
        from delta_ops.ops.rewrite import write_unit

        context = self._spark().sparkContext

        def write_all(batch: Iterator[tuple[int, RewriteUnit]]) -> Iterator[tuple[int, Rewritten]]:
            for index, unit in batch:
                yield index, write_unit(rewriter, unit)

        done = dict(
            _collect(
                context.parallelize(list(enumerate(units)), len(units)).mapPartitions(write_all)
            )
        )
        return [done[i] for i in range(len(units))]

    def write_checkpoint_files(
        self, writer: CheckpointFileWriter, files: Sequence[CheckpointFile]
    ) -> list[tuple[bool, int]]:
        if len(files) < 2:  # one file: no parallelism to gain, no task to start
            return [writer.write(f) for f in files]
        context = self._spark().sparkContext
        shared = context.broadcast(writer)

        def write_all(
            batch: Iterator[tuple[int, CheckpointFile]],
        ) -> Iterator[tuple[int, tuple[bool, int]]]:
            for index, file in batch:
                yield index, shared.value.write(file)

        done = dict(
            _collect(
                context.parallelize(list(enumerate(files)), len(files)).mapPartitions(write_all)
            )
        )
        shared.unpersist()
        return [done[i] for i in range(len(files))]


ENGINE = SparkEngine()

__all__ = ["DELETE_BATCH", "ENGINE", "FOOTER_BATCH", "SparkEngine"]
