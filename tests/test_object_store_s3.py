"""Tables on S3, against a real S3 server on loopback (moto's), started by the test run (issue 13).

Every op runs on `s3://` URLs with credentials and the endpoint as storage options; commits are
created with a conditional PUT (`If-None-Match: *`), which the server must refuse for a taken
version, and `deltalake` (its own S3 client) reads the result.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from moto.server import ThreadedMotoServer

from delta_ops import cli
from delta_ops.storage import Storage
from delta_ops.table.snapshot import load_snapshot
from delta_ops.table.transaction import Transaction
from delta_ops.table.writer import write_arrow
from tests.store_support import forced_vacuum, storage_args, write_history

KEY = {"key": "testing", "secret": "testing"}


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    host, port = server.get_host_and_port()
    url = f"http://{host}:{port}"
    import s3fs

    s3fs.S3FileSystem(client_kwargs={"endpoint_url": url}, **KEY).mkdir("lake")
    yield url
    server.stop()


def _options(endpoint: str) -> dict[str, str]:
    return {"endpoint_url": endpoint, **KEY}


def _theirs(endpoint: str) -> dict[str, str]:
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ALLOW_HTTP": "true",
        "AWS_ACCESS_KEY_ID": KEY["key"],
        "AWS_SECRET_ACCESS_KEY": KEY["secret"],
        "AWS_REGION": "us-east-1",
    }


def _ids(table: str, endpoint: str) -> list[int]:
    data = DeltaTable(table, storage_options=_theirs(endpoint)).to_pyarrow_table()
    return sorted(data.column("id").to_pylist())


def test_every_op_on_s3_and_deltalake_reads_the_result(
    endpoint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    url = "s3://lake/events"
    options = _options(endpoint)
    write_history(url, options, (0, 10, 20))
    assert _ids(url, endpoint) == [99]

    storage = Storage.open(url, options)
    assert storage.supports_conditional_create  # moto honours If-None-Match: probed once

    assert cli.main(["checkpoint", url, "--json", *storage_args(options)]) == 0
    assert json.loads(capsys.readouterr().out)["version"] == 3
    assert load_snapshot(url, storage_options=options).segment.checkpoint_version == 3

    assert cli.main(["cleanup", url, "--json", "--dry-run", *storage_args(options)]) == 0
    assert json.loads(capsys.readouterr().out)["deleted"] == []  # the log is minutes old

    result = forced_vacuum(url, options, capsys)
    assert result["num_deleted"] == 3 and len(result["commits"]) == 2  # the overwritten files
    assert _ids(url, endpoint) == [99]


def test_concurrent_commits_on_s3_never_share_a_version(endpoint: str) -> None:
    url = "s3://lake/race"
    options = _options(endpoint)
    write_arrow(url, pa.table({"id": pa.array([0], pa.int64())}), storage_options=options)
    snapshot = load_snapshot(url, storage_options=options)
    storage = snapshot.storage
    first, second = (Transaction(snapshot, operation="WRITE") for _ in range(2))
    for n, txn in ((1, first), (2, second)):
        path = f"part-{n}.parquet"
        import pyarrow.parquet as pq

        with storage._filesystem.open(storage.join(path), "wb") as out:  # a staged data file
            pq.write_table(pa.table({"id": pa.array([n], pa.int64())}), out)
        size = storage.stat(storage.join(path)).size  # type: ignore[union-attr]
        txn.add_action(
            {
                "add": {
                    "path": path,
                    "partitionValues": {},
                    "size": size,
                    "modificationTime": 0,
                    "dataChange": True,
                    "stats": json.dumps({"numRecords": 1}),
                }
            }
        )
    assert first.commit().version == 1
    result = second.commit()  # version 1 is taken: the conditional PUT is refused, it retries
    assert (result.version, result.attempts) == (2, 2)
    assert _ids(url, endpoint) == [0, 1, 2]


def test_a_v2_checkpoint_with_sidecars_on_s3(endpoint: str) -> None:
    url = "s3://lake/v2"
    options = _options(endpoint)
    write_arrow(
        url,
        pa.table({"id": pa.array([1, 2], pa.int64())}),
        configuration={"delta.checkpointPolicy": "v2"},
        storage_options=options,
    )
    write_arrow(url, pa.table({"id": pa.array([3], pa.int64())}), storage_options=options)
    from delta_ops.ops.checkpoint import checkpoint

    before = load_snapshot(url, storage_options=options)
    result = checkpoint(url, storage_options=options)
    assert result.kind == "v2" and any(n.startswith("_sidecars/") for n in result.written)
    after = load_snapshot(url, storage_options=options)  # deltalake cannot read v2Checkpoint
    assert after.segment.checkpoint_version == 1
    assert sorted(after.files.column("path").to_pylist()) == sorted(
        before.files.column("path").to_pylist()
    )


def test_vacuum_deletes_in_batches_on_s3(endpoint: str) -> None:
    # 1200 orphans: two DeleteObjects requests, not 1200 DELETEs
    import s3fs

    from delta_ops.ops.vacuum import execute_vacuum, plan_vacuum

    url = "s3://lake/many"
    options = _options(endpoint)
    write_arrow(url, pa.table({"id": pa.array([1], pa.int64())}), storage_options=options)
    fs = s3fs.S3FileSystem(**options)
    fs.pipe({f"lake/many/orphan-{i:04d}.parquet": b"x" for i in range(1200)})  # concurrent
    started = time.monotonic()
    plan = plan_vacuum(
        load_snapshot(url, storage_options=options),
        int(time.time() * 1000) + 1,
        retention_ms=0,
        force=True,
        in_flight_grace_ms=0,
    )
    result = execute_vacuum(plan)
    elapsed = time.monotonic() - started
    assert result.num_deleted == 1200
    fs.invalidate_cache()
    assert not fs.glob("lake/many/orphan-*")
    assert _ids(url, endpoint) == [1]
    print(f"vacuumed 1200 S3 objects in {elapsed:.2f} s")
