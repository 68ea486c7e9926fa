"""Delta Spark and delta-ops read the same rows of a table Delta Spark wrote, at every version."""

from __future__ import annotations

from pathlib import Path

from delta_ops.table.scan import read_table
from delta_ops.table.snapshot import load_snapshot
from tests.reference.delta_spark import DeltaSpark, sorted_rows


def test_delta_spark_writes_and_both_read_every_version(
    delta_spark: DeltaSpark, tmp_path: Path
) -> None:
    path = tmp_path / "smoke"
    delta_spark.sql(f"CREATE TABLE delta.`{path}` (id BIGINT, name STRING) USING delta")
    delta_spark.sql(f"INSERT INTO delta.`{path}` VALUES (1, 'a'), (2, 'b')")
    delta_spark.sql(f"INSERT INTO delta.`{path}` VALUES (3, 'c')")
    expected = {
        0: [],
        1: [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}],
        2: [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}, {"id": 3, "name": "c"}],
    }
    spark_rows = {v: sorted_rows(t) for v, t in delta_spark.read_versions(path, expected).items()}
    assert spark_rows == expected
    for version, rows in expected.items():
        ours = read_table(load_snapshot(str(path), version=version))
        assert sorted_rows(ours) == rows, version
    assert [h["operation"] for h in delta_spark.history(path)] == ["WRITE", "WRITE", "CREATE TABLE"]
    detail = delta_spark.detail(path)
    latest = load_snapshot(str(path))
    assert (detail["numFiles"], detail["sizeInBytes"]) == (latest.num_files, latest.size_bytes)
