"""Reading a table's rows (delta_ops.table.scan, the engine under the Spark `delta` source):
on every fixture DuckDB's delta extension reads, the same rows, DVs applied, column mapping
resolved, partition values typed; plus the cases the fixtures do not cover."""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from delta_ops.errors import DeltaOpsError
from delta_ops.table.scan import plan_scan, read_table
from delta_ops.table.snapshot import load_snapshot
from delta_ops.table.transaction import Transaction
from delta_ops.table.writer import write_arrow
from tests.support import TABLES, duckdb_rows, peer_facts

READABLE = [name for name, fact in sorted(peer_facts().items()) if "kernel_rows" in fact]


def _sorted_rows(table: pa.Table) -> list[dict]:
    from tests.support import _row_key

    return sorted(table.to_pylist(), key=_row_key)


@pytest.mark.parametrize("name", READABLE)
def test_every_fixture_reads_as_duckdb_reads_it(name: str) -> None:
    table = TABLES / name
    ours = read_table(load_snapshot(table))
    assert ours.num_rows == peer_facts()[name]["kernel_rows"]
    assert _sorted_rows(ours) == duckdb_rows(table)


def test_columns_are_selected_and_unknown_ones_named() -> None:
    table = TABLES / "delta-spark" / "dv-partitioned-with-checkpoint"
    snapshot = load_snapshot(table)
    both = read_table(snapshot, ["col1", "part"])
    assert both.column_names == ["col1", "part"]
    full = read_table(snapshot)
    assert sorted(zip(both["col1"].to_pylist(), both["part"].to_pylist(), strict=True)) == sorted(
        zip(full["col1"].to_pylist(), full["part"].to_pylist(), strict=True)
    )
    with pytest.raises(DeltaOpsError, match="no column 'nope'"):
        plan_scan(snapshot, ["nope"])


def test_an_added_column_reads_as_null_in_older_files_and_widened_types_widen(
    tmp_path: Path,
) -> None:
    table = tmp_path / "t"
    write_arrow(table, pa.table({"id": pa.array([1, 2], pa.int32())}))
    # a newer schema: id widened to long (type widening), a column added
    snapshot = load_snapshot(table)
    schema = json.loads(snapshot.metadata.schema_string)
    schema["fields"][0]["type"] = "long"
    schema["fields"].append({"name": "note", "type": "string", "nullable": True, "metadata": {}})
    meta = {**snapshot.metadata.to_action(), "schemaString": json.dumps(schema)}
    protocol = snapshot.protocol.to_action()
    txn = Transaction(snapshot, operation="CHANGE COLUMN")
    txn.add_action({"protocol": protocol})
    txn.add_action({"metaData": meta})
    txn.commit()
    new = table / "new.parquet"
    pq.write_table(pa.table({"id": pa.array([3], pa.int64()), "note": ["new"]}), new)
    txn = Transaction(load_snapshot(table), operation="WRITE")
    add = {"path": new.name, "partitionValues": {}, "size": new.stat().st_size}
    txn.add_action({"add": {**add, "modificationTime": 0, "dataChange": True}})
    txn.commit()
    rows = read_table(load_snapshot(table))
    assert rows.schema.field("id").type == pa.int64()
    assert sorted(rows.to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "note": None},
        {"id": 2, "note": None},
        {"id": 3, "note": "new"},
    ]


def test_int96_timestamps_read_as_microseconds_out_to_year_9999(tmp_path: Path) -> None:
    table = tmp_path / "t"
    late = datetime.datetime(9999, 12, 31, 23, 59, 59, tzinfo=datetime.UTC)
    write_arrow(table, pa.table({"ts": pa.array([late], pa.timestamp("us", tz="UTC"))}))
    # rewrite the data file the way Spark's default does: INT96
    (data_file,) = [p for p in table.glob("*.parquet")]
    pq.write_table(
        pa.table({"ts": pa.array([late], pa.timestamp("us", tz="UTC"))}),
        data_file,
        use_deprecated_int96_timestamps=True,
    )
    assert read_table(load_snapshot(table))["ts"].to_pylist() == [late]
