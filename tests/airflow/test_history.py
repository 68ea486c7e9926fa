"""The Airflow operators record every run in the operation history: the DAG factory's in the
folder holding its tables (``_delta_ops_history``), one row per task that ran, a skip or a
failure included; read back by DuckDB."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from delta_ops.table.writer import write_arrow
from tests.support import duckdb_connection
from tests.support.airflow_support import airflow_home, dag_module, task_states


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return airflow_home(tmp_path_factory.getbasetemp())


def test_each_step_of_the_factorys_dag_is_a_row_of_the_fleets_history(
    home: Path, tmp_path: Path
) -> None:
    good = tmp_path / "lake" / "good"
    for i in range(2):
        write_arrow(good, pa.table({"id": pa.array([i], pa.int64())}))
    broken = tmp_path / "lake" / "broken"
    broken.mkdir()  # no _delta_log: its checkpoint fails
    module = dag_module(
        home,
        "recorded",
        f"""
        from delta_ops.airflow.dags import build_delta_maintenance_dag

        dag = build_delta_maintenance_dag([{str(good)!r}, {str(broken)!r}], name="rec")
        """,
    )
    states = task_states(module.dag.test())
    assert states["broken.checkpoint"] == "failed" and states["good.vacuum"] == "skipped"
    con = duckdb_connection()
    try:
        rows = con.sql(
            "SELECT table_name, operation, status, front_end, error IS NULL FROM delta_scan("
            f"'{tmp_path / 'lake' / '_delta_ops_history'}') ORDER BY table_name, start_time"
        ).fetchall()
    finally:
        con.close()
    assert rows == [
        ("broken", "checkpoint", "failed", "airflow", False),
        ("good", "checkpoint", "succeeded", "airflow", True),
        ("good", "cleanup", "skipped", "airflow", True),
        ("good", "vacuum", "skipped", "airflow", True),
    ]


def test_a_run_refused_for_a_templated_value_is_a_failed_row_with_its_error(
    home: Path, tmp_path: Path
) -> None:
    """A value parsed only when the task runs (a templated retention) fails the task before
    the operation starts; the history still has the run, failed, with the error."""
    table = tmp_path / "lake" / "events"
    write_arrow(table, pa.table({"id": pa.array([1], pa.int64())}))
    history = tmp_path / "lake" / "_delta_ops_history"
    module = dag_module(
        home,
        "refused_run",
        f"""
        from airflow.sdk import DAG
        from delta_ops.airflow.operators import DeltaVacuumOperator

        with DAG("refused_run", schedule=None, params={{"retention": "banana"}}) as dag:
            DeltaVacuumOperator(task_id="vacuum", table={str(table)!r},
                                history_location={str(history)!r},
                                retention="{{{{ params.retention }}}}")
        """,
    )
    assert task_states(module.dag.test()) == {"vacuum": "failed"}
    con = duckdb_connection()
    try:
        rows = con.sql(
            "SELECT table_name, operation, status, front_end, engine, error"
            f" FROM delta_scan('{history}')"
        ).fetchall()
    finally:
        con.close()
    [(name, operation, status, front_end, engine, error)] = rows
    assert (name, operation, status, front_end, engine) == (
        "events",
        "vacuum",
        "failed",
        "airflow",
        "local",
    )
    assert error.startswith("InvalidValue: vacuum: retention: 'banana' is not a duration"), error
