"""Crash injection at every storage write of every op (issue 11).

For each operation the sweep first runs it once on a pristine copy of a real history, counting
its writes (a `faultyfile://` filesystem, tests/faults.py). Then, for every write k and both
moments (`before` it reaches the disk, `after` it is durable but unacknowledged, as a process
killed right after a PUT), it runs the op on a fresh copy, crashing at write k, and checks:

1. the table still reads: every version the op promises to keep reads back with the rows it
   had (`deltalake`), and our own snapshot loads;
2. running the op again (no faults) finishes the work: the end state equals an uncrashed run's.

A few real `kill -9`s of the CLI at sampled moments complete the picture.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, PostCommitHookProperties, write_deltalake

from delta_ops.ops.checkpoint import checkpoint
from delta_ops.ops.cleanup import execute_cleanup, plan_cleanup
from delta_ops.ops.compact import execute_compact, plan_compact
from delta_ops.ops.purge import execute_purge, plan_purge
from delta_ops.ops.row_tracking import execute_enable_row_tracking, plan_enable_row_tracking
from delta_ops.ops.vacuum import execute_vacuum, plan_vacuum
from delta_ops.table.snapshot import load_snapshot
from tests.faults import FaultPlan, InjectedCrash, faulty_options, faulty_url
from tests.support import REPO, copy_fixture, deltalake_rows, duckdb_rows

# deltalake is only the independent writer here: no checkpoints or log cleanup of its own
NO_HOOKS = PostCommitHookProperties(create_checkpoint=False, cleanup_expired_logs=False)
DAY = 86_400_000
AGE_DAYS = 40  # the history is this old: everything past every default retention
WEEK = 7 * DAY


def _now() -> int:
    return time.time_ns() // 1_000_000


def _rows(path: Path, version: int | None = None) -> list[tuple[Any, ...]]:
    data = DeltaTable(str(path), version=version).to_pyarrow_table()
    return sorted((r["id"], r["part"]) for r in data.to_pylist())


def _date_everything(path: Path, when_ms: int) -> None:
    """Make the whole table (files, commits and the timestamps inside them) `when_ms` old,
    one second apart per version so the log's times increase with its versions."""
    for file in path.rglob("*"):
        if not file.is_file():
            continue
        when = when_ms
        name = file.name
        if file.parent.name == "_delta_log" and name[:20].isdigit():
            when = when_ms + int(name[:20]) * 1000
            if name.endswith(".json"):
                actions = [json.loads(x) for x in file.read_text().splitlines() if x.strip()]
                for a in actions:
                    for kind, key in (
                        ("commitInfo", "timestamp"),
                        ("remove", "deletionTimestamp"),
                        ("add", "modificationTime"),
                    ):
                        if kind in a and key in a[kind]:
                            a[kind][key] = when
                file.write_text("".join(json.dumps(a) + "\n" for a in actions))
        os.utime(file, (when / 1000, when / 1000))


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real history by `deltalake`: appends, a delete, an overwrite, more appends, an
    orphan, all of it 40 days old; then our checkpoint of version 3 (which drops the expired
    tombstones, as checkpoints do) and one fresh append."""
    path = tmp_path_factory.mktemp("pristine") / "t"

    def write(start: int, mode: str) -> None:
        ids = pa.array(range(start, start + 4), pa.int64())
        data = pa.table({"id": ids, "part": pa.array([0, 1, 0, 1])})
        write_deltalake(
            str(path), data, mode=mode, partition_by=["part"], post_commithook_properties=NO_HOOKS
        )

    write(0, "error")
    write(10, "append")
    DeltaTable(str(path)).delete("id < 2", post_commithook_properties=NO_HOOKS)
    write(20, "overwrite")
    write(30, "append")
    (path / "part=0" / "orphan.parquet").write_bytes(b"nobody references me")
    old = _now() - AGE_DAYS * DAY
    _date_everything(path, old)
    checkpoint(path, version=3)
    for written in path.glob("_delta_log/00000000000000000003.checkpoint*"):
        os.utime(written, (old / 1000 + 3, old / 1000 + 3))
    write(40, "append")
    return path


# Each op: how to run it on a URL with storage options, which versions it must keep readable
# (given the pristine table's latest version), and its end state.
Op = Callable[[str, dict[str, Any] | None], Any]


def _cleanup(url: str, so: dict[str, Any] | None) -> Any:
    return execute_cleanup(plan_cleanup(load_snapshot(url, storage_options=so), _now()))


def _vacuum(mode: str) -> Op:
    def run(url: str, so: dict[str, Any] | None) -> Any:
        snapshot = load_snapshot(url, storage_options=so)
        return execute_vacuum(plan_vacuum(snapshot, _now(), mode=mode))

    return run


def _row_tracking(url: str, so: dict[str, Any] | None) -> Any:
    return execute_enable_row_tracking(
        plan_enable_row_tracking(load_snapshot(url, storage_options=so), batch_files=2)
    )


OPS: dict[str, Op] = {
    "checkpoint": lambda url, so: checkpoint(url, storage_options=so),
    # the re-run finds the crashed run's young parts: it would wait up to 30 s for them to
    # complete before writing the rest (tests/test_checkpoint_races.py); here it does not wait
    "checkpoint-3-parts": lambda url, so: checkpoint(url, parts=3, storage_options=so, wait_ms=0),
    "cleanup": _cleanup,
    "vacuum-full": _vacuum("full"),
    "vacuum-lite": _vacuum("lite"),
    "enable-row-tracking": _row_tracking,
}


def _end_state(path: Path, op: str) -> Any:
    snapshot = load_snapshot(path)
    if op.startswith("checkpoint"):
        hint = json.loads((path / "_delta_log" / "_last_checkpoint").read_text())
        return snapshot.segment.checkpoint_version, hint["version"], _rows(path)
    if op == "cleanup":
        return sorted(p.name for p in (path / "_delta_log").glob("*.json")), _rows(path)
    if op.startswith("vacuum"):
        data = sorted(
            str(p.relative_to(path)) for p in path.rglob("*.parquet") if "_delta_log" not in p.parts
        )
        return data, _rows(path)
    ids = snapshot.files.column("baseRowId").to_pylist()
    return snapshot.properties.enable_row_tracking, None not in ids, _rows(path)


def _copy(pristine: Path, dest: Path) -> Path:
    shutil.copytree(pristine, dest, copy_function=shutil.copy2)
    return dest


def _promised(pristine: Path) -> dict[int, list[tuple[Any, ...]]]:
    """Versions every op here keeps readable: the latest (everything older is 40 days old,
    outside the default retentions, so vacuum and cleanup may drop it)."""
    latest = DeltaTable(str(pristine)).version()
    return {latest: _rows(pristine, latest)}


@pytest.mark.parametrize("op", list(OPS))
def test_a_crash_at_any_write_leaves_a_readable_table_and_a_rerun_finishes(
    op: str, pristine: Path, tmp_path: Path
) -> None:
    promised = _promised(pristine)
    reference = _copy(pristine, tmp_path / "reference")
    counting = FaultPlan()
    OPS[op](faulty_url(reference), faulty_options(counting))
    expected = _end_state(reference, op)
    assert counting.count > 0, f"{op} wrote nothing: the sweep would test nothing"

    crash_points = 0
    for k in range(1, counting.count + 1):
        for when in ("before", "after"):
            table = _copy(pristine, tmp_path / f"k{k}-{when}")
            faults = FaultPlan(crash_on=k, when=when)
            with pytest.raises(InjectedCrash):
                OPS[op](faulty_url(table), faulty_options(faults))
            for version, rows in promised.items():
                assert _rows(table, version) == rows, f"{op}: crash {when} write {k} ({faults})"
            load_snapshot(table)
            OPS[op](str(table), None)  # the re-run, no faults
            assert _end_state(table, op) == expected, f"{op}: re-run after crash {when} write {k}"
            crash_points += 1
            shutil.rmtree(table)
    assert crash_points == 2 * counting.count


_SLOW_VACUUM = """
import sys, time
import delta_ops.storage.tree as tree
real = tree.os.unlink
def slow(path, *a, **k):
    time.sleep(0.02)
    return real(path, *a, **k)
tree.os.unlink = slow
from delta_ops.cli import main
sys.exit(main(["vacuum", sys.argv[1], "--retention", "0h", "--force", "--in-flight-grace", "0s"]))
"""


@pytest.mark.parametrize("delay", [0.5, 1.0, 1.5])
def test_kill_9_during_a_vacuum_then_a_rerun(pristine: Path, tmp_path: Path, delay: float) -> None:
    # A real process killed with SIGKILL mid-delete (deletes slowed so the kill lands inside).
    table = _copy(pristine, tmp_path / "t")
    extra = table / "part=1"
    for i in range(100):
        (extra / f"orphan-{i}.parquet").write_bytes(b"x")
    latest = DeltaTable(str(table)).version()
    rows = _rows(table, latest)
    proc = subprocess.Popen([sys.executable, "-c", _SLOW_VACUUM, str(table)], cwd=REPO)
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert _rows(table) == rows and load_snapshot(table).version >= latest
    rerun = subprocess.run(
        [
            sys.executable,
            "-m",
            "delta_ops.cli",
            "vacuum",
            str(table),
            "--retention",
            "0h",
            "--force",
            "--in-flight-grace",
            "0s",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert rerun.returncode == 0, rerun.stderr
    assert not list(extra.glob("orphan-*")) and _rows(table) == rows


# ------------------------------------------------------------------ rewrites (issue 18)
#: a real table by Delta Spark: 15 live files in 10 partitions, 2 with a deletion vector, and
#: a checkpoint
REWRITE_FIXTURE = "delta-spark/dv-partitioned-with-checkpoint"


def _purge(url: str, so: dict[str, Any] | None) -> Any:
    return execute_purge(plan_purge(load_snapshot(url, storage_options=so)))


def _compact(url: str, so: dict[str, Any] | None) -> Any:
    return execute_compact(plan_compact(load_snapshot(url, storage_options=so)))


REWRITE_OPS: dict[str, Op] = {"purge": _purge, "compact": _compact}


def _rewrite_end_state(path: Path) -> tuple[int, int, list[dict[str, Any]]]:
    """What a finished rewrite leaves: live files, how many still have a DV, and the rows."""
    files = load_snapshot(path).file_index
    with_dv = files.num_rows - files.column("deletionVector").null_count
    return files.num_rows, with_dv, deltalake_rows(path)


@pytest.mark.parametrize("op", list(REWRITE_OPS))
def test_a_crash_at_any_write_of_a_rewrite_keeps_every_version_and_a_rerun_finishes(
    op: str, tmp_path: Path
) -> None:
    """Purge and compaction delete nothing: after a crash at any write, every version reads
    back with its rows (the latest through both peers), and a re-run ends where an
    uncrashed run does."""
    source = copy_fixture(REWRITE_FIXTURE, tmp_path / "source")
    latest = DeltaTable(str(source)).version()
    promised = {v: deltalake_rows(source, version=v) for v in (latest - 1, latest)}
    reference = _copy(source, tmp_path / "reference")
    counting = FaultPlan()
    REWRITE_OPS[op](faulty_url(reference), faulty_options(counting))
    expected = _rewrite_end_state(reference)
    # 15 live files in 10 partitions, 2 with a DV: purge rewrites those 2 (then a commit),
    # compaction each partition's pair and each lone file with a DV (7 files, then a commit)
    assert expected[:2] == ((15, 0) if op == "purge" else (10, 0))
    assert counting.count == (3 if op == "purge" else 8), f"{op}: {counting.writes}"

    for k in range(1, counting.count + 1):
        for when in ("before", "after"):
            table = _copy(source, tmp_path / f"k{k}-{when}")
            with pytest.raises(InjectedCrash):
                REWRITE_OPS[op](faulty_url(table), faulty_options(FaultPlan(crash_on=k, when=when)))
            for version, rows in promised.items():
                assert deltalake_rows(table, version=version) == rows, f"{op}: {when} write {k}"
            assert duckdb_rows(table) == promised[latest]
            REWRITE_OPS[op](str(table), None)  # the re-run, no faults
            assert _rewrite_end_state(table) == expected, f"{op}: re-run after {when} write {k}"
            shutil.rmtree(table)
