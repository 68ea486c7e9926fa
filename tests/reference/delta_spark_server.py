"""Delta Spark, the reference engine, as a long-lived server the tests talk to (one per test run).

Runs under the reference virtualenv's python (`make reference`: pyspark and delta-spark pinned
in tests/reference/requirements.txt, older than the product's pyspark, so never in the test
process itself). It holds ONE local SparkSession with Delta's SQL extension and catalog, its
jars resolved from Maven Central through `spark.jars.packages` into an Ivy cache under build/.

Protocol: one JSON request per line on stdin, one JSON reply per line on the original stdout
(the JVM and Spark's logging are sent to stderr, so nothing else can land in a reply). A reply is
`{"ok": true, ...}` or `{"ok": false, "error": {"type", "condition", "message"}}`: a failing
request never ends the server. Requests (`op`):

- `ping`: `{"ok": true, "spark": version, "delta": version}`.
- `sql`: run `sql`; with `out`, write its result to that file as Arrow IPC (`rows` in the reply).
- `read`: the rows of the Delta table at `path` (latest, `version` or `timestamp`) as Arrow IPC
  in `out`; `reads` a list of such reads answered in order, stopping at the first error.
- `checkpoint`: Delta Spark's own checkpoint of the table at `path` (`DeltaLog.checkpoint`).
- `call`: `function(spark, request)` of `module`, a workload module beside this file (its name
  only), whose JSON-able dict is the reply: Python code that must run in Delta Spark's own
  session (tests/reference/one_session_workload.py: delta-ops on that session).
- `stop`: reply, stop the session and exit.

`--warm` starts the session (downloading the jars on a fresh clone), creates and reads a table
and exits: `make reference` runs it so that the first test run starts from a warm cache.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import tempfile
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
#: the repository, for loopback.reference_service (this script runs under .venv-reference) and
#: delta-ops (the `call` workloads run it on this session)
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, REPO)
from loopback.reference_service import (
    delta_package,
    delta_session_conf,
    reply,
    serve,
    take_stdout,
)


def session_conf(ivy: str) -> dict[str, str]:
    """The session's options: Delta's extension and catalog, sized for a 2-core box (one task at
    a time per tiny table: Delta's log replay uses `snapshotPartitions`, 50 by default)."""
    return {
        **delta_session_conf(ivy, "delta-ops-reference"),
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": "1",
        "spark.default.parallelism": "2",
        "spark.sql.adaptive.enabled": "false",
        "spark.databricks.delta.snapshotPartitions": "1",
        # VACUUM lists the table with this many tasks (10000 by default)
        "spark.sql.sources.parallelPartitionDiscovery.parallelism": "2",
        # no background thread racing the tests' commits (Delta's post-commit hooks stay on)
        "spark.databricks.delta.autoCompact.enabled": "false",
        "spark.driver.memory": "1g",
        "spark.sql.warehouse.dir": os.path.join(tempfile.gettempdir(), "delta-ops-reference-wh"),
        # tiny tables: compiling plans costs more than running them, and C1 alone warms up fast
        "spark.sql.codegen.wholeStage": "false",
        "spark.sql.codegen.factoryMode": "NO_CODEGEN",
        "spark.driver.extraJavaOptions": " ".join(
            [
                "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1",
                "-Dderby.system.home="
                + os.path.join(tempfile.gettempdir(), "delta-ops-reference-derby"),
            ]
        ),
    }


def start_session(ivy: str) -> Any:
    from pyspark.sql import SparkSession

    # Python workers (a workload's UDFs and data sources, delta-ops' tasks) run this
    # interpreter with the repository importable; the JVM reads both variables at its start
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [REPO, *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    builder = SparkSession.builder
    for key, value in session_conf(ivy).items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def write_arrow(table: Any, out: str) -> int:
    import pyarrow as pa

    with pa.OSFile(out, "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    return int(table.num_rows)


def _has_variant(data_type: Any) -> bool:
    from pyspark.sql.types import ArrayType, MapType, StructType, VariantType

    if isinstance(data_type, VariantType):
        return True
    if isinstance(data_type, StructType):
        return any(_has_variant(f.dataType) for f in data_type.fields)
    if isinstance(data_type, ArrayType):
        return _has_variant(data_type.elementType)
    if isinstance(data_type, MapType):
        return _has_variant(data_type.keyType) or _has_variant(data_type.valueType)
    return False


def to_arrow(frame: Any) -> Any:
    """A frame's rows as an Arrow table. With a VARIANT column, the batches as Spark sends them:
    PySpark 4.2's `toArrow` casts them to a variant type whose `value` and `metadata` are not
    nullable and fails on a NULL variant (its children are null too)."""
    if not _has_variant(frame.schema):
        return frame.toArrow()
    import pyarrow as pa

    return pa.Table.from_batches(frame._collect_as_arrow(empty_list_if_zero_records=False))


def read_one(spark: Any, request: dict[str, Any]) -> int:
    reader = spark.read.format("delta")
    if request.get("version") is not None:
        reader = reader.option("versionAsOf", int(request["version"]))
    if request.get("timestamp") is not None:
        reader = reader.option("timestampAsOf", str(request["timestamp"]))
    return write_arrow(to_arrow(reader.load(request["path"])), request["out"])


def handle(spark: Any, request: dict[str, Any]) -> dict[str, Any]:
    op = request.get("op")
    if op == "ping":
        import pyspark

        return {"ok": True, "spark": pyspark.__version__, "delta": delta_package()}
    if op == "sql":
        frame = spark.sql(request["sql"])
        if request.get("out"):
            return {"ok": True, "rows": write_arrow(to_arrow(frame), request["out"])}
        return {"ok": True}
    if op == "read":
        return {"ok": True, "rows": read_one(spark, request)}
    if op == "checkpoint":
        # Delta Spark's own checkpoint of the latest version (no SQL command writes one)
        jvm = spark.sparkContext._jvm
        log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(
            spark._jsparkSession, request["path"]
        )
        log.checkpoint()
        return {"ok": True}
    if op == "reads":
        return {"ok": True, "rows": [read_one(spark, r) for r in request["reads"]]}
    if op == "race":
        import race_workload  # beside this file: the pipeline's side of tests/reference/test_races.py

        return race_workload.run(spark, request)
    if op == "race_end":
        import race_workload

        return race_workload.end(spark, request)
    if op == "call":
        return call(spark, request)
    raise ValueError(f"unknown request op {op!r}")


def call(spark: Any, request: dict[str, Any]) -> dict[str, Any]:
    """`request["function"]` of the workload module `request["module"]` (a file beside this
    one, by its bare name), called with the session and the request."""
    module_name = str(request["module"])
    if not module_name.isidentifier() or not os.path.isfile(
        os.path.join(HERE, f"{module_name}.py")
    ):
        raise ValueError(f"no workload module {module_name!r} beside {HERE}")
    function = getattr(importlib.import_module(module_name), str(request["function"]))
    answer: dict[str, Any] = function(spark, request)
    return {"ok": True, **answer}


def error_reply(exc: BaseException) -> dict[str, Any]:
    condition = None
    # PySpark's own exceptions have the condition; a JVM exception through py4j (a
    # Py4JJavaError, as Delta's DeltaTableFeatureException reaches us) holds it in java_exception
    for source in (exc, getattr(exc, "java_exception", None)):
        get_condition = getattr(source, "getCondition", None)
        if callable(get_condition):
            try:
                condition = get_condition()
            except Exception:  # noqa: BLE001 - best effort, the message says the rest
                condition = None
        if condition:
            break
    return {
        "ok": False,
        "error": {"type": type(exc).__name__, "condition": condition, "message": str(exc)[:4000]},
    }


def warm(spark: Any) -> None:
    """A table created, appended to and read: the jars are cached and the session works."""
    with tempfile.TemporaryDirectory(prefix="delta-ops-reference-warm-") as tmp:
        path = os.path.join(tmp, "t")
        spark.sql(f"CREATE TABLE delta.`{path}` (id BIGINT) USING delta")
        spark.sql(f"INSERT INTO delta.`{path}` VALUES (1), (2)")
        count = spark.read.format("delta").load(path).count()
        if count != 2:
            raise RuntimeError(f"the warm-up table read {count} rows, not 2")
    print(f"delta-ops: Delta Spark ready ({delta_package()})", file=sys.stderr)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ivy", required=True, help="the Ivy cache for the Delta jars")
    parser.add_argument("--warm", action="store_true", help="start, check, exit")
    args = parser.parse_args()
    replies = take_stdout()
    spark = start_session(os.path.abspath(args.ivy))
    try:
        if args.warm:
            warm(spark)
            return 0
        reply(replies, {"ok": True, "ready": delta_package()})
        serve(replies, lambda request: handle(spark, request), error_reply)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
