"""`repair` (FSCK): live files that storage lost leave the table in one commit; a location that
lost most of its files is refused unless forced; peers read the remaining rows after.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from delta_ops import cli
from delta_ops.errors import NeedsForce
from delta_ops.ops.repair import Missing, execute_repair, plan_repair
from delta_ops.table.snapshot import load_snapshot
from delta_ops.table.writer import write_arrow
from tests.support import copy_fixture, deltalake_rows, duckdb_rows, file_digests


def _table(tmp_path: Path, files: int = 12) -> Path:
    table = tmp_path / "t"
    for i in range(files):
        write_arrow(table, pa.table({"id": pa.array([2 * i, 2 * i + 1], pa.int64())}))
    return table


def _ids(table: Path) -> list[int]:
    return sorted(r["id"] for r in deltalake_rows(table))


def _commit_info(table: Path, version: int) -> dict:
    lines = (table / "_delta_log" / f"{version:020d}.json").read_text().splitlines()
    return next(json.loads(line)["commitInfo"] for line in lines if "commitInfo" in line)


def test_a_lost_data_file_leaves_the_table_and_peers_read_the_rest(tmp_path: Path) -> None:
    table = _table(tmp_path)
    snapshot = load_snapshot(table)
    lost = snapshot.files.column("path")[3].as_py()
    lost_ids = sorted(pq.read_table(table / lost).column("id").to_pylist())
    (table / lost).unlink()
    plan = plan_repair(load_snapshot(table))
    assert [(f.path, f.what, f.records) for f in plan.missing] == [(lost, Missing.DATA_FILE, 2)]
    result = execute_repair(plan)
    assert result.version == snapshot.version + 1 and result.removed == (lost,)
    expected = sorted(set(range(24)) - set(lost_ids))
    assert _ids(table) == expected
    assert sorted(r["id"] for r in duckdb_rows(table)) == expected
    info = _commit_info(table, result.version)
    assert info["operation"] == "FSCK" and info["operationMetrics"]["numFilesRemoved"] == "1"
    again = plan_repair(load_snapshot(table))
    assert again.nothing_to_do and "on storage" in again.idle_reason


def test_nothing_missing_commits_nothing(tmp_path: Path) -> None:
    table = _table(tmp_path, files=3)
    before = file_digests(table)
    plan = plan_repair(load_snapshot(table))
    assert plan.nothing_to_do
    assert execute_repair(plan).version is None
    assert file_digests(table) == before


def test_a_lost_deletion_vector_removes_its_file_whole(tmp_path: Path) -> None:
    """Reading the file without its vector would bring deleted rows back: the file goes."""
    table = copy_fixture("delta-rs/table-with-dv-small", tmp_path / "dv")
    snapshot = load_snapshot(table)
    [dv_file] = list(table.glob("deletion_vector_*.bin"))
    with_dv = [
        row["path"] for row in snapshot.file_index.to_pylist() if row["deletionVector"] is not None
    ]
    dv_file.unlink()
    plan = plan_repair(load_snapshot(table), force=True)  # the table has one file: 100% of it
    assert {(f.path, f.what) for f in plan.missing} == {
        (p, Missing.DELETION_VECTOR) for p in with_dv
    }
    execute_repair(plan)
    after = load_snapshot(table)
    assert after.num_files == snapshot.num_files - len(with_dv)
    # the rows left are exactly the files left: no deleted row came back
    assert len(deltalake_rows(table)) == (after.num_records or 0) - after.num_deleted_records
    assert duckdb_rows(table) == deltalake_rows(table)


def test_too_many_missing_is_refused_unless_forced_and_nothing_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A copied log without its data (a wrong path, a missing credential) must not empty the
    table: every file missing is refused, the dry run says what --force would do."""
    table = _table(tmp_path, files=4)
    for data in table.glob("*.parquet"):
        data.unlink()
    before = file_digests(table)
    with pytest.raises(NeedsForce, match="4 of 4 live files"):
        plan_repair(load_snapshot(table))
    assert cli.main(["repair", str(table)]) == 1
    assert "--force" in capsys.readouterr().err
    assert cli.main(["repair", str(table), "--dry-run", "--json"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["num_missing"] == 4 and "--force" in out.err
    assert file_digests(table) == before
    assert cli.main(["repair", str(table), "--force", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["num_removed"] == 4
    assert load_snapshot(table).num_files == 0 and deltalake_rows(table) == []


def test_a_file_found_again_before_the_commit_stays(tmp_path: Path) -> None:
    table = _table(tmp_path, files=24)
    paths = load_snapshot(table).files.column("path").to_pylist()[:2]
    saved = {p: (table / p).read_bytes() for p in paths}
    for p in paths:
        (table / p).unlink()
    plan = plan_repair(load_snapshot(table))
    assert len(plan.missing) == 2
    (table / paths[0]).write_bytes(saved[paths[0]])  # restored from a backup meanwhile
    result = execute_repair(plan)
    assert result.removed == (paths[1],) and result.found_again == (paths[0],)
    assert paths[0] in load_snapshot(table).files.column("path").to_pylist()
    assert len(_ids(table)) == 46


def test_a_bad_ratio_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = _table(tmp_path, files=1)
    assert cli.main(["repair", str(table), "--max-missing-ratio", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--max-missing-ratio" in err


def test_inspect_with_files_marks_a_lost_file_and_advises_repair(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`inspect --files` lists the live files, so it also says which storage lacks (one
    listing); without --files inspect lists no data and advises nothing about them."""
    table = _table(tmp_path, files=3)
    lost = load_snapshot(table).files.column("path")[1].as_py()
    (table / lost).unlink()
    assert cli.main(["inspect", str(table), "--files", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["missing_files"] == [lost]
    [advice] = [a for a in summary["advice"] if "repair" in a["command"]]
    assert "1 live files are missing" in advice["problem"]
    assert cli.main(["inspect", str(table), "--files"]) == 0
    assert f"{lost}  (missing from storage)" in capsys.readouterr().out
    assert cli.main(["inspect", str(table), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert "missing_files" not in summary
    assert not [a for a in summary["advice"] if "repair" in a["command"]]
