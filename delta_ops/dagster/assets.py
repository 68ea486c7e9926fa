"""Per-table maintenance as a multi-asset with one skippable output per action.

Each table gets one `multi_asset(can_subset=True)`: checkpoint, log_cleanup, vacuum and
row_tracking outputs, depending on the table's own asset. A per-table pool keeps two
maintenance steps off one table at once; a retry policy with backoff covers transient storage
errors, while protocol errors (delta-ops' own exceptions) fail without retrying. An action whose
plan is empty is skipped (no materialization) with the reason logged, so the UI's history shows
only real work, with its results as plottable metadata.
"""

from collections.abc import Iterator
from typing import Any

import dagster as dg

from delta_ops.dagster.resource import DeltaMaintenanceResource, result_metadata
from delta_ops.dagster.targets import DeltaTableTarget
from delta_ops.dagster.translator import ACTIONS, DeltaMaintenanceTranslator
from delta_ops.errors import DeltaOpsError

RETRY_POLICY = dg.RetryPolicy(max_retries=3, delay=2, backoff=dg.Backoff.EXPONENTIAL)


def pool_name(prefix: str, table: DeltaTableTarget) -> str:
    """One concurrency pool per table: maintenance steps on one table never overlap."""
    return f"{prefix}/{table.safe_name}"


def run_action(
    resource: DeltaMaintenanceResource,
    table: DeltaTableTarget,
    action: str,
    log: Any,
    **options: Any,
) -> tuple[Any | None, str | None]:
    """Run one action; (result, None) when it did work, (None, reason) when there was none.

    delta-ops errors become a non-retryable Failure naming the table; anything else (network,
    storage) propagates and is retried by the policy.
    """
    so = dict(table.storage_options) or None
    dry_run = bool(options.get("dry_run"))
    try:
        if action == "checkpoint":
            checkpoint = resource.plan_checkpoint(
                table.url, parts=options.get("parts"), storage_options=so
            )
            if checkpoint.nothing_to_do:
                reason = (
                    f"version {checkpoint.version} already has a checkpoint ({checkpoint.existing})"
                )
                return None, reason
            return (checkpoint if dry_run else resource.execute_checkpoint(checkpoint)), None
        if action == "log_cleanup":
            cleanup = resource.plan_cleanup(
                table.url, retention=options.get("retention"), storage_options=so
            )
            if cleanup.nothing_to_do:
                return None, "; ".join(cleanup.kept_reasons)
            return (cleanup if dry_run else resource.execute_cleanup(cleanup)), None
        if action == "vacuum":
            vacuum = resource.plan_vacuum(
                table.url,
                retention=options.get("retention"),
                mode=options.get("mode", "full"),
                force=options.get("force", False),
                storage_options=so,
            )
            if dry_run:
                return (None, "nothing to vacuum") if vacuum.nothing_to_do else (vacuum, None)
            if vacuum.nothing_to_do:
                resource.execute_vacuum(vacuum)  # no commits; records how far the log was examined
                return (
                    None,
                    f"nothing to vacuum ({vacuum.mode}, retention {vacuum.retention_ms} ms)",
                )
            return resource.execute_vacuum(vacuum), None
        if action == "row_tracking":
            backfill = resource.plan_row_tracking(
                table.url, batch_files=options.get("batch_files", 22_000), storage_options=so
            )
            if backfill.nothing_to_do:
                return None, "row tracking is already enabled"
            if dry_run:
                return backfill, None
            return resource.execute_row_tracking(backfill, progress=log.info), None
    except DeltaOpsError as exc:
        raise dg.Failure(f"{table.name}: {action} failed: {exc}", allow_retries=False) from exc
    raise ValueError(f"unknown maintenance action {action!r}")


def build_table_maintenance_asset(
    table: DeltaTableTarget,
    *,
    prefix: str,
    translator: DeltaMaintenanceTranslator,
    resource_key: str,
) -> dg.AssetsDefinition:
    """The maintenance multi-asset of one table."""
    specs = {action: translator.get_action_spec(table, action) for action in ACTIONS}
    key_to_action = {spec.key: action for action, spec in specs.items()}

    @dg.multi_asset(
        name=f"{prefix}__{table.safe_name}__maintenance",
        specs=list(specs.values()),
        can_subset=True,
        pool=pool_name(prefix, table),
        retry_policy=RETRY_POLICY,
        required_resource_keys={resource_key},
        op_tags={"delta_ops/table": table.safe_name},
    )
    def _maintenance(context: dg.AssetExecutionContext) -> Iterator[dg.MaterializeResult[Any]]:
        resource: DeltaMaintenanceResource = getattr(context.resources, resource_key)
        for action in ACTIONS:
            key = specs[action].key
            if key not in context.selected_asset_keys:
                continue
            if action == "row_tracking" and not table.enable_row_tracking:
                context.log.info(
                    f"{table.name}: row_tracking skipped: not enabled for this table (DeltaTableTarget(enable_row_tracking=True))"
                )
                continue
            context.log.info(f"{table.name}: {action} starting")
            result, reason = run_action(resource, table, action, context.log)
            if result is None:
                context.log.info(f"{table.name}: {action} skipped: {reason}")
                continue
            context.log.info(f"{table.name}: {action} done")
            yield dg.MaterializeResult(asset_key=key, metadata=result_metadata(result))

    _maintenance.__doc__ = f"Maintenance of {table.name}: " + ", ".join(key_to_action.values())
    return _maintenance


def maintenance_asset_keys(
    table: DeltaTableTarget,
    translator: DeltaMaintenanceTranslator,
    actions: tuple[str, ...] = ("checkpoint", "log_cleanup", "vacuum"),
) -> list[dg.AssetKey]:
    return [translator.get_action_spec(table, a).key for a in actions]
