"""The Airflow DAG factory and operators, run by Airflow itself (`dag.test()`, a SQLite metadata
database in the run's temporary directory) on small tables, checked with `deltalake`.

Each test writes its DAG as a file in Airflow's DAGs folder (Airflow runs what it serialized
from there) and runs it; the results are read back from the table, the task instances, their
XComs and the maintenance assets' events.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from delta_ops.table.writer import write_arrow
from tests.support import REPO, deltalake_files, deltalake_rows, file_digests
from tests.support.airflow_support import (
    airflow_env,
    airflow_home,
    asset_events,
    dag_module,
    task_states,
    xcom,
)

DAY_S = 86_400


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return airflow_home(tmp_path_factory.getbasetemp())


def small_table(path: Path, commits: int) -> Path:
    for i in range(commits):
        write_arrow(path, pa.table({"id": pa.array([2 * i, 2 * i + 1], pa.int64())}))
    return path


def age(table: Path, days: float) -> None:
    """Date every file of the table `days` back (log files one second apart, in order)."""
    when = time.time() - days * DAY_S
    for root, _, files in os.walk(table):
        for i, name in enumerate(sorted(files)):
            os.utime(os.path.join(root, name), (when + i, when + i))


def data_files(table: Path) -> set[str]:
    return {
        str(p.relative_to(table))
        for p in table.rglob("*.parquet")
        if "_delta_log" not in p.relative_to(table).parts
    }


def test_the_factory_dag_maintains_every_table_of_a_warehouse(home: Path, tmp_path: Path) -> None:
    warehouse = tmp_path / "warehouse"
    events = small_table(warehouse / "events", 4)
    orders = small_table(warehouse / "sales" / "orders", 3)
    for table in (events, orders):
        age(table, 3)
    rows_before = {t: sorted(r["id"] for r in deltalake_rows(t)) for t in (events, orders)}
    module = dag_module(
        home,
        "fleet",
        f"""
        from delta_ops.airflow.dags import build_delta_maintenance_dag

        dag = build_delta_maintenance_dag(
            {str(warehouse)!r},
            name="lake",
            rewrites=["compact"],
            options={{"vacuum": {{"retention": "0h", "force": True}}, "cleanup": {{"retention": "1d"}}}},
            pool="delta_ops", max_active_tasks=3,
        )
        """,
    )
    dag = module.dag
    assert dag.dag_id == "lake_maintenance" and dag.is_paused_upon_creation
    assert sorted(dag.task_group.children) == ["check_params", "events", "sales__orders"]
    # concurrency is set once for the fleet: one pool, the DAG's max_active_tasks
    assert dag.max_active_tasks == 3
    chain = ["compact", "checkpoint", "cleanup", "vacuum"]
    for group in ("events", "sales__orders"):
        tasks = [dag.get_task(f"{group}.{step}") for step in chain]
        assert {t.pool for t in tasks} == {"delta_ops"}
        for before, after in itertools.pairwise(tasks):
            assert after.upstream_task_ids == {before.task_id}

    run = dag.test()

    states = task_states(run)
    assert set(states.values()) == {"success"}, states
    for table, files in ((events, 4), (orders, 3)):
        group = table.relative_to(warehouse).as_posix().replace("/", "__")
        # the rows are the same, in one compacted file; the replaced files are gone from disk
        assert sorted(r["id"] for r in deltalake_rows(table)) == rows_before[table]
        _, live = deltalake_files(table)
        assert len(live) == 1 and data_files(table) == set(live)
        # checkpointed at the compaction's version, and the expired commits before it removed
        compacted = xcom(run, f"{group}.compact")["version"]
        assert compacted == files and xcom(run, f"{group}.checkpoint")["version"] == compacted
        log = {p.name for p in (table / "_delta_log").iterdir()}
        assert f"{compacted:020d}.checkpoint.parquet" in log
        assert not {f"{v:020d}.json" for v in range(compacted)} & log
        vacuumed = xcom(run, f"{group}.vacuum")
        assert vacuumed["num_deleted"] == files and vacuumed["dry_run"] is False
    # each step's result is an event on its maintenance asset, with the XCom as its extra
    [event] = asset_events("delta_maintenance/lake/events/vacuum")
    assert event == xcom(run, "events.vacuum")
    [compacted] = asset_events("delta_maintenance/lake/events/compact")
    assert compacted["files_removed"] == 4 and compacted["files_added"] == 1


def test_nothing_to_do_skips_the_step_and_the_chain_goes_on(home: Path, tmp_path: Path) -> None:
    table = small_table(tmp_path / "fresh", 2)
    module = dag_module(
        home,
        "fresh",
        f"""
        from delta_ops.airflow.dags import build_delta_maintenance_dag

        dag = build_delta_maintenance_dag([{str(table)!r}], name="fresh")
        """,
    )
    run = module.dag.test()
    # fresh files are inside every retention: cleanup and vacuum have nothing to do
    states = task_states(run)
    assert states == {
        "check_params": "success",
        "fresh.checkpoint": "success",
        "fresh.cleanup": "skipped",
        "fresh.vacuum": "skipped",
    }
    assert str(getattr(run.state, "value", run.state)) == "success"
    assert asset_events("delta_maintenance/fresh/fresh/vacuum") == []  # a skip is no event


def test_a_dry_run_returns_the_plans_and_changes_nothing(home: Path, tmp_path: Path) -> None:
    table = small_table(tmp_path / "events", 3)
    age(table, 3)
    before = file_digests(table)
    module = dag_module(
        home,
        "dry",
        f"""
        from delta_ops.airflow.dags import build_delta_maintenance_dag

        dag = build_delta_maintenance_dag(
            [{str(table)!r}], name="dry", dry_run=True, rewrites=["compact"],
            options={{"vacuum": {{"retention": "0h"}}}},
        )
        """,
    )
    run = module.dag.test()
    assert file_digests(table) == before
    plan = xcom(run, "events.compact")
    assert plan["dry_run"] is True and plan["files_to_rewrite"] == 3 and plan["num_bins"] == 1
    checkpoint = xcom(run, "events.checkpoint")
    assert checkpoint["dry_run"] is True and checkpoint["version"] == 2


def test_a_failing_step_reports_one_line_and_does_not_retry(home: Path, tmp_path: Path) -> None:
    good = small_table(tmp_path / "good", 2)
    broken = tmp_path / "broken"
    broken.mkdir()  # no _delta_log: not a Delta table
    module = dag_module(
        home,
        "failing",
        f"""
        from delta_ops.airflow.dags import build_delta_maintenance_dag
        from delta_ops.airflow.tables import DeltaTable

        FAILURES = []
        dag = build_delta_maintenance_dag(
            [DeltaTable("broken", {str(broken)!r}), {str(good)!r}],
            name="lake",
            dag_id="lake_failing",
            notify=FAILURES.append,
            base_url="https://airflow.example.com",
        )
        """,
    )
    run = module.dag.test()
    states = task_states(run)
    assert states["broken.checkpoint"] == "failed"  # not up_for_retry: retrying cannot help
    assert states["broken.cleanup"] == states["broken.vacuum"] == "upstream_failed"
    assert states["good.checkpoint"] == "success"  # the other table is maintained anyway
    [failure] = module.FAILURES
    line = failure.message
    assert "\n" not in line
    assert line.startswith(
        # the table is named once, not again by the error that opens with it
        "delta-ops: lake_failing (step broken.checkpoint) failed for broken:"
        f" checkpoint failed: not a Delta table: {broken}"
    ), line
    assert line.endswith(
        f" | https://airflow.example.com/dags/lake_failing/runs/"
        f"{run.run_id.replace(':', '%3A').replace('+', '%2B')}/tasks/broken.checkpoint"
    ), line
    [ti] = [t for t in run.get_task_instances() if t.task_id == "broken.checkpoint"]
    assert ti.try_number == 1


def test_a_misspelled_option_fails_the_dag_import_in_one_line(home: Path, tmp_path: Path) -> None:
    from delta_ops.errors import InvalidValue

    table = small_table(tmp_path / "events", 1)
    with pytest.raises(InvalidValue) as refused:
        dag_module(
            home,
            "misspelled",
            f"""
            from delta_ops.airflow.dags import build_delta_maintenance_dag

            dag = build_delta_maintenance_dag([{str(table)!r}], name="typo",
                                              options={{"vacuum": {{"retension": "7d"}}}})
            """,
        )
    assert str(refused.value) == (
        "vacuum: no argument 'retension' (did you mean 'retention'?); its options:"
        " retention, mode, force, engine"
    )
    # a bad value names the operation and the argument, not the CLI's flag
    with pytest.raises(InvalidValue) as refused:
        dag_module(
            home,
            "bad_value",
            f"""
            from delta_ops.airflow.dags import build_delta_maintenance_dag

            dag = build_delta_maintenance_dag([{str(table)!r}], name="bad",
                                              options={{"cleanup": {{"retention": "30"}}}})
            """,
        )
    assert str(refused.value).startswith("cleanup: retention: '30' is not a duration"), str(
        refused.value
    )


def test_the_example_dag_imports_cleanly_and_lists_its_dags(home: Path, tmp_path: Path) -> None:
    """`airflow dags list-import-errors` on the repository's example, as a deployment runs it."""
    examples = REPO / "examples" / "airflow"
    warehouse = small_table(tmp_path / "warehouse" / "events", 1).parent
    env = {
        **os.environ,
        **airflow_env(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(examples),
        "DELTA_OPS_WAREHOUSE": str(warehouse),
    }
    airflow = [sys.executable, "-m", "airflow"]

    def run(*args: str) -> str:
        done = subprocess.run(
            [*airflow, *args], env=env, capture_output=True, text=True, timeout=300, check=False
        )
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        return done.stdout.strip().splitlines()[-1]  # Airflow's own warnings come first

    assert json.loads(run("dags", "list-import-errors", "--local", "-o", "json")) == []
    listed = {d["dag_id"] for d in json.loads(run("dags", "list", "--local", "-o", "json"))}
    assert listed == {"lake_maintenance", "lake_checkpoint_on_commits"}


def test_the_failure_line_is_dagsters(home: Path) -> None:
    from delta_ops.airflow.alerts import MaintenanceFailure as AirflowFailure
    from delta_ops.dagster.alerts import MaintenanceFailure as DagsterFailure

    fields = {"table": "events", "error": "events: vacuum failed: boom", "run_id": "r1"}
    airflow = AirflowFailure(dag_id="lake", task_id="events.vacuum", url="http://x/r1", **fields)
    dagster = DagsterFailure(job="lake", step="events.vacuum", run_url="http://x/r1", **fields)
    assert airflow.message == dagster.message
    assert airflow.message == (
        "delta-ops: lake (step events.vacuum) failed for events: vacuum failed: boom | http://x/r1"
    )
    no_link = AirflowFailure(dag_id="lake", task_id="events.vacuum", url=None, **fields)
    assert (
        no_link.message
        == DagsterFailure(job="lake", step="events.vacuum", run_url=None, **fields).message
    )


def test_trigger_with_config_runs_a_dry_run_of_a_subset_with_another_retention(
    home: Path, tmp_path: Path
) -> None:
    tables = {name: small_table(tmp_path / name, 2) for name in ("events", "orders")}
    for table in tables.values():
        (table / "stray.parquet").write_bytes(b"left by a failed write")
        age(table, 3)  # the stray is 3 days old: inside vacuum's default 7 days
    before = {name: file_digests(table) for name, table in tables.items()}

    def dag_file() -> Any:
        # anew for each run: dag.test(run_conf=...) keeps the conf in the DAG's params
        return dag_module(
            home,
            "configured",
            f"""
            from delta_ops.airflow.dags import build_delta_maintenance_dag

            FAILURES = []
            dag = build_delta_maintenance_dag(
                [{str(tables["events"])!r}, {str(tables["orders"])!r}], name="configured",
                options={{"vacuum": {{"force": True}}}}, notify=FAILURES.append,
            )
            """,
        )

    dag = dag_file().dag
    assert set(dag.params) == {"dry_run", "retention", "log_retention", "tables"}
    # the form's multi-select offers the DAG's tables
    assert dag.params.get_param("tables").schema["examples"] == ["events", "orders"]
    run = dag.test(run_conf={"tables": ["events"], "retention": "1d", "dry_run": True})
    states = task_states(run)
    assert states["check_params"] == "success"
    assert {s for t, s in states.items() if t.startswith("orders.")} == {"skipped"}
    plan = xcom(run, "events.vacuum")  # with the DAG's 7 days it would have nothing to do
    assert plan["dry_run"] is True and plan["retention_ms"] == DAY_S * 1000
    assert plan["deleted"] == ["stray.parquet"]
    assert xcom(run, "events.checkpoint")["dry_run"] is True
    assert {name: file_digests(table) for name, table in tables.items()} == before

    for conf, said in (
        ({"retention": "banana"}, "params: retention: 'banana' is not a duration"),
        (
            {"tables": ["evnts"]},
            (
                "params: tables: 'evnts' is not a table of this DAG (did you mean 'events'?);"
                " its tables: events, orders"
            ),
        ),
    ):
        module = dag_file()
        run = module.dag.test(run_conf=conf)
        states = task_states(run)
        assert states.pop("check_params") == "failed"
        assert set(states.values()) == {"upstream_failed"}, states
        [failure] = module.FAILURES
        assert failure.task_id == "check_params" and said in failure.message
        assert "\n" not in failure.message
    assert {name: file_digests(table) for name, table in tables.items()} == before
