"""Loading a snapshot leaves a checkpoint's `add.stats` on storage until they are used.

Stats are most of a checkpoint's bytes, and most maintenance (vacuum, the probes, cleanup,
inspect's counts) never reads them. `Snapshot.files` reads them on first use and must then
equal what an eager load gives, on every fixture with a checkpoint (Delta Spark classic,
multi-part and V2 with sidecars, delta-rs, kernel; stats as JSON or only as `stats_parsed`),
also after commits that re-add or replace checkpoint files.
"""

from __future__ import annotations

import time

import pyarrow as pa
import pytest

from delta_ops.ops.vacuum import plan_vacuum
from delta_ops.table import snapshot as snapshot_module
from delta_ops.table.snapshot import file_num_records, load_snapshot
from tests.support import TABLES, copy_fixture, readable_fixture_names
from tests.support import log_builder as lb


def _fixtures_with_checkpoints() -> list[str]:
    return [
        name
        for name in readable_fixture_names()
        if any(".checkpoint." in p.name for p in (TABLES / name / "_delta_log").iterdir())
    ]


def _eager(table, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    with monkeypatch.context() as patch:
        patch.setattr(snapshot_module, "DEFER_CHECKPOINT_STATS", False)
        return load_snapshot(table)


@pytest.mark.parametrize("name", _fixtures_with_checkpoints())
def test_deferred_stats_equal_eager_ones(tmp_path, monkeypatch, name):
    table = copy_fixture(name, tmp_path)
    eager = _eager(table, monkeypatch)
    lazy = load_snapshot(table)
    assert lazy.segment.checkpoint is not None
    assert "stats" not in lazy.file_index.column_names
    assert lazy.files.sort_by("path").equals(eager.files.sort_by("path"))
    assert lazy.num_records == eager.num_records
    _assert_counts_without_stats_text(table, eager)


def _assert_counts_without_stats_text(table, eager) -> None:  # type: ignore[no-untyped-def]
    """A fresh snapshot's row counts come from the checkpoint without its stats text being
    held (`files` never built), and equal the counts of the eager load's stats."""
    fresh = load_snapshot(table)
    counts = dict(zip(fresh.file_index.column("path").to_pylist(), fresh.record_counts.to_pylist()))
    assert "files" not in fresh.__dict__
    expected = dict(
        zip(eager.files.column("path").to_pylist(), file_num_records(eager.files).to_pylist())
    )
    assert counts == expected
    assert fresh.num_records == eager.num_records


def test_commits_after_the_checkpoint_keep_their_own_stats(tmp_path, monkeypatch):
    """A file re-added after the checkpoint with other stats, one given a deletion vector, a
    new file: their stats come from the commits, the rest from the checkpoint."""
    from delta_ops.ops.checkpoint import checkpoint

    table = tmp_path / "t"
    lb.write_commit(
        table,
        0,
        [
            lb.protocol(
                3, 7, reader_features=["deletionVectors"], writer_features=["deletionVectors"]
            ),
            lb.metadata(),
        ],
    )
    lb.write_commit(table, 1, [lb.add(f"f{i}.parquet", num_records=i + 1) for i in range(6)])
    checkpoint(table, now_ms=int(time.time() * 1000))
    lb.write_commit(
        table,
        2,
        [
            lb.remove("f0.parquet"),
            lb.add("f0.parquet", num_records=100),  # the same key again, new stats
            lb.remove("f1.parquet"),
            lb.add("f1.parquet", num_records=2, dv=lb.inline_dv(1)),
            lb.add("g.parquet", num_records=None),  # no stats at all
        ],
    )
    lazy, eager = load_snapshot(table), _eager(table, monkeypatch)
    assert lazy.files.sort_by("path").equals(eager.files.sort_by("path"))
    _assert_counts_without_stats_text(table, eager)
    stats = dict(zip(lazy.files.column("path").to_pylist(), lazy.files.column("stats").to_pylist()))
    assert '"numRecords": 100' in stats["f0.parquet"] and stats["g.parquet"] is None
    assert '"numRecords": 3' in stats["f2.parquet"]  # read back from the checkpoint


def test_work_without_stats_never_reads_them(tmp_path, monkeypatch):
    table = copy_fixture("delta-spark/dv-partitioned-with-checkpoint", tmp_path)

    def refuse(*args: object, **kwargs: object) -> pa.Table:
        raise AssertionError("the checkpoint's stats were read")

    monkeypatch.setattr(snapshot_module, "with_checkpoint_stats", refuse)
    snap = load_snapshot(table)
    assert snap.num_files > 0 and snap.size_bytes > 0 and snap.num_deleted_records >= 0
    plan_vacuum(snap, int(time.time() * 1000), retention_ms=7 * 86_400_000)
    with pytest.raises(AssertionError, match="stats were read"):
        snap.files  # noqa: B018 - the first use of the stats reads them


def test_a_checkpoint_removed_after_the_load_is_replaced_by_a_fresh_read(
    tmp_path, monkeypatch, caplog
):
    """Log cleanup (ours or another process's) may delete the checkpoint a long-held snapshot
    came from: the stats are then read from the same version loaded again (its commits)."""
    table = copy_fixture("delta-spark/dv-partitioned-with-checkpoint", tmp_path)
    eager = _eager(table, monkeypatch)
    lazy = load_snapshot(table)
    assert lazy.segment.checkpoint is not None
    for f in lazy.segment.checkpoint.files:
        (table / "_delta_log" / f.name).unlink()
    assert lazy.files.sort_by("path").equals(eager.files.sort_by("path"))
    assert "reading the stats of version" in caplog.text


def test_a_checkpoint_by_delta_rs_parquet_rs_reads_exactly_its_files(tmp_path):
    """parquet-rs (deltalake 1.x) stores a value ("") in `add.path` under the null `add` of a
    protocol or metaData row: only the struct's own nulls say which rows are adds. Loads,
    deferred stats, streamed checkpoints and their verification must all see 6 files, not 8."""
    from deltalake import DeltaTable, write_deltalake

    from delta_ops.ops.checkpoint import execute_checkpoint, plan_checkpoint
    from delta_ops.table.snapshot import load_head

    table = tmp_path / "t"
    for i in range(3):
        data = pa.table({"id": pa.array([2 * i, 2 * i + 1], pa.int64()), "part": ["a", "b"]})
        write_deltalake(str(table), data, mode="append", partition_by=["part"])
    DeltaTable(str(table)).create_checkpoint()
    write_deltalake(
        str(table), pa.table({"id": pa.array([9], pa.int64()), "part": ["a"]}), mode="append"
    )
    import pyarrow.parquet as pq

    checkpoint_file = next((table / "_delta_log").glob("*.checkpoint.parquet"))
    adds = pq.ParquetFile(checkpoint_file).read(columns=["add.path"]).column("add").combine_chunks()
    assert adds.null_count == 2 and adds.field("path").null_count == 0  # the premise
    expected = sorted(DeltaTable(str(table)).file_uris())
    snap = load_snapshot(table)
    assert sorted(str(table / p) for p in snap.file_index.column("path").to_pylist()) == expected
    assert snap.files.column("stats").null_count == 0 and snap.num_records == 7
    plan = plan_checkpoint(load_head(table), int(time.time() * 1000), stream_above=0)
    assert plan.streamed and plan.num_add_files == 7
    execute_checkpoint(plan)  # verification counts adds by the struct's nulls too
    assert sorted(DeltaTable(str(table)).file_uris()) == expected


def test_row_groups_without_an_action_skip_its_columns_and_lose_nothing(tmp_path, monkeypatch):
    """A row group whose `remove.path` (or `add.path`) statistics say every row is null holds no
    such action: its columns are not decoded. Rewritten so each row group holds one kind of
    action, the checkpoint must still give exactly the files and tombstones it gave whole."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from delta_ops.log import reader
    from delta_ops.ops.checkpoint import checkpoint

    table = tmp_path / "t"
    lb.write_commit(table, 0, [lb.protocol(), lb.metadata()])
    lb.write_commit(table, 1, [lb.add(f"f{i}.parquet", num_records=i + 1) for i in range(8)])
    now_ms = int(time.time() * 1000)  # tombstones within their retention stay in the checkpoint
    lb.write_commit(
        table, 2, [lb.remove(f"f{i}.parquet", deletion_timestamp=now_ms) for i in range(3)]
    )
    checkpoint(table, now_ms=now_ms)
    before = _eager(table, monkeypatch)
    assert before.num_files == 5 and before.tombstones.num_rows == 3
    (checkpoint_file,) = (table / "_delta_log").glob("*.checkpoint.parquet")
    whole = pq.read_table(checkpoint_file)
    is_remove = pc.is_valid(whole.column("remove"))
    rows = pa.concat_tables([whole.filter(pc.invert(is_remove)), whole.filter(is_remove)])
    writer = pq.ParquetWriter(checkpoint_file, rows.schema)
    writer.write_table(rows.slice(0, rows.num_rows - 3))  # protocol, metaData, adds
    writer.write_table(rows.slice(rows.num_rows - 3))  # the removes alone
    writer.close()

    groups = reader._read_parquet_actions(
        "cp", str(checkpoint_file), reader._CHECKPOINT_COLUMNS_WITHOUT_STATS
    )[:2]
    assert "remove" not in groups[0].column_names and "add" in groups[0].column_names
    assert "add" not in groups[1].column_names and groups[1].num_rows == 3
    after, lazy = _eager(table, monkeypatch), load_snapshot(table)
    for snap in (after, lazy):
        assert snap.files.sort_by("path").equals(before.files.sort_by("path"))
        assert snap.tombstones.sort_by("path").equals(before.tombstones.sort_by("path"))
