"""The `delta` Spark data source through delta-ops (issue 14): Spark reads every fixture DuckDB's
delta extension reads and gets the same rows; time travel by version and by timestamp; filters on
partition columns; `df.write.format("delta")` appends and overwrites, partitioned, and a failed
job leaves nothing behind; a wrong path or option is one clear error."""

from __future__ import annotations

import datetime
import time
from pathlib import Path

import pyarrow as pa
import pytest

from delta_ops.table.snapshot import load_snapshot
from delta_ops.table.writer import write_arrow
from tests.support import TABLES, _row_key, deltalake_rows, duckdb_rows, peer_facts
from tests.support.dv_tables import (
    EXPECTED_VALUES,
    RUST_TAIL_VERSION,
    DvText,
    build_inline_dv_history,
)

pytestmark = pytest.mark.spark


@pytest.fixture
def spark(any_spark):
    """Each test here runs on the classic session, then on Spark Connect (the same JVM)."""
    return any_spark


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


def test_inline_dvs_of_either_encoder_read_at_every_version(spark, tmp_path: Path) -> None:
    """delta-kernel-rs' inline-DV history (tests/support/dv_tables.py): at v5 the z85 crate's
    `...##093` deletes row 3, so `versionAsOf` 5 gives 9 rows, as for Delta Spark's encoding
    and as DuckDB reads both (tests/table/test_inline_dv_tables.py)."""
    for encoding in DvText:
        root = build_inline_dv_history(tmp_path / encoding.value, encoding)
        for version, expected in EXPECTED_VALUES.items():
            df = spark.read.format("delta").option("versionAsOf", version).load(str(root))
            assert sorted(r.value for r in df.collect()) == expected, (encoding, version)
    assert len(EXPECTED_VALUES[RUST_TAIL_VERSION]) == 9


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
    """Raised in Spark's Python planner, they reach the caller as the DeltaOpsError's one
    line, not as Spark's report of the worker's traceback."""
    from delta_ops.errors import DeltaOpsError

    with pytest.raises(DeltaOpsError, match="^not a Delta table: .*nothing") as caught:
        spark.read.format("delta").load(str(tmp_path / "nothing")).count()
    assert "\n" not in str(caught.value)
    write_arrow(tmp_path / "t", pa.table({"id": pa.array([1], pa.int64())}))
    with pytest.raises(DeltaOpsError, match="^versionAsOf='x'") as caught:
        spark.read.format("delta").option("versionAsOf", "x").load(str(tmp_path / "t")).count()
    assert "\n" not in str(caught.value)


def test_write_append_partitioned_then_overwrite_as_peers_read_it(spark, tmp_path) -> None:
    table = str(tmp_path / "t")
    df = spark.createDataFrame(
        [(1, "a", "x"), (2, "b", "y"), (3, None, None)], "id long, name string, day string"
    )
    df.write.format("delta").mode("append").option("partitionBy", "day").save(table)
    df.write.format("delta").mode("append").save(table)  # the table keeps its partitioning
    expected = sorted(df.collect() * 2)
    assert sorted(spark.read.format("delta").load(table).collect()) == expected
    assert duckdb_rows(table) == sorted((r.asDict() for r in expected), key=_row_key)
    assert load_snapshot(table).partition_columns == ("day",)
    assert (tmp_path / "t" / "day=x").is_dir() and (
        tmp_path / "t" / "day=__HIVE_DEFAULT_PARTITION__"
    ).is_dir()
    df.filter("id = 2").write.format("delta").mode("overwrite").save(table)
    assert deltalake_rows(table) == [{"id": 2, "name": "b", "day": "y"}]
    assert load_snapshot(table).version == 2


def test_a_failed_write_job_commits_nothing_and_leaves_no_files(spark, tmp_path) -> None:
    from delta_ops.spark.workers import functions_for

    F = functions_for(spark)  # a Connect session's own functions (classic Columns fail there)
    from pyspark.sql.types import LongType

    table = tmp_path / "t"
    spark.range(3).write.format("delta").mode("append").save(str(table))
    before = sorted(p.name for p in table.glob("*.parquet"))

    @F.udf(LongType())
    def fail_on_seven(value: int) -> int:
        if value == 7:
            raise ValueError("boom")
        return value

    bad = spark.range(0, 10, numPartitions=2).select(fail_on_seven("id").alias("id"))
    with pytest.raises(Exception, match="boom"):
        bad.write.format("delta").mode("append").save(str(table))
    assert load_snapshot(table).version == 0
    assert sorted(p.name for p in table.glob("*.parquet")) == before  # the other task's file went


def test_table_properties_as_options_keep_their_spelling(spark, tmp_path) -> None:
    table = str(tmp_path / "t")
    writer = spark.range(4).write.format("delta").mode("append")
    writer.option("delta.enableRowTracking", "true").save(table)
    snapshot = load_snapshot(table)
    assert snapshot.metadata.configuration["delta.enableRowTracking"] == "true"
    assert snapshot.row_id_high_water_mark == 3  # row ids assigned at the commit
    with pytest.raises(Exception, match="delta.madeup"):
        spark.range(1).write.format("delta").mode("append").option("delta.madeUp", "1").save(
            str(tmp_path / "u")
        )
    assert not (tmp_path / "u" / "_delta_log").exists()


def test_write_delta_error_and_ignore_modes(spark, tmp_path) -> None:
    from delta_ops.errors import DeltaOpsError, InvalidValue
    from delta_ops.spark import write_delta

    table = tmp_path / "t"
    assert write_delta(spark.range(2), table, mode="error").version == 0
    with pytest.raises(DeltaOpsError, match="already a Delta table"):
        write_delta(spark.range(2), table, mode="error")
    skipped = write_delta(spark.range(5), table, mode="ignore")
    assert (skipped.version, skipped.attempts) == (0, 0)
    assert sorted(r.id for r in spark.read.format("delta").load(str(table)).collect()) == [0, 1]
    with pytest.raises(InvalidValue, match="mode='upsert'"):
        write_delta(spark.range(1), table, mode="upsert")


def test_local_sessions_run_workers_on_this_interpreter_and_clusters_keep_theirs() -> None:
    import sys

    from delta_ops.spark.session import session_conf

    assert session_conf("local[2]")["spark.pyspark.python"] == sys.executable
    assert "spark.pyspark.python" not in session_conf("spark://master:7077")


def test_spark_reads_the_operation_history_as_duckdb_does(spark, tmp_path) -> None:
    """The history is a Delta table of our own writer, partitioned by day, with a map column:
    Spark reads the same rows as DuckDB (one per run), the map as the same pairs."""
    from delta_ops.cli import main

    table, history = tmp_path / "events", tmp_path / "_history"
    for start in (0, 10, 20):
        write_arrow(table, pa.table({"id": pa.array(range(start, start + 10), pa.int64())}))
    for command in ("compact", "checkpoint", "vacuum"):
        assert main([command, str(table), "--history", str(history)]) == 0

    def plain(row: dict) -> dict:
        metrics = row["metrics"]  # DuckDB: a dict; Arrow from Spark: a list of pairs
        pairs = metrics.items() if isinstance(metrics, dict) else metrics
        return {**row, "metrics": sorted(tuple(p) for p in pairs)}

    ours = [plain(r) for r in _rows(spark.read.format("delta").load(str(history)))]
    peer = [plain(r) for r in duckdb_rows(history)]
    assert sorted(r["operation"] for r in ours) == ["checkpoint", "compact", "vacuum"]
    assert sorted(ours, key=_row_key) == sorted(peer, key=_row_key)


def test_register_takes_delta_and_delta_ops_where_no_jvm_source_has_delta(spark, tmp_path) -> None:
    from delta_ops.spark import register

    table = str(tmp_path / "t")
    write_arrow(table, pa.table({"id": pa.array([1, 2, 3], pa.int64())}))
    assert register(spark) == "delta"  # again: a Python source may be registered again
    assert _rows(spark.read.format("delta_ops").load(table)) == [{"id": 1}, {"id": 2}, {"id": 3}]
    assert _rows(spark.read.format("delta").load(table)) == [{"id": 1}, {"id": 2}, {"id": 3}]


def test_register_leaves_a_jvm_sources_name_to_it_and_says_so(
    spark, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Beside Delta Spark (a JVM `delta`), Spark refuses a Python source of that name
    (DATA_SOURCE_ALREADY_EXISTS): `register` keeps `delta_ops` for delta-ops and logs one line
    instead of failing (tests/reference/test_one_session.py runs it on Delta Spark's session;
    here Spark's own `noop` sink stands for it)."""
    import logging

    from delta_ops.spark import register
    from delta_ops.spark.source import DeltaDataSource

    monkeypatch.setattr(DeltaDataSource, "name", classmethod(lambda cls: "noop"))
    with caplog.at_level(logging.INFO, logger="delta_ops.spark.source"):
        assert register(spark) == "delta_ops"
    (line,) = [r.getMessage() for r in caplog.records if r.name == "delta_ops.spark.source"]
    assert "named 'delta'" in line and "format('delta_ops')" in line
    spark.range(3).write.format("noop").mode("overwrite").save()  # still Spark's sink
