"""The corruption alarm on live deletion vectors (delta_ops.table.deletion_vector_check): a DV
naming a row at or past its file's numRecords, or one that cannot be loaded, is reported by
`inspect` and fails the `checksum` operation; never read as "nothing deleted"."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from delta_ops import cli
from delta_ops.errors import CorruptLog
from delta_ops.ops import checksum as checksum_op
from delta_ops.protocol.deletion_vectors import inline_descriptor
from delta_ops.service.inspect import summarize
from delta_ops.table.deletion_vector_check import DeletionVectorFault, check_deletion_vectors
from delta_ops.table.snapshot import load_snapshot
from tests.support import TABLES
from tests.support.dv_tables import RUST_TAIL_DV, RUST_TAIL_VERSION, DvText, build_inline_dv_history

#: what Delta Spark's reading of RUST_TAIL_DV names (bytes 08 6e): row 28168 of a 10-row file
MISREAD_ROW = 28168


def _with_v5_text(root: Path, text: str, **fields: Any) -> Path:
    """Swap the v5 DV (added at v5, removed at v6) for `text` and `fields`, in both commits."""
    for version in (RUST_TAIL_VERSION, RUST_TAIL_VERSION + 1):
        commit = root / "_delta_log" / f"{version:020d}.json"
        lines = []
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            for kind in ("add", "remove"):
                dv = action.get(kind, {}).get("deletionVector")
                if dv and dv["pathOrInlineDv"] == RUST_TAIL_DV:
                    dv.update(pathOrInlineDv=text, **fields)
            lines.append(json.dumps(action))
        commit.write_text("\n".join(lines) + "\n")
    return root


@pytest.fixture
def misread(tmp_path: Path) -> Path:
    """The kernel table's history with v5's DV naming row 28168 (what the tail read as Delta
    Spark decodes it named), encoded the Spark way: 34 bytes, cardinality 1, a valid DV."""
    root = build_inline_dv_history(tmp_path / "t", DvText.Z85_CRATE)
    text = inline_descriptor([MISREAD_ROW]).path_or_inline_dv
    return _with_v5_text(root, text)


def test_inspect_raises_the_alarm_on_a_dv_past_the_file(misread: Path, capsys: Any) -> None:
    summary = summarize(load_snapshot(misread, RUST_TAIL_VERSION))
    assert summary.deletion_vectors is not None
    [bad] = summary.deletion_vectors["bad"]
    assert bad["fault"] == "past_end" and bad["path"].endswith(".parquet")
    assert "row 28,168" in bad["detail"] and "10 rows (numRecords)" in bad["detail"]
    [alarm] = [a for a in summary.advice if "corruption alarm" in a["problem"]]
    assert "corruption alarm" in alarm["problem"] and "row 28,168" in alarm["problem"]
    assert cli.main(["inspect", str(misread), "--version", str(RUST_TAIL_VERSION)]) == 0
    out = capsys.readouterr().out
    assert "deletion vectors: 1 of 1 checked are CORRUPT" in out
    # the versions around it are sound
    for version in (RUST_TAIL_VERSION - 1, RUST_TAIL_VERSION + 1):
        summary = summarize(load_snapshot(misread, version))
        assert summary.deletion_vectors is not None and not summary.deletion_vectors["bad"]
        assert not [a for a in summary.advice if "corruption alarm" in a["problem"]]


def test_the_checksum_op_fails_on_it_and_writes_nothing(misread: Path, capsys: Any) -> None:
    plan = checksum_op.plan_checksum(load_snapshot(misread, RUST_TAIL_VERSION))
    assert plan.nothing_to_do and plan.deletion_vectors.corrupt
    assert "row 28,168" in plan.idle_reason and "corruption alarm" in plan.idle_reason
    assert plan.to_dict()["deletion_vectors"]["bad"][0]["fault"] == "past_end"
    with pytest.raises(CorruptLog, match="corruption alarm"):
        checksum_op.execute_checksum(plan)
    assert cli.main(["checksum", str(misread), "--version", str(RUST_TAIL_VERSION)]) == 1
    assert "row 28,168" in capsys.readouterr().err
    assert not list((misread / "_delta_log").glob("*.crc"))
    # a sound version gets its checksum
    assert cli.main(["checksum", str(misread), "--version", str(RUST_TAIL_VERSION - 1)]) == 0
    assert [p.name for p in (misread / "_delta_log").glob("*.crc")] == [f"{4:020d}.crc"]


@pytest.mark.parametrize("num_records, alarm", [(3, True), (4, False)])
def test_the_alarm_starts_at_num_records(tmp_path: Path, num_records: int, alarm: bool) -> None:
    """v5 deletes row 3: a file of 3 rows has no row 3, one of 4 has."""
    root = build_inline_dv_history(tmp_path / "t", DvText.SPARK, num_records=num_records)
    check = check_deletion_vectors(load_snapshot(root, RUST_TAIL_VERSION))
    assert check.checked == 1 and check.corrupt is alarm
    if alarm:
        assert "names row 3, but the file has 3 rows" in check.problem


def test_a_dv_that_does_not_load_is_an_alarm_too(tmp_path: Path) -> None:
    root = build_inline_dv_history(tmp_path / "t", DvText.Z85_CRATE)
    _with_v5_text(root, RUST_TAIL_DV, cardinality=2)
    check = check_deletion_vectors(load_snapshot(root, RUST_TAIL_VERSION))
    [bad] = check.bad
    assert bad.fault is DeletionVectorFault.UNREADABLE and "cardinality 2" in bad.detail


def test_files_without_num_records_and_dv_files_past_the_limit_are_counted_unchecked(
    tmp_path: Path,
) -> None:
    root = build_inline_dv_history(tmp_path / "t", DvText.SPARK, num_records=None)
    check = check_deletion_vectors(load_snapshot(root, RUST_TAIL_VERSION))
    assert (check.checked, check.unchecked, check.corrupt) == (0, 1, False)

    on_disk = load_snapshot(TABLES / "delta-rs/table-with-dv-small")
    assert (check_deletion_vectors(on_disk).checked, check_deletion_vectors(on_disk).bad) == (1, ())
    limited = check_deletion_vectors(on_disk, file_limit=0)
    assert (limited.checked, limited.unchecked) == (0, 1)


@pytest.mark.parametrize(
    "command", [["purge"], ["compact"], ["compact", "--zorder-by", "value"]], ids=" ".join
)
def test_a_rewrite_refuses_a_file_whose_dv_names_a_row_past_its_end(
    misread: Path, command: list[str], capsys: Any
) -> None:
    """Purge, compaction and clustering read the file's rows with its DV applied and drop the
    DV: with a DV past the end, the row its writer deleted (row 3, under the crate's reading)
    would be live for good. They refuse in one line naming the file and write nothing."""
    (misread / "_delta_log" / f"{RUST_TAIL_VERSION + 1:020d}.json").unlink()  # v5 is latest
    before = sorted(p.name for p in misread.rglob("*") if p.is_file())
    code = cli.main([command[0], str(misread), *command[1:]])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(err) == 1, (code, err)  # 1: as the checksum op's alarm
    assert "deletion vector names row 28,168, but the file has 10 rows" in err[0]
    assert "part-00000-inline-dv-history.snappy.parquet" in err[0]
    assert sorted(p.name for p in misread.rglob("*") if p.is_file()) == before
