"""All-null columns of a snapshot's file state share one zeroed buffer (`pa.nulls`): the values,
types and every use stay the same, and the memory per file shrinks (a deletion-vector struct of
nulls held a buffer per field)."""

from __future__ import annotations

import numpy as np
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


def _checkpointed_table(tmp_path, monkeypatch, *, parts=None):  # type: ignore[no-untyped-def]
    """A table of six files without deletion vectors, tags or row ids, checkpointed in `parts`
    (one file when None) with two adds a row group."""
    from delta_ops.log import state_stream
    from delta_ops.ops.checkpoint import checkpoint

    table = tmp_path / f"parts-{parts}"
    for i in range(6):
        write_arrow(table, pa.table({"id": [i]}), mode="append")
    with monkeypatch.context() as patch:
        patch.setattr(state_stream, "STREAM_BATCH_ROWS", 2)
        checkpoint(str(table), parts=parts)
    return table


def _checkpoint_sources(table):  # type: ignore[no-untyped-def]
    from delta_ops.log.reader import read_checkpoint
    from delta_ops.log.segment import build_log_segment
    from delta_ops.storage import Storage

    storage = Storage.open(str(table))
    segment = build_log_segment(storage, None)
    assert segment.checkpoint is not None
    read = read_checkpoint(
        storage, segment.checkpoint.files, segment.checkpoint.version, 0, with_stats=False
    )
    return [
        src
        for src in read.batch.sources
        if "add" in src.table.column_names
        and pa.types.is_struct(src.table.schema.field("add").type)
    ]


def test_a_checkpoint_read_builds_its_null_fields_over_one_buffer(tmp_path, monkeypatch):
    """The all-null fields of a checkpoint's adds (decoded from the file, or absent from its
    schema) are slices of one array per type across its row groups (and parts), not a buffer of
    each field of each row group (10M files held ~0.55 GB of them). The version of each row is
    the checkpoint's, held once (not an int64 per row for the read, and another for the state)."""
    table = _checkpointed_table(tmp_path, monkeypatch)
    sources = _checkpoint_sources(table)
    assert len(sources) == 3  # three row groups of adds
    adds = [src.table.column("add").chunk(0) for src in sources]
    for name in ("tags", "deletionVector", "baseRowId", "defaultRowCommitVersion"):
        fields = [add.field(name) for add in adds]
        assert all(f.null_count == len(f) for f in fields)
        # every field's validity over the same memory: shared, not one buffer per row group
        assert len({f.buffers()[0].address for f in fields}) == 1, name
    for src in sources:
        assert src.versions.strides == (0,) and len(src.versions) == src.num_rows
    # and the state's version column: a slice of one array per row group, not a copy each
    versions = load_snapshot(table).file_index.column("version")
    assert versions.num_chunks == 3 and versions.to_pylist() == [5] * 6
    assert len({chunk.buffers()[1].address for chunk in versions.chunks}) == 1


def test_checkpointed_tables_load_as_without_any_sharing(tmp_path, monkeypatch):
    """The state equals that of a load that builds every null field and version of its own
    (the reader's and the replay's sharing, and the snapshot's, all off)."""
    from delta_ops.log import actions
    from delta_ops.log import reader as reader_module
    from delta_ops.table import snapshot as snapshot_module

    for path in (
        _checkpointed_table(tmp_path, monkeypatch),
        _checkpointed_table(tmp_path, monkeypatch, parts=3),
        TABLES / "delta-spark/dv-partitioned-with-checkpoint",
    ):
        shared = load_snapshot(path)
        with monkeypatch.context() as patch:
            patch.setattr(actions.SharedArrays, "shared", lambda self, values: values)
            patch.setattr(actions.SharedArrays, "__call__", lambda self, n, typ: pa.nulls(n, typ))
            patch.setattr(
                actions.SharedArrays, "repeated", lambda self, v, n: pa.array([v] * n, pa.int64())
            )
            patch.setattr(snapshot_module, "with_shared_null_columns", lambda t: t)
            patch.setattr(reader_module, "_one_version", lambda v, n: np.full(n, v, np.int64))
            plain = load_snapshot(path)
        assert shared.file_index.equals(plain.file_index)
        assert shared.file_index.schema.equals(plain.file_index.schema)
        assert shared.tombstones.equals(plain.tombstones)
        assert shared.files.equals(plain.files)
