"""The demo's maintenance (`scripts/demo.py`, `make demo`) takes the path the schedule and the
commit sensor take: the schedule's tick decides, and each request runs as the maintenance asset
job. Run here on the demo code location (definitions.py) over a temporary warehouse whose
`events` table is written by delta-ops' writer instead of Spark (the Spark-written demo runs in
test_demo_location.py), then checked through Dagster's events, the table as deltalake and
DuckDB read it, and the operation history read back by DuckDB: one row per action run.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import dagster as dg
import pyarrow as pa
import pytest

from delta_ops.table.writer import write_arrow
from demo_pipeline import CRASHED_FILE
from tests.support import REPO, deltalake_rows, duckdb_connection, duckdb_rows, module_from_file

ACTIONS = ("checkpoint", "cleanup", "vacuum")
#: the history names an operation as the CLI does
OPERATION = {"checkpoint": "checkpoint", "cleanup": "cleanup", "vacuum": "vacuum"}


def demo_script() -> ModuleType:
    return module_from_file("demo_script", REPO / "scripts" / "demo.py")


def append_events(table: Path, batch: int) -> None:
    """A batch shaped like the demo's Spark batch (partitioned by day)."""
    rows = 30
    write_arrow(
        table,
        pa.table(
            {
                "user_id": pa.array([batch * rows + i for i in range(rows)], pa.int64()),
                "day": [f"2026-11-{20 + i % 3:02d}" for i in range(rows)],
            }
        ),
        partition_by=["day"],
        # as the demo pipeline creates its table (definitions.py)
        configuration={"delta.checkpointInterval": "3"} if batch == 0 else None,
    )


@pytest.fixture
def location(tmp_path, monkeypatch):
    """definitions.py imported with its warehouse in tmp_path (it reads the env at import)."""
    monkeypatch.setenv("DELTA_OPS_WAREHOUSE", str(tmp_path / "warehouse"))
    monkeypatch.syspath_prepend(str(REPO))
    sys.modules.pop("definitions", None)
    module = importlib.import_module("definitions")
    yield module
    sys.modules.pop("definitions", None)


def history_rows(history: Path) -> list[tuple]:
    con = duckdb_connection()
    try:
        return con.sql(
            "SELECT table_name, operation, status, front_end"
            f" FROM delta_scan('{history}') ORDER BY start_time"
        ).fetchall()
    finally:
        con.close()


def maintenance_events(results: list[dg.ExecuteInProcessResult]) -> list[tuple[tuple, str]]:
    """(asset key, materialized|observed) of every asset event the runs recorded, in order."""
    verbs = {"ASSET_MATERIALIZATION": "materialized", "ASSET_OBSERVATION": "observed"}
    return [
        (tuple(event.asset_key.path), verbs[event.event_type_value])
        for result in results
        for event in result.all_events
        if event.event_type_value in verbs
    ]


def key(action: str) -> tuple:
    return ("delta_maintenance", "warehouse", "events", action)


def test_the_demo_maintains_through_the_schedule_path_and_the_history_has_each_run(
    location, tmp_path
):
    script = demo_script()
    table = Path(location.EVENTS_TABLE)
    for batch in range(3):
        append_events(table, batch)
    script.let_time_pass(table)
    append_events(table, 3)
    lines: list[str] = []
    home = tmp_path / "dagster_home"
    home.mkdir()
    with dg.DagsterInstance.local_temp(str(home)) as instance:
        results = script.run_maintenance(location.defs, instance, say=lines.append)
        assert results, "\n".join(lines)
        runs = instance.get_runs()
    # one request for the table, with the three actions, run as the maintenance asset job
    [run] = runs
    assert run.job_name == "warehouse_maintenance_assets_job"
    assert run.tags["dagster/schedule_name"] == "warehouse_maintenance_schedule"
    assert run.tags["delta_ops/table"] == "events"
    # every action is recorded on its own maintenance asset, none on the table's asset
    events = maintenance_events(results)
    assert events == [(key(a), "materialized") for a in ACTIONS], events
    # and did its work: the old commits and the crashed write's file are gone, no row is
    log = table / "_delta_log"
    assert not any((log / f"{v:020d}.json").exists() for v in range(3)), sorted(log.iterdir())
    assert (log / "00000000000000000003.checkpoint.parquet").exists()
    assert not (table / CRASHED_FILE).exists()
    assert len(deltalake_rows(table)) == len(duckdb_rows(table)) == 4 * 30
    # the history holds one row per operation run, in the order they ran
    history = table.parent / "_delta_ops_history"
    status = {"materialized": "succeeded", "observed": "skipped"}
    assert history_rows(history) == [
        ("events", OPERATION[k[-1]], status[verb], "dagster") for k, verb in events
    ]


def test_every_tick_s_runs_add_one_history_row_per_action_run(location, tmp_path):
    """Two ticks (the second finds what the first left and a batch after it: vacuum's own
    commits and the batch reach the checkpoint interval): the history holds exactly the runs
    of both, in order."""
    script = demo_script()
    table = Path(location.EVENTS_TABLE)
    for batch in range(3):
        append_events(table, batch)
    script.let_time_pass(table)
    append_events(table, 3)
    (tmp_path / "home").mkdir()
    with dg.DagsterInstance.local_temp(str(tmp_path / "home")) as instance:
        first = script.run_maintenance(location.defs, instance, say=lambda _: None)
        # vacuum's two commits and one more batch: the interval (3) of commits since the
        # checkpoint, so the second tick has a checkpoint due
        append_events(table, 4)
        second = script.run_maintenance(location.defs, instance, say=lambda _: None)
        assert len(instance.get_runs()) == len(first) + len(second)
    assert first and second is not None
    events = maintenance_events([*first, *second])
    assert len(events) > len(ACTIONS)
    status = {"materialized": "succeeded", "observed": "skipped"}
    assert history_rows(table.parent / "_delta_ops_history") == [
        ("events", OPERATION[k[-1]], status[verb], "dagster") for k, verb in events
    ]
