"""Paths in the log that lead out of the table: no operation deletes outside the root.

Each form of path (``..``, percent-encoded ``..`` and separators, an encoded leading ``/``, an
absolute path, a ``file://`` URI, a URI of another store, a symlinked directory) names a
sentinel file planted outside the table. Vacuum (FULL and LITE, retention 0 forced), purge,
compaction, repair and restore then run; the sentinel must survive byte for byte, and the
operation either ignores the path or refuses with one line (exit 1: the log is unsafe, not
the user's input), writing nothing. Absolute paths (and a local symlink) are the protocol's
way to name a file outside the table, so they are read, never deleted: a rewrite of one is
written inside the table. On S3 (moto), vacuum ignores ``..`` and another bucket's URI, and
the storage layer's deletes skip or refuse a path outside the root.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from delta_ops import cli
from delta_ops.errors import UnsafePath
from delta_ops.ops.vacuum import execute_vacuum, plan_vacuum
from delta_ops.protocol.deletion_vectors import inline_descriptor, z85_encode
from delta_ops.storage import Storage
from delta_ops.table.scan import read_table
from delta_ops.table.snapshot import load_snapshot
from delta_ops.table.transaction import Transaction
from delta_ops.table.writer import write_arrow
from loopback.servers import CLIENTS, StoreServer, serve_s3
from tests.support import file_digests

DAY = 24 * 3_600_000


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True)
class Form:
    """One way of writing a path that leaves the table: the log path for a test's tmp dir, the
    sentinel it names (relative to tmp), and whether the protocol lets it be read."""

    name: str
    log_path: Callable[[Path], str]
    sentinel: str
    readable: bool


FORMS = [
    Form("dotdot", lambda tmp: "../outside.parquet", "outside.parquet", False),
    Form("encoded_dotdot", lambda tmp: "%2E%2E/outside.parquet", "outside.parquet", False),
    Form(
        "encoded_separators",
        lambda tmp: "a%2F..%2F..%2Foutside.parquet",
        "outside.parquet",
        False,
    ),
    Form(
        "encoded_leading_slash",
        lambda tmp: quote(str(tmp / "outside.parquet"), safe=""),
        "outside.parquet",
        False,
    ),
    Form("absolute", lambda tmp: str(tmp / "outside.parquet"), "outside.parquet", True),
    Form("file_uri", lambda tmp: f"file://{tmp}/outside.parquet", "outside.parquet", True),
    # stripped of its scheme, it is a path relative to the working directory (tmp here)
    Form(
        "other_store",
        lambda tmp: "s3://other-bucket/x.parquet",
        "s3:/other-bucket/x.parquet",
        False,
    ),
    Form(
        "symlink_dir", lambda tmp: "link_dir/outside.parquet", "outside_dir/outside.parquet", True
    ),
]


def ids(n: int, start: int = 0) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64())})


def outside(tmp: Path) -> dict[str, str]:
    """Digests of every file under tmp but outside the table (its symlinks not followed)."""
    return {k: v for k, v in file_digests(tmp).items() if not k.startswith("t/")}


@dataclass
class Case:
    table: Path
    log_path: str
    sentinel: Path
    before: dict[str, str]
    form: Form


@pytest.fixture(params=FORMS, ids=[f.name for f in FORMS])
def case(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Case:
    """A table (deletion vectors on) whose version 1 adds the form's path, with an inline
    deletion vector (so purge picks it), and whose version 2 removes it (a tombstone)."""
    form: Form = request.param
    monkeypatch.chdir(tmp_path)
    table = tmp_path / "t"
    write_arrow(table, ids(3), configuration={"delta.enableDeletionVectors": "true"})
    sentinel = tmp_path / form.sentinel
    sentinel.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(ids(3, 100), sentinel)
    if form.name == "symlink_dir":
        os.symlink(sentinel.parent, table / "link_dir")
    old = now_ms() - 30 * DAY
    os.utime(sentinel, ns=(old * 1_000_000, old * 1_000_000))
    log_path = form.log_path(tmp_path)
    add = {
        "path": log_path,
        "partitionValues": {},
        "size": sentinel.stat().st_size,
        "modificationTime": old,
        "dataChange": True,
        "stats": json.dumps({"numRecords": 3}),
        "deletionVector": inline_descriptor([0]).to_dict(),
    }
    txn = Transaction(load_snapshot(table), operation="WRITE")
    txn.add_action({"add": add})
    txn.commit()
    remove = {"path": log_path, "deletionTimestamp": old, "dataChange": True, "size": add["size"]}
    remove["deletionVector"] = add["deletionVector"]
    txn = Transaction(load_snapshot(table), operation="DELETE")
    txn.add_action({"remove": remove})
    txn.commit()
    return Case(table, log_path, sentinel, outside(tmp_path), form)


def readd(case: Case) -> None:
    """Make the form's file live again (version 3), for the operations that read live files."""
    snapshot = load_snapshot(case.table, version=1)
    body = next(f for f in snapshot.files.to_pylist() if f["path"] == case.log_path)
    add = {k: v for k, v in body.items() if v is not None and k != "version"}
    add["partitionValues"] = dict(add.get("partitionValues") or {})
    add.pop("tags", None)
    txn = Transaction(load_snapshot(case.table), operation="WRITE")
    txn.add_action({"add": add})
    txn.commit()


def versions(table: Path) -> list[str]:
    return sorted(p.name for p in (table / "_delta_log").glob("*.json"))


def assert_sentinel_intact(case: Case) -> None:
    assert case.sentinel.exists(), f"{case.form.name}: the file outside the table was deleted"
    assert outside(case.table.parent) == case.before, f"{case.form.name}: outside changed"


def assert_refused_in_one_line(code: int, err: str, case: Case, log_before: list[str]) -> None:
    lines = err.strip().splitlines()
    assert code == 1, err
    assert len(lines) == 1 and lines[0].startswith("delta-ops: error: "), err
    assert repr(case.log_path) in lines[0], err
    assert versions(case.table) == log_before, "a refused operation committed"


@pytest.mark.parametrize("mode", ["full", "lite"])
def test_vacuum_ignores_the_path_and_deletes_nothing_outside(case: Case, mode: str) -> None:
    for path in (case.table / "_delta_log").iterdir():  # old enough for LITE to scan them
        os.utime(path, ns=((now_ms() - 20 * DAY) * 1_000_000,) * 2)
    plan = plan_vacuum(load_snapshot(case.table), now_ms(), retention_ms=0, force=True, mode=mode)
    paths = [c.path for c in plan.candidates]
    assert not [p for p in paths if p.startswith(("/", "..")) or "link_dir" in p], paths
    execute_vacuum(plan)
    assert_sentinel_intact(case)
    if case.form.name == "symlink_dir":
        assert (case.table / "link_dir").is_symlink(), "vacuum deleted the link itself"


def run_judged(case: Case, args: list[str], capsys: pytest.CaptureFixture[str]) -> bool:
    """Run the CLI on the case's table: the sentinel outside is intact, and a path the protocol
    does not let be read is refused in one line with nothing committed. True when it ran (exit
    0), False when it was refused."""
    log_before = versions(case.table)
    capsys.readouterr()
    code = cli.main([args[0], str(case.table), *args[1:], "--json"])
    err = capsys.readouterr().err
    assert_sentinel_intact(case)
    if not case.form.readable:
        assert_refused_in_one_line(code, err, case, log_before)
        return False
    assert code == 0, err
    return True


@pytest.mark.parametrize("op", ["compact", "purge"])
def test_rewrites_read_only_what_the_protocol_allows(
    case: Case, op: str, capsys: pytest.CaptureFixture[str]
) -> None:
    readd(case)
    if not run_judged(case, [op], capsys):
        return
    snapshot = load_snapshot(case.table)
    live = snapshot.files.column("path").to_pylist()
    assert case.log_path not in live, f"{op} did not rewrite the file outside the table"
    assert all(not p.startswith(("/", "file:", "link_dir")) for p in live), live
    assert sorted(read_table(snapshot).column("id").to_pylist()) == [0, 1, 2, 101, 102]


def test_repair_reads_only_what_the_protocol_allows(
    case: Case, capsys: pytest.CaptureFixture[str]
) -> None:
    readd(case)
    log_before = versions(case.table)
    if run_judged(case, ["repair"], capsys):
        assert versions(case.table) == log_before, "repair found the file outside missing"


def test_restore_reads_only_what_the_protocol_allows(
    case: Case, capsys: pytest.CaptureFixture[str]
) -> None:
    if not run_judged(case, ["restore", "--version", "1"], capsys):
        return
    assert case.log_path in load_snapshot(case.table).files.column("path").to_pylist()


# ------------------------------------------------------------------------ the storage layer
def test_local_deletes_outside_the_root_are_skipped_or_refused(tmp_path: Path) -> None:
    table = tmp_path / "t"
    write_arrow(table, ids(1))
    sentinel = tmp_path / "outside.parquet"
    sentinel.write_bytes(b"precious")
    storage = Storage.open(table)
    assert storage.delete_many(["../outside.parquet", "a/../../outside.parquet"]) == []
    assert storage.delete_many([str(sentinel)]) == []
    with pytest.raises(UnsafePath, match="outside.parquet"):
        storage.delete([str(sentinel)])
    with pytest.raises(UnsafePath, match=r"'\.\.'"):
        storage.remove_tree("..")
    assert storage.remove_empty_dirs([".."]) == 0
    assert sentinel.read_bytes() == b"precious"


def test_a_local_symlink_is_never_deleted_nor_anything_through_it(tmp_path: Path) -> None:
    table = tmp_path / "t"
    write_arrow(table, ids(1))
    (tmp_path / "elsewhere" / "empty").mkdir(parents=True)
    (tmp_path / "elsewhere" / "f.parquet").write_bytes(b"precious")
    os.symlink(tmp_path / "elsewhere", table / "link_dir")
    os.symlink(tmp_path / "elsewhere" / "f.parquet", table / "link.parquet")
    storage = Storage.open(table)
    assert storage.delete_many(["link_dir/f.parquet", "link.parquet"]) == []
    assert storage.remove_empty_dirs(["link_dir/empty", "link_dir"]) == 0
    assert (table / "link.parquet").is_symlink() and (table / "link_dir").is_symlink()
    assert (tmp_path / "elsewhere" / "f.parquet").read_bytes() == b"precious"
    assert (tmp_path / "elsewhere" / "empty").is_dir()


# ------------------------------------------------------------------------------------- S3
@pytest.fixture(scope="module")
def server() -> Iterator[StoreServer]:
    with serve_s3() as running:
        yield running


@pytest.fixture(params=CLIENTS)
def s3(server: StoreServer, request: pytest.FixtureRequest) -> StoreServer:
    return server.through(request.param)


@pytest.mark.parametrize("mode", ["full", "lite"])
def test_s3_vacuum_never_deletes_above_the_table_or_in_another_bucket(
    s3: StoreServer, mode: str
) -> None:
    url = s3.url(f"escapes-{mode}")
    write_arrow(url, ids(1), storage_options=s3.options)
    storage = Storage.open(url, s3.options)
    fs = s3.fsspec()
    above = storage.root.rsplit("/", 1)[0] + f"/outside-{mode}.parquet"
    if not fs.exists("other-bucket"):
        fs.mkdir("other-bucket")
    other = f"other-bucket/x-{s3.namespace.strip('/')}-{mode}.parquet"
    fs.pipe({above: b"precious", other: b"precious too"})
    old = now_ms() - 30 * DAY
    txn = Transaction(load_snapshot(url, storage_options=s3.options), operation="DELETE")
    for path in (f"../outside-{mode}.parquet", f"%2E%2E/outside-{mode}.parquet", f"s3://{other}"):
        txn.add_action({"remove": {"path": path, "deletionTimestamp": old, "dataChange": True}})
    txn.commit()
    plan = plan_vacuum(
        load_snapshot(url, storage_options=s3.options),
        now_ms() + 1,
        retention_ms=0,
        force=True,
        in_flight_grace_ms=0,
        mode=mode,
    )
    assert all(not c.path.startswith(("..", "/", "s3:")) for c in plan.candidates), plan.candidates
    execute_vacuum(plan)
    assert fs.cat(above) == b"precious" and fs.cat(other) == b"precious too"
    assert storage.delete_many([f"../outside-{mode}.parquet"]) == []
    with pytest.raises(UnsafePath):
        storage.delete([other])
    assert fs.cat(above) == b"precious" and fs.cat(other) == b"precious too"


# ------------------------------------------------------------------ a deletion vector's path
def _dv_escaping(tmp_path: Path) -> tuple[Path, Path, dict]:
    """A table whose live file has a `'u'` deletion vector with the prefix ``..``: its file
    would be the root's sibling, where a sentinel is planted."""
    table = tmp_path / "t"
    write_arrow(table, ids(3), configuration={"delta.enableDeletionVectors": "true"})
    dv_id = uuid.uuid4()
    sentinel = tmp_path / f"deletion_vector_{dv_id}.bin"
    sentinel.write_bytes(b"precious")
    old = now_ms() - 30 * DAY
    os.utime(sentinel, ns=(old * 1_000_000, old * 1_000_000))
    descriptor = {
        "storageType": "u",
        "pathOrInlineDv": "../" + z85_encode(dv_id.bytes),
        "offset": 1,
        "sizeInBytes": 8,
        "cardinality": 1,
    }
    snapshot = load_snapshot(table)
    body = snapshot.files.to_pylist()[0]
    add = {k: v for k, v in body.items() if v is not None and k != "version"}
    add["partitionValues"] = dict(add.get("partitionValues") or {})
    add.pop("tags", None)
    txn = Transaction(snapshot, operation="DELETE")
    txn.add_action({"remove": {"path": add["path"], "deletionTimestamp": old, "dataChange": True}})
    txn.add_action({"add": {**add, "deletionVector": descriptor}})
    txn.commit()
    return table, sentinel, descriptor


@pytest.mark.parametrize("mode", ["full", "lite"])
def test_vacuum_ignores_a_deletion_vector_prefix_that_leaves_the_root(
    tmp_path: Path, mode: str
) -> None:
    table, sentinel, descriptor = _dv_escaping(tmp_path)
    snapshot = load_snapshot(table)
    body = snapshot.files.to_pylist()[0]
    txn = Transaction(snapshot, operation="DELETE")  # the file and its vector: a tombstone
    old = now_ms() - 30 * DAY
    remove = {"path": body["path"], "deletionTimestamp": old, "dataChange": True}
    txn.add_action({"remove": {**remove, "deletionVector": descriptor}})
    txn.commit()
    for path in (table / "_delta_log").iterdir():
        os.utime(path, ns=((now_ms() - 20 * DAY) * 1_000_000,) * 2)
    plan = plan_vacuum(load_snapshot(table), now_ms(), retention_ms=0, force=True, mode=mode)
    paths = [c.path for c in plan.candidates]
    assert not [p for p in paths if p.startswith("..")], paths
    execute_vacuum(plan)
    assert sentinel.read_bytes() == b"precious"


def test_reading_a_deletion_vector_prefix_that_leaves_the_root_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table, sentinel, _ = _dv_escaping(tmp_path)
    log_before = versions(table)
    capsys.readouterr()
    code = cli.main(["purge", str(table)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(err) == 1 and "leaves the table root" in err[0], err
    assert versions(table) == log_before and sentinel.read_bytes() == b"precious"


def test_inspect_counts_nothing_reclaimable_outside_the_table(
    case: Case, capsys: pytest.CaptureFixture[str]
) -> None:
    """A tombstone outside the table is no file vacuum would reclaim: inspect (which looks at
    expired tombstones' files) neither fails on it nor counts it."""
    capsys.readouterr()
    code = cli.main(["inspect", str(case.table), "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert '"reclaimable_files": 0' in out, out
    assert_sentinel_intact(case)
