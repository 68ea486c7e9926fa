"""restore, repair and recompute-stats on tables with `variantShredding-preview` or
`icebergCompatV2` (issue 51, item 7): commits of files already on storage keep those features'
writer rules, so they run; what would break IcebergCompat is refused naming what it needs, and
a UniForm table's plans say its Iceberg metadata lags until Delta Spark converts it again.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from delta_ops import cli
from delta_ops.errors import OperationRefused
from delta_ops.ops.recompute_stats import execute_recompute_stats, plan_recompute_stats
from delta_ops.ops.repair import execute_repair, plan_repair
from delta_ops.ops.restore import execute_restore, plan_restore
from delta_ops.protocol.features import Access
from delta_ops.table.snapshot import load_snapshot
from delta_ops.table.transaction import Transaction
from delta_ops.table.writer import write_arrow
from tests.support import file_digests

SHREDDING = ("variantType-preview", "variantShredding-preview")
ICEBERG = {
    "delta.enableIcebergCompatV2": "true",
    "delta.universalFormat.enabledFormats": "iceberg",
}


def _table(tmp_path: Path, features: tuple[str, ...], config: dict[str, str]) -> Path:
    """Two appends (versions 0, 1), then `features` and `config` added (version 2)."""
    table = tmp_path / "t"
    base = {"delta.columnMapping.mode": "name"} if "icebergCompatV2" in features else {}
    write_arrow(table, pa.table({"id": pa.array([1, 2], pa.int64())}), configuration=base)
    write_arrow(table, pa.table({"id": pa.array([3], pa.int64())}))
    # the commit written by hand: delta-ops commits to a table with these features only
    # what keeps their rules, and adding them is none of that
    snapshot = load_snapshot(table)
    protocol = snapshot.protocol.with_features("columnMapping" if base else "invariants")
    readers = {*(protocol.reader_features or ()), *(f for f in features if "variant" in f)}
    action = {
        "minReaderVersion": 3,
        "minWriterVersion": 7,
        "readerFeatures": sorted(readers),
        "writerFeatures": sorted({*protocol.effective_writer_features, *features}),
    }
    metadata = snapshot.metadata.to_action()
    merged = {**metadata["configuration"], **config}
    lines = [
        {"commitInfo": {"timestamp": 1, "operation": "SET TBLPROPERTIES"}},
        {"protocol": action},
        {"metaData": {**metadata, "configuration": merged}},
    ]
    log = table / "_delta_log" / f"{snapshot.version + 1:020d}.json"
    log.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return table


def _delete_one(table: Path) -> str:
    """A commit removing one live file (as a DELETE of its rows would); its path."""
    snapshot = load_snapshot(table)
    gone = min(_paths(table))
    txn = Transaction(snapshot, "DELETE", purpose=Access.RECOMMIT)
    txn.add_action({"remove": {"path": gone, "deletionTimestamp": 1, "dataChange": True}})
    txn.commit()
    return gone


def _paths(table: Path, version: int | None = None) -> set[str]:
    return set(load_snapshot(table, version).file_index.column("path").to_pylist())


def test_shredded_variant_tables_take_restore_repair_and_recompute_stats(tmp_path: Path) -> None:
    table = _table(tmp_path, SHREDDING, {"delta.enableVariantShredding": "true"})
    gone = _delete_one(table)  # so a restore has a file to re-add

    restored = execute_restore(plan_restore(load_snapshot(table), version=2))
    assert restored.version is not None and _paths(table) == _paths(table, 2)
    (table / gone).unlink()  # a file lost from storage
    repaired = execute_repair(plan_repair(load_snapshot(table), force=True))
    assert repaired.version is not None and gone not in _paths(table)
    # recompute-stats: the files' stats stripped, then computed again
    snapshot = load_snapshot(table)
    txn = Transaction(snapshot, "STRIP", purpose=Access.RECOMMIT)
    for row in snapshot.files.to_pylist():
        add = {k: row[k] for k in ("path", "size", "modificationTime")}
        txn.add_action({"add": {**add, "partitionValues": {}, "dataChange": False}})
    txn.commit()
    plan = plan_recompute_stats(load_snapshot(table))
    assert len(plan.files) == len(_paths(table)) >= 1
    execute_recompute_stats(plan)
    stats = [json.loads(s) for s in load_snapshot(table).files.column("stats").to_pylist()]
    assert all(s["numRecords"] >= 1 for s in stats)


def test_iceberg_compat_restore_runs_and_says_the_iceberg_metadata_lags(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = _table(tmp_path, ("icebergCompatV2",), ICEBERG)
    _delete_one(table)  # version 3
    assert cli.main(["restore", str(table), "--version", "2", "--dry-run"]) == 0
    assert "risk: UniForm: Iceberg readers keep seeing the table" in capsys.readouterr().out
    assert cli.main(["restore", str(table), "--version", "2"]) == 0
    assert _paths(table) == _paths(table, 2)


def test_iceberg_compat_restore_refuses_what_breaks_its_rules(tmp_path: Path) -> None:
    table = _table(tmp_path, ("icebergCompatV2",), ICEBERG)
    digests = file_digests(table)
    # version 1 lacks the IcebergCompat properties: restoring it changes them
    with pytest.raises(OperationRefused, match="Delta Spark's IcebergCompat checks"):
        plan_restore(load_snapshot(table), version=1)
    assert file_digests(table) == digests


def test_iceberg_compat_repair_plan_says_the_iceberg_metadata_lags(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = _table(tmp_path, ("icebergCompatV2",), ICEBERG)
    (table / min(_paths(table))).unlink()
    assert cli.main(["repair", str(table), "--force", "--dry-run"]) == 0
    assert "note: UniForm: Iceberg readers keep seeing" in capsys.readouterr().out
