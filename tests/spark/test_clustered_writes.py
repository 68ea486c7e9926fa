"""Writes to a clustered table (issue 50.7): `write_delta` and the streaming sink write each
task's rows in the order of the table's curve (Hilbert over two or more clustering columns,
by value for one), untagged as Delta Spark writes them; the rows stay the same, and a table
not clustered keeps the order it was given."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from delta_ops.layout.clustering import write_order
from delta_ops.layout.curves import CurveKind
from delta_ops.layout.write_order import WriteOrder
from delta_ops.ops.cluster_by import execute_cluster_by, plan_cluster_by
from delta_ops.table.snapshot import load_snapshot
from delta_ops.table.writer import write_arrow
from tests.support import deltalake_rows

ROWS = 2_000


def _rows(seed: int, start: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table(
        {
            "id": pa.array(np.arange(start, start + ROWS)),
            "a": pa.array(rng.integers(0, 1_000_000, ROWS)),
            "b": pa.array(rng.random(ROWS) * 1000),
        }
    )


def _clustered(tmp_path: Path, columns: str) -> Path:
    """A table with one random file, clustered by `columns` (cluster-by)."""
    table = tmp_path / "t"
    write_arrow(table, _rows(0))
    execute_cluster_by(plan_cluster_by(load_snapshot(table), columns))
    return table


def _new_files(table: Path, before: set[str]) -> list[dict[str, Any]]:
    """The add bodies of the live files not in `before`."""
    files = [f for f in load_snapshot(table).files.to_pylist() if f["path"] not in before]
    assert files
    return files


def _in_curve_order(table: Path, path: str, order: WriteOrder) -> bool:
    """Whether the file's rows are in the order of the curve fitted to them."""
    data = pq.read_table(table / path)
    return bool(data.equals(order.sort(data)))


def test_the_write_order_of_a_clustered_table_is_its_curve(tmp_path: Path) -> None:
    assert write_order(load_snapshot(_clustered(tmp_path / "one", "a"))) == WriteOrder(
        (("a",),), CurveKind.ZORDER
    )
    assert write_order(load_snapshot(_clustered(tmp_path / "two", "a,b"))) == WriteOrder(
        (("a",), ("b",)), CurveKind.HILBERT
    )
    plain = tmp_path / "plain"
    write_arrow(plain, _rows(0))
    assert write_order(load_snapshot(plain)) is None


def test_sorting_along_the_curve_keeps_the_rows_and_matches_names_as_spark_does() -> None:
    data = _rows(1).rename_columns(["id", "A", "b"])  # Spark's column in another case
    ordered = WriteOrder((("a",),), CurveKind.ZORDER).sort(data)
    assert ordered.column("A").to_pylist() == sorted(data.column("A").to_pylist())
    assert ordered.sort_by("id").equals(data)
    both = WriteOrder((("a",), ("b",)), CurveKind.HILBERT).sort(data)
    assert both.sort_by("id").equals(data) and not both.equals(data)


# ------------------------------------------------------------------------------ Spark
@pytest.mark.spark
def test_write_delta_writes_each_task_in_curve_order_untagged(spark: Any, tmp_path: Path) -> None:
    from delta_ops.spark import write_delta

    table = _clustered(tmp_path, "a")
    before = {f["path"] for f in load_snapshot(table).files.to_pylist()}
    expected = sorted(deltalake_rows(table) + _rows(2, ROWS).to_pylist(), key=str)
    write_delta(spark.createDataFrame(_rows(2, ROWS)).repartition(2), str(table))
    files = _new_files(table, before)
    for f in files:
        values = pq.read_table(table / f["path"], columns=["a"]).column("a").to_pylist()
        assert values == sorted(values), f["path"]
        # as Delta Spark writes a clustered table's files: no provider, no Z-cube tags
        assert f["clusteringProvider"] is None and not f["tags"]
    assert sorted(deltalake_rows(table), key=str) == expected
    # two columns: a Hilbert curve, each file's rows in the order of the curve fitted to them
    table = _clustered(tmp_path / "two", "a,b")
    before = {f["path"] for f in load_snapshot(table).files.to_pylist()}
    write_delta(spark.createDataFrame(_rows(3, ROWS)).repartition(2), str(table))
    order = write_order(load_snapshot(table))
    assert order is not None
    assert all(_in_curve_order(table, f["path"], order) for f in _new_files(table, before))


@pytest.mark.spark
def test_a_stream_into_a_clustered_table_writes_each_batch_in_curve_order(
    spark: Any, tmp_path: Path
) -> None:
    table = _clustered(tmp_path, "a")
    before = {f["path"] for f in load_snapshot(table).files.to_pylist()}
    inputs = tmp_path / "in"
    inputs.mkdir()
    for i in range(2):
        pq.write_table(_rows(10 + i, (i + 1) * ROWS), inputs / f"part-{i}.parquet")
    schema = spark.read.parquet(str(inputs)).schema
    query = (
        spark.readStream.schema(schema)
        .option("maxFilesPerTrigger", 1)
        .parquet(str(inputs))
        .writeStream.format("delta")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start(str(table))
    )
    query.awaitTermination(120)
    files = _new_files(table, before)
    assert len(files) >= 2  # a file per batch at least
    for f in files:
        values = pq.read_table(table / f["path"], columns=["a"]).column("a").to_pylist()
        assert values == sorted(values), f["path"]
    assert len(deltalake_rows(table)) == 3 * ROWS


def test_the_streaming_sinks_tasks_write_in_curve_order(tmp_path: Path) -> None:
    """The sink's task side (what each Spark task runs for a micro-batch), without a JVM:
    built as Spark builds it from the query's options, its files hold the rows sorted."""
    from pyspark.sql import types as T

    from delta_ops.spark.stream_writer import DeltaStreamWriter

    table = _clustered(tmp_path, "a")
    schema = T.StructType(
        [
            T.StructField(n, t)
            for n, t in (("id", T.LongType()), ("a", T.LongType()), ("b", T.DoubleType()))
        ]
    )
    writer = DeltaStreamWriter({"path": str(table)}, schema, overwrite=False)
    done = writer.write(iter(_rows(4, ROWS).to_batches(max_chunksize=500)))
    assert done.files and not done.refused
    for f in done.files:
        values = pq.read_table(table / f.relative_path, columns=["a"]).column("a").to_pylist()
        assert values == sorted(values)
