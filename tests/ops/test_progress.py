"""Progress of long work (issue 13, 15): a bar on a terminal, nothing when piped, periodic lines in
logs and in Dagster's run log, with counts that add up to what was really done."""

from __future__ import annotations

import io
import os
import re
import time
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pytest

from delta_ops import cli
from delta_ops.dagster import DeltaTableTarget, build_delta_maintenance_defs
from delta_ops.ops.progress import LogLines, TerminalBar, reporting
from delta_ops.ops.vacuum import execute_vacuum, plan_vacuum
from delta_ops.protocol.units import format_bytes
from delta_ops.table.snapshot import load_snapshot
from delta_ops.table.writer import write_arrow

ORPHANS = 600


def _table_with_orphans(path: Path) -> tuple[Path, int]:
    """A table and ORPHANS old orphan files of different sizes; their total size."""
    write_arrow(path, pa.table({"id": pa.array([1, 2], pa.int64())}))
    old = time.time() - 30 * 86400
    total = 0
    for i in range(ORPHANS):
        orphan = path / f"orphan-{i:04d}.parquet"
        orphan.write_bytes(b"x" * (i + 1))
        os.utime(orphan, (old, old))
        total += i + 1
    return path, total


def _vacuum(table: Path) -> int:
    plan = plan_vacuum(load_snapshot(table), int(time.time() * 1000), retention_ms=7 * 86400_000)
    return execute_vacuum(plan).num_deleted


_COUNT = re.compile(r"vacuum: deleting ([\d,]+)/([\d,]+) files")


def test_log_lines_count_up_to_what_was_deleted(tmp_path: Path) -> None:
    table, total = _table_with_orphans(tmp_path / "t")
    lines: list[str] = []
    with reporting(LogLines(lines.append, every_s=0)):  # every update, to see them all
        assert _vacuum(table) == ORPHANS
    counts = [
        tuple(int(n.replace(",", "")) for n in _COUNT.search(line).groups()) for line in lines
    ]  # type: ignore[union-attr]
    assert len(counts) >= 3  # 600 local deletes go in chunks of 256: three updates and a final
    assert [done for done, _ in counts] == sorted(done for done, _ in counts)
    assert counts[-1] == (ORPHANS, ORPHANS)
    assert re.search(r", in [\d.]+ ?[a-z]+$", lines[-1]), lines[-1]  # finished: no rate, no ETA
    assert f"{format_bytes(total)}/{format_bytes(total)}" in lines[-1]
    assert not any((table / f"orphan-{i:04d}.parquet").exists() for i in range(ORPHANS))


def test_log_lines_are_periodic_not_per_update(tmp_path: Path) -> None:
    table, _ = _table_with_orphans(tmp_path / "t")
    lines: list[str] = []
    with reporting(LogLines(lines.append, every_s=3600)):
        _vacuum(table)
    assert len(lines) == 1 and _COUNT.search(lines[0]).groups() == ("600", "600")  # type: ignore[union-attr]


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_gets_a_bar_redrawn_in_place_and_a_pipe_gets_nothing(tmp_path: Path) -> None:
    table, _ = _table_with_orphans(tmp_path / "t")
    terminal, pipe = _Terminal(), io.StringIO()
    with reporting(TerminalBar(terminal)):
        _vacuum(table)
    drawn = terminal.getvalue()
    assert drawn.startswith("\r") and drawn.endswith("\n") and drawn.count("\n") == 1
    assert f"[{'#' * TerminalBar.WIDTH}] vacuum: deleting 600/600 files" in drawn
    table2, _ = _table_with_orphans(tmp_path / "t2")
    with reporting(TerminalBar(pipe)):
        _vacuum(table2)
    assert pipe.getvalue() == ""


def test_cli_piped_output_stays_clean_and_verbose_adds_progress_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table, _ = _table_with_orphans(tmp_path / "t")
    assert cli.main(["vacuum", str(table), "--json"]) == 0
    quiet = capsys.readouterr()
    assert quiet.err == "" and '"num_deleted": 600' in quiet.out
    table2, _ = _table_with_orphans(tmp_path / "t2")
    assert cli.main(["-v", "vacuum", str(table2), "--json"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert any(_COUNT.search(line) and "600/600" in line for line in err), err


def test_dagster_run_log_carries_the_progress_of_a_vacuum(tmp_path: Path) -> None:
    table, _ = _table_with_orphans(tmp_path / "t")
    defs = build_delta_maintenance_defs([DeltaTableTarget("t", str(table))], name="p")
    instance = dg.DagsterInstance.ephemeral()
    job = defs.resolve_job_def("p_maintenance_assets_job")
    key = dg.AssetKey(["delta_maintenance", "p", "t", "vacuum"])
    result = job.execute_in_process(asset_selection=[key], instance=instance)
    assert result.success
    messages = [e.user_message for e in instance.all_logs(result.run_id)]
    assert any("vacuum: deleting 600/600 files" in m for m in messages), messages
    assert not any((table / f"orphan-{i:04d}.parquet").exists() for i in range(ORPHANS))
