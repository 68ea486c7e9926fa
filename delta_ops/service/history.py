"""The operation history: one row per operation run, in a Delta table any reader can query.

Databricks' Predictive Optimization records every operation it runs in a system table (start and
end time, table, operation, status, a map of metrics); this is that record for any lake, kept in
the open. Every run of an operation from any front end (`delta_ops.service.runs.run_operation`)
appends one row when the front end names a history: off by default for the CLI (``--history
PATH`` or ``$DELTA_OPS_HISTORY``), on for Dagster and Airflow (``<warehouse>/_delta_ops_history``:
`delta_ops.storage.warehouse.history_location`). The rows are written by delta-ops' own writer
(`delta_ops.table.writer`), so concurrent appends from many processes all land (a blind append
never conflicts), and DuckDB, Spark and deltalake read them.

Columns: ``start_time`` and ``end_time`` (UTC), ``table_path``, ``table_name``, ``operation``
(the CLI's name), ``status`` (`Status`), ``error``, ``reason`` (what the run did in a
line, past tense; why there was nothing to do; or the plan of a run that failed executing:
`delta_ops.ops.operation.headline`), ``table_version`` (planned on), ``files_touched`` and
``bytes_touched`` (deleted, rewritten or written: `Operation.touched`), ``metrics`` (the
result's numbers and words, ``map<string,string>`` as Predictive Optimization's
``operation_metrics``), ``engine``, ``front_end``, ``delta_ops_version``, ``operation_id`` and
``day`` (the start's UTC date, the partition column).

The table keeps itself bounded: every `UPKEEP_EVERY`-th commit, the writer that made it
drops the days older than ``delta_ops.history.retentionDuration`` (a table property, 180 days
by default), compacts, checkpoints, cleans up the log and vacuums, as the table's own
properties say. Writing the history, or keeping it, never fails the operation it records: a
failure is a warning.

For example:

    history = OperationHistory("/data/warehouse/_delta_ops_history")
    history.append(record)   # False, and a warning in the log, when it could not be written
    history.read(["operation", "status"])   # the rows so far, as Arrow
    # SELECT operation, status, metrics['num_deleted'] FROM delta_scan('/data/.../_delta_ops_history')
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import pyarrow as pa

from delta_ops import clock
from delta_ops.errors import ConcurrentModification
from delta_ops.ops.engines import LOCAL
from delta_ops.ops.registry import OPERATIONS
from delta_ops.protocol.units import parse_duration_ms
from delta_ops.storage import Storage
from delta_ops.storage.warehouse import history_location
from delta_ops.table.snapshot import load_snapshot
from delta_ops.version import __version__

logger = logging.getLogger(__name__)

#: the environment variable naming the CLI's history (``--history`` wins)
HISTORY_ENV = "DELTA_OPS_HISTORY"
#: the table property bounding how long rows are kept
RETENTION_PROPERTY = "delta_ops.history.retentionDuration"
DEFAULT_RETENTION = "interval 180 days"
#: the history keeps itself bounded after every this many commits
UPKEEP_EVERY = 10
#: a new history table's properties
PROPERTIES = {RETENTION_PROPERTY: DEFAULT_RETENTION, "delta.checkpointInterval": "10"}
#: what its own upkeep runs, in order, with each operation's default options
UPKEEP = ("compact", "checkpoint", "cleanup", "vacuum")
#: creating the table can race another process creating it; the loser appends again
_CREATE_ATTEMPTS = 3


class Status(StrEnum):
    """How an operation run ended."""

    SUCCEEDED = "succeeded"  # executed
    SKIPPED = "skipped"  # its plan had nothing to do (executed or not, it changed nothing)
    FAILED = "failed"  # an error while loading, planning or executing


SCHEMA = pa.schema(
    [
        ("operation_id", pa.string()),
        ("start_time", pa.timestamp("us", tz="UTC")),
        ("end_time", pa.timestamp("us", tz="UTC")),
        ("table_path", pa.string()),
        ("table_name", pa.string()),
        ("operation", pa.string()),
        ("status", pa.string()),
        ("error", pa.string()),
        ("reason", pa.string()),
        ("table_version", pa.int64()),
        ("files_touched", pa.int64()),
        ("bytes_touched", pa.int64()),
        ("metrics", pa.map_(pa.string(), pa.string())),
        ("engine", pa.string()),
        ("front_end", pa.string()),
        ("delta_ops_version", pa.string()),
        ("day", pa.date32()),
    ]
)


@dataclass(frozen=True, kw_only=True)
class OperationRecord:
    """One operation run, as the history stores it (times in epoch milliseconds)."""

    start_ms: int
    end_ms: int
    table: str
    operation: str
    status: Status
    table_name: str | None = None
    error: str | None = None
    reason: str | None = None
    table_version: int | None = None
    files_touched: int | None = None
    bytes_touched: int | None = None
    metrics: Mapping[str, str] = field(default_factory=dict)
    engine: str = LOCAL.name
    front_end: str = "python"
    operation_id: str = field(default_factory=lambda: str(uuid.uuid4()))

    def failed(self, exc: BaseException) -> OperationRecord:
        """This record as a run that failed with `exc`."""
        return dataclasses.replace(self, status=Status.FAILED, error=_one_line(exc))

    def to_arrow(self) -> pa.Table:
        """The record as the history's one-row table."""
        start = _utc(self.start_ms)
        row = {
            "operation_id": self.operation_id,
            "start_time": start,
            "end_time": _utc(self.end_ms),
            "table_path": self.table,
            "table_name": self.table_name,
            "operation": self.operation,
            "status": str(self.status),
            "error": self.error,
            "reason": self.reason,
            "table_version": self.table_version,
            "files_touched": self.files_touched,
            "bytes_touched": self.bytes_touched,
            "metrics": list(self.metrics.items()),
            "engine": self.engine,
            "front_end": self.front_end,
            "delta_ops_version": __version__,
            "day": start.date(),
        }
        return pa.Table.from_pylist([row], schema=SCHEMA)


def _utc(ms: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)


def metrics_of(data: Mapping[str, Any]) -> dict[str, str]:
    """A result's plain data (`delta_ops.ops.results.to_data`) as a metrics map: numbers and
    words as text, a list by its length (``num_<key>``), a mapping's plain values under
    ``<key>.<name>``; nulls are left out."""
    out: dict[str, str] = {}
    for key, value in data.items():
        if isinstance(value, list | tuple):
            out.setdefault(key if key.startswith("num_") else f"num_{key}", str(len(value)))
        elif isinstance(value, Mapping):
            for name, inner in value.items():
                if _plain(inner):
                    out[f"{key}.{name}"] = _text(inner)
        elif _plain(value):
            out[key] = _text(value)
    return out


def _plain(value: Any) -> bool:
    return isinstance(value, str | int | float)  # bool is an int


def _text(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


@dataclass(frozen=True)
class OperationHistory:
    """Where operation runs are recorded: a Delta table, created by the first append.

    Args:
        location: the table's path or URL.
        storage_options: options to open it with (those of the tables it records, usually).
    """

    location: str
    storage_options: Mapping[str, Any] | None = None

    def append(self, record: OperationRecord) -> bool:
        """Append `record`, then keep the table bounded when its turn has come; False (and a
        warning) when the row could not be written. Never raises: the operation it records
        has run whatever happens here."""
        try:
            storage = Storage.open(self.location, self.storage_options)
            version = self._write(storage, record.to_arrow())
        except Exception as exc:  # noqa: BLE001 - the history must not fail the operation
            logger.warning(
                "could not record %s of %s in the operation history at %s: %s",
                record.operation,
                record.table,
                self.location,
                _one_line(exc),
            )
            return False
        if version % UPKEEP_EVERY == 0 and version > 0:
            try:
                keep_bounded(storage)
            except Exception as exc:  # noqa: BLE001 - the next turn tries again
                logger.warning(
                    "the operation history at %s recorded the run but its upkeep failed: %s",
                    self.location,
                    _one_line(exc),
                )
        return True

    def read(self, columns: Sequence[str] | None = None) -> pa.Table:
        """Every row recorded so far (none, with the history's schema, before the first
        append), through delta-ops' own reader."""
        # only a reader of the history: the scan stack is loaded only then
        from delta_ops.table.scan import read_table

        storage = Storage.open(self.location, self.storage_options)
        if not storage.exists(storage.log_path):
            empty = SCHEMA.empty_table()
            return empty.select(list(columns)) if columns is not None else empty
        return read_table(load_snapshot(storage), columns)

    def _write(self, storage: Storage, rows: pa.Table) -> int:
        # only a run that records one: the writer's stack is loaded only then
        from delta_ops.table.writer import write_arrow

        for attempt in range(_CREATE_ATTEMPTS):
            try:
                commit = write_arrow(storage, rows, partition_by=["day"], configuration=PROPERTIES)
                return commit.version
            except ConcurrentModification:
                # another process created the table first: append to it (appends never
                # conflict with each other, so only a creation race gets here)
                if attempt == _CREATE_ATTEMPTS - 1:
                    raise
        raise AssertionError("unreachable")


def keep_bounded(storage: Storage) -> None:
    """The history's own upkeep: drop the days past its retention, then compact, checkpoint,
    clean up the log and vacuum with the table's own properties (each only when it has work)."""
    drop_expired_days(storage)
    for name in UPKEEP:
        operation = OPERATIONS[name]
        plan = operation.plan(operation.load(storage), operation.parse({}), LOCAL)
        if not plan.nothing_to_do:
            operation.execute(plan)


def drop_expired_days(storage: Storage, now_ms: int | None = None) -> bool:
    """Remove the rows of every day older than the table's retention (one commit that removes
    whole ``day`` partitions, so concurrent appends to today are no conflict); True when some
    were removed."""
    snapshot = load_snapshot(storage)
    configured = snapshot.metadata.configuration.get(RETENTION_PROPERTY, DEFAULT_RETENTION)
    now = clock.now_ms() if now_ms is None else now_ms
    cutoff = _utc(now - parse_duration_ms(configured)).date().isoformat()
    days = [dict(v).get("day") for v in snapshot.file_index.column("partitionValues").to_pylist()]
    if not any(day is not None and day < cutoff for day in days):
        return False
    # only when days expire: the writer's stack is loaded only then
    from delta_ops.table.writer import write_arrow

    write_arrow(
        storage,
        SCHEMA.empty_table(),
        mode="overwrite",
        partition_by=["day"],
        replace_where=f"day < '{cutoff}'",
    )
    return True


def fleet_history(history: bool | str, tables: str | Sequence[str]) -> str | None:
    """Where a fleet's factory records runs, from its `history` argument: True for
    ``_delta_ops_history`` in the warehouse root `tables` (or the folder holding the tables
    `tables` lists: `delta_ops.storage.warehouse.history_location`), a location of its own, or
    False (None: nowhere)."""
    if history is False:
        return None
    if history is True:
        return history_location(tables)
    return history


def _one_line(exc: BaseException) -> str:
    message = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


__all__ = [
    "HISTORY_ENV",
    "SCHEMA",
    "OperationHistory",
    "OperationRecord",
    "Status",
    "drop_expired_days",
    "fleet_history",
    "keep_bounded",
    "metrics_of",
]
