"""Concurrent checkpoint runs at one version leave one complete checkpoint, and a hint naming it.

Two complete multi-part sets of one version (say 4 and 5 parts) are a valid log for Delta Spark,
which reads the one with most parts ("Checkpoints", "Multi-part checkpoint"), but DuckDB's delta
extension fails when `_last_checkpoint` ("Last Checkpoint File") names the other one: "indicated
that checkpoint should have 5 parts, but it has 4". Each test races two runs (real processes, or
an interleaving forced at a chosen point), then lists `_delta_log` and reads the table with
DuckDB and deltalake.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import shutil
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from delta_ops import cli
from delta_ops.log.file_names import LogFileKind, parse_log_file_name
from delta_ops.log.segment import CheckpointRef, complete_checkpoints
from delta_ops.ops import checkpoint_writer as checkpoint_op
from delta_ops.ops.checkpoint import checkpoint, execute_checkpoint, plan_checkpoint
from delta_ops.ops.cleanup import execute_cleanup, plan_cleanup
from delta_ops.service.inspect import summarize
from delta_ops.table.snapshot import load_snapshot
from tests.support import copy_fixture, deltalake_rows, duckdb_rows
from tests.support import log_builder as lb

VERSION = 4  # delta-rs/simple_table's latest version


def _log(table: Path) -> Path:
    return table / "_delta_log"


def _checkpoint_files(table: Path) -> list[Path]:
    return sorted(_log(table).glob(f"{VERSION:020d}.checkpoint*.parquet"))


def _complete(table: Path) -> list[CheckpointRef]:
    """The complete checkpoints at VERSION, as a reader that lists `_delta_log` finds them."""
    files = [
        parse_log_file_name(p.name, p.stat().st_size, p.stat().st_mtime_ns // 1_000_000)
        for p in _checkpoint_files(table)
    ]
    return complete_checkpoints([f for f in files if f is not None])


def _hint(table: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((_log(table) / "_last_checkpoint").read_text())
    return data


def _assert_one_checkpoint_named_by_the_hint(table: Path, rows: list[dict]) -> CheckpointRef:
    [ref] = _complete(table)
    hint = _hint(table)
    assert hint["version"] == VERSION
    if ref.kind is LogFileKind.MULTI_PART_CHECKPOINT:
        assert hint["parts"] == len(ref.files)
    else:
        assert hint.get("parts") is None
    assert duckdb_rows(table) == rows
    assert deltalake_rows(table) == rows
    return ref


def _age(path: Path, seconds: float) -> None:
    when = time.time() - seconds
    os.utime(path, (when, when))


def _parts_of(table: Path, num_parts: int) -> list[Path]:
    return sorted(_log(table).glob(f"{VERSION:020d}.checkpoint.*.{num_parts:010d}.parquet"))


def _half_written_set(tmp_path: Path, num_parts: int, keep: int) -> tuple[Path, list[dict], Path]:
    """simple_table as a run writing `num_parts` parts leaves it after `keep` parts (young
    files); the rest wait in a folder beside the table, to be moved in to "finish" it."""
    table = copy_fixture("delta-rs/simple_table", tmp_path)
    rows = deltalake_rows(table)
    checkpoint(table, parts=num_parts)
    rest = tmp_path / "rest"
    rest.mkdir()
    for part in _parts_of(table, num_parts)[keep:]:
        shutil.move(part, rest / part.name)
    (_log(table) / "_last_checkpoint").unlink()
    return table, rows, rest


# ------------------------------------------------------------------ two real processes racing
def _run(table: str, parts: int, barrier: Any, delay_s: float) -> None:
    """One checkpoint run in its own process: plan, meet the other run, then write."""
    plan = plan_checkpoint(load_snapshot(table), int(time.time() * 1000), parts=parts)
    barrier.wait(timeout=120)  # both runs have planned: neither saw the other's files
    time.sleep(delay_s)
    try:
        execute_checkpoint(plan)
    except BaseException:  # noqa: BLE001 - reported, and the exit code says it failed
        traceback.print_exc()
        os._exit(1)
    # ends as the CLI does (`cli.commands.exit_now`): Arrow's thread pools can abort an
    # interpreter's teardown (apache/arrow#34314; seen in 2 runs of one CI run)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _race(table: Path, counts: tuple[int, int], delays: tuple[float, float]) -> None:
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(2)
    runs = [
        ctx.Process(target=_run, args=(str(table), n, barrier, d)) for n, d in zip(counts, delays)
    ]
    for run in runs:
        run.start()
    for run in runs:
        run.join(timeout=300)
    assert [run.exitcode for run in runs] == [0, 0]


@pytest.mark.parametrize("counts", [(4, 5), (5, 4), (4, 4)])
def test_two_concurrent_runs_leave_one_complete_set_named_by_the_hint(
    tmp_path: Path, counts: tuple[int, int]
) -> None:
    rng = random.Random(f"{counts}")
    for round_ in range(3):
        table = copy_fixture("delta-rs/simple_table", tmp_path / str(round_))
        rows = deltalake_rows(table)
        delays = (0.0, 0.0) if round_ == 0 else (rng.uniform(0, 0.03), rng.uniform(0, 0.03))
        _race(table, counts, delays)
        ref = _assert_one_checkpoint_named_by_the_hint(table, rows)
        assert ref.kind is LogFileKind.MULTI_PART_CHECKPOINT and len(ref.files) in counts


# --------------------------------------------------------------- interleavings forced in-process
def _run_when_writing(name: str, other: Callable[[], object]) -> Callable[..., Any]:
    """A CheckpointFileWriter.write that runs `other` once, just before `name` is written."""
    original = checkpoint_op.CheckpointFileWriter.write
    pending = [other]

    def write(self: checkpoint_op.CheckpointFileWriter, file: checkpoint_op.CheckpointFile) -> Any:
        if file.name == name and pending:
            pending.pop()()
        return original(self, file)

    return write


@pytest.mark.parametrize(("late", "early"), [(5, 4), (4, 5)])
def test_the_run_that_completes_last_settles_the_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, late: int, early: int
) -> None:
    # Both runs write: the `early` run starts and finishes while the `late` one is before its
    # last part, so the early one sees a partial set only (and, told not to wait, writes its
    # own). The late one then sees two complete sets: the one Delta Spark reads (more parts)
    # stays, the other is deleted before the hint is written, and the hint names the survivor.
    table = copy_fixture("delta-rs/simple_table", tmp_path)
    rows = deltalake_rows(table)
    plan = plan_checkpoint(load_snapshot(table), int(time.time() * 1000), parts=late)
    results = []
    monkeypatch.setattr(
        checkpoint_op.CheckpointFileWriter,
        "write",
        _run_when_writing(
            plan.files[-1], lambda: results.append(checkpoint(table, parts=early, wait_ms=0))
        ),
    )
    result = execute_checkpoint(plan)
    [early_result] = results
    assert len(early_result.written) == early  # it wrote its set beside the partial one
    ref = _assert_one_checkpoint_named_by_the_hint(table, rows)
    assert len(ref.files) == 5
    if late == 5:
        assert result.written == plan.files and set(result.removed) == set(early_result.written)
    else:
        assert result.written == () and set(result.removed) == set(plan.files)
        assert result.skipped_existing == ref.name
    assert [p.name for p in _checkpoint_files(table)] == [f.name for f in ref.files]


def test_a_run_waits_for_a_young_partial_set_and_then_has_nothing_to_do(tmp_path: Path) -> None:
    # Run A has written 2 of 5 parts; run B (4 parts) starts, waits, and A completes meanwhile.
    table, rows, rest = _half_written_set(tmp_path, 5, keep=2)

    def finish_a() -> None:
        for part in sorted(rest.iterdir()):
            os.replace(part, _log(table) / part.name)

    timer = threading.Timer(0.5, finish_a)
    timer.start()
    try:
        result = checkpoint(table, parts=4, wait_ms=20_000)
    finally:
        timer.join()
    ref = _assert_one_checkpoint_named_by_the_hint(table, rows)
    assert len(ref.files) == 5
    assert result.written == () and result.skipped_existing == ref.name
    assert 400 <= result.waited_ms < 20_000
    assert not _parts_of(table, 4)


def test_a_partial_set_that_stays_partial_delays_a_run_only_for_the_wait(tmp_path: Path) -> None:
    # A's writer died after 2 of 5 parts seconds ago: B waits (briefly here), then writes its
    # own set. A's partial set stays (young: it is not B's to delete yet), ignored by readers.
    table, rows, _ = _half_written_set(tmp_path, 5, keep=2)
    result = checkpoint(table, parts=4, wait_ms=300)
    assert result.waited_ms >= 300 and len(result.written) == 4
    ref = _assert_one_checkpoint_named_by_the_hint(table, rows)
    assert len(ref.files) == 4
    assert len(_parts_of(table, 5)) == 2


def test_a_stale_partial_set_does_not_delay_a_run(tmp_path: Path) -> None:
    # Crash recovery: parts past the in-flight grace belong to a dead run. No wait; the new
    # set is written and the stale parts are removed.
    table, rows, _ = _half_written_set(tmp_path, 5, keep=2)
    for part in _parts_of(table, 5):
        _age(part, 120)
    started = time.monotonic()
    result = checkpoint(table, parts=4)
    assert time.monotonic() - started < 10  # the wait for a young set is up to 30 s
    assert len(result.written) == 4
    ref = _assert_one_checkpoint_named_by_the_hint(table, rows)
    assert len(ref.files) == 4
    assert not _parts_of(table, 5)


# ------------------------------------------------------------- what earlier races left behind
def _two_complete_sets(tmp_path: Path) -> tuple[Path, list[dict]]:
    """simple_table with a 4-part and a 5-part set at one version, the hint naming 5 parts:
    what two unlucky runs of an earlier delta-ops left (DuckDB fails on it when it lists the
    4-part set first)."""
    table, rows, rest = _half_written_set(tmp_path, 5, keep=0)
    checkpoint(table, parts=4)
    for part in rest.iterdir():
        os.replace(part, _log(table) / part.name)
    hint = json.loads((_log(table) / "_last_checkpoint").read_text())
    (_log(table) / "_last_checkpoint").write_text(json.dumps({**hint, "parts": 5}))
    assert len(_complete(table)) == 2
    return table, rows


def test_a_rerun_removes_a_second_complete_set_and_repairs_the_hint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table, rows = _two_complete_sets(tmp_path)
    plan = plan_checkpoint(load_snapshot(table), int(time.time() * 1000))
    assert not plan.nothing_to_do and plan.existing is not None
    assert set(plan.redundant) == {p.name for p in _parts_of(table, 4)}
    assert cli.main(["checkpoint", str(table), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["written"] == [] and len(out["removed"]) == 4
    ref = _assert_one_checkpoint_named_by_the_hint(table, rows)
    assert len(ref.files) == 5


def test_inspect_and_cleanup_read_a_version_with_two_complete_sets(tmp_path: Path) -> None:
    # Leftovers of earlier races must not confuse the other operations. Here the version with
    # two sets is cleanup's boundary (everything before it expired, its commit is young and a
    # later checkpoint exists): the second set is no boundary of its own, so nothing at or
    # after the boundary is deleted, and inspect (which plans a cleanup) reports the table.
    table, rows = _two_complete_sets(tmp_path)
    lb.write_commit(table, VERSION + 1, [lb.commit_info()])
    old = time.time() - 90 * 86_400
    for i, path in enumerate(sorted(_log(table).glob("0*"))):
        os.utime(path, (old + i, old + i))
    os.utime(_log(table) / f"{VERSION:020d}.json")  # written just now
    checkpoint(table)  # of VERSION + 1, which the hint then names
    summary = summarize(load_snapshot(table))
    assert summary.last_checkpoint_version == VERSION + 1
    plan = plan_cleanup(load_snapshot(table), int(time.time() * 1000), retention_ms=0)
    assert plan.boundary_checkpoint_version == VERSION
    assert sorted(plan.deleted) == [f"{v:020d}.json" for v in range(VERSION)]
    execute_cleanup(plan)
    assert len(_complete(table)) == 2
    assert deltalake_rows(table) == rows
    assert duckdb_rows(table) == rows
