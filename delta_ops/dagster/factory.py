"""`build_delta_maintenance_defs`: everything a fleet of Delta tables needs, in one call."""

from collections.abc import Iterable
from dataclasses import replace

import dagster as dg

from delta_ops.dagster.alerts import Notifier, build_failure_sensor
from delta_ops.dagster.assets import build_table_maintenance_asset
from delta_ops.dagster.automation import build_commit_sensor, build_maintenance_schedule
from delta_ops.dagster.checks import build_table_checks, check_keys
from delta_ops.dagster.history_asset import build_history_asset
from delta_ops.dagster.jobs import build_jobs
from delta_ops.dagster.planned_schedule import PlannerBudget
from delta_ops.dagster.resource import DeltaMaintenanceResource
from delta_ops.dagster.settings import MaintenanceSettings
from delta_ops.dagster.targets import DeltaTableTarget, as_targets
from delta_ops.dagster.translator import DeltaMaintenanceTranslator, asset_actions, remembering
from delta_ops.ops.row_tracking import OPERATION as ROW_TRACKING
from delta_ops.service.history import fleet_history


def build_delta_maintenance_defs(
    tables: Iterable[DeltaTableTarget | str] | str,
    *,
    name: str = "delta",
    translator: DeltaMaintenanceTranslator | None = None,
    resource: DeltaMaintenanceResource | None = None,
    maintenance_cron: str = "0 3 * * *",
    row_tracking_cron: str | None = None,
    commit_sensor: bool = True,
    sensor_interval_seconds: int = 30,
    start_automation: bool = False,
    notify: Notifier | None = None,
    webserver_url: str | None = None,
    history: bool | str = True,
    settings: MaintenanceSettings | None = None,
    planner: PlannerBudget | None = None,
) -> dg.Definitions:
    """Maintenance assets, checks, jobs, schedules and sensors for a fleet of Delta tables.

    Args:
        tables: `DeltaTableTarget`s, table URLs, or one warehouse root to discover tables in.
        name: prefix of every job/schedule/sensor/pool/resource name, so several fleets can
            live in one code location.
        translator: maps tables to asset keys, groups and owners (default: maintenance keys
            `delta_maintenance/<name>/<table>/<action>`, tables without an asset `<name>/<table>`).
        resource: the `DeltaMaintenanceResource` (storage options, engine).
        maintenance_cron: daily checkpoint -> cleanup -> vacuum schedule.
        row_tracking_cron: optional schedule for row-tracking backfills (none when None).
        commit_sensor: checkpoint tables when `delta.checkpointInterval` commits pile up.
        start_automation: the maintenance schedule and the sensors start RUNNING when the
            code location loads; by default everything starts STOPPED and is turned on in the
            UI (a deployment should not start deleting files by itself). The row-tracking
            schedule always starts stopped.
        notify: called with a `MaintenanceFailure` for every failed maintenance run (e.g.
            `delta_ops.dagster.alerts.slack_notifier("#alerts")`); failures are logged anyway.
        webserver_url: the Dagster UI's address, so alerts link to the failed run (default
            $DAGSTER_WEBSERVER_URL).
        history: where every maintenance run is recorded, the operation history
            (`delta_ops.service.history`): True for ``_delta_ops_history`` in the warehouse root
            (or the folder holding the tables) unless `resource` names its own, a path or URL,
            or False for nowhere. A fleet with a history gets an asset showing it,
            ``<key prefix>/operation_history`` (`delta_ops.dagster.history_asset`).
        settings: the fleet's retention, actions and engine (`MaintenanceSettings`); each
            table's own settings win over them.
        planner: a budget makes the maintenance schedule run only what the fleet planner
            chooses within it, each run tagged with why (`delta_ops.dagster.planned_schedule`).

    Returns:
        A `Definitions` to merge into your code location.

    Examples:
        defs = dg.Definitions.merge(pipeline_defs, build_delta_maintenance_defs("/data/warehouse"))
    """
    fleet_settings = settings or MaintenanceSettings()
    targets = [replace(t, settings=t.settings.over(fleet_settings)) for t in as_targets(tables)]
    resource = _with_history(
        resource or DeltaMaintenanceResource(),
        history,
        tables if isinstance(tables, str) else [t.url for t in targets],
    )
    translator = remembering(
        translator
        or DeltaMaintenanceTranslator(
            key_prefix=("delta_maintenance", name), table_key_prefix=(name,)
        )
    )
    resource_key = f"{name}_delta_maintenance"
    assets = [
        build_table_maintenance_asset(
            t, prefix=name, translator=translator, resource_key=resource_key
        )
        for t in targets
    ]
    external = [translator.get_asset_spec(t) for t in targets if t.asset_key is None]
    if resource.history and resource.history_location is not None:
        prefix = list(translator.key_prefix)
        assets.append(
            build_history_asset(
                dg.AssetKey([*prefix, *([] if name in prefix else [name]), "operation_history"]),
                prefix=name,
                resource_key=resource_key,
                group_name=translator.group_name,
            )
        )
    checks = [
        build_table_checks(t, prefix=name, translator=translator, resource_key=resource_key)
        for t in targets
    ]
    op_jobs = build_jobs(targets, prefix=name, translator=translator, resource_key=resource_key)
    all_keys = [translator.get_action_spec(t, a).key for t in targets for a in asset_actions(t)]
    # the tables' checks come with their maintenance (ordered after it: checks.py), so a
    # maintenance run shows the state it left; named by their keys, not `checks_for_assets`,
    # whose resolution compares every check with every table (a list scan: 100,000 checks x
    # 10,000 tables took most of a 10,000-table location's load) and would also pull in any
    # check of the user's own on those tables
    health_keys = [key for t in targets for key in check_keys(t, translator)]
    asset_job = dg.define_asset_job(
        f"{name}_maintenance_assets_job",
        selection=dg.AssetSelection.assets(*all_keys) | dg.AssetSelection.checks(*health_keys)
        if all_keys
        else dg.AssetSelection.assets(),
    )
    schedule_status = (
        dg.DefaultScheduleStatus.RUNNING if start_automation else dg.DefaultScheduleStatus.STOPPED
    )
    sensor_status = (
        dg.DefaultSensorStatus.RUNNING if start_automation else dg.DefaultSensorStatus.STOPPED
    )
    schedules = [
        build_maintenance_schedule(
            targets,
            prefix=name,
            job=asset_job,
            translator=translator,
            resource_key=resource_key,
            cron=maintenance_cron,
            default_status=schedule_status,
            planner=planner,
        )
    ]
    if row_tracking_cron:
        schedules.append(
            build_maintenance_schedule(
                targets,
                prefix=name,
                job=asset_job,
                translator=translator,
                resource_key=resource_key,
                cron=row_tracking_cron,
                actions=(ROW_TRACKING.name,),
                name=f"{name}_row_tracking_schedule",
                default_status=dg.DefaultScheduleStatus.STOPPED,
            )
        )
    sensors = [
        build_failure_sensor(
            name,
            [asset_job, *op_jobs.values()],
            notify=notify,
            webserver_url=webserver_url,
            default_status=sensor_status,
        )
    ]
    if commit_sensor:
        sensors.append(
            build_commit_sensor(
                targets,
                prefix=name,
                job=asset_job,
                translator=translator,
                resource_key=resource_key,
                minimum_interval_seconds=sensor_interval_seconds,
                default_status=sensor_status,
            )
        )
    return dg.Definitions(
        assets=[*assets, *external],
        asset_checks=checks,
        jobs=[asset_job, *op_jobs.values()],
        schedules=schedules,
        sensors=sensors,
        resources={resource_key: resource},
    )


def _with_history(
    resource: DeltaMaintenanceResource, history: bool | str, tables: str | list[str]
) -> DeltaMaintenanceResource:
    """`resource` recording where the factory's `history` says (a resource naming its own
    location keeps it when `history` is True). Made anew: Dagster builds a run's resource
    from its config, which `model_copy` leaves as it was."""
    if history is True and resource.history_location is not None:
        return resource
    if history is False:
        change: dict[str, object] = {"history": False}
    else:
        change = {"history_location": fleet_history(history, tables)}
    return type(resource)(**{**resource.model_dump(), **change})


__all__ = ["build_delta_maintenance_defs"]
