"""Every op on S3, Azure Blob and GCS, against real servers on loopback (issue 13).

Each store gets the same Delta Spark fixture (partitioned, deletion vectors, a checkpoint),
uploaded; the same sequence of CLI runs (inspect, checkpoint classic and multi-part, V2 with
sidecars, cleanup, vacuum lite and full, row-tracking enablement) goes against the store and a
local copy, and the results must agree: the same versions and decisions, the same live files,
and `deltalake`, through its own client for that store, reads the same rows from the store as
from the local copy. Purge and compaction rewrite on the store and read the same rows. Commits
racing from several processes must each land once.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from delta_ops import cli
from delta_ops.ops.checkpoint import checkpoint
from delta_ops.storage import Storage
from delta_ops.table.snapshot import load_snapshot
from delta_ops.table.writer import write_arrow
from loopback.servers import CLIENTS, SERVERS, StoreServer, storage_args
from tests.support import REPO, TABLES, check_listing_from_each_version, deltalake_rows

FIXTURE = TABLES / "delta-spark" / "dv-partitioned-with-checkpoint"


@pytest.fixture(scope="module", params=sorted(SERVERS))
def server(request: pytest.FixtureRequest) -> Iterator[StoreServer]:
    with SERVERS[request.param]() as running:
        yield running


@pytest.fixture(params=CLIENTS)
def store(server: StoreServer, request: pytest.FixtureRequest) -> StoreServer:
    """The server through the native client (obstore) or the fsspec fallback."""
    reached = server.through(request.param)
    assert Storage.open(reached.url("t"), reached.options).client == request.param
    return reached


def _upload(store: StoreServer, local: Path, table: str) -> str:
    fs = store.fsspec()
    url = store.url(table)
    root = url.split("://", 1)[1]
    for path in sorted(p for p in local.rglob("*") if p.is_file()):
        fs.pipe_file(f"{root}/{path.relative_to(local).as_posix()}", path.read_bytes())
    return url


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert cli.main([*args, "--json"]) == 0, capsys.readouterr().err
    result: dict[str, Any] = json.loads(capsys.readouterr().out)
    return result


def _decisions(result: dict[str, Any]) -> dict[str, Any]:
    """What an op decided, without where and when it ran."""
    varying = {"table", "duration_ms", "now_ms", "requested_now_ms", "commits", "timestamp"}
    varying |= {"size_in_bytes"}  # parquet compresses the (wall-clock) tombstone times
    out = {k: v for k, v in result.items() if k not in varying and not k.endswith("_at")}
    if "advice" in out:  # inspect: the same problems, each command naming its own location
        out["advice"] = [item["problem"] for item in out["advice"]]
    return out


def test_every_op_on_the_store_agrees_with_the_local_run(
    store: StoreServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    local = tmp_path / "events"
    shutil.copytree(FIXTURE, local, copy_function=shutil.copyfile)  # fresh mtimes, as uploaded
    remote = _upload(store, local, "events")
    assert deltalake_rows(remote, store.peer_options) == deltalake_rows(local)
    flags = storage_args(store.options)
    forced = ["--retention", "0h", "--force", "--in-flight-grace", "0s"]
    steps = [
        ["inspect"],
        ["checkpoint"],
        ["vacuum", "--mode", "lite", *forced],
        ["checkpoint", "--parts", "2"],
        ["cleanup"],
        ["vacuum", "--mode", "full", *forced],
        ["enable-row-tracking"],
        ["checkpoint"],
    ]
    for step in steps:
        time.sleep(0.01)  # removed files are strictly older than each forced vacuum's now
        mine = _run(capsys, step[0], str(local), *step[1:])
        theirs = _run(capsys, step[0], remote, *step[1:], *flags)
        assert _decisions(theirs) == _decisions(mine), step

    on_store = load_snapshot(remote, storage_options=store.options)
    here = load_snapshot(local)
    assert on_store.version == here.version and on_store.segment.checkpoint_version == here.version
    assert sorted(on_store.files.column("path").to_pylist()) == sorted(
        here.files.column("path").to_pylist()
    )
    assert on_store.metadata.configuration.keys() == here.metadata.configuration.keys()
    assert on_store.metadata.configuration.get("delta.enableRowTracking") == "true"
    assert on_store.row_id_high_water_mark == here.row_id_high_water_mark is not None
    assert deltalake_rows(remote, store.peer_options) == deltalake_rows(local)


def test_a_v2_checkpoint_with_sidecars_on_the_store(store: StoreServer) -> None:
    url = store.url("v2")
    rows = pa.table({"id": pa.array([1, 2], pa.int64())})
    policy = {"delta.checkpointPolicy": "v2"}
    write_arrow(url, rows, configuration=policy, storage_options=store.options)
    write_arrow(url, rows.slice(1), storage_options=store.options)
    before = load_snapshot(url, storage_options=store.options)
    result = checkpoint(url, storage_options=store.options)
    assert result.kind == "v2" and any(n.startswith("_sidecars/") for n in result.written)
    after = load_snapshot(url, storage_options=store.options)  # deltalake cannot read v2Checkpoint
    assert after.segment.checkpoint_version == 1
    assert sorted(after.files.column("path").to_pylist()) == sorted(
        before.files.column("path").to_pylist()
    )
    assert not [name for name in after.storage.list_log() if name.name.startswith(".")]
    # listing from a version on: one request that starts there and stops before `_sidecars/`
    assert check_listing_from_each_version(after.storage) == 2


_APPENDER = """
import json, sys, time
import pyarrow as pa
from delta_ops.table.writer import write_arrow
url, options, worker, count, start_at = sys.argv[1], json.loads(sys.argv[2]), *map(float, sys.argv[3:])
time.sleep(max(0.0, start_at - time.time()))
for i in range(int(count)):
    write_arrow(url, pa.table({"id": pa.array([int(worker) * 100 + i], pa.int64())}),
                storage_options=options)
"""


def test_commits_racing_from_several_processes_each_land_once(store: StoreServer) -> None:
    url = store.url("race")
    write_arrow(url, pa.table({"id": pa.array([-1], pa.int64())}), storage_options=store.options)
    start_at = str(time.time() + 3.0)  # every process imported and waiting before the race
    options = json.dumps(store.options)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _APPENDER, url, options, str(w), "3", start_at],
            cwd=REPO,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(3)
    ]
    errors = [p.communicate(timeout=240)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], [e[-800:] for e in errors]
    snapshot = load_snapshot(url, storage_options=store.options)
    assert snapshot.version == 9  # nine commits after the first, none overwritten
    expected = [-1] + [w * 100 + i for w in range(3) for i in range(3)]
    ids = DeltaTable(url, storage_options=store.peer_options).to_pyarrow_table().column("id")
    assert sorted(ids.to_pylist()) == sorted(expected)


def test_compaction_and_purge_on_the_store_read_the_same_rows(
    store: StoreServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Rewrites read the small files they rewrite from the store (whole, concurrently) and
    write and commit there: the Delta Spark fixture's deletion vectors are purged, its small
    files compacted, and deltalake reads the same rows from the store as before."""
    local = tmp_path / "events"
    shutil.copytree(FIXTURE, local, copy_function=shutil.copyfile)
    remote = _upload(store, local, "rewrites")
    rows = deltalake_rows(remote, store.peer_options)
    before = load_snapshot(remote, storage_options=store.options)
    assert before.files.column("deletionVector").null_count < before.num_files  # DVs to purge
    flags = storage_args(store.options)
    purged = _run(capsys, "purge", remote, *flags)
    assert purged["files_rewritten"] > 0
    compacted = _run(capsys, "compact", remote, *flags)
    assert compacted["files_removed"] > compacted["files_added"] > 0
    after = load_snapshot(remote, storage_options=store.options)
    assert after.files.column("deletionVector").null_count == after.num_files
    assert (
        after.num_files == before.num_files - compacted["files_removed"] + compacted["files_added"]
    )
    assert deltalake_rows(remote, store.peer_options) == rows
    # how a failed Spark rewrite finds its tasks' files: one directory, by name prefix, fresh
    storage = Storage.open(remote, store.options)
    written = compacted["files_written"]
    directory, name = written[0].rsplit("/", 1)
    prefix = name[: len("part-00000-") + 17]  # the rewrite's own prefix
    assert storage.file_names_in(directory, prefix) == sorted(
        p.rsplit("/", 1)[1] for p in written if p.startswith(f"{directory}/{prefix}")
    )
    assert storage.file_names_in("", "deletion_vector_") == sorted(
        p.name for p in local.glob("deletion_vector_*")
    )
    assert storage.file_names_in(directory, "no-such-prefix") == []
    assert storage.file_names_in("no=such", "") == []


def test_a_data_file_is_streamed_in_parts_and_appears_only_when_complete(
    store: StoreServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`create_new(..., unique_name=True)` (rewritten data files): on S3 and Azure, and on
    GCS through the native client, the content goes up in parts of STREAM_BLOCK_BYTES (5 MiB
    here, the smallest S3 part) instead of being held whole (GCS through gcsfs' extended
    filesystem keeps the whole-file upload); either way the object has exactly the bytes
    written, and a writer that fails after parts went up leaves no object at all."""
    import os

    from delta_ops.storage import table_storage

    monkeypatch.setattr(table_storage, "STREAM_BLOCK_BYTES", 5 * 1024 * 1024)
    storage = Storage.open(store.url("streamed"), store.options)
    content = os.urandom(11 * 1024 * 1024 + 123)  # three parts, the last one short

    def write_all(sink: Any) -> None:
        for start in range(0, len(content), 1024 * 1024):
            sink.write(content[start : start + 1024 * 1024])

    path = storage.join("part=1/part-00000-streamed.c000.snappy.parquet")
    assert storage.create_new(path, write_all, unique_name=True) == (True, len(content))
    assert storage.read_bytes(path) == content

    class WriterFailed(RuntimeError):
        pass

    def fail_midway(sink: Any) -> None:
        sink.write(content[: 7 * 1024 * 1024])  # one part uploaded, more buffered
        raise WriterFailed("the rows could not be read")

    broken = storage.join("part=1/part-00000-broken.c000.snappy.parquet")
    with pytest.raises(WriterFailed):
        storage.create_new(broken, fail_midway, unique_name=True)
    assert storage.stat(broken) is None
    assert storage.file_names_in("part=1") == ["part-00000-streamed.c000.snappy.parquet"]
