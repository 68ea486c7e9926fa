"""`StateBackedDeltaMaintenanceComponent` built from a ``defs.yaml`` the way Dagster's component
testing utilities build one (`create_defs_folder_sandbox`): the warehouse's tables come from
the component state once it is refreshed (a table added later appears only after the next
refresh), are found at load while there is no state, and a run of the state-built definitions
maintains the table and records it in the warehouse's operation history. The example project
(examples/dagster_lake) passes `dg check defs`."""

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pyarrow as pa
from dagster.components.testing import create_defs_folder_sandbox

from delta_ops.dagster import StateBackedDeltaMaintenanceComponent
from delta_ops.table.writer import write_arrow
from tests.support import REPO, deltalake_rows

TYPE = "delta_ops.dagster.StateBackedDeltaMaintenanceComponent"
EXAMPLE = REPO / "examples" / "dagster_lake"


def _table(path: Path, commits: int = 2) -> Path:
    for i in range(commits):
        write_arrow(path, pa.table({"id": pa.array([i], pa.int64())}))
    return path


def _tables(defs: dg.Definitions) -> set[str]:
    """The tables the definitions maintain (from their checkpoint assets' keys)."""
    return {
        key.path[-2]
        for key in defs.resolve_all_asset_keys()
        if key.path[0] == "delta_maintenance" and key.path[-1] == "checkpoint"
    }


def _scaffold(sandbox, warehouse: Path, **attributes) -> Path:
    return sandbox.scaffold_component(
        component_cls=StateBackedDeltaMaintenanceComponent,
        defs_path="lake",
        defs_yaml_contents={
            "type": TYPE,
            "attributes": {"name": "lake", "warehouse": str(warehouse), **attributes},
        },
    )


def test_tables_come_from_the_state_until_it_is_refreshed(tmp_path):
    warehouse = tmp_path / "warehouse"
    _table(warehouse / "events")
    _table(warehouse / "sales" / "orders")
    with create_defs_folder_sandbox() as sandbox:
        path = _scaffold(sandbox, warehouse)
        with sandbox.load_component_and_build_defs(defs_path=path) as (component, defs):
            assert isinstance(component, StateBackedDeltaMaintenanceComponent)
            assert component.defs_state_config.key == "DeltaMaintenanceComponent[lake]"
            # no state yet: found at load, as the plain component does
            assert _tables(defs) == {"events", "sales__orders"}
            asyncio.run(component.refresh_state(sandbox.project_root))
        [state_file] = sandbox.project_root.rglob(".local_defs_state/*/state")
        state = json.loads(state_file.read_text())
        assert state["warehouse"] == str(warehouse)
        assert sorted(t["name"] for t in state["tables"]) == ["events", "sales__orders"]

        _table(warehouse / "clicks")  # a new table: not in the state
        with sandbox.load_component_and_build_defs(defs_path=path) as (component, defs):
            assert _tables(defs) == {"events", "sales__orders"}
            asyncio.run(component.refresh_state(sandbox.project_root))  # on request
        with sandbox.load_component_and_build_defs(defs_path=path) as (component, defs):
            assert _tables(defs) == {"events", "sales__orders", "clicks"}
            # the state-built definitions maintain a table and record the run in the
            # warehouse's history, where the plain component records it
            job = defs.resolve_job_def("lake_checkpoint_job")
            result = job.execute_in_process(
                run_config={"ops": {"lake_checkpoint": {"config": {"tables": ["clicks"]}}}},
                instance=dg.DagsterInstance.ephemeral(),
            )
            assert result.success
    assert (warehouse / "clicks" / "_delta_log" / f"{1:020d}.checkpoint.parquet").exists()
    history = deltalake_rows(warehouse / "_delta_ops_history")
    assert [(r["table_name"], r["operation"], r["status"]) for r in history] == [
        ("clicks", "checkpoint", "succeeded")
    ]


def test_state_of_another_warehouse_is_not_used(tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    _table(first / "a")
    _table(second / "b")
    with create_defs_folder_sandbox() as sandbox:
        path = _scaffold(sandbox, first)
        with sandbox.load_component_and_build_defs(defs_path=path) as (component, _):
            asyncio.run(component.refresh_state(sandbox.project_root))
        path = _scaffold(sandbox, second)  # the YAML now names another root
        with sandbox.load_component_and_build_defs(defs_path=path) as (_, defs):
            assert _tables(defs) == {"b"}


def test_dg_check_defs_passes_on_the_example_project(tmp_path):
    """`dg check defs` (Dagster's CLI, from this venv) on a copy of the example project, its
    warehouse holding two tables; then `dg utils refresh-defs-state` writes the state."""
    project = tmp_path / "dagster_lake"
    shutil.copytree(
        EXAMPLE, project, ignore=shutil.ignore_patterns("__pycache__", ".local_defs_state")
    )
    _table(project / "warehouse" / "events")
    _table(project / "warehouse" / "orders")
    dg_cli = str(Path(sys.executable).with_name("dg"))
    # the example is not installed: its package is found on PYTHONPATH, after this checkout's
    # delta_ops (which the venv may have installed from another checkout)
    path = os.pathsep.join([str(project / "src"), str(REPO)])
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path / "home"), "PYTHONPATH": path}
    (tmp_path / "home").mkdir()

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [dg_cli, *args], cwd=project, capture_output=True, text=True, check=False, env=env
        )

    checked = run("check", "defs")
    assert checked.returncode == 0, (checked.stdout + checked.stderr)[-3000:]
    assert "All definitions loaded successfully" in checked.stdout + checked.stderr
    refreshed = run("utils", "refresh-defs-state")
    assert refreshed.returncode == 0, (refreshed.stdout + refreshed.stderr)[-3000:]
    [state_file] = project.rglob(".local_defs_state/*/state")
    names = sorted(t["name"] for t in json.loads(state_file.read_text())["tables"])
    assert names == ["events", "orders"]
