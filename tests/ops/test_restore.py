"""`restore`: the latest version reads exactly as version N did (peers check), deletion
vectors included, where delta-rs' restore leaves rows deleted by deletion vectors deleted.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from delta_ops import cli
from delta_ops.errors import ConcurrentModification, DataFileError, InvalidValue
from delta_ops.ops.restore import execute_restore, plan_restore
from delta_ops.protocol.features import Access
from delta_ops.table.snapshot import load_snapshot
from delta_ops.table.transaction import Transaction
from delta_ops.table.writer import write_arrow
from tests.support import copy_fixture, deltalake_rows, duckdb_rows, file_digests
from tests.support.rewrite_support import dv_table


def _ids(table: Path, version: int | None = None) -> list[int]:
    return sorted(r["id"] for r in deltalake_rows(table, version=version))


def _commit_info(table: Path, version: int) -> dict:
    lines = (table / "_delta_log" / f"{version:020d}.json").read_text().splitlines()
    return next(json.loads(line)["commitInfo"] for line in lines if "commitInfo" in line)


def test_restore_brings_back_rows_a_deletion_vector_hid(tmp_path: Path) -> None:
    """Version 2 deleted rows by deletion vectors on the files of version 1: restoring 1
    removes each (file, DV) pair and re-adds the file without it."""
    table = dv_table(tmp_path)
    assert _ids(table, 1) == [0, 1, 2, 3, 10, 11, 12, 13] and len(_ids(table)) == 4
    plan = plan_restore(load_snapshot(table), version=1)
    assert (plan.files_to_restore, plan.files_to_remove) == (2, 2)  # same paths, other DVs
    result = execute_restore(plan)
    assert result.version == 3
    assert _ids(table) == _ids(table, 1)
    assert sorted(r["id"] for r in duckdb_rows(table)) == _ids(table, 1)
    info = _commit_info(table, 3)
    assert info["operation"] == "RESTORE"
    # Delta Spark's parameters: the version asked for, and a null timestamp
    assert info["operationParameters"] == {"version": "1", "timestamp": None}
    assert info["operationMetrics"]["numRestoredFiles"] == "2"
    assert load_snapshot(table).file_index.column("deletionVector").null_count == 2


def test_restore_across_an_on_disk_deletion_vector_as_delta_rs_4613_reported(
    tmp_path: Path,
) -> None:
    """delta-rs#4613's case: delta-rs' fixture whose version 1 deletes two of ten rows with a
    deletion-vector file. delta-rs 0.31 to 0.32 committed a restore of version 0 with no
    action (the rows stayed deleted); ours brings them back, and delta-rs' own restore of a
    copy, fixed since, must agree with it."""
    table = copy_fixture("delta-rs/table-with-dv-small", tmp_path / "ours")
    theirs = shutil.copytree(table, tmp_path / "theirs")
    version_0 = deltalake_rows(table, version=0)
    assert len(version_0) == 10 and len(deltalake_rows(table)) == 8
    result = execute_restore(plan_restore(load_snapshot(table), version=0))
    assert result.metrics["numRestoredFiles"] == result.metrics["numRemovedFiles"] == 1
    assert deltalake_rows(table) == version_0
    assert duckdb_rows(table) == version_0
    DeltaTable(str(theirs)).restore(0)
    assert deltalake_rows(theirs) == deltalake_rows(table)


def test_restore_removes_files_written_since_and_restores_the_schema(tmp_path: Path) -> None:
    table = tmp_path / "t"
    write_arrow(table, pa.table({"id": pa.array([1, 2], pa.int64())}))
    write_arrow(
        table,
        pa.table({"id": pa.array([3], pa.int64()), "note": pa.array(["new"])}),
        merge_schema=True,
    )
    write_arrow(table, pa.table({"id": pa.array([4], pa.int64()), "note": pa.array(["x"])}))
    plan = plan_restore(load_snapshot(table), version=0)
    assert plan.restores_metadata and (plan.files_to_restore, plan.files_to_remove) == (0, 2)
    execute_restore(plan)
    after = load_snapshot(table)
    assert after.schema.names == ["id"]
    assert _ids(table) == [1, 2]
    assert sorted(r["id"] for r in duckdb_rows(table)) == [1, 2]
    assert after.metadata.to_action()["id"] == load_snapshot(table, 0).metadata.to_action()["id"]


def test_restore_by_timestamp_picks_the_version_current_then(tmp_path: Path) -> None:
    table = tmp_path / "t"
    write_arrow(table, pa.table({"id": pa.array([1], pa.int64())}))
    time.sleep(0.05)
    between = time.time_ns() // 1_000_000
    time.sleep(0.05)
    write_arrow(table, pa.table({"id": pa.array([2], pa.int64())}))
    plan = plan_restore(load_snapshot(table), timestamp_ms=between)
    assert plan.restore_to == 0
    execute_restore(plan)
    assert _ids(table) == [1]


def test_a_timestamp_is_echoed_to_the_millisecond(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 51.6: the refusal names the time as given, and the commit records it so."""
    table = tmp_path / "t"
    ict = {"delta.enableInCommitTimestamps": "true"}  # a commit's time is in its commitInfo
    write_arrow(table, pa.table({"id": pa.array([1], pa.int64())}), configuration=ict)
    code = cli.main(["restore", str(table), "--timestamp", "2023-08-07T16:45:35.372+00:00"])
    assert code == 2
    assert "at or before 2023-08-07T16:45:35.372Z" in capsys.readouterr().err
    write_arrow(table, pa.table({"id": pa.array([2], pa.int64())}))
    first = _commit_info(table, 0)["inCommitTimestamp"]  # milliseconds, but 1 time in 1000
    plan = plan_restore(load_snapshot(table), timestamp_ms=first)
    assert plan.restore_to == 0
    execute_restore(plan)
    seconds = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(first // 1000))
    millis = f".{first % 1000:03d}" if first % 1000 else ""
    parameters = _commit_info(table, 2)["operationParameters"]
    assert parameters == {"version": None, "timestamp": f"{seconds}{millis}Z"}


def test_a_vacuumed_file_is_named_and_nothing_is_written(tmp_path: Path) -> None:
    table = tmp_path / "t"
    write_arrow(table, pa.table({"id": pa.array([1], pa.int64())}))
    first = load_snapshot(table).files.column("path")[0].as_py()
    write_arrow(table, pa.table({"id": pa.array([2], pa.int64())}), mode="overwrite")
    (table / first).unlink()  # what a vacuum past the retention does
    before = file_digests(table)
    with pytest.raises(DataFileError, match=first):
        plan_restore(load_snapshot(table), version=0)
    assert file_digests(table) == before


def test_nothing_to_do_and_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = tmp_path / "t"
    write_arrow(table, pa.table({"id": pa.array([1], pa.int64())}))
    write_arrow(table, pa.table({"id": pa.array([2], pa.int64())}))
    assert plan_restore(load_snapshot(table), version=1).nothing_to_do
    with pytest.raises(InvalidValue, match="versions 0 to 1"):
        plan_restore(load_snapshot(table), version=5)
    with pytest.raises(InvalidValue, match="exactly one"):
        plan_restore(load_snapshot(table))
    before = file_digests(table)
    assert cli.main(["restore", str(table), "--version", "x"]) == 2
    assert "--version" in capsys.readouterr().err
    assert cli.main(["restore", str(table), "--version", "0", "--dry-run", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["files_to_remove"] == 1
    assert file_digests(table) == before
    assert cli.main(["restore", str(table), "--version", "0"]) == 0
    assert _ids(table) == [1]


# ------------------------------------------------------------------ options (issue 51, item 4)
def test_ignore_missing_files_restores_without_the_vacuumed_files_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = tmp_path / "t"
    write_arrow(table, pa.table({"id": pa.array([1], pa.int64())}))
    write_arrow(table, pa.table({"id": pa.array([2], pa.int64())}))
    gone = next(
        p
        for p in load_snapshot(table).files.column("path").to_pylist()
        if p != load_snapshot(table, 0).files.column("path")[0].as_py()
    )
    write_arrow(table, pa.table({"id": pa.array([3], pa.int64())}), mode="overwrite")
    (table / gone).unlink()  # what a vacuum past the retention does
    args = ["restore", str(table), "--version", "1", "--ignore-missing-files"]
    assert cli.main([*args, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"gone from storage, left out: {table / gone}" in out
    assert "risk: 1 of version 1's files" in out and "1 rows" in out
    assert "lacks their rows" in out

    assert cli.main(args) == 0
    # every reader reads the table: version 1 without the file that is gone
    assert _ids(table) == [1] == sorted(r["id"] for r in duckdb_rows(table))
    assert gone not in load_snapshot(table).file_index.column("path").to_pylist()


def test_protocol_downgrade_allowed_restores_the_older_protocol_and_lists_the_risk(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = tmp_path / "t"
    write_arrow(table, pa.table({"id": pa.array([1, 2], pa.int64())}))
    snapshot = load_snapshot(table)  # then the table gains deletion vectors
    txn = Transaction(snapshot, "SET TBLPROPERTIES", purpose=Access.WRITE)
    txn.add_action({"protocol": snapshot.protocol.with_features("deletionVectors").to_action()})
    metadata = snapshot.metadata.to_action()
    config = {**metadata["configuration"], "delta.enableDeletionVectors": "true"}
    txn.add_action({"metaData": {**metadata, "configuration": config}})
    txn.commit()
    # without the option the protocol never goes down
    kept = plan_restore(load_snapshot(table), version=0)
    assert kept.new_protocol is None and not kept.risks
    lowered = plan_restore(load_snapshot(table), version=0, protocol_downgrade_allowed=True)
    assert lowered.new_protocol == {"minReaderVersion": 1, "minWriterVersion": 2}
    assert len(lowered.risks) == 1 and "without deletionVectors" in lowered.risks[0]

    assert cli.main(["restore", str(table), "--version", "0", "--protocol-downgrade-allowed"]) == 0
    out = capsys.readouterr().out
    after = load_snapshot(table)
    assert not after.protocol.supports("deletionVectors")
    assert (after.protocol.min_reader_version, after.protocol.min_writer_version) == (1, 2)
    assert "delta.enableDeletionVectors" not in after.metadata.configuration
    assert "restored version 0" in out
    # deltalake's pyarrow reader, which refuses deletion vectors, reads it again
    assert sorted(r["id"] for r in DeltaTable(str(table)).to_pyarrow_table().to_pylist()) == [1, 2]


def test_an_append_landing_between_plan_and_commit_fails_the_restore_retryably(
    tmp_path: Path,
) -> None:
    """RESTORE's result must be version N's rows: an append another writer commits after the
    plan would otherwise survive it (the table read [1, 2, 99] after "restore to 0"). Delta
    Spark's RESTORE fails the same way (it commits only right after the version it read);
    a re-run plans again and restores."""
    table = tmp_path / "t"
    for ids in ([1, 2], [3], [4]):
        write_arrow(table, pa.table({"id": pa.array(ids, pa.int64())}))
    plan = plan_restore(load_snapshot(table), version=0)
    write_arrow(table, pa.table({"id": pa.array([99], pa.int64())}))
    with pytest.raises(ConcurrentModification, match="changed the table's data"):
        execute_restore(plan)
    assert load_snapshot(table).version == 3 and _ids(table) == [1, 2, 3, 4, 99]
    execute_restore(plan_restore(load_snapshot(table), version=0))
    assert _ids(table) == [1, 2]
