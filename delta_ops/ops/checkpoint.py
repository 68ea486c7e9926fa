"""The checkpoint operation: write a checkpoint every Delta reader accepts (classic, V2 by the
table's policy, or multi-part), atomic, verified and idempotent.

What a checkpoint is and how one is written (the plan, the order of writes a crash cannot
break, concurrent runs at one version) is `delta_ops.ops.checkpoint_writer`, which drop-feature
uses as well; this module is the operation: its options, how a plan and a result are
described, and its `OPERATION`. The writer's API is importable from here too:

    plan = plan_checkpoint(load_snapshot(path), now_ms=now())
    print(OPERATION.describe_plan(plan))      # dry run
    result = execute_checkpoint(plan)
"""

from __future__ import annotations

from dataclasses import dataclass

from delta_ops.log.file_names import LogFileKind
from delta_ops.ops.checkpoint_writer import (
    CheckpointPlan,
    CheckpointResult,
    checkpoint,
    execute_checkpoint,
    load_for_checkpoint,
    plan_checkpoint,
)
from delta_ops.ops.engines import Engine
from delta_ops.ops.operation import ENGINE_OPTION, Operation, Option, OptionKind, requested_now
from delta_ops.protocol.features import Access
from delta_ops.protocol.units import format_bytes
from delta_ops.table.snapshot import Snapshot, TableHead


@dataclass(frozen=True)
class CheckpointOptions:
    """The checkpoint operation's options (see its `OPERATION`)."""

    parts: int | None = None
    engine: str = "local"
    now: int | None = None


def _plan_checkpoint(
    snapshot: Snapshot | TableHead, options: CheckpointOptions, engine: Engine
) -> CheckpointPlan:
    now = requested_now(options.now)
    return plan_checkpoint(snapshot, now, parts=options.parts, engine=engine)


def describe_plan(plan: CheckpointPlan) -> str:
    if plan.existing is None:
        action = f"would write {', '.join(plan.files)}"
    elif plan.redundant:
        action = (
            f"{plan.existing} exists; would remove {', '.join(plan.redundant)}"
            " (other complete checkpoints of this version, which some readers pick instead)"
        )
    else:
        action = f"nothing to do: {plan.existing} exists"
    return (
        f"checkpoint of version {plan.version} ({plan.kind}): {action}; {plan.num_add_files:,}"
        f" files, {plan.num_tombstones:,} tombstones kept, {plan.expired_tombstones:,} expired"
    )


def describe_result(result: CheckpointResult) -> str:
    if result.skipped_existing:
        removed = f"; removed {', '.join(result.removed)}" if result.removed else ""
        # a hint that was missing or named another checkpoint is repaired even so
        wrote = (
            "wrote _last_checkpoint naming it"
            if result.last_checkpoint_updated
            else "nothing written"
        )
        return (
            f"version {result.version} already has a checkpoint ({result.skipped_existing});"
            f" {wrote}{removed}"
        )
    return (
        f"wrote {result.kind} checkpoint of version {result.version}: {', '.join(result.written)}"
        f" ({result.num_actions:,} actions, {format_bytes(result.size_in_bytes)},"
        f" {result.duration_ms} ms)"
    )


OPERATION: Operation[CheckpointOptions, CheckpointPlan, CheckpointResult] = Operation(
    name="checkpoint",
    needs=Access.CHECKPOINT,
    help="write a checkpoint (classic, V2 by table policy, or multi-part)",
    options=(
        Option("parts", OptionKind.COUNT, "write a multi-part checkpoint with this many parts"),
        ENGINE_OPTION,
        Option(
            "now",
            OptionKind.TIME,
            "expire tombstones as of this time (never later than now)",
            None,
            cli_only=True,
        ),
    ),
    options_type=CheckpointOptions,
    plan_with=_plan_checkpoint,
    execute_with=lambda plan, progress: execute_checkpoint(plan),
    describe_plan=describe_plan,
    describe_result=describe_result,
    touched=lambda result: (len(result.written) + len(result.removed), result.size_in_bytes),
    at_version=True,
    # the head of a table whose checkpoint is big (streamed), else the snapshot
    load_with=lambda table, version, options: load_for_checkpoint(
        table, version, storage_options=options
    ),
)


__all__ = [
    "OPERATION",
    "CheckpointOptions",
    "CheckpointPlan",
    "CheckpointResult",
    "LogFileKind",
    "checkpoint",
    "describe_plan",
    "describe_result",
    "execute_checkpoint",
    "load_for_checkpoint",
    "plan_checkpoint",
]
