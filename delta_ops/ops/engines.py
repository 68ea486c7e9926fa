"""Where an operation's heavy work runs: in this process, or on Spark's executors.

An engine is a generic executor and knows nothing of operations. It does three things whose
cost grows with a table's file count:

* list the table's data area, leaving out the files the caller protects (vacuum);
* delete many files (vacuum);
* map a function over items, results in the items' order (`Engine.map_ordered`):
  operations pass their own function in, such as reading a parquet footer (the row-tracking
  backfill), rewriting a unit of files (purge, compaction) or writing one checkpoint part.

Plans and results are the same whichever engine did the work; only who does it changes. A
front end builds the engine and hands it to the plan (the CLI's ``--engine``, the Dagster
resource's ``engine``); plans hold it and report its `Engine.name`.

* `LOCAL` (`LocalEngine`): the storage layer's own walk and parallel deletes;
  maps run one item after another, on a thread pool (items that wait on storage) or on forked
  worker processes (items bound by CPU), as the caller's `Spread` asks.
* ``delta_ops.spark.engine.SparkEngine``: the same three as Spark tasks on executors.

For example:

    engine = LocalEngine()
    sizes = engine.map_ordered(len, ["a", "bb"], spread=Spread.THREADS)   # [1, 2]
    listing = engine.list_unprotected(storage, skip_name, protected)
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor, as_completed
from enum import Enum
from typing import Any, Protocol, TypeVar

from delta_ops.errors import DeltaOpsError, TaskFailed
from delta_ops.storage import Storage
from delta_ops.storage.tree import TreeListing

Item = TypeVar("Item")
Result = TypeVar("Result")

#: the engines a front end can build, by name
ENGINE_NAMES = ("local", "spark")
THREADS = 8  # items mapped at once by the local engine's thread pool


class Spread(Enum):
    """How the local engine runs a map (Spark always runs it as tasks)."""

    SERIAL = "serial"  # one item after another in this process
    THREADS = "threads"  # a thread pool: items that mostly wait on storage
    PROCESSES = "processes"  # forked worker processes, one per core: items bound by CPU


class Engine(Protocol):
    """Runs the listing, deleting and mapping an operation needs."""

    name: str

    def list_unprotected(
        self,
        storage: Storage,
        skip_name: Callable[[str], bool],
        protected: set[str],
        known_names: Sequence[str] = (),
    ) -> TreeListing:
        """Files under the root that are not in `protected` (table-relative paths), with
        their sizes and modification times, and every directory; names `skip_name` accepts
        are pruned at any level."""
        ...

    def delete(
        self,
        storage: Storage,
        relative_paths: Sequence[str],
        on_deleted: Callable[[Sequence[str]], object] | None = None,
    ) -> list[str]:
        """Delete table-relative files (never outside the root); the ones deleted or gone."""
        ...

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
        """`fn` of every item, in the items' order.

        Args:
            fn: what to do with one item; it may run in another process, so it must pickle
                (a module function, a `functools.partial`, a picklable object's method).
            spread: how the local engine runs the items.
            batch: items per task, where tasks are scheduled (Spark).
            on_done: called in this process with (index, result) as results arrive, in any
                order; every result this process received is reported before a failure is
                raised, so the caller can undo what finished.
            stop: a result for which it is true ends the map early: the items after it may be
                left undone, and the list returned is then the prefix up to that result.
            meanwhile: runs in this process while the items are mapped elsewhere (before the
                mapping, when they are mapped here).
        """
        ...

    def runs_here(self, spread: Spread) -> bool:
        """Whether `map_ordered` with `spread` runs `fn` in this process (so `fn` may
        report progress or record what it wrote)."""
        ...


class LocalEngine:
    """This process: the storage layer's walk (which does not even stat protected files), its
    parallel deletes, and maps on this process, a thread pool or forked workers."""

    name = "local"

    def list_unprotected(
        self,
        storage: Storage,
        skip_name: Callable[[str], bool],
        protected: set[str],
        known_names: Sequence[str] = (),
    ) -> TreeListing:
        return storage.walk(skip_name, known_names, omit=protected)

    def delete(
        self,
        storage: Storage,
        relative_paths: Sequence[str],
        on_deleted: Callable[[Sequence[str]], object] | None = None,
    ) -> list[str]:
        return storage.delete_many(relative_paths, on_deleted)

    def runs_here(self, spread: Spread) -> bool:
        return spread is not Spread.PROCESSES or not _can_fork()

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
        threads: int = THREADS,
    ) -> list[Result]:
        """As :meth:`Engine.map_ordered`; `threads` items at once with ``Spread.THREADS``."""
        if spread is Spread.SERIAL or len(items) < 2:
            if meanwhile is not None:
                meanwhile()
            return _serial(fn, items, on_done, stop)
        if spread is Spread.PROCESSES and _can_fork():
            return _in_processes(fn, items, on_done, meanwhile)
        if meanwhile is not None:
            meanwhile()
        with ThreadPoolExecutor(threads) as pool:
            return _pooled([pool.submit(fn, item) for item in items], on_done, stop)


LOCAL = LocalEngine()


def _serial(
    fn: Callable[[Item], Result],
    items: Sequence[Item],
    on_done: Callable[[int, Result], object] | None,
    stop: Callable[[Result], bool] | None,
) -> list[Result]:
    results: list[Result] = []
    for index, item in enumerate(items):
        results.append(fn(item))
        if on_done is not None:
            on_done(index, results[-1])
        if stop is not None and stop(results[-1]):
            break  # the caller needs nothing after this one: the rest would be wasted work
    return results


def _pooled(
    futures: list[Future[Any]],
    on_done: Callable[[int, Any], object] | None,
    stop: Callable[[Any], bool] | None,
) -> list[Any]:
    """The futures' results in order, each reported as it arrives; the first failure is raised
    once every future has finished."""
    index_of = {future: index for index, future in enumerate(futures)}
    results: list[Any] = [None] * len(futures)
    failure: BaseException | None = None
    for future in as_completed(futures):
        index = index_of[future]
        try:
            results[index] = future.result()
        except BaseException as exc:  # noqa: BLE001 - raised once every item is done
            failure = failure or exc
            continue
        if on_done is not None:
            on_done(index, results[index])
    if failure is not None:
        if isinstance(failure, (DeltaOpsError, KeyboardInterrupt, OSError)):
            raise failure
        raise TaskFailed(f"a worker failed: {failure}") from failure
    return _up_to_stop(results, stop)


def _up_to_stop(results: list[Any], stop: Callable[[Any], bool] | None) -> list[Any]:
    if stop is None:
        return results
    for index, result in enumerate(results):
        if stop(result):
            return results[: index + 1]
    return results


def _can_fork() -> bool:
    # asked only of a map that would fork: multiprocessing (6 ms of start-up) loads with it
    import multiprocessing

    return "fork" in multiprocessing.get_all_start_methods()


#: what forked workers map: set before the pool forks them, so they inherit it instead of
#: receiving it pickled
_FORKED_WORK: tuple[Callable[[Any], Any], Sequence[Any]] | None = None


def _map_in_worker(index: int) -> Any:
    assert _FORKED_WORK is not None, "a map worker runs only in a forked process"
    fn, items = _FORKED_WORK
    return fn(items[index])


#: threads waiting for the workers of a finished forked map to exit (see `_retire`)
_RETIRING: set[threading.Thread] = set()
_RETIRING_LOCK = threading.Lock()


def _retire(pool: Executor) -> None:
    """Let `pool`'s workers exit while the caller goes on (tearing down a forked copy of this
    process took ~7 ms, after a compaction's map and before its commit), on a thread that
    waits for them: the process does not end before they are gone.

    The pool must be shut down *with* waiting by someone before the process ends: its manager
    thread sends each worker its stop sentinel through the call queue's feeder thread, and
    multiprocessing's exit handler closes that feeder and then joins the workers. A pool shut
    down without waiting lost that race when the process ended by ``atexit`` handlers and
    ``os._exit`` (the CLI): the workers never got their sentinel and the exit handler joined
    them for ever (`delta-ops plan` printed its answer and hung). The waiting thread is
    non-daemonic, so the interpreter's normal exit joins it, and `_join_retiring` joins
    it from ``atexit`` (registered after multiprocessing's handler, so it runs first).
    """
    thread = threading.Thread(
        target=_shut_down_and_forget, args=(pool,), name="delta-ops-retire-workers"
    )
    with _RETIRING_LOCK:
        _RETIRING.add(thread)
    thread.start()


def _shut_down_and_forget(pool: Executor) -> None:
    try:
        pool.shutdown(wait=True)
    finally:
        with _RETIRING_LOCK:
            _RETIRING.discard(threading.current_thread())


def _join_retiring() -> None:
    """Wait until every finished map's workers have exited (an ``atexit`` handler)."""
    with _RETIRING_LOCK:
        threads = list(_RETIRING)
    for thread in threads:
        thread.join()


@functools.cache
def _join_retiring_at_exit() -> None:
    """Register `_join_retiring` with ``atexit`` once (the cache), after multiprocessing
    (imported by then) registered its own exit handler: handlers run last-registered first."""
    import atexit

    atexit.register(_join_retiring)


def _in_processes(
    fn: Callable[[Item], Result],
    items: Sequence[Item],
    on_done: Callable[[int, Result], object] | None,
    meanwhile: Callable[[], object] | None,
) -> list[Result]:
    """`fn` of every item in forked worker processes (one per core); `meanwhile` runs here
    while they work, and its failure is raised once they are done."""
    # start-up cost: the process pool (multiprocessing's connections, queues, subprocess)
    # loads only for a map that forks
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    _join_retiring_at_exit()
    global _FORKED_WORK
    context = multiprocessing.get_context("fork")
    interrupted: BaseException | None = None
    _FORKED_WORK = (fn, items)
    finished = False
    try:
        workers = min(len(items), multiprocessing.cpu_count())
        pool = ProcessPoolExecutor(max_workers=workers, mp_context=context)
        try:
            # every worker forks at the first submit (a forking pool never forks later)
            futures = [pool.submit(_map_in_worker, i) for i in range(len(items))]
            _FORKED_WORK = None
            if meanwhile is not None:
                try:
                    meanwhile()
                except BaseException as exc:  # noqa: BLE001 - raised once the workers are done
                    interrupted = exc
            try:
                results = _pooled(futures, on_done, None)
            except BaseException:
                if interrupted is not None:
                    raise interrupted from None
                raise
            finished = True
        finally:
            # every item's result is in: the workers have nothing left to do but exit, which
            # the caller does not wait for (`_retire`); after a failure they are waited
            # for here, so that nothing still runs while the caller cleans up
            if finished:
                _retire(pool)
            else:
                pool.shutdown(wait=True)
    finally:
        _FORKED_WORK = None
    if interrupted is not None:
        raise interrupted
    return results


__all__ = ["ENGINE_NAMES", "LOCAL", "THREADS", "Engine", "LocalEngine", "Spread"]
