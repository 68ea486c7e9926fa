"""Purge (issue 18): files with deletion vectors rewritten without their deleted rows. Peers read
the same rows before and after, no deletion vector is left in rewritten files, the deleted rows'
bytes leave storage once a vacuum runs, row ids survive, and a concurrent change conflicts."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from delta_ops import cli
from delta_ops.errors import ConcurrentModification
from delta_ops.ops.purge import execute_purge, plan_purge
from delta_ops.ops.vacuum import execute_vacuum, plan_vacuum
from delta_ops.table.scan import read_table
from delta_ops.table.snapshot import load_snapshot
from delta_ops.table.transaction import Transaction
from tests.support import copy_fixture, deltalake_rows, duckdb_rows
from tests.support.rewrite_support import dv_table, ids_by_value

DV_FIXTURES = [
    "delta-rs/table-with-dv-small",
    "kernel/with-short-dv",
    "delta-spark/dv-partitioned-with-checkpoint",
]


@pytest.mark.parametrize("name", DV_FIXTURES)
def test_purged_fixture_reads_the_same_and_has_no_deletion_vectors(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = copy_fixture(name, tmp_path)
    before = load_snapshot(table)
    rows = duckdb_rows(table)
    with_dv = before.files.filter(pc.is_valid(before.files.column("deletionVector")))
    assert with_dv.num_rows
    assert cli.main(["purge", str(table), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["files_rewritten"] == with_dv.num_rows
    after = load_snapshot(table)
    assert after.version == before.version + 1
    assert after.files.column("deletionVector").null_count == after.files.num_rows  # none left
    assert duckdb_rows(table) == rows and deltalake_rows(table) == rows
    assert read_table(after).num_rows == len(rows)
    # the commit only rearranges data: dataChange=false on both sides
    commit = (table / "_delta_log" / f"{after.version:020d}.json").read_text().splitlines()
    files = [json.loads(line) for line in commit if '"add"' in line or '"remove"' in line]
    assert files and all(next(iter(a.values()))["dataChange"] is False for a in files)


def test_deleted_bytes_leave_storage_after_the_vacuum(tmp_path: Path) -> None:
    table = dv_table(tmp_path)
    old_files = [table / p for p in load_snapshot(table).files.column("path").to_pylist()]
    assert sorted(r["id"] for r in duckdb_rows(table)) == [0, 2, 3, 11]
    result = execute_purge(plan_purge(load_snapshot(table)))
    assert (result.rows_dropped, result.rows_kept) == (4, 4)
    assert sorted(r["id"] for r in deltalake_rows(table)) == [0, 2, 3, 11]
    for written in result.files_written:
        assert sorted(pq.read_table(table / written).column("id").to_pylist()) in (
            [0, 2, 3],
            [11],
        )
    plan = plan_vacuum(
        load_snapshot(table),
        int(time.time() * 1000) + 1,
        retention_ms=0,
        force=True,
        in_flight_grace_ms=0,
    )
    execute_vacuum(plan)
    assert not any(f.exists() for f in old_files)  # the deleted rows' bytes are gone
    assert sorted(r["id"] for r in duckdb_rows(table)) == [0, 2, 3, 11]


def test_min_deleted_ratio_picks_only_files_deleted_enough(tmp_path: Path) -> None:
    table = dv_table(tmp_path)
    plan = plan_purge(load_snapshot(table), min_deleted_ratio=0.5)
    assert [f.num_deleted for f in plan.files] == [3]  # 3/4, not 1/4
    execute_purge(plan)
    left = load_snapshot(table).files
    assert left.column("deletionVector").null_count == 1  # the 1/4 file keeps its DV
    assert sorted(r["id"] for r in duckdb_rows(table)) == [0, 2, 3, 11]


def test_row_ids_and_commit_versions_survive_a_purge(tmp_path: Path) -> None:
    table = dv_table(tmp_path, {"delta.enableRowTracking": "true"})
    before = ids_by_value(table)
    assert sorted(before) == [0, 2, 3, 11]
    result = execute_purge(plan_purge(load_snapshot(table)))
    snapshot = load_snapshot(table)
    assert ids_by_value(table) == before
    config = snapshot.metadata.configuration
    commit_column = config["delta.rowTracking.materializedRowCommitVersionColumnName"]
    for written in result.files_written:
        versions = pq.read_table(table / written).column(commit_column).to_pylist()
        assert set(versions) == {0} or set(versions) == {1}  # the versions that wrote the rows
    assert sorted(r["id"] for r in duckdb_rows(table)) == [0, 2, 3, 11]


def test_a_concurrent_delete_on_a_chosen_file_conflicts_and_leaves_no_new_files(
    tmp_path: Path,
) -> None:
    table = dv_table(tmp_path)
    plan = plan_purge(load_snapshot(table))
    data_before = sorted(p.name for p in table.glob("*.parquet"))
    # meanwhile another writer removes one of the chosen files
    snapshot = load_snapshot(table)
    victim = snapshot.files.to_pylist()[0]
    txn = Transaction(snapshot, operation="DELETE")
    txn.add_action(
        {
            "remove": {
                "path": victim["path"],
                "deletionTimestamp": int(time.time() * 1000),
                "dataChange": True,
                "deletionVector": victim["deletionVector"],
            }
        }
    )
    txn.commit()
    with pytest.raises(ConcurrentModification):
        execute_purge(plan)
    assert sorted(p.name for p in table.glob("*.parquet")) == data_before


def test_the_dagster_purge_job_purges_with_a_ratio_from_run_config(tmp_path: Path) -> None:
    import dagster as dg

    from delta_ops.dagster import DeltaTableTarget, build_delta_maintenance_defs

    table = dv_table(tmp_path)
    defs = build_delta_maintenance_defs([DeltaTableTarget("t", str(table))], name="p")
    job = defs.resolve_job_def("p_purge_job")
    result = job.execute_in_process(
        run_config={"ops": {"p_purge": {"config": {"min_deleted_ratio": 0.5}}}},
        instance=dg.DagsterInstance.ephemeral(),
    )
    assert result.success
    files = load_snapshot(table).files
    assert files.column("deletionVector").null_count == 1  # only the 3/4-deleted file rewritten
    assert sorted(r["id"] for r in duckdb_rows(table)) == [0, 2, 3, 11]


def test_purge_of_a_file_whose_arrow_schema_records_string_views(tmp_path: Path) -> None:
    """Arrow-based writers (delta-rs) may record `string_view` in a file's Arrow schema; Arrow
    reads it back as views, whose filter by a deletion vector it has no kernel for. Found by the
    reliability model; the rows must come out as peers read them."""
    import pyarrow as pa

    from delta_ops.protocol.deletion_vectors import inline_descriptor
    from tests.support import log_builder as lb

    table = tmp_path / "t"
    table.mkdir()
    data = pa.table(
        {
            "id": pa.array([1, 2, 3, 4], pa.int64()),
            "part": pa.array(["é", None, "c", "d"], pa.string_view()),
        }
    )
    pq.write_table(data, table / "f.parquet")
    assert pq.read_table(table / "f.parquet").schema.field("part").type == pa.string_view()
    size = (table / "f.parquet").stat().st_size
    dv = inline_descriptor([1, 3]).to_dict()
    lb.write_commit(
        table,
        0,
        [
            lb.protocol(
                3, 7, reader_features=["deletionVectors"], writer_features=["deletionVectors"]
            ),
            lb.metadata(configuration={"delta.enableDeletionVectors": "true"}),
            {"add": {**lb.add("f.parquet", size=size, num_records=4)["add"], "deletionVector": dv}},
        ],
    )
    rows = duckdb_rows(table)
    assert sorted(r["id"] for r in rows) == [1, 3]
    execute_purge(plan_purge(load_snapshot(table)))
    assert duckdb_rows(table) == rows and deltalake_rows(table) == rows
