"""Every Spark SQL type through both Spark writers and the reader (issue 32, the writer's types).

`write_delta(df, path)` and `df.write.format("delta")` write a DataFrame holding every Spark
type Delta has (with nulls at every level) in a session whose time zone is not UTC
(America/Los_Angeles, across both daylight-saving changes), with column mapping off and on,
unpartitioned and partitioned by each partitionable type; Spark, deltalake (delta-rs) and
DuckDB's delta extension (delta-kernel-rs) then read the same rows. `format("delta")` used to
fail on any timestamp column before writing a file (the Arrow schema had no time zone), and
write_delta refused timestamp partitions outside UTC.

Rows that Spark reads from each fixture table written by other engines append back into a copy
of it through `format("delta")`, and both peers read every old row twice. Errors a task or
the planner raises (a NOT NULL column given nulls, a table feature the writer refuses, a type
with no Delta type, a lossy cast) reach the caller as one-line DeltaOpsErrors, and the table's
files are byte for byte what they were.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from delta_ops.errors import DeltaOpsError
from delta_ops.spark import write_delta
from delta_ops.table.snapshot import load_snapshot
from delta_ops.table.writer import write_arrow
from loopback.servers import StoreServer, serve_s3
from tests.support import (
    _row_key,
    copy_fixture,
    deltalake_rows,
    duckdb_rows,
    file_digests,
    peer_facts,
)

pytestmark = pytest.mark.spark

UTC = dt.UTC
SCHEMA = (
    "id int, flag boolean, tiny tinyint, small smallint, n int, big bigint, real float, "
    "wide double, price decimal(5,2), amount decimal(18,6), huge decimal(38,10), name string, "
    "note string, blob binary, day date, ts timestamp, ntz timestamp_ntz, ints array<int>, "
    "tags map<string,int>, "
    "deep struct<a: struct<b: struct<c: int, at: timestamp>, s: string>, "
    "items: array<struct<k: string, v: double>>>"
)
#: 01:30 on 2024-11-03 happens twice in Los Angeles (PDT, then PST): two instants, two partitions
FIRST_0130 = dt.datetime(2024, 11, 3, 8, 30, 0, 123456, tzinfo=UTC)
SECOND_0130 = dt.datetime(2024, 11, 3, 9, 30, tzinfo=UTC)
ROWS: list[tuple[Any, ...]] = [
    (
        1, True, 1, 2, 3, 4, 1.5, 0.0, Decimal("1.25"), Decimal("123456.123456"),
        Decimal("1234567890.0123456789"), "a b/c=d%é", "", b"\x00\xff", dt.date(2024, 3, 10),
        FIRST_0130, dt.datetime(2024, 3, 10, 2, 30),  # a wall time Los Angeles skips
        [1, None, 3], {"x": 1, "y": None},
        (((7, dt.datetime(2000, 1, 1, tzinfo=UTC)), "s"), [("k", 0.5), None]),
    ),
    (
        2, False, -128, -32768, -2147483648, -9223372036854775808, -0.5, -1e300,
        Decimal("-999.99"), Decimal("0.000001"), Decimal("-" + "9" * 28 + "." + "9" * 10),
        "ü", "x", b"", dt.date(1969, 12, 31), SECOND_0130,
        dt.datetime(1900, 1, 1, 0, 0, 0, 1), [], {},
        ((None, None), []),
    ),
    (3, *[None] * 19),
    (  # NaN and -0.0 are partition values of their own; "" is a null partition value
        4, None, None, None, None, None, math.nan, -0.0, None, None, None, "", None, None, None,
        dt.datetime(1969, 7, 20, 20, 17, 40, tzinfo=UTC), None, [None], {"z": None},
        (None, None),
    ),
]  # fmt: skip
COLUMNS = [
    "id",
    "flag",
    "tiny",
    "small",
    "n",
    "big",
    "real",
    "wide",
    "price",
    "amount",
    "huge",
    "name",
    "note",
    "blob",
    "day",
    "ts",
    "ntz",
    "ints",
    "tags",
    "deep",
]
#: int, string, date, boolean, decimal, timestamp; then the other partitionable types
BY_COMMON = ("n", "name", "day", "flag", "price", "ts")
BY_OTHERS = ("tiny", "small", "big", "real", "wide", "huge", "ntz")


@pytest.fixture
def los_angeles(spark) -> Iterator[None]:
    """The session's time zone is America/Los_Angeles for the test, then what it was."""
    key = "spark.sql.session.timeZone"
    before = spark.conf.get(key)
    spark.conf.set(key, "America/Los_Angeles")
    try:
        yield
    finally:
        spark.conf.set(key, before)


def _normal(value: Any) -> Any:
    """A value as every reader should give it: instants in UTC (naive datetimes are
    timestamp_ntz and stay), NaN comparable, Arrow maps (lists of pairs) as dicts, nested
    values alike."""
    if isinstance(value, dt.datetime):
        return value.astimezone(UTC) if value.tzinfo is not None else value
    if isinstance(value, float) and math.isnan(value):
        return "NaN"  # equal to itself
    if isinstance(value, dict):
        return {k: _normal(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_normal(v) for v in value]
    return value


def _rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`rows` normalized (see :func:`_normal`) and sorted."""
    out = []
    for row in rows:
        row = dict(row)
        if isinstance(row.get("tags"), list):
            row["tags"] = dict(row["tags"])
        out.append(_normal(row))
    return sorted(out, key=_row_key)


def _expected(partition_by: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """ROWS as readers give them: structs as dicts, an empty string in a partition column
    null (the protocol says so; Spark writes it so)."""

    def deep(value: Any) -> Any:
        if value is None:
            return None
        a, items = value
        return {
            "a": None
            if a is None
            else {"b": None if a[0] is None else dict(zip(("c", "at"), a[0])), "s": a[1]},
            "items": None
            if items is None
            else [None if i is None else dict(zip(("k", "v"), i)) for i in items],
        }

    rows = []
    for values in ROWS:
        row = dict(zip(COLUMNS, values, strict=True))
        row["deep"] = deep(row["deep"])
        rows.append({k: None if k in partition_by and v == "" else v for k, v in row.items()})
    return rows


def _tree(root: Path) -> dict[str, str]:
    """Every file (by digest) and directory under `root`, computed afresh."""
    dirs = {f"{p.relative_to(root)}/": "dir" for p in root.rglob("*") if p.is_dir()}
    return {**file_digests(root), **dirs}


def _one_line(error: BaseException) -> str:
    text = str(error)
    assert isinstance(error, DeltaOpsError), type(error)
    assert text and "\n" not in text and "Traceback" not in text, text
    return text


# ---------------------------------------------------------------------------------- every type
@pytest.mark.parametrize("mapping", ["none", "name"])
@pytest.mark.parametrize(
    "partition_by",
    [(), BY_COMMON, BY_OTHERS],
    ids=["unpartitioned", "by-int-string-date-boolean-decimal-timestamp", "by-other-types"],
)
def test_every_type_through_both_writers_reads_the_same_in_spark_and_both_peers(
    spark, los_angeles, tmp_path, mapping, partition_by
) -> None:
    table = tmp_path / "t"
    df = spark.createDataFrame(ROWS, SCHEMA)
    properties = {"delta.columnMapping.mode": mapping} if mapping != "none" else {}
    if partition_by == BY_OTHERS:  # the function creates the table, the data source appends
        write_delta(df, table, partition_by=list(partition_by), configuration=properties)
        df.write.format("delta").mode("append").save(str(table))
    else:
        writer = df.write.format("delta").mode("append").options(**properties)
        if partition_by:
            writer = writer.option("partitionBy", ",".join(partition_by))
        writer.save(str(table))
        write_delta(df, table)  # the table's own partitioning and column mapping
    snapshot = load_snapshot(table)
    assert snapshot.partition_columns == partition_by
    assert snapshot.properties.column_mapping_mode == mapping

    expected = _rows(_expected(partition_by) * 2)
    assert _rows(spark.read.format("delta").load(str(table)).toArrow().to_pylist()) == expected
    assert _rows(deltalake_rows(table)) == expected
    if not (partition_by and mapping != "none"):
        # DuckDB's delta extension misreads partition columns of column-mapped tables (nulls,
        # or a cast error when they are not the first columns: duckdb/duckdb-delta#50, #343)
        assert _rows(duckdb_rows(table)) == expected

    # timestamps are UTC microseconds in the files, timestamp_ntz microseconds without a zone
    physical = {f.name: f.physical_name if mapping != "none" else f.name for f in snapshot.schema}
    for path in snapshot.files.column("path").to_pylist():
        stored = pq.read_schema(table / unquote(path))
        if "ts" not in partition_by:
            assert stored.field(physical["ts"]).type == pa.timestamp("us", tz="UTC"), path
        if "ntz" not in partition_by:
            assert stored.field(physical["ntz"]).type == pa.timestamp("us"), path
    if "ts" in partition_by:  # UTC text in the log, the two 01:30s apart
        logged = snapshot.files.column("partitionValues").to_pylist()
        assert {dict(v)[physical["ts"]] for v in logged} == {
            "2024-11-03 08:30:00.123456",
            "2024-11-03 09:30:00.000000",
            "1969-07-20 20:17:40.000000",
            None,
        }


@pytest.fixture(scope="module")
def s3() -> Iterator[StoreServer]:
    with serve_s3() as running:
        yield running


@pytest.mark.parametrize(
    ("mapping", "partition_by"),
    [("none", ()), ("name", BY_COMMON)],
    ids=["plain", "mapped-partitioned"],
)
def test_every_type_through_the_data_source_on_the_s3_emulator(
    spark, los_angeles, s3, mapping, partition_by
) -> None:
    """The same round trip on moto's S3 server: the data source's tasks and its reader reach
    the store through delta-ops' storage (`storage.*` options). write_delta is not here: it
    has Spark's own parquet writer write to s3a://, which needs the hadoop-aws jars."""
    url = s3.url(f"types-{mapping}-{len(partition_by)}")
    options = {f"storage.{k}": v for k, v in s3.options.items()}
    df = spark.createDataFrame(ROWS, SCHEMA)
    create = df.write.format("delta").mode("append").options(**options)
    if mapping != "none":
        create = create.option("delta.columnMapping.mode", mapping)
    if partition_by:
        create = create.option("partitionBy", ",".join(partition_by))
    create.save(url)
    df.write.format("delta").mode("append").options(**options).save(url)
    snapshot = load_snapshot(url, storage_options=s3.options)
    assert (snapshot.version, snapshot.partition_columns) == (1, partition_by)
    assert snapshot.properties.column_mapping_mode == mapping

    expected = _rows(_expected(partition_by) * 2)
    read = spark.read.format("delta").options(**options).load(url)
    assert _rows(read.toArrow().to_pylist()) == expected
    assert _rows(deltalake_rows(url, storage_options=s3.peer_options)) == expected


def test_types_without_a_delta_type_are_refused_in_one_line_by_both_writers(
    spark, tmp_path
) -> None:
    df = spark.sql(
        "select 1 as id, interval '1' day as wait, interval '2' year as age, null as nothing, "
        "parse_json('{\"a\": 1}') as doc, named_struct('x', interval '3' hour) as inner"
    )
    table = tmp_path / "t"
    for write in (
        lambda: write_delta(df, table),
        lambda: df.write.format("delta").mode("append").save(str(table)),
    ):
        with pytest.raises(Exception) as caught:
            write()
        text = _one_line(caught.value)
        for described in ("wait (interval day)", "age (interval year)", "nothing (void)"):
            assert described in text
        assert "doc (variant)" in text and "inner.x (interval hour)" in text
        assert not table.exists()


def test_narrower_types_are_cast_and_lossy_ones_refused_in_one_line(spark, tmp_path) -> None:
    """write_delta used to write a DataFrame's long column as it was into an int column (and
    an int into a string column): every reader then failed on the table."""
    table = tmp_path / "t"
    write_arrow(table, pa.table({"v": pa.array([1], pa.int64()), "d": pa.array([1.5])}))
    narrower = spark.sql("select cast(2 as int) as v, cast(2.5 as float) as d")
    write_delta(narrower, table)
    narrower.write.format("delta").mode("append").save(str(table))
    rows = [{"v": 1, "d": 1.5}, {"v": 2, "d": 2.5}, {"v": 2, "d": 2.5}]
    assert _rows(deltalake_rows(table)) == _rows(duckdb_rows(table)) == _rows(rows)
    before = _tree(table)
    with pytest.raises(Exception) as caught:
        write_delta(spark.sql("select 'x' as v, cast(1 as decimal(20,0)) as d"), table)
    assert "v (string into int64)" in _one_line(caught.value)
    too_big = spark.sql("select cast(1e20 as double) as v, cast(1 as double) as d")
    with pytest.raises(Exception) as caught:
        too_big.write.format("delta").mode("append").save(str(table))
    assert "column v" in _one_line(caught.value)
    assert _tree(table) == before


# ---------------------------------------------------------------------- other engines' tables
#: tables the writer refuses by design, and why
REFUSED = {
    "delta-rs/checkpoint-v2-table": "identity values",  # an identity column delta-ops cannot fill
}
#: deltalake reads these tables' logs but refuses their rows
DELTALAKE_REFUSES_ROWS = {"delta-spark/basic-with-vacuum-protocol-check-feature"}
WITH_DATA = sorted(
    name
    for name, fact in peer_facts().items()
    if "rs_error" not in fact and fact.get("rs_files") and "kernel_rows" in fact
)


def _peers(name: str) -> dict[str, Callable[[Path], list[dict[str, Any]]]]:
    peers: dict[str, Callable[[Path], list[dict[str, Any]]]] = {"duckdb": duckdb_rows}
    if name not in DELTALAKE_REFUSES_ROWS:
        peers["deltalake"] = deltalake_rows
    return peers


@pytest.mark.parametrize("name", WITH_DATA)
def test_rows_read_from_another_engines_table_append_back_through_the_data_source(
    spark, tmp_path, name
) -> None:
    table = copy_fixture(name, tmp_path)
    rows = spark.read.format("delta").load(str(table))
    if name in REFUSED:
        before = _tree(table)
        with pytest.raises(Exception) as caught:
            rows.write.format("delta").mode("append").save(str(table))
        assert REFUSED[name] in _one_line(caught.value)
        assert _tree(table) == before
        return  # refused by design, in one line, leaving the table as it was: checked above
    old = {peer: read(table) for peer, read in _peers(name).items()}
    rows.write.format("delta").mode("append").save(str(table))
    for peer, read in _peers(name).items():
        assert read(table) == sorted(old[peer] * 2, key=_row_key), peer


# ----------------------------------------------------------------------------- failed writes
def test_nulls_in_a_not_null_column_fail_both_writers_in_one_line_leaving_the_files(
    spark, tmp_path
) -> None:
    from deltalake import write_deltalake

    table = tmp_path / "t"
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("day", pa.string())])
    write_deltalake(str(table), pa.table({"id": [1], "day": ["a"]}, schema), partition_by=["day"])
    # two tasks: one writes a new partition's file; the other has a clean partition before
    # the one with the null
    rows = spark.sparkContext.parallelize([(2, "new"), (5, "b"), (None, "a")], 2)
    df = spark.createDataFrame(rows, "id long, day string")
    before = _tree(table)
    for write in (
        lambda: write_delta(df, table),
        lambda: df.write.format("delta").mode("append").save(str(table)),
    ):
        with pytest.raises(Exception) as caught:
            write()
        assert "column 'id' is NOT NULL" in _one_line(caught.value)
        assert _tree(table) == before
    assert deltalake_rows(table) == [{"id": 1, "day": "a"}]


def test_a_refused_table_feature_fails_both_writers_in_one_line_leaving_the_files(
    spark, tmp_path
) -> None:
    table = copy_fixture("delta-rs/checkpoint-v2-table", tmp_path)
    rows = spark.read.format("delta").load(str(table))
    before = _tree(table)
    for write in (
        lambda: write_delta(rows, table),
        lambda: rows.write.format("delta").mode("append").save(str(table)),
    ):
        with pytest.raises(Exception) as caught:
            write()
        assert "column id has identity values" in _one_line(caught.value)
        assert _tree(table) == before
