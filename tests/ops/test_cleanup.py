"""Acceptance tests of log cleanup (issue 4): the truncated-day cutoff and the whole-segment rule.

Each test sets the modification times of the log files with `os.utime`, plans and executes a
cleanup, and checks the directory listing file by file afterwards: exactly the files below the
boundary checkpoint are gone, and every retained version still loads (in delta-ops and, on the
real fixtures, in delta-rs) with the same state as before. The peers must read the same files
and rows as before cleanup.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import posixpath
import re
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from delta_ops import cli
from delta_ops.errors import DeltaOpsError
from delta_ops.log.file_names import parse_log_file_name
from delta_ops.log.last_checkpoint import parse_last_checkpoint
from delta_ops.ops.checkpoint import checkpoint
from delta_ops.ops.cleanup import CleanupPlan, execute_cleanup, plan_cleanup
from delta_ops.ops.vacuum import execute_vacuum, plan_vacuum
from delta_ops.table.snapshot import load_snapshot
from delta_ops.table.writer import write_arrow
from tests.support import (
    copy_fixture,
    deltalake_files,
    deltalake_rows,
    duckdb_connection,
    peer_facts,
    readable_fixture_names,
)

HOUR = 3_600_000
DAY = 24 * HOUR
T0 = int(dt.datetime(2025, 1, 1, tzinfo=dt.UTC).timestamp() * 1000)  # a UTC midnight
VERSION_RE = re.compile(r"^(\d{20})\.")


def ms(text: str) -> int:
    return int(dt.datetime.fromisoformat(text).timestamp() * 1000)


def vt(version: int) -> int:
    """Default mtime of every log file of `version`: one day per version, 01:00 UTC."""
    return T0 + version * DAY + HOUR


# ---------------------------------------------------------------------------- table helpers
_DUCK = []


def duckdb_rows(path: Path) -> list[dict]:
    """Rows DuckDB's delta extension reads (one connection for the module: loading the
    extension is the slow part; delta_scan re-reads the log on every query)."""
    if not _DUCK:
        _DUCK.append(duckdb_connection())
    rows = _DUCK[0].sql(f"SELECT * FROM delta_scan('{path}')").to_arrow_table().to_pylist()
    return sorted(rows, key=lambda r: json.dumps(r, sort_keys=True, default=str))


def log_dir(table: Path) -> Path:
    return table / "_delta_log"


def set_mtime(path: Path, when_ms: int) -> None:
    os.utime(path, ns=(when_ms * 1_000_000, when_ms * 1_000_000))


def file_version(name: str) -> int | None:
    parsed = parse_log_file_name(name)
    if parsed is None:
        return None
    return parsed.end_version if parsed.end_version is not None else parsed.version


def age_log(table: Path, overrides: dict[str, int] | None = None, time_of=vt) -> None:
    """Set every log file's mtime from its version (compacted: end version); sidecars and
    other files get the time of the newest version."""
    overrides = overrides or {}
    log = log_dir(table)
    names = [p.name for p in log.iterdir() if p.is_file()]
    newest = max(v for v in map(file_version, names) if v is not None)
    for name in names:
        v = file_version(name)
        set_mtime(log / name, overrides.get(name, time_of(v if v is not None else newest)))
    sidecars = log / "_sidecars"
    if sidecars.is_dir():
        for p in sidecars.iterdir():
            set_mtime(p, overrides.get(f"_sidecars/{p.name}", time_of(newest)))


def listing(table: Path) -> dict[str, tuple[int, int]]:
    """name -> (size, mtime_ns) of every file in _delta_log (sidecars as `_sidecars/<name>`)."""
    out = {}
    for root, _, files in os.walk(log_dir(table)):
        for f in files:
            p = Path(root) / f
            st = p.stat()
            out[p.relative_to(log_dir(table)).as_posix()] = (st.st_size, st.st_mtime_ns)
    return out


def state(table: Path, version: int | None = None) -> list[tuple[str, str | None]]:
    snap = load_snapshot(table, version)
    dvs = snap.files.column("deletionVector").to_pylist()
    return sorted(
        (p, json.dumps(dv, sort_keys=True) if dv else None)
        for p, dv in zip(snap.files.column("path").to_pylist(), dvs)
    )


def latest_version(table: Path) -> int:
    return load_snapshot(table).version


def run_cleanup(table: Path, now_ms: int, retention_ms: int | None = None) -> CleanupPlan:
    """Plan and execute, then check the listing and every retained version against before."""
    before = listing(table)
    plan = plan_cleanup(load_snapshot(table), now_ms, retention_ms=retention_ms)
    boundary = plan.boundary_checkpoint_version
    latest = latest_version(table)
    states = (
        {v: state(table, v) for v in range(boundary, latest + 1)} if boundary is not None else {}
    )
    result = execute_cleanup(plan)
    assert result.deleted == plan.deleted and result.num_deleted == len(plan.deleted)
    after = listing(table)

    if boundary is None:
        assert plan.deleted == () and after == before
        return plan
    assert plan.deleted, "a boundary is only reported when something is deleted"
    assert set(plan.deleted) <= set(before)
    # a deleted file's Hadoop checksum (`.<name>.crc` beside it) goes with it
    sidecars = {
        posixpath.join(posixpath.dirname(n), f".{posixpath.basename(n)}.crc") for n in plan.deleted
    }
    expected_after = {
        k: v for k, v in before.items() if k not in plan.deleted and k not in sidecars
    }
    if result.compat_checkpoint_written:
        assert result.compat_checkpoint_written == plan.write_compat_checkpoint
        expected_after[result.compat_checkpoint_written] = after[result.compat_checkpoint_written]
    assert after == expected_after
    for name in plan.deleted:
        if not name.startswith("_sidecars/"):
            assert file_version(name) < boundary, f"{name} is at or after the boundary {boundary}"
    for v, files in states.items():
        assert state(table, v) == files, f"version {v} changed"
    return plan


# -------------------------------------------------------------------------- the test table
@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """14 commits (versions 0-13) with real data, checkpoints at 5 and 10, a `.crc` per
    version, plus files cleanup must never touch (a hidden temp file, `_last_vacuum_info`)."""
    table = tmp_path_factory.mktemp("cleanup-template") / "t"
    hint_at_5 = None
    for v in range(14):
        write_arrow(table, pa.table({"id": pa.array([v * 10, v * 10 + 1], pa.int64())}))
        snap = load_snapshot(table)
        crc = {
            "tableSizeBytes": snap.size_bytes,
            "numFiles": snap.num_files,
            "numMetadata": 1,
            "numProtocol": 1,
            "metadata": snap.metadata.to_action(),
            "protocol": snap.protocol.to_action(),
        }
        (log_dir(table) / f"{v:020d}.crc").write_text(json.dumps(crc))
        if v in (5, 10):
            checkpoint(table, now_ms=T0)
        if v == 5:
            hint_at_5 = (log_dir(table) / "_last_checkpoint").read_bytes()
    (log_dir(table) / ".00000000000000000003.json.0f1e.tmp").write_text("partial")
    (log_dir(table) / "_last_vacuum_info").write_text(
        '{"latestCommitVersionOutsideOfRetentionWindow":2}'
    )
    assert parse_last_checkpoint(hint_at_5).version == 5
    return table, hint_at_5


def fresh(template, tmp_path) -> Path:
    table = tmp_path / "t"
    shutil.copytree(template[0], table)
    return table


def below(boundary: int, table: Path) -> set[str]:
    """Every commit, checkpoint and crc below `boundary` (what the whole-segment rule deletes)."""
    out = set()
    for name in listing(table):
        parsed = parse_log_file_name(name)
        if parsed is not None and parsed.end_version is None and parsed.version < boundary:
            out.add(name)
    return out


# ================================================================================ 1. cutoff
def test_cutoff_is_now_minus_retention_truncated_to_utc_midnight(template, tmp_path, capsys):
    table = fresh(template, tmp_path)
    snap = load_snapshot(table)
    plan = plan_cleanup(snap, ms("2026-03-10T15:00:00Z"), retention_ms=2 * DAY)
    assert plan.cutoff_ms == ms("2026-03-08T00:00:00Z")
    assert plan.to_dict()["cutoff"] == "2026-03-08T00:00:00Z"
    assert plan_cleanup(snap, ms("2026-03-10T00:00:00Z"), retention_ms=2 * DAY).cutoff_ms == ms(
        "2026-03-08T00:00:00Z"
    )
    assert plan_cleanup(snap, ms("2026-03-09T23:59:59.999Z"), retention_ms=2 * DAY).cutoff_ms == ms(
        "2026-03-07T00:00:00Z"
    )
    # default delta.logRetentionDuration: 30 days
    assert plan_cleanup(snap, ms("2026-03-10T15:00:00Z")).cutoff_ms == ms("2026-02-08T00:00:00Z")
    with pytest.raises(DeltaOpsError, match="negative"):
        plan_cleanup(snap, ms("2026-03-10T15:00:00Z"), retention_ms=-1)
    # the same through the CLI
    assert (
        cli.main(
            [
                "cleanup",
                str(table),
                "--retention",
                "2 days",
                "--now",
                "2026-03-10T15:00Z",
                "--dry-run",
                "--json",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["cutoff"] == "2026-03-08T00:00:00Z" and out["cutoff_ms"] == ms(
        "2026-03-08T00:00:00Z"
    )


@pytest.mark.parametrize("late_ms", [0, 1])
def test_file_exactly_at_the_cutoff_is_eligible_one_ms_later_is_not(template, tmp_path, late_ms):
    table = fresh(template, tmp_path)
    cutoff = ms("2026-03-08T00:00:00Z")

    def time_of(v: int) -> int:  # 4.json (the newest file before checkpoint 5) sits at the cutoff
        return cutoff + late_ms + (v - 4) * HOUR if v >= 4 else cutoff - (4 - v) * HOUR

    age_log(table, time_of=time_of)
    assert (log_dir(table) / f"{4:020d}.json").stat().st_mtime_ns == (cutoff + late_ms) * 1_000_000
    expected = below(5, table)
    plan = run_cleanup(table, ms("2026-03-10T15:00:00Z"), retention_ms=2 * DAY)
    if late_ms == 0:
        assert plan.boundary_checkpoint_version == 5
        assert set(plan.deleted) == expected
        assert len(expected) == 10  # 0-4: json + crc
    else:
        assert plan.boundary_checkpoint_version is None and plan.deleted == ()
        assert "no complete, readable checkpoint" in plan.kept_reasons[0]


def _small_table(path: Path, configuration: dict[str, str]) -> Path:
    for v in range(8):
        write_arrow(path, pa.table({"id": pa.array([v], pa.int64())}), configuration=configuration)
        if v == 5:
            checkpoint(path, now_ms=T0)
    age_log(path)
    return path


@pytest.mark.parametrize(
    "prop, retention, deletes",
    [
        ("interval 365 days", None, False),  # the property keeps everything
        ("interval 365 days", "30 days", True),  # --retention overrides it
        ("interval 8 days", None, True),
        ("interval 8 days", "365 days", False),  # a longer --retention is honoured too
    ],
)
def test_retention_option_overrides_the_table_property(tmp_path, capsys, prop, retention, deletes):
    table = _small_table(tmp_path / "t", {"delta.logRetentionDuration": prop})
    assert load_snapshot(table).properties.log_retention_ms == int(prop.split()[1]) * DAY
    before = listing(table)
    args = ["cleanup", str(table), "--now", f"{T0 + 60 * DAY}ms", "--json"] + (
        ["--retention", retention] if retention else []
    )
    assert cli.main(args) == 0
    out = json.loads(capsys.readouterr().out)
    after = listing(table)
    if deletes:
        assert out["boundary_checkpoint_version"] == 5 and out["dry_run"] is False
        # the commits below the boundary and their checksums
        below = sorted(f"{v:020d}.{kind}" for v in range(5) for kind in ("json", "crc"))
        assert sorted(out["deleted"]) == below and out["num_deleted"] == 10
        assert set(after) == set(before) - set(out["deleted"])
        assert state(table, 5) and load_snapshot(table).version == 7
    else:
        assert (
            out["deleted"] == []
            and out["num_deleted"] == 0
            and out["boundary_checkpoint_version"] is None
        )
        assert after == before


def test_expired_log_cleanup_disabled_deletes_nothing_and_says_so(tmp_path, capsys):
    table = _small_table(tmp_path / "t", {"delta.enableExpiredLogCleanup": "false"})
    before = listing(table)
    plan = plan_cleanup(load_snapshot(table), T0 + 400 * DAY, retention_ms=0)
    assert plan.deleted == () and plan.boundary_checkpoint_version is None
    assert any("enableExpiredLogCleanup" in r for r in plan.kept_reasons)
    execute_cleanup(plan)
    assert listing(table) == before
    assert (
        cli.main(
            ["cleanup", str(table), "--retention", "0h", "--now", f"{T0 + 400 * DAY}ms", "--json"]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["num_deleted"] == 0 and any(
        "enableExpiredLogCleanup" in r for r in out["kept_reasons"]
    )
    assert listing(table) == before


# ===================================================================== 2. whole-segment rule
def _set_hint_5(table: Path, template) -> dict[str, int]:
    (log_dir(table) / "_last_checkpoint").write_bytes(template[1])
    return {}


def _multi_part_10(table: Path, keep_parts: int) -> dict[str, int]:
    (log_dir(table) / f"{10:020d}.checkpoint.parquet").unlink()
    result = checkpoint(table, version=10, parts=2, now_ms=T0)
    assert len(result.written) == 2
    for name in result.written[keep_parts:]:
        (log_dir(table) / name).unlink()
    return {}


def _truncate(table: Path, version: int, keep: float) -> dict[str, int]:
    path = log_dir(table) / f"{version:020d}.checkpoint.parquet"
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])
    return {}


def _compacted(table: Path) -> dict[str, int]:
    for start, end in [(0, 3), (3, 7), (6, 9), (10, 12)]:
        body = "".join(
            (log_dir(table) / f"{v:020d}.json").read_text() for v in range(start, end + 1)
        )
        (log_dir(table) / f"{start:020d}.{end:020d}.compacted.json").write_text(body)
    return {}


SCENARIOS = {
    # name: (mutation -> mtime overrides, cutoff day, expected boundary)
    "monotonic, cutoff after version 4": (lambda t, tpl: {}, 7, 5),
    "monotonic, cutoff after version 9": (lambda t, tpl: {}, 10, 10),
    "inside retention": (lambda t, tpl: {}, 4, None),
    "an older mtime is adjusted forward": (lambda t, tpl: {f"{2:020d}.json": T0 - 30 * DAY}, 7, 5),
    # 4.json from the future: checkpoint 5 needs adjusting, so it is no flush point ...
    "a future mtime before a checkpoint": (
        lambda t, tpl: {f"{4:020d}.json": T0 + 20 * DAY},
        7,
        None,
    ),
    # ... and checkpoint 10 is a flush point (5.json's own time is not adjusted). Spark judges
    # the segment up to it by its newest file, 9.json, and deletes 0-9; but 4.json is past the
    # cutoff, and time travel dates 4-9 from it (monotonic commit times): all inside the
    # retention. delta-ops deletes a segment only when every file in it is past the cutoff.
    "a future mtime inside a later segment": (
        lambda t, tpl: {f"{4:020d}.json": T0 + 20 * DAY},
        12,
        None,
    ),
    "a checkpoint whose mtime needed adjusting is no flush point": (
        lambda t, tpl: {f"{10:020d}.checkpoint.parquet": T0},
        12,
        5,
    ),
    "a multi-part checkpoint whose mtime needed adjusting is no flush point": (
        lambda t, tpl: {
            n: T0
            for n in _multi_part_10(t, 2) or listing(t)
            if n.startswith(f"{10:020d}.checkpoint.")
        },
        12,
        5,
    ),
    "equal mtimes everywhere (a copied table)": (
        lambda t, tpl: {n: T0 for n in listing(t)},
        100,
        None,
    ),
    "_last_checkpoint caps the boundary": (_set_hint_5, 100, 5),
    "missing _last_checkpoint": (
        lambda t, tpl: (log_dir(t) / "_last_checkpoint").unlink() or {},
        100,
        None,
    ),
    "incomplete multi-part checkpoint": (lambda t, tpl: _multi_part_10(t, 1), 100, 5),
    "complete multi-part checkpoint": (lambda t, tpl: _multi_part_10(t, 2), 100, 10),
    "0-byte checkpoint": (lambda t, tpl: _truncate(t, 10, 0), 100, 5),
    "truncated boundary checkpoint falls back": (lambda t, tpl: _truncate(t, 10, 0.5), 100, 5),
    "truncated only candidate": (lambda t, tpl: _truncate(t, 5, 0.5), 7, None),
    "compacted files, boundary 5": (lambda t, tpl: _compacted(t), 7, 5),
    "compacted files, boundary 10": (lambda t, tpl: _compacted(t), 11, 10),
}


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_whole_segment_rule(template, tmp_path, scenario):
    mutate, cutoff_day, boundary = SCENARIOS[scenario]
    table = fresh(template, tmp_path)
    overrides = mutate(table, template)
    age_log(table, overrides)
    pre = set(listing(table))
    untouchable = {
        n
        for n in listing(table)
        if file_version(n) is None or file_version(n) >= (boundary if boundary is not None else 0)
    }
    cutoff = T0 + cutoff_day * DAY
    # now is 1 day + 15 h after the cutoff: retention 1 day, truncation removes the 15 h
    plan = run_cleanup(table, cutoff + DAY + 15 * HOUR, retention_ms=DAY)
    assert plan.cutoff_ms == cutoff
    assert plan.boundary_checkpoint_version == boundary
    after = set(listing(table))
    assert untouchable <= after, f"deleted at/after the boundary: {sorted(untouchable - after)}"
    assert {"_last_vacuum_info", ".00000000000000000003.json.0f1e.tmp"} <= after
    assert ("_last_checkpoint" in after) == (scenario != "missing _last_checkpoint")
    if boundary is None:
        assert plan.deleted == () and plan.kept_reasons
        if scenario == "missing _last_checkpoint":
            assert "_last_checkpoint" in plan.kept_reasons[0]
        return
    compacted = {n for n in plan.deleted if n.endswith(".compacted.json")}
    # exactly the commits, crcs and checkpoints (complete or not) below the boundary go
    assert set(plan.deleted) - compacted == {
        n
        for n in pre
        if parse_log_file_name(n)
        and parse_log_file_name(n).end_version is None
        and file_version(n) < boundary
    }
    assert plan.oldest_retained_version == boundary
    # the boundary checkpoint, its crc and json are kept
    assert f"{boundary:020d}.json" in after and f"{boundary:020d}.crc" in after
    assert any(n.startswith(f"{boundary:020d}.checkpoint") for n in after)
    if scenario.startswith("compacted"):
        all_compacted = {
            "00000000000000000000.00000000000000000003.compacted.json",
            "00000000000000000003.00000000000000000007.compacted.json",
            "00000000000000000006.00000000000000000009.compacted.json",
            "00000000000000000010.00000000000000000012.compacted.json",
        }
        assert compacted == {n for n in all_compacted if file_version(n) < boundary}
        assert all_compacted - compacted <= after
    else:
        assert compacted == set()
    if scenario == "incomplete multi-part checkpoint":
        assert f"{10:020d}.checkpoint.0000000001.0000000002.parquet" in after
    if scenario in ("0-byte checkpoint", "truncated boundary checkpoint falls back"):
        assert f"{10:020d}.checkpoint.parquet" in after
    # versions below the boundary are gone for good; everything from it on loads
    with pytest.raises(DeltaOpsError):
        load_snapshot(table, boundary - 1)
    assert state(table) == state(template[0])


# ================================================================ 3. every readable fixture
def peer_view(table: Path, name: str) -> dict:
    facts = peer_facts()[name]
    view = {"files": deltalake_files(table)[1]}
    try:
        view["rs_rows"] = deltalake_rows(table)
    except Exception as exc:  # noqa: BLE001 - log-only fixtures and features delta-rs refuses
        view["rs_rows"] = f"error: {type(exc).__name__}"
    if "kernel_rows" in facts:
        view["duckdb_rows"] = duckdb_rows(table)
        assert len(view["duckdb_rows"]) == facts["kernel_rows"]
    return view


def age_data(table: Path, when_ms: int) -> None:
    for root, dirs, files in os.walk(table):
        if "_delta_log" in Path(root).parts:
            continue
        for f in files:
            set_mtime(Path(root) / f, when_ms)


def rs_state(table: Path, version: int) -> list[str]:
    from deltalake import DeltaTable

    dt_ = DeltaTable(str(table), version=version)
    assert dt_.version() == version
    return sorted(dt_.file_uris())


@pytest.mark.parametrize("name", readable_fixture_names())
def test_fixture_cleanup_keeps_every_retained_version_and_peer_reads(name, tmp_path):
    import time

    table = copy_fixture(name, tmp_path)
    base = T0 - 400 * DAY
    age_log(table, time_of=lambda v: base + v * HOUR)
    age_data(table, base)
    before = peer_view(table, name)
    now = int(time.time() * 1000) + 365 * DAY

    # (1) the fixture as it is: whatever it allows
    plan = plan_cleanup(load_snapshot(table), now, retention_ms=0)
    boundary = plan.boundary_checkpoint_version
    latest = latest_version(table)
    rs_before = (
        {v: rs_state(table, v) for v in range(boundary, latest + 1)} if boundary is not None else {}
    )
    run_cleanup(table, now, retention_ms=0)
    if boundary is None:
        assert plan.kept_reasons
    else:
        for v, files in rs_before.items():
            assert rs_state(table, v) == files, f"delta-rs time travel to {v} changed"
        assert peer_view(table, name) == before

    # (2) a checkpoint at the latest version, then the most aggressive cleanup: only the
    #     latest version remains (capped by `_last_checkpoint`, which a no-op checkpoint run
    #     leaves as it is), and it reads the same
    if boundary != latest and latest > 0:
        checkpoint(table, now_ms=now)
        age_log(table, time_of=lambda v: base + v * HOUR)
        hint = log_dir(table) / "_last_checkpoint"
        cap = parse_last_checkpoint(hint.read_bytes()).version if hint.exists() else None
        rs_before = (
            {v: rs_state(table, v) for v in range(cap, latest + 1)} if cap is not None else {}
        )
        older = cap is not None and any(
            file_version(n) is not None and file_version(n) < cap and "/" not in n
            for n in listing(table)
        )
        plan2 = run_cleanup(table, now, retention_ms=0)
        assert plan2.boundary_checkpoint_version == (cap if older else None)
        if cap is not None:
            assert not [
                n
                for n in listing(table)
                if file_version(n) is not None and file_version(n) < cap and "/" not in n
            ]
            for v, files in rs_before.items():
                assert rs_state(table, v) == files, f"delta-rs time travel to {v} changed"

    # (3) and the most aggressive vacuum after it: still the same files and rows
    execute_vacuum(plan_vacuum(load_snapshot(table), now, retention_ms=0, force=True))
    assert peer_view(table, name) == before


# =================================================================== 4. V2 checkpoints
def _sidecars(table: Path) -> set[str]:
    d = log_dir(table) / "_sidecars"
    return {p.name for p in d.iterdir() if not p.name.startswith(".")} if d.is_dir() else set()


def _visible(names) -> set[str]:
    """Deleted names without hidden Hadoop checksum files (`_sidecars/.<sidecar>.crc`)."""
    return {n for n in names if not n.rsplit("/", 1)[-1].startswith(".")}


def _hidden_deleted_are_checksums_of_deleted(deleted) -> None:
    for n in set(deleted) - _visible(deleted):
        folder, name = n.rsplit("/", 1)
        assert name.endswith(".crc") and f"{folder}/{name[1:-4]}" in deleted, n


def _referenced_sidecars(table: Path, checkpoint_name: str) -> set[str]:
    path = log_dir(table) / checkpoint_name
    if path.suffix == ".json":
        return {
            json.loads(line)["sidecar"]["path"].rsplit("/", 1)[-1]
            for line in path.read_text().splitlines()
            if '"sidecar"' in line
        }
    rows = pq.read_table(path, columns=["sidecar"]).column("sidecar").to_pylist()
    return {r["path"].rsplit("/", 1)[-1] for r in rows if r}


@pytest.mark.parametrize(
    "name", ["delta-spark/v2-checkpoint-json", "delta-spark/v2-checkpoint-parquet"]
)
def test_v2_cleanup_writes_compat_checkpoint_and_deletes_unreferenced_sidecars(name, tmp_path):
    table = copy_fixture(name, tmp_path)
    before = peer_view(table, name)
    old_top = [
        n
        for n in listing(table)
        if re.fullmatch(r"0+2\.checkpoint\.[0-9a-f-]{36}\.(json|parquet)", n)
    ]
    assert len(old_top) == 1
    old_sidecars = _referenced_sidecars(table, old_top[0])
    assert old_sidecars and old_sidecars <= _sidecars(table)
    # one more commit and a new V2 checkpoint at 3 (the table's policy is v2)
    write_arrow(table, pa.table({"id": pa.array([1000, 1001], pa.int64())}))
    result = checkpoint(table, now_ms=T0)
    assert result.kind == "v2" and result.version == 3
    [new_top] = [n for n in result.written if not n.startswith("_sidecars/")]
    new_sidecars = _referenced_sidecars(table, new_top)
    assert new_sidecars and not (new_sidecars & old_sidecars)
    # a stray unreferenced sidecar younger than the cutoff, and one older than it
    young = "00000000000000000003.checkpoint.0000000001.0000000001.11111111-1111-1111-1111-111111111111.parquet"
    stale = "00000000000000000001.checkpoint.0000000001.0000000001.22222222-2222-2222-2222-222222222222.parquet"
    for stray in (young, stale):
        shutil.copy(
            log_dir(table) / "_sidecars" / min(old_sidecars), log_dir(table) / "_sidecars" / stray
        )
    overrides = {f"_sidecars/{n}": vt(2) for n in old_sidecars} | {
        f"_sidecars/{n}": vt(3) for n in new_sidecars
    }
    overrides |= {f"_sidecars/{young}": T0 + 50 * DAY, f"_sidecars/{stale}": vt(1)}
    age_log(table, overrides)
    expected_rows = sorted(
        before["duckdb_rows"] + [{"id": 1000}, {"id": 1001}],
        key=lambda r: json.dumps(r, sort_keys=True),
    )

    plan = run_cleanup(table, T0 + 20 * DAY, retention_ms=0)
    assert plan.boundary_checkpoint_version == 3
    compat = f"{3:020d}.checkpoint.parquet"
    assert plan.write_compat_checkpoint == compat
    assert _visible(plan.deleted) == {f"{v:020d}.json" for v in range(3)} | {old_top[0]} | {
        f"_sidecars/{n}" for n in old_sidecars | {stale}
    }
    _hidden_deleted_are_checksums_of_deleted(plan.deleted)
    assert _sidecars(table) == new_sidecars | {young}
    # the compatibility checkpoint: a classic-named copy of the V2 top-level rows
    compat_rows = pq.read_table(log_dir(table) / compat).to_pylist()
    assert {
        r["sidecar"]["path"].rsplit("/", 1)[-1] for r in compat_rows if r.get("sidecar")
    } == new_sidecars
    [protocol] = [r["protocol"] for r in compat_rows if r.get("protocol")]
    assert sorted(protocol["readerFeatures"]) == sorted(
        load_snapshot(table).protocol.to_action()["readerFeatures"]
    )
    assert "v2Checkpoint" in protocol["readerFeatures"]
    assert [
        r["checkpointMetadata"]["version"] for r in compat_rows if r.get("checkpointMetadata")
    ] == [3]
    # everyone reads the retained version and the table
    assert rs_state(table, 3)
    assert deltalake_files(table)[1] == sorted(state_paths(table))
    assert duckdb_rows(table) == expected_rows
    assert sorted(r["id"] for r in deltalake_rows(table)) == sorted(r["id"] for r in expected_rows)
    # the compatibility checkpoint is a complete checkpoint on its own: without the UUID-named
    # file and the hint, all three readers read version 3 from it (and its sidecars)
    alone = tmp_path / "compat-only"
    shutil.copytree(table, alone)
    (log_dir(alone) / new_top).unlink()
    (log_dir(alone) / "_last_checkpoint").unlink()
    snap = load_snapshot(alone)
    assert snap.segment.checkpoint.name == compat and snap.version == 3
    assert state(alone) == state(table)
    assert duckdb_rows(alone) == expected_rows
    assert deltalake_files(alone)[1] == deltalake_files(table)[1]


def state_paths(table: Path) -> list[str]:
    return [p for p, _ in state(table)]


def test_v2_kernel_sidecars_table(tmp_path):
    name = "kernel/v2-checkpoints-json-with-sidecars"
    table = copy_fixture(name, tmp_path)
    before = peer_view(table, name)
    tops = sorted(
        n
        for n in listing(table)
        if parse_log_file_name(n) is not None
        and parse_log_file_name(n).kind.name == "V2_CHECKPOINT"
    )
    referenced = {n: _referenced_sidecars(table, n) for n in tops}
    latest_top = tops[-1]
    assert latest_top.startswith(f"{6:020d}.")
    overrides = {}
    for top, names in referenced.items():
        for n in names:
            overrides[f"_sidecars/{n}"] = vt(file_version(top))
    age_log(table, overrides)
    plan = run_cleanup(table, T0 + 20 * DAY, retention_ms=0)
    assert (
        plan.boundary_checkpoint_version == 6
        and plan.write_compat_checkpoint == f"{6:020d}.checkpoint.parquet"
    )
    assert _sidecars(table) == referenced[latest_top]
    assert _visible(n for n in plan.deleted if n.startswith("_sidecars/")) == {
        f"_sidecars/{n}" for top in tops[:-1] for n in referenced[top]
    } - {f"_sidecars/{n}" for n in referenced[latest_top]}
    assert peer_view(table, name) == before
    assert rs_state(table, 6)
    # no Hadoop checksum is left without its file, in the log or among the sidecars
    names = set(listing(table))
    strays = [
        n
        for n in names
        if posixpath.basename(n).startswith(".")
        and n.endswith(".crc")
        and posixpath.join(posixpath.dirname(n), posixpath.basename(n)[1:-4]) not in names
    ]
    assert strays == []


def test_checksum_files_of_referenced_sidecars_are_kept(tmp_path):
    table = copy_fixture("kernel/v2-checkpoints-json-with-sidecars", tmp_path)
    top = max(
        n
        for n in listing(table)
        if parse_log_file_name(n) is not None
        and parse_log_file_name(n).kind.name == "V2_CHECKPOINT"
    )
    kept = _referenced_sidecars(table, top)
    checksums = {f".{n}.crc" for n in kept}
    assert checksums <= {p.name for p in (log_dir(table) / "_sidecars").iterdir()}
    age_log(table)
    plan = plan_cleanup(load_snapshot(table), T0 + 20 * DAY, retention_ms=0)
    assert plan.boundary_checkpoint_version == 6
    assert not {f"_sidecars/{c}" for c in checksums} & set(plan.deleted)


# ======================================================================== 5. dry run (CLI)
def test_cli_dry_run_reports_and_deletes_nothing(template, tmp_path, capsys):
    table = fresh(template, tmp_path)
    age_log(table)
    before = listing(table)
    now = "2025-01-12T15:00:00Z"  # cutoff 2025-01-11 with retention 1 day: boundary 10
    assert (
        cli.main(
            ["cleanup", str(table), "--dry-run", "--json", "--retention", "1 day", "--now", now]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["dry_run"] is True
    assert out["cutoff"] == "2025-01-11T00:00:00Z"
    assert out["boundary_checkpoint_version"] == 10
    assert (
        sorted(out["deleted"]) == sorted(below(10, table))
        and out["num_deleted"] == len(below(10, table)) == 21
    )
    assert (
        out["kept_reasons"] and "00000000000000000010.checkpoint.parquet" in out["kept_reasons"][0]
    )
    assert listing(table) == before  # sizes and mtimes too

    # nothing eligible: the dry run says why
    assert cli.main(["cleanup", str(table), "--dry-run", "--json", "--now", now]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["dry_run"] is True and out["deleted"] == [] and out["num_deleted"] == 0
    assert out["boundary_checkpoint_version"] is None and "retention" in out["kept_reasons"][0]

    # the real run deletes what the dry run listed
    assert cli.main(["cleanup", str(table), "--json", "--retention", "1 day", "--now", now]) == 0
    done = json.loads(capsys.readouterr().out)
    assert done["dry_run"] is False and sorted(done["deleted"]) == sorted(below(10, template[0]))
    assert set(listing(table)) == set(before) - set(done["deleted"])

    # human output
    assert cli.main(["cleanup", str(table), "--dry-run", "--now", now]) == 0
    assert "cutoff" in capsys.readouterr().out


def test_cli_text_says_a_missing_boundary_and_the_retention_as_a_person_reads_them(
    template, tmp_path, capsys
):
    table = fresh(template, tmp_path)
    age_log(table)
    now = "2025-01-12T15:00:00Z"  # the default retention (30 days) keeps everything
    assert cli.main(["cleanup", str(table), "--dry-run", "--now", now]) == 0
    out = capsys.readouterr().out
    assert "None" not in out and "2592000000" not in out, out
    assert "no boundary checkpoint" in out and "log retention of 30 days" in out, out
    assert cli.main(["cleanup", str(table), "--now", now]) == 0
    out = capsys.readouterr().out
    assert "None" not in out and "no boundary checkpoint: deleted 0 log files" in out, out
    # with a boundary, its version
    assert cli.main(["cleanup", str(table), "--dry-run", "--retention", "1 day", "--now", now]) == 0
    assert "boundary checkpoint 10: would delete 21 log files" in capsys.readouterr().out


def test_young_commits_before_a_skewed_writers_checkpoint_are_kept(template, tmp_path):
    """Versions 6-8 are young; a writer whose clock runs two months behind then committed
    9-13 with a checkpoint at 10. Times are made monotonic across versions, but a version's
    later files keep their own times (9.crc is moved after 8, 9.json is not), so the
    checkpoint at 10 looks like the end of an expired segment. Spark's iterator stops at the
    first file it must keep (6): the young versions and the boundary at 5 stay."""
    table = fresh(template, tmp_path)
    young = T0 + 60 * DAY
    age_log(table, time_of=lambda v: young + v * HOUR if 6 <= v <= 8 else vt(v))
    plan = run_cleanup(table, T0 + 61 * DAY, retention_ms=30 * DAY)
    assert plan.boundary_checkpoint_version == 5
    for version in range(5, 14):
        assert load_snapshot(table, version).version == version
