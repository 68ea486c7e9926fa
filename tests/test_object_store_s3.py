"""S3 specifics, against moto's S3 server on loopback (issue 13): vacuum deletes with batched
DeleteObjects requests. What every store shares is in test_object_stores.py."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pyarrow as pa
import pytest

from delta_ops.ops.vacuum import execute_vacuum, plan_vacuum
from delta_ops.storage import Storage
from delta_ops.table.snapshot import load_snapshot
from delta_ops.table.writer import write_arrow
from tests.store_servers import StoreServer, serve_s3
from tests.support import deltalake_rows


@pytest.fixture(scope="module")
def s3() -> Iterator[StoreServer]:
    with serve_s3() as server:
        yield server


def test_vacuum_deletes_in_batches_on_s3(s3: StoreServer) -> None:
    url = s3.url("many")
    write_arrow(url, pa.table({"id": pa.array([1], pa.int64())}), storage_options=s3.options)
    fs = Storage.open(url, s3.options)._filesystem  # fsspec's cached instance, which vacuum uses
    fs.pipe({f"lake/many/orphan-{i:04d}.parquet": b"x" for i in range(1200)})  # concurrent
    requests: list[int] = []
    original = fs._bulk_delete

    async def counting(paths: list[str], *args: object, **kwargs: object) -> object:
        requests.append(len(paths))
        return await original(paths, *args, **kwargs)

    plan = plan_vacuum(
        load_snapshot(url, storage_options=s3.options),
        int(time.time() * 1000) + 1,
        retention_ms=0,
        force=True,
        in_flight_grace_ms=0,
    )
    fs._bulk_delete = counting
    try:
        result = execute_vacuum(plan)
    finally:
        del fs._bulk_delete
    assert result.num_deleted == 1200
    assert requests and max(requests) <= 1000 and sum(requests) == 1200  # DeleteObjects batches
    fs.invalidate_cache()
    assert not fs.glob("lake/many/orphan-*")
    assert [row["id"] for row in deltalake_rows(url, s3.peer_options)] == [1]
