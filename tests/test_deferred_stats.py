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
from delta_ops.table.snapshot import load_snapshot
from tests import log_builder as lb
from tests.support import TABLES, copy_fixture, readable_fixture_names


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
