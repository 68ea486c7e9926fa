"""Log cleanup on V2 checkpoints: sidecars read through the log reader, boundaries proven
readable with their sidecars (issue 11).

The table is Delta Spark's V2 checkpoint fixture (a parquet top-level checkpoint with two
sidecars at version 2) plus an older checkpoint at version 1 of our own, with versions 0 and 1
aged past the 30-day log retention.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from delta_ops.ops.checkpoint import checkpoint
from delta_ops.ops.cleanup import execute_cleanup, plan_cleanup
from delta_ops.table.snapshot import load_snapshot
from tests.support import copy_fixture, deltalake_rows

DAY = 86_400_000


def _v2_table_with_old_history(tmp_path: Path) -> tuple[Path, list[dict]]:
    table = copy_fixture("delta-spark/v2-checkpoint-parquet", tmp_path)
    rows = deltalake_rows(table)
    hint = (table / "_delta_log" / "_last_checkpoint").read_bytes()
    checkpoint(str(table), version=1)  # an older checkpoint of our own
    (table / "_delta_log" / "_last_checkpoint").write_bytes(hint)  # still names version 2
    now = time.time_ns() // 1_000_000
    for f in (table / "_delta_log").iterdir():
        for version, age_days in ((0, 62), (1, 61)):  # older versions are older in time
            if f.is_file() and f.name.startswith(f"{version:020d}."):
                when = (now - age_days * DAY) / 1000
                os.utime(f, (when, when))
    return table, rows


def _fixture_sidecars(table: Path) -> list[Path]:
    return sorted((table / "_delta_log" / "_sidecars").glob("00000000000000000002.checkpoint.*"))


def _log(table: Path) -> set[str]:
    return {p.name for p in (table / "_delta_log").iterdir() if p.is_file()}


def test_cleanup_reads_parquet_sidecar_references(tmp_path: Path) -> None:
    # Used to die with "'dict' object has no attribute 'rsplit'": a parquet checkpoint's
    # sidecar actions are structs, not JSON.
    table, rows = _v2_table_with_old_history(tmp_path)
    plan = plan_cleanup(load_snapshot(table), time.time_ns() // 1_000_000)
    assert plan.boundary_checkpoint_version == 2
    assert "00000000000000000000.json" in plan.deleted
    assert not any(n.startswith("_sidecars/") for n in plan.deleted)  # both are referenced
    execute_cleanup(plan)
    assert deltalake_rows(table) == rows
    assert len(_fixture_sidecars(table)) == 2  # still referenced by the kept checkpoint


def test_a_damaged_sidecar_disqualifies_the_boundary(tmp_path: Path) -> None:
    # The version-2 checkpoint's top-level file is fine but one sidecar is truncated: it cannot
    # replace the older log, so cleanup falls back to the version-1 checkpoint and the table
    # stays readable from it.
    table, _ = _v2_table_with_old_history(tmp_path)
    expected = load_snapshot(table)
    sidecar = _fixture_sidecars(table)[0]
    sidecar.write_bytes(sidecar.read_bytes()[:100])
    plan = plan_cleanup(load_snapshot(table), time.time_ns() // 1_000_000)
    assert plan.boundary_checkpoint_version == 1
    execute_cleanup(plan)
    assert "00000000000000000001.json" in _log(table)
    after = load_snapshot(table)  # warns about the damaged checkpoint, reads from version 1
    assert after.version == expected.version
    assert sorted(after.files.column("path").to_pylist()) == sorted(
        expected.files.column("path").to_pylist()
    )
