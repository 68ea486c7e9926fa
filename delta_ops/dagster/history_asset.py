"""The operation history as a Dagster asset: what maintenance did across the fleet, on one page.

`build_delta_maintenance_defs` adds it when the fleet records a history (the default):
``delta_maintenance/<name>/operation_history``, in the maintenance group. Materializing it
(from the UI, or in a job of your own after maintenance) reads the history table
(`delta_ops.service.history`) and records, as the materialization's metadata:

* ``dagster/row_count``: the operation runs recorded;
* ``succeeded`` / ``skipped`` / ``failed``: runs by status (numbers, plotted over time), and
  ``bytes_touched``: bytes deleted, rewritten or written by all of them;
* ``runs_by_operation``: a table of runs per operation and status, and ``counts``, the same as
  JSON (``{"vacuum": {"succeeded": 3, "skipped": 1}}``);
* ``last_runs``: the newest runs (``last``, 20 by default), each with its table, operation,
  status, files and bytes touched, and its reason or error.

The history is read by delta-ops' own reader; the asset changes nothing.
"""

import datetime as dt
from collections import Counter
from dataclasses import dataclass
from typing import Any

import dagster as dg
import pyarrow as pa
from pydantic import Field

from delta_ops.dagster.resource import DeltaMaintenanceResource
from delta_ops.service.history import OperationHistory, Status

#: the columns the summary reads
COLUMNS = (
    "operation_id",
    "start_time",
    "end_time",
    "table_name",
    "table_path",
    "operation",
    "status",
    "error",
    "reason",
    "files_touched",
    "bytes_touched",
)


class HistoryConfig(dg.Config):
    last: int = Field(default=20, ge=0, description="how many of the newest runs to list")


@dataclass(frozen=True)
class HistorySummary:
    """What the history says, as the asset shows it.

    Attributes:
        runs: operation runs recorded.
        counts: runs per operation, then per status.
        bytes_touched: bytes all runs deleted, rewrote or wrote.
        last: the newest runs, newest first (one dict per run, the `COLUMNS`).
    """

    runs: int
    counts: dict[str, dict[str, int]]
    bytes_touched: int
    last: list[dict[str, Any]]

    def by_status(self, status: Status) -> int:
        return sum(per.get(status.value, 0) for per in self.counts.values())


def summarize(rows: pa.Table, last: int) -> HistorySummary:
    """The summary of the history's `rows` (the `COLUMNS` at least), with the `last` newest."""
    counts: Counter[tuple[str, str]] = Counter(
        zip(rows.column("operation").to_pylist(), rows.column("status").to_pylist(), strict=True)
    )
    by_operation: dict[str, dict[str, int]] = {}
    for (operation, status), n in sorted(counts.items()):
        by_operation.setdefault(operation, {})[status] = n
    touched = sum(b for b in rows.column("bytes_touched").to_pylist() if b is not None)
    newest = rows.sort_by([("start_time", "descending"), ("operation_id", "ascending")])
    return HistorySummary(
        runs=rows.num_rows,
        counts=by_operation,
        bytes_touched=touched,
        last=newest.slice(0, last).select(list(COLUMNS)).to_pylist() if last else [],
    )


def _time(value: dt.datetime | None) -> str:
    return value.isoformat(timespec="seconds").replace("+00:00", "Z") if value else ""


def _cell(value: Any) -> str:
    """Text for a markdown table cell (one line, pipes escaped)."""
    text = "" if value is None else " ".join(str(value).split())
    return text.replace("|", "\\|")


def summary_metadata(summary: HistorySummary, location: str) -> dict[str, Any]:
    """The summary as the materialization's metadata (see the module's doc)."""
    statuses = [s.value for s in Status]
    per_operation = ["| operation | " + " | ".join(statuses) + " |"]
    per_operation.append("|---|" + "---:|" * len(statuses))
    for operation, per in summary.counts.items():
        cells = " | ".join(str(per.get(s, 0)) for s in statuses)
        per_operation.append(f"| {operation} | {cells} |")
    last = [
        "| start | table | operation | status | files | bytes | reason or error |",
        "|---|---|---|---|---:|---:|---|",
    ]
    for run in summary.last:
        why = run["error"] if run["status"] == Status.FAILED.value else run["reason"]
        last.append(
            f"| {_time(run['start_time'])} | {_cell(run['table_name'] or run['table_path'])} "
            f"| {run['operation']} | {run['status']} | {_cell(run['files_touched'])} "
            f"| {_cell(run['bytes_touched'])} | {_cell(why)} |"
        )
    return {
        "dagster/uri": dg.MetadataValue.text(location),
        "dagster/row_count": summary.runs,
        **{s.value: summary.by_status(s) for s in Status},
        "bytes_touched": summary.bytes_touched,
        "runs_by_operation": dg.MetadataValue.md("\n".join(per_operation)),
        "counts": dg.MetadataValue.json(summary.counts),
        "last_runs": dg.MetadataValue.md("\n".join(last)),
        "last_operation_ids": dg.MetadataValue.json([r["operation_id"] for r in summary.last]),
    }


def build_history_asset(
    key: dg.AssetKey,
    *,
    prefix: str,
    resource_key: str,
    group_name: str | None = "delta_maintenance",
) -> dg.AssetsDefinition:
    """The asset showing the history the resource under `resource_key` records into (its op
    named ``<prefix>__operation_history``)."""
    spec = dg.AssetSpec(
        key=key,
        group_name=group_name,
        kinds={"deltalake"},
        description="The operation history: every maintenance run of the fleet (start, end, "
        "table, operation, status, files and bytes touched, reason or error), summarized.",
    )

    @dg.multi_asset(
        name=f"{prefix}__operation_history",
        specs=[spec],
        required_resource_keys={resource_key},
    )
    def _history(context: dg.AssetExecutionContext, config: HistoryConfig) -> dg.MaterializeResult:  # type: ignore[type-arg]
        resource: DeltaMaintenanceResource = getattr(context.resources, resource_key)
        location = resource.history_location
        if location is None or not resource.history:
            raise dg.Failure("this fleet records no operation history", allow_retries=False)
        history = OperationHistory(location, resource.storage_options or None)
        summary = summarize(history.read(list(COLUMNS)), config.last)
        context.log.info(
            f"{summary.runs} operation run(s) in {location}: "
            + ", ".join(f"{s.value} {summary.by_status(s)}" for s in Status)
        )
        return dg.MaterializeResult(metadata=summary_metadata(summary, location))

    return _history


__all__ = ["HistoryConfig", "HistorySummary", "build_history_asset", "summarize"]
