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
    assert _run(build(again, name=NAME, resource=own), "cleanup")
    assert [r[:3] for r in _rows(tmp_path / "mine")] == [("y", "cleanup", "skipped")]


def _show_history(defs: dg.Definitions, last: int) -> dict:
    """Materialize the fleet's history asset; its metadata as plain values."""
    key = dg.AssetKey(["delta_maintenance", NAME, "operation_history"])
    result = dg.materialize(
        [defs.resolve_assets_def(key)],  # with the fleet's resource bound
        run_config={"ops": {f"{NAME}__operation_history": {"config": {"last": last}}}},
        instance=dg.DagsterInstance.ephemeral(),
    )
    assert result.success
    [event] = result.get_asset_materialization_events()
    assert event.asset_key == key
    meta = event.step_materialization_data.materialization.metadata
    return {k: v.value for k, v in meta.items()}


def test_the_history_asset_shows_what_duckdb_reads_from_the_history(tmp_path):
    warehouse = tmp_path / "warehouse"
    _table(warehouse / "a")
    _table(warehouse / "b")
    defs = build(str(warehouse), name=NAME)
    empty = _show_history(defs, last=5)  # nothing recorded yet: no table, no runs
    assert empty["dagster/row_count"] == 0 and empty["counts"] == {}
    assert _run(defs, "checkpoint")
    assert _run(defs, "checkpoint")
    assert not _run(defs, "vacuum", {"retention": "1h"})
    shown = _show_history(defs, last=2)

    history = warehouse / "_delta_ops_history"
    con = duckdb_connection()
    try:
        scan = f"delta_scan('{history}')"
        counts: dict = {}
        for operation, status, n in con.sql(
            f"SELECT operation, status, count(*) FROM {scan} GROUP BY ALL"
        ).fetchall():
            counts.setdefault(operation, {})[status] = n
        total = con.sql(f"SELECT count(*) FROM {scan}").fetchone()[0]
        newest = con.sql(
            f"SELECT operation_id, error FROM {scan} ORDER BY start_time DESC, operation_id LIMIT 2"
        ).fetchall()
    finally:
        con.close()
    assert shown["dagster/row_count"] == total == 5
    assert shown["counts"] == counts
    assert (shown["succeeded"], shown["skipped"], shown["failed"]) == (2, 2, 1)
    assert shown["last_operation_ids"] == [i for i, _ in newest]
    [error] = [e for _, e in newest if e]  # the refused vacuum, newest, with its error
    assert error.split(":")[0] in shown["last_runs"] and "vacuum" in shown["last_runs"]


def test_a_fleet_without_history_has_no_history_asset(tmp_path):
    _table(tmp_path / "a")
    keys = build([str(tmp_path / "a")], name=NAME, history=False).resolve_all_asset_keys()
    assert not [k for k in keys if k.path[-1] == "operation_history"]
    keys = build([str(tmp_path / "a")], name=NAME).resolve_all_asset_keys()
    assert dg.AssetKey(["delta_maintenance", NAME, "operation_history"]) in keys
