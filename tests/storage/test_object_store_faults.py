"""Faults a loaded or failing S3 answers with, injected by the proxy in front of moto's server
(issue 28), through both clients (native: obstore; fsspec: s3fs): 503 SlowDown bursts, a
connection reset in the middle of a body, per-key errors inside a DeleteObjects reply, a listing
page failing after the first pages, transiently and for good.

Every op runs as the CLI runs it and must end with success (exit 0) or one error line that
says what failed (never an internal error), and the table must read as before or as after,
never in between: deltalake reads the same rows, and no file the table needs is gone.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterator

import pyarrow as pa
import pytest

from delta_ops import cli
from delta_ops.log.reader import read_commit_actions
from delta_ops.service.history import OperationHistory
from delta_ops.storage import Storage
from delta_ops.table.snapshot import load_snapshot
from delta_ops.table.writer import write_arrow
from loopback.proxy import SLOW_DOWN, StoreProxy, delete_errors, is_delete_objects
from loopback.servers import BUCKET, CLIENTS, StoreServer, serve_s3, storage_args
from tests.support import deltalake_rows
from tests.support.store_faults import (
    FORCED,
    QUICK,
    ends_well,
    fault_cli,
    history_record,
    history_rows,
    orphans,
    reads_the_same,
)


@pytest.fixture(scope="module")
def server() -> Iterator[StoreServer]:
    with serve_s3() as running:
        yield running


@pytest.fixture(params=CLIENTS)
def s3(server: StoreServer, request: pytest.FixtureRequest) -> StoreServer:
    return server.through(request.param)


def _table(s3: StoreServer, name: str, orphans: int) -> tuple[str, Storage, list[dict[str, int]]]:
    """A table of two commits (two live files) with `orphans` files no version references."""
    url = s3.url(name)
    for ids in ([1, 2], [3]):
        write_arrow(url, pa.table({"id": pa.array(ids, pa.int64())}), storage_options=s3.options)
    storage = Storage.open(url, s3.options)
    _plant(storage, orphans)
    return url, storage, deltalake_rows(url, s3.peer_options)


def _plant(storage: Storage, count: int) -> None:
    """`count` one-byte files the table never referenced, put straight into the backend of
    the moto server the tests talk to (it runs in this process): 2,500 uploads over HTTP
    were 20 s of a test's set-up. Everything under test still reaches them over HTTP."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends

    backend = s3_backends[DEFAULT_ACCOUNT_ID]["global"]
    for i in range(count):
        bucket, key = storage.join(f"orphan-{i:04d}.parquet").split("/", 1)
        backend.put_object(bucket, key, b"x")


def _cli(
    capsys: pytest.CaptureFixture[str],
    s3: StoreServer,
    proxy: StoreProxy,
    *args: str,
) -> tuple[int, list[str]]:
    return fault_cli(capsys, {**s3.options, "endpoint_url": proxy.url}, *args)


def test_slow_down_bursts_are_retried(s3: StoreServer, capsys: pytest.CaptureFixture[str]) -> None:
    url, storage, rows = _table(s3, "burst", 30)
    seen = [0]

    def every_other(method: str, path: str, body: bytes) -> tuple[int, bytes] | None:
        seen[0] += 1
        return (503, SLOW_DOWN) if seen[0] <= 24 and seen[0] % 2 else None

    with StoreProxy(s3.endpoint, answer=every_other) as proxy:
        assert _cli(capsys, s3, proxy, "checkpoint", url) == (0, [])
        assert _cli(capsys, s3, proxy, "vacuum", url, *FORCED) == (0, [])
    assert orphans(storage) == 0
    reads_the_same(s3, url, rows)


def test_a_reset_in_the_middle_of_a_body_is_retried(
    s3: StoreServer, capsys: pytest.CaptureFixture[str]
) -> None:
    url, _storage, rows = _table(s3, "reset", 0)
    resets: list[str] = []

    def first_commit_read(method: str, path: str) -> bool:
        first = path.split("?")[0].endswith("00000000000000000000.json")
        if method == "GET" and first and len(resets) < 2:
            resets.append(path)
            return True
        return False

    with StoreProxy(s3.endpoint, reset=first_commit_read) as proxy:
        code, errors = _cli(capsys, s3, proxy, "checkpoint", url)
    assert resets and code == 0, errors
    assert load_snapshot(url, storage_options=s3.options).segment.checkpoint_version == 1
    reads_the_same(s3, url, rows)


def test_per_key_delete_errors_leave_those_files_and_say_so(
    s3: StoreServer, capsys: pytest.CaptureFixture[str]
) -> None:
    url, storage, rows = _table(s3, "per-key", 40)
    direct = s3.fsspec()

    def half_refused(method: str, path: str, body: bytes) -> tuple[int, bytes] | None:
        """DeleteObjects deleting the even orphans and refusing the odd ones, per key."""
        if not is_delete_objects(method, path):
            return None
        keys = [k.decode() for k in re.findall(rb"<Key>(.*?)</Key>", body)]
        even = [k for k in keys if int(k[-12:-8]) % 2 == 0]
        if even:
            direct.rm([f"{BUCKET}/{k}" for k in even])
        odd = "".join(f"<Key>{k}</Key>" for k in keys if k not in even).encode()
        return 200, delete_errors(odd, "AccessDenied")

    with StoreProxy(s3.endpoint, answer=half_refused) as proxy:
        code, _errors = _cli(capsys, s3, proxy, "vacuum", url, *FORCED)
    assert code == 0
    assert orphans(storage) == 20  # the refused ones are still there
    last = load_snapshot(url, storage_options=s3.options).version
    (end,) = [a["commitInfo"] for a in read_commit_actions(storage, last) if "commitInfo" in a]
    assert end["operation"] == "VACUUM END"
    assert end["operationMetrics"]["numDeletedFiles"] == "20"  # refused keys not counted
    reads_the_same(s3, url, rows)


def _failing_pages(times: int | None) -> tuple[Callable[..., tuple[int, bytes] | None], list[int]]:
    failed = [0]

    def answer(method: str, path: str, body: bytes) -> tuple[int, bytes] | None:
        later_page = "continuation-token" in path
        failing = times is None or failed[0] < times
        if method == "GET" and "list-type=2" in path and later_page and failing:
            failed[0] += 1
            return 503, SLOW_DOWN
        return None

    return answer, failed


def test_a_listing_page_failing_after_the_first_pages(
    s3: StoreServer, capsys: pytest.CaptureFixture[str]
) -> None:
    url, storage, rows = _table(s3, "pages", 2500)  # three pages of 1000 keys
    answer, failed = _failing_pages(times=2)
    with StoreProxy(s3.endpoint, answer=answer) as proxy:
        assert _cli(capsys, s3, proxy, "vacuum", url, *FORCED) == (0, [])
    assert failed == [2] and orphans(storage) == 0
    reads_the_same(s3, url, rows)


def test_a_listing_page_that_keeps_failing_fails_the_op_in_one_line(
    s3: StoreServer, capsys: pytest.CaptureFixture[str]
) -> None:
    url, storage, rows = _table(s3, "pages-down", 2500)
    version = load_snapshot(url, storage_options=s3.options).version
    answer, failed = _failing_pages(times=None)
    started = time.monotonic()
    with StoreProxy(s3.endpoint, answer=answer) as proxy:
        code, errors = _cli(capsys, s3, proxy, "vacuum", url, *FORCED)
    assert failed[0] > 0 and code != 0 and ends_well(code, errors), (code, errors)
    assert time.monotonic() - started < 120
    # the listing is part of the plan: nothing was committed and nothing deleted
    assert load_snapshot(url, storage_options=s3.options).version == version
    assert orphans(storage) == 2500
    reads_the_same(s3, url, rows)


def test_deletes_that_keep_failing_fail_the_op_and_keep_the_table(
    s3: StoreServer, capsys: pytest.CaptureFixture[str]
) -> None:
    url, storage, rows = _table(s3, "deletes-down", 30)

    def down(method: str, path: str, body: bytes) -> tuple[int, bytes] | None:
        return (503, SLOW_DOWN) if is_delete_objects(method, path) else None

    with StoreProxy(s3.endpoint, answer=down) as proxy:
        code, errors = _cli(capsys, s3, proxy, "vacuum", url, *FORCED)
    assert ends_well(code, errors), (code, errors)
    assert orphans(storage) == 30  # none deleted, none counted
    reads_the_same(s3, url, rows)


# ------------------------------------------------------------ the operation history (52.5)
# A run records itself in the operation history on the same store, through the same proxy: its
# requests meet the faults too. The run's own result never depends on the history; the history
# table is either one row longer or as it was, and always reads.


def _history(s3: StoreServer, name: str) -> tuple[str, OperationHistory]:
    url = s3.url(name)
    history = OperationHistory(url, s3.options)
    history.append(history_record(url))  # the history exists before the faults begin
    return url, history


def _on(prefix: str, method: str, path: str) -> bool:
    return f"/{prefix}" in path.split("?")[0] or f"prefix={prefix}" in path


def test_the_history_records_a_run_through_slow_down_bursts_and_resets(
    s3: StoreServer, capsys: pytest.CaptureFixture[str]
) -> None:
    url, _storage, rows = _table(s3, "history-burst", 0)
    location, history = _history(s3, "history-burst-log")
    prefix = location.split(f"{BUCKET}/", 1)[1]
    seen, resets = [0], []

    def every_other(method: str, path: str, body: bytes) -> tuple[int, bytes] | None:
        """Writes and listings of the history throttled, every other one (reads are reset)."""
        if not _on(prefix, method, path) or (method == "GET" and "list-type" not in path):
            return None
        seen[0] += 1
        return (503, SLOW_DOWN) if seen[0] <= 24 and seen[0] % 2 else None

    def first_log_read(method: str, path: str) -> bool:
        """The first read of a history commit cut off in the middle of its body."""
        commit = path.split("?")[0].endswith(".json") and "list-type" not in path
        if method == "GET" and _on(prefix, method, path) and commit and not resets:
            resets.append(path)
            return True
        return False

    with StoreProxy(s3.endpoint, answer=every_other, reset=first_log_read) as proxy:
        code, errors = _cli(capsys, s3, proxy, "checkpoint", url, "--history", location)
    assert (code, errors) == (0, []) and seen[0] > 0 and resets
    assert history_rows(history) == [("checkpoint", "succeeded")] * 2  # the run's row landed
    reads_the_same(s3, url, rows)


def test_a_history_the_store_refuses_to_write_leaves_the_run_done_and_the_history_whole(
    s3: StoreServer, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    url, _storage, rows = _table(s3, "history-down", 0)
    location, history = _history(s3, "history-down-log")
    prefix = location.split(f"{BUCKET}/", 1)[1]
    before = history_rows(history)
    refused = [0]

    def writes_down(method: str, path: str, body: bytes) -> tuple[int, bytes] | None:
        if method in ("PUT", "POST") and _on(prefix, method, path):
            refused[0] += 1
            return 503, SLOW_DOWN
        return None

    client = s3.options["client"]
    options = {**s3.options, **QUICK[client]}
    with StoreProxy(s3.endpoint, answer=writes_down) as proxy:
        args = storage_args({**options, "endpoint_url": proxy.url})
        code = cli.main(["checkpoint", url, *args, "--history", location, "--json"])
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code == 0 and refused[0] > 0, err
    warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warned) == 1 and "could not record checkpoint" in warned[0], warned
    assert load_snapshot(url, storage_options=s3.options).segment.checkpoint_version == 1
    assert history_rows(history) == before  # no row, no torn commit: it reads as it was
    reads_the_same(s3, url, rows)
