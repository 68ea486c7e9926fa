"""Connections as the big providers treat them: an AWS role assumed through STS (moto's STS and
S3 on loopback), the UI's Test button through Airflow's own ``Connection.test_connection``, and
``storage_options`` rendered as JSON in the UI (the serialized DAG the UI reads).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from delta_ops.table.writer import write_arrow
from loopback.servers import serve_s3
from tests.support.airflow_support import (
    airflow_home,
    dag_module,
    define_connection,
    task_states,
    xcom,
)


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return airflow_home(tmp_path_factory.getbasetemp())


def test_an_aws_role_is_assumed_through_sts_and_its_session_maintains_the_table(
    home: Path,
) -> None:
    import boto3

    from delta_ops.airflow.hook import DeltaOpsHook

    with serve_s3() as store:
        url = store.url("assumed_events")
        for i in range(3):
            write_arrow(url, pa.table({"id": [i]}), storage_options=store.options)
        role_arn = "arn:aws:iam::123456789012:role/lake-maintainer"
        define_connection(
            "lake_role",
            conn_type="aws",
            login=store.options["key"],
            password=store.options["secret"],
            extra={
                "role_arn": role_arn,
                "assume_role_kwargs": {"DurationSeconds": 900},
                "endpoint_url": store.endpoint,
                "region_name": "us-east-1",
            },
        )
        options = DeltaOpsHook("lake_role").storage_options()
        assert options["key"] != store.options["key"] and options["token"]
        # STS knows the session: it is the role's, named after the connection
        sts = boto3.client(
            "sts",
            endpoint_url=store.endpoint,
            region_name="us-east-1",
            aws_access_key_id=options["key"],
            aws_secret_access_key=options["secret"],
            aws_session_token=options["token"],
        )
        arn = sts.get_caller_identity()["Arn"]
        assert arn.endswith("assumed-role/lake-maintainer/Airflow_lake_role"), arn
        module = dag_module(
            home,
            "assumed_role",
            f"""
            from airflow.sdk import DAG
            from delta_ops.airflow.operators import DeltaCheckpointOperator

            with DAG("assumed_role_checkpoint", schedule=None) as dag:
                DeltaCheckpointOperator(task_id="checkpoint", table={url!r},
                                        delta_ops_conn_id="lake_role")
            """,
        )
        run = module.dag.test()
        assert task_states(run) == {"checkpoint": "success"}
        assert xcom(run, "checkpoint")["version"] == 2


def test_a_role_sts_refuses_is_one_line_naming_the_connection(home: Path) -> None:
    from delta_ops.airflow.hook import DeltaOpsHook
    from delta_ops.errors import InvalidValue

    with serve_s3() as store:
        define_connection(
            "bad_role",
            conn_type="aws",
            login=store.options["key"],
            password=store.options["secret"],
            # refused before it leaves (botocore checks the ARN's length as STS does)
            extra={"role_arn": "not-an-arn", "endpoint_url": store.endpoint},
        )
        with pytest.raises(InvalidValue) as refused:
            DeltaOpsHook("bad_role").storage_options()
    said = str(refused.value)
    assert said.startswith("connection 'bad_role': role_arn: cannot assume not-an-arn: ")
    assert "\n" not in said


def test_the_test_button_reads_the_tables_log_or_says_why_not(home: Path, tmp_path: Path) -> None:
    from airflow.models.connection import Connection

    table = tmp_path / "events"
    for i in range(4):
        write_arrow(table, pa.table({"id": [i]}))

    def test_button(conn_id: str, **fields: object) -> tuple[bool, str]:
        define_connection(conn_id, conn_type="delta_ops", **fields)
        # what the API server's POST /connections/test does with the form's connection
        status, message = Connection.get_connection_from_secrets(conn_id).test_connection()
        return bool(status), str(message)

    ok, said = test_button("table_ok", host=str(table))
    assert ok, said
    assert said == (
        f"{table}: a Delta table at version 3 (protocol 1/2): its _delta_log reads with these"
        " options"
    )
    ok, said = test_button("no_table", host=str(tmp_path / "nothing"))
    assert not ok and "nothing" in said and "_delta_log" in said, said
    ok, said = test_button("no_location")
    assert not ok and "Table to test" in said, said
    # the hook's form shows the field it reads
    from delta_ops.airflow.hook import DeltaOpsHook

    assert "host" not in DeltaOpsHook.get_ui_field_behaviour()["hidden_fields"]


def test_storage_options_are_rendered_as_json_in_the_ui(home: Path, tmp_path: Path) -> None:
    from airflow.serialization.serialized_objects import DagSerialization

    module = dag_module(
        home,
        "renderers",
        f"""
        from airflow.sdk import DAG
        from delta_ops.airflow.operators import DeltaVacuumOperator
        from delta_ops.airflow.sensors import DeltaCommitSensor

        with DAG("renderers", schedule=None) as dag:
            DeltaVacuumOperator(task_id="vacuum", table={str(tmp_path)!r},
                                storage_options={{"client": "fsspec"}})
            DeltaCommitSensor(task_id="wait", table={str(tmp_path)!r})
        """,
    )
    # the DAG as the API server reads it back from the serialized DAG table
    served = DagSerialization.from_dict(DagSerialization.to_dict(module.dag))
    for task_id in ("vacuum", "wait"):
        task = served.get_task(task_id)
        assert task.template_fields_renderers == {"storage_options": "json"}, task_id
        assert "storage_options" in task.template_fields
