"""The demo code location (definitions.py) on a temporary warehouse: validated by Dagster's own
CLI, the PySpark pipeline job and the maintenance job run in process on the Spark-written
table, and a commit by the Spark writer triggers the commit sensor."""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from delta_ops.table.snapshot import load_snapshot
from demo_pipeline import CRASHED_FILE
from tests.support import REPO, deltalake_rows, duckdb_rows


def _dagster_cli(tool: str, args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """Run a Dagster command line (`dagster`, `dg`) from the venv on the demo code location,
    with a throwaway instance and warehouse."""
    return subprocess.run(
        [str(Path(sys.executable).with_name(tool)), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
        env={
            **os.environ,
            "DAGSTER_HOME": str(tmp_path),
            "DELTA_OPS_WAREHOUSE": str(tmp_path / "wh"),
        },
    )


def test_dagster_definitions_validate_passes(tmp_path):
    result = _dagster_cli("dagster", ["definitions", "validate", "-w", "workspace.yaml"], tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "All code locations passed validation" in result.stdout + result.stderr


def test_dg_finds_and_loads_the_same_code_location(tmp_path):
    """`dg` (Dagster's current CLI) reads pyproject's [tool.dg] and loads definitions.py."""
    result = _dagster_cli("dg", ["check", "defs"], tmp_path)
    assert result.returncode == 0, (result.stdout + result.stderr)[-2000:]
    assert "All definitions loaded successfully" in result.stdout + result.stderr


def test_the_demo_instance_lives_in_the_project_folder():
    config = REPO / ".dagster" / "dagster.yaml"
    assert config.is_file()
    makefile = (REPO / "Makefile").read_text()
    assert "DAGSTER_HOME=$(CURDIR)/.dagster $(BIN)/python scripts/demo.py" in makefile
    assert "DAGSTER_HOME=$(CURDIR)/.dagster $(BIN)/dg dev" in makefile


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
    for run in range(2):
        result = pipeline.execute_in_process(
            run_config={"ops": {"events": {"config": {"rows": 40, "days": 2}}}}
        )
        assert result.success
        # the asset reads its own table back through spark.read.format("delta")
        [materialization] = result.get_asset_materialization_events()
        meta = materialization.step_materialization_data.materialization.metadata
        assert meta["dagster/row_count"].value == 40 * (run + 1)
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
    assert list(observed) == ["checkpoint", "cleanup", "vacuum"]
    assert observed["checkpoint"]["version"] == 1
    assert (Path(table) / "_delta_log" / "00000000000000000001.checkpoint.parquet").exists()
    assert "skipped" in observed["cleanup"] and "skipped" in observed["vacuum"]  # young table
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


@pytest.mark.spark
def test_the_demo_shows_cleanup_and_vacuum_doing_real_work(demo, tmp_path):
    spec = importlib.util.spec_from_file_location("demo_script", REPO / "scripts" / "demo.py")
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    home = tmp_path / "dagster_home"
    home.mkdir()
    lines: list[str] = []
    table = Path(demo.EVENTS_TABLE)
    with dg.DagsterInstance.local_temp(str(home)) as instance:
        assert script.run_demo(demo.defs, table, instance, say=lines.append), "\n".join(lines)
    log = table / "_delta_log"
    # cleanup: the commits dated 40 days back are gone, the checkpoint that replaces them stays
    assert not any((log / f"{v:020d}.json").exists() for v in range(3)), sorted(log.iterdir())
    assert (log / "00000000000000000003.checkpoint.parquet").exists()
    # vacuum: the crashed write's file is gone, every row is still there
    assert not (table / CRASHED_FILE).exists()
    assert len(deltalake_rows(table)) == len(duckdb_rows(table)) == 4 * 300
    text = "\n".join(lines)
    assert "cleanup" in text and "vacuum" in text and "num_deleted" in text, text
    # the runs were recorded in the instance's folder: a new instance there sees all five
    with dg.DagsterInstance.local_temp(str(home)) as again:
        assert len(again.get_runs()) == 5


def test_the_demo_pipeline_can_run_on_a_delta_spark_session(monkeypatch) -> None:
    """DELTA_OPS_DEMO_ENGINE=delta-spark (`make demo-delta-spark`, its own virtualenv with the
    reference engine's PySpark and delta-spark) adds Delta Spark's jars, extension and catalog
    to the pipeline's session; where delta-spark is not installed (this virtualenv) importing
    the code location says what to run. The default adds nothing: `make demo` needs no jars."""
    monkeypatch.syspath_prepend(str(REPO))
    monkeypatch.delenv("DELTA_OPS_DEMO_ENGINE", raising=False)
    sys.modules.pop("definitions", None)
    try:
        module = importlib.import_module("definitions")
        assert module.ENGINE == "spark" and module.engine_conf("spark") == {}
        assert "spark.jars.packages" not in module.SPARK.spark_config
        with pytest.raises(RuntimeError, match="make demo-delta-spark"):
            module.engine_conf("delta-spark")
        with pytest.raises(ValueError, match="spark or delta-spark"):
            module.engine_conf("delta")
        monkeypatch.setattr(module, "version", lambda name: {"delta-spark": "4.4.0"}[name])
        monkeypatch.setattr("pyspark.__version__", "4.2.0")
        conf = module.engine_conf("delta-spark")
        assert conf["spark.jars.packages"] == "io.delta:delta-spark_4.2_2.13:4.4.0"
        assert conf["spark.sql.extensions"] == "io.delta.sql.DeltaSparkSessionExtension"
        assert conf["spark.jars.ivy"] == str(REPO / "build" / "ivy")
    finally:
        sys.modules.pop("definitions", None)
    makefile = (REPO / "Makefile").read_text()
    assert "DELTA_OPS_DEMO_ENGINE=delta-spark" in makefile
