"""One run of an operation, as every front end makes it: load, plan, execute, record.

The CLI, the Dagster resource and the Airflow operators each run an operation through
`run_operation`, so a run means the same everywhere: the table is loaded as the operation
needs it, planned (a dry run previews, as ``--dry-run`` does), executed unless it is a dry run
or the front end skips plans with nothing to do, and, when the front end names a history
(`delta_ops.service.history`), recorded there with how it ended, failures included. What to print
and how to fail stay with the front end:

    run = run_operation(OPERATIONS["vacuum"], "/data/events", values, LOCAL,
                        history=OperationHistory("/data/_delta_ops_history"), front_end="cli")
    print(to_data(run.result))
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic

from delta_ops import clock
from delta_ops.ops.engines import LOCAL, Engine
from delta_ops.ops.operation import (
    AnyOperation,
    Operation,
    OptionsT,
    PlanT,
    Progress,
    ResultT,
    headline,
)
from delta_ops.ops.results import to_data
from delta_ops.service.history import OperationHistory, OperationRecord, Status, metrics_of
from delta_ops.storage import Storage


@dataclass(frozen=True)
class Run(Generic[PlanT, ResultT]):
    """What a run did: its plan (with a dry run's warnings) and the result, None when it was
    not executed (a dry run, or a plan with nothing to do that the front end skips)."""

    plan: PlanT
    warnings: tuple[str, ...] = ()
    result: ResultT | None = None

    @property
    def executed(self) -> bool:
        return self.result is not None


def run_operation(
    operation: Operation[OptionsT, PlanT, ResultT],
    table: str | Storage,
    values: OptionsT,
    engine: Engine = LOCAL,
    *,
    version: int | None = None,
    storage_options: Mapping[str, Any] | None = None,
    dry_run: bool = False,
    skip_idle: bool = False,
    progress: Progress = None,
    on_plan: Callable[[PlanT, tuple[str, ...]], None] | None = None,
    history: OperationHistory | None = None,
    table_name: str | None = None,
    front_end: str = "python",
) -> Run[PlanT, ResultT]:
    """Run `operation` on `table` with its parsed options (`values`) on `engine`.

    Args:
        version: the version to act on, for an operation that takes one (``at_version``).
        dry_run: plan only (`Operation.preview`: a safety limit ``--force`` lifts is a warning).
        skip_idle: do not execute a plan with nothing to do (Dagster and Airflow skip it).
        progress: where the operation says what it is doing.
        on_plan: called with the plan and its warnings before it is executed.
        history: where to record the run (not a dry run); a failure to record is a warning.
        table_name: how the history names the table (its name in a fleet).
        front_end: who ran the operation, as the history records it.

    Returns:
        The `Run`. An error loading, planning or executing propagates, recorded first.
    """
    begun = _begun(operation, table, engine.name, table_name, front_end)
    if dry_run:  # changes nothing: not a run the history records
        history = None
    loaded: Any = None  # a Snapshot or a TableHead, as the operation loads it
    plan: PlanT | None = None
    run: Run[PlanT, ResultT]
    try:
        loaded = operation.load(table, version, storage_options)
        if dry_run:
            plan, warnings = operation.preview(loaded, values, engine)
        else:
            plan, warnings = operation.plan(loaded, values, engine), []
        if on_plan is not None:
            on_plan(plan, tuple(warnings))
        if dry_run or (skip_idle and plan.nothing_to_do):
            run = Run(plan, tuple(warnings))
        else:
            run = Run(plan, result=operation.execute(plan, progress))
    except BaseException as exc:
        if history is not None:
            history.append(_ended(begun, operation, loaded, plan, None).failed(exc))
        raise
    if history is not None:
        history.append(_ended(begun, operation, loaded, plan, run.result))
    return run


def _begun(
    operation: AnyOperation,
    table: str | Storage,
    engine: str,
    table_name: str | None,
    front_end: str,
) -> OperationRecord:
    """The record of a run starting now (failed, until it ends otherwise)."""
    return OperationRecord(
        start_ms=clock.now_ms(),
        end_ms=0,
        table=table if isinstance(table, str) else table.url,
        table_name=table_name,
        operation=operation.name,
        status=Status.FAILED,
        engine=engine,
        front_end=front_end,
    )


def record_refusal(
    operation: AnyOperation,
    table: str | Storage,
    exc: BaseException,
    history: OperationHistory | None,
    *,
    engine: str = LOCAL.name,
    table_name: str | None = None,
    front_end: str = "python",
) -> None:
    """Record a run that failed before `run_operation` could start it (a value parsed
    only then, a templated one in Airflow, was refused; its engine could not be built): a
    failed row with the error, as a run failing later gets. Nothing without a `history`."""
    if history is None:
        return
    begun = _begun(operation, table, engine, table_name, front_end)
    history.append(dataclasses.replace(begun, end_ms=begun.start_ms).failed(exc))


def _ended(
    begun: OperationRecord,
    operation: Operation[OptionsT, PlanT, ResultT],
    loaded: Any,
    plan: PlanT | None,
    result: ResultT | None,
) -> OperationRecord:
    """`begun` completed by what the run got to (the loaded table, the plan, the result), as
    a run that ended now: executed, or skipped when its plan had nothing to do (a failure is
    marked by the caller)."""
    reason = None
    if plan is not None and plan.nothing_to_do:
        reason = headline(operation.idle_reason(plan))
    elif result is not None:  # what it did, in the past tense
        reason = headline(operation.describe_result(result))
    elif plan is not None:  # it failed executing: what it set out to do
        reason = headline(operation.describe_plan(plan))
    files = size = None
    if result is not None:
        files, size = operation.touched(result)
    data = to_data(result) if result is not None else {}
    return dataclasses.replace(
        begun,
        end_ms=clock.now_ms(),
        table=getattr(plan, "table", None) or begun.table,
        # a plan with nothing to do did nothing, whether the front end executed it (the CLI
        # does) or skipped it (Dagster and Airflow do): one status for both
        status=Status.SKIPPED if plan is not None and plan.nothing_to_do else Status.SUCCEEDED,
        reason=reason,
        table_version=getattr(getattr(plan, "snapshot", loaded), "version", None),
        files_touched=files,
        bytes_touched=size,
        metrics=metrics_of({k: v for k, v in data.items() if k != "table"}),
    )


__all__ = ["Run", "record_refusal", "run_operation"]
