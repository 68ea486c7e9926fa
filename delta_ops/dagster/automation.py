"""Schedules and sensors: scheduled maintenance and commit-triggered checkpoints.

Both start STOPPED (turn them on in the UI, with `dagster schedule start` / `dagster sensor
start`, or with `build_delta_maintenance_defs(start_automation=True)`): deploying a code
location should not start deleting files by itself. Failure alerts live in `alerts.py`.

* Schedules yield one `RunRequest` per table with work (run key = table + date, tag naming the
  table) for the actions its settings choose (`delta_ops.dagster.settings`), judged with the
  retentions its runs will use; a table whose log shows nothing to do is skipped with the
  reason, so a fleet of quiet tables costs a few log reads, not a run each. With a planner
  budget, the fleet planner chooses the tables and actions instead
  (`delta_ops.dagster.planned_schedule`).
* The commit sensor keeps a JSON cursor of the last seen version per table and only probes
  commits newer than it (cost grows with new commits, not log size); it requests a checkpoint
  run when the commits since the last checkpoint reach `delta.checkpointInterval` (tables
  whose settings leave the checkpoint out are not watched). Whether
  the table's features allow a checkpoint is read once per version (a refusal is kept in the
  cursor), so a tick over a lake where nothing changed reads no protocol: 1,000 tables in
  well under a second (`benchmarks/bench_lake_dagster.py`).
"""

import datetime as dt
import json
from collections.abc import Sequence

import dagster as dg

from delta_ops.dagster.alerts import TABLE_TAG, JobLike
from delta_ops.dagster.checks import check_keys
from delta_ops.dagster.planned_schedule import PlannerBudget, plan_tick, planned_requests
from delta_ops.dagster.resource import DeltaMaintenanceResource
from delta_ops.dagster.targets import DeltaTableTarget
from delta_ops.dagster.translator import DeltaMaintenanceTranslator
from delta_ops.errors import DeltaOpsError
from delta_ops.ops.row_tracking import OPERATION as ROW_TRACKING
from delta_ops.service.due import Action, checkpoint_due

#: the actions whose being due `delta_ops.service.due` judges (the rule the planner, the sensor,
#: inspect and the checks ask); the others are planned to see whether they have work
_JUDGED = {action.value: action for action in Action}


def build_maintenance_schedule(
    targets: Sequence[DeltaTableTarget],
    *,
    prefix: str,
    job: JobLike,
    translator: DeltaMaintenanceTranslator,
    resource_key: str,
    cron: str,
    actions: tuple[str, ...] | None = None,
    name: str | None = None,
    default_status: dg.DefaultScheduleStatus = dg.DefaultScheduleStatus.STOPPED,
    planner: PlannerBudget | None = None,
) -> dg.ScheduleDefinition:
    """A schedule running, on every table whose log says there is work, the actions its
    settings choose (`actions`: these instead, e.g. ``("row_tracking",)``). With `planner`,
    each tick runs only what the fleet planner chooses within that budget
    (`delta_ops.dagster.planned_schedule`)."""

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
        if planner is not None:
            plan = plan_tick(targets, resource, planner)
            requests, skipped = planned_requests(plan, targets, translator, day)
        else:
            requests, skipped = [], []
            for table in targets:
                request = _request(resource, table, actions, translator, day, skipped)
                if request is not None:
                    requests.append(request)
        for line in skipped:
            context.log.info(f"skipped {line}")
        if not requests:
            return dg.SkipReason("no table has maintenance work: " + " | ".join(skipped))
        return requests

    return _schedule


def _request(
    resource: DeltaMaintenanceResource,
    table: DeltaTableTarget,
    actions: tuple[str, ...] | None,
    translator: DeltaMaintenanceTranslator,
    day: str,
    skipped: list[str],
) -> dg.RunRequest | None:
    """The run of `table`'s actions with work (its settings' retentions judge cleanup and
    vacuum), or None with a line in `skipped` saying why not."""
    settings = table.settings
    asked = settings.chosen_actions if actions is None else actions
    storage_options = dict(table.storage_options) or None
    reasons: list[str] = []
    wanted: list[str] = []
    judged = [_JUDGED[a] for a in asked if a in _JUDGED]
    if judged:
        try:
            verdicts = resource.due(
                table.url,
                storage_options=storage_options,
                log_retention_ms=settings.log_retention_ms,
                file_retention_ms=settings.file_retention_ms,
                rewrites=Action.COMPACT in judged or Action.PURGE in judged,
            )
        except DeltaOpsError as exc:
            skipped.append(f"{table.name}: cannot read the log: {exc}")
            return None
        wanted = [a for a in asked if a in _JUDGED and verdicts[_JUDGED[a]].due]
        reasons.extend(str(v) for v in verdicts.idle if v.action in judged)
    for action in asked:
        if action in _JUDGED or (action == ROW_TRACKING.name and not table.enable_row_tracking):
            continue
        # planned on the local engine: a tick only asks whether there is work
        options = {k: v for k, v in settings.options_for(action).items() if k != "engine"}
        try:
            plan = resource.plan(action, table.url, options, storage_options=storage_options)
        except DeltaOpsError as exc:  # a feature refusing it: said, not a failed tick
            reasons.append(f"{action}: {exc}")
            continue
        if plan.nothing_to_do:
            reasons.append(f"{action}: {plan.idle_reason}")
        else:
            wanted.append(action)
    if not wanted:
        skipped.append(f"{table.name}: nothing to do ({'; '.join(reasons)})")
        return None
    return dg.RunRequest(
        run_key=f"{table.name}:{day}",
        tags={TABLE_TAG: table.name},
        asset_selection=[translator.get_action_spec(table, a).key for a in wanted],
        asset_check_keys=check_keys(table, translator),
    )


def _checkpoint_refusal(resource: DeltaMaintenanceResource, table: DeltaTableTarget) -> str | None:
    """Why the table's features refuse a checkpoint (a run requested anyway would fail), or
    None; an unreadable head is left to the run, which reports it in full."""
    try:
        return resource.refusal(
            Action.CHECKPOINT.value, table.url, storage_options=dict(table.storage_options) or None
        )
    except DeltaOpsError:
        return None


def build_commit_sensor(
    targets: Sequence[DeltaTableTarget],
    *,
    prefix: str,
    job: JobLike,
    translator: DeltaMaintenanceTranslator,
    resource_key: str,
    minimum_interval_seconds: int = 30,
    default_status: dg.DefaultSensorStatus = dg.DefaultSensorStatus.STOPPED,
) -> dg.SensorDefinition:
    """Checkpoint a table once `delta.checkpointInterval` commits piled up since its checkpoint
    (only tables whose settings' actions include the checkpoint)."""
    checkpointed = [t for t in targets if Action.CHECKPOINT in t.settings.chosen_actions]

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
        for table in checkpointed:
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
            due = checkpoint_due(probe.commits_since_checkpoint, probe.checkpoint_interval)
            requested = seen.get("requested") == probe.latest_version
            refused = None
            if due and not requested:
                # the protocol is read once per version: a tick with nothing new reads no log
                known = seen.get("refused")
                if isinstance(known, list) and known[0] == probe.latest_version:
                    refused = str(known[1])
                else:
                    refused = _checkpoint_refusal(resource, table)
                if refused is not None:
                    state["refused"] = [probe.latest_version, refused]
            if refused is not None:
                reasons.append(f"{table.name}: not checkpointed: {refused}")
            elif due and not requested:
                requests.append(
                    dg.RunRequest(
                        run_key=f"{table.name}:{probe.latest_version}",
                        tags={
                            TABLE_TAG: table.name,
                            "delta_ops/version": str(probe.latest_version),
                        },
                        asset_selection=[
                            translator.get_action_spec(table, Action.CHECKPOINT.value).key
                        ],
                        asset_check_keys=check_keys(table, translator),
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
