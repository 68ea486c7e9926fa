"""The front ends reach a Spark Connect server (issue 46): the CLI's ``--engine spark
--spark-remote sc://...`` and an Airflow Spark connection whose host is ``sc://...`` run the
engine through the test run's Connect server, with the same answer as the local engine; a
wrong URL is one line. Dagster's PySparkResource on a Connect URL gives the engine that
session."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from delta_ops import cli
from tests.support import TABLES, file_digests

pytestmark = pytest.mark.spark

TABLE = "delta-spark/dv-partitioned-with-checkpoint"


def test_cli_spark_remote_gives_the_local_engines_dry_run(
    spark_connect, connect_port, tmp_path, capsys
):
    table = tmp_path / "t"
    shutil.copytree(TABLES / TABLE, table)
    (table / "part=1" / "orphan.parquet").write_bytes(b"o")
    before = file_digests(table)
    outputs = {}
    remote = ["--engine", "spark", "--spark-remote", f"sc://127.0.0.1:{connect_port}"]
    for name, engine in (("local", []), ("connect", remote)):
        args = ["vacuum", str(table), "--retention", "0h", "--force", "--in-flight-grace", "0s"]
        assert cli.main([*args, "--dry-run", "--json", *engine]) == 0
        outputs[name] = json.loads(capsys.readouterr().out)
    assert outputs["connect"]["engine"] == "spark"
    assert outputs["connect"]["deleted"] == outputs["local"]["deleted"]
    assert "part=1/orphan.parquet" in outputs["local"]["deleted"]
    assert file_digests(table) == before


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--spark-remote", "http://127.0.0.1:1"], "not a Spark Connect URL"),
        (["--engine", "spark", "--spark-remote", "spark://x:7077"], "not a Spark Connect URL"),
        (["--spark-remote", "sc://127.0.0.1:1"], "needs --engine spark"),
    ],
)
def test_cli_spark_remote_refuses_what_is_not_a_connect_url_in_one_line(
    tmp_path, capsys, flags, message
):
    table = tmp_path / "t"
    shutil.copytree(TABLES / TABLE, table)
    if "--engine" not in flags and "http" in flags[1]:
        flags = ["--engine", "spark", *flags]
    assert cli.main(["vacuum", str(table), "--dry-run", *flags]) != 0
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err and "Traceback" not in err


AIRFLOW_RUN = """
from delta_ops.airflow.engines import build_engine
from delta_ops.spark.workers import is_connect

engine = build_engine("spark", "spark_connect")
print(is_connect(engine.session()), engine.map_ordered(len, ["a", "bb", "ccc"], batch=2))
"""


def test_an_airflow_spark_connection_to_a_connect_server_runs_the_engine_there(
    spark_connect, connect_port
):
    """In a process of its own, as every Airflow test: importing Airflow configures the
    process's logging for the rest of its life."""
    conn = {"conn_type": "spark", "host": "sc://127.0.0.1", "port": connect_port}
    done = subprocess.run(
        [sys.executable, "-c", AIRFLOW_RUN],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "AIRFLOW_CONN_SPARK_CONNECT": json.dumps(conn)},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[-2] == "True [1, 2, 3]"


DAGSTER_RUN = """
import sys
from dagster import build_init_resource_context
from dagster_pyspark import PySparkResource
from delta_ops.dagster.resource import _engine
from delta_ops.spark.workers import is_connect

resource = PySparkResource(spark_config={"spark.remote": sys.argv[1]})
resource.setup_for_execution(build_init_resource_context())
engine = _engine("spark")  # as the delta-ops resource builds it for `engine: spark`
print(is_connect(engine.session()), engine.map_ordered(len, ["a", "bb", "ccc"], batch=2))
"""


def test_dagsters_pyspark_resource_on_a_connect_url_is_the_engines_session(
    spark_connect, connect_port
):
    """A run whose PySparkResource names a Connect server (``spark.remote``) runs the engine
    there: in a process of its own, as a Dagster run's (a process keeps one kind of session)."""
    url = f"sc://127.0.0.1:{connect_port}"
    done = subprocess.run(
        [sys.executable, "-c", DAGSTER_RUN, url],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[-2] == "True [1, 2, 3]"
