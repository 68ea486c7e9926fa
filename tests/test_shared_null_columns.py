"""All-null columns of a snapshot's file state share one zeroed buffer (`pa.nulls`): the values,
types and every use stay the same, and the memory per file shrinks (a deletion-vector struct of
nulls held a buffer per field)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from delta_ops.log.actions import DELETION_VECTOR_TYPE, with_shared_null_columns
from delta_ops.table.snapshot import load_snapshot
from delta_ops.table.writer import write_arrow
from tests.support import TABLES


def _table_with_null_columns(rows: int) -> pa.Table:
    return pa.table(
        {
            "path": pa.array([f"f{i}" for i in range(rows)]),
            "deletionVector": pa.array([None] * rows, DELETION_VECTOR_TYPE),
            "baseRowId": pa.array([None] * rows, pa.int64()),
            "size": pa.array(range(rows), pa.int64()),
        }
    )


def test_null_columns_keep_their_values_and_types_in_less_memory():
    table = _table_with_null_columns(100_000)
    before = pa.total_allocated_bytes()
    shared = with_shared_null_columns(table)
    assert shared.equals(table) and shared.schema.equals(table.schema)
    # one zeroed buffer per column: 8 bytes a row for the struct, not one per field
    assert pa.total_allocated_bytes() - before <= 2 * 8 * table.num_rows + 4096
    cardinality = pc.struct_field(shared.column("deletionVector"), "cardinality")
    assert cardinality.null_count == table.num_rows and pc.sum(cardinality).as_py() is None


def test_a_column_with_any_value_is_left_as_it_is():
    table = _table_with_null_columns(3)
    with_value = table.set_column(2, "baseRowId", pa.array([None, 7, None], pa.int64()))
    shared = with_shared_null_columns(with_value)
    assert shared.column("baseRowId").chunks == with_value.column("baseRowId").chunks
    assert with_shared_null_columns(table.slice(0, 0)).equals(table.slice(0, 0))


def test_snapshots_of_real_tables_answer_as_without_sharing(tmp_path, monkeypatch):
    """A table written without DVs or row ids, and a Delta Spark table with DVs: the file
    state, the tombstones and the counts equal those of a load that shares nothing."""
    from delta_ops.table import snapshot as snapshot_module

    table = tmp_path / "t"
    for i in range(3):
        write_arrow(table, pa.table({"id": [i]}), mode="append")
    for path in (table, TABLES / "delta-spark/dv-partitioned-with-checkpoint"):
        shared = load_snapshot(path)
        with monkeypatch.context() as patch:
            patch.setattr(snapshot_module, "with_shared_null_columns", lambda t: t)
            plain = load_snapshot(path)
        assert shared.file_index.equals(plain.file_index)
        assert shared.tombstones.equals(plain.tombstones)
        assert shared.files.equals(plain.files)
        assert (shared.num_deleted_records, shared.num_records) == (
            plain.num_deleted_records,
            plain.num_records,
        )
