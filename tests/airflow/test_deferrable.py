"""`deferrable=True` with `engine="spark"`: the run is a Spark job of its own process while the
task defers (dag.test runs the trigger inline), then the task resumes with the job's result.
The Spark test starts a JVM: run this file under `flock /tmp/spark.lock` on a shared machine.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pyarrow as pa
import pytest

from delta_ops.table.writer import write_arrow
from tests.support.airflow_support import airflow_home, dag_module, task_states, xcom

DAY_S = 86_400


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return airflow_home(tmp_path_factory.getbasetemp())


def test_deferrable_needs_the_spark_engine_in_one_line(home: Path) -> None:
    from delta_ops.airflow.operators import DeltaVacuumOperator
    from delta_ops.errors import InvalidValue

    with pytest.raises(InvalidValue) as refused:
        DeltaVacuumOperator(task_id="v", table="/data/t", deferrable=True)
    assert str(refused.value) == (
        "vacuum: deferrable: the work runs in the task with engine 'local';"
        " deferrable=True needs engine='spark'"
    )


def test_a_deferred_spark_vacuum_runs_as_a_job_and_the_task_resumes_with_its_result(
    home: Path, tmp_path: Path
) -> None:
    table = tmp_path / "events"
    for i in range(2):
        write_arrow(table, pa.table({"id": [i]}))
    stray = table / "stray.parquet"
    stray.write_bytes(b"left by a failed write")
    when = time.time() - 3 * DAY_S
    os.utime(stray, (when, when))
    jobs = tmp_path / "jobs"
    module = dag_module(
        home,
        "deferred_spark",
        f"""
        from airflow.sdk import DAG
        from delta_ops.airflow.operators import DeltaVacuumOperator

        with DAG("deferred_spark", schedule=None) as dag:
            DeltaVacuumOperator(task_id="vacuum", table={str(table)!r}, retention="1d",
                                force=True, engine="spark", deferrable=True,
                                job_folder={str(jobs)!r})
        """,
    )
    run = module.dag.test()
    assert task_states(run) == {"vacuum": "success"}
    result = xcom(run, "vacuum")
    assert result["deleted"] == ["stray.parquet"] and result["dry_run"] is False
    assert not stray.exists()
    # the work ran in the job's process: it wrote the outcome the task resumed with
    [outcome] = jobs.glob("deferred_spark__vacuum__*.json")
    written = json.loads(outcome.read_text())
    assert written["status"] == "done" and written["data"]["deleted"] == ["stray.parquet"]
    assert outcome.with_suffix(".log").exists()
