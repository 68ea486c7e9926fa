"""Where an operation's heavy I/O runs: here (threads), or on Spark's executors.

An engine does the two things that grow with a table's file count and that an operation
cannot do from the log alone: list the table's data area (leaving out the files the caller
protects) and delete many files. Plans and results are the same whichever engine did the I/O;
only who lists and who deletes changes.

An engine also reads parquet footers in bulk (row counts for the row-tracking backfill),
rewrites files (purge and compaction: each unit of files becomes one new file; the driver
commits them all) and writes the parquet files of a checkpoint (each part or V2 sidecar from
its own share of the state; the driver writes the V2 top-level file and `_last_checkpoint`).

* ``local`` (:data:`LOCAL`): the storage layer's own walk and parallel deletes, footers read
  by a thread pool.
* ``spark``: the listing and the deletes run as Spark tasks, one per top-level directory or
  batch of files (`delta_ops.spark.engine`, loaded on first use like a plugin, because Spark
  is a front end above this layer and an optional extra). The driver never holds the whole
  file list: tasks return only the files the caller did not protect.

    engine = engine_named("spark")
    listing = engine.list_unprotected(storage, ("day",), protected)
    deleted = engine.delete(storage, ["day=1/part-0.parquet"])
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Protocol

from delta_ops.errors import InvalidValue
from delta_ops.storage import Storage
from delta_ops.storage.tree import TreeListing

if TYPE_CHECKING:
    from delta_ops.ops.checkpoint import CheckpointFile, CheckpointFileWriter
    from delta_ops.ops.rewrite import Rewriter, RewriteUnit, Rewritten

#: engines that live in a front-end package, by name: module whose `ENGINE` is the engine
_PLUGINS = {"spark": "delta_ops.spark.engine"}
ENGINE_NAMES = ("local", *_PLUGINS)
FOOTER_THREADS = 8  # parquet footers read at once by the local engine


class Engine(Protocol):
    """Runs the listing and deleting an operation needs."""

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

    def count_rows(self, storage: Storage, paths: Sequence[str]) -> list[int]:
        """Rows of each parquet file (storage paths, as `Storage.table_path` gives them),
        from its footer, in order."""
        ...

    def rewrite(self, rewriter: Rewriter, units: Sequence[RewriteUnit]) -> list[Rewritten]:
        """Each unit's files rewritten into one new file (purge, compaction), in order;
        `rewriter` is portable (`Rewriter.portable()`)."""
        ...

    def write_checkpoint_files(
        self, writer: CheckpointFileWriter, files: Sequence[CheckpointFile]
    ) -> list[tuple[bool, int]]:
        """(created, size) of each checkpoint file written, in order; a file another writer
        created first is (False, its size), and the files after it may be left unwritten
        (the list is then shorter)."""
        ...


class LocalEngine:
    """This process: the storage layer's walk (which does not even stat protected files)
    and its parallel deletes."""

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

    def count_rows(self, storage: Storage, paths: Sequence[str]) -> list[int]:
        from delta_ops.protocol.stats import num_records_from_parquet_file

        if len(paths) < 2:
            return [num_records_from_parquet_file(storage.reader, p) for p in paths]
        with ThreadPoolExecutor(FOOTER_THREADS) as pool:  # footer reads wait on I/O
            return list(pool.map(lambda p: num_records_from_parquet_file(storage.reader, p), paths))

    def rewrite(self, rewriter: Rewriter, units: Sequence[RewriteUnit]) -> list[Rewritten]:
        from delta_ops.ops.rewrite import write_unit

        return [write_unit(rewriter, unit) for unit in units]

    def write_checkpoint_files(
        self, writer: CheckpointFileWriter, files: Sequence[CheckpointFile]
    ) -> list[tuple[bool, int]]:
        outcomes = []
        for file in files:
            outcomes.append(writer.write(file))
            if not outcomes[-1][0]:
                break  # another checkpoint won: the rest would be wasted work
        return outcomes


LOCAL = LocalEngine()


def engine_named(name: str) -> Engine:
    """The engine called `name` (``local`` or ``spark``)."""
    if name == "local":
        return LOCAL
    module = _PLUGINS.get(name)
    if module is None:
        raise InvalidValue(f"--engine: {name!r} is not one of {', '.join(ENGINE_NAMES)}")
    engine: Engine = importlib.import_module(module).ENGINE
    return engine


__all__ = ["ENGINE_NAMES", "LOCAL", "Engine", "LocalEngine", "engine_named"]
