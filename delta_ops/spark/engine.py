"""The Spark engine: an operation's listing, deletes and maps run as Spark tasks on executors.

A front end builds `SparkEngine` when asked for ``--engine spark`` and hands it to the
plan; operations pass it their storage or their own functions and get back what the local engine
(`delta_ops.ops.engines`) would give, computed elsewhere:

* listing: the driver lists only the table root's own entries; each top-level directory (a
  partition, `_change_data`, ...) is walked by one task, which leaves out the protected paths
  and returns only the rest. The driver therefore receives the files that may be candidates,
  never the table's whole file list.
* deleting: the paths are spread over tasks that delete through the same storage layer (never
  outside the root, batch deletes and retries on object stores).
* mapping: the items are spread over tasks (`batch` items each) and every task applies the
  caller's function; results come back in the items' order. The row-tracking backfill reads
  footers this way, purge and compaction rewrite units (the driver commits every task's file,
  or deletes them all), a checkpoint writes its parts or sidecars.

Every job is built with the DataFrame API only: a DataFrame with one row per task, its share
of the work items (cloudpickled), hash-partitioned on a key chosen so that each share is a
task of its own (`partition_keys`), and run by ``mapInArrow`` with the task's function
(cloudpickled with the UDF, as Spark ships closures). No ``sparkContext``, no
RDD, so the same engine runs on a classic session and on a Spark Connect one (Databricks
serverless and shared clusters, ``sc://`` servers, ``spark.api.mode=connect``):

    engine = SparkEngine()                       # the running session, classic or Connect
    engine = SparkEngine(SparkSession.builder.remote("sc://host:15002").getOrCreate())

Failures: a task catches what the function raises and returns it as data, so a job whose
function failed still ends with every task finished (a rewrite then finds every file its tasks
wrote and deletes them); the driver raises the first failure, one line when it is one of ours
or an OSError. A job that fails for another reason (an executor lost more often than Spark
retries) is cancelled by its operation tag (``addTag`` / ``interruptTag``, in both modes); on a
classic session the failure is raised once no task of the job still runs (its job group), at
most `SETTLE_SECONDS` later. Spark Connect shows no task status to a client: what a task
of such a job writes after it was cancelled is never in the log, and vacuum removes it.

Executors open the table by its URL and storage options, so credentials reach them the way
they reach the driver (instance roles, environment, or the storage options, which travel
inside the task's pickled function, never in a plan's text).
"""

from __future__ import annotations

import logging
import re
import time
import traceback
import uuid
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, Self, TypeVar

import pyarrow as pa
from pyspark import cloudpickle

from delta_ops.errors import TaskFailed
from delta_ops.ops.engines import Spread
from delta_ops.spark.session import running_session
from delta_ops.spark.worker_errors import final_exception_line
from delta_ops.spark.workers import is_connect
from delta_ops.storage import Storage
from delta_ops.storage.tree import TreeListing

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

logger = logging.getLogger(__name__)

Item = TypeVar("Item")
Result = TypeVar("Result")

#: files per delete task
DELETE_BATCH = 1000

#: how long a failed job's other tasks are waited for (classic sessions) before the caller
#: cleans up after it
SETTLE_SECONDS = 300.0

#: the rows a task returns: its results (one pickled list), or the report of what it raised
_TASK_OUTPUT = "results binary, failure string"
_OUTPUT_SCHEMA = pa.schema([("results", pa.binary()), ("failure", pa.string())])

#: the local properties a job group sets on the calling thread (restored after a map)
_JOB_GROUP_PROPERTIES = (
    "spark.jobGroup.id",
    "spark.job.description",
    "spark.job.interruptOnCancel",
)


#: the last line of a failed task's Python traceback when it raised one of ours or an
#: operating-system error (a file, a store); anything else is a bug and keeps the whole report
_TASK_ERROR = re.compile(
    r"^(?:delta_ops\.errors\.\w+|OSError|FileNotFoundError|PermissionError|TimeoutError"
    r"|ConnectionError): (.+)$",
    re.MULTILINE,
)


def _one_line(report: str) -> TaskFailed | None:
    """A task's failure as a one-line error when the exception it died of is one of ours or an
    OSError (an unreadable file, a store that refused a request); None for anything else."""
    cause = _TASK_ERROR.match(final_exception_line(report))
    return None if cause is None else TaskFailed(f"a Spark task failed: {cause.group(1)}")


def _collect(frame: Any) -> list[Any]:
    """`frame.collect()`; a job that failed because a task's Python worker died of one of our
    errors or an OSError fails as a DeltaOpsError with the task's message, one line, instead of
    Spark's report of the worker's traceback."""
    try:
        rows: list[Any] = frame.collect()
        return rows
    except Exception as exc:
        if type(exc).__name__ not in ("PythonException", "Py4JJavaError", "SparkException"):
            raise
        error = _one_line(str(exc))
        if error is None:
            raise
        raise error from exc


_C1, _C2, _MASK = 0xCC9E2D51, 0x1B873593, 0xFFFFFFFF


def _rotl(value: int, bits: int) -> int:
    return ((value << bits) | (value >> (32 - bits))) & _MASK


def spark_hash_int(value: int) -> int:
    """Spark's ``hash()`` of an int (Murmur3 x86 32-bit, seed 42), signed: what hash
    partitioning takes modulo the number of partitions."""
    k1 = _rotl((value & _MASK) * _C1 & _MASK, 15) * _C2 & _MASK
    h1 = _rotl(42 ^ k1, 13)
    h1 = (h1 * 5 + 0xE6546B64) & _MASK
    h1 ^= 4
    h1 ^= h1 >> 16
    h1 = h1 * 0x85EBCA6B & _MASK
    h1 ^= h1 >> 13
    h1 = h1 * 0xC2B2AE35 & _MASK
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 & 0x80000000 else h1


def partition_keys(slices: int) -> list[int]:
    """For each partition 0..slices-1, an int that Spark's hash partitioning into `slices`
    partitions sends there (``repartition(slices, key)``): exactly one share per task,
    whatever partitions the items' DataFrame started in."""
    keys: list[int | None] = [None] * slices
    missing, candidate = slices, 0
    while missing:
        partition = spark_hash_int(candidate) % slices  # Spark's pmod
        if keys[partition] is None:
            keys[partition] = candidate
            missing -= 1
        candidate += 1
    return [k for k in keys if k is not None]


def _pickled(value: object) -> bytes:
    """`value` pickled as Spark ships closures (cloudpickle: lambdas and local functions too)."""
    data: bytes = cloudpickle.dumps(value)  # type: ignore[no-untyped-call]
    return data


def _run_task(task: bytes, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """One Spark task (`mapInArrow`): the pickled `task` over this partition's items; one row
    with the pickled results, or with the report of what the task raised (so that the job
    still ends with every task finished: see the module doc)."""
    items = [
        i for b in batches for v in b.column("items").to_pylist() for i in cloudpickle.loads(v)
    ]
    try:
        results = cloudpickle.loads(task)(items)
        row: dict[str, list[Any]] = {"results": [_pickled(results)], "failure": [None]}
    except Exception:  # noqa: BLE001 - the driver raises it once every task has ended
        row = {"results": [None], "failure": [traceback.format_exc()]}
    yield pa.RecordBatch.from_pydict(row, schema=_OUTPUT_SCHEMA)


def _raise_first_failure(failures: Sequence[str]) -> None:
    """Raise what the first failed task raised: one line when it is one of ours or an OSError,
    else (a bug) with the task's whole traceback."""
    if not failures:
        return
    error = _one_line(failures[0])
    if error is not None:
        raise error
    raise TaskFailed(f"a Spark task failed:\n{failures[0]}")


def _wait_for_tasks(session: SparkSession, group: str, timeout_s: float) -> None:
    """Wait until no stage of the job group's jobs has a task running, or `timeout_s` passed
    (logged: what those tasks write is left to vacuum). Classic sessions only: a Spark
    Connect client sees no task status."""
    tracker = session.sparkContext.statusTracker()
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


class _JobGroup:
    """On a classic session, the caller's job group if its thread has one, else one of our
    own for the job (restored afterwards): what `_wait_for_tasks` watches."""

    def __init__(self, session: SparkSession) -> None:
        self.context: Any = None if is_connect(session) else session.sparkContext
        self.saved: dict[str, str | None] = {}
        self.group = ""

    def __enter__(self) -> Self:
        if self.context is not None:
            get = self.context.getLocalProperty
            self.saved = {name: get(name) for name in _JOB_GROUP_PROPERTIES}
            self.group = self.saved["spark.jobGroup.id"] or f"delta-ops-{uuid.uuid4().hex}"
            if not self.saved["spark.jobGroup.id"]:
                self.context.setJobGroup(self.group, "delta-ops")
        return self

    def __exit__(self, *exc: object) -> None:
        if self.context is not None:
            for name, value in self.saved.items():
                self.context.setLocalProperty(name, value)


class SparkEngine:
    """Lists, deletes and maps with Spark tasks (see the module doc).

    Args:
        session: the session to run on (classic or Spark Connect); by default the running
            one when a job starts (`delta_ops.spark.session.running_session`).
    """

    name = "spark"

    def __init__(self, session: SparkSession | None = None) -> None:
        self._session = session
        self._running: dict[str, SparkSession] = {}  # the tags of the jobs running now

    def cancel(self) -> None:
        """Cancel the jobs this engine runs now (from any thread: an orchestrator's kill), by
        their operation tags; the maps they serve then fail."""
        for tag, session in list(self._running.items()):
            session.interruptTag(tag)

    def session(self) -> SparkSession:
        """The session this engine's jobs run on."""
        return self._session if self._session is not None else running_session()

    def _in_tasks(
        self, task: Callable[[list[Any]], list[Any]], items: Sequence[Any], slices: int
    ) -> tuple[list[Any], list[str]]:
        """`task` over `slices` Spark tasks sharing `items`: the concatenation of what the
        tasks that succeeded returned (in no particular order across tasks), and the reports
        of those that raised.

        The job carries an operation tag of its own: when it fails or is interrupted, whatever
        of it still runs is cancelled by that tag (see the module doc)."""
        session = self.session()
        slices = max(1, min(slices, len(items)))
        keys = partition_keys(slices)
        shares = [
            items[s * len(items) // slices : (s + 1) * len(items) // slices] for s in range(slices)
        ]
        frame = session.createDataFrame(
            [(keys[s], _pickled(list(share))) for s, share in enumerate(shares)],
            "key int, items binary",
        )
        # one row per task: hash partitioning by `key` puts share s in partition s
        frame = frame.repartition(slices, "key") if slices > 1 else frame.coalesce(1)
        run = partial(_run_task, _pickled(task))
        tag = f"delta-ops-{uuid.uuid4().hex}"
        session.addTag(tag)
        self._running[tag] = session
        try:
            with _JobGroup(session) as group:
                try:
                    rows = _collect(frame.mapInArrow(run, _TASK_OUTPUT))
                except BaseException:
                    session.interruptTag(tag)
                    if group.context is not None:
                        _wait_for_tasks(session, group.group, SETTLE_SECONDS)
                    raise
        finally:
            self._running.pop(tag, None)
            session.removeTag(tag)
        results = [r for row in rows if row.failure is None for r in cloudpickle.loads(row.results)]
        return results, [row.failure for row in rows if row.failure is not None]

    def _parallelism(self) -> int:
        """How many tasks the session runs at once (a listing's number of tasks is a few
        times this)."""
        session = self.session()
        if not is_connect(session):
            return int(session.sparkContext.defaultParallelism)
        return int(session.conf.get("spark.default.parallelism", None) or 8)

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
        url, options = storage.location, storage.options
        # each task gets the protected paths of its own directories only
        by_top: dict[str, set[str]] = {d: set() for d in top}
        for path in protected:
            head = path.split("/", 1)[0]
            if head in by_top:
                by_top[head].add(path)

        def walk_subtrees(
            directories: list[tuple[str, set[str]]],
        ) -> list[tuple[str, int, int, bool]]:
            task_storage = Storage.open(url, options or None)
            found_rows: list[tuple[str, int, int, bool]] = []
            for directory, omit in directories:
                found = task_storage.walk(skip_name, omit=omit, under=directory, recursive=True)
                found_rows.extend(
                    (path, size, mtime, False)
                    for path, size, mtime in zip(found.paths, found.sizes, found.mtimes)
                )
                found_rows.extend((d, 0, 0, True) for d in found.dirs)
            return found_rows

        work = [(d, by_top[d]) for d in top]
        rows, failures = self._in_tasks(walk_subtrees, work, min(len(top), self._parallelism() * 4))
        _raise_first_failure(failures)
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

        def delete_batch(batch: list[str]) -> list[str]:
            return list(Storage.open(url, options or None).delete_many(batch)) if batch else []

        slices = -(-len(relative_paths) // DELETE_BATCH)
        deleted, failures = self._in_tasks(delete_batch, relative_paths, slices)
        if on_deleted is not None:
            on_deleted(deleted)  # before a failure is raised: what is gone, is gone
        _raise_first_failure(failures)
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

        def apply(indexed: list[tuple[int, Item]]) -> list[tuple[int, Result]]:
            return [(index, fn(item)) for index, item in indexed]

        slices = -(-len(items) // batch)
        received, failures = self._in_tasks(apply, list(enumerate(items)), slices)
        if failures:
            if on_done is not None:  # so that the caller can undo what finished
                for index, result in received:
                    on_done(index, result)
            _raise_first_failure(failures)
        done = dict(received)
        results = [done[i] for i in range(len(items))]
        for index, result in enumerate(results):
            if on_done is not None:
                on_done(index, result)
            if stop is not None and stop(result):
                return results[: index + 1]
        return results


__all__ = ["DELETE_BATCH", "SparkEngine", "partition_keys", "spark_hash_int"]
