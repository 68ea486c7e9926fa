"""The cleanup operation: delete expired log files (commits, checkpoints, checksums), whole
segments at a time, with Delta Spark's truncated-day cutoff.

Which files expire and the order they are deleted in (a reader never finds a version without
its checkpoint) is `delta_ops.ops.log_cleanup`, which drop-feature's history truncation, the
health check and the fleet planner use as well; this module is the operation: its options, how a
plan and a result are described, and its `OPERATION`. The planner's API is importable from here
too:

    plan = plan_cleanup(load_snapshot(path), now_ms=now())
    print(OPERATION.describe_plan(plan))      # dry run
    result = execute_cleanup(plan)
"""

from __future__ import annotations

from dataclasses import dataclass

from delta_ops.ops.engines import Engine
from delta_ops.ops.log_cleanup import CleanupPlan, CleanupResult, execute_cleanup, plan_cleanup
from delta_ops.ops.operation import Operation, Option, OptionKind, requested_now
from delta_ops.protocol.features import Access
from delta_ops.protocol.units import format_duration, format_time_ms
from delta_ops.table.snapshot import Snapshot, TableHead


@dataclass(frozen=True)
class CleanupOptions:
    """The cleanup operation's options (see its `OPERATION`)."""

    retention: int | None = None
    now: int | None = None


def _plan_from_options(
    snapshot: Snapshot | TableHead, options: CleanupOptions, engine: Engine
) -> CleanupPlan:
    return plan_cleanup(snapshot, requested_now(options.now), retention_ms=options.retention)


def _boundary(version: int | None) -> str:
    return "no boundary checkpoint" if version is None else f"boundary checkpoint {version}"


def describe_plan(plan: CleanupPlan) -> str:
    head = (
        f"cutoff {format_time_ms(plan.cutoff_ms)} (log retention {format_duration(plan.retention_ms)}),"
        f" {_boundary(plan.boundary_checkpoint_version)}:"
        f" would delete {len(plan.deleted)} log files"
    )
    lines = [head]
    lines += [f"  {name}" for name in plan.deleted]
    lines += [f"kept: {reason}" for reason in plan.kept_reasons]
    return "\n".join(lines)


def describe_result(result: CleanupResult) -> str:
    head = (
        f"cutoff {result.cutoff}, {_boundary(result.boundary_checkpoint_version)}:"
        f" deleted {result.num_deleted} log files"
    )
    kept = [f"kept: {reason}" for reason in result.kept_reasons]
    return "\n".join([head] + [f"  {name}" for name in result.deleted] + kept)


OPERATION: Operation[CleanupOptions, CleanupPlan, CleanupResult] = Operation(
    name="cleanup",
    needs=Access.CLEANUP,
    help="delete expired log files (Spark's truncated-day cutoff, whole segments)",
    options=(
        Option(
            "retention", OptionKind.DURATION, "log retention (default: delta.logRetentionDuration)"
        ),
        Option(
            "now",
            OptionKind.TIME,
            "judge expiry as of this time (never later than now)",
            cli_only=True,
        ),
    ),
    options_type=CleanupOptions,
    plan_with=_plan_from_options,
    execute_with=lambda plan, progress: execute_cleanup(plan),
    describe_plan=describe_plan,
    describe_result=describe_result,
    touched=lambda result: (result.num_deleted, None),
    needs_files=False,
)


__all__ = [
    "OPERATION",
    "CleanupOptions",
    "CleanupPlan",
    "CleanupResult",
    "describe_plan",
    "describe_result",
    "execute_cleanup",
    "plan_cleanup",
]
