"""Dagster records every maintenance run in the operation history by default: in the
warehouse's ``_delta_ops_history`` (or the folder holding the fleet's tables), one row per
action and table, failures and skips included; ``history=False`` records nothing."""

from pathlib import Path

import dagster as dg
import pyarrow as pa

from delta_ops.dagster import DeltaMaintenanceResource, DeltaTableTarget
from delta_ops.dagster import build_delta_maintenance_defs as build
from delta_ops.table.writer import write_arrow
from tests.support import duckdb_connection

NAME = "h"


def _table(path: Path) -> Path:
    for i in range(3):
        write_arrow(path, pa.table({"id": pa.array([i], pa.int64())}))
    return path


def _run(defs: dg.Definitions, action: str, config: dict | None = None) -> bool:
    job = defs.resolve_job_def(f"{NAME}_{action}_job")
    result = job.execute_in_process(
        run_config={"ops": {f"{NAME}_{action}": {"config": config or {}}}},
        instance=dg.DagsterInstance.ephemeral(),
        raise_on_error=False,
    )
    return result.success


def _rows(history: Path) -> list[tuple]:
    con = duckdb_connection()
    try:
        return con.sql(
            "SELECT table_name, operation, status, front_end, error"
            f" FROM delta_scan('{history}') ORDER BY start_time, table_name"
        ).fetchall()
    finally:
        con.close()


def test_a_warehouse_fleet_records_each_run_in_the_warehouses_history(tmp_path):
    warehouse = tmp_path / "warehouse"
    _table(warehouse / "a")
    _table(warehouse / "sales" / "b")
    defs = build(str(warehouse), name=NAME)
    assert _run(defs, "checkpoint")
    assert _run(defs, "checkpoint")  # checkpointed already: skipped, and recorded so
    assert not _run(defs, "vacuum", {"retention": "1h"})  # refused: fails on the first table
    rows = _rows(warehouse / "_delta_ops_history")
    assert [r[:4] for r in rows] == [
        ("a", "checkpoint", "succeeded", "dagster"),
        ("sales__b", "checkpoint", "succeeded", "dagster"),
        ("a", "checkpoint", "skipped", "dagster"),
        ("sales__b", "checkpoint", "skipped", "dagster"),
        ("a", "vacuum", "failed", "dagster"),
    ]
    assert rows[-1][4].startswith("RetentionTooShort")


def test_listed_tables_share_the_folder_that_holds_them_and_history_can_be_off(tmp_path):
    tables = [DeltaTableTarget("x", str(_table(tmp_path / "lake" / "x")))]
    assert _run(build(tables, name=NAME), "checkpoint")
    assert [r[:3] for r in _rows(tmp_path / "lake" / "_delta_ops_history")] == [
        ("x", "checkpoint", "succeeded")
    ]
    again = [DeltaTableTarget("y", str(_table(tmp_path / "other" / "y")))]
    assert _run(build(again, name=NAME, history=False), "checkpoint")
    assert not (tmp_path / "other" / "_delta_ops_history").exists()
    own = DeltaMaintenanceResource(history_location=str(tmp_path / "mine"))
    assert _run(build(again, name=NAME, resource=own), "log_cleanup")
    assert [r[:3] for r in _rows(tmp_path / "mine")] == [("y", "cleanup", "skipped")]
