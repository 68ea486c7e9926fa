"""A `delta` streaming sink whose driver dies at a chosen point of one batch's commit, or
pauses before each commit (tests).

:class:`FaultyDeltaSource` is the `delta` data source under the name ``delta_faulty``; its
stream writer is delta-ops' own, except that:

* with the option ``pauseBeforeCommit`` = seconds, each batch's commit waits that long before it
  begins (its files sit in the table uncommitted meanwhile, as in a slow driver);
* with the option ``dieAt`` = ``"N:point"``, the process committing batch N ends itself with
  ``os._exit`` (no ``finally``, no cleanup: a killed process) at one of :data:`POINTS`:

* ``written``: the tasks wrote the batch's files; the commit has not begun;
* ``put``: the Delta commit is about to be put (``N.json`` not written);
* ``landed``: the Delta commit's file was put, and the process dies before it learns so;
* ``committed``: the Delta commit returned; Spark has not recorded the batch in its own commit
  log.

Spark ships data source classes to its Python workers by pickling them; :func:`register` makes
this module travel by value, so the workers need not import ``tests``.
"""

from __future__ import annotations

import os
import time
from typing import Any

from delta_ops.spark.source import DeltaDataSource
from delta_ops.spark.stream_writer import DeltaStreamWriter
from delta_ops.storage import table_storage

NAME = "delta_faulty"
DIE_AT = "dieAt"
PAUSE = "pauseBeforeCommit"
POINTS = ("written", "put", "landed", "committed")
EXIT_CODE = 17


def _die() -> None:
    os._exit(EXIT_CODE)


class FaultyStreamWriter(DeltaStreamWriter):
    """delta-ops' stream writer, pausing before each commit and dying at `die_point` while
    committing batch `die_batch`."""

    def __init__(self, options: dict[str, str], schema: Any, overwrite: bool) -> None:
        ours = {
            k.lower(): v for k, v in options.items() if k.lower() in (DIE_AT.lower(), PAUSE.lower())
        }
        batch, _, point = ours.get(DIE_AT.lower(), "-1:written").partition(":")
        assert point in POINTS, f"option {DIE_AT}={point!r}: 'batch:point', point in {POINTS}"
        self.die_batch, self.die_point = int(batch), point
        self.pause_s = float(ours.get(PAUSE.lower(), "0"))
        others = {k: v for k, v in options.items() if k.lower() not in ours}
        super().__init__(others, schema, overwrite)

    def commit(self, messages: list[Any], batchId: int) -> None:
        time.sleep(self.pause_s)
        if batchId == self.die_batch:
            if self.die_point == "written":
                _die()
            if self.die_point in ("put", "landed"):
                _die_at_the_commit_put(landed=self.die_point == "landed")
        super().commit(messages, batchId)
        if batchId == self.die_batch:
            _die()  # committed


def _die_at_the_commit_put(*, landed: bool) -> None:
    """Make this process die when it puts a Delta commit file: before the put, or after it."""
    storage_class = table_storage.Storage
    put = storage_class.put_if_absent

    def dying_put(self: Any, path: str, data: bytes) -> bool:
        if "/_delta_log/" in path and path.endswith(".json"):
            if landed:
                put(self, path, data)
            _die()
        return put(self, path, data)

    storage_class.put_if_absent = dying_put  # type: ignore[method-assign]


class FaultyDeltaSource(DeltaDataSource):
    """The `delta` source under another name, with the faulty stream writer."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def streamWriter(self, schema: Any, overwrite: bool) -> DeltaStreamWriter:
        return FaultyStreamWriter(dict(self.options), schema, overwrite)


def register(spark: Any) -> None:
    """Register ``delta_faulty`` in `spark`, this module pickled by value for the workers."""
    import sys

    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    spark.dataSource.register(FaultyDeltaSource)
