"""An Airflow connection's credentials never show in what Airflow keeps of a run (issue 52.4).

The connection (type ``aws``) holds a canary in every credential field: the access key (login),
the secret key (password) and a session token (extra); moto's S3 on loopback accepts any. The
maintenance DAG runs its steps on a table there (one step refused: a vacuum retention below the
table's), and then the task logs (what ``dag.test()`` prints), every XCom, every asset event,
every rendered template field delta-ops' own log records at every level (what a deployment's task log
file holds besides the operator's lines) and the operation history the steps recorded are
searched for the canary. The CLI, the history and Dagster are ``tests/project/test_secret_canaries.py``.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from delta_ops.service.history import OperationHistory
from delta_ops.table.writer import write_arrow
from loopback.servers import serve_s3
from tests.support.airflow_support import airflow_home, dag_module, task_states

CANARY = "CANARYx9q"
SECRETS = {
    "login": f"AKIA{CANARY}KEY",
    "password": f"{CANARY}-secret-access-key",
    "token": f"{CANARY}-session-token",
}


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return airflow_home(tmp_path_factory.getbasetemp())


def _kept(run: Any) -> list[str]:
    """Everything Airflow's database keeps of `run`: XComs, asset events, rendered fields."""
    from airflow.models.asset import AssetEvent
    from airflow.models.renderedtifields import RenderedTaskInstanceFields
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    kept: list[str] = []
    with create_session() as session:
        for xcom in session.scalars(select(XComModel).where(XComModel.run_id == run.run_id)):
            kept.append(json.dumps(XComModel.deserialize_value(xcom), default=str))
        for event in session.scalars(select(AssetEvent)):
            kept.append(json.dumps(event.extra, default=str))
        rendered = select(RenderedTaskInstanceFields).where(
            RenderedTaskInstanceFields.run_id == run.run_id
        )
        for fields in session.scalars(rendered):
            kept.append(json.dumps(fields.rendered_fields, default=str))
    return kept


def test_no_task_log_xcom_asset_event_rendered_field_or_history_row_holds_a_secret(
    home: Path, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    with serve_s3() as store:
        options = {
            "endpoint_url": store.endpoint,
            "key": SECRETS["login"],
            "secret": SECRETS["password"],
            "token": SECRETS["token"],
        }
        url = store.url("airflow_canary")
        history = store.url("airflow_canary_history")
        for i in range(3):
            write_arrow(url, pa.table({"id": [i]}), storage_options=options)
        os.environ["AIRFLOW_CONN_CANARY_S3"] = json.dumps(
            {
                "conn_type": "aws",
                "login": SECRETS["login"],
                "password": SECRETS["password"],
                "extra": {
                    "endpoint_url": store.endpoint,
                    "region_name": "us-east-1",
                    "aws_session_token": SECRETS["token"],
                },
            }
        )
        module = dag_module(
            home,
            "canary",
            f"""
            from airflow.sdk import DAG
            from delta_ops.airflow.dags import build_delta_maintenance_dag
            from delta_ops.airflow.operators import DeltaVacuumOperator

            dag = build_delta_maintenance_dag(
                [{url!r}], name="canary", delta_ops_conn_id="canary_s3", history={history!r},
                options={{"vacuum": {{"retention": "1h"}}}},  # refused: below the table's 7 days
            )
            with dag:
                DeltaVacuumOperator(task_id="planned", table={url!r}, dry_run=True,
                                    delta_ops_conn_id="canary_s3", history_location={history!r})
            """,
        )
        capfd.readouterr()
        caplog.set_level(logging.DEBUG, logger="delta_ops")  # a task log holds these too
        run = module.dag.test()
        logged = capfd.readouterr()
        states = task_states(run)
        assert "failed" in states.values() and "success" in states.values(), states
        said = [logged.out, logged.err, *_kept(run), caplog.text]
        assert "committed" in caplog.text, "delta-ops' own records were not captured"
        rows = OperationHistory(history, options).read().to_pylist()
        assert {row["status"] for row in rows} >= {"succeeded", "failed"}, rows
        said += [json.dumps(row, default=str) for row in rows]
    leaked = [line for text in said for line in text.splitlines() if CANARY in line]
    assert not leaked, leaked
