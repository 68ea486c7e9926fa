"""Compaction (issue 18): small files bin-packed per partition. Peers read the same rows before
and after, files get fewer, deletion vectors are applied, row ids survive, column mapping is
kept, a partition filter limits the work, and appends landing meanwhile do not conflict."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from delta_ops import cli
from delta_ops.errors import InvalidValue
from delta_ops.ops import rewrite
from delta_ops.ops.compact import execute_compact, parse_where, plan_compact
from delta_ops.protocol.deletion_vectors import inline_descriptor
from delta_ops.table.snapshot import load_snapshot
from delta_ops.table.transaction import Transaction
from delta_ops.table.writer import write_arrow
from tests.support import copy_fixture, deltalake_rows, duckdb_rows
from tests.support.rewrite_support import corrupt_a_file, dv_table, ids_by_value, many_small_appends


def test_small_files_become_one_per_partition_and_read_the_same(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = tmp_path / "t"
    many_small_appends(table)
    rows = duckdb_rows(table)
    before = load_snapshot(table)
    assert before.num_files == 12
    assert cli.main(["compact", str(table), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert (result["files_removed"], result["files_added"]) == (12, 2)
    after = load_snapshot(table)
    assert after.num_files == 2 and after.version == before.version + 1
    assert duckdb_rows(table) == rows and deltalake_rows(table) == rows
    assert sorted(after.files.column("partitionValues").to_pylist()) == [
        [("day", "a")],
        [("day", "b")],
    ]
    # nothing left to pack: a second run is a no-op
    assert cli.main(["compact", str(table), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["version"] is None


def test_files_of_older_schemas_and_with_deleted_rows_pack_in_batches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Small files are decoded a batch at a time and each batch made one table: batches that
    mix files written before a column was added (read with it null), files with a deletion
    vector and files already in the table's schema hold exactly the rows peers read."""
    monkeypatch.setattr(rewrite, "DECODE_BATCH", 3)
    table = tmp_path / "t"
    for i in range(7):
        write_arrow(
            table,
            pa.table({"id": pa.array([2 * i, 2 * i + 1], pa.int64())}),
            configuration={"delta.enableDeletionVectors": "true"} if i == 0 else None,
        )
    for i in range(7, 12):
        data = {"id": pa.array([2 * i, 2 * i + 1], pa.int64()), "note": [f"n{i}", None]}
        write_arrow(table, pa.table(data), merge_schema=True)
    _delete_by_deletion_vector(table, {3, 16})
    rows = sorted(map(str, duckdb_rows(table)))
    before = load_snapshot(table)
    assert before.files.column("deletionVector").null_count < before.num_files
    execute_compact(plan_compact(before))
    after = load_snapshot(table)
    assert after.num_files == 1
    assert sorted(map(str, duckdb_rows(table))) == rows
    assert sorted(map(str, deltalake_rows(table))) == rows
    assert len(rows) == 22 and "None" in "".join(rows)


def _delete_by_deletion_vector(table: Path, ids: set[int]) -> None:
    """A DELETE of the rows with these ids, by deletion vectors (as `dv_table` makes them)."""
    snapshot = load_snapshot(table)
    txn = Transaction(snapshot, operation="DELETE")
    for body in snapshot.files.to_pylist():
        values = pq.read_table(table / body["path"], columns=["id"]).column("id").to_pylist()
        deleted = [i for i, value in enumerate(values) if value in ids]
        if not deleted:
            continue
        add = {k: v for k, v in body.items() if v is not None and k not in ("version", "tags")}
        add["partitionValues"] = dict(add.get("partitionValues") or {})
        remove = {k: add[k] for k in ("path", "partitionValues", "size")}
        txn.add_action({"remove": {**remove, "deletionTimestamp": 1, "dataChange": True}})
        txn.add_action({"add": {**add, "deletionVector": inline_descriptor(deleted).to_dict()}})
    txn.commit()


def test_target_size_and_where_limit_the_work(tmp_path: Path) -> None:
    table = tmp_path / "t"
    many_small_appends(table)
    snapshot = load_snapshot(table)
    only_a = plan_compact(snapshot, where=parse_where("day=a", snapshot))
    assert len(only_a.bins) == 1 and only_a.files_to_rewrite == 6
    execute_compact(only_a)
    files = load_snapshot(table).files.to_pylist()
    assert sum(1 for f in files if f["partitionValues"] == [("day", "b")]) == 6
    smallest = min(f["size"] for f in files)
    tiny = plan_compact(load_snapshot(table), target_size=smallest)  # nothing fits two files
    assert tiny.nothing_to_do
    with pytest.raises(InvalidValue, match="partition columns: day"):
        parse_where("id=3", snapshot)


def test_deletion_vectors_are_applied_and_row_ids_kept(tmp_path: Path) -> None:
    table = dv_table(tmp_path, {"delta.enableRowTracking": "true"})
    before = ids_by_value(table)
    rows = duckdb_rows(table)
    execute_compact(plan_compact(load_snapshot(table)))
    after = load_snapshot(table)
    assert after.num_files == 1 and after.files.column("deletionVector").null_count == 1
    assert duckdb_rows(table) == rows
    assert ids_by_value(table) == before


def test_bin_members_are_the_live_file_rows_of_their_paths_in_bin_order(tmp_path: Path) -> None:
    """The members a compaction reads (looked up columnar, in bin order) are what
    `live_file_rows` gives for the same paths, in its read fields: deletion vectors and row
    ids included, and partitioned files of several bins."""
    tracked = dv_table(tmp_path / "dv", {"delta.enableRowTracking": "true"})
    partitioned = tmp_path / "parts"
    many_small_appends(partitioned)
    for table in (tracked, partitioned):
        snapshot = load_snapshot(table)
        paths = [p for b in plan_compact(snapshot).bins for p in b.paths]
        by_path = {r["path"]: r for r in rewrite.live_file_rows(snapshot, set(paths))}
        fields = ("path", "size", "deletionVector", "baseRowId", "defaultRowCommitVersion")
        slow = [{k: by_path[p][k] for k in fields if k in by_path[p]} for p in paths]
        assert rewrite.file_rows_in_order(snapshot, paths) == slow
        assert rewrite.file_rows_in_order(snapshot, paths[::-1]) == slow[::-1]
        assert len(paths) == snapshot.num_files
    assert any("deletionVector" in r and "baseRowId" in r for r in slow_rows(tracked))
    with pytest.raises(KeyError, match="not-live.parquet"):
        rewrite.file_rows_in_order(load_snapshot(partitioned), ["not-live.parquet"])


def slow_rows(table: Path) -> list[dict]:  # type: ignore[type-arg]
    snapshot = load_snapshot(table)
    return rewrite.live_file_rows(snapshot, set(snapshot.file_index.column("path").to_pylist()))


def test_column_mapping_tables_keep_their_physical_columns(tmp_path: Path) -> None:
    import shutil

    from delta_ops.table.transaction import Transaction

    table = copy_fixture("delta-rs/table_with_column_mapping", tmp_path)
    snapshot = load_snapshot(table)
    assert snapshot.properties.column_mapping_mode == "name"
    # a second small file in the first file's partition: a copy of it, added as a writer would
    first = snapshot.files.to_pylist()[0]
    directory, name = first["path"].rsplit("/", 1)
    copy = f"{directory}/copy-{name}"
    shutil.copyfile(table / first["path"].replace("%20", " "), table / copy.replace("%20", " "))
    txn = Transaction(snapshot, operation="WRITE")
    add = {k: first[k] for k in ("partitionValues", "size", "stats")}
    add["partitionValues"] = dict(add["partitionValues"])
    txn.add_action({"add": {**add, "path": copy, "modificationTime": 0, "dataChange": True}})
    txn.commit()
    rows = duckdb_rows(table)
    plan = plan_compact(load_snapshot(table))
    assert plan.files_to_rewrite == 2
    execute_compact(plan)
    assert duckdb_rows(table) == rows and deltalake_rows(table) == rows


def test_an_append_landing_meanwhile_does_not_conflict(tmp_path: Path) -> None:
    table = tmp_path / "t"
    many_small_appends(table, appends=4)
    plan = plan_compact(load_snapshot(table))
    write_arrow(
        table, pa.table({"id": pa.array([100], pa.int64()), "day": ["a"]}), partition_by=["day"]
    )
    result = execute_compact(plan)
    assert result.version == plan.version + 2
    assert sorted(r["id"] for r in deltalake_rows(table)) == [*range(8), 100]


def test_worker_processes_write_what_this_process_would(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past PROCESS_MIN_FILES the units are written by forked workers: the same rows, one file
    per partition, the same commit shape as an in-process rewrite of an identical table."""
    from delta_ops.ops import engines, rewrite

    used: list[int] = []
    in_processes = engines._in_processes

    def spy(fn, items, on_done, meanwhile):  # type: ignore[no-untyped-def]
        used.append(len(items))
        return in_processes(fn, items, on_done, meanwhile)

    monkeypatch.setattr(engines, "_in_processes", spy)
    monkeypatch.setattr("multiprocessing.cpu_count", lambda: 2)
    tables = {}
    for mode, threshold in (("processes", 1), ("in-process", 10**9)):
        table = tmp_path / mode
        many_small_appends(table)
        monkeypatch.setattr(rewrite, "PROCESS_MIN_FILES", threshold)
        result = execute_compact(plan_compact(load_snapshot(table)))
        assert (result.files_removed, result.files_added) == (12, 2)
        tables[mode] = table
    assert used == [2]  # two units to two workers; the in-process run forked none
    assert duckdb_rows(tables["processes"]) == duckdb_rows(tables["in-process"])
    assert deltalake_rows(tables["processes"]) == deltalake_rows(tables["in-process"])
    for table in tables.values():
        names = {p.name for p in table.rglob("*.parquet")}
        referenced = {Path(p).name for p in load_snapshot(table).files.column("path").to_pylist()}
        assert referenced <= names and len(names) == 12 + 2  # no stray file beside the two new


def test_a_failing_worker_leaves_no_new_file_and_no_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from delta_ops.errors import DeltaOpsError
    from delta_ops.ops import rewrite

    table = tmp_path / "t"
    many_small_appends(table)
    rows = duckdb_rows(table)
    corrupt, original = corrupt_a_file(table)
    before = load_snapshot(table)
    files_before = {p.name for p in table.rglob("*.parquet")}
    monkeypatch.setattr(rewrite, "PROCESS_MIN_FILES", 1)
    monkeypatch.setattr("multiprocessing.cpu_count", lambda: 2)
    with pytest.raises(DeltaOpsError, match="unreadable data file"):
        execute_compact(plan_compact(before))
    assert load_snapshot(table).version == before.version
    # the other partition's worker wrote its file; the failure discarded it
    assert {p.name for p in table.rglob("*.parquet")} == files_before
    (table / corrupt).write_bytes(original)
    assert duckdb_rows(table) == rows  # the table is as it was


def test_a_failure_while_the_workers_write_leaves_no_new_file_and_no_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The parent reads the stats and encodes the removes while the workers write: when that
    fails, the workers' files are still collected and discarded, and the failure is raised."""
    from delta_ops.errors import CorruptLog
    from delta_ops.ops import rewrite

    table = tmp_path / "t"
    many_small_appends(table)
    before = load_snapshot(table)
    files_before = {p.name for p in table.rglob("*.parquet")}
    monkeypatch.setattr(rewrite, "PROCESS_MIN_FILES", 1)
    monkeypatch.setattr("multiprocessing.cpu_count", lambda: 2)

    def unreadable_stats(self, paths):  # type: ignore[no-untyped-def]
        raise CorruptLog("00000000000000000010.checkpoint.parquet", "removed meanwhile")

    monkeypatch.setattr(rewrite.Rewriter, "removes", unreadable_stats)
    with pytest.raises(CorruptLog, match="removed meanwhile"):
        execute_compact(plan_compact(before))
    assert load_snapshot(table).version == before.version
    assert {p.name for p in table.rglob("*.parquet")} == files_before


def test_a_worker_killed_after_writing_leaves_no_new_file_and_no_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker that dies before reporting its file (killed, out of memory): the file is
    found by the rewrite's name prefix and discarded."""
    import os

    from delta_ops.errors import DeltaOpsError
    from delta_ops.ops import rewrite

    table = tmp_path / "t"
    many_small_appends(table)
    before = load_snapshot(table)
    rows = duckdb_rows(table)
    files_before = {p.name for p in table.rglob("*.parquet")}
    monkeypatch.setattr(rewrite, "PROCESS_MIN_FILES", 1)
    monkeypatch.setattr("multiprocessing.cpu_count", lambda: 2)
    write_unit = rewrite.write_unit

    def write_then_die(rewriter, unit, advance=None):  # type: ignore[no-untyped-def]
        done = write_unit(rewriter, unit, advance)
        if unit.directory == "day=a":
            os._exit(9)  # in the forked worker: its file is on disk, its result never sent
        return done

    monkeypatch.setattr(rewrite, "write_unit", write_then_die)
    with pytest.raises(DeltaOpsError, match="a worker failed"):
        execute_compact(plan_compact(before))
    assert load_snapshot(table).version == before.version
    assert {p.name for p in table.rglob("*.parquet")} == files_before
    assert duckdb_rows(table) == rows
