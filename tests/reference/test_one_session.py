"""One SparkSession, both libraries (issue 44): delta-ops on Delta Spark's own session.

The reference server's session has Delta's jars, SQL extension and catalog; delta-ops runs in
it (tests/reference/one_session_workload.py, a `call` request, so no second JVM):

- Spark refuses a Python source named like a JVM one, and resolves `delta` to Delta Spark's
  provider before and after delta-ops' `register`, which says so in one line and registers
  delta-ops' source as `delta_ops` instead of failing;
- `write_delta` works on that session and Delta Spark reads what it wrote, row for row;
- `purge`, `compact`, `checkpoint` and `vacuum` with ``--engine spark`` (the CLI, in that
  process) on a table Delta Spark wrote leave a table Delta Spark reads with the same rows, and
  appends to.
"""

from __future__ import annotations

from pathlib import Path

from tests.reference.delta_spark import DeltaSpark

DELTA_SPARK = "org.apache.spark.sql.delta.sources.DeltaDataSource"
PYTHON_SOURCE = "org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2"


def test_delta_ops_and_delta_spark_share_one_session(
    delta_spark: DeltaSpark, tmp_path: Path
) -> None:
    report = delta_spark.call("one_session_workload", "run", scratch=str(tmp_path))

    names = report["format_names"]
    assert names["before"] == {"delta": DELTA_SPARK, "delta_ops": "error: DATA_SOURCE_NOT_FOUND"}
    assert names["plain_register"] == "error: DATA_SOURCE_ALREADY_EXISTS"
    assert names["registered"] == "delta_ops"
    assert len(names["logged"]) == 1 and "format('delta_ops')" in names["logged"][0]
    assert names["after"] == {"delta": DELTA_SPARK, "delta_ops": PYTHON_SOURCE}

    written = report["write_delta"]
    assert written["versions"] == [0, 1]
    assert len(written["written"]) == 16
    assert written["delta_spark"] == written["written"]
    assert written["delta_ops"] == written["written"]
    assert written["history"] == ["WRITE", "CREATE TABLE AS SELECT"]  # newest first

    maintained = report["maintenance"]
    assert len(maintained["before"]) == 22  # 30 rows, 8 deleted (deletion vectors)
    assert maintained["after"] == maintained["before"]
    runs = maintained["runs"]
    assert (runs["purge"]["rows_dropped"], runs["purge"]["files_rewritten"]) == (8, 6)
    assert runs["compact"]["files_added"] < runs["compact"]["files_removed"]
    assert len(runs["checkpoint"]["written"]) == 2  # the parts
    assert runs["vacuum"]["num_deleted"] > 0
    assert maintained["history"][:6] == [
        "WRITE",  # Delta Spark's append after delta-ops' maintenance
        "VACUUM END",
        "VACUUM START",
        "OPTIMIZE",
        "REORG",
        "DELETE",
    ]
    assert len(maintained["appended"]) == len(maintained["before"]) + 1
