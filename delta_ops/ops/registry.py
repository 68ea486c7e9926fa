"""The registry of operations: every op's description, gathered; every front end is built from it.

Each operation's module ends with its ``OPERATION`` (a `delta_ops.ops.operation.Operation`:
name, typed options, plan, execute, descriptions). The CLI generates its subcommands from
:data:`OPERATIONS`, the Dagster plugin its jobs, config and asset outputs, so adding an
operation is writing its module and adding it to the tuple below::

    op = OPERATIONS["vacuum"]
    plan = op.plan(op.load(path), op.parse({"retention": "7d"}), LOCAL)
    print(op.describe_plan(plan))
"""

from __future__ import annotations

from delta_ops.ops import (
    checkpoint,
    checksum,
    cleanup,
    compact,
    drop_feature,
    purge,
    recompute_stats,
    repair,
    restore,
    row_tracking,
    vacuum,
)
from delta_ops.ops.operation import ENGINE_OPTION, Operation, Option, OptionKind

OPERATIONS: dict[str, Operation] = {
    op.name: op
    for op in (
        checkpoint.OPERATION,
        cleanup.OPERATION,
        vacuum.OPERATION,
        row_tracking.OPERATION,
        purge.OPERATION,
        compact.OPERATION,
        repair.OPERATION,
        restore.OPERATION,
        checksum.OPERATION,
        drop_feature.OPERATION,
        recompute_stats.OPERATION,
    )
}
#: the same operations by their Dagster action name (asset output and job name part)
BY_ACTION: dict[str, Operation] = {op.action: op for op in OPERATIONS.values()}

__all__ = ["BY_ACTION", "ENGINE_OPTION", "OPERATIONS", "Operation", "Option", "OptionKind"]
