"""`drop-feature` at Delta Spark 4.4's breadth (issue 51, items 2 and 3): type widening on the
public golden tables Delta Spark wrote, column mapping, row tracking, domain metadata,
materialized partition columns and CHECK constraints on tables our writer builds, and the
features Delta Spark 4.4 cannot drop refused with the reason.

The independent readers judge: `deltalake` (delta-rs 1.6) refuses type widening and column
mapping at reader version 3 before the drop and must read the rows after it, as DuckDB reads
them; after a deletion-vector drop on a column-mapped table it reads the mapped columns as
NULL (its bug), which the drop's result warns about.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from deltalake.exceptions import DeltaProtocolError

from delta_ops import cli
from delta_ops.clock import fixed_wall_clock
from delta_ops.errors import OperationRefused
from delta_ops.ops.drop_feature import execute_drop_feature, plan_drop_feature
from delta_ops.protocol.features import Access
from delta_ops.table.scan import read_table
from delta_ops.table.snapshot import load_snapshot
from delta_ops.table.transaction import Transaction
from delta_ops.table.writer import write_arrow
from tests.support import copy_fixture, deltalake_rows, duckdb_rows, file_digests


def _drop(table: Path, feature: str) -> Any:
    return execute_drop_feature(plan_drop_feature(load_snapshot(table), feature=feature))


def _key(row: dict[str, Any]) -> str:
    return json.dumps(row, sort_keys=True, default=str)


def _pyarrow_rows(table: Path) -> list[dict[str, Any]]:
    """What deltalake's pyarrow reader returns (it refuses reader features it lacks)."""
    return sorted(DeltaTable(str(table)).to_pyarrow_table().to_pylist(), key=_key)


def _with(table: Path, features: tuple[str, ...], config: dict[str, str]) -> None:
    """Add `features` to the protocol and `config` to the properties in one commit."""
    snapshot = load_snapshot(table)
    txn = Transaction(snapshot, "SET TBLPROPERTIES", purpose=Access.WRITE)
    txn.add_action({"protocol": snapshot.protocol.with_features(*features).to_action()})
    metadata = snapshot.metadata.to_action()
    txn.add_action(
        {"metaData": {**metadata, "configuration": {**metadata["configuration"], **config}}}
    )
    txn.commit()


@pytest.mark.parametrize("name", ["type-widening", "type-widening-nested"])
def test_type_widening_drop_rewrites_narrow_files_so_deltalake_reads_them(
    name: str, tmp_path: Path
) -> None:
    table = copy_fixture(f"delta-spark/{name}", tmp_path)
    with pytest.raises(DeltaProtocolError, match="typeWidening-preview"):
        DeltaTable(str(table)).to_pyarrow_table()
    before = load_snapshot(table)
    widened_table = read_table(before)
    widened = sorted(widened_table.to_pylist(), key=_key)
    narrow = [p for p in before.file_index.column("path").to_pylist() if _narrower(table, p)]
    assert len(narrow) == 1  # Spark's first file, written before the widening
    result = _drop(table, "typeWidening-preview")

    assert result.dropped and result.files_rewritten == 1 and not result.warnings
    after = load_snapshot(table)
    assert not after.protocol.supports("typeWidening-preview")
    assert "delta.typeChanges" not in after.metadata.schema_string
    assert "delta.enableTypeWidening" not in after.metadata.configuration
    assert not set(narrow) & set(after.file_index.column("path").to_pylist())
    assert _pyarrow_rows(table) == widened == sorted(duckdb_rows(table), key=_key)
    # every live file now holds the table's own types
    assert not [p for p in after.file_index.column("path").to_pylist() if _narrower(table, p)]


def _narrower(table: Path, path: str) -> bool:
    """Whether a data file stores a column in another type than the table reads it as."""
    wanted = read_table(load_snapshot(table)).schema
    stored = pq.read_schema(table / path)
    return any(not f.type.equals(wanted.field(f.name).type) for f in stored)


def _mapped_table(tmp_path: Path) -> tuple[Path, list[dict[str, Any]]]:
    """A partitioned, name-mapped table with deletion vectors and row tracking, 2 appends."""
    table = tmp_path / "mapped"
    data = pa.table(
        {
            "id": pa.array([1, 2, 3], pa.int64()),
            "part": ["a", "b", "a"],
            "s": pa.array([{"x": 1}, {"x": 2}, None]),
        }
    )
    config = {
        "delta.columnMapping.mode": "name",
        "delta.enableDeletionVectors": "true",
        "delta.enableRowTracking": "true",
    }
    write_arrow(table, data, partition_by=["part"], configuration=config)
    write_arrow(table, data)
    return table, sorted(data.to_pylist() * 2, key=_key)


def test_a_mapped_table_after_the_dv_drop_warns_that_deltalake_reads_nulls(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table, rows = _mapped_table(tmp_path)
    assert cli.main(["drop-feature", str(table), "deletionVectors"]) == 0
    out = capsys.readouterr().out
    assert "warning: deltalake (delta-rs) 1.6's pyarrow reader" in out
    assert "drop columnMapping as well" in out
    assert load_snapshot(table).protocol.min_reader_version == 2
    # what the warning says: deltalake's pyarrow reader opens the table and reads the mapped
    # columns as NULL; its kernel scan and DuckDB read the values
    misread = _pyarrow_rows(table)
    assert {r["id"] for r in misread} == {None} and misread != rows
    assert deltalake_rows(table) == rows

    # then the rest, each judged by deltalake and DuckDB
    tracked = _drop(table, "rowTracking")
    assert tracked.dropped and tracked.warnings  # still column-mapped at reader version 2
    after = load_snapshot(table)
    assert after.file_index.column("baseRowId").null_count == after.num_files
    config = after.metadata.configuration
    assert not [k for k in config if k.startswith(("delta.rowTracking", "delta.enableRowT"))]
    assert "delta.rowTracking" not in after.domains

    unmapped = _drop(table, "columnMapping")
    assert unmapped.dropped and unmapped.files_rewritten == 4 and not unmapped.warnings
    after = load_snapshot(table)
    assert after.protocol.min_reader_version == 1
    assert "delta.columnMapping" not in after.metadata.schema_string
    assert "delta.columnMapping.mode" not in after.metadata.configuration
    assert {
        k for row in after.file_index.column("partitionValues").to_pylist() for k, _ in row
    } == {"part"}
    assert _pyarrow_rows(table) == deltalake_rows(table) == rows
    assert sorted(duckdb_rows(table), key=_key) == rows

    domains = _drop(table, "domainMetadata")
    assert domains.dropped and not load_snapshot(table).protocol.supports("domainMetadata")
    assert _pyarrow_rows(table) == rows


def test_check_constraints_are_refused_while_the_table_has_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = tmp_path / "t"
    write_arrow(table, pa.table({"id": pa.array([1, 2], pa.int64())}))
    _with(table, ("checkConstraints",), {"delta.constraints.positive": "id > 0"})
    digests = file_digests(table)
    assert cli.main(["drop-feature", str(table), "checkConstraints"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "CHECK constraints positive" in err
    assert "DROP CONSTRAINT" in err
    assert file_digests(table) == digests
    # without the constraint the writer feature goes, the protocol back to a legacy one
    snapshot = load_snapshot(table)
    txn = Transaction(snapshot, "ALTER TABLE DROP CONSTRAINT", purpose=Access.WRITE)
    metadata = snapshot.metadata.to_action()
    txn.add_action({"metaData": {**metadata, "configuration": {}}})
    txn.commit()
    assert _drop(table, "checkConstraints").dropped
    after = load_snapshot(table).protocol
    assert (after.min_reader_version, after.min_writer_version) == (1, 2)


def test_materialize_partition_columns_goes_with_its_property(tmp_path: Path) -> None:
    table = tmp_path / "t"
    write_arrow(table, pa.table({"id": pa.array([1, 2], pa.int64())}))
    key = "delta.enableMaterializePartitionColumnsFeature"
    _with(table, ("materializePartitionColumns",), {key: "true"})
    result = _drop(table, "materializePartitionColumns")
    assert result.dropped
    after = load_snapshot(table)
    assert key not in after.metadata.configuration
    assert not after.protocol.supports("materializePartitionColumns")


def test_column_mapping_names_parquet_cannot_hold_are_refused(tmp_path: Path) -> None:
    table = copy_fixture("delta-rs/table_with_column_mapping", tmp_path)
    digests = file_digests(table)
    with pytest.raises(OperationRefused, match="'Company Very Short'.*rename them first"):
        plan_drop_feature(load_snapshot(table), feature="columnMapping")
    assert file_digests(table) == digests


@pytest.mark.parametrize(
    ("feature", "why"),
    [
        ("allowColumnDefaults", "Delta Spark 4.4 cannot drop it either"),
        ("identityColumns", "Delta Spark 4.4 cannot drop it either"),
        ("catalogManaged", "Delta Spark 4.4 refuses it too"),
        ("coordinatedCommits-preview", "client of the coordinator"),
        ("redirectReaderWriter-preview", "redirect"),
        ("geospatial", "bounding-box"),
    ],
)
def test_features_delta_ops_does_not_drop_are_refused_with_the_reason(
    feature: str, why: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = tmp_path / "t"
    write_arrow(table, pa.table({"id": pa.array([1], pa.int64())}))
    assert cli.main(["drop-feature", str(table), feature]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"does not drop {feature}: " in err and why in err


def test_type_widening_with_truncate_history_drops_once_its_traces_are_old(tmp_path: Path) -> None:
    """The schema's `delta.typeChanges` is a trace in the history (Delta Spark's
    `actionUsesFeature`): the drop waits until the commits holding it can be deleted."""
    table = copy_fixture("delta-spark/type-widening-nested", tmp_path)
    rows = sorted(read_table(load_snapshot(table)).to_pylist(), key=_key)
    now = time.time_ns() // 1_000_000
    with fixed_wall_clock(now, all_threads=True):
        first = execute_drop_feature(
            plan_drop_feature(
                load_snapshot(table), feature="typeWidening-preview", truncate_history=True
            )
        )
    assert not first.dropped and first.files_rewritten == 1 and first.run_again_after_ms
    with fixed_wall_clock(first.run_again_after_ms, all_threads=True):
        late = execute_drop_feature(
            plan_drop_feature(
                load_snapshot(table), feature="typeWidening-preview", truncate_history=True
            )
        )
    assert late.dropped and late.log_files_deleted > 0
    after = load_snapshot(table).protocol
    assert (after.min_reader_version, after.min_writer_version) == (1, 2)
    assert _pyarrow_rows(table) == rows
