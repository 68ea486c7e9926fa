"""The purge operation: rewrite data files that carry deletion vectors without their deleted
rows (Delta's `REORG TABLE ... APPLY (PURGE)`), so a delete asked for privacy really leaves the
data files.

Which files are rewritten and how (one commit, row ids kept, conflicts) is
`delta_ops.ops.dv_purge`, which drop-feature uses as well to take deletion vectors out of a
table; this module is the operation: its options, how a plan and a result are described, and
its `OPERATION`. The purge's API is importable from here too:

    plan = plan_purge(load_snapshot(path), min_deleted_ratio=0.0)   # pure: which files, why
    print(OPERATION.describe_plan(plan))
    result = execute_purge(plan)
"""

from __future__ import annotations

from dataclasses import dataclass

from delta_ops.ops.dv_purge import FileToPurge, PurgePlan, PurgeResult, execute_purge, plan_purge
from delta_ops.ops.operation import ENGINE_OPTION, Operation, Option, OptionKind
from delta_ops.ops.write_options import WRITE_OPTIONS, parquet_format
from delta_ops.protocol.features import Access
from delta_ops.protocol.units import format_bytes, format_time_ms
from delta_ops.table.parquet_format import DEFAULT_FORMAT


def describe_plan(plan: PurgePlan) -> str:
    if plan.nothing_to_do:
        return "nothing to purge: no file has a deletion vector" + (
            f" with at least {plan.min_deleted_ratio:.0%} of its rows deleted"
            if plan.min_deleted_ratio
            else ""
        )
    return (
        f"would rewrite {len(plan.files):,} files ({plan.bytes_to_rewrite:,} bytes) without"
        f" {plan.rows_to_drop:,} deleted rows; a vacuum after"
        f" {format_time_ms(plan.erased_by_vacuum_after_ms)} erases them from storage"
    )


def describe_result(result: PurgeResult) -> str:
    if result.version is None:
        return "nothing to purge"
    return (
        f"rewrote {result.files_rewritten:,} files at version {result.version}"
        f" ({format_bytes(result.bytes_written)} written):"
        f" {result.rows_dropped:,} deleted rows dropped, {result.rows_kept:,} kept;"
        f" a vacuum after {format_time_ms(result.erased_by_vacuum_after_ms)} erases the old files"
    )


@dataclass(frozen=True)
class PurgeOptions:
    """The purge operation's options (see its `OPERATION`)."""

    min_deleted_ratio: float = 0.0
    compression: str = DEFAULT_FORMAT.codec.value
    row_group_size: int = DEFAULT_FORMAT.row_group_bytes
    engine: str = "local"


OPERATION: Operation[PurgeOptions, PurgePlan, PurgeResult] = Operation(
    name="purge",
    needs=Access.REWRITE,
    help="rewrite files with deletion vectors without their deleted rows (REORG ... PURGE)",
    options=(
        Option(
            "min_deleted_ratio",
            OptionKind.RATIO,
            "only files with at least this share of rows deleted",
            0.0,
        ),
        *WRITE_OPTIONS,
        ENGINE_OPTION,
    ),
    options_type=PurgeOptions,
    plan_with=lambda snapshot, options, engine: plan_purge(
        snapshot,
        min_deleted_ratio=options.min_deleted_ratio,
        engine=engine,
        parquet=parquet_format(options),
    ),
    execute_with=lambda plan, progress: execute_purge(plan),
    describe_plan=describe_plan,
    describe_result=describe_result,
    touched=lambda result: (
        result.files_rewritten + len(result.files_written),
        result.bytes_written,
    ),
)


__all__ = [
    "OPERATION",
    "FileToPurge",
    "PurgeOptions",
    "PurgePlan",
    "PurgeResult",
    "describe_plan",
    "describe_result",
    "execute_purge",
    "plan_purge",
]
