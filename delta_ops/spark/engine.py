"""The Spark engine: an operation's listing and deletes run as Spark tasks on executors.

A front end builds `SparkEngine` when asked for ``--engine spark`` and hands it to the
plan; operations pass it their storage or their own functions and get back what the local engine
(`delta_ops.ops.engines`) would give, computed elsewhere:

* listing: the driver lists only the table root's own entries; each top-level directory (a
  partition, `_change_data`, ...) is walked by one task, which leaves out the protected paths
  (broadcast to the executors) and returns only the rest. The driver therefore receives the
  files that may be candidates, never the table's whole file list.
* deleting: the paths are spread over tasks that delete through the same storage layer (never
  outside the root, batch deletes and retries on object stores).
* mapping: the items are spread over tasks (`batch` items each) and every task applies the
  caller's function, broadcast once to the executors; results come back in the items' order.
  The row-tracking backfill reads footers this way, purge and compaction rewrite units (the
  driver commits every task's file, or deletes them all), a checkpoint writes its parts or
  sidecars (a streamed state is read by the tasks themselves, each only the row groups its
  share needs).

The session is the running one (`get_spark()` reuses it: a `PySparkResource`'s session in
Dagster, the pipeline's own in a script), so executors are wherever that session's are.
Executors open the table by its URL and storage options, so credentials must reach them the
way they reach the driver (instance roles, environment, or the storage options).
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from pyspark import cloudpickle

from delta_ops.errors import TaskFailed
from delta_ops.ops.engines import Spread
from delta_ops.spark.session import running_session
from delta_ops.spark.worker_errors import final_exception_line
from delta_ops.storage import Storage
from delta_ops.storage.tree import TreeListing

logger = logging.getLogger(__name__)

Item = TypeVar("Item")
Result = TypeVar("Result")

#: files per delete task
DELETE_BATCH = 1000

#: how long a failed job's other tasks are waited for before the caller cleans up after it
SETTLE_SECONDS = 300.0

#: the local properties a job group sets on the calling thread (restored after a map)
_JOB_GROUP_PROPERTIES = (
    "spark.jobGroup.id",
    "spark.job.description",
    "spark.job.interruptOnCancel",
)


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
        raise TaskFailed(f"a Spark task failed: {cause.group(1)}") from exc


def _wait_for_tasks(context: Any, group: str, timeout_s: float) -> None:
    """Wait until no stage of the job group's jobs has a task running, or `timeout_s` passed
    (logged: what those tasks write is left to vacuum)."""
    tracker = context.statusTracker()
    deadline = time.monotonic() + timeout_s
    while True:
        running = 0
        for job_id in tracker.getJobIdsForGroup(group):
            job = tracker.getJobInfo(job_id)
            for stage_id in job.stageIds if job is not None else ():
                stage = tracker.getStageInfo(stage_id)
                running += stage.numActiveTasks if stage is not None else 0
        if not running:
            return
        if time.monotonic() > deadline:
            logger.warning(
                "%d Spark task(s) of a failed job still running after %.0f s; what they write"
                " is not in the log, and vacuum removes it",
                running,
                timeout_s,
            )
            return
        time.sleep(0.05)


def _unpickled(shared: Any) -> Callable[[Any], Any]:
    """The function a broadcast holds, unpickled once per worker process: kept on the worker's
    own broadcast object, which lives as long as the broadcast does."""
    function: Callable[[Any], Any] | None = getattr(shared, "delta_ops_function", None)
    if function is None:
        function = cloudpickle.loads(shared.value)
        shared.delta_ops_function = function
    return function


class SparkEngine:
    """Lists, deletes and maps with Spark tasks (see the module doc)."""

    name = "spark"

    def _context(self) -> Any:
        """The running session's context (a PySparkResource's, the pipeline's, on whatever
        thread it was started; else a new session's)."""
        return running_session().sparkContext

    def _in_tasks(
        self,
        run_task: Callable[[Iterator[Any]], Iterator[Any]],
        items: Sequence[Any],
        slices: int,
    ) -> list[Any]:
        """`run_task` over `slices` tasks sharing `items` (in order); what the tasks yield.

        When a task fails, Spark fails the job at once, while its other tasks may still be
        running (and writing files a rewrite then has to find and delete): the failure is
        raised only once no task of the job group (the caller's, or one of its own for the
        map) runs, at most `SETTLE_SECONDS` later."""
        context = self._context()
        saved = {name: context.getLocalProperty(name) for name in _JOB_GROUP_PROPERTIES}
        # the caller's job group, if its thread has one (its jobs stay its own to watch and
        # cancel); else one of our own for this map
        group = saved["spark.jobGroup.id"] or f"delta-ops-{uuid.uuid4().hex}"
        if not saved["spark.jobGroup.id"]:
            context.setJobGroup(group, "delta-ops")
        try:
            rdd = context.parallelize(list(items), max(1, slices)).mapPartitions(run_task)
            try:
                return _collect(rdd)
            except BaseException:
                _wait_for_tasks(context, group, SETTLE_SECONDS)
                raise
        finally:
            for name, value in saved.items():
                context.setLocalProperty(name, value)

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
        context = self._context()
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

        rows = self._in_tasks(walk_subtree, top, min(len(top), context.defaultParallelism * 4))
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
        url, options = storage.location, storage.options

        def delete_batch(paths: Iterator[str]) -> Iterator[str]:
            batch = list(paths)
            if batch:
                yield from Storage.open(url, options or None).delete_many(batch)

        slices = -(-len(relative_paths) // DELETE_BATCH)
        deleted: list[str] = self._in_tasks(delete_batch, relative_paths, slices)
        if on_deleted is not None:
            on_deleted(deleted)
        return deleted

    def runs_here(self, spread: Spread) -> bool:
        return False

    def map_ordered(
        self,
        fn: Callable[[Item], Result],
        items: Sequence[Item],
        *,
        spread: Spread = Spread.SERIAL,
        batch: int = 1,
        on_done: Callable[[int, Result], object] | None = None,
        stop: Callable[[Result], bool] | None = None,
        meanwhile: Callable[[], object] | None = None,
    ) -> list[Result]:
        if meanwhile is not None:
            meanwhile()
        if not items:
            return []
        # once per executor, however big its closure; cloudpickle, as Spark ships closures
        shared = self._context().broadcast(cloudpickle.dumps(fn))  # type: ignore[no-untyped-call]

        def apply(batch_items: Iterator[tuple[int, Item]]) -> Iterator[tuple[int, Result]]:
            function = _unpickled(shared)
            for index, item in batch_items:
                yield index, function(item)

        try:
            done = dict(self._in_tasks(apply, list(enumerate(items)), -(-len(items) // batch)))
        finally:
            shared.unpersist()
        results = [done[i] for i in range(len(items))]
        for index, result in enumerate(results):
            if on_done is not None:
                on_done(index, result)
            if stop is not None and stop(result):
                return results[: index + 1]
        return results


__all__ = ["DELETE_BATCH", "SparkEngine"]
