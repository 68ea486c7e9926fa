"""A maintenance task killed while it works: Airflow's task runner calls the operator's
`on_kill` on SIGTERM; the task stops there, fails (no retry), and the table stays readable;
the next run finishes the work.

The task runs in its own process (`airflow tasks test`, the task runner Airflow's workers
use); the test sends SIGTERM on the first progress line of the vacuum's deletes (50,000 old
files that no commit references), between its VACUUM START and END commits.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest

from delta_ops.table.writer import write_arrow
from tests.support import deltalake_rows
from tests.support.airflow_support import airflow_env, airflow_home, dag_module, task_states

ORPHANS = 50_000
DAY_S = 86_400


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return airflow_home(tmp_path_factory.getbasetemp())


def vacuum_commits(table: Path) -> list[str]:
    """The VACUUM START / END commits in the table's log, in order."""
    out = []
    for path in sorted((table / "_delta_log").glob("*.json")):
        text = path.read_text()
        for marker in ("VACUUM START", "VACUUM END"):
            if marker in text:
                out.append(marker)
    return out


def test_a_killed_vacuum_leaves_a_readable_table_and_the_next_run_finishes(
    home: Path, tmp_path: Path
) -> None:
    table = tmp_path / "events"
    for i in range(3):
        write_arrow(table, pa.table({"id": pa.array([i], pa.int64())}))
    rows = deltalake_rows(table)
    crashed = table / "crashed"  # files of writes that died long ago, never committed
    crashed.mkdir()
    then = time.time() - 40 * DAY_S
    for i in range(ORPHANS):
        path = crashed / f"part-{i:05d}.parquet"
        path.write_bytes(b"PAR1 never committed PAR1")
        os.utime(path, (then, then))
    dag_module(
        home,
        "killed",
        f"""
        from airflow.sdk import DAG
        from delta_ops.airflow.operators import DeltaVacuumOperator

        with DAG("killed_vacuum", schedule=None) as dag:
            DeltaVacuumOperator(task_id="vacuum", table={str(table)!r}, retries=3,
                                progress_every_seconds=0)
        """,
    )
    env = {**os.environ, **airflow_env(home), "PYTHONUNBUFFERED": "1"}
    task = subprocess.Popen(
        [sys.executable, "-m", "airflow", "tasks", "test", "killed_vacuum", "vacuum"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    output = []
    assert task.stdout is not None
    for line in task.stdout:
        output.append(line)
        if "vacuum: deleting" in line:  # the first progress line: it is deleting
            task.send_signal(signal.SIGTERM)
            break
    output.extend(task.stdout)
    task.wait(timeout=300)
    log = "".join(output)
    assert "events: vacuum stopped by a kill; the table stays readable" in log, log[-3000:]
    assert "AirflowTaskTerminated" in log
    # stopped between its two commits: started, not ended; every reader reads the table
    assert vacuum_commits(table) == ["VACUUM START"]
    assert deltalake_rows(table) == rows
    assert len(list(crashed.iterdir())) < ORPHANS  # it was deleting when it stopped

    # the next run (the same task, by Airflow) finishes the work
    module = dag_module(
        home,
        "killed",
        (home / "dags" / "killed.py").read_text(),
    )
    run = module.dag.test()
    assert task_states(run) == {"vacuum": "success"}
    assert not crashed.exists()  # every old file deleted, and their directory
    assert vacuum_commits(table) == ["VACUUM START", "VACUUM START", "VACUUM END"]
    assert deltalake_rows(table) == rows
