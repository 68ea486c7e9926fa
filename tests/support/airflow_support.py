"""A real Airflow for the Airflow tests: its home and SQLite metadata database in the test run's
temporary directory, and DAG files written into its DAGs folder.

Airflow reads its configuration when it is first imported, so :func:`airflow_home` sets the
environment (``AIRFLOW_HOME``, the database, no example DAGs) before anything imports it, once
per process, and creates the metadata tables (``airflow db migrate``'s work, in this process).
``make test`` runs the Airflow tests in a process of their own: Airflow configures the
process's logging (a handler on the root logger) and ``sys.path`` for the rest of its life.

`dag.test()` runs a DAG that the DAGs folder holds (Airflow serializes it from there), so a
test writes its DAG as a file (:func:`dag_module`) and runs the module's ``dag``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import textwrap
from pathlib import Path
from types import ModuleType
from typing import Any

_HOME: Path | None = None


def airflow_env(home: Path) -> dict[str, str]:
    """The environment an Airflow process (this one, or an `airflow` command) runs with."""
    return {
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
        "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
        # OpenLineage's listener writes every task's events here (one JSON object a line)
        "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(
            {"type": "file", "log_file_path": str(home / "openlineage.jsonl"), "append": True}
        ),
        "AIRFLOW__OPENLINEAGE__NAMESPACE": "delta_ops_tests",
    }


def airflow_home(base: Path) -> Path:
    """This process's Airflow home under `base` (the first call decides), with its database."""
    global _HOME
    if _HOME is not None:
        return _HOME
    home = base / "airflow-home"
    (home / "dags").mkdir(parents=True, exist_ok=True)
    assert "airflow" not in sys.modules, "Airflow was imported before its home was set"
    os.environ.update(airflow_env(home))
    from airflow.utils import db

    db.initdb()
    _HOME = home
    return home


def lineage_events(home: Path, job: str) -> list[dict[str, Any]]:
    """The OpenLineage events Airflow's listener emitted for the job (``<dag>.<task>``)."""
    path = home / "openlineage.jsonl"
    if not path.exists():
        return []
    events = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [e for e in events if e.get("job", {}).get("name") == job]


def define_connection(conn_id: str, **fields: Any) -> None:
    """An Airflow connection, defined the way a deployment's environment defines one."""
    os.environ[f"AIRFLOW_CONN_{conn_id.upper()}"] = json.dumps(fields)


def dag_module(home: Path, name: str, source: str) -> ModuleType:
    """Write `source` as ``dags/<name>.py`` and import it (a new module each time)."""
    path = home / "dags" / f"{name}.py"
    path.write_text(textwrap.dedent(source))
    spec = importlib.util.spec_from_file_location(f"airflow_test_dag_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def task_states(run: Any) -> dict[str, str]:
    """task id -> state of a finished `dag.test()` run."""
    return {
        ti.task_id: str(getattr(ti.state, "value", ti.state)) for ti in run.get_task_instances()
    }


def xcom(run: Any, task_id: str) -> Any:
    """The return value a task of the run pushed."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        row = session.scalars(
            select(XComModel).where(
                XComModel.dag_id == run.dag_id,
                XComModel.run_id == run.run_id,
                XComModel.task_id == task_id,
                XComModel.key == "return_value",
            )
        ).one_or_none()
        return None if row is None else XComModel.deserialize_value(row)


def asset_events(asset_name: str) -> list[dict[str, Any]]:
    """The extras of every event of the asset named `asset_name`, oldest first."""
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        rows = session.scalars(
            select(AssetEvent)
            .join(AssetModel, AssetEvent.asset_id == AssetModel.id)
            .where(AssetModel.name == asset_name)
            .order_by(AssetEvent.id)
        ).all()
        return [dict(row.extra) for row in rows]
