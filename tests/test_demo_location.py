"""The demo code location (definitions.py) on a temporary warehouse: validated by Dagster's own
CLI, the PySpark pipeline job and the maintenance job run in process on the Spark-written
table, and a commit by the Spark writer triggers the commit sensor."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from delta_ops.table.snapshot import load_snapshot
from tests.support import REPO, deltalake_rows, duckdb_rows


def test_dagster_definitions_validate_passes(tmp_path):
    dagster = Path(sys.executable).with_name("dagster")
    result = subprocess.run(
        [str(dagster), "definitions", "validate", "-w", "workspace.yaml"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
        env={
            **__import__("os").environ,
            "DAGSTER_HOME": str(tmp_path),
            "DELTA_OPS_WAREHOUSE": str(tmp_path / "wh"),
        },
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "All code locations passed validation" in result.stdout + result.stderr


@pytest.fixture
def demo(tmp_path, monkeypatch, spark):
    """definitions.py imported with its warehouse in tmp_path (it reads the env at import)."""
    monkeypatch.setenv("DELTA_OPS_WAREHOUSE", str(tmp_path / "warehouse"))
    monkeypatch.syspath_prepend(str(REPO))
    sys.modules.pop("definitions", None)
    module = importlib.import_module("definitions")
    yield module
    sys.modules.pop("definitions", None)


@pytest.mark.spark
def test_pipeline_then_maintenance_on_the_demo_table(demo):
    pipeline = demo.defs.resolve_job_def("events_pipeline_job")
    for _ in range(2):
        result = pipeline.execute_in_process(
            run_config={"ops": {"events": {"config": {"rows": 40, "days": 2}}}}
        )
        assert result.success
    table = demo.EVENTS_TABLE
    snapshot = load_snapshot(table)
    assert snapshot.version == 1 and snapshot.num_records == 80
    assert snapshot.partition_columns == ("day",)
    assert len(deltalake_rows(table)) == len(duckdb_rows(table)) == 80

    maintenance = demo.defs.resolve_job_def("warehouse_maintenance_job")
    result = maintenance.execute_in_process()
    assert result.success
    observed = {}
    for event in result.get_asset_observation_events():
        meta = event.asset_observation_data.asset_observation.metadata
        assert event.asset_key == demo.EVENTS_KEY
        observed[meta["action"].value] = {k: getattr(v, "value", v) for k, v in meta.items()}
    assert list(observed) == ["checkpoint", "log_cleanup", "vacuum"]
    assert observed["checkpoint"]["version"] == 1
    assert (Path(table) / "_delta_log" / "00000000000000000001.checkpoint.parquet").exists()
    assert "skipped" in observed["log_cleanup"] and "skipped" in observed["vacuum"]  # young table
    assert load_snapshot(table).segment.checkpoint_version == 1
    assert len(deltalake_rows(table)) == 80


@pytest.mark.spark
def test_a_spark_commit_triggers_the_commit_sensor(demo, spark):
    from delta_ops.spark import write_delta

    table = str(demo.EVENTS_TABLE)
    df = spark.createDataFrame([(1, "a")], "id long, day string")
    write_delta(df, table, configuration={"delta.checkpointInterval": "2"})
    sensor = demo.defs.resolve_sensor_def("warehouse_commit_sensor")
    resources = {"warehouse_delta_maintenance": demo.defs.resources["warehouse_delta_maintenance"]}
    with dg.build_sensor_context(
        resources=resources, instance=dg.DagsterInstance.ephemeral()
    ) as context:
        first = sensor.evaluate_tick(context)
    assert first.run_requests == [] and first.skip_message
    cursor = first.cursor
    write_delta(df, table)  # version 1: two commits since no checkpoint -> due
    with dg.build_sensor_context(
        cursor=cursor, resources=resources, instance=dg.DagsterInstance.ephemeral()
    ) as context:
        second = sensor.evaluate_tick(context)
    [request] = second.run_requests
    assert request.run_key == "events:1"
    assert request.asset_selection == [
        dg.AssetKey(["delta_maintenance", "warehouse", "events", "checkpoint"])
    ]
    assert json.loads(second.cursor)["events"]["version"] == 1
