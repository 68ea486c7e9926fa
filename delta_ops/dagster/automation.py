"""Schedules and sensors: scheduled maintenance, commit-triggered checkpoints, failure alerts.

* Schedules yield one `RunRequest` per table with work (run key = table + date, tag naming the
  table); a table whose log shows nothing to do is skipped with the reason, so a fleet of quiet
  tables costs a few log reads, not a run each.
* The commit sensor keeps a JSON cursor of the last seen version per table and only probes
  commits newer than it (cost grows with new commits, not log size); it requests a checkpoint
  run when the commits since the last checkpoint reach `delta.checkpointInterval`.
"""

import datetime as dt
import json
from collections.abc import Sequence
from typing import TypeAlias

import dagster as dg
from dagster._core.definitions.unresolved_asset_job_definition import (
    UnresolvedAssetJobDefinition,
)

from delta_ops.dagster.resource import DeltaMaintenanceResource
from delta_ops.dagster.targets import DeltaTableTarget
from delta_ops.dagster.translator import DeltaMaintenanceTranslator
from delta_ops.errors import DeltaOpsError

# what schedules and sensors accept as their job: an op job or an asset job (define_asset_job)
JobLike: TypeAlias = dg.JobDefinition | UnresolvedAssetJobDefinition

TABLE_TAG = "delta_ops/table"


def build_maintenance_schedule(
    targets: Sequence[DeltaTableTarget],
    *,
    prefix: str,
    job: JobLike,
    translator: DeltaMaintenanceTranslator,
    resource_key: str,
    cron: str,
    actions: tuple[str, ...] = ("checkpoint", "log_cleanup", "vacuum"),
    name: str | None = None,
    default_status: dg.DefaultScheduleStatus = dg.DefaultScheduleStatus.RUNNING,
) -> dg.ScheduleDefinition:
    """A schedule running `actions` on every table whose log says there is work."""

    @dg.schedule(
        name=name or f"{prefix}_maintenance_schedule",
        cron_schedule=cron,
        job=job,
        default_status=default_status,
        required_resource_keys={resource_key},
    )
    def _schedule(
        context: dg.ScheduleEvaluationContext,
    ) -> dg.SkipReason | list[dg.RunRequest]:
        resource: DeltaMaintenanceResource = getattr(context.resources, resource_key)
        day = (context.scheduled_execution_time or dt.datetime.now(dt.UTC)).strftime("%Y-%m-%d")
        requests: list[dg.RunRequest] = []
        skipped: list[str] = []
        for table in targets:
            try:
                work = resource.work(table.url, storage_options=dict(table.storage_options) or None)
            except DeltaOpsError as exc:
                skipped.append(f"{table.name}: cannot read the log: {exc}")
                continue
            wanted = [
                a
                for a in actions
                if a != "row_tracking" and getattr(work, "cleanup" if a == "log_cleanup" else a)
            ]
            if "row_tracking" in actions and table.enable_row_tracking:
                plan = resource.plan(
                    "row_tracking", table.url, storage_options=dict(table.storage_options) or None
                )
                if not plan.nothing_to_do:
                    wanted.append("row_tracking")
            if not wanted:
                skipped.append(f"{table.name}: nothing to do ({'; '.join(work.reasons)})")
                continue
            requests.append(
                dg.RunRequest(
                    run_key=f"{table.name}:{day}",
                    tags={TABLE_TAG: table.name},
                    asset_selection=[translator.get_action_spec(table, a).key for a in wanted],
                )
            )
        for line in skipped:
            context.log.info(f"skipped {line}")
        if not requests:
            return dg.SkipReason("no table has maintenance work: " + " | ".join(skipped))
        return requests

    return _schedule


def build_commit_sensor(
    targets: Sequence[DeltaTableTarget],
    *,
    prefix: str,
    job: JobLike,
    translator: DeltaMaintenanceTranslator,
    resource_key: str,
    minimum_interval_seconds: int = 30,
    default_status: dg.DefaultSensorStatus = dg.DefaultSensorStatus.RUNNING,
) -> dg.SensorDefinition:
    """Checkpoint a table once `delta.checkpointInterval` commits piled up since its checkpoint."""

    @dg.sensor(
        name=f"{prefix}_commit_sensor",
        job=job,
        minimum_interval_seconds=minimum_interval_seconds,
        default_status=default_status,
        required_resource_keys={resource_key},
    )
    def _sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult:
        resource: DeltaMaintenanceResource = getattr(context.resources, resource_key)
        cursor = json.loads(context.cursor) if context.cursor else {}
        requests: list[dg.RunRequest] = []
        reasons: list[str] = []
        for table in targets:
            seen = cursor.get(table.name, {})
            try:
                probe = resource.probe_commits(
                    table.url,
                    known_version=seen.get("version"),
                    known_interval=seen.get("interval"),
                    storage_options=dict(table.storage_options) or None,
                )
            except DeltaOpsError as exc:
                reasons.append(f"{table.name}: {exc}")
                continue
            state = {
                "version": probe.latest_version,
                "interval": probe.checkpoint_interval,
                "requested": seen.get("requested"),
            }
            due = probe.commits_since_checkpoint >= probe.checkpoint_interval
            if due and seen.get("requested") != probe.latest_version:
                requests.append(
                    dg.RunRequest(
                        run_key=f"{table.name}:{probe.latest_version}",
                        tags={
                            TABLE_TAG: table.name,
                            "delta_ops/version": str(probe.latest_version),
                        },
                        asset_selection=[translator.get_action_spec(table, "checkpoint").key],
                    )
                )
                state["requested"] = probe.latest_version
            else:
                reasons.append(
                    f"{table.name}: {probe.commits_since_checkpoint} commit(s) since checkpoint "
                    f"{probe.last_checkpoint_version}, interval {probe.checkpoint_interval}"
                    + (" (already requested)" if due else "")
                )
            cursor[table.name] = state
        new_cursor = json.dumps(cursor, sort_keys=True)
        if requests:
            return dg.SensorResult(run_requests=requests, cursor=new_cursor)
        return dg.SensorResult(
            skip_reason=dg.SkipReason("; ".join(reasons) or "no tables"), cursor=new_cursor
        )

    return _sensor


def _first_step_failure(instance: dg.DagsterInstance, run_id: str) -> tuple[str | None, str | None]:
    """The step that failed first in a run and its error message (what an alert should say)."""
    records = instance.get_records_for_run(
        run_id, of_type=dg.DagsterEventType.STEP_FAILURE, limit=1
    ).records
    for record in records:
        event = record.event_log_entry.dagster_event
        if event is None:
            continue
        data = event.step_failure_data
        message = data.error.message.strip() if data and data.error else None
        return event.step_key, message
    return None, None


def build_failure_sensor(prefix: str, jobs: Sequence[JobLike]) -> dg.SensorDefinition:
    """Log every failed maintenance run with the table it was for (hook alerts here)."""

    @dg.run_failure_sensor(
        name=f"{prefix}_run_failure_sensor",
        monitored_jobs=list(jobs),
        default_status=dg.DefaultSensorStatus.RUNNING,
    )
    def _on_failure(context: dg.RunFailureSensorContext) -> None:
        run = context.dagster_run
        table = run.tags.get(TABLE_TAG, "several tables")
        step, error = _first_step_failure(context.instance, run.run_id)
        context.log.error(
            f"delta maintenance run {run.run_id} for {table} failed: {run.job_name}, step"
            f" {step or '-'}: {error or context.failure_event.message}"
        )

    return _on_failure
