"""Older writers' checksums (issue 51.1): Delta Spark and Databricks once wrote `N.crc` with
only `tableSizeBytes`, `numFiles`, `numMetadata`, `numProtocol` and `numTransactions`. Such a
file is checked on the fields it has, as Delta Spark checks it (`ValidateChecksum`: metadata and
protocol only where present); the fields it lacks are reported as absent, not as corruption. A
field it has that disagrees with the log is still an alarm, and no commit builds on it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from delta_ops import cli
from delta_ops.errors import CorruptLog
from delta_ops.ops import checksum as checksum_op
from delta_ops.service.inspect import summarize
from delta_ops.table.checksum import ChecksumStatus, check_checksum, read_checksum
from delta_ops.table.snapshot import load_snapshot
from delta_ops.table.transaction import Transaction
from delta_ops.table.writer import write_arrow
from tests.support import log_builder as lb

#: the fields an older writer's checksum held, no more
LEGACY_FIELDS = {"tableSizeBytes", "numFiles", "numMetadata", "numProtocol", "numTransactions"}


def _legacy_checksum(table: Path, version: int, **wrong: int) -> Path:
    """Replace `version`'s checksum by one an older writer would have written (its counts from
    the log, except those in `wrong`)."""
    snapshot = load_snapshot(table, version)
    fields: dict[str, Any] = {
        "tableSizeBytes": snapshot.size_bytes,
        "numFiles": snapshot.num_files,
        "numMetadata": 1,
        "numProtocol": 1,
        "numTransactions": 0,
        **wrong,
    }
    path = table / "_delta_log" / f"{version:020d}.crc"
    path.unlink(missing_ok=True)
    path.write_text(json.dumps(fields) + "\n")
    return path


@pytest.fixture
def legacy(tmp_path: Path) -> Path:
    """A table of two versions whose latest checksum is an older writer's."""
    table = tmp_path / "t"
    write_arrow(table, pa.table({"id": [1, 2]}))
    write_arrow(table, pa.table({"id": [3]}))
    _legacy_checksum(table, 1)
    return table


def test_a_legacy_checksum_agrees_on_what_it_has(legacy: Path) -> None:
    recorded = read_checksum(load_snapshot(legacy).storage, 1)
    assert recorded is not None and recorded.metadata is None and recorded.protocol is None
    check = check_checksum(load_snapshot(legacy))
    assert check.status is ChecksumStatus.AGREES and not check.corrupt
    assert check.mismatches == () and check.absent == ("metadata", "protocol")
    assert check.to_dict()["absent"] == ["metadata", "protocol"]


def test_the_checksum_op_passes_on_a_legacy_checksum_and_leaves_it(
    legacy: Path, capsys: Any
) -> None:
    path = legacy / "_delta_log" / f"{1:020d}.crc"
    before = path.read_bytes()
    assert cli.main(["checksum", str(legacy), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "agrees with the log" in out and "it lacks metadata and protocol" in out
    assert cli.main(["checksum", str(legacy)]) == 0
    assert cli.main(["checksum", str(legacy), "--version", "0"]) == 0  # ours, complete
    assert path.read_bytes() == before
    assert set(json.loads(before)) == LEGACY_FIELDS


def test_inspect_gives_no_advice_on_a_legacy_checksum(legacy: Path, capsys: Any) -> None:
    summary = summarize(load_snapshot(legacy))
    assert summary.checksum is not None and summary.checksum["status"] == "agrees"
    assert not [a for a in summary.advice if "checksum" in a["problem"]]
    assert cli.main(["inspect", str(legacy)]) == 0
    out = capsys.readouterr().out
    assert "agrees with the log (it lacks metadata and protocol)" in out


@pytest.mark.parametrize(
    ("wrong", "field"),
    [({"numFiles": 3}, "numFiles"), ({"tableSizeBytes": 1}, "tableSizeBytes")],
)
def test_a_legacy_checksum_whose_counts_disagree_is_an_alarm(
    legacy: Path, wrong: dict[str, int], field: str, capsys: Any
) -> None:
    _legacy_checksum(legacy, 1, **wrong)
    check = check_checksum(load_snapshot(legacy))
    assert check.status is ChecksumStatus.DISAGREES and check.corrupt
    assert [m.split(":")[0] for m in check.mismatches] == [field]
    assert check.absent == ("metadata", "protocol")
    plan = checksum_op.plan_checksum(load_snapshot(legacy))
    with pytest.raises(CorruptLog, match="corruption alarm"):
        checksum_op.execute_checksum(plan)
    assert cli.main(["checksum", str(legacy)]) == 1
    assert f"disagrees with the log: {field}: the checksum says" in capsys.readouterr().err


def test_a_commit_after_a_legacy_checksum_does_not_build_on_it(
    legacy: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """It lacks what the next checksum needs (metadata, protocol, histogram): a commit over a
    stale snapshot computes its checksum from a load, and writes a complete one."""
    caplog.set_level("INFO", logger="delta_ops.table.checksum")
    txn = Transaction(load_snapshot(legacy, 0), operation="WRITE")
    txn.add_action(lb.add("x.parquet", size=7))
    assert txn.commit().version == 2
    assert [r.getMessage() for r in caplog.records if "full load" in r.getMessage()] == [
        f"{legacy}: checksum of version 2 from a full load: version 1 has no usable checksum"
    ]
    check = check_checksum(load_snapshot(legacy))
    assert check.status is ChecksumStatus.AGREES and check.absent == ()
