"""Tables written from Spark by `delta_ops.spark.write_delta` read back exactly in every reader.

Each write is checked against the DataFrame's own rows (collected through Arrow) as seen by
delta-rs, DuckDB's delta extension and our own snapshot (live files read with pyarrow plus the
typed partition values), and each file's `numRecords` against its parquet footer. Our checkpoint
and vacuum then run on the Spark-written tables.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from delta_ops.errors import DeltaOpsError
from delta_ops.ops.checkpoint import checkpoint
from delta_ops.ops.vacuum import execute_vacuum, plan_vacuum
from delta_ops.protocol.schema import parse_partition_values
from delta_ops.spark import write_delta
from delta_ops.spark.writer import (
    OUTPUT_TIMESTAMP_TYPE,
    SESSION_TIME_ZONE,
    STAGING_DIR,
    discard_uncommitted,
    partition_value_from_directory,
    spark_location,
    staged_files,
    unescape_path_name,
)
from delta_ops.storage import Storage
from delta_ops.table.snapshot import load_snapshot
from delta_ops.table.writer import write_arrow
from tests.support import deltalake_rows, duckdb_rows


@pytest.fixture
def spark(any_spark):
    """Each test here runs on the classic session, then on Spark Connect (the same JVM)."""
    return any_spark


ESCAPED = "a b/c:d"  # Spark writes region=a b%2Fc%3Ad
ODD = "é=%25"  # non-ASCII stays, '=' and '%' are escaped


def events(spark, start: int, n: int, *, partitions: int = 2):
    """Rows of every type the writer must carry (long, int, double, string, boolean, date, timestamp), with nulls."""
    return spark.range(start, start + n, numPartitions=partitions).selectExpr(
        "id",
        "case when id % 6 = 0 then null else cast(id % 1000 as int) end as n",
        "case when id % 7 = 0 then null else cast(id as double) * 0.5 end as x",
        "case when id % 5 = 0 then null else concat('name-', id) end as name",
        "case when id % 4 = 0 then null else id % 2 = 0 end as flag",
        "case when id % 9 = 0 then null else date_add(date'2024-01-01', cast(id % 40 as int)) end as day",
        "case when id % 8 = 0 then null else timestamp_micros(1704067200000000 + id * 1000001) end as ts",
    )


def partitioned_events(
    spark, start: int, n: int, regions: tuple[str | None, ...] = (ESCAPED, None, "x", ODD)
):
    cases = " ".join(
        f"when {i} then {'null' if r is None else repr(r)}" for i, r in enumerate(regions)
    )
    return events(spark, start, n).selectExpr(
        "*",
        f"case id % {len(regions)} {cases} end as region",
        "case when id % 3 = 0 then null else cast(id % 3 as int) end as bucket",
    )


def rows_of(df) -> list[dict]:
    return sorted(df.toArrow().to_pylist(), key=lambda r: r["id"])


def by_id(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=lambda r: r["id"])


def snapshot_rows(table: Path | str) -> list[dict]:
    """The rows our snapshot's live files hold, with typed partition values added."""
    snapshot = load_snapshot(table)
    schema = snapshot.schema
    out = []
    for path, values in zip(
        snapshot.files.column("path").to_pylist(),
        snapshot.files.column("partitionValues").to_pylist(),
    ):
        data = pq.read_table(snapshot.storage.table_path(path))
        values = dict(values or [])
        for column in snapshot.partition_columns:
            typed = parse_partition_values(
                pa.array([values[column]] * data.num_rows, pa.string()), schema.field(column).type
            )
            data = data.append_column(column, typed)
        out.extend(data.to_pylist())
    return by_id(out)


def assert_readers_see(table: Path, expected: list[dict]) -> None:
    assert by_id(deltalake_rows(table)) == expected
    assert by_id(duckdb_rows(table)) == expected
    assert snapshot_rows(table) == expected
    snapshot = load_snapshot(table)
    assert snapshot.num_records == len(expected)
    for path, stats in zip(
        snapshot.files.column("path").to_pylist(), snapshot.files.column("stats").to_pylist()
    ):
        assert (
            json.loads(stats)["numRecords"]
            == pq.ParquetFile(snapshot.storage.table_path(path)).metadata.num_rows
        )
    assert not (table / STAGING_DIR).exists()


def data_files(table: Path) -> set[str]:
    return {
        str(p.relative_to(table))
        for p in table.rglob("*")
        if p.is_file() and "_delta_log" not in p.parts
    }


def commit_info(table: Path, version: int) -> dict:
    lines = (table / "_delta_log" / f"{version:020d}.json").read_text().splitlines()
    return next(json.loads(line)["commitInfo"] for line in lines if "commitInfo" in line)


# ------------------------------------------------------------------------------ with Spark
@pytest.mark.spark
def test_append_twice_then_overwrite(spark, tmp_path):
    table = tmp_path / "plain table"  # a space: Hadoop paths must not be percent-encoded
    first, second, third = (
        events(spark, 0, 40),
        events(spark, 40, 30),
        events(spark, 1000, 25, partitions=3),
    )
    expected_first, expected_second, expected_third = (
        rows_of(first),
        rows_of(second),
        rows_of(third),
    )

    assert write_delta(first, table).version == 0
    assert write_delta(second, str(table), mode="append").version == 1
    assert_readers_see(table, expected_first + expected_second)
    assert load_snapshot(table).num_files == 4  # one file per Spark task

    result = write_delta(third, f"file://{table}", mode="overwrite")
    assert result.version == 2
    assert_readers_see(table, expected_third)
    assert [commit_info(table, v)["operation"] for v in range(3)] == [
        "CREATE TABLE AS SELECT",
        "WRITE",
        "WRITE",
    ]
    assert commit_info(table, 2)["operationParameters"]["mode"] == "Overwrite"
    snapshot = load_snapshot(table)
    assert snapshot.num_files == 3 and snapshot.tombstones.num_rows == 4
    delta_types = {f.name: f.type for f in snapshot.schema.fields}
    assert delta_types == {
        "id": "long",
        "n": "integer",
        "x": "double",
        "name": "string",
        "flag": "boolean",
        "day": "date",
        "ts": "timestamp",
    }


@pytest.mark.spark
def test_partitioned_with_nulls_and_escaping_then_checkpoint_and_vacuum(spark, tmp_path):
    table = tmp_path / "events"
    first, second = partitioned_events(spark, 0, 48), partitioned_events(spark, 100, 20)
    expected = rows_of(first) + rows_of(second)
    write_delta(first, table, partition_by=["region", "bucket"])
    write_delta(second, table)  # None: the table's own partitioning
    assert_readers_see(table, by_id(expected))

    on_disk = {p.parent.relative_to(table).as_posix() for p in table.rglob("*.parquet")}
    assert "region=a b%2Fc%3Ad/bucket=__HIVE_DEFAULT_PARTITION__" in on_disk
    assert "region=__HIVE_DEFAULT_PARTITION__/bucket=1" in on_disk
    assert "region=é%3D%2525/bucket=2" in on_disk
    snapshot = load_snapshot(table)
    values = {
        (d["region"], d["bucket"])
        for d in map(dict, snapshot.files.column("partitionValues").to_pylist())
    }
    assert {(ESCAPED, None), (None, "1"), (ODD, "2"), ("x", "1")} <= values
    assert any(
        p.startswith("region=a%20b%252Fc%253Ad/") for p in snapshot.files.column("path").to_pylist()
    )

    with pytest.raises(DeltaOpsError, match="partitioned by"):
        write_delta(second, table, partition_by=["bucket"])  # refused before Spark runs

    third = partitioned_events(spark, 500, 12, regions=("x", ESCAPED))
    expected_third = rows_of(third)
    overwrite = write_delta(third, table, mode="overwrite")
    assert overwrite.version == 2
    assert_readers_see(table, expected_third)

    result = checkpoint(table)
    assert result.version == 2
    assert (table / "_delta_log" / "_last_checkpoint").exists()
    live_before = data_files(table)
    plan = plan_vacuum(
        load_snapshot(table), now_ms=int(time.time() * 1000) + 3_600_000, retention_ms=0, force=True
    )
    assert {c.reason for c in plan.candidates if c.reason != "empty directory"} == {
        "expired tombstone"
    }
    tombstoned = {c.path for c in plan.candidates if c.reason == "expired tombstone"}
    assert len(tombstoned) == load_snapshot(table).tombstones.num_rows
    execute_vacuum(plan)
    live = {
        Storage.open(table).relative_inside_root(p)
        for p in load_snapshot(table).files.column("path").to_pylist()
    }
    assert data_files(table) == live == live_before - tombstoned
    assert not (
        table / "region=__HIVE_DEFAULT_PARTITION__"
    ).exists()  # emptied partition directories go too
    assert_readers_see(table, expected_third)


@pytest.mark.spark
def test_row_tracking_table_gets_row_ids(spark, tmp_path):
    table = tmp_path / "tracked"
    first, second = events(spark, 0, 30), events(spark, 30, 11, partitions=1)
    write_delta(first, f"file://{table}", configuration={"delta.enableRowTracking": "true"})
    result = write_delta(second, table)
    assert result.row_id_high_water_mark == 40
    snapshot = load_snapshot(table)
    assert snapshot.protocol.supports("rowTracking") and snapshot.protocol.supports(
        "domainMetadata"
    )
    assert snapshot.row_id_high_water_mark == 40
    files = sorted(
        snapshot.files.select(["baseRowId", "defaultRowCommitVersion", "stats"]).to_pylist(),
        key=lambda r: r["baseRowId"],
    )
    next_id = 0
    for f in files:  # contiguous, non-overlapping id ranges
        assert f["baseRowId"] == next_id
        next_id += json.loads(f["stats"])["numRecords"]
    assert next_id == 41
    assert [f["defaultRowCommitVersion"] for f in files] == [0, 0, 1]
    assert_readers_see(table, rows_of(first) + rows_of(second))
    checkpoint(str(table))
    assert load_snapshot(table).row_id_high_water_mark == 40
    assert_readers_see(table, rows_of(first) + rows_of(second))


@pytest.mark.spark
def test_failing_commit_leaves_no_data_files(spark, tmp_path):
    from delta_ops.spark.workers import functions_for

    F = functions_for(spark)  # a Connect session's own functions (classic Columns fail there)

    table = tmp_path / "t"
    first = partitioned_events(spark, 0, 8, regions=("x",))
    write_delta(first, table, partition_by=["region", "bucket"])
    before = data_files(table)
    # a new partition value too: its directories are created by the move, then removed again
    extra = partitioned_events(spark, 8, 8, regions=("new",)).withColumn("extra", F.lit(1))
    with pytest.raises(DeltaOpsError, match="columns the table does not"):
        write_delta(extra, table)
    assert data_files(table) == before
    assert not (table / "region=new").exists()
    assert not (table / STAGING_DIR).exists()
    assert load_snapshot(table).version == 0
    assert_readers_see(table, rows_of(first))


@pytest.mark.spark
def test_failing_spark_job_leaves_nothing(spark, tmp_path):
    table = tmp_path / "t"
    bad = spark.range(4).selectExpr(
        "id", "cast(concat('x', id) as int) as n"
    )  # ANSI cast error in the tasks
    with pytest.raises(Exception, match="CAST_INVALID_INPUT"):
        write_delta(bad, table)
    assert not table.exists()  # not even the directory the failed write created
    table.mkdir()
    with pytest.raises(Exception, match="CAST_INVALID_INPUT"):
        write_delta(bad, table)
    assert list(table.iterdir()) == []  # a directory that was there before stays


@pytest.mark.spark
def test_int96_session_still_writes_microsecond_timestamps(spark, tmp_path):
    table = tmp_path / "t"
    df = events(spark, 0, 10, partitions=1)
    spark.conf.set(OUTPUT_TIMESTAMP_TYPE, "INT96")
    try:
        write_delta(df, table)
        assert spark.conf.get(OUTPUT_TIMESTAMP_TYPE) == "INT96"  # restored
    finally:
        spark.conf.set(OUTPUT_TIMESTAMP_TYPE, "TIMESTAMP_MICROS")
    [path] = load_snapshot(table).files.column("path").to_pylist()
    column = pq.ParquetFile(table / path).schema.column(6)
    assert (column.name, column.physical_type) == ("ts", "INT64")
    stats = json.loads(load_snapshot(table).files.column("stats")[0].as_py())
    assert "ts" in stats["minValues"]  # INT96 would carry no min/max
    assert_readers_see(table, rows_of(df))


@pytest.mark.spark
def test_timestamp_partitions_are_exact_in_any_session_zone(spark, tmp_path):
    """Spark names a timestamp partition directory by the session's local time, which Delta
    readers take as UTC; the writer used to refuse any zone but UTC. The values are now
    written as microseconds and committed as UTC text, whatever the zone."""
    table = tmp_path / "t"
    df = events(spark, 0, 4).where("ts is not null")
    spark.conf.set(SESSION_TIME_ZONE, "America/New_York")
    try:
        write_delta(df, table, partition_by=["ts"])
        expected = rows_of(df)
    finally:
        spark.conf.set(SESSION_TIME_ZONE, "UTC")
    logged = load_snapshot(table).files.column("partitionValues").to_pylist()
    values = {dict(v)["ts"] for v in logged}
    assert values == {r["ts"].strftime("%Y-%m-%d %H:%M:%S.%f") for r in expected}
    assert_readers_see(table, expected)


# ------------------------------------------------------------------------------ without Spark
def test_partition_directory_names_are_unescaped_like_spark():
    assert unescape_path_name("a b%2Fc%3Ad") == ESCAPED
    assert unescape_path_name("é%3D%2525") == ODD
    assert unescape_path_name("100%") == "100%"  # not an escape
    assert partition_value_from_directory("__HIVE_DEFAULT_PARTITION__") is None
    assert partition_value_from_directory("2024-01-01 00%3A00%3A00") == "2024-01-01 00:00:00"


def test_staged_files_skip_hidden_files_and_refuse_strays(tmp_path):
    staging = tmp_path / STAGING_DIR / "job"
    for name in (
        "_SUCCESS",
        "._SUCCESS.crc",
        "p=a b%2Fc/q=__HIVE_DEFAULT_PARTITION__/part-00000-u.c000.snappy.parquet",
        "p=a b%2Fc/q=__HIVE_DEFAULT_PARTITION__/.part-00000-u.c000.snappy.parquet.crc",
        "p=x/q=1/part-00001-u.c000.snappy.parquet",
        "_temporary/0/part-00009-u.parquet",
    ):
        (staging / name).parent.mkdir(parents=True, exist_ok=True)
        (staging / name).write_bytes(b"")
    storage = Storage.open(tmp_path)
    files = staged_files(storage, f"{STAGING_DIR}/job", ["p", "q"])
    assert [(f.relative_path, dict(f.partition_values)) for f in files] == [
        (
            "p=a b%2Fc/q=__HIVE_DEFAULT_PARTITION__/part-00000-u.c000.snappy.parquet",
            {"p": "a b/c", "q": None},
        ),
        ("p=x/q=1/part-00001-u.c000.snappy.parquet", {"p": "x", "q": "1"}),
    ]
    (staging / "stray.parquet").write_bytes(b"")
    with pytest.raises(DeltaOpsError, match="unexpected file"):
        staged_files(storage, f"{STAGING_DIR}/job", ["p", "q"])


def test_discarding_keeps_files_the_log_references(tmp_path):
    """A commit that raised after its file landed must not lose the files it references."""
    table = tmp_path / "t"
    write_arrow(table, pa.table({"id": [1, 2]}))
    [committed] = [
        Storage.open(table).relative_inside_root(p)
        for p in load_snapshot(table).files.column("path").to_pylist()
    ]
    (table / "p=1").mkdir()
    (table / "p=1" / "orphan.parquet").write_bytes(b"x")
    discard_uncommitted(Storage.open(table), [committed, "p=1/orphan.parquet"])
    assert (table / committed).exists()
    assert not (table / "p=1").exists()
    assert by_id(deltalake_rows(table)) == [{"id": 1}, {"id": 2}]


def test_spark_location(tmp_path):
    assert spark_location(Storage.open(tmp_path / "a b")) == f"file://{tmp_path}/a b"
    assert spark_location(Storage.open(f"file://{tmp_path}/t/")) == f"file://{tmp_path}/t"
    assert spark_location(Storage.open("memory://bucket/t")) == "memory://bucket/t"
    assert spark_location(Storage.open("memory://bucket/t"), "s3a://bucket/t/") == "s3a://bucket/t"


def test_importing_the_package_does_not_start_spark():
    import subprocess
    import sys

    code = "import sys, delta_ops.spark; assert 'pyspark' not in sys.modules"
    subprocess.run(
        [sys.executable, "-c", code],
        check=True,
        cwd=Path(__file__).resolve().parents[2],
        env={**os.environ},
    )


@pytest.mark.spark
def test_both_spark_writers_lay_files_out_by_the_tables_column_mapping(spark, tmp_path):
    """Appends from Spark into a column-mapped table (nested fields too) write physical names
    and field ids; before, the logical names they wrote were read as nulls everywhere."""
    from delta_ops.table.scan import read_table

    table = tmp_path / "mapped"
    seed = pa.table(
        {
            "id": pa.array([0], pa.int64()),
            "who": pa.array([{"first": "a", "last": "b"}]),
            "day": ["d0"],
        }
    )
    write_arrow(table, seed, partition_by=["day"], configuration={"delta.columnMapping.mode": "id"})
    rows = spark.createDataFrame(
        [(1, ("c", "d"), "d1"), (2, ("e", None), "d0")],
        "id long, who struct<first: string, last: string>, day string",
    )
    write_delta(rows, table)  # the function form: Spark's parquet writer, then our commit
    rows.write.format("delta").mode("append").save(str(table))  # the data source
    snapshot = load_snapshot(table)
    physical = {f.name: f.physical_name for f in snapshot.schema.fields}
    for path in snapshot.files.column("path").to_pylist():
        stored = pq.read_schema(table / path)
        assert stored.names == [physical["id"], physical["who"]], path
        assert stored.field(0).metadata[b"PARQUET:field_id"] == b"1"
        nested = [f.metadata[b"PARQUET:field_id"] for f in stored.field(1).type]
        assert nested == [b"3", b"4"], path
    got = sorted(
        (r["id"], r["who"]["first"], r["who"]["last"], r["day"])
        for r in read_table(snapshot).to_pylist()
    )
    expected = sorted([(0, "a", "b", "d0")] + [(1, "c", "d", "d1"), (2, "e", None, "d0")] * 2)
    assert got == expected
    peer = sorted(
        (r["id"], r["who"]["first"], r["who"]["last"], r["day"]) for r in deltalake_rows(table)
    )
    assert peer == expected


@pytest.mark.spark
def test_merge_schema_from_both_spark_writers(spark, tmp_path):
    table = tmp_path / "merged"
    write_delta(spark.createDataFrame([(1, "a")], "id long, day string"), table)
    wider = spark.createDataFrame([(2, "b", 2.5)], "id long, day string, score double")
    with pytest.raises(DeltaOpsError, match="mergeSchema"):
        write_delta(wider, table)
    write_delta(wider, table, merge_schema=True)
    widest = spark.createDataFrame(
        [(3, "c", 3.5, "x")], "id long, day string, score double, tag string"
    )
    widest.write.format("delta").mode("append").option("mergeSchema", "true").save(str(table))
    snapshot = load_snapshot(table)
    assert snapshot.schema.names == ["id", "day", "score", "tag"]
    assert snapshot.version == 2
    got = sorted((r["id"], r["day"], r["score"], r["tag"]) for r in deltalake_rows(table))
    assert got == [(1, "a", None, None), (2, "b", 2.5, None), (3, "c", 3.5, "x")]


@pytest.mark.spark
def test_replace_where_from_both_spark_writers(spark, tmp_path):
    table = tmp_path / "replaced"
    days = spark.createDataFrame([(1, "a"), (2, "b"), (3, "c")], "id long, day string")
    write_delta(days, table, partition_by=["day"])
    b = spark.createDataFrame([(20, "b")], "id long, day string")
    write_delta(b, table, mode="overwrite", replace_where="day = 'b'")
    c = spark.createDataFrame([(30, "c"), (31, "c")], "id long, day string")
    c.write.format("delta").mode("overwrite").option("replaceWhere", "day >= 'c'").save(str(table))
    assert sorted((r["id"], r["day"]) for r in deltalake_rows(table)) == [
        (1, "a"),
        (20, "b"),
        (30, "c"),
        (31, "c"),
    ]
    before = sorted(str(p.relative_to(table)) for p in table.rglob("*") if p.is_file())
    with pytest.raises(Exception, match="outside replaceWhere"):
        c.write.format("delta").mode("overwrite").option("replaceWhere", "day = 'a'").save(
            str(table)
        )
    after = sorted(str(p.relative_to(table)) for p in table.rglob("*") if p.is_file())
    assert after == before  # no commit, and the tasks' files were deleted again
