"""delta-ops on Delta Spark's own session (tests/reference/test_one_session.py): runs inside the
reference server (`call` request), whose session has Delta's jars, SQL extension and catalog.

`run` reports, as data the test asserts on:

- `format_names`: which data source Spark resolves `delta` and `delta_ops` to, before and after
  delta-ops' `register`, what `register` returned and logged, and what Spark answers a plain
  `spark.dataSource.register` of a Python source named `delta` (the rule `register` follows);
- `write_delta`: the rows `write_delta` wrote on this session, and the rows Delta Spark
  (`format("delta")`) and delta-ops (`format("delta_ops")`) read back;
- `maintenance`: a table Delta Spark wrote (partitioned, deletion vectors), the rows Delta
  Spark reads before and after delta-ops' CLI ran `purge`, `compact`, `checkpoint` and
  `vacuum` with ``--engine spark`` on this session, each run's JSON result, and the rows after
  Delta Spark appended to the maintained table.

Rows are returned as sorted lists of `[column, value-as-text]` pairs.

The workload runs on `spark.newSession()`: the same JVM, jars, Delta extension and catalog, but
its own registry of Python data sources, so a `register` an earlier request made in the server's
session (the demo workload's, say) cannot make "before" look registered.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import json
import logging
import os
from typing import Any

#: the JVM class Spark resolves a format name to (`DataSource.lookupDataSource`)
_LOOKUP = "org.apache.spark.sql.execution.datasources.DataSource"
#: vacuum's options that delete every file the table no longer needs, now
_EVERY_UNNEEDED_FILE = ("--retention", "0h", "--force", "--in-flight-grace", "0s")


def run(spark: Any, request: dict[str, Any]) -> dict[str, Any]:
    scratch = str(request["scratch"])
    server_session = spark
    spark = spark.newSession()  # a data-source registry no earlier request touched
    # Spark checks a new source's name against the *active* session's sources, so the fresh
    # session is made active for the run, and the server's session again after it
    session_class = spark.sparkContext._jvm.org.apache.spark.sql.SparkSession
    session_class.setActiveSession(spark._jsparkSession)
    try:
        names, fmt = _format_names(spark)
        return {
            "format_names": names,
            "write_delta": _write_delta(spark, fmt, os.path.join(scratch, "written")),
            "maintenance": _maintenance(spark, os.path.join(scratch, "maintained")),
        }
    finally:
        session_class.setActiveSession(server_session._jsparkSession)


def resolves_to(spark: Any, name: str) -> str:
    """The class Spark resolves `format(name)` to in this session, or the error condition."""
    jvm = spark.sparkContext._jvm
    conf = spark._jsparkSession.sessionState().conf()
    lookup = getattr(jvm, _LOOKUP).lookupDataSource
    try:
        return str(lookup(name, conf).getName())
    except Exception as exc:  # noqa: BLE001 - the condition is the answer
        return f"error: {_condition(exc)}"


def _condition(exc: BaseException) -> str:
    """Spark's error condition of `exc` (a JVM exception's through py4j), else its class."""
    for source in (exc, getattr(exc, "java_exception", None)):
        get_condition = getattr(source, "getCondition", None)
        if callable(get_condition) and get_condition():
            return str(get_condition())
    return type(exc).__name__


def _format_names(spark: Any) -> tuple[dict[str, Any], str]:
    from delta_ops.spark import register
    from delta_ops.spark.source import DeltaDataSource

    before = {name: resolves_to(spark, name) for name in ("delta", "delta_ops")}
    try:  # what Spark says to a Python source named like a JVM one, without delta-ops' rule
        spark.dataSource.register(DeltaDataSource)
        plain = "registered"
    except Exception as exc:  # noqa: BLE001 - the condition is the answer
        plain = f"error: {_condition(exc)}"
    logged: list[str] = []
    logger = logging.getLogger("delta_ops.spark.source")
    handler = _Collect(logged)
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        fmt = register(spark)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    after = {name: resolves_to(spark, name) for name in ("delta", "delta_ops")}
    report = {
        "before": before,
        "plain_register": plain,
        "registered": fmt,
        "logged": logged,
        "after": after,
    }
    return report, fmt


class _Collect(logging.Handler):
    def __init__(self, into: list[str]) -> None:
        super().__init__(logging.INFO)
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        self.into.append(record.getMessage())


def rows(frame: Any) -> list[list[list[str]]]:
    """A DataFrame's rows, comparable across readers (values as text, in a fixed order)."""
    return sorted(
        [[k, _text(v)] for k, v in sorted(r.items())] for r in frame.toArrow().to_pylist()
    )


def _text(value: Any) -> str:
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.UTC).isoformat()
    return repr(value)


def _write_delta(spark: Any, fmt: str, path: str) -> dict[str, Any]:
    from delta_ops.spark import write_delta

    data = [
        (i, f"name-{i}", dt.date(2026, 11, 1 + i % 3), dt.datetime(2026, 11, 1, i, tzinfo=dt.UTC))
        for i in range(12)
    ]
    frame = spark.createDataFrame(data, "id BIGINT, name STRING, day DATE, ts TIMESTAMP")
    first = write_delta(frame, path, partition_by=["day"])
    more = spark.createDataFrame(data[:4], frame.schema)
    second = write_delta(more, path, mode="append")
    written = rows(frame.unionAll(more))
    return {
        "versions": [first.version, second.version],
        "written": written,
        "delta_spark": rows(spark.read.format("delta").load(path)),
        "delta_ops": rows(spark.read.format(fmt).load(path)),
        "history": [
            r["operation"] for r in spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()
        ],
    }


def cli_json(*argv: str) -> dict[str, Any]:
    """delta-ops' CLI in this process (so on this session), its JSON result."""
    from delta_ops.cli.commands import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main([*argv, "--json"])
    if code != 0:
        raise RuntimeError(f"delta-ops {' '.join(argv)}: exit code {code}")
    result: dict[str, Any] = json.loads(out.getvalue().strip().splitlines()[-1])
    return result


def _maintenance(spark: Any, path: str) -> dict[str, Any]:
    table = f"delta.`{path}`"
    spark.sql(
        f"CREATE TABLE {table} (id BIGINT, day DATE, v STRING) USING delta PARTITIONED BY (day) "
        "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')"
    )
    for batch in range(3):
        values = ", ".join(
            f"({batch * 10 + i}, DATE'2026-11-0{1 + i % 2}', 'b{batch}-{i}')" for i in range(10)
        )
        spark.sql(f"INSERT INTO {table} VALUES {values}")
    spark.sql(f"DELETE FROM {table} WHERE id % 4 = 0")
    before = rows(spark.read.format("delta").load(path))
    runs = {
        "purge": cli_json("purge", path, "--engine", "spark"),
        "compact": cli_json("compact", path, "--engine", "spark"),
        # two parts: each written by a Spark task (a single file is the driver's)
        "checkpoint": cli_json("checkpoint", path, "--engine", "spark", "--parts", "2"),
        "vacuum": cli_json("vacuum", path, "--engine", "spark", *_EVERY_UNNEEDED_FILE),
    }
    after = rows(spark.read.format("delta").load(path))
    spark.sql(f"INSERT INTO {table} VALUES (1000, DATE'2026-11-03', 'after')")
    appended = rows(spark.read.format("delta").load(path))
    return {
        "before": before,
        "runs": runs,
        "after": after,
        "appended": appended,
        "history": [r["operation"] for r in spark.sql(f"DESCRIBE HISTORY {table}").collect()],
    }
