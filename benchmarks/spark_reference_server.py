"""Delta Spark, the reference engine, as a server that times its own calls (benchmarks only).

Run under the reference virtualenv's python (`make reference`: `.venv-reference`, with
delta-spark and its pyspark; the jars come from the Ivy cache under `build/ivy`); the benchmark
side is `benchmarks/spark_reference.py` (`SparkReference`). It is the benchmarks' counterpart of
`tests/reference/delta_spark_server.py` (benchmarks do not import the test package): the same
JSON-lines protocol, but a session with Spark's and Delta's defaults, not the test server's
tuning for tiny tables, and every operation timed inside the server around the JVM call alone.

Session: `local[2]`, the UI off, `spark.driver.memory` from `--driver-memory` (Spark's default
1g), and `--conf KEY=VALUE` pairs; everything else is Spark's and Delta's default.

Protocol: one JSON request per line on stdin, one JSON reply per line on the original stdout
(the JVM's output goes to stderr). A reply is `{"ok": true, "seconds": ...}` (`seconds`: the
call's wall time in the session) or `{"ok": false, "error": "..."}`. Requests (`op`):

- `ping`: the versions.
- `sql`: run `sql` and collect its result (`rows`: the first 20 rows as lists of strings).
- `checkpoint`: `DeltaLog.forTable(spark, path).checkpoint()`.
- `cleanup`: Delta's metadata cleanup of the table at `path` (`MetadataCleanup.cleanUpExpiredLogs`
  on its latest snapshot: what a checkpoint's post-commit hook runs).
- `summary`: `rows` (count), `sum_id` (sum of `id`), `num_files` and `version` of the Delta
  table at `path`, as Delta Spark reads it.
- `clear_cache`: `DeltaLog.clearCache()` (every operation then loads its table from storage).
- `stop`: reply and exit.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

# the repository, for loopback.reference_service (this script runs under .venv-reference)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from loopback.reference_service import (
    delta_package,
    delta_session_conf,
    reply,
    serve,
    take_stdout,
)


def start_session(ivy: str, driver_memory: str, extra: list[str]) -> Any:
    from pyspark.sql import SparkSession

    conf = {
        **delta_session_conf(ivy, "delta-ops-bench-reference"),
        "spark.driver.memory": driver_memory,
        "spark.databricks.delta.retentionDurationCheck.enabled": "false",
    }
    for pair in extra:
        key, _, value = pair.partition("=")
        conf[key] = value
    builder = SparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def _delta_log(spark: Any, path: str) -> Any:
    jvm = spark.sparkContext._jvm
    return jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, path)


def _cleanup(spark: Any, path: str) -> None:
    log = _delta_log(spark, path)
    snapshot = log.unsafeVolatileSnapshot()
    # Scala's default arguments are not visible through py4j: pass the defaults' getters' values
    defaults = [getattr(log, f"cleanUpExpiredLogs$default${i}")() for i in (2, 3, 4)]
    log.cleanUpExpiredLogs(snapshot, *defaults)


def handle(spark: Any, request: dict[str, Any]) -> dict[str, Any]:
    op = request.get("op")
    if op == "ping":
        import pyspark

        return {"ok": True, "spark": pyspark.__version__, "delta": delta_package()}
    if op == "clear_cache":
        spark.sparkContext._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()
        return {"ok": True}
    if op == "summary":
        path = request["path"]
        frame = spark.read.format("delta").load(path)
        row = frame.selectExpr("count(*) AS n", "sum(id) AS s").collect()[0]
        detail = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").collect()[0]
        history = spark.sql(f"DESCRIBE HISTORY delta.`{path}` LIMIT 1").collect()[0]
        return {
            "ok": True,
            "rows": int(row["n"]),
            "sum_id": None if row["s"] is None else int(row["s"]),
            "num_files": int(detail["numFiles"]),
            "version": int(history["version"]),
        }
    start = time.perf_counter()
    rows: list[list[str]] = []
    if op == "sql":
        rows = [[str(v) for v in r] for r in spark.sql(request["sql"]).collect()[:20]]
    elif op == "checkpoint":
        _delta_log(spark, request["path"]).checkpoint()
    elif op == "cleanup":
        _cleanup(spark, request["path"])
    else:
        raise ValueError(f"unknown request op {op!r}")
    return {"ok": True, "seconds": time.perf_counter() - start, "rows": rows}


def error_reply(exc: BaseException) -> dict[str, Any]:
    return {"ok": False, "error": f"{type(exc).__name__}: {str(exc)[:2000]}"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ivy", required=True, help="the Ivy cache holding Delta's jars")
    parser.add_argument("--driver-memory", default="1g")
    parser.add_argument("--conf", action="append", default=[], help="KEY=VALUE (repeatable)")
    args = parser.parse_args()
    replies = take_stdout()
    start = time.perf_counter()
    spark = start_session(os.path.abspath(args.ivy), args.driver_memory, args.conf)
    spark.range(1).collect()
    ready = {"ok": True, "ready": delta_package(), "seconds": time.perf_counter() - start}
    reply(replies, ready)
    try:
        serve(replies, lambda request: handle(spark, request), error_reply)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
