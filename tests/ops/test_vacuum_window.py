"""Vacuum keeps every file a version inside its window needs, whatever the flags (issue 11).

Each test builds a real table with `deltalake`, ages its log and files the way time would, runs
our ops, and checks with `deltalake` that every version inside the promise reads back with the
rows it had: a file is never judged by its modification time alone while a retained version
still references it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from delta_ops import cli
from delta_ops.errors import InvalidLocation
from delta_ops.ops.checkpoint import execute_checkpoint, plan_checkpoint
from delta_ops.ops.vacuum import execute_vacuum, plan_vacuum
from delta_ops.storage import Storage
from delta_ops.table.snapshot import load_snapshot

HOUR = 3_600_000
DAY = 24 * HOUR


def _now() -> int:
    return time.time_ns() // 1_000_000


def _set_mtime(path: Path, when_ms: int) -> None:
    os.utime(path, ns=(when_ms * 1_000_000, when_ms * 1_000_000))


def _commit_path(table: Path, version: int) -> Path:
    return table / "_delta_log" / f"{version:020d}.json"


def _date_commit(table: Path, version: int, when_ms: int) -> None:
    """Make commit `version` look written at `when_ms`: its timestamps and the file's mtime."""
    path = _commit_path(table, version)
    lines = []
    for line in path.read_text().splitlines():
        action = json.loads(line)
        if "commitInfo" in action:
            action["commitInfo"]["timestamp"] = when_ms
        if "remove" in action:
            action["remove"]["deletionTimestamp"] = when_ms
        if "add" in action:
            action["add"]["modificationTime"] = when_ms
            _set_mtime(table / action["add"]["path"], when_ms)
        lines.append(json.dumps(action))
    path.write_text("\n".join(lines) + "\n")
    _set_mtime(path, when_ms)


def _rows(table: Path, version: int) -> list[dict]:
    data = DeltaTable(str(table), version=version).to_pyarrow_table()
    return sorted(data.to_pylist(), key=lambda r: r["id"])


def _batch(ids: range) -> pa.Table:
    return pa.table({"id": pa.array(list(ids), pa.int64())})


def _history(table: Path, ages_days: list[float]) -> dict[int, list[dict]]:
    """Versions 0..n: append, append, delete of everything from the first append, appends;
    commit i dated `ages_days[i]` days ago. Returns each version's rows."""
    now = _now()
    write_deltalake(str(table), _batch(range(3)))
    write_deltalake(str(table), _batch(range(3, 6)), mode="append")
    DeltaTable(str(table)).delete("id < 3")
    for i in range(3, len(ages_days)):
        write_deltalake(str(table), _batch(range(10 * i, 10 * i + 2)), mode="append")
    for version, age in enumerate(ages_days):
        _date_commit(table, version, now - int(age * DAY))
    return {v: _rows(table, v) for v in range(len(ages_days))}


def test_retention_longer_than_the_property_keeps_files_a_checkpoint_forgot(tmp_path: Path) -> None:
    # The file of the first append was removed 10 days ago; the table keeps tombstones 7 days,
    # so a checkpoint drops its tombstone. A 30-day vacuum must still keep it: time travel to
    # any moment between 10 and 30 days ago reads version 1, which references it.
    table = tmp_path / "t"
    rows = _history(table, [40, 40, 10, 0.5])
    execute_checkpoint(plan_checkpoint(load_snapshot(table), _now()))
    assert load_snapshot(table).tombstones.num_rows == 0  # the checkpoint dropped it

    plan = plan_vacuum(load_snapshot(table), _now(), retention_ms=30 * DAY)
    assert plan.latest_commit_outside_retention == 1
    assert plan.candidates == ()
    execute_vacuum(plan)
    for version in (1, 2, 3):
        assert _rows(table, version) == rows[version]


def test_the_window_only_reaches_back_to_its_start(tmp_path: Path) -> None:
    # The same history vacuumed with a 5-day retention: versions 1 and 2 are older than the
    # window's start (version 2 is the newest commit before it), so the removed file goes.
    table = tmp_path / "t"
    rows = _history(table, [40, 40, 10, 0.5])
    execute_checkpoint(plan_checkpoint(load_snapshot(table), _now()))
    first_file = DeltaTable(str(table), version=0).file_uris()[0]

    plan = plan_vacuum(load_snapshot(table), _now(), retention_ms=5 * DAY, force=True)
    assert plan.latest_commit_outside_retention == 2
    assert [c.path for c in plan.candidates] == [Path(first_file).name]
    execute_vacuum(plan)
    assert not Path(first_file).exists()
    for version in (2, 3):
        assert _rows(table, version) == rows[version]


def test_a_future_now_never_deletes_what_the_real_clock_keeps(tmp_path: Path) -> None:
    # The delete was an hour ago: a plain vacuum (7-day property, no --force) "as of" next month
    # must not delete the removed file.
    table = tmp_path / "t"
    rows = _history(table, [20, 20, 1 / 24, 0.01])
    next_month = _now() + 30 * DAY

    plan = plan_vacuum(load_snapshot(table), next_month)
    assert plan.candidates == ()
    assert plan.requested_now_ms == next_month and plan.now_ms <= _now()
    execute_vacuum(plan)
    for version in (1, 2, 3):
        assert _rows(table, version) == rows[version]


def test_a_future_now_keeps_the_in_flight_grace(tmp_path: Path) -> None:
    # An untracked file written seconds ago may belong to a write about to commit: a forced
    # zero-retention vacuum "as of" tomorrow keeps it as the real clock says it is young.
    table = tmp_path / "t"
    _history(table, [3, 3, 2, 1])
    staged = table / "part-staged.parquet"
    staged.write_bytes(b"not yet committed")
    plan = plan_vacuum(load_snapshot(table), _now() + DAY, retention_ms=0, force=True)
    assert "part-staged.parquet" in plan.kept_in_flight
    execute_vacuum(plan)
    assert staged.exists()


def test_the_plan_says_when_the_window_reaches_past_the_log(tmp_path: Path) -> None:
    table = tmp_path / "t"
    _history(table, [3, 3, 2, 1])
    execute_checkpoint(plan_checkpoint(load_snapshot(table), _now()))
    for version in (0, 1, 2):
        _commit_path(table, version).unlink()  # as a log cleanup would have
    plan = plan_vacuum(load_snapshot(table), _now(), retention_ms=30 * DAY)
    assert plan.oldest_reconstructable_version == 3
    assert plan.window_reaches_past_history
    assert plan.to_dict()["window_reaches_past_history"] is True


@pytest.mark.parametrize("blank", ["", "  "])
def test_a_blank_table_path_is_refused_and_nothing_is_touched(
    tmp_path: Path, blank: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # `delta-ops vacuum "$UNSET"` run inside a table's folder must not vacuum that table.
    table = tmp_path / "t"
    _history(table, [3, 3, 2, 1])
    (table / "orphan.parquet").write_bytes(b"x")
    _set_mtime(table / "orphan.parquet", _now() - 30 * DAY)
    before = sorted(p.name for p in table.rglob("*"))
    monkeypatch.chdir(table)
    code = cli.main(["vacuum", blank, "--retention", "0 hours", "--force"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code != 0 and len(err) == 1 and "is empty" in err[0]
    assert sorted(p.name for p in table.rglob("*")) == before
    with pytest.raises(InvalidLocation):
        Storage.open(blank)


_VACUUM_CHILD = """
import sys
from delta_ops.ops.vacuum import execute_vacuum, plan_vacuum
from delta_ops.table.snapshot import load_snapshot
import time
while time.time() < float(sys.argv[2]):
    pass
plan = plan_vacuum(load_snapshot(sys.argv[1]), int(time.time() * 1000), retention_ms=0,
                   force=True, in_flight_grace_ms=0)
print(execute_vacuum(plan).num_deleted)
"""


def test_two_vacuums_at_once_both_succeed(tmp_path: Path) -> None:
    table = tmp_path / "t"
    rows = _history(table, [3, 3, 2, 1])
    old = _now() - 30 * DAY
    for i in range(400):
        orphan = table / f"dir{i % 20}" / f"orphan-{i}.parquet"
        orphan.parent.mkdir(exist_ok=True)
        orphan.write_bytes(b"x")
        _set_mtime(orphan, old)
    start_at = str(time.time() + 1.0)
    children = [
        subprocess.Popen(
            [sys.executable, "-c", _VACUUM_CHILD, str(table), start_at],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = [child.communicate(timeout=120) for child in children]
    assert [c.returncode for c in children] == [0, 0], [o[1][-2000:] for o in outputs]
    assert not any(table.glob("dir*/orphan-*"))
    assert _rows(table, 3) == rows[3]


def test_leftovers_of_crashed_writes_are_reported_then_vacuumed_once_old(tmp_path: Path) -> None:
    from delta_ops.service.inspect import summarize

    table = tmp_path / "t"
    rows = _history(table, [3, 3, 2, 1])
    old, young = _now() - 10 * DAY, _now() - 5 * 60_000
    temp_log = table / "_delta_log" / f".{4:020d}.json.{'a' * 32}.tmp"
    temp_log.write_bytes(b'{"add":')
    _set_mtime(temp_log, old)
    dead = table / "_delta_ops_staging" / "dead-write" / "part=1"
    dead.mkdir(parents=True)
    for name in ("part-0.parquet", ".part-0.parquet.crc"):
        (dead / name).write_bytes(b"x" * 10)
        _set_mtime(dead / name, old)
    live = table / "_delta_ops_staging" / "running-write"
    live.mkdir(parents=True)
    (live / "part-1.parquet").write_bytes(b"y" * 10)
    _set_mtime(live / "part-1.parquet", young)

    summary = summarize(load_snapshot(table))
    assert (summary.num_leftovers, summary.leftover_bytes) == (4, 37)

    plan = plan_vacuum(load_snapshot(table), _now())
    leftovers = sorted(c.path for c in plan.candidates if c.reason == "leftover of a crashed write")
    assert leftovers == [
        f"_delta_log/{temp_log.name}",
        "_delta_ops_staging/dead-write/part=1/.part-0.parquet.crc",
        "_delta_ops_staging/dead-write/part=1/part-0.parquet",
    ]
    execute_vacuum(plan)
    assert not temp_log.exists() and not dead.parent.exists()
    assert (live / "part-1.parquet").exists()
    assert summarize(load_snapshot(table)).num_leftovers == 1
    assert _rows(table, 3) == rows[3]
