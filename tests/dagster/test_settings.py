"""Retention, actions and engine set fleet-wide and per table in the component's ``defs.yaml``
(`delta_ops.dagster.settings`), reaching the runs the maintenance schedule and the commit
sensor launch: the schedule is evaluated through Dagster's schedule API, each run it requests
is executed for real on small local tables, and what happened is read from the disk and from
the operation history (DuckDB reads it). Bad values stop the load with one line naming them.
"""

import datetime as dt
import os
import time
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pydantic
import pytest
from dagster.components.testing import create_defs_folder_sandbox

from delta_ops.dagster import DeltaMaintenanceComponent
from delta_ops.dagster.planned_schedule import PlannerBudget
from delta_ops.dagster.settings import MaintenanceSettings
from delta_ops.table.writer import write_arrow
from tests.support import deltalake_files, deltalake_rows, duckdb_rows

TYPE = "delta_ops.dagster.DeltaMaintenanceComponent"
DAY_S = 86_400
WHEN = dt.datetime(2026, 1, 2, 3, 0, tzinfo=dt.UTC)


def aged_table(path: Path, commits: int, *, days: float, orphan_days: float) -> Path:
    """`commits` one-row commits whose log files are `days` old, and an orphan data file (no
    commit names it) `orphan_days` old."""
    for i in range(commits):
        write_arrow(path, pa.table({"id": pa.array([i], pa.int64())}))
    old = time.time() - days * DAY_S
    for log_file in (path / "_delta_log").iterdir():  # commits and their checksums
        os.utime(log_file, (old, old))
    orphan = path / "orphan.parquet"
    orphan.write_bytes(b"not part of the table")
    stamp = time.time() - orphan_days * DAY_S
    os.utime(orphan, (stamp, stamp))
    return path


def scaffold(sandbox, attributes: dict) -> Path:
    return sandbox.scaffold_component(
        component_cls=DeltaMaintenanceComponent,
        defs_path="lake",
        defs_yaml_contents={"type": TYPE, "attributes": attributes},
    )


def run_requested(defs: dg.Definitions, request: dg.RunRequest) -> dg.ExecuteInProcessResult:
    """Execute a requested run as the daemon would launch it: the asset job, the request's
    selection and tags."""
    job = defs.resolve_job_def("lake_maintenance_assets_job")
    result = job.execute_in_process(
        asset_selection=request.asset_selection,
        tags=request.tags,
        instance=dg.DagsterInstance.ephemeral(),
    )
    assert result.success
    return result


def history_runs(folder: Path) -> set[tuple[str, str]]:
    """(table, operation) of every run the history recorded, as DuckDB reads it."""
    return {(r["table_name"], r["operation"]) for r in duckdb_rows(folder / "_delta_ops_history")}


def test_settings_reach_the_runs_the_schedule_launches(tmp_path):
    lake = tmp_path / "lake"
    # fresh orphans: 0 days of file retention deletes one, the default 7 days keeps one
    short = aged_table(lake / "short", 12, days=8, orphan_days=2 / 24)
    default = aged_table(lake / "default", 12, days=8, orphan_days=2 / 24)
    # an orphan any vacuum would delete: this table's settings run no vacuum
    only_checkpoint = aged_table(lake / "only_checkpoint", 12, days=8, orphan_days=9)
    with create_defs_folder_sandbox() as sandbox:
        path = scaffold(
            sandbox,
            {
                "name": "lake",
                "log_retention": "7 days",  # fleet-wide: cleanup deletes the 8-day-old commits
                "file_retention": "7 days",
                "engine": "local",
                "tables": [
                    {
                        "name": "short",
                        "url": str(short),
                        "file_retention": "0 days",
                        "vacuum_force": True,
                    },
                    {"name": "default", "url": str(default), "log_retention": "30 days"},
                    {
                        "name": "only_checkpoint",
                        "url": str(only_checkpoint),
                        "actions": ["checkpoint"],
                    },
                ],
            },
        )
        with sandbox.load_component_and_build_defs(defs_path=path) as (_, defs):
            schedule = defs.resolve_schedule_def("lake_maintenance_schedule")
            resources = {"lake_delta_maintenance": defs.resources["lake_delta_maintenance"]}
            tick = schedule.evaluate_tick(
                dg.build_schedule_context(scheduled_execution_time=WHEN, resources=resources)
            )
            requests = {r.tags["delta_ops/table"]: r for r in tick.run_requests or []}
            assert set(requests) == {"short", "default", "only_checkpoint"}
            selected = {
                name: {k.path[-1] for k in r.asset_selection or []} for name, r in requests.items()
            }
            assert selected == {
                "short": {"checkpoint", "cleanup", "vacuum"},
                "default": {"checkpoint", "vacuum"},  # 30 days of log retention: no cleanup
                "only_checkpoint": {"checkpoint"},
            }
            for request in requests.values():
                run_requested(defs, request)

    assert not (short / "orphan.parquet").exists()  # 0 days, forced: deleted
    assert (default / "orphan.parquet").exists()  # 7 days: kept
    assert (only_checkpoint / "orphan.parquet").exists()  # no vacuum ran
    # cleanup ran with the fleet's 7 days where the table did not say otherwise
    assert not (short / "_delta_log" / f"{0:020d}.json").exists()
    assert (default / "_delta_log" / f"{0:020d}.json").exists()
    for table in (short, default, only_checkpoint):
        assert (table / "_delta_log" / f"{11:020d}.checkpoint.parquet").exists()
    assert history_runs(lake) == {
        ("short", "checkpoint"),
        ("short", "cleanup"),
        ("short", "vacuum"),
        ("default", "checkpoint"),
        ("default", "vacuum"),
        ("only_checkpoint", "checkpoint"),
    }


def test_the_asset_runs_only_the_tables_actions_however_launched(tmp_path):
    """Materializing every maintenance asset (as the UI's button does) leaves out the actions
    a table's settings do not choose."""
    table = aged_table(tmp_path / "lake" / "t", 12, days=8, orphan_days=9)
    with create_defs_folder_sandbox() as sandbox:
        path = scaffold(
            sandbox,
            {
                "name": "lake",
                "tables": [{"name": "t", "url": str(table), "actions": ["checkpoint"]}],
            },
        )
        with sandbox.load_component_and_build_defs(defs_path=path) as (_, defs):
            job = defs.resolve_job_def("lake_maintenance_assets_job")
            result = job.execute_in_process(instance=dg.DagsterInstance.ephemeral())
            assert result.success
            done = {e.asset_key.path[-1] for e in result.get_asset_materialization_events()}
    assert done == {"checkpoint"}
    assert (table / "orphan.parquet").exists()
    assert history_runs(tmp_path / "lake") == {("t", "checkpoint")}


def test_an_action_beyond_the_default_ones_gets_an_output_and_runs(tmp_path):
    """`actions: [compact]`: the table's asset gains a compact output, the schedule plans the
    compaction to see it has work, and the run rewrites the small files (deltalake reads the
    same rows from fewer files); the other table, with the default actions, gets none."""
    lake = tmp_path / "lake"
    compacted = aged_table(lake / "compacted", 12, days=0, orphan_days=0)
    plain = aged_table(lake / "plain", 12, days=0, orphan_days=0)
    rows = deltalake_rows(compacted)
    _, files_before = deltalake_files(compacted)
    with create_defs_folder_sandbox() as sandbox:
        path = scaffold(
            sandbox,
            {
                "name": "lake",
                "tables": [
                    {"name": "compacted", "url": str(compacted), "actions": ["compact"]},
                    {"name": "plain", "url": str(plain)},
                ],
            },
        )
        with sandbox.load_component_and_build_defs(defs_path=path) as (_, defs):
            keys = {k.to_user_string() for k in defs.resolve_all_asset_keys()}
            schedule = defs.resolve_schedule_def("lake_maintenance_schedule")
            resources = {"lake_delta_maintenance": defs.resources["lake_delta_maintenance"]}
            tick = schedule.evaluate_tick(
                dg.build_schedule_context(scheduled_execution_time=WHEN, resources=resources)
            )
            requests = {r.tags["delta_ops/table"]: r for r in tick.run_requests or []}
            assert [k.path[-1] for k in requests["compacted"].asset_selection or []] == ["compact"]
            run_requested(defs, requests["compacted"])
    assert "delta_maintenance/lake/compacted/compact" in keys
    assert "delta_maintenance/lake/plain/compact" not in keys
    _, files_after = deltalake_files(compacted)
    assert deltalake_rows(compacted) == rows
    assert len(files_after) < len(files_before)
    assert history_runs(lake) == {("compacted", "compact")}


def test_the_commit_sensor_leaves_out_tables_without_the_checkpoint(tmp_path):
    lake = tmp_path / "lake"
    watched = aged_table(lake / "watched", 12, days=0, orphan_days=0)
    unwatched = aged_table(lake / "unwatched", 12, days=0, orphan_days=0)
    with create_defs_folder_sandbox() as sandbox:
        path = scaffold(
            sandbox,
            {
                "name": "lake",
                "tables": [
                    {"name": "watched", "url": str(watched)},
                    {"name": "unwatched", "url": str(unwatched), "actions": ["vacuum"]},
                ],
            },
        )
        with sandbox.load_component_and_build_defs(defs_path=path) as (_, defs):
            sensor = defs.resolve_sensor_def("lake_commit_sensor")
            resources = {"lake_delta_maintenance": defs.resources["lake_delta_maintenance"]}
            data = sensor.evaluate_tick(
                dg.build_sensor_context(resources=resources, definitions=defs)
            )
            [request] = data.run_requests
            assert request.tags["delta_ops/table"] == "watched"
            run_requested(defs, request)
    assert (watched / "_delta_log" / f"{11:020d}.checkpoint.parquet").exists()
    assert not list((unwatched / "_delta_log").glob("*.checkpoint.parquet"))


def test_table_settings_override_the_fleets_in_what_each_action_gets(tmp_path):
    """What each registered operation is given (the engine only where it has one)."""
    with create_defs_folder_sandbox() as sandbox:
        path = scaffold(
            sandbox,
            {
                "name": "lake",
                "engine": "spark",
                "file_retention": "14 days",
                "actions": ["checkpoint", "vacuum", "compact"],
                "tables": [
                    {"name": "a", "url": str(tmp_path / "a"), "engine": "local"},
                    {"name": "b", "url": str(tmp_path / "b"), "file_retention": "1 day"},
                ],
            },
        )
        with sandbox.load_component_and_build_defs(defs_path=path) as (component, defs):
            targets = {t.name: t for t in component.targets()}
            keys = {k.to_user_string() for k in defs.resolve_all_asset_keys()}
    # targets carry their own values; the factory lays them over the fleet's
    assert targets["a"].settings.engine == "local" and targets["a"].settings.actions is None
    assert "delta_maintenance/lake/a/compact" in keys  # the fleet's actions add the output
    fleet = component.settings()
    a = targets["a"].settings.over(fleet)
    b = targets["b"].settings.over(fleet)
    assert a.options_for("vacuum") == {"retention": "14 days", "engine": "local"}
    assert b.options_for("vacuum") == {"retention": "1 day", "engine": "spark"}
    assert b.options_for("cleanup") == {}  # cleanup has no engine option
    assert b.chosen_actions == ("checkpoint", "vacuum", "compact")


@pytest.mark.parametrize(
    ("attributes", "named"),
    [
        ({"file_retention": "7 dayz"}, ["file_retention", "'7 dayz'", "7d", "'7 days'"]),
        ({"log_retention": 30}, ["log_retention", "30", "'7 days'"]),
        ({"engine": "sparc"}, ["engine", "'sparc'", "local, spark"]),
        ({"actions": ["checkpoint", "vacum"]}, ["actions", "'vacum'", "cleanup, vacuum"]),
        ({"actions": ["restore"]}, ["actions", "'restore'", "cannot be scheduled"]),
        (
            {"tables": [{"name": "ev", "url": "/x", "actions": ["vacum"]}]},
            ["tables[ev]: actions", "'vacum'", "checkpoint, cleanup"],
        ),
        (
            {"planner": {"max_per_action": {"vacum": 2}}},
            ["planner.max_per_action", "'vacum'", "vacuum"],
        ),
        ({"planner": {"max_tables": 0}}, ["planner.max_tables", "0", "at least 1"]),
    ],
)
def test_a_bad_value_stops_the_load_with_one_line_naming_it(tmp_path, attributes, named):
    with create_defs_folder_sandbox() as sandbox:
        path = scaffold(sandbox, {"name": "lake", "warehouse": str(tmp_path), **attributes})
        with (
            pytest.raises(Exception) as raised,
            sandbox.load_component_and_build_defs(defs_path=path),
        ):
            pass
    error = raised.value
    while error is not None and not isinstance(error, pydantic.ValidationError):
        error = error.__cause__ or error.__context__
    assert isinstance(error, pydantic.ValidationError), raised.value
    [found] = error.errors()
    line = found["msg"].removeprefix("Value error, ")
    assert "\n" not in line and found["type"] == "value_error"
    for part in named:
        assert part in line, line


def test_an_action_named_as_before_is_taken_with_a_deprecation_warning() -> None:
    """`log_cleanup` and `row_tracking` were the Dagster names of cleanup and
    enable_row_tracking: YAML written with them still loads, and says what to write now."""
    with pytest.warns(FutureWarning, match="'log_cleanup' is deprecated.*'cleanup'"):
        settings = MaintenanceSettings.parse(actions=["checkpoint", "log_cleanup", "cleanup"])
    assert settings.actions == ("checkpoint", "cleanup")
    with pytest.warns(FutureWarning, match="'log_cleanup' is deprecated"):
        assert PlannerBudget.parse({"max_per_action": {"log_cleanup": 2}}).max_per_action == {
            "cleanup": 2
        }
