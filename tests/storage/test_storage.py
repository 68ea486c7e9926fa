"""Storage: local, file:// and memory:// tables read the same; put-if-absent never overwrites."""

from __future__ import annotations

import os
import threading

import fsspec
import pyarrow as pa
import pytest

from delta_ops.errors import UnsafePath, file_being_read
from delta_ops.storage import Storage, local_backend
from delta_ops.table.snapshot import load_snapshot
from tests.support import TABLES, check_listing_from_each_version


def test_file_url_and_memory_filesystem_read_like_local(tmp_path):
    name = "delta-spark/v2-checkpoint-parquet"
    local = load_snapshot(TABLES / name)
    via_url = load_snapshot(f"file://{TABLES / name}")
    mem = fsspec.filesystem("memory")
    src = TABLES / name
    for path in src.rglob("*"):
        if path.is_file():
            mem.pipe(f"/t/{path.relative_to(src)}", path.read_bytes())
    in_memory = load_snapshot("memory://t")
    for snap in (via_url, in_memory):
        assert snap.version == local.version
        assert sorted(snap.files.column("path").to_pylist()) == sorted(
            local.files.column("path").to_pylist()
        )
    mem.rm("/t", recursive=True)


@pytest.mark.parametrize("url", ["local", "memory"])
def test_put_if_absent_never_overwrites(tmp_path, url):
    storage = Storage.open(str(tmp_path) if url == "local" else "memory://pia")
    target = storage.log_file("00000000000000000000.json")
    assert storage.put_if_absent(target, b"first")
    assert not storage.put_if_absent(target, b"second")
    assert storage.read_bytes(target) == b"first"


def test_a_commit_we_win_drops_a_hadoop_checksum_left_under_its_name(tmp_path):
    """Delta Spark's local writes keep `.N.json.crc` beside `N.json`; a writer that lost the
    version can leave its checksum under our commit's name, which fails every Delta Spark read
    of it. Our winning commit drops it; a commit we lose leaves the winner's checksum alone."""
    storage = Storage.open(str(tmp_path))
    log = tmp_path / "_delta_log"
    log.mkdir()
    stale = log / ".00000000000000000003.json.crc"
    stale.write_bytes(b"crc\x00\x00\x00\x02\x00stale!!!")
    target = storage.log_file("00000000000000000003.json")
    assert storage.put_if_absent(target, b"ours")
    assert not stale.exists()
    stale.write_bytes(b"the winner's checksum")
    assert not storage.put_if_absent(target, b"lost")
    assert stale.exists()


def test_put_if_absent_has_one_winner_under_contention(tmp_path):
    storage = Storage.open(tmp_path)
    target = storage.log_file("00000000000000000001.json")
    wins = []

    def attempt(i):
        if storage.put_if_absent(target, f"writer {i}".encode()):
            wins.append(i)

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1
    assert storage.read_bytes(target) == f"writer {wins[0]}".encode()
    assert [p.name for p in (tmp_path / "_delta_log").iterdir()] == ["00000000000000000001.json"]


def test_paths_outside_the_root_are_refused(tmp_path):
    storage = Storage.open(tmp_path / "table")
    assert storage.relative_inside_root("a/b%20c.parquet") == "a/b c.parquet"
    for bad in ("../other/x.parquet", "/etc/passwd", "a/../../x"):
        with pytest.raises(UnsafePath):
            storage.relative_inside_root(bad)


def test_the_backend_is_chosen_once_by_the_client_that_serves_the_table(tmp_path):
    """One backend class per client (`delta_ops.storage.backend`): a local path and a plain
    file:// URL are the local disk's, memory:// and a wrapper of the local filesystem fsspec's
    (its writes must go through fsspec), and `client` names the one chosen."""
    from fsspec.implementations.dirfs import DirFileSystem

    from delta_ops.storage.fsspec_backend import FsspecBackend
    from delta_ops.storage.local_backend import LocalBackend

    dirfs = DirFileSystem(path=str(tmp_path), fs=fsspec.filesystem("file"))
    cases = [
        (Storage.open(str(tmp_path)), LocalBackend, "local"),
        (Storage.open(f"file://{tmp_path}"), LocalBackend, "local"),
        (Storage.open("memory://backend-choice"), FsspecBackend, "fsspec"),
        (Storage(dirfs, "/t", "dir://t"), FsspecBackend, "fsspec"),
    ]
    for storage, backend, client in cases:
        assert type(storage.backend) is backend, storage.url
        assert storage.client == client == storage.backend.name


def test_unknown_filesystems_are_not_trusted_with_commits(tmp_path):
    """A filesystem not known to refuse "xb" on an existing file could let two writers
    overwrite each other's commits: the transaction refuses unless a single writer is declared."""
    import pyarrow as pa
    from fsspec.implementations.dirfs import DirFileSystem

    from delta_ops.table.transaction import CommitRefused, Transaction
    from delta_ops.table.writer import write_arrow

    write_arrow(tmp_path / "t", pa.table({"id": [1]}))
    dirfs = DirFileSystem(path=str(tmp_path), fs=fsspec.filesystem("file"))
    storage = Storage(dirfs, "/t", "dir://t")
    assert not storage.supports_conditional_create
    snapshot = load_snapshot(storage)
    txn = Transaction(snapshot, operation="WRITE")
    with pytest.raises(CommitRefused, match="single_writer"):
        txn.commit()
    assert not (tmp_path / "t" / "_delta_log" / "00000000000000000001.json").exists()
    assert (
        Transaction(load_snapshot(storage), operation="WRITE", single_writer=True).commit().version
        == 1
    )


def test_move_new_stamps_the_staging_time_and_never_overwrites(tmp_path):
    import os
    import time

    from delta_ops.storage import Storage

    storage = Storage.open(tmp_path)
    staged = tmp_path / "_delta_ops_staging" / "w" / "part-0.parquet"
    staged.parent.mkdir(parents=True)
    staged.write_bytes(b"data")
    hour_ago = time.time() - 3600
    os.utime(staged, (hour_ago, hour_ago))
    assert storage.move_new(str(staged), "p=1/part-0.parquet")
    moved = tmp_path / "p=1" / "part-0.parquet"
    assert not staged.exists() and moved.read_bytes() == b"data"
    assert time.time() - moved.stat().st_mtime < 60  # the grace counts from staging

    again = tmp_path / "_delta_ops_staging" / "w" / "other.parquet"
    again.write_bytes(b"other")
    assert not storage.move_new(str(again), "p=1/part-0.parquet")
    assert moved.read_bytes() == b"data" and again.exists()


@pytest.mark.parametrize("url", ["memory://unique-names/t", "LOCAL"])
def test_a_unique_name_on_a_store_that_writes_in_place_is_not_streamed(tmp_path, url):
    """memory:// and local paths write a file in place, visible while written: a data file
    with a unique name still goes through the whole-file create there, so a writer that
    fails leaves nothing and its own error comes back."""
    storage = Storage.open(str(tmp_path / "t") if url == "LOCAL" else url)
    path = storage.join("part-00000-unique.c000.snappy.parquet")

    class WriterFailed(RuntimeError):
        pass

    def fail_midway(sink):  # type: ignore[no-untyped-def]
        sink.write(b"x" * 10)
        raise WriterFailed("the rows could not be read")

    with pytest.raises(WriterFailed):
        storage.create_new(path, fail_midway, unique_name=True)
    assert storage.stat(path) is None
    assert storage.create_new(path, lambda sink: sink.write(b"abc"), unique_name=True) == (True, 3)
    assert storage.read_bytes(path) == b"abc"


def test_a_local_tree_listing_that_fails_raises_instead_of_leaving_a_directory_out(tmp_path):
    # os.walk skips a directory it cannot list unless told otherwise: vacuum then judged a
    # running write's staging folder by the old files it saw, and deleted them.
    from tests.support.faults import FaultPlan, InjectedIOError, local_faults

    for name in ("a/old.parquet", "b/young.parquet"):
        (tmp_path / "_delta_ops_staging" / "w" / name).parent.mkdir(parents=True)
        (tmp_path / "_delta_ops_staging" / "w" / name).write_bytes(b"x")
    storage = Storage.open(str(tmp_path))
    assert [e.name for e in storage.list_tree("_delta_ops_staging")] == [
        "w/a/old.parquet",
        "w/b/young.parquet",
    ]
    assert storage.list_tree("no-such-directory") == []
    counting = FaultPlan()
    with local_faults(counting):
        storage.list_tree("_delta_ops_staging")
    for k in range(1, len(counting.listings) + 1):
        for kind in ("raise", "partial"):
            with (
                local_faults(FaultPlan(fail_listing_on=k, listing_fault=kind)),
                pytest.raises(InjectedIOError),
            ):
                storage.list_tree("_delta_ops_staging")


def test_the_fault_harness_reaches_a_local_tree_removal(tmp_path):
    # `remove_tree` imports shutil on first use; the harness must still see (and fail) its
    # rmtree, or a crash sweep over the Spark writer's staging cleanup injects nothing there.
    from tests.support.faults import FaultPlan, InjectedCrash, local_faults

    storage = Storage.open(str(tmp_path))
    for name in ("a.parquet", "b.parquet"):
        (tmp_path / "staging" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "staging" / name).write_bytes(b"x")
    with local_faults(FaultPlan(crash_on=1)) as plan, pytest.raises(InjectedCrash):
        storage.remove_tree("staging")
    assert plan.writes[0][0] == "rmtree"
    assert sorted(p.name for p in (tmp_path / "staging").iterdir()) == ["a.parquet", "b.parquet"]
    storage.remove_tree("staging")
    assert not (tmp_path / "staging").exists()


def test_a_listing_from_a_version_holds_the_log_files_from_it_on(tmp_path):
    """A V2 checkpoint (sidecars in `_sidecars/`), `_last_checkpoint`, checksums and commits:
    listed from each version, exactly the version-named files at or after it."""
    from delta_ops.ops.checkpoint import checkpoint
    from delta_ops.table.writer import write_arrow

    url = str(tmp_path / "t")
    rows = pa.table({"id": pa.array([1, 2], pa.int64())})
    write_arrow(url, rows, configuration={"delta.checkpointPolicy": "v2"})
    write_arrow(url, rows.slice(1))
    checkpoint(url)
    write_arrow(url, rows)
    storage = Storage.open(url)
    assert {e.name for e in storage.list_log()} >= {"_last_checkpoint"}
    assert check_listing_from_each_version(storage) == 3


def test_read_many_reads_whole_files_whatever_size_it_is_told(tmp_path):
    """Local reads take the log's sizes as a hint, never as the truth: a file longer or shorter
    than its size says (or of no size told) comes whole, an empty one empty, and a missing one
    raises with the file named."""
    contents = {"a": b"x" * 100, "b": b"y" * 3000, "c": b"", "d": bytes(range(256)) * 5000}
    for name, content in contents.items():
        (tmp_path / name).write_bytes(content)
    storage = Storage.open(str(tmp_path))
    paths = [storage.join(name) for name in contents]
    expected = list(contents.values())
    assert storage.read_many(paths) == expected
    assert storage.read_many(paths, [100, 3000, 0, 1_280_000]) == expected
    assert storage.read_many(paths, [50, 5000, 7, None]) == expected
    assert storage.read_many(paths, [-1, 0, 1, 1]) == expected
    with pytest.raises(FileNotFoundError) as missing:
        storage.read_many([*paths, storage.join("gone")], [1, 1, 1, 1, 1])
    assert file_being_read(missing.value) == storage.join("gone")


def test_files_that_refuse_o_noatime_are_read_all_the_same(tmp_path, monkeypatch):
    """Files the process may not open without updating their access time (another user's:
    O_NOATIME is refused) are read the usual way, from then on without asking again."""
    if not getattr(os, "O_NOATIME", 0):
        pytest.skip("no O_NOATIME on this platform")
    (tmp_path / "a").write_bytes(b"abc")
    (tmp_path / "b").write_bytes(b"de")
    storage = Storage.open(str(tmp_path))
    real_open = os.open
    refused = []

    def open_(path, flags, *args, **kwargs):
        if flags & os.O_NOATIME:
            refused.append(path)
            raise PermissionError(1, "Operation not permitted", path)
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(local_backend, "_OPEN_FLAGS", os.O_RDONLY | os.O_NOATIME)
    monkeypatch.setattr(local_backend.os, "open", open_)
    paths = [storage.join("a"), storage.join("b")]
    assert storage.read_many(paths, [3, 2]) == [b"abc", b"de"]
    assert refused == [storage.join("a")]
