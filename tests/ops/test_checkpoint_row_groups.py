"""A checkpoint's row groups are skipped by their statistics only where they hold nothing read.

The reader leaves out the row groups whose column chunks say they hold none of the non-file
actions (protocol, metaData, txn, domainMetadata, ...), and the file-action columns of row
groups without adds or removes. Writers place those rows anywhere (ours puts the non-file
actions in the first row group, Spark and delta-rs in one row group with everything), and a
writer may leave out statistics: every layout of the same rows must load the same state.
"""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from delta_ops.log import reader
from delta_ops.log.reader import _absent_actions
from delta_ops.ops.checkpoint import checkpoint
from delta_ops.table.snapshot import load_head, load_snapshot
from tests.ops.test_checkpoint import state_facts, write_table
from tests.support import log_builder as lb

NOW = 1_800_000_000_000


def _table(path: Path) -> Path:
    """A table with every kind of action in its checkpoint (version 3), and one commit after
    it that removes a checkpointed file and adds one."""
    commits = [
        [
            lb.commit_info(),
            lb.protocol(
                3,
                7,
                reader_features=["deletionVectors"],
                writer_features=["deletionVectors", "domainMetadata"],
            ),
            lb.metadata({"delta.deletedFileRetentionDuration": "interval 1000 weeks"}),
        ],
        [lb.add(f"f{i}.parquet", num_records=i) for i in range(12)],
        [
            lb.remove("f0.parquet", deletion_timestamp=NOW),
            lb.remove("f1.parquet", deletion_timestamp=NOW),
            {"txn": {"appId": "app", "version": 7, "lastUpdated": NOW}},
            {"domainMetadata": {"domain": "d", "configuration": '{"a":1}', "removed": False}},
        ],
        [lb.add("f12.parquet", num_records=12), lb.add("f3.parquet", dv=lb.inline_dv(1))],
    ]
    write_table(path, commits)
    checkpoint(str(path), version=3, now_ms=NOW)
    lb.write_commit(path, 4, [lb.remove("f5.parquet"), lb.add("f13.parquet", num_records=13)])
    (path / "_delta_log" / "_last_checkpoint").unlink()
    return path


def _checkpoint_file(table: Path) -> Path:
    return table / "_delta_log" / f"{3:020d}.checkpoint.parquet"


def _rewrite(table: Path, seed: int, *, statistics: bool, row_group_size: int = 2) -> None:
    """The checkpoint's rows shuffled into row groups of `row_group_size` rows (with or without
    statistics)."""
    path = _checkpoint_file(table)
    rows = pq.read_table(path)
    order = list(range(rows.num_rows))
    random.Random(seed).shuffle(order)
    pq.write_table(
        rows.take(pa.array(order)),
        path,
        row_group_size=row_group_size,
        write_statistics=statistics,
    )


def _replayed_without_checkpoint(table: Path) -> dict:
    """The state the commits alone give (the checkpoint moved aside meanwhile)."""
    checkpoint_file = _checkpoint_file(table)
    aside = checkpoint_file.with_name("aside")
    checkpoint_file.rename(aside)
    try:
        snapshot = load_snapshot(table)
        assert snapshot.segment.checkpoint is None
        return state_facts(snapshot)
    finally:
        aside.rename(checkpoint_file)


@pytest.mark.parametrize("statistics", [True, False])
@pytest.mark.parametrize("seed", range(4))
def test_any_row_group_layout_loads_the_same_state(
    tmp_path: Path, seed: int, statistics: bool
) -> None:
    table = _table(tmp_path / "t")
    want = _replayed_without_checkpoint(table)
    _rewrite(table, seed, statistics=statistics)
    assert pq.ParquetFile(_checkpoint_file(table)).num_row_groups > 4
    got = load_snapshot(table)
    assert got.segment.checkpoint is not None  # read from it, no fallback to the commits
    assert state_facts(got) == want
    assert sorted(got.files.column("version").to_pylist()) == [3] * 11 + [4]
    assert got.num_files == 12 and set(got.txns) == {"app"} and set(got.domains) == {"d"}
    head = load_head(table)
    assert head.segment.checkpoint is not None
    assert (head.protocol, head.metadata) == (got.protocol, got.metadata)


@pytest.mark.parametrize("seed", range(6))
def test_non_file_actions_anywhere_in_a_row_group_read_a_batch_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    """One row group, the non-file actions at random rows, decoded a row at a time up to the
    last one holding any."""
    monkeypatch.setattr(reader, "NON_FILE_BATCH_ROWS", 1)
    table = _table(tmp_path / "t")
    want = _replayed_without_checkpoint(table)
    _rewrite(table, seed, statistics=True, row_group_size=1000)
    assert pq.ParquetFile(_checkpoint_file(table)).num_row_groups == 1
    got = load_snapshot(table)
    assert got.segment.checkpoint is not None
    assert state_facts(got) == want


def _expected_absent(rows: pa.Table) -> set[str]:
    """What `_absent_actions` must find in these rows: the actions none holds, the fields of
    file actions without a list or map that none holds (but the key `path` and `stats`)."""
    absent = set()
    for name in rows.column_names:
        column = rows.column(name)
        if name in ("add", "remove"):
            if pc.struct_field(column, "path").null_count == len(column):
                absent.add(name)
            for field in column.type:
                values = pc.struct_field(column, field.name)
                if (
                    field.name not in ("path", "stats", "partitionValues_parsed", "stats_parsed")
                    and not pa.types.is_map(field.type)
                    and values.null_count == len(values)
                ):
                    absent.add(f"{name}.{field.name}")
        elif column.null_count == len(column):
            absent.add(name)
    return absent


def test_absent_actions_by_statistics(tmp_path: Path) -> None:
    table = _table(tmp_path / "t")
    _rewrite(table, 0, statistics=True)
    pf = pq.ParquetFile(_checkpoint_file(table))
    rows = pq.read_table(_checkpoint_file(table))
    start, seen, dv_read = 0, set(), False
    for group in range(pf.num_row_groups):
        count = pf.metadata.row_group(group).num_rows
        absent = _absent_actions(pf)[group]
        assert absent == _expected_absent(rows.slice(start, count))
        seen |= absent
        dv_read |= not {"add", "add.deletionVector"} & absent
        start += count
    # the cases: a missing action, a file action without a field, one with it
    assert {"metaData", "remove", "add.deletionVector"} <= seen and dv_read
    _rewrite(table, 0, statistics=False)
    pf = pq.ParquetFile(_checkpoint_file(table))
    assert not any(_absent_actions(pf))
