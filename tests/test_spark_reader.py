"""`spark.read.format("delta")` through delta-ops (issue 14): Spark reads every fixture DuckDB's
delta extension reads and gets the same rows; time travel by version and by timestamp; filters on
partition columns; a wrong path or option is one clear error."""

from __future__ import annotations

import datetime
import time
from pathlib import Path

import pyarrow as pa
import pytest

from delta_ops.table.snapshot import load_snapshot
from delta_ops.table.writer import write_arrow
from tests.support import TABLES, _row_key, duckdb_rows, peer_facts

pytestmark = pytest.mark.spark

READABLE = [name for name, fact in sorted(peer_facts().items()) if "kernel_rows" in fact]


def _rows(df) -> list[dict]:
    return sorted(df.toArrow().to_pylist(), key=_row_key)


def test_spark_reads_every_fixture_as_duckdb_does(spark) -> None:
    wrong = {}
    for name in READABLE:
        ours = _rows(spark.read.format("delta").load(str(TABLES / name)))
        if ours != duckdb_rows(TABLES / name):
            wrong[name] = (len(ours), peer_facts()[name]["kernel_rows"])
    assert not wrong, wrong


def test_overwrite_and_delete_read_right_where_plain_parquet_does_not(spark, tmp_path) -> None:
    table = tmp_path / "t"
    for start in (0, 10, 20):
        write_arrow(table, pa.table({"id": pa.array(range(start, start + 10), pa.int64())}))
    write_arrow(table, pa.table({"id": pa.array([7], pa.int64())}), mode="overwrite")
    assert spark.read.parquet(str(table)).count() == 31  # every file ever written
    assert [r.id for r in spark.read.format("delta").load(str(table)).collect()] == [7]


def test_time_travel_by_version_and_by_timestamp(spark, tmp_path: Path) -> None:
    table = tmp_path / "t"
    stamps = []
    for n in range(3):
        write_arrow(table, pa.table({"id": pa.array([n], pa.int64())}))
        stamps.append(datetime.datetime.now(datetime.UTC))
        time.sleep(0.05)
    reader = spark.read.format("delta")
    as_of = reader.option("versionAsOf", 1).load(str(table))
    assert sorted(r.id for r in as_of.collect()) == [0, 1]
    at = stamps[0].isoformat().replace("+00:00", "Z")  # after version 0, before version 1
    by_time = spark.read.format("delta").option("timestampAsOf", at).load(str(table))
    assert [r.id for r in by_time.collect()] == [0]
    assert load_snapshot(table).version == 2


def test_partition_filters_and_column_pruning(spark) -> None:
    table = TABLES / "delta-spark" / "dv-partitioned-with-checkpoint"
    df = spark.read.format("delta").load(str(table))
    expected = [r for r in duckdb_rows(table) if r["part"] in (1, 3)]
    picked = df.filter("part in (1, 3)").select("col1", "part")
    assert _rows(picked) == sorted(
        ({"col1": r["col1"], "part": r["part"]} for r in expected), key=_row_key
    )
    assert df.filter("part > 100").count() == 0


def test_a_missing_table_or_a_bad_version_is_one_clear_error(spark, tmp_path) -> None:
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException

    with pytest.raises((PySparkException, Py4JJavaError), match="not a Delta table|_delta_log"):
        spark.read.format("delta").load(str(tmp_path / "nothing")).count()
    write_arrow(tmp_path / "t", pa.table({"id": pa.array([1], pa.int64())}))
    with pytest.raises((PySparkException, Py4JJavaError), match="versionAsOf='x'"):
        spark.read.format("delta").option("versionAsOf", "x").load(str(tmp_path / "t")).count()
