"""The planner-driven maintenance schedule (`delta_ops.dagster.planned_schedule`): with a
``planner`` budget in the component's YAML, a tick (Dagster's schedule evaluation API) asks the
fleet planner which tables and actions to run and requests runs for those only, each tagged
with the planner's reason; the runs are executed for real and checked on disk. Without the
budget the same lake gets a run for every table with work, as before."""

import datetime as dt
import os
import time
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pytest
from dagster.components.testing import create_defs_folder_sandbox
from deltalake import DeltaTable

from delta_ops import clock
from delta_ops.dagster import DeltaMaintenanceComponent
from delta_ops.dagster.planned_schedule import PRIORITY_TAG, RANK_TAG, REASON_TAG
from delta_ops.ops.engines import Spread
from delta_ops.service.fleet import fleet_from_warehouse, plan_fleet
from delta_ops.table.writer import write_arrow

TYPE = "delta_ops.dagster.DeltaMaintenanceComponent"
WHEN = dt.datetime(2026, 1, 2, 3, 0, tzinfo=dt.UTC)
#: commits per table (the default checkpoint interval is 10): three overdue, one quiet
COMMITS = {"lag12": 12, "lag25": 25, "lag40": 40, "quiet": 2}
#: a table more overdue than any, whose settings leave the checkpoint out
NO_CHECKPOINT = "no_checkpoint"


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("planned") / "warehouse"
    for name, commits in {**COMMITS, NO_CHECKPOINT: 50}.items():
        for i in range(commits):
            write_arrow(root / name, pa.table({"id": pa.array([i], pa.int64())}))
    return root


def commits_since_checkpoint(table: Path) -> int:
    """As deltalake reads the table (no checkpoint yet: every version)."""
    return DeltaTable(str(table)).version() + 1


def tick(
    attributes: dict, warehouse: Path, run: bool = False, tables: list[dict] | None = None
) -> list[dg.RunRequest]:
    """One tick of the component's maintenance schedule over the warehouse (`tables`: listed
    with settings of their own; default: the one leaving the checkpoint out); with `run`, each
    requested run is executed as the daemon would launch it."""
    if tables is None:
        tables = [
            {"name": NO_CHECKPOINT, "url": str(warehouse / NO_CHECKPOINT), "actions": ["vacuum"]}
        ]
    with create_defs_folder_sandbox() as sandbox:
        path = sandbox.scaffold_component(
            component_cls=DeltaMaintenanceComponent,
            defs_path="lake",
            defs_yaml_contents={
                "type": TYPE,
                "attributes": {
                    "name": "lake",
                    "warehouse": str(warehouse),
                    "history": False,
                    "tables": tables,
                    **attributes,
                },
            },
        )
        with sandbox.load_component_and_build_defs(defs_path=path) as (_, defs):
            schedule = defs.resolve_schedule_def("lake_maintenance_schedule")
            resources = {"lake_delta_maintenance": defs.resources["lake_delta_maintenance"]}
            data = schedule.evaluate_tick(
                dg.build_schedule_context(scheduled_execution_time=WHEN, resources=resources)
            )
            requests = list(data.run_requests or [])
            if run:
                job = defs.resolve_job_def("lake_maintenance_assets_job")
                for request in requests:
                    result = job.execute_in_process(
                        asset_selection=request.asset_selection,
                        tags=request.tags,
                        instance=dg.DagsterInstance.ephemeral(),
                    )
                    assert result.success
                    assert result.dagster_run.tags[REASON_TAG] == request.tags[REASON_TAG]
    return requests


def by_table(requests: list[dg.RunRequest]) -> dict[str, dg.RunRequest]:
    return {r.tags["delta_ops/table"]: r for r in requests}


def most_overdue(warehouse: Path, n: int) -> set[str]:
    """The `n` tables with the most commits since a checkpoint, among those whose settings
    let the checkpoint run."""
    lagging = [t for t in COMMITS if commits_since_checkpoint(warehouse / t) >= 10]
    ranked = sorted(lagging, key=lambda t: -commits_since_checkpoint(warehouse / t))
    return set(ranked[:n])


def test_without_a_planner_every_table_with_work_gets_a_run(warehouse):
    """Without a budget the schedule runs every table with something due, by the same rule
    as the planner (a checkpoint once delta.checkpointInterval commits piled up): the quiet
    table, under its interval, gets no run."""
    requests = by_table(tick({}, warehouse))
    assert set(requests) == {t for t in COMMITS if commits_since_checkpoint(warehouse / t) >= 10}
    # (the table whose settings leave the checkpoint out is the planner's only other choice)
    assert set(requests) == {
        c.assessment.name for c in plan_fleet(
            fleet_from_warehouse(str(warehouse)), clock.now_ms(), spread=Spread.THREADS
        ).chosen
    } - {"no_checkpoint"}  # fmt: skip
    assert all(REASON_TAG not in r.tags for r in requests.values())


def test_the_budget_on_tables_leaves_the_lesser_ones_out(warehouse):
    requests = by_table(tick({"planner": {"max_tables": 2}}, warehouse))
    assert set(requests) == most_overdue(warehouse, 2)
    for name, request in requests.items():
        reason = request.tags[REASON_TAG]
        commits = commits_since_checkpoint(warehouse / name)
        assert f"checkpoint: {commits} commits since the last (interval 10)" in reason
        assert [k.path[-1] for k in request.asset_selection or []] == ["checkpoint"]
        assert request.run_key == f"{name}:{WHEN:%Y-%m-%d}"
    ranks = {name: int(r.tags[RANK_TAG]) for name, r in requests.items()}
    priorities = {name: float(r.tags[PRIORITY_TAG]) for name, r in requests.items()}
    by_rank = sorted(ranks, key=ranks.__getitem__)
    assert by_rank == sorted(priorities, key=lambda n: -priorities[n])
    assert by_rank == sorted(by_rank, key=lambda n: -commits_since_checkpoint(warehouse / n))


def test_the_budget_per_action_limits_each_action(warehouse):
    requests = by_table(tick({"planner": {"max_per_action": {"checkpoint": 1}}}, warehouse))
    assert set(requests) == most_overdue(warehouse, 1)


def test_the_chosen_runs_maintain_only_the_chosen_tables(tmp_path):
    warehouse = tmp_path / "warehouse"
    for name, commits in {**COMMITS, NO_CHECKPOINT: 50}.items():
        for i in range(commits):
            write_arrow(warehouse / name, pa.table({"id": pa.array([i], pa.int64())}))
    chosen = most_overdue(warehouse, 2)
    requests = tick({"planner": {"max_tables": 2}}, warehouse, run=True)
    assert {r.tags["delta_ops/table"] for r in requests} == chosen
    checkpointed = {
        t.name for t in warehouse.iterdir() if list((t / "_delta_log").glob("*.checkpoint.parquet"))
    }
    assert checkpointed == chosen


def test_the_planner_judges_vacuum_with_the_tables_retention(tmp_path):
    """Two tables alike, each with a two-hour-old orphan: with 0 days of file retention
    (forced) the planner finds vacuum work and the run deletes the orphan; with the table's
    own 7 days it finds none."""
    warehouse = tmp_path / "warehouse"
    for name in ("scratch", "kept"):
        write_arrow(warehouse / name, pa.table({"id": pa.array([1], pa.int64())}))
        orphan = warehouse / name / "orphan.parquet"
        orphan.write_bytes(b"no commit names it")
        stamp = time.time() - 2 * 3600
        os.utime(orphan, (stamp, stamp))
    tables = [
        {"name": "scratch", "url": str(warehouse / "scratch"), "actions": ["vacuum"],
         "file_retention": "0 days", "vacuum_force": True},
        {"name": "kept", "url": str(warehouse / "kept"), "actions": ["vacuum"]},
    ]  # fmt: skip
    requests = tick({"planner": {"max_tables": 5}}, warehouse, run=True, tables=tables)
    [request] = requests
    assert request.tags["delta_ops/table"] == "scratch"
    assert request.tags[REASON_TAG].startswith("vacuum: ")
    assert not (warehouse / "scratch" / "orphan.parquet").exists()
    assert (warehouse / "kept" / "orphan.parquet").exists()
