"""Every maintenance op on tables other engines made with each feature they enable (issue 17).

delta-rs (`deltalake`) creates a table, appends, deletes a row (a deletion vector where the
table supports them) and overwrites a partition's worth of rows, then adds one table feature
with its own `alter.add_feature`. Our own writer makes tables with each feature its table
properties turn on. On each, every operation runs through the CLI as a user would run it,
and afterwards delta-rs (and DuckDB where it reads the feature) must return exactly the rows
it returned before: maintenance never changes a table's contents.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from delta_ops import cli
from delta_ops.table.snapshot import load_snapshot
from delta_ops.table.writer import write_arrow
from tests.support import deltalake_rows, duckdb_rows

OPERATIONS = [
    # the writer's version has no checksum: written; every commit of ours then writes its own
    ["checksum"],
    ["checkpoint"],
    ["purge"],
    ["compact", "--target-size", "1MB"],
    ["vacuum", "--retention", "0h", "--force", "--in-flight-grace", "0s"],
    ["cleanup", "--retention", "0h"],
    ["enable-row-tracking"],
    ["checkpoint"],
    ["checksum"],  # the latest checksum (our last commit's) agrees with the log
]

DELTALAKE_FEATURES = [
    "AppendOnly",
    "ChangeDataFeed",
    "CheckConstraints",
    "ColumnMapping",
    "DeletionVectors",
    "GeneratedColumns",
    "Invariants",
    "TimestampWithoutTimezone",
    "V2Checkpoint",
]

OUR_PROPERTIES = {
    "rowTracking": {"delta.enableRowTracking": "true"},
    "deletionVectors": {"delta.enableDeletionVectors": "true"},
    "changeDataFeed": {"delta.enableChangeDataFeed": "true"},
    "v2Checkpoint": {"delta.checkpointPolicy": "v2"},
    "inCommitTimestamp": {"delta.enableInCommitTimestamps": "true"},
    "columnMapping": {"delta.columnMapping.mode": "name"},
}


def _batch(start: int, n: int) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(start, start + n), pa.int64()),
            "part": pa.array([f"p{i % 2}" for i in range(start, start + n)]),
        }
    )


def _run_every_operation(table: Path, capsys: pytest.CaptureFixture[str], *, duckdb: bool) -> None:
    expected = _rows(deltalake_rows(table))
    assert expected, "the table must have rows to compare"
    for args in OPERATIONS:
        code = cli.main([args[0], str(table), *args[1:]])
        _, err = capsys.readouterr()
        assert code == 0, (args, err)
        assert _rows(deltalake_rows(table)) == expected, args
        if duckdb:
            assert _rows(duckdb_rows(table)) == expected, args
    assert load_snapshot(table).protocol.supports("rowTracking")


def _rows(rows: list[dict]) -> list[tuple]:
    return sorted((r["id"], r["part"]) for r in rows)


@pytest.mark.parametrize("feature", DELTALAKE_FEATURES)
def test_every_op_on_a_table_delta_rs_made_with_the_feature(
    feature: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from deltalake import DeltaTable, TableFeatures, write_deltalake

    table = tmp_path / feature
    configuration = (
        {"delta.enableDeletionVectors": "true"} if feature == "DeletionVectors" else None
    )
    write_deltalake(table, _batch(0, 20), partition_by=["part"], configuration=configuration)
    for start in (20, 40, 60):
        write_deltalake(table, _batch(start, 5), mode="append")
    dt = DeltaTable(table)
    dt.delete("id = 3")  # a deletion vector, or a rewritten file where the table has none
    if feature != "AppendOnly":  # append-only tables refuse deletes and overwrites
        replacement = pa.table({"id": pa.array([101, 103], pa.int64()), "part": ["p1", "p1"]})
        write_deltalake(table, replacement, mode="overwrite", predicate="part = 'p1'")
    DeltaTable(table).alter.add_feature(
        getattr(TableFeatures, feature), allow_protocol_versions_increase=True
    )
    if feature == "CheckConstraints":
        DeltaTable(table).alter.add_constraint({"positive": "id >= 0"})
    _run_every_operation(table, capsys, duckdb=True)


@pytest.mark.parametrize("feature", sorted(OUR_PROPERTIES))
def test_every_op_on_a_table_our_writer_made_with_the_feature(
    feature: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = tmp_path / feature
    write_arrow(table, _batch(0, 20), partition_by=["part"], configuration=OUR_PROPERTIES[feature])
    for start in (20, 40, 60):
        write_arrow(table, _batch(start, 5))
    write_arrow(table, _batch(100, 4), mode="overwrite")
    write_arrow(table, _batch(200, 6))
    assert load_snapshot(table).protocol.supports(feature)
    # DuckDB's delta extension reads mapped partition columns as null (duckdb-delta#343)
    _run_every_operation(table, capsys, duckdb=feature != "columnMapping")
