"""Acceptance tests of VACUUM (issue 4): FULL and LITE, the commits, and that no data is lost.

Files are aged with `os.utime`; every test checks the table directory file by file afterwards
(what was deleted is exactly what the rules say, everything else is byte-for-byte there) and,
where the table has data, that delta-rs and DuckDB read the same files and rows as before.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import posixpath
import time
from pathlib import Path
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from delta_ops import cli
from delta_ops.clock import fixed_wall_clock
from delta_ops.errors import RetentionTooShort
from delta_ops.ops.checkpoint import checkpoint
from delta_ops.ops.cleanup import execute_cleanup, plan_cleanup
from delta_ops.ops.vacuum import VacuumLiteRefused, execute_vacuum, plan_vacuum
from delta_ops.storage import Storage
from delta_ops.table.snapshot import load_snapshot
from delta_ops.table.transaction import Transaction
from delta_ops.table.write_target import resolve_write_target
from delta_ops.table.writer import DataFile, commit_data_files, write_arrow
from tests.support import (
    copy_fixture,
    deltalake_files,
    deltalake_rows,
    duckdb_connection,
    peer_facts,
    readable_fixture_names,
)
from tests.support.dv_paths import dv_file

HOUR = 3_600_000
DAY = 24 * HOUR
WEEK = 7 * DAY


def now_ms() -> int:
    return int(time.time() * 1000)


# ---------------------------------------------------------------------------------- helpers
_DUCK = []


def duckdb_rows(path: Path) -> list[dict]:
    """Rows DuckDB's delta extension reads, through one connection per module (loading the
    extension is the slow part; delta_scan reads the log afresh on every query)."""
    if not _DUCK:
        _DUCK.append(duckdb_connection())
    rows = _DUCK[0].sql(f"SELECT * FROM delta_scan('{path}')").to_arrow_table().to_pylist()
    return sorted(rows, key=lambda r: json.dumps(r, sort_keys=True, default=str))


def set_mtime(path: Path, when_ms: int) -> None:
    os.utime(path, ns=(when_ms * 1_000_000, when_ms * 1_000_000), follow_symlinks=False)


def age_files(root: Path, when_ms: int, *, include_log: bool = True) -> None:
    """Set the mtime of every file (and symlink itself) under `root`."""
    for dirpath, dirs, files in os.walk(root):
        if not include_log and "_delta_log" in Path(dirpath).relative_to(root).parts:
            continue
        for name in files + [d for d in dirs if os.path.islink(os.path.join(dirpath, d))]:
            set_mtime(Path(dirpath) / name, when_ms)


def tree(root: Path) -> dict[str, tuple]:
    """Every file, directory and symlink under `root`: kind, size, mtime_ns (no symlink following)."""
    out = {}
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            p = Path(dirpath) / name
            st = p.lstat()
            kind = "link" if p.is_symlink() else "dir" if p.is_dir() else "file"
            out[p.relative_to(root).as_posix()] = (
                kind,
                st.st_size if kind != "dir" else 0,
                st.st_mtime_ns,
            )
    return out


def data_files(root: Path) -> set[str]:
    return {k for k, v in tree(root).items() if v[0] == "file" and not k.startswith("_delta_log/")}


def log_commits(table: Path) -> list[str]:
    return sorted(p.name for p in (table / "_delta_log").glob("*.json"))


def commit_actions(table: Path, version: int) -> list[dict]:
    return [
        json.loads(line)
        for line in (table / "_delta_log" / f"{version:020d}.json").read_text().splitlines()
        if line.strip()
    ]


def write(path: Path, content: bytes | str = b"x" * 10, when_ms: int | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    if when_ms is not None:
        set_mtime(path, when_ms)
    return path


def ids(n: int, start: int = 0, **cols) -> pa.Table:
    data = {"id": pa.array(range(start, start + n), pa.int64())}
    data.update({k: pa.array([v] * n) for k, v in cols.items()})
    return pa.table(data)


def vacuum(table: Path, now: int | None = None, **kwargs):
    """Plan and execute a vacuum with the wall clock reading `now` (default: the real clock)."""
    if now is None:
        plan = plan_vacuum(load_snapshot(table), now_ms(), **kwargs)
        return plan, execute_vacuum(plan)
    with fixed_wall_clock(now):
        plan = plan_vacuum(load_snapshot(table), now, **kwargs)
        return plan, execute_vacuum(plan)


# ------------------------------------------------------------------ independent protocol facts
def spark_hidden(rel: str, partition_columns) -> bool:
    """Spark's per-name rule: a `_`/`.` name is hidden unless `_change_data`, `_delta_index` or `col=`."""
    for name in rel.split("/"):
        if (
            name.startswith(("_", "."))
            and not name.startswith(("_change_data", "_delta_index"))
            and not any(name.startswith(f"{c}=") for c in partition_columns)
        ):
            return True
    return False


def referenced(table: Path) -> tuple[set[str], set[str]]:
    """(live data files, their DV files), decoded and relative, from the latest snapshot."""
    snap = load_snapshot(table)
    rows = snap.files.select(["path", "deletionVector"]).to_pylist()
    return {unquote(r["path"]) for r in rows}, {
        p for p in (dv_file(r["deletionVector"]) for r in rows) if p
    }


def peer_view(table: Path, name: str | None = None) -> dict:
    view = {"files": deltalake_files(table)[1]}
    try:
        view["rs_rows"] = deltalake_rows(table)
    except Exception as exc:  # noqa: BLE001 - log-only fixtures, features delta-rs refuses
        view["rs_rows"] = f"error: {type(exc).__name__}"
    if name is None or "kernel_rows" in peer_facts()[name]:
        view["duckdb_rows"] = duckdb_rows(table)
    return view


# ============================================================ 1. every readable fixture, FULL
@pytest.mark.parametrize("name", readable_fixture_names())
def test_fixture_full_vacuum_keeps_every_referenced_file_and_peer_reads(name, tmp_path):
    table = copy_fixture(name, tmp_path)
    before = peer_view(table, name)
    snap = load_snapshot(table)
    partition_columns = snap.partition_columns
    live, live_dvs = referenced(table)
    tombstones = {unquote(p) for p in snap.tombstones.column("path").to_pylist()}
    # untracked orphans: a file, a file in a new directory tree, an empty directory, and a file
    # next to a live file (inside a partition directory where there is one)
    some_dir = posixpath.dirname(min(live)) if live else ""
    orphans = {
        "orphan-file.parquet",
        "orphan_dir/nested/orphan.bin",
        posixpath.join(some_dir, "orphan-next-to-data.parquet"),
    }
    for rel in orphans:
        write(table / rel, b"orphan bytes")
    (table / "empty_orphan_dir" / "deeper").mkdir(parents=True)
    thirty_days_ago = now_ms() - 30 * DAY
    age_files(table, thirty_days_ago)
    files_before = data_files(table)
    log_before = {p.name: p.read_bytes() for p in (table / "_delta_log").iterdir() if p.is_file()}
    existing_live = {p for p in live | live_dvs if p in files_before}

    plan, result = vacuum(table, retention_ms=0, force=True)

    files_after = data_files(table)
    deleted = files_before - files_after
    # exactly the unreferenced, non-hidden files are gone with their Hadoop checksums (which
    # Spark wrote beside them); other hidden ones and referenced ones stay
    expected = {
        f
        for f in files_before
        if not spark_hidden(f, partition_columns) and f not in live | live_dvs
    }
    checksums = {
        posixpath.join(posixpath.dirname(f), f".{posixpath.basename(f)}.crc") for f in expected
    }
    assert deleted == expected | (checksums & files_before)
    assert set(result.deleted) == expected and result.num_deleted == len(expected)
    assert orphans <= deleted
    assert existing_live <= files_after, "a referenced file was deleted"
    assert not [
        f
        for f in files_after
        if f.startswith("_change_data/") and not spark_hidden(f, partition_columns)
    ]
    assert not [
        f
        for f in files_after
        if posixpath.basename(f).startswith("deletion_vector_") and f not in live_dvs
    ]
    assert not (tombstones - live) & files_after
    assert not (table / "orphan_dir").exists() and not (table / "empty_orphan_dir").exists()
    if any(f.startswith("_change_data/") for f in files_before) and not any(
        f.startswith("_change_data/") for f in files_after
    ):
        assert not (table / "_change_data").exists()
    reasons = {c.path: c.reason for c in plan.candidates}
    for path in tombstones & expected:
        assert reasons[path] == "expired tombstone"
    assert reasons["orphan-file.parquet"] == "unreferenced"
    # the log is only appended to: VACUUM START/END, their checksums and _last_vacuum_info
    log_after = {p.name: p.read_bytes() for p in (table / "_delta_log").iterdir() if p.is_file()}
    assert {k: log_after[k] for k in log_before} == log_before
    new = {f"{v:020d}.{kind}" for v in result.commits for kind in ("json", "crc")}
    commits = {f"{v:020d}.json" for v in result.commits}
    assert len(new) == 4 and commits <= set(log_after) - set(log_before)
    assert set(log_after) - set(log_before) <= new | {"_last_vacuum_info"}
    if name != "kernel/crc-full":  # (its 0.crc disagrees with its log on purpose: no
        # commit builds a checksum on it, the alarm is raised instead)
        assert new <= set(log_after)
    if any(
        p.suffix == ".json"
        for p in (table / "_delta_log").iterdir()
        if p.name[:20] not in {n[:20] for n in new}
    ):
        assert "_last_vacuum_info" in log_after  # some commit is older than the retention
    # the peers read exactly what they read before
    assert peer_view(table, name) == before


# ====================================================== 2. the delta-rs DV-corruption case
def test_referenced_deletion_vector_survives_where_deltalake_would_delete_it(tmp_path):
    from deltalake import DeltaTable

    table = copy_fixture("delta-rs/table-with-dv-small", tmp_path)
    age_files(table, now_ms() - 30 * DAY)
    _, live_dvs = referenced(table)
    [dv] = live_dvs
    assert dv.startswith("deletion_vector_") and (table / dv).exists()
    before_tree = tree(table)
    # delta-rs' own FULL vacuum would delete the DV file the live file still needs
    theirs = DeltaTable(str(table)).vacuum(
        retention_hours=0, enforce_retention_duration=False, dry_run=True, full=True
    )
    assert dv in theirs
    assert tree(table) == before_tree  # (their dry run)

    plan, _ = vacuum(table, retention_ms=0, force=True)
    assert dv not in {c.path for c in plan.candidates}
    assert (table / dv).read_bytes() == (
        copy_fixture("delta-rs/table-with-dv-small", tmp_path / "pristine") / dv
    ).read_bytes()
    assert len(deltalake_rows(table)) == 8
    assert len(duckdb_rows(table)) == 8
    assert sorted(r["value"] for r in deltalake_rows(table)) == sorted(
        r["value"] for r in duckdb_rows(table)
    )


def _remove_the_file_with_a_dv(tmp_path: Path) -> tuple[Path, str, str, int]:
    """delta-rs' one-file DV table with that file removed now (its DV in the remove): the
    table, the data file's and the DV file's relative paths, and the removal time."""
    table = copy_fixture("delta-rs/table-with-dv-small", tmp_path)
    snap = load_snapshot(table)
    [row] = snap.files.to_pylist()
    dv = dv_file(row["deletionVector"])
    assert dv is not None
    removed_at = now_ms()
    txn = Transaction(snap, operation="DELETE")
    descriptor = {k: v for k, v in row["deletionVector"].items() if v is not None}
    remove = {"path": row["path"], "deletionTimestamp": removed_at, "dataChange": True}
    txn.add_action({"remove": {**remove, "size": row["size"], "deletionVector": descriptor}})
    txn.commit()
    return table, unquote(row["path"]), dv, removed_at


@pytest.mark.parametrize("mode", ["full", "lite"])
def test_deletion_vector_of_an_unexpired_tombstone_is_kept_until_it_expires(tmp_path, mode):
    table, data, dv, removed_at = _remove_the_file_with_a_dv(tmp_path)
    age_files(table, removed_at - 30 * DAY)
    # inside the retention: the removed file and its DV stay
    plan, result = vacuum(table, removed_at + HOUR // 2, retention_ms=HOUR, force=True, mode=mode)
    assert plan.candidates == () and result.commits == ()
    assert (table / data).exists() and (table / dv).exists()
    # once the tombstone expired, both go
    plan, result = vacuum(table, removed_at + 2 * HOUR, retention_ms=HOUR, force=True, mode=mode)
    assert set(result.deleted) == {data, dv}
    reasons = {c.path: c.reason for c in plan.candidates}
    assert reasons[data] == "expired tombstone"
    assert reasons[dv] == "expired tombstone's deletion vector"
    assert deltalake_rows(table) == [] and duckdb_rows(table) == []


@pytest.mark.parametrize("mode", ["full", "lite"])
def test_a_young_deletion_vector_of_an_expired_tombstone_gets_no_in_flight_grace(tmp_path, mode):
    """A commit named the DV (in its remove), so no running write owns it: with retention 0 it
    goes with its file at once, as in Delta Spark's `RETAIN 0 HOURS`, and is not held back as
    an untracked young file."""
    table, data, dv, removed_at = _remove_the_file_with_a_dv(tmp_path)
    young = (removed_at - 1000) / 1000
    for name in (data, dv):
        os.utime(table / name, (young, young))
    plan, result = vacuum(table, removed_at + 1000, retention_ms=0, force=True, mode=mode)
    assert plan.kept_in_flight == ()
    assert set(result.deleted) == {data, dv}
    assert {c.path: c.reason for c in plan.candidates}[dv] == "expired tombstone's deletion vector"


@pytest.mark.parametrize("mode", ["full", "lite"])
def test_a_removed_file_whose_tombstone_a_checkpoint_dropped_is_not_called_an_orphan(
    tmp_path, mode
):
    """A checkpoint drops tombstones past the retention, so the vacuum after it cannot tell
    from the log that the file was committed once: it is no orphan (a file no commit ever
    referenced) for that. FULL says what it knows, that the log no longer references it; LITE
    read its remove, so it is an expired tombstone."""
    table = tmp_path / "t"
    write_arrow(table, ids(3))
    write_arrow(table, ids(3, 10), mode="overwrite")
    removed = unquote(load_snapshot(table).tombstones.column("path").to_pylist()[0])
    age_files(table, now_ms() - 30 * DAY)
    later = now_ms() + 8 * DAY  # past the default retention (7 days) of the remove
    with fixed_wall_clock(later):
        checkpoint(table, now_ms=later)
        assert load_snapshot(table).tombstones.num_rows == 0  # the checkpoint dropped it
    plan, result = vacuum(table, later, mode=mode)
    assert result.deleted == (removed,)
    (candidate,) = plan.candidates
    assert candidate.reason != "orphan"
    assert candidate.reason == ("unreferenced" if mode == "full" else "expired tombstone")


def test_a_data_files_hadoop_checksum_goes_with_it_and_counts_for_nothing(tmp_path):
    """Spark on a local file system writes Hadoop's checksum `.<name>.crc` beside each data
    file; Hadoop deletes it with its file. Vacuum does too: the hidden sidecar is never a
    candidate of its own, counts neither as a file nor in the bytes, and is not left behind
    without its data file; the live files' sidecars stay."""
    table = tmp_path / "t"
    write_arrow(table, ids(3))
    write_arrow(table, ids(3, 10), mode="overwrite")
    snapshot = load_snapshot(table)
    removed = unquote(snapshot.tombstones.column("path").to_pylist()[0])
    live = unquote(snapshot.files.column("path").to_pylist()[0])
    for name in (removed, live):
        write(table / posixpath.dirname(name) / f".{posixpath.basename(name)}.crc", b"crc" * 5)
    age_files(table, now_ms() - 30 * DAY)
    plan, result = vacuum(table, now_ms() + 8 * DAY)  # past the remove's 7-day retention
    assert [c.path for c in plan.candidates] == [removed] and result.deleted == (removed,)
    assert result.num_deleted == 1 and result.bytes == plan.candidates[0].size
    left = data_files(table)
    assert f".{removed}.crc" not in left and removed not in left
    assert f".{live}.crc" in left and live in left


def test_unsupported_writer_feature_refuses_before_deleting(tmp_path):
    from delta_ops.errors import UnsupportedFeature
    from tests.support import log_builder as lb

    table = tmp_path / "t"
    lb.write_commit(
        table,
        0,
        [
            lb.commit_info(),
            lb.protocol(1, 7, writer_features=["redirectWriterOnly-preview"]),
            lb.metadata(),
            lb.add("a.parquet"),
        ],
    )
    write(table / "orphan.parquet", when_ms=now_ms() - 30 * DAY)
    before = tree(table)
    with pytest.raises(UnsupportedFeature, match="redirectWriterOnly-preview"):
        plan_vacuum(load_snapshot(table), now_ms(), retention_ms=0, force=True)
    assert cli.main(["vacuum", str(table), "--retention", "0h", "--force"]) == 1
    assert tree(table) == before


def test_vacuum_on_an_fsspec_memory_table(tmp_path):
    from delta_ops.storage import Storage

    url = f"memory://delta-ops-vacuum-{os.getpid()}-{tmp_path.name}/t"
    write_arrow(url, pa.concat_tables([ids(1, 0, p="a"), ids(1, 1, p="b")]), partition_by=["p"])
    storage = Storage.open(url)
    for rel in (
        "orphan.parquet",
        "p=a/orphan2.parquet",
        "p=a/_SUCCESS",
        "_tmp/x",
        "_change_data/c.parquet",
        "dir/sub/o3.bin",
    ):
        storage.write_atomic(storage.join(rel), b"o")
    live = {unquote(p) for p in load_snapshot(url).files.column("path").to_pylist()}
    time.sleep(0.01)
    plan = plan_vacuum(
        load_snapshot(url), now_ms() + 1000, retention_ms=0, force=True, in_flight_grace_ms=0
    )
    result = execute_vacuum(plan)
    assert set(result.deleted) == {
        "orphan.parquet",
        "p=a/orphan2.parquet",
        "_change_data/c.parquet",
        "dir/sub/o3.bin",
    }
    for rel in live | {"p=a/_SUCCESS", "_tmp/x"}:
        assert storage.exists(storage.join(rel)), rel
    assert len(result.commits) == 2 and storage.exists(
        storage.log_file(f"{result.commits[1]:020d}.json")
    )


def test_young_change_data_a_commit_names_gets_no_in_flight_grace(tmp_path):
    """A `cdc` action committed the first file, so no running write owns it: retention 0
    deletes it now, as Delta Spark's `RETAIN 0 HOURS` does. The second, which no commit names,
    may be a running write's and waits out the grace."""
    table = tmp_path / "t"
    write_arrow(table, ids(2, 0))
    named, unnamed = "_change_data/cdc-named.parquet", "_change_data/cdc-running.parquet"
    for rel in (named, unnamed):
        write(table / rel)
    txn = Transaction(load_snapshot(table), operation="DELETE")
    txn.add_action({"cdc": {"path": named, "partitionValues": {}, "size": 1, "dataChange": False}})
    txn.commit()
    plan, result = vacuum(table, retention_ms=0, force=True)
    assert set(result.deleted) == {named}
    assert plan.kept_in_flight == (unnamed,)
    assert (table / unnamed).exists()


# ============================================================================ 3. hidden rules
def test_hidden_names_are_never_vacuumed_change_data_and_index_are(tmp_path):
    table = tmp_path / "t"
    write_arrow(table, pa.concat_tables([ids(2, 0, p="1"), ids(2, 10, p="2")]), partition_by=["p"])
    hidden = [
        "_SUCCESS",
        ".part-x.crc",
        "_tmp/x",
        "p=1/_SUCCESS",
        "p=1/.x.crc",
        "_delta_log/not-a-log-file",
        "p=1/_tmp/y",
    ]
    vacuumed = [
        "_change_data/cdc-1.parquet",
        "_change_data/p=1/cdc-2.parquet",
        "_delta_index/idx.bin",
        "p=1/orphan.parquet",
        "p=3/orphan.parquet",
    ]
    for rel in hidden + vacuumed:
        write(table / rel)
    age_files(table, now_ms() - 30 * DAY)
    before = tree(table)
    rows = peer_view(table)
    plan, result = vacuum(table, retention_ms=0, force=True)
    assert set(result.deleted) == set(vacuumed)
    reasons = {c.path: c.reason for c in plan.candidates}
    assert (
        reasons["_change_data/cdc-1.parquet"]
        == reasons["_change_data/p=1/cdc-2.parquet"]
        == "change data"
    )
    assert reasons["p=1/orphan.parquet"] == "unreferenced"
    after = tree(table)
    for rel in hidden:
        assert after[rel] == before[rel], rel
    for rel in vacuumed:
        assert rel not in after
    # emptied directories go, deepest first; those with hidden files stay
    for gone in ("_change_data/p=1", "_change_data", "_delta_index", "p=3"):
        assert gone not in after
    for kept in ("_tmp", "p=1", "p=1/_tmp", "p=2"):
        assert after[kept][0] == "dir"
    assert result.num_vacuumed_directories == 4
    assert peer_view(table) == rows


def test_partition_directories_starting_with_underscore_are_vacuumed(tmp_path):
    table = tmp_path / "t"
    write_arrow(
        table, pa.concat_tables([ids(2, 0, _p="1"), ids(2, 10, _p="2")]), partition_by=["_p"]
    )
    write_arrow(table, ids(3, 100, _p="1"), mode="overwrite", partition_by=["_p"])
    removed = {unquote(p) for p in load_snapshot(table).tombstones.column("path").to_pylist()}
    assert {posixpath.dirname(p) for p in removed} == {"_p=1", "_p=2"}
    write(table / "_p=1" / "orphan.parquet")
    write(table / "_q=1" / "orphan.parquet")  # not a partition column: hidden
    age_files(table, now_ms() - 30 * DAY)
    live, _ = referenced(table)
    rows = peer_view(table)
    _, result = vacuum(table, retention_ms=0, force=True)
    assert set(result.deleted) == removed | {"_p=1/orphan.parquet"}
    assert not (table / "_p=2").exists()
    assert (table / "_q=1" / "orphan.parquet").exists()
    assert all((table / p).exists() for p in live)
    assert peer_view(table) == rows
    assert sorted(r["id"] for r in rows["duckdb_rows"]) == [100, 101, 102]


def test_empty_directories_are_removed_non_recursively(tmp_path):
    table = tmp_path / "t"
    write_arrow(table, ids(3))
    old = now_ms() - 30 * DAY
    (table / "empty").mkdir()
    (table / "nested" / "a" / "b").mkdir(parents=True)
    write(table / "withhidden" / ".keep", when_ms=old)
    write(table / "withhidden" / "old.parquet", when_ms=old)
    write(table / "withyoung" / "old.parquet", when_ms=old)
    write(table / "withyoung" / "sub" / "young.parquet")  # mtime now: inside the retention
    age_files(table / "_delta_log", old)
    for p in table.glob("part-*.parquet"):
        set_mtime(p, old)
    _, result = vacuum(table, retention_ms=HOUR, force=True)
    assert set(result.deleted) == {"withhidden/old.parquet", "withyoung/old.parquet"}
    after = tree(table)
    for gone in ("empty", "nested", "nested/a", "nested/a/b"):
        assert gone not in after
    assert after["withhidden"][0] == "dir" and "withhidden/.keep" in after
    assert "withyoung/sub/young.parquet" in after
    assert result.num_vacuumed_directories == 4


# ================================================================================== 4. safety
def test_symlinks_leading_out_are_never_followed_or_deleted(tmp_path):
    table = tmp_path / "t"
    write_arrow(table, ids(3))
    outside_file = write(tmp_path / "outside" / "target.parquet", b"precious")
    outside_dir = tmp_path / "outside_dir"
    write(outside_dir / "inner.parquet", b"precious too")
    write(outside_dir / "deep" / "inner2.parquet", b"and this")
    os.symlink(outside_file, table / "link_file.parquet")
    os.symlink(outside_dir, table / "link_dir")
    os.symlink(outside_dir, table / "p=1")
    old = now_ms() - 30 * DAY
    for root in (table, tmp_path / "outside", outside_dir):
        age_files(root, old)
    outside_before = tree(tmp_path / "outside") | {
        f"d/{k}": v for k, v in tree(outside_dir).items()
    }
    plan, _ = vacuum(table, retention_ms=0, force=True)
    assert not [c.path for c in plan.candidates if c.path.startswith(("link_", "p=1"))]
    for link in ("link_file.parquet", "link_dir", "p=1"):
        assert (table / link).is_symlink()
    assert (
        tree(tmp_path / "outside") | {f"d/{k}": v for k, v in tree(outside_dir).items()}
        == outside_before
    )


def _tombstones_outside(table: Path, tmp_path: Path, old: int) -> list[Path]:
    """Remove actions whose paths lead outside the root: an absolute URI, `..`, encoded `..`."""
    targets = [
        write(tmp_path / "abs.parquet", b"a", old),
        write(tmp_path / "escape.parquet", b"b", old),
        write(tmp_path / "escape2.parquet", b"c", old),
    ]
    txn = Transaction(load_snapshot(table), operation="DELETE")
    for path in ("file://" + str(targets[0]), "../escape.parquet", "%2E%2E/escape2.parquet"):
        txn.add_action(
            {"remove": {"path": path, "deletionTimestamp": old, "dataChange": True, "size": 1}}
        )
    txn.commit()
    return targets


@pytest.mark.parametrize("mode", ["full", "lite"])
def test_tombstones_outside_the_root_are_never_deleted(tmp_path, mode):
    table = tmp_path / "t"
    write_arrow(table, ids(3))
    old = now_ms() - 30 * DAY
    targets = _tombstones_outside(table, tmp_path, old)
    age_files(table, old)
    plan, _ = vacuum(table, retention_ms=0, force=True, mode=mode)
    assert all(not c.path.startswith("..") and not c.path.startswith("/") for c in plan.candidates)
    for t in targets:
        assert t.exists()


def test_absolute_paths_inside_the_root_are_resolved(tmp_path):
    """An add (and a remove) written as an absolute file:// URI inside the table, with an
    encoded space: the live one is protected, the expired tombstone is vacuumed."""
    table = tmp_path / "t"
    write_arrow(table, ids(1))
    pq.write_table(ids(1, 7), table / "abs inside.parquet")
    pq.write_table(ids(1, 8), table / "gone.parquet")
    txn = Transaction(load_snapshot(table), operation="WRITE")
    txn.add_action(
        {
            "add": {
                "path": f"file://{table}/abs%20inside.parquet",
                "partitionValues": {},
                "size": (table / "abs inside.parquet").stat().st_size,
                "modificationTime": 1,
                "dataChange": True,
                "stats": json.dumps({"numRecords": 1}),
            }
        }
    )
    txn.add_action(
        {
            "remove": {
                "path": f"file://{table}/gone.parquet",
                "deletionTimestamp": 1,
                "dataChange": True,
            }
        }
    )
    txn.commit()
    age_files(table, now_ms() - 30 * DAY)
    plan, result = vacuum(table, retention_ms=0, force=True)
    assert result.deleted == ("gone.parquet",)
    assert {c.path: c.reason for c in plan.candidates} == {"gone.parquet": "expired tombstone"}
    assert (table / "abs inside.parquet").exists()
    assert sorted(r["id"] for r in deltalake_rows(table)) == [0, 7]


def test_lite_never_follows_a_symlinked_directory_out_of_the_table(tmp_path):
    table = tmp_path / "t"
    write_arrow(table, ids(3))
    outside_dir = tmp_path / "outside_dir"
    target = write(outside_dir / "inner.bin", b"precious")
    os.symlink(outside_dir, table / "link_dir")
    old = now_ms() - 30 * DAY
    set_mtime(target, old)
    txn = Transaction(load_snapshot(table), operation="DELETE")
    txn.add_action(
        {
            "remove": {
                "path": "link_dir/inner.bin",
                "deletionTimestamp": old,
                "dataChange": True,
                "size": 8,
            }
        }
    )
    txn.commit()
    age_files(table, old)
    vacuum(table, retention_ms=0, force=True, mode="lite")
    assert target.exists(), "LITE vacuum deleted a file outside the table root"


def test_retention_shorter_than_the_table_property_is_refused_without_force(tmp_path, capsys):
    table = tmp_path / "t"
    write_arrow(
        table, ids(3), configuration={"delta.deletedFileRetentionDuration": "interval 2 days"}
    )
    write(table / "orphan.parquet", when_ms=now_ms() - 30 * DAY)
    before = tree(table)
    snap = load_snapshot(table)
    with pytest.raises(RetentionTooShort) as info:
        plan_vacuum(snap, now_ms(), retention_ms=DAY)
    message = str(info.value)
    assert "a retention of 1 day is shorter" in message and "(2 days)" in message, message
    assert "force" in message.lower()
    assert cli.main(["vacuum", str(table), "--json", "--retention", "24h"]) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and "delta-ops: error:" in captured.err
    assert "retention" in captured.err
    # a dry run never fails for it: it shows what --force would do, and says it needs --force
    assert cli.main(["vacuum", str(table), "--json", "--retention", "1 day", "--dry-run"]) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert out["deleted"] == ["orphan.parquet"] and out["retention_ms"] == DAY
    assert len(out["warnings"]) == 1 and "--force" in out["warnings"][0]
    assert captured.err.startswith("delta-ops: warning:") and "--force" in captured.err
    assert tree(table) == before  # nothing written, no VACUUM commits
    # at least the property's retention needs no force; forcing allows less
    plan_vacuum(snap, now_ms(), retention_ms=3 * DAY)
    assert plan_vacuum(snap, now_ms(), retention_ms=0, force=True).candidates


def test_negative_retention_is_refused_even_when_forced(tmp_path):
    table = tmp_path / "t"
    write_arrow(table, ids(3))
    write(table / "orphan.parquet", when_ms=now_ms() - 30 * DAY)
    before = tree(table)
    with pytest.raises(RetentionTooShort, match="negative"):
        plan_vacuum(load_snapshot(table), now_ms(), retention_ms=-1, force=True)
    assert tree(table) == before


def test_a_longer_user_retention_is_honoured(tmp_path):
    table = tmp_path / "t"
    write_arrow(table, ids(2, 0))
    write_arrow(table, ids(2, 10))
    write_arrow(table, ids(2, 20))
    now = now_ms()
    snap = load_snapshot(table)
    a, b, c = sorted(
        snap.files.to_pylist(), key=lambda r: json.loads(r["stats"])["minValues"]["id"]
    )
    txn = Transaction(snap, operation="DELETE")
    for row, removed_at in ((a, now - 20 * DAY), (b, now - 40 * DAY)):
        txn.add_action(
            {
                "remove": {
                    "path": row["path"],
                    "deletionTimestamp": removed_at,
                    "dataChange": True,
                    "size": row["size"],
                }
            }
        )
    txn.commit()
    age_files(table, now - 45 * DAY)
    write(table / "orphan-20d.parquet", when_ms=now - 20 * DAY)
    write(table / "orphan-40d.parquet", when_ms=now - 40 * DAY)
    plan, result = vacuum(table, now, retention_ms=30 * DAY)  # longer than the 7-day default
    assert plan.retention_ms == 30 * DAY and plan.delete_before_ms == now - 30 * DAY
    assert set(result.deleted) == {unquote(b["path"]), "orphan-40d.parquet"}
    assert (table / unquote(a["path"])).exists() and (table / "orphan-20d.parquet").exists()
    assert (table / unquote(c["path"])).exists()
    assert sorted(r["id"] for r in duckdb_rows(table)) == [20, 21]


# ================================================================================= 5. commits
def test_vacuum_start_and_end_commits(tmp_path):
    table = tmp_path / "t"
    write_arrow(table, ids(3))
    old = now_ms() - 30 * DAY
    write(table / "o1.parquet", b"a" * 11, old)
    write(table / "d" / "o2.parquet", b"b" * 22, old)
    age_files(table / "_delta_log", old)
    _, result = vacuum(table, retention_ms=0, force=True)
    assert result.commits == (1, 2)
    assert log_commits(table) == [f"{v:020d}.json" for v in range(3)]
    start, end = commit_actions(table, 1), commit_actions(table, 2)
    assert [list(a) for a in start] == [["commitInfo"]] and [list(a) for a in end] == [
        ["commitInfo"]
    ]
    s, e = start[0]["commitInfo"], end[0]["commitInfo"]
    assert s["operation"] == "VACUUM START" and e["operation"] == "VACUUM END"
    assert s["operationMetrics"] == {"numFilesToDelete": "2", "sizeOfDataToDelete": "33"}
    assert s["operationParameters"] == {
        "retentionCheckEnabled": "true",
        "defaultRetentionMillis": str(WEEK),
        "specifiedRetentionMillis": "0",
    }
    assert e["operationParameters"] == {"status": "COMPLETED"}
    assert e["operationMetrics"] == {"numDeletedFiles": "2", "numVacuumedDirectories": "1"}
    assert (
        s["engineInfo"].startswith("delta-ops/") and s["readVersion"] == 0 and e["readVersion"] == 1
    )
    assert result.bytes == 33 and result.num_deleted == 2 and result.num_vacuumed_directories == 1
    info = json.loads((table / "_delta_log" / "_last_vacuum_info").read_text())
    assert info == {"latestCommitVersionOutsideOfRetentionWindow": 0}


def test_failed_deletion_commits_vacuum_end_failed_and_reraises(tmp_path, monkeypatch):
    import delta_ops.storage.tree as tree_module

    table = tmp_path / "t"
    write_arrow(table, ids(3))
    old = now_ms() - 30 * DAY
    write(table / "o1.parquet", b"a", old)
    write(table / "stuck.parquet", b"b", old)
    age_files(table / "_delta_log", old)
    real_unlink = os.unlink

    def failing_unlink(path, *args, **kwargs):
        if str(path).endswith("stuck.parquet"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_unlink(path, *args, **kwargs)

    monkeypatch.setattr(tree_module.os, "unlink", failing_unlink)
    plan = plan_vacuum(load_snapshot(table), now_ms(), retention_ms=0, force=True)
    with pytest.raises(PermissionError):
        execute_vacuum(plan)
    monkeypatch.undo()
    assert log_commits(table) == [f"{v:020d}.json" for v in range(3)]
    start = commit_actions(table, 1)[0]["commitInfo"]
    end = commit_actions(table, 2)[0]["commitInfo"]
    assert (
        start["operation"] == "VACUUM START"
        and start["operationMetrics"]["numFilesToDelete"] == "2"
    )
    assert end["operation"] == "VACUUM END" and end["operationParameters"] == {"status": "FAILED"}
    assert "operationMetrics" not in end
    assert (table / "stuck.parquet").exists()
    assert not (table / "_delta_log" / "_last_vacuum_info").exists()
    assert sorted(r["id"] for r in duckdb_rows(table)) == [0, 1, 2]


def test_nothing_to_delete_writes_no_commits(tmp_path):
    table = tmp_path / "t"
    write_arrow(table, ids(3))
    write(table / "young.parquet")  # an orphan inside the retention
    commits = log_commits(table)
    plan, result = vacuum(table, retention_ms=HOUR, force=True)
    assert plan.candidates == () and result.commits == () and result.num_deleted == 0
    assert log_commits(table) == commits
    assert (table / "young.parquet").exists()


def test_dry_run_writes_nothing_at_all(tmp_path, capsys):
    table = tmp_path / "t"
    write_arrow(table, ids(3), partition_by=[])
    write_arrow(table, ids(2, 50), mode="overwrite")
    old = now_ms() - 30 * DAY
    write(table / "orphan.parquet", b"o" * 7, old)
    (table / "empty").mkdir()
    age_files(table, old)
    tombstone = unquote(load_snapshot(table).tombstones.column("path").to_pylist()[0])
    before = tree(table)
    assert (
        cli.main(["vacuum", str(table), "--retention", "0h", "--force", "--dry-run", "--json"]) == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert tree(table) == before  # no file, directory, mtime or _last_vacuum_info changed
    assert (
        out["dry_run"] is True
        and out["commits"] == []
        and out["mode"] == "full"
        and out["retention_ms"] == 0
    )
    assert (
        sorted(out["deleted"]) == sorted(["orphan.parquet", tombstone]) and out["num_deleted"] == 2
    )
    by_path = {f["path"]: f for f in out["files"]}
    assert (
        by_path["orphan.parquet"]["size"] == 7
        and by_path["orphan.parquet"]["reason"] == "unreferenced"
    )
    assert by_path["orphan.parquet"]["age_ms"] >= 30 * DAY - 60_000
    assert by_path[tombstone]["reason"] == "expired tombstone"
    assert out["bytes"] == sum(f["size"] for f in out["files"])
    assert out["reasons"]["unreferenced"] == {"files": 1, "bytes": 7}
    assert "empty" in out["directories"]
    # the human dry run, too
    assert cli.main(["vacuum", str(table), "--retention", "0h", "--force", "--dry-run"]) == 0
    text = capsys.readouterr().out
    assert "orphan.parquet" in text and "would delete 2 files" in text
    assert tree(table) == before


def test_cli_json_result_fields(tmp_path, capsys):
    table = tmp_path / "t"
    write_arrow(table, ids(3))
    old = now_ms() - 30 * DAY
    write(table / "orphan.parquet", b"o" * 5, old)
    age_files(table / "_delta_log", old)
    assert cli.main(["vacuum", str(table), "--retention", "0h", "--force", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["mode"] == "full" and out["retention_ms"] == 0 and out["dry_run"] is False
    assert out["deleted"] == ["orphan.parquet"] and out["num_deleted"] == 1 and out["bytes"] == 5
    assert out["commits"] == [1, 2] and log_commits(table)[-1] == f"{2:020d}.json"
    assert not (table / "orphan.parquet").exists()
    # a second run has nothing to do and commits nothing
    assert (
        cli.main(["vacuum", str(table), "--retention", "0h", "--force", "--json", "--mode", "full"])
        == 0
    )
    again = json.loads(capsys.readouterr().out)
    assert again["deleted"] == [] and again["num_deleted"] == 0 and again["commits"] == []
    assert len(log_commits(table)) == 3


# ========================================================================= 6. re-read safety
def test_file_committed_between_plan_and_execute_is_kept(tmp_path):
    table = tmp_path / "t"
    write_arrow(table, ids(3))
    old = now_ms() - 30 * DAY
    pq.write_table(ids(4, 500), table / "late.parquet")
    set_mtime(table / "late.parquet", old)
    write(table / "orphan.parquet", b"z", old)
    age_files(table / "_delta_log", old)
    plan = plan_vacuum(load_snapshot(table), now_ms(), retention_ms=0, force=True)
    assert {c.path for c in plan.candidates} == {"late.parquet", "orphan.parquet"}
    # another writer commits the "orphan" as a data file after the plan was made
    target = resolve_write_target(Storage.open(table), ids(0).schema)
    commit_data_files(table, [DataFile("late.parquet", {})], target)
    result = execute_vacuum(plan)
    assert result.kept_after_recheck == ("late.parquet",)
    assert result.deleted == ("orphan.parquet",)
    assert (table / "late.parquet").exists() and not (table / "orphan.parquet").exists()
    start = commit_actions(table, result.commits[0])[0]["commitInfo"]
    assert start["operationMetrics"]["numFilesToDelete"] == "2"
    end = commit_actions(table, result.commits[1])[0]["commitInfo"]
    assert end["operationMetrics"]["numDeletedFiles"] == "1"
    expected = [0, 1, 2, 500, 501, 502, 503]
    assert sorted(r["id"] for r in deltalake_rows(table)) == expected
    assert sorted(r["id"] for r in duckdb_rows(table)) == expected


# ==================================================================================== 7. LITE
def _lite_table(tmp_path: Path) -> tuple[Path, list[str]]:
    table = tmp_path / "t"
    write_arrow(table, ids(2, 0))  # v0
    write_arrow(table, ids(2, 10))  # v1
    first = sorted(unquote(p) for p in load_snapshot(table).files.column("path").to_pylist())
    write_arrow(table, ids(2, 20), mode="overwrite")  # v2 removes both
    return table, first


def test_lite_vacuums_removes_since_the_last_vacuum_and_never_sees_orphans(tmp_path):
    table, removed = _lite_table(tmp_path)
    old = now_ms() - 30 * DAY
    write(table / "untracked-orphan.parquet", b"u", old)
    for p in removed:
        set_mtime(table / p, old)
    now = now_ms() + 60_000
    plan, result = vacuum(table, now, retention_ms=0, force=True, mode="lite")
    assert {c.path for c in plan.candidates} == set(removed)
    assert {c.reason for c in plan.candidates} == {"expired tombstone"}
    assert set(result.deleted) == set(removed) and result.commits == (3, 4)
    assert (table / "untracked-orphan.parquet").exists()
    info = json.loads((table / "_delta_log" / "_last_vacuum_info").read_text())
    assert info == {"latestCommitVersionOutsideOfRetentionWindow": 2}
    assert commit_actions(table, 3)[0]["commitInfo"]["operation"] == "VACUUM START"

    # next LITE run starts after version 2: nothing new was removed
    plan2, result2 = vacuum(table, now_ms() + 120_000, retention_ms=0, force=True, mode="lite")
    assert plan2.candidates == () and result2.commits == ()
    assert (
        json.loads((table / "_delta_log" / "_last_vacuum_info").read_text())[
            "latestCommitVersionOutsideOfRetentionWindow"
        ]
        == 4
    )

    # a new overwrite removes the v2 file: only that one is found
    [v2_file] = [unquote(p) for p in load_snapshot(table).files.column("path").to_pylist()]
    write_arrow(table, ids(1, 99), mode="overwrite")
    plan3, result3 = vacuum(table, now_ms() + 180_000, retention_ms=0, force=True, mode="lite")
    assert {c.path for c in plan3.candidates} == {v2_file}
    assert result3.deleted == (v2_file,)
    assert (table / "untracked-orphan.parquet").exists()
    assert [r["id"] for r in duckdb_rows(table)] == [99]


def test_lite_respects_retention_on_deletion_timestamps(tmp_path):
    table, removed = _lite_table(tmp_path)
    for p in removed:
        set_mtime(table / p, now_ms() - 30 * DAY)
    age_files(table / "_delta_log", now_ms() - 30 * DAY)  # the commits are all old enough ...
    # ... but their removes' deletionTimestamps are from just now: inside a 1-hour retention
    plan, result = vacuum(table, now_ms() + HOUR // 2, retention_ms=HOUR, force=True, mode="lite")
    assert plan.latest_commit_outside_retention == 2
    assert plan.candidates == () and result.commits == ()
    assert all((table / p).exists() for p in removed)


def _cleaned_up_table(tmp_path: Path) -> Path:
    """A table whose commits before version 3 were removed by log cleanup."""
    table, _ = _lite_table(tmp_path)
    write_arrow(table, ids(1, 30))  # v3
    checkpoint(table)
    base = now_ms() - 10 * DAY
    for p in (table / "_delta_log").iterdir():
        version = int(p.name[:20]) if p.name[:20].isdigit() else 3
        set_mtime(p, base + version * HOUR)
    plan = plan_cleanup(load_snapshot(table), now_ms(), retention_ms=0)
    assert plan.boundary_checkpoint_version == 3
    execute_cleanup(plan)
    assert min(log_commits(table)) == f"{3:020d}.json"
    return table


@pytest.mark.parametrize("last_vacuum", [None, 1, 2, 3])
def test_lite_refuses_when_history_was_cleaned_up(tmp_path, last_vacuum):
    table = _cleaned_up_table(tmp_path)
    info_path = table / "_delta_log" / "_last_vacuum_info"
    if last_vacuum is not None:
        info_path.write_text(
            json.dumps({"latestCommitVersionOutsideOfRetentionWindow": last_vacuum})
        )
    before = tree(table)
    snap = load_snapshot(table)
    if last_vacuum is None or last_vacuum < 3:  # Spark: L == earliest - 1 refuses too
        with pytest.raises(VacuumLiteRefused, match="FULL"):
            plan_vacuum(snap, now_ms() + 60_000, retention_ms=0, force=True, mode="lite")
        assert tree(table) == before
        # FULL still works and finds the expired files LITE could not see
        _, result = vacuum(table, now_ms() + 60_000, retention_ms=0, force=True, mode="full")
        assert len(result.deleted) == 2
    else:
        plan = plan_vacuum(snap, now_ms() + 60_000, retention_ms=0, force=True, mode="lite")
        assert plan.candidates == ()  # the removes of version 2 are beyond reach


# ============================================================================ 8. concurrency
_BARRIER_S = 120  # a process that died before the start fails the test instead of hanging it


def _append_loop(path: str, n: int, barrier) -> None:
    barrier.wait(_BARRIER_S)
    for i in range(n):
        write_arrow(path, ids(2, 1000 + 2 * i))


def _run_concurrently(
    tmp_path: Path, retention_ms: int, orphan_age_ms: int
) -> tuple[Path, int, int]:
    table = tmp_path / "t"
    write_arrow(table, ids(2))
    write(table / "old-orphan.parquet", b"o", now_ms() - orphan_age_ms)
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(2)
    proc = ctx.Process(target=_append_loop, args=(str(table), 15, barrier))
    proc.start()
    barrier.wait(_BARRIER_S)
    runs = 0
    while proc.is_alive() or runs < 3:
        # no retry: listing _delta_log while the appender's temp files come and go must work
        vacuum(table, now_ms(), retention_ms=retention_ms, force=True)
        runs += 1
    proc.join(timeout=120)
    return table, proc.exitcode, runs


def _assert_nothing_lost(table: Path, exitcode: int) -> None:
    assert exitcode == 0, "the appending process failed"
    adds = set()
    for name in log_commits(table):
        for action in commit_actions(table, int(name[:20])):
            if "add" in action:
                adds.add(unquote(action["add"]["path"]))
    assert len(adds) == 16
    missing = sorted(p for p in adds if not (table / p).exists())
    assert not missing, f"files referenced by commits were deleted: {missing}"
    assert {unquote(p) for p in load_snapshot(table).files.column("path").to_pylist()} == adds
    expected = sorted([0, 1, *range(1000, 1030)])
    assert sorted(r["id"] for r in deltalake_rows(table)) == expected
    assert sorted(r["id"] for r in duckdb_rows(table)) == expected


def test_concurrent_appends_and_vacuums_with_a_retention(tmp_path):
    """Appends land while FULL vacuums (retention 1 hour, forced) run back to back: every
    commit lands, VACUUM START/END interleave with them, only the old orphan goes."""
    table, exitcode, _ = _run_concurrently(tmp_path, HOUR, 2 * HOUR)
    _assert_nothing_lost(table, exitcode)
    assert not (table / "old-orphan.parquet").exists()
    ops = [
        commit_actions(table, int(n[:20]))[0]["commitInfo"]["operation"] for n in log_commits(table)
    ]
    assert ops.count("WRITE") == 15 and ops.count("VACUUM START") == ops.count("VACUUM END") == 1


def test_concurrent_appends_and_vacuums_with_retention_zero(tmp_path):
    """The issue's acceptance test: a process appends in a loop while FULL vacuums with
    retention 0 (forced) run; afterwards no file referenced by any commit is missing."""
    table, exitcode, runs = _run_concurrently(tmp_path, 0, HOUR)
    assert runs >= 3
    _assert_nothing_lost(table, exitcode)


def test_young_untracked_files_are_kept_as_possibly_in_flight(tmp_path):
    """With retention 0, a file no commit knows that was written moments ago may belong to a
    write that has not committed yet: kept (and reported) unless the grace is set to 0."""
    table = tmp_path / "t"
    write_arrow(table, ids(2))
    write(table / "fresh-orphan.parquet", b"o", now_ms())
    write(table / "old-orphan.parquet", b"o", now_ms() - DAY)
    plan = plan_vacuum(load_snapshot(table), now_ms(), retention_ms=0, force=True)
    assert [c.path for c in plan.candidates] == ["old-orphan.parquet"]
    assert plan.kept_in_flight == ("fresh-orphan.parquet",)
    execute_vacuum(plan)
    assert (table / "fresh-orphan.parquet").exists() and not (table / "old-orphan.parquet").exists()
    spark_like = plan_vacuum(
        load_snapshot(table), now_ms() + 10, retention_ms=0, force=True, in_flight_grace_ms=0
    )
    assert [c.path for c in spark_like.candidates] == ["fresh-orphan.parquet"]
