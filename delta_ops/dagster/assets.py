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


def run_action(resource: DeltaMaintenanceResource, table: DeltaTableTarget, action: str, log: Any, **options: Any) -> tuple[Any | None, str | None]:
    """Run one action; (result, None) when it did work, (None, reason) when there was none.

    delta-ops errors become a non-retryable Failure naming the table; anything else (network,
    storage) propagates and is retried by the policy.
    """
    so = dict(table.storage_options) or None
    try:
        if action == "checkpoint":
            plan = resource.checkpoint(table.url, dry_run=True, parts=options.get("parts"), storage_options=so)
            if plan.nothing_to_do:
                return None, f"version {plan.version} already has a checkpoint ({plan.existing})"
            if options.get("dry_run"):
                return plan, None
            return resource.checkpoint(table.url, parts=options.get("parts"), storage_options=so), None
        if action == "log_cleanup":
            plan = resource.cleanup(table.url, retention=options.get("retention"), dry_run=True, storage_options=so)
            if plan.nothing_to_do:
                return None, "; ".join(plan.kept_reasons)
            if options.get("dry_run"):
                return plan, None
            return resource.cleanup(table.url, retention=options.get("retention"), storage_options=so), None
        if action == "vacuum":
            from delta_ops.ops.vacuum import execute_vacuum

            plan = resource.vacuum(table.url, retention=options.get("retention"), mode=options.get("mode", "full"), force=options.get("force", False), dry_run=True, storage_options=so)
            if options.get("dry_run"):
                return (None, "nothing to vacuum") if plan.nothing_to_do else (plan, None)
            if plan.nothing_to_do:
                execute_vacuum(plan)  # no commits; records how far the log was examined
                return None, f"nothing to vacuum ({plan.mode}, retention {plan.retention_ms} ms)"
            return execute_vacuum(plan), None
        if action == "row_tracking":
            plan = resource.enable_row_tracking(table.url, batch_files=options.get("batch_files", 22_000), dry_run=True, storage_options=so)
            if plan.nothing_to_do:
                return None, "row tracking is already enabled"
            if options.get("dry_run"):
                return plan, None
            from delta_ops.ops.row_tracking import execute_enable_row_tracking

            return execute_enable_row_tracking(plan, progress=log.info), None
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
    def _maintenance(context: dg.AssetExecutionContext) -> Iterator[dg.MaterializeResult]:
        resource: DeltaMaintenanceResource = getattr(context.resources, resource_key)
        for action in ACTIONS:
            key = specs[action].key
            if key not in context.selected_asset_keys:
                continue
            if action == "row_tracking" and not table.enable_row_tracking:
                context.log.info(f"{table.name}: row_tracking skipped: not enabled for this table (DeltaTableTarget(enable_row_tracking=True))")
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


def maintenance_asset_keys(table: DeltaTableTarget, translator: DeltaMaintenanceTranslator, actions: tuple[str, ...] = ("checkpoint", "log_cleanup", "vacuum")) -> list[dg.AssetKey]:
    return [translator.get_action_spec(table, a).key for a in actions]

