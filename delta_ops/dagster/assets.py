"""Per-table maintenance as a multi-asset with one skippable output per action.

Each table gets one `multi_asset(can_subset=True)`: checkpoint, log_cleanup, vacuum and
row_tracking outputs, depending on the table's own asset. A per-table pool keeps two
maintenance steps off one table at once; a retry policy with backoff covers transient storage
errors, while protocol errors (delta-ops' own exceptions) fail without retrying. An action whose
plan is empty is skipped (no materialization) with the reason logged, so the UI's history shows
only real work, with its results as plottable metadata.
"""

from collections.abc import Iterator, Mapping
from typing import Any

import dagster as dg

from delta_ops.dagster.logs import library_logs_to
from delta_ops.dagster.resource import (
    DeltaMaintenanceResource,
    operation_named,
    result_metadata,
)
from delta_ops.dagster.targets import DeltaTableTarget
from delta_ops.dagster.translator import ACTIONS, DeltaMaintenanceTranslator
from delta_ops.errors import DeltaOpsError

RETRY_POLICY = dg.RetryPolicy(max_retries=3, delay=2, backoff=dg.Backoff.EXPONENTIAL)


def table_metadata(table: DeltaTableTarget) -> dict[str, Any]:
    """Dagster's standard keys naming the table an event is about (the UI links and groups by
    them)."""
    return {
        "dagster/uri": dg.MetadataValue.text(table.url),
        "dagster/table_name": dg.MetadataValue.text(table.name),
    }


def pool_name(prefix: str, table: DeltaTableTarget) -> str:
    """One concurrency pool per table: maintenance steps on one table never overlap."""
    return f"{prefix}/{table.safe_name}"


def run_action(
    resource: DeltaMaintenanceResource,
    table: DeltaTableTarget,
    action: str,
    log: Any,
    *,
    dry_run: bool = False,
    options: Mapping[str, Any] | None = None,
) -> tuple[Any | None, str | None]:
    """Plan one action once; (plan or result, None) when there is work, (None, reason) when not.

    A dry run returns the plan. delta-ops errors that retrying cannot fix become a
    non-retryable Failure naming the table and the action; retryable ones (a concurrent commit,
    a transient store error) propagate so the retry policy runs the action again.
    """
    so = dict(table.storage_options) or None
    operation = operation_named(action)
    try:
        with library_logs_to(log):
            plan = resource.plan(action, table.url, options, storage_options=so)
            if plan.nothing_to_do:
                return None, operation.idle_reason(plan)
            if dry_run:
                return plan, None
            return resource.execute(action, plan, progress=log.info), None
    except DeltaOpsError as exc:
        if exc.retryable:
            raise
        raise dg.Failure(f"{table.name}: {action} failed: {exc}", allow_retries=False) from exc


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
                # no materialization (nothing changed), but the asset's history says why
                skipped = {"skipped": dg.MetadataValue.text(str(reason)), **table_metadata(table)}
                context.log_event(dg.AssetObservation(asset_key=key, metadata=skipped))
                continue
            context.log.info(f"{table.name}: {action} done")
            metadata = {**result_metadata(result), **table_metadata(table)}
            yield dg.MaterializeResult(asset_key=key, metadata=metadata)

    _maintenance.__doc__ = f"Maintenance of {table.name}: " + ", ".join(key_to_action.values())
    return _maintenance
