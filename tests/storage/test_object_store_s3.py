"""S3 specifics, against moto's S3 server on loopback behind a proxy that answers as a loaded or
locked-down S3 would (issue 13): vacuum deletes in DeleteObjects batches of at most 1000 keys,
retries keys the store throttled, survives whole requests throttled with 503 SlowDown, and never
counts a key the store refused as deleted. Every test runs through both clients: the native
one (obstore) and the fsspec fallback. What every store shares is in test_object_stores.py;
faults in the middle of bodies and listings are in test_object_store_faults.py.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterator

import pyarrow as pa
import pytest

from delta_ops.log.reader import read_commit_actions
from delta_ops.ops.vacuum import VacuumResult, execute_vacuum, plan_vacuum
from delta_ops.storage import Storage
from delta_ops.table.snapshot import load_snapshot
from delta_ops.table.writer import write_arrow
from loopback.proxy import SLOW_DOWN, StoreProxy, delete_errors, is_delete_objects
from loopback.servers import CLIENTS, StoreServer, serve_s3
from tests.support import deltalake_rows


@pytest.fixture(scope="module")
def server() -> Iterator[StoreServer]:
    with serve_s3() as running:
        yield running


@pytest.fixture(params=CLIENTS)
def s3(server: StoreServer, request: pytest.FixtureRequest) -> StoreServer:
    return server.through(request.param)


def _table_with_orphans(s3: StoreServer, name: str, orphans: int) -> tuple[str, Storage]:
    url = s3.url(name)
    write_arrow(url, pa.table({"id": pa.array([1], pa.int64())}), storage_options=s3.options)
    storage = Storage.open(url, s3.options)
    s3.fsspec().pipe({storage.join(f"orphan-{i:04d}.parquet"): b"x" for i in range(orphans)})
    return url, storage


def _vacuum_through(proxy: StoreProxy, s3: StoreServer, url: str) -> VacuumResult:
    options = {**s3.options, "endpoint_url": proxy.url}
    plan = plan_vacuum(
        load_snapshot(url, storage_options=options),
        int(time.time() * 1000) + 1,
        retention_ms=0,
        force=True,
        in_flight_grace_ms=0,
    )
    return execute_vacuum(plan)


def _orphans_left(storage: Storage) -> int:
    return sum(1 for p in storage.walk(lambda n: n.startswith("_")).paths if "orphan-" in p)


def test_vacuum_deletes_in_batches_of_at_most_a_thousand_keys(s3: StoreServer) -> None:
    url, storage = _table_with_orphans(s3, "batches", 1200)
    keys_per_request: list[int] = []

    def count(method: str, path: str, body: bytes) -> None:
        # (the conditional-write probe's own removal is not vacuum's)
        if is_delete_objects(method, path) and b"conditional-probe" not in body:
            keys_per_request.append(len(re.findall(rb"<Key>", body)))

    with StoreProxy(s3.endpoint, answer=count) as proxy:
        result = _vacuum_through(proxy, s3, url)
    assert result.num_deleted == 1200 and _orphans_left(storage) == 0
    assert sorted(keys_per_request) == [200, 1000]  # two requests, not 1200
    assert [row["id"] for row in deltalake_rows(url, s3.peer_options)] == [1]


def test_keys_the_store_throttles_are_retried_until_deleted(s3: StoreServer) -> None:
    url, storage = _table_with_orphans(s3, "throttled", 50)
    refusals = [2]  # the first two DeleteObjects come back with every key SlowDown

    def throttle(method: str, path: str, body: bytes) -> tuple[int, bytes] | None:
        if is_delete_objects(method, path) and refusals[0]:
            refusals[0] -= 1
            return 200, delete_errors(body, "SlowDown")
        return None

    with StoreProxy(s3.endpoint, answer=throttle) as proxy:
        result = _vacuum_through(proxy, s3, url)
    assert refusals == [0] and result.num_deleted == 50 and _orphans_left(storage) == 0


def test_whole_requests_throttled_with_503_are_retried(s3: StoreServer) -> None:
    url, storage = _table_with_orphans(s3, "slowdown", 20)
    left = [3]  # the first three requests of any kind: 503 SlowDown

    def slow_down(method: str, path: str, body: bytes) -> tuple[int, bytes] | None:
        if left[0]:
            left[0] -= 1
            return 503, SLOW_DOWN
        return None

    with StoreProxy(s3.endpoint, answer=slow_down) as proxy:
        result = _vacuum_through(proxy, s3, url)
    assert left == [0] and result.num_deleted == 20 and _orphans_left(storage) == 0


def test_keys_the_store_refuses_are_kept_and_not_counted(
    s3: StoreServer, caplog: pytest.LogCaptureFixture
) -> None:
    url, storage = _table_with_orphans(s3, "locked", 30)

    def deny(method: str, path: str, body: bytes) -> tuple[int, bytes] | None:
        return (
            (200, delete_errors(body, "AccessDenied")) if is_delete_objects(method, path) else None
        )

    with caplog.at_level(logging.WARNING), StoreProxy(s3.endpoint, answer=deny) as proxy:
        result = _vacuum_through(proxy, s3, url)
    assert result.num_deleted == 0 and _orphans_left(storage) == 30
    assert any("refused to delete 30 file(s)" in r.getMessage() for r in caplog.records)
    last = load_snapshot(url, storage_options=s3.options).version
    (end,) = [a["commitInfo"] for a in read_commit_actions(storage, last) if "commitInfo" in a]
    assert end["operation"] == "VACUUM END"
    assert end["operationMetrics"]["numDeletedFiles"] == "0"  # the log says what really happened


def test_each_listing_range_of_a_10k_file_table_fits_one_page() -> None:
    from delta_ops.storage.s3_listing import KEYS_PER_RANGE, cut_points

    names = [f"part-{i:05d}.parquet" for i in range(10_001)]
    cuts = cut_points(names)
    bounds = list(zip([None, *cuts], [*cuts, None], strict=True))
    sizes = [
        sum(1 for n in names if (low is None or n > low) and (high is None or n <= high))
        for low, high in bounds
    ]
    assert sum(sizes) == len(names)
    # one 1000-key page per range, with room for keys the log does not know: one round trip
    assert max(sizes) <= KEYS_PER_RANGE <= 900


def test_a_parallel_range_listing_finds_exactly_what_a_plain_listing_does(
    s3: StoreServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from delta_ops.storage import s3_listing

    monkeypatch.setattr(s3_listing, "KEYS_PER_RANGE", 50)  # 18 ranges over 900 known names
    url = s3.url("ranges")
    storage = Storage.open(url, s3.options)
    known = [f"p={i % 3}/part-{i:04d}.parquet" for i in range(900)]
    # unknown names everywhere between, before and after the known ones, plus the cut points
    # themselves, names sharing a prefix with the log, and log files that must be skipped
    unknown = [f"p={i % 3}/part-{i:04d}a.parquet" for i in range(0, 900, 7)]
    unknown += ["0-first.parquet", "zz-last.parquet", "_change_data/c.parquet", "_delta_logx"]
    unknown += [f"_delta_log/{v:020d}.json" for v in range(30)]
    s3.fsspec().pipe({storage.join(name): b"x" for name in known + unknown})

    def skip(name: str) -> bool:
        return name == "_delta_log"

    lists: list[str] = []

    def record(method: str, path: str, body: bytes) -> None:
        if method == "GET" and "list-type=2" in path:
            lists.append(path)

    with StoreProxy(s3.endpoint, answer=record) as proxy:
        via_proxy = Storage.open(url, {**s3.options, "endpoint_url": proxy.url})
        ranged = via_proxy.walk(skip, known)
    plain = storage.walk(skip)  # no known names: one range, the plain sequential listing
    expected = sorted(n for n in known + unknown if not n.startswith("_delta_log/"))
    assert sorted(ranged.paths) == sorted(plain.paths) == expected
    assert sorted(zip(ranged.paths, ranged.sizes)) == sorted(zip(plain.paths, plain.sizes))
    assert {"p=0", "p=1", "p=2", "_change_data"} <= set(ranged.dirs)
    assert sum("start-after" in p for p in lists) >= 15  # the ranges were listed separately


def test_leftovers_of_the_log_and_of_spark_staging_are_both_found(s3: StoreServer) -> None:
    """The two listings run at once on a store; each one's leftovers are found, and nothing
    else (the commit and its checksum are no leftovers)."""
    from delta_ops.ops.leftovers import SPARK_STAGING, TEMPORARY_LOG_FILE, find_leftovers

    _url, storage = _table_with_orphans(s3, "leftovers", 0)
    temporary = "_delta_log/.00000000000000000001.json.0123456789abcdef0123456789abcdef.tmp"
    staged = "_delta_ops_staging/3f1c/part-00000.parquet"
    s3.fsspec().pipe({storage.join(temporary): b"{", storage.join(staged): b"PAR1"})
    found = sorted((item.path, item.kind) for item in find_leftovers(storage))
    assert found == [(temporary, TEMPORARY_LOG_FILE), (staged, SPARK_STAGING)]


def test_cleanup_reads_the_checkpoint_hint_once_with_the_load(s3: StoreServer) -> None:
    """The plan uses the `_last_checkpoint` its load read (one round trip, not two)."""
    from delta_ops.ops.checkpoint import checkpoint
    from delta_ops.ops.cleanup import plan_cleanup

    url, _ = _table_with_orphans(s3, "hint-once", 0)
    checkpoint(url, storage_options=s3.options)
    hint_reads: list[str] = []

    def count(method: str, path: str, body: bytes) -> None:
        if method == "GET" and path.split("?")[0].endswith("/_delta_log/_last_checkpoint"):
            hint_reads.append(path)

    with StoreProxy(s3.endpoint, answer=count) as proxy:
        options = {**s3.options, "endpoint_url": proxy.url}
        plan = plan_cleanup(load_snapshot(url, storage_options=options), int(time.time() * 1000))
    assert plan.deleted == ()  # nothing is old enough: the plan read what it needs
    assert len(hint_reads) == 1
