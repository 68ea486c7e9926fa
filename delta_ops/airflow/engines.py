"""The engine an operator's heavy I/O runs on: this task's process, or Spark.

As the CLI's ``--engine`` and Dagster's ``engine`` config, an operator's ``engine="spark"``
runs vacuum's listing and deletes, rewrites, checkpoint parts and backfill reads as Spark
tasks (`delta_ops.spark.engine`); the task's process is the Spark driver. With a Spark
connection (``spark_conn_id``, the ``spark`` type of Airflow's Apache Spark provider, which
need not be installed) the session starts on the connection's master:

| connection | Spark |
|---|---|
| host, port | the master (``yarn``, ``local[4]``, ``spark://host:7077``, ``k8s://https://host``) |
| host ``sc://host``, port | a Spark Connect server (Databricks, ``start-connect-server.sh``) |
| extra ``queue`` / ``namespace`` | ``spark.yarn.queue`` / ``spark.kubernetes.namespace`` |
| extra ``conf`` (a JSON object) | any other Spark options |

Without one, the engine uses the session already running in the process, else a local one.
The driver runs in the task, so a connection asking for ``deploy-mode: cluster`` is refused.

For example:

    DeltaVacuumOperator(task_id="vacuum", table="s3://lake/events", engine="spark",
                        spark_conn_id="spark_cluster")
"""

from __future__ import annotations

import json
from typing import Any

from airflow.sdk import BaseHook, Connection

from delta_ops.errors import InvalidValue
from delta_ops.ops.engines import LOCAL, Engine

APP_NAME = "delta-ops (Airflow)"


def spark_settings(conn: Connection) -> tuple[str, dict[str, str]]:
    """The master and Spark options a ``spark`` connection names (see the module's table)."""
    if not conn.host:
        raise InvalidValue(f"connection {conn.conn_id!r}: no host (the Spark master)")
    master = f"{conn.host}:{conn.port}" if conn.port else conn.host
    try:
        extra: dict[str, Any] = json.loads(conn.extra) if conn.extra else {}
    except ValueError:
        raise InvalidValue(f"connection {conn.conn_id!r}: its extra is not JSON") from None
    if extra.get("deploy-mode", "client") != "client":
        raise InvalidValue(
            f"connection {conn.conn_id!r}: deploy-mode {extra['deploy-mode']!r}: the engine's"
            " driver is the Airflow task, so only client mode works"
        )
    conf = {str(k): str(v) for k, v in (extra.get("conf") or {}).items()}
    if queue := extra.get("queue"):
        conf.setdefault("spark.yarn.queue", str(queue))
    if namespace := extra.get("namespace"):
        conf.setdefault("spark.kubernetes.namespace", str(namespace))
    return master, conf


def build_engine(name: str, spark_conn_id: str | None = None) -> Engine:
    """The engine the ``engine`` option names (`delta_ops.ops.engines`), as the CLI builds it."""
    if name != "spark":
        return LOCAL
    settings = spark_settings(BaseHook.get_connection(spark_conn_id)) if spark_conn_id else None
    return spark_engine(settings)


def spark_engine(settings: tuple[str, dict[str, str]] | None) -> Engine:
    """The Spark engine, its session started on `settings` (a master and options, from
    `spark_settings`) when given, else on the process's running or a local one."""
    # the spark extra (PySpark) is optional: imported only when asked for
    from delta_ops.spark.engine import SparkEngine

    if settings is not None:
        # the same optional extra: the connection's session is started before the engine
        # asks for the running one
        from delta_ops.spark.session import get_spark, get_spark_remote

        master, conf = settings
        if master.startswith("sc://"):  # a Spark Connect server runs the driver
            return SparkEngine(get_spark_remote(master))
        get_spark(master, APP_NAME, conf)
    return SparkEngine()


def cancel_spark_jobs(engine: Engine) -> None:
    """Cancel the Spark jobs an engine runs (a killed task's), so executors stop working on
    the table once the task is gone; nothing for the local engine."""
    if engine.name != "spark":
        return
    # only a Spark engine gets here, so PySpark is installed
    from delta_ops.spark.engine import SparkEngine

    if isinstance(engine, SparkEngine):
        engine.cancel()  # its jobs, by their operation tags (classic or Spark Connect)


__all__ = ["APP_NAME", "build_engine", "cancel_spark_jobs", "spark_engine", "spark_settings"]
