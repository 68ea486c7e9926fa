"""Per-table maintenance as a multi-asset with one skippable output per action.

Each table gets one `multi_asset(can_subset=True)`: checkpoint, log_cleanup and vacuum outputs
(row_tracking too on a table with ``enable_row_tracking=True``, and the other actions its
settings choose), depending on the table's own asset. A per-table pool keeps two
maintenance steps off one table at once; a retry policy with backoff covers transient storage
errors, while protocol errors (delta-ops' own exceptions) fail without retrying. An action whose
plan is empty is skipped (no materialization) with the reason logged, so the UI's history shows
only real work, with its results as plottable metadata; the skip is recorded as an observation
with its reason, and every event carries the table's state (version, files, bytes, rows, log
files) so the UI plots it over time.
"""

import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import dagster as dg

from delta_ops.dagster.logs import library_logs_to
from delta_ops.dagster.resource import (
    DeltaMaintenanceResource,
    operation_named,
    result_metadata,
)
from delta_ops.dagster.targets import DeltaTableTarget
from delta_ops.dagster.translator import DeltaMaintenanceTranslator, asset_actions
from delta_ops.errors import DeltaOpsError
from delta_ops.ops.row_tracking import OPERATION as ROW_TRACKING
from delta_ops.table.snapshot import Snapshot

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


@dataclass(frozen=True)
class ActionOutcome:
    """What one action did on one table, as the run's events report it.

    Attributes:
        result: the result (or the plan of a dry run); None when there was nothing to do.
        reason: why nothing was done (None when something was).
        plan: the plan the action was decided on (it holds the table's state).
        seconds: how long planning and executing took.
    """

    result: Any | None
    reason: str | None
    plan: Any
    seconds: float

    def metadata(self, table: DeltaTableTarget) -> dict[str, Any]:
        """Event metadata: the table's names, its state (numbers the UI plots over time),
        the duration, and the result's numbers or the reason it was skipped."""
        out = {**table_metadata(table), **table_state_metadata(self.plan)}
        out["duration_s"] = round(self.seconds, 3)
        if self.result is None:  # the plan's numbers (retention, cutoff, ...) say why
            out.update(result_metadata(self.plan))
            out["skipped"] = dg.MetadataValue.text(str(self.reason))
        else:
            out.update(result_metadata(self.result))
        return out


def table_state_metadata(plan: Any) -> dict[str, Any]:
    """The table's state an action's plan was made on: version, log files, and (for actions
    that load the file state) files, bytes and rows; cleanup reads no file state."""
    snapshot = getattr(plan, "snapshot", None)
    if snapshot is None:
        return {}
    out: dict[str, Any] = {
        "table_version": snapshot.version,
        "log_files": len(snapshot.segment.listing),
    }
    if isinstance(snapshot, Snapshot):
        out["table_files"] = snapshot.num_files
        out["table_bytes"] = snapshot.size_bytes
        physical = snapshot.num_records
        if physical is not None:
            out["dagster/row_count"] = physical - snapshot.num_deleted_records
    return out


def run_action(
    resource: DeltaMaintenanceResource,
    table: DeltaTableTarget,
    action: str,
    log: Any,
    *,
    dry_run: bool = False,
    options: Mapping[str, Any] | None = None,
) -> ActionOutcome:
    """Plan one action once and execute it when there is work (a dry run stops at the plan),
    recording the run in the resource's operation history.

    delta-ops errors that retrying cannot fix become a non-retryable Failure naming the table
    and the action; retryable ones (a concurrent commit, a transient store error) propagate
    so the retry policy runs the action again.
    """
    so = dict(table.storage_options) or None
    started = time.monotonic()
    try:
        with library_logs_to(log):
            run = resource.run(
                action,
                table.url,
                options,
                storage_options=so,
                dry_run=dry_run,
                progress=log.info,
                table_name=table.name,
            )
        seconds = time.monotonic() - started
        for warning in run.warnings:  # a dry run shows what force would do, and says so
            log.warning(f"{table.name}: {action}: {warning}")
        if run.plan.nothing_to_do:
            reason = operation_named(action).idle_reason(run.plan)
            return ActionOutcome(None, reason, run.plan, seconds)
        return ActionOutcome(run.result if run.executed else run.plan, None, run.plan, seconds)
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
    """The maintenance multi-asset of one table: an output per action of `asset_actions`;
    each action runs with the table's settings (retention, force, engine), and an action its
    settings leave out is skipped, with why, however the run was launched."""
    actions = asset_actions(table)
    chosen = table.settings.chosen_actions
    specs = {action: translator.get_action_spec(table, action) for action in actions}
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
        for action in actions:
            key = specs[action].key
            if key not in context.selected_asset_keys:
                continue
            if action == ROW_TRACKING.name and not table.enable_row_tracking:
                context.log.info(
                    f"{table.name}: {action} skipped: not enabled for this table (DeltaTableTarget(enable_row_tracking=True))"
                )
                continue
            if action != ROW_TRACKING.name and action not in chosen:
                context.log.info(
                    f"{table.name}: {action} skipped: not among the table's actions"
                    f" ({', '.join(chosen)})"
                )
                continue
            context.log.info(f"{table.name}: {action} starting")
            options = table.settings.options_for(action)
            outcome = run_action(resource, table, action, context.log, options=options)
            if outcome.result is None:
                context.log.info(f"{table.name}: {action} skipped: {outcome.reason}")
                # no materialization (nothing changed), but the asset's history says why
                metadata = outcome.metadata(table)
                context.log_event(dg.AssetObservation(asset_key=key, metadata=metadata))
                continue
            context.log.info(f"{table.name}: {action} done")
            yield dg.MaterializeResult(asset_key=key, metadata=outcome.metadata(table))

    _maintenance.__doc__ = f"Maintenance of {table.name}: " + ", ".join(key_to_action.values())
    return _maintenance
