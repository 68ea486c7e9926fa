"""Acceptance tests of the commit layer (issue 4): optimistic transactions over put-if-absent.

Everything is checked on disk: which `N.json` files exist afterwards, their exact bytes and
`commitInfo`, what a losing transaction left behind (nothing), and what both peers read.
"""

from __future__ import annotations

import itertools
import json
import multiprocessing
import os
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fsspec.implementations.memory import MemoryFileSystem

from delta_ops import __version__
from delta_ops.errors import ConcurrentModification, UnsupportedFeature
from delta_ops.storage import Storage
from delta_ops.table import transaction as transaction_module
from delta_ops.table.snapshot import load_snapshot
from delta_ops.table.transaction import CommitRefused, Transaction
from delta_ops.table.write_target import resolve_write_target
from delta_ops.table.writer import DataFile, commit_data_files, write_arrow
from tests.support import add_action, deltalake_files, deltalake_rows, duckdb_rows
from tests.support import log_builder as lb

HOUR_MS = 3_600_000


# ---------------------------------------------------------------------------------- helpers
def commit_path(table: Path, version: int) -> Path:
    return table / "_delta_log" / f"{version:020d}.json"


def commit_lines(table: Path, version: int) -> list[dict]:
    return [
        json.loads(line)
        for line in commit_path(table, version).read_text().splitlines()
        if line.strip()
    ]


def commit_info(table: Path, version: int) -> dict:
    [info] = [a["commitInfo"] for a in commit_lines(table, version) if "commitInfo" in a]
    return info


def log_names(table: Path) -> list[str]:
    return sorted(p.name for p in (table / "_delta_log").iterdir())


def commits_and_checksums(versions: range) -> list[str]:
    """The log of those versions: every commit followed by its checksum (`N.crc`)."""
    return sorted(f"{v:020d}.{kind}" for v in versions for kind in ("json", "crc"))


def ids(n: int, start: int = 0) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64())})


def data_file(table: Path, name: str, n: int, start: int) -> DataFile:
    """A real parquet file inside the table, not committed yet."""
    pq.write_table(ids(n, start), table / name)
    return DataFile(name, {})


def remove_action(path: str) -> dict:
    return {"remove": {"path": path, "deletionTimestamp": 1_700_000_000_000, "dataChange": True}}


def base_table(tmp_path: Path, **kwargs) -> Path:
    table = tmp_path / "t"
    write_arrow(table, ids(3), **kwargs)
    return table


def live_ids(table: Path) -> list[int]:
    return sorted(r["id"] for r in deltalake_rows(table))


# ================================================================== 1. put-if-absent + retry
def test_second_transaction_retries_at_next_version_and_records_read_version(tmp_path):
    table = base_table(tmp_path)
    snap = load_snapshot(table)
    assert snap.version == 0
    first = Transaction(snap, operation="WRITE", parameters={"mode": "Append"})
    first.add_action(add_action(table, "a.parquet", 2, 100))
    second = Transaction(snap, operation="WRITE", parameters={"mode": "Append"})
    second.add_action(add_action(table, "b.parquet", 2, 200))

    r1 = first.commit()
    assert (r1.version, r1.attempts) == (1, 1)
    before = commit_path(table, 1).read_bytes()
    r2 = second.commit()
    assert (r2.version, r2.attempts) == (2, 2)
    # the winner's commit is untouched, the loser landed on top of it
    assert commit_path(table, 1).read_bytes() == before
    assert [a["add"]["path"] for a in commit_lines(table, 1) if "add" in a] == ["a.parquet"]
    assert [a["add"]["path"] for a in commit_lines(table, 2) if "add" in a] == ["b.parquet"]
    assert commit_info(table, 1)["readVersion"] == 0
    assert commit_info(table, 2)["readVersion"] == 0
    assert commit_info(table, 2)["isBlindAppend"] is True
    assert not commit_path(table, 3).exists()
    # no temp files are left next to the commits
    assert log_names(table) == commits_and_checksums(range(3))

    final = load_snapshot(table)
    assert final.version == 2
    paths = final.files.column("path").to_pylist()
    assert len(paths) == 3 and {"a.parquet", "b.parquet"} <= set(paths)
    assert deltalake_files(table) == (2, sorted(paths))
    expected = [0, 1, 2, 100, 101, 200, 201]
    assert live_ids(table) == expected
    assert sorted(r["id"] for r in duckdb_rows(table)) == expected


def test_never_overwrites_an_existing_commit(tmp_path):
    table = base_table(tmp_path)
    snap = load_snapshot(table)
    # another writer already took versions 1 and 2 (written by hand, bytes we control)
    foreign = [
        b'{"commitInfo":{"timestamp":1,"operation":"FOREIGN 1"}}\n',
        b'{"commitInfo":{"timestamp":2,"operation":"FOREIGN 2"}}\n',
    ]
    for version, body in enumerate(foreign, start=1):
        commit_path(table, version).write_bytes(body)
    txn = Transaction(snap, operation="WRITE")
    txn.add_action(add_action(table, "a.parquet", 1, 7))
    result = txn.commit()
    assert (result.version, result.attempts) == (3, 2)  # one retry jumps past both winners
    for version, body in enumerate(foreign, start=1):
        assert commit_path(table, version).read_bytes() == body
    assert commit_info(table, 3)["operation"] == "WRITE"

    # put-if-absent itself: an existing name is reported and left byte for byte
    storage = Storage.open(table)
    original = commit_path(table, 0).read_bytes()
    assert storage.put_if_absent(str(commit_path(table, 0)), b"{}\n") is False
    assert commit_path(table, 0).read_bytes() == original
    assert not [n for n in log_names(table) if n.endswith(".tmp")]


def test_concurrent_table_creation_loses_cleanly(tmp_path):
    table = tmp_path / "new"
    storage = Storage.open(table)

    def creator(table_id: str) -> Transaction:
        txn = Transaction(None, storage=storage, operation="CREATE TABLE")
        txn.add_actions([lb.protocol(1, 2), lb.metadata(table_id=table_id)])
        return txn

    first, second = creator("first"), creator("second")
    assert first.commit().version == 0
    body = commit_path(table, 0).read_bytes()
    with pytest.raises(ConcurrentModification, match="created concurrently"):
        second.commit()
    assert commit_path(table, 0).read_bytes() == body
    assert log_names(table) == commits_and_checksums(range(1))
    assert load_snapshot(table).metadata.id == "first"


def _foreign_commits(table: Path, versions: tuple[int, ...]) -> None:
    """Commits another writer took (bytes we control)."""
    for version in versions:
        commit_path(table, version).write_text(
            json.dumps({"commitInfo": {"timestamp": version, "operation": "OTHER"}}) + "\n"
        )


def test_bounded_retries_give_up_without_writing(tmp_path):
    table = base_table(tmp_path)
    snap = load_snapshot(table)
    _foreign_commits(table, (1, 2, 3))
    txn = Transaction(snap, operation="WRITE", max_attempts=1)
    txn.add_action(add_action(table, "a.parquet", 1, 7))
    with pytest.raises(ConcurrentModification, match="1 attempts") as info:
        txn.commit()
    assert info.value.retryable
    assert not commit_path(table, 4).exists()
    assert load_snapshot(table).version == 3


def test_a_retry_jumps_past_every_winner_at_once(tmp_path):
    table = base_table(tmp_path)
    snap = load_snapshot(table)
    _foreign_commits(table, (1, 2, 3))
    txn = Transaction(snap, operation="WRITE")
    txn.add_action(add_action(table, "a.parquet", 1, 7))
    result = txn.commit()
    assert (result.version, result.attempts) == (4, 2)
    assert "a.parquet" in load_snapshot(table).files.column("path").to_pylist()


# ======================================================================== 2. conflicts
def test_winner_changed_metadata_conflicts(tmp_path):
    table = base_table(tmp_path)
    snap = load_snapshot(table)
    winner = Transaction(snap, operation="SET TBLPROPERTIES")
    meta = snap.metadata.to_action()
    meta["configuration"] = {
        **meta["configuration"],
        "delta.logRetentionDuration": "interval 60 days",
    }
    winner.add_action({"metaData": meta})
    loser = Transaction(snap, operation="WRITE")
    loser.add_action(add_action(table, "a.parquet", 1, 7))
    assert winner.commit().version == 1
    with pytest.raises(ConcurrentModification, match=r"version 1\b.*metadata"):
        loser.commit()
    assert not commit_path(table, 2).exists()
    assert load_snapshot(table).properties.log_retention_ms == 60 * 24 * HOUR_MS


def test_winner_changed_protocol_conflicts(tmp_path):
    table = base_table(tmp_path)
    snap = load_snapshot(table)
    winner = Transaction(snap, operation="UPGRADE PROTOCOL")
    winner.add_action({"protocol": snap.protocol.with_features("domainMetadata").to_action()})
    loser = Transaction(snap, operation="WRITE")
    loser.add_action(add_action(table, "a.parquet", 1, 7))
    winner.commit()
    with pytest.raises(ConcurrentModification, match="protocol"):
        loser.commit()
    assert not commit_path(table, 2).exists()


def test_winner_removed_a_file_the_loser_removes(tmp_path):
    table = base_table(tmp_path)
    write_arrow(table, ids(2, 10))
    snap = load_snapshot(table)
    victim = min(snap.files.column("path").to_pylist())
    winner = Transaction(snap, operation="DELETE")
    winner.add_action(remove_action(victim))
    loser = Transaction(snap, operation="DELETE")
    loser.add_action(remove_action(victim))
    assert winner.commit().version == 2
    with pytest.raises(ConcurrentModification) as info:
        loser.commit()
    message = str(info.value)
    assert "version 2" in message and "00000000000000000002.json" in message and victim in message
    assert not commit_path(table, 3).exists()


def test_winner_removed_a_file_the_loser_read(tmp_path):
    table = base_table(tmp_path)
    write_arrow(table, ids(2, 10))
    snap = load_snapshot(table)
    victim = min(snap.files.column("path").to_pylist())
    winner = Transaction(snap, operation="DELETE")
    winner.add_action(remove_action(victim))
    loser = Transaction(snap, operation="OPTIMIZE")
    loser.read_files([victim])
    loser.add_action(add_action(table, "compacted.parquet", 1, 1))
    winner.commit()
    with pytest.raises(ConcurrentModification, match="version 2"):
        loser.commit()
    assert not commit_path(table, 3).exists()


def test_disjoint_removes_do_not_conflict(tmp_path):
    table = base_table(tmp_path)
    write_arrow(table, ids(2, 10))
    snap = load_snapshot(table)
    a, b = sorted(snap.files.column("path").to_pylist())
    t1 = Transaction(snap, operation="DELETE")
    t1.add_action(remove_action(a))
    t2 = Transaction(snap, operation="DELETE")
    t2.add_action(remove_action(b))
    assert t1.commit().version == 2
    assert t2.commit().version == 3
    assert load_snapshot(table).num_files == 0


def test_txn_app_id_clash_conflicts_other_app_ids_do_not(tmp_path):
    table = base_table(tmp_path)
    snap = load_snapshot(table)
    winner = Transaction(snap, operation="STREAMING UPDATE")
    winner.add_action({"txn": {"appId": "app-1", "version": 5, "lastUpdated": 1}})
    other = Transaction(snap, operation="STREAMING UPDATE")
    other.add_action({"txn": {"appId": "app-2", "version": 9, "lastUpdated": 1}})
    clash = Transaction(snap, operation="STREAMING UPDATE")
    clash.add_action({"txn": {"appId": "app-1", "version": 6, "lastUpdated": 1}})
    assert winner.commit().version == 1
    assert other.commit().version == 2
    with pytest.raises(ConcurrentModification, match="app-1"):
        clash.commit()
    assert not commit_path(table, 3).exists()
    final = load_snapshot(table)
    assert {k: v.version for k, v in final.txns.items()} == {"app-1": 5, "app-2": 9}


def test_same_domain_conflicts_other_domains_do_not(tmp_path):
    table = tmp_path / "t"
    lb.write_commit(
        table,
        0,
        [lb.commit_info(), lb.protocol(1, 7, writer_features=["domainMetadata"]), lb.metadata()],
    )
    snap = load_snapshot(table)

    def domain(name: str, value: int) -> dict:
        return {
            "domainMetadata": {
                "domain": name,
                "configuration": json.dumps({"v": value}),
                "removed": False,
            }
        }

    winner, other, clash = (Transaction(snap, operation="SET DOMAIN") for _ in range(3))
    winner.add_action(domain("d1", 1))
    other.add_action(domain("d2", 2))
    clash.add_action(domain("d1", 3))
    assert winner.commit().version == 1
    assert other.commit().version == 2
    with pytest.raises(ConcurrentModification, match="d1"):
        clash.commit()
    assert not commit_path(table, 3).exists()
    final = load_snapshot(table)
    assert {k: json.loads(v.configuration)["v"] for k, v in final.domains.items()} == {
        "d1": 1,
        "d2": 2,
    }


def test_empty_commits_never_conflict_with_appends(tmp_path):
    table = base_table(tmp_path)
    snap = load_snapshot(table)
    vacuum_start = Transaction(snap, operation="VACUUM START")
    append = Transaction(snap, operation="WRITE")
    append.add_action(add_action(table, "a.parquet", 1, 7))
    assert append.commit().version == 1
    assert vacuum_start.commit().version == 2
    assert commit_lines(table, 2) == [{"commitInfo": commit_info(table, 2)}]


# ======================================================================= 3. row tracking
def test_row_tracking_appends_from_the_same_snapshot_get_disjoint_row_ids(tmp_path):
    table = base_table(tmp_path, configuration={"delta.enableRowTracking": "true"})
    snap = load_snapshot(table)
    assert snap.protocol.supports("rowTracking")
    assert snap.row_id_high_water_mark == 2
    t1 = Transaction(snap, operation="WRITE")
    t1.add_action(add_action(table, "a.parquet", 5, 100))
    t2 = Transaction(snap, operation="WRITE")
    t2.add_action(add_action(table, "b.parquet", 7, 200))
    r1 = t1.commit()
    r2 = t2.commit()
    assert (r1.version, r2.version) == (1, 2)
    assert r1.row_id_high_water_mark == 2 + 5
    assert r2.row_id_high_water_mark == 2 + 5 + 7

    ranges = []
    for row in load_snapshot(table).files.to_pylist():
        n = json.loads(row["stats"])["numRecords"]
        ranges.append(
            (
                row["baseRowId"],
                row["baseRowId"] + n - 1,
                row["path"],
                row["defaultRowCommitVersion"],
            )
        )
    ranges.sort()
    for (_, hi, _, _), (lo, _, _, _) in itertools.pairwise(ranges):
        assert lo > hi, f"row id ranges overlap: {ranges}"
    by_path = {r[2]: r for r in ranges}
    assert by_path["a.parquet"][3] == 1 and by_path["b.parquet"][3] == 2
    final = load_snapshot(table)
    assert final.row_id_high_water_mark == max(r[1] for r in ranges) == 3 + 5 + 7 - 1
    # the committed domain carries the mark of the loser's retry, not its first attempt
    [domain] = [a["domainMetadata"] for a in commit_lines(table, 2) if "domainMetadata" in a]
    assert domain["domain"] == "delta.rowTracking"
    assert json.loads(domain["configuration"])["rowIdHighWaterMark"] == 14
    assert live_ids(table) == sorted([0, 1, 2, *range(100, 105), *range(200, 207)])


# ======================================================================== 4. commitInfo
def test_commit_info_fields(tmp_path):
    table = base_table(tmp_path)
    snap = load_snapshot(table)
    txn = Transaction(
        snap,
        operation="VACUUM START",
        parameters={
            "retentionCheckEnabled": True,
            "defaultRetentionMillis": 604800000,
            "note": "text",
            "cols": ["a"],
        },
    )
    txn.metrics = {"numFilesToDelete": 3, "sizeOfDataToDelete": 1024}
    txn.commit()
    lines = commit_lines(table, 1)
    assert list(lines[0]) == ["commitInfo"]
    info = lines[0]["commitInfo"]
    assert info["operation"] == "VACUUM START"
    assert info["engineInfo"] == f"delta-ops/{__version__}"
    assert re.fullmatch(r"delta-ops/\S+", info["engineInfo"])
    assert info["operationParameters"] == {
        "retentionCheckEnabled": "true",
        "defaultRetentionMillis": "604800000",
        "note": "text",
        "cols": '["a"]',
    }
    assert info["operationMetrics"] == {"numFilesToDelete": "3", "sizeOfDataToDelete": "1024"}
    assert all(isinstance(v, str) for v in info["operationParameters"].values())
    assert isinstance(info["timestamp"], int) and info["timestamp"] > 1_700_000_000_000
    assert info["readVersion"] == 0
    assert re.fullmatch(r"[0-9a-f-]{36}", info["txnId"])
    # the writer's create commit: no readVersion, CREATE operation, partitionBy as a JSON string
    create = commit_info(table, 0)
    assert create["operation"] == "CREATE TABLE AS SELECT" and "readVersion" not in create
    assert create["operationParameters"]["partitionBy"] == "[]"
    assert create["engineInfo"] == f"delta-ops/{__version__}"


# ==================================================================== 5. refusals
def test_unsupported_writer_feature_refuses_and_writes_nothing(tmp_path):
    table = tmp_path / "ict"
    lb.write_commit(
        table,
        0,
        [
            lb.commit_info(),
            lb.protocol(
                1, 7, writer_features=["redirectWriterOnly-preview", "appendOnly", "invariants"]
            ),
            lb.metadata(configuration={"delta.enableInCommitTimestamps": "true"}),
            lb.add("a.parquet"),
        ],
    )
    snap = load_snapshot(table)  # readable: the feature is writer-only
    before = {p.name: p.read_bytes() for p in (table / "_delta_log").iterdir()}
    txn = Transaction(snap, operation="WRITE")
    txn.add_action(lb.add("b.parquet"))
    with pytest.raises(UnsupportedFeature) as info:
        txn.commit()
    assert "redirectWriterOnly-preview" in info.value.features
    after = {p.name: p.read_bytes() for p in (table / "_delta_log").iterdir()}
    assert after == before


def test_unknown_writer_feature_refuses(tmp_path):
    table = tmp_path / "unknown"
    lb.write_commit(
        table,
        0,
        [lb.commit_info(), lb.protocol(1, 7, writer_features=["someFutureFeature"]), lb.metadata()],
    )
    txn = Transaction(load_snapshot(table), operation="WRITE")
    with pytest.raises(UnsupportedFeature, match="someFutureFeature"):
        txn.commit()
    assert log_names(table) == ["00000000000000000000.json"]


# ============================================================ 6. other filesystems
def test_memory_filesystem_put_if_absent(tmp_path):
    url = f"memory://delta-ops-txn-{os.getpid()}-{tmp_path.name}/t"
    write_arrow(url, ids(2))
    snap = load_snapshot(url)
    t1 = Transaction(snap, operation="WRITE")
    t2 = Transaction(snap, operation="WRITE")
    assert t1.commit().version == 1
    assert t2.commit().version == 2
    storage = Storage.open(url)
    body = storage.read_bytes(storage.log_file("00000000000000000001.json"))
    assert storage.put_if_absent(storage.log_file("00000000000000000001.json"), b"{}\n") is False
    assert storage.read_bytes(storage.log_file("00000000000000000001.json")) == body
    assert (
        json.loads(storage.read_bytes(storage.log_file("00000000000000000002.json")))["commitInfo"][
            "readVersion"
        ]
        == 0
    )


class NoConditionalCreate(MemoryFileSystem):
    """An object store without conditional writes: exclusive-create mode is not implemented."""

    protocol = ("nocond",)

    def _open(self, path, mode="rb", **kwargs):
        if "x" in mode:
            raise NotImplementedError("conditional create is not supported by this store")
        return super()._open(path, mode, **kwargs)


def test_store_without_conditional_create_refuses_unless_single_writer(tmp_path):
    fs = NoConditionalCreate()
    root = f"/delta-ops-nocond-{os.getpid()}-{tmp_path.name}"
    storage = Storage(fs, root, f"nocond://{root}", local=False)
    first = lb.write_commit(
        tmp_path / "seed", 0, [lb.commit_info(), lb.protocol(1, 2), lb.metadata()]
    )
    fs.pipe_file(storage.log_file("00000000000000000000.json"), first.read_bytes())
    snap = load_snapshot(storage)
    with pytest.raises(CommitRefused, match="single_writer"):
        Transaction(snap, operation="WRITE").commit()
    assert not fs.exists(storage.log_file("00000000000000000001.json"))
    result = Transaction(snap, operation="WRITE", single_writer=True).commit()
    assert result.version == 1
    # declared single writer still never overwrites: a taken version moves it on
    body = fs.cat_file(storage.log_file("00000000000000000001.json"))
    assert Transaction(snap, operation="WRITE", single_writer=True).commit().version == 2
    assert fs.cat_file(storage.log_file("00000000000000000001.json")) == body


# ======================================================= 7. concurrent writers across processes
def _append_many(path: str, worker: int, n: int, barrier) -> None:
    barrier.wait()
    for i in range(n):
        write_arrow(path, ids(1, 1000 * worker + i))


def test_concurrent_processes_never_lose_a_commit(tmp_path):
    table = base_table(tmp_path)
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(2)
    procs = [ctx.Process(target=_append_many, args=(str(table), w, 6, barrier)) for w in (1, 2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert [p.exitcode for p in procs] == [0, 0]
    snap = load_snapshot(table)
    assert snap.version == 12
    assert log_names(table) == commits_and_checksums(range(13))
    for version in range(1, 13):
        adds = [a for a in commit_lines(table, version) if "add" in a]
        assert len(adds) == 1
    expected = sorted([0, 1, 2, *range(1000, 1006), *range(2000, 2006)])
    assert live_ids(table) == expected
    assert sorted(r["id"] for r in duckdb_rows(table)) == expected


def test_log_listing_survives_concurrent_temp_files(tmp_path):
    """Writers' put-if-absent temp files come and go in `_delta_log` all the time; a reader
    listing the log at that moment must still load the table."""
    import threading
    import time
    import uuid

    table = base_table(tmp_path)
    write_arrow(table, ids(2, 10))
    stop = threading.Event()

    def temp_files_come_and_go() -> None:  # what Storage.put_if_absent does in another process
        log = table / "_delta_log"
        while not stop.is_set():
            tmp = log / f".00000000000000000002.json.{uuid.uuid4().hex}.tmp"
            tmp.write_bytes(b"{}")
            tmp.unlink()

    thread = threading.Thread(target=temp_files_come_and_go)
    thread.start()
    failures, loads = [], 0
    try:
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            try:
                assert load_snapshot(table).version == 1
            except Exception as exc:  # noqa: BLE001 - collected and reported below
                failures.append(repr(exc))
            loads += 1
    finally:
        stop.set()
        thread.join()
    assert not failures, f"{len(failures)} of {loads} loads failed, e.g. {failures[0]}"


def test_commit_data_files_uses_the_same_conflict_rules(tmp_path):
    """The writer's commit is a Transaction too: an overwrite racing an append loses cleanly."""
    table = base_table(tmp_path)
    # a concurrent overwrite removes every live file after our writer read the table
    snap = load_snapshot(table)
    [live] = snap.files.column("path").to_pylist()
    overwrite = Transaction(snap, operation="WRITE")
    overwrite.add_action(remove_action(live))
    overwrite.add_action(add_action(table, "new.parquet", 1, 50))
    overwrite.commit()
    # an append from the latest snapshot lands normally after it
    target = resolve_write_target(Storage.open(table), ids(0).schema)
    result = commit_data_files(table, [data_file(table, "appended.parquet", 2, 60)], target)
    assert result.version == 2
    assert live_ids(table) == [50, 60, 61]


def test_a_writer_committing_during_every_back_off_does_not_starve_a_retry(tmp_path, monkeypatch):
    # Another engine commits without pause: a retry that looked for the newest version before
    # backing off aimed at a version taken during the sleep, every time (deltalake appenders
    # starved our appends and VACUUM START for seconds). It catches up after the back-off.
    table = base_table(tmp_path)
    snap = load_snapshot(table)
    _foreign_commits(table, (1,))
    taken = [1]

    def another_writer_commits(_seconds: float) -> None:
        taken.append(taken[-1] + 1)
        _foreign_commits(table, (taken[-1],))

    monkeypatch.setattr(transaction_module.time, "sleep", another_writer_commits)
    txn = Transaction(snap, operation="WRITE", max_attempts=3)
    txn.add_action(add_action(table, "a.parquet", 1, 7))
    result = txn.commit()
    assert (result.version, result.attempts) == (3, 2)
    assert taken == [1, 2]
    assert "a.parquet" in load_snapshot(table).files.column("path").to_pylist()
