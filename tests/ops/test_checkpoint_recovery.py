"""A crashed or damaged checkpoint never blocks the next one, and readers never use it (issue 11).

Each test leaves `_delta_log` the way a killed process or a damaged disk would, checks that the
table still reads the same (our snapshot and `deltalake`), then re-runs the checkpoint and
checks that it finishes the work.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from delta_ops import cli
from delta_ops.ops.checkpoint import checkpoint, execute_checkpoint, plan_checkpoint
from delta_ops.table.snapshot import load_snapshot
from tests.support import copy_fixture, deltalake_rows, duckdb_rows

VERSION = 4  # delta-rs/simple_table's latest version


def _log(table: Path) -> Path:
    return table / "_delta_log"


def _parts(table: Path) -> list[Path]:
    return sorted(_log(table).glob(f"{VERSION:020d}.checkpoint*.parquet"))


def _age(path: Path, seconds: float) -> None:
    when = time.time() - seconds
    os.utime(path, (when, when))


def _killed_multi_part_run(tmp_path: Path, keep: int) -> tuple[Path, list[dict]]:
    """simple_table after `checkpoint --parts 4` was killed with `keep` parts written."""
    table = copy_fixture("delta-rs/simple_table", tmp_path)
    rows = deltalake_rows(table)
    checkpoint(table, parts=4)
    for part in _parts(table)[keep:]:
        part.unlink()
    (_log(table) / "_last_checkpoint").unlink()
    return table, rows


@pytest.mark.parametrize("keep", [1, 3])
def test_a_rerun_completes_a_killed_multi_part_checkpoint(tmp_path: Path, keep: int) -> None:
    table, rows = _killed_multi_part_run(tmp_path, keep)
    for part in _parts(table):
        _age(part, 120)  # the killed run is long gone
    assert load_snapshot(table).segment.checkpoint is None  # readers ignore the partial set
    assert deltalake_rows(table) == rows

    result = checkpoint(table, parts=4)
    assert result.skipped_existing is None and len(result.written) == 4
    assert len(_parts(table)) == 4
    assert load_snapshot(table).segment.checkpoint_version == VERSION
    assert json.loads((_log(table) / "_last_checkpoint").read_text())["parts"] == 4
    assert deltalake_rows(table) == rows


def test_a_young_partial_set_of_the_same_size_is_waited_for_then_completed(
    tmp_path: Path,
) -> None:
    # Parts written seconds ago may be another process's checkpoint in progress: the re-run
    # waits for it (here briefly), then, its writer presumed dead, writes the missing parts
    # under the same names. The young parts are kept, not deleted nor duplicated by a set of
    # another size: one complete set results ("Multi-part checkpoint").
    table, rows = _killed_multi_part_run(tmp_path, 2)
    young = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in _parts(table)}
    result = checkpoint(table, parts=4, wait_ms=300)
    assert result.skipped_existing is None and result.waited_ms >= 300
    assert result.written == tuple(p.name for p in _parts(table)[2:])
    assert {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in _parts(table)[:2]} == young
    assert len(_parts(table)) == 4
    assert len(load_snapshot(table).segment.checkpoint.files) == 4  # type: ignore[union-attr]
    assert json.loads((_log(table) / "_last_checkpoint").read_text())["parts"] == 4
    assert deltalake_rows(table) == rows
    assert duckdb_rows(table) == rows


def test_an_empty_part_is_replaced(tmp_path: Path) -> None:
    table = copy_fixture("delta-rs/simple_table", tmp_path)
    rows = deltalake_rows(table)
    checkpoint(table, parts=4)
    _parts(table)[2].write_bytes(b"")
    for part in _parts(table):
        _age(part, 120)
    assert load_snapshot(table).segment.checkpoint is None
    result = checkpoint(table, parts=4)
    assert result.skipped_existing is None
    assert all(p.stat().st_size > 0 for p in _parts(table)) and len(_parts(table)) == 4
    assert deltalake_rows(table) == rows


def test_a_truncated_checkpoint_is_rewritten_not_reported_as_existing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = copy_fixture("delta-rs/simple_table", tmp_path)
    rows = deltalake_rows(table)
    checkpoint(table)
    [file] = _parts(table)
    good_size = file.stat().st_size
    file.write_bytes(file.read_bytes()[: good_size // 2])
    assert cli.main(["checkpoint", str(table), "--version", str(VERSION), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["skipped_existing"] is None and out["written"] == [file.name]
    assert file.stat().st_size == good_size
    assert load_snapshot(table).segment.checkpoint_version == VERSION
    assert deltalake_rows(table) == rows


def test_last_checkpoint_naming_a_missing_version_is_read_around_and_repaired(
    tmp_path: Path,
) -> None:
    table = copy_fixture("delta-rs/simple_table", tmp_path)
    rows = deltalake_rows(table)
    hint = _log(table) / "_last_checkpoint"
    hint.write_text(json.dumps({"version": 99, "size": 10}))
    assert load_snapshot(table).version == VERSION  # the listing, not the hint, decides
    plan = plan_checkpoint(load_snapshot(table), time.time_ns() // 1_000_000)
    assert plan.will_update_last_checkpoint
    result = execute_checkpoint(plan)
    assert result.last_checkpoint_updated
    assert json.loads(hint.read_text())["version"] == VERSION
    assert deltalake_rows(table) == rows
