"""`DeltaMaintenanceComponent` built from a ``defs.yaml`` the way Dagster's component testing
utilities build one (`dagster.components.testing.create_defs_folder_sandbox`): the YAML's
tables (or warehouse) become the factory's maintenance definitions, a run of them maintains
the table and records it in the operation history, and a value from the environment reaches
the resource through Dagster's templating."""

from pathlib import Path

import dagster as dg
import pyarrow as pa
from dagster.components.testing import create_defs_folder_sandbox

from delta_ops.dagster import DeltaMaintenanceComponent
from delta_ops.table.writer import write_arrow
from tests.support import deltalake_rows

TYPE = "delta_ops.dagster.DeltaMaintenanceComponent"


def _table(path: Path, commits: int = 12) -> Path:
    for i in range(commits):
        write_arrow(path, pa.table({"id": pa.array([i], pa.int64())}))
    return path


def _write_defs(sandbox, name: str, attributes: dict) -> Path:
    return sandbox.scaffold_component(
        component_cls=DeltaMaintenanceComponent,
        defs_path=name,
        defs_yaml_contents={"type": TYPE, "attributes": attributes},
    )


def test_a_warehouse_declared_in_yaml_is_maintained(tmp_path, monkeypatch):
    warehouse = tmp_path / "warehouse"
    _table(warehouse / "events")
    _table(warehouse / "sales" / "orders", 2)
    monkeypatch.setenv("LAKE_OPTION", "from-env")
    with create_defs_folder_sandbox() as sandbox:
        path = _write_defs(
            sandbox,
            "lake",
            {
                "name": "lake",
                "warehouse": str(warehouse),
                "storage_options": {"probe": "{{ env.LAKE_OPTION }}"},
                "maintenance_cron": "0 4 * * *",
            },
        )
        with sandbox.load_component_and_build_defs(defs_path=path) as (component, defs):
            assert isinstance(component, DeltaMaintenanceComponent)
            assert component.storage_options == {"probe": "from-env"}
            schedule = defs.resolve_schedule_def("lake_maintenance_schedule")
            assert schedule.cron_schedule == "0 4 * * *"
            keys = {k.to_user_string() for k in defs.resolve_all_asset_keys()}
            assert "delta_maintenance/lake/events/checkpoint" in keys
            assert "delta_maintenance/lake/sales__orders/vacuum" in keys
            job = defs.resolve_job_def("lake_checkpoint_job")
            result = job.execute_in_process(
                run_config={"ops": {"lake_checkpoint": {"config": {"tables": ["events"]}}}},
                instance=dg.DagsterInstance.ephemeral(),
                resources={"lake_delta_maintenance": _local_resource(defs)},
            )
            assert result.success
    assert (warehouse / "events" / "_delta_log" / f"{11:020d}.checkpoint.parquet").exists()
    history = deltalake_rows(warehouse / "_delta_ops_history")
    assert [(r["table_name"], r["operation"], r["status"]) for r in history] == [
        ("events", "checkpoint", "succeeded")
    ]


def _local_resource(defs: dg.Definitions):
    """The component's resource without the templated option (a local table opens without
    storage options): what it was built with is checked above."""
    resource = defs.resources["lake_delta_maintenance"]
    return type(resource)(**{**resource.model_dump(), "storage_options": {}})


def test_listed_tables_and_their_settings_come_from_the_yaml(tmp_path):
    events = _table(tmp_path / "lake" / "events", 2)
    with create_defs_folder_sandbox() as sandbox:
        path = _write_defs(
            sandbox,
            "listed",
            {
                "name": "listed",
                "tables": [{"name": "ev", "url": str(events), "enable_row_tracking": True}],
                "row_tracking_cron": "0 5 * * 0",
                "commit_sensor": False,
                "history": False,
            },
        )
        with sandbox.load_component_and_build_defs(defs_path=path) as (component, defs):
            [target] = component.targets()
            assert (target.name, target.url, target.enable_row_tracking) == (
                "ev",
                str(events),
                True,
            )
            names = {s.name for s in defs.sensors}
            assert "listed_commit_sensor" not in names
            assert defs.resolve_schedule_def("listed_row_tracking_schedule").cron_schedule == (
                "0 5 * * 0"
            )
            assert defs.resources["listed_delta_maintenance"].history is False
