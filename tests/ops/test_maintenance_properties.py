"""Property tests of VACUUM and log cleanup over generated histories, with a fake clock.

Each example writes a random history (tests/support/history.py) with a real tiny file for every path
ever added, untracked orphans, a sentinel outside the table (reachable through a symlink inside
it), random file ages and random checkpoints, then runs a forced vacuum (FULL or LITE) and a log
cleanup with random retentions and clocks. Checked against the naive replay, never against
delta-ops' own reader:

* vacuum never deletes a live file or a file of an unexpired tombstone, nothing younger than the
  retention, nothing outside the table, nothing in `_delta_log`; FULL deletes every other old
  file except untracked ones younger than the in-flight grace, LITE every expired tombstone
  and never an untracked orphan;
* cleanup deletes exactly what Spark's whole-segment rule deletes (an independent
  implementation of `BufferingLogDeletionIterator` below), never a file at or after the
  boundary, and every retained version still loads with the naive replay's files.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from urllib.parse import unquote

from hypothesis import event, given, note
from hypothesis import strategies as st

from delta_ops.log.file_names import parse_log_file_name
from delta_ops.ops.checkpoint import checkpoint
from delta_ops.ops.cleanup import execute_cleanup, plan_cleanup
from delta_ops.ops.vacuum import DEFAULT_IN_FLIGHT_GRACE_MS, execute_vacuum, plan_vacuum
from delta_ops.table.snapshot import load_snapshot
from tests.support import log_builder as lb
from tests.support.history import dv_id, histories, naive_state

HOUR = 3_600_000
DAY = 24 * HOUR
WEEK = 7 * DAY
H0 = 1_700_000_000_000  # the histories' deletionTimestamps are H0 + version (or H0)
LOG0 = (H0 - 40 * DAY) // DAY * DAY  # a UTC midnight: commit v is written at LOG0 + v days + 1 h


def set_mtime(path: Path, when_ms: int) -> None:
    os.utime(path, ns=(when_ms * 1_000_000, when_ms * 1_000_000), follow_symlinks=False)


def files_under(root: Path) -> dict[str, int]:
    """Relative path -> mtime (ms) of every regular file under `root` (symlinks not followed)."""
    out = {}
    for dirpath, _, files in os.walk(root):
        for f in files:
            p = Path(dirpath) / f
            if not p.is_symlink():
                out[p.relative_to(root).as_posix()] = p.lstat().st_mtime_ns // 1_000_000
    return out


def keys_of(snapshot) -> set[tuple[str, str | None]]:
    rows = snapshot.files.select(["path", "deletionVector"]).to_pylist()
    return {
        (
            r["path"],
            dv_id({k: v for k, v in (r["deletionVector"] or {}).items() if v is not None} or None),
        )
        for r in rows
    }


def spark_expired_log_files(
    listing: dict[str, tuple[int, int]], cutoff: int, max_version: int
) -> set[str]:
    """Spark's BufferingLogDeletionIterator (Delta 4.1 / Kernel port), written independently:
    files in name order, mtimes made monotonic, whole segments flushed at complete checkpoints,
    with delta-ops' one stricter rule (docs/decisions.md, "Log cleanup and skewed clocks"):
    Spark judges a segment by its newest file alone, delta-ops also by every commit in it
    (adjusted times), and keeps every segment after one it keeps. They differ only when a
    commit's clock ran ahead: then Spark deletes versions whose adjusted time, the time time
    travel resolves them by, is inside the retention."""
    files = []
    for name in sorted(listing):
        parsed = parse_log_file_name(name)
        if parsed is not None and parsed.end_version is None:
            files.append((name, parsed, *listing[name]))
    out: set[str] = set()
    buffer: list[tuple[str, int, int]] = []  # (name, version, adjusted mtime)
    parts: dict[tuple[int, int], list[tuple[str, int, int]]] = {}
    last: tuple[int, int] | None = None  # (version, mtime) of the previous file
    kept_one = False  # a segment was kept: every later one is kept too

    def flush() -> None:
        nonlocal kept_one
        spark_deletes = buffer and buffer[-1][2] <= cutoff and buffer[-1][1] <= max_version
        commits_expired = all(t <= cutoff for n, _, t in buffer if is_commit(n))
        if spark_deletes and commits_expired and not kept_one:
            out.update(n for n, _, _ in buffer)
        elif buffer:
            kept_one = True
        buffer.clear()

    for i, (name, parsed, size, mtime) in enumerate(files):
        entry = (name, parsed.version, mtime)
        if i == 0:
            buffer.append(entry)
        elif last[0] < parsed.version and last[1] >= mtime:
            entry = (name, parsed.version, last[1] + 1)
            buffer.append(entry)
        elif parsed.is_checkpoint and size > 0:
            if parsed.num_parts is None:
                flush()
                buffer.append(entry)
            else:
                group = parts.setdefault((parsed.version, parsed.num_parts), [])
                group.append(entry)
                if len(group) == parsed.num_parts:
                    flush()
                    buffer.extend(group)
        else:
            buffer.append(entry)
        last = (entry[1], entry[2])
    return out


def is_commit(name: str) -> bool:
    """Whether a log file's name is a commit's (``NNN.json``), not a checkpoint's or a crc's."""
    parsed = parse_log_file_name(name)
    return parsed is not None and name.endswith(".json") and not parsed.is_checkpoint


@st.composite
def scenarios(draw):
    commits = draw(histories(max_commits=8))
    n = len(commits) - 1
    added = sorted({a["add"]["path"] for c in commits for a in c if "add" in a})
    orphans = draw(
        st.lists(
            st.sampled_from(["orphan-a.bin", "part=1/orphan-b.bin", "new-dir/deep/orphan-c.bin"]),
            unique=True,
        )
    )
    delete_before = H0 + draw(
        st.just(n + 2) | st.integers(-1, n + 2)
    )  # often: every remove expired
    ages = st.sampled_from([-30 * DAY, -HOUR, -1, 0, 1, HOUR])
    file_times = {p: delete_before + draw(ages) for p in [unquote(a) for a in added] + orphans}
    checkpoints = draw(
        st.lists(
            st.tuples(st.integers(0, n), st.sampled_from([None, None, 2])),
            min_size=min(1, draw(st.integers(0, 4))),
            max_size=3,
            unique_by=lambda t: t[0],
        )
    )
    skew = draw(st.none() | st.tuples(st.integers(0, n), st.integers(-3, n + 3)))
    return {
        "commits": commits,
        "orphans": orphans,
        "file_times": file_times,
        "delete_before": delete_before,
        "retention": draw(st.sampled_from([0, HOUR, WEEK, 30 * DAY])),
        "mode": draw(st.sampled_from(["full", "lite"])),
        "grace": draw(st.sampled_from([None, 0, HOUR])),  # in-flight grace (None: the default)
        "checkpoints": sorted(checkpoints),
        "skew": skew,  # (version, day): that commit's mtime is LOG0 + day days
        "cutoff_day": draw(st.just(n + 3) | st.integers(-1, n + 3)),
        "log_retention": draw(st.sampled_from([0, DAY, 30 * DAY])),
        "now_jitter": draw(st.integers(0, DAY - 1)),
    }


@given(scenario=scenarios())
def test_vacuum_and_cleanup_never_lose_what_a_retained_version_needs(tmp_path, scenario):
    root = Path(tempfile.mkdtemp(dir=tmp_path))
    table = root / "t"
    commits = scenario["commits"]
    n = len(commits) - 1
    for version, actions in enumerate(commits):
        lb.write_commit(table, version, actions)
    for rel, when in scenario["file_times"].items():
        path = table / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(rel.encode())
        set_mtime(path, when)
    outside = root / "outside"
    outside.mkdir()
    sentinel = outside / "sentinel.parquet"
    sentinel.write_bytes(b"never delete me")
    set_mtime(sentinel, H0 - 400 * DAY)
    os.symlink(outside, table / "link-out")
    multi_part = False
    for version, parts in scenario["checkpoints"]:
        result = checkpoint(
            table, version=version, parts=parts, now_ms=H0 + 1000
        )  # expires nothing
        multi_part |= len(result.written) > 1
    for name in os.listdir(table / "_delta_log"):
        parsed = parse_log_file_name(name)
        version = parsed.version if parsed else n
        when = LOG0 + version * DAY + HOUR
        if (
            scenario["skew"]
            and parsed
            and parsed.version == scenario["skew"][0]
            and name.endswith(".json")
        ):
            when = LOG0 + scenario["skew"][1] * DAY
        set_mtime(table / "_delta_log" / name, when)

    # ------------------------------------------------------------------------------ vacuum
    delete_before, retention = scenario["delete_before"], scenario["retention"]
    naive = naive_state(commits, n)
    live = {unquote(path) for path, _ in naive.files}
    tomb_times: dict[str, int] = {}
    for (path, _), body in naive.tombstones.items():
        rel = unquote(path)
        tomb_times[rel] = max(tomb_times.get(rel, -1), body["deletionTimestamp"])
    protected = live | {p for p, t in tomb_times.items() if t >= delete_before}
    before = files_under(table)
    log_before = {k for k in before if k.startswith("_delta_log/")}
    now = delete_before + retention
    grace = {} if scenario["grace"] is None else {"in_flight_grace_ms": scenario["grace"]}
    in_flight_cutoff = now - (
        DEFAULT_IN_FLIGHT_GRACE_MS if scenario["grace"] is None else scenario["grace"]
    )
    plan = plan_vacuum(
        load_snapshot(table),
        now,
        retention_ms=retention,
        mode=scenario["mode"],
        force=True,
        **grace,
    )
    assert plan.delete_before_ms == delete_before
    result = execute_vacuum(plan)
    after = files_under(table)
    deleted = set(before) - set(after)
    note(f"vacuum {scenario['mode']} deleted {sorted(deleted)}")
    event(f"vacuum {scenario['mode']} deleted {'some' if deleted else 'nothing'}")
    assert set(result.deleted) == deleted
    assert sentinel.read_bytes() == b"never delete me" and (table / "link-out").is_symlink()
    assert log_before <= set(after), "vacuum deleted log files"
    assert not deleted & protected, f"deleted protected files: {sorted(deleted & protected)}"
    if scenario["mode"] == "full":
        assert not {p for p in deleted if before[p] >= delete_before}, (
            "deleted a file younger than the retention"
        )
        old_unprotected = {
            p
            for p, t in before.items()
            if t < delete_before and p not in protected and p not in log_before
        }
        # files no commit removed (untracked orphans) younger than the in-flight grace stay
        in_flight = {
            p for p in old_unprotected if p not in tomb_times and before[p] > in_flight_cutoff
        }
        assert deleted == old_unprotected - in_flight
        assert set(plan.kept_in_flight) == in_flight
    else:
        expired = {
            p for p, t in tomb_times.items() if t < delete_before and p not in live and p in before
        }
        assert deleted == expired
        assert all(o in after for o in scenario["orphans"]), "LITE found an untracked orphan"

    # ----------------------------------------------------------------------------- cleanup
    latest = load_snapshot(table)
    assert keys_of(latest) == set(naive.files)
    expected_state = {v: set(naive_state(commits, v).files) for v in range(n + 1)}
    for v in range(n + 1, latest.version + 1):  # VACUUM START / END change no files
        expected_state[v] = expected_state[n]
    log = table / "_delta_log"
    listing = {
        p.name: (p.stat().st_size, p.stat().st_mtime_ns // 1_000_000)
        for p in log.iterdir()
        if p.is_file()
    }
    cutoff = LOG0 + scenario["cutoff_day"] * DAY
    now = cutoff + scenario["log_retention"] + scenario["now_jitter"]
    cplan = plan_cleanup(load_snapshot(table), now, retention_ms=scenario["log_retention"])
    assert cplan.cutoff_ms == cutoff
    hint = [v for v, _ in scenario["checkpoints"]]
    if hint and not multi_part:
        assert set(cplan.deleted) == spark_expired_log_files(listing, cutoff, max(hint) - 1)
    execute_cleanup(cplan)
    remaining = {p.name for p in log.iterdir() if p.is_file()}
    boundary = cplan.boundary_checkpoint_version
    note(f"cleanup boundary {boundary}, deleted {sorted(cplan.deleted)}")
    event(f"cleanup {'deleted' if boundary is not None else 'kept everything'}")
    if boundary is None:
        assert cplan.deleted == () and remaining == set(listing)
        boundary = 0
    else:
        assert boundary in hint
        assert remaining == set(listing) - set(cplan.deleted)
        assert all(parse_log_file_name(name).version < boundary for name in cplan.deleted)
    for v in range(boundary, latest.version + 1):
        assert keys_of(load_snapshot(table, v)) == expected_state[v], f"version {v} after cleanup"
    assert keys_of(load_snapshot(table)) == keys_of(latest)
    assert sentinel.exists()
