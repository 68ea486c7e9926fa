"""Faults a loaded or failing object store answers with, injected by a `StoreProxy` in front of
the store's server (issue 28, issue 52 item 5), on S3 (moto), Azure Blob (Azurite) and GCS
(fake-gcs-server). Every case is written once and runs on (store, client) pairs; what differs
between the stores (their busy answers, listing markers, deletes, how the proxy goes in) is
data and small functions on the store's `Dialect` (`S3`, `AZURE`, `GCS` below).

- throttling bursts on every other request (S3 `503 SlowDown`, Azure `503 ServerBusy`, GCS
  `429`): checkpoint and a forced vacuum succeed and every orphan goes;
- a connection reset in the middle of the first commit's body: retried, the checkpoint lands;
- per-key delete refusals: the vacuum ends 0 with a warning, the refused files stay and are not
  counted, and every other orphan goes. S3 deletes in bulk (DeleteObjects): the proxy deletes
  the even orphans itself and answers the odd ones as per-key `AccessDenied` errors inside a
  `200` reply, as S3 does. Azure's native client deletes in blob batches (`comp=batch`): the
  proxy answers a batch itself the same way (a `403 AuthorizationFailure` sub-response per
  refused blob, as Azure answers a blob it may not delete). GCS' native client deletes object
  by object (XML API `DELETE`), and the odd ones get `403 AccessDenied`. On Azure and GCS the
  native runs plant more orphans than one request takes (300 on Azure: a batch takes 256; 30
  on GCS: obstore sends its single DELETEs 10 at a time), so a refusal in the first request
  must not stop the rest. adlfs and gcsfs delete object by object too and raise on a refusal
  without saying which went (adlfs a RuntimeError naming the whole batch): the odd ones get
  the refusal of their API (Azure `403 AuthorizationFailure`, GCS' JSON API `403 forbidden`);
- deletes that keep failing (`503`): one error line or success, nothing counted;
- a later listing page failing (`continuation-token=` on S3 and GCS' XML API, `marker=` on
  Azure), twice and then answered, and for good: the op fails in one line in bounded time, with
  nothing committed or deleted. moto pages at 1,000 keys itself, so the S3 table holds 2,500
  orphans (three pages). Azurite pages at 5,000 blobs and fake-gcs-server never pages an XML
  listing, so there the proxy pages the listings itself (`page_size=4`, its own tokens): a
  handful of objects give real later pages;
- the operation history on the same store through bursts and resets, and a store refusing its
  writes.

Every op runs as the CLI runs it and must end with success (exit 0) or one error line (never
an internal error, exit 70), and the table must read as before or as after, never in between:
deltalake, through its own client, reads the same rows, and the table keeps its two live files.

How the proxy goes in: S3's `endpoint_url` is the proxy's URL, the proxy's target moto's
endpoint. Azure's endpoint is the `BlobEndpoint` inside `connection_string`, rewritten to the
proxy's URL plus the account path; the proxy's target is Azurite's scheme://host:port. GCS'
native client talks to fake-gcs-server through the XML shim (`StoreServer.native_options`), so
the chain is fault proxy -> shim -> fake-gcs-server; fsspec's (gcsfs) `endpoint_url` is
fake-gcs-server's own.

Which clients run which case (`Dialect.retried_clients`, and why): S3 runs every case through
both clients (native: obstore; fsspec: s3fs). Azure and GCS run the fsspec clients in the
per-key refusals only (a `403` is not retried, so it is fast). adlfs goes through the Azure
SDK, whose retry policy waits about 15 s before a retry (exponential from there), so one
burst is minutes; gcsfs backs off 1-2 s growing with each retry of a request, so the bursts
are tens of seconds. Retrying is the clients' own there; what delta-ops does above them
(listings, commits, the history) is the code s3fs runs through on S3.

Each store's server is started once for the module, when a test first needs it.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

import pyarrow as pa
import pytest

from delta_ops.log.reader import read_commit_actions
from delta_ops.service.history import OperationHistory
from delta_ops.storage import Storage
from delta_ops.table.snapshot import load_snapshot
from delta_ops.table.writer import write_arrow
from loopback.proxy import SLOW_DOWN, Answer, StoreProxy, delete_errors, is_delete_objects
from loopback.servers import AZURE_ACCOUNT, BUCKET, CLIENTS, SERVERS, StoreServer
from tests.support import deltalake_rows
from tests.support.store_faults import (
    FORCED,
    ends_well,
    fault_cli,
    history_record,
    history_rows,
    orphans,
    reads_the_same,
)

SERVER_BUSY = (
    b'<?xml version="1.0" encoding="utf-8"?><Error><Code>ServerBusy</Code>'
    b"<Message>The server is currently unable to receive requests. Please retry your request."
    b"</Message></Error>"
)
AUTHORIZATION_FAILURE = (
    b'<?xml version="1.0" encoding="utf-8"?><Error><Code>AuthorizationFailure</Code>'
    b"<Message>This request is not authorized to perform this operation.</Message></Error>"
)
GCS_SLOW_DOWN = (
    b"<?xml version='1.0' encoding='UTF-8'?><Error><Code>SlowDown</Code>"
    b"<Message>Please reduce your request rate.</Message></Error>"
)
GCS_ACCESS_DENIED = (
    b"<?xml version='1.0' encoding='UTF-8'?><Error><Code>AccessDenied</Code>"
    b"<Message>Access denied.</Message></Error>"
)
GCS_FORBIDDEN = (
    b'{"error": {"code": 403, "message": "Access denied.", "errors": [{"reason": '
    b'"forbidden", "message": "Access denied."}]}}'
)
#: orphans of the burst case and of the deletes-down case
BURST_ORPHANS, DOWN_ORPHANS = 12, 6
#: how long an op that meets a fault for good may take to fail
BOUNDED_S = 60


@dataclass(frozen=True)
class Dialect:
    """How one store speaks, as far as its fault cases need: the answers the proxy gives in its
    name, how its requests are told apart, and how the proxy goes in front of its server."""

    name: str  # the store, as `loopback.servers.SERVERS` names it
    busy: tuple[int, bytes]  # its answer to a request it throttles in a burst
    down: tuple[int, bytes]  # its answer to every request while it is down
    later_page: str  # the query parameter of a listing request for a later page
    page_size: int | None  # the proxy pages listings at this size (None: the server pages)
    listing_orphans: int  # orphans that make a listing of more than one page
    per_key_orphans: dict[str, int]  # orphans of the per-key refusal case, by client
    retried_clients: tuple[str, ...]  # clients that run the cases retrying a fault
    is_delete: Callable[[str, str], bool]  # (method, path with query): a delete request
    refusing_odd: Callable[[StoreServer], Answer]  # deletes of the odd orphans refused
    plant: Callable[[StoreServer, list[str]], None]  # one-byte objects at bucket/key paths
    target: Callable[[StoreServer], str]  # where the fault proxy forwards to
    through: Callable[[StoreServer, str], dict[str, str]]  # options reaching the proxy's URL


# ------------------------------------------------------------ requests as the proxy sees them


def _path(path_qs: str) -> str:
    """The request's object path, decoded (GCS' XML API percent-encodes every `/` and `.`)."""
    return unquote(path_qs.split("?", 1)[0])


def _query(path_qs: str) -> str:
    return unquote(path_qs.partition("?")[2])


def _is_listing(method: str, path_qs: str) -> bool:
    query = "&" + _query(path_qs)
    return method == "GET" and ("&comp=list" in query or "&list-type=2" in query)


def _odd_orphan(path: str) -> bool:
    """Whether `path` (a request's, or a key) names `.../orphan-NNNN.parquet` with N odd."""
    found = re.search(r"orphan-(\d{4})\.parquet", unquote(path))
    return found is not None and int(found.group(1)) % 2 == 1


# ------------------------------------------------------------ S3 (moto)


def _s3_refusing_odd(server: StoreServer) -> Answer:
    """DeleteObjects deleting the even orphans (directly) and refusing the odd ones per key,
    inside its `200` reply."""
    direct = server.fsspec()

    def answer(method: str, path: str, body: bytes) -> tuple[int, bytes] | None:
        if not is_delete_objects(method, path):
            return None
        keys = [k.decode() for k in re.findall(rb"<Key>(.*?)</Key>", body)]
        even = [k for k in keys if not _odd_orphan(k)]
        if even:
            direct.rm([f"{BUCKET}/{k}" for k in even])
        odd = "".join(f"<Key>{k}</Key>" for k in keys if _odd_orphan(k)).encode()
        return 200, delete_errors(odd, "AccessDenied")

    return answer


def _plant_in_moto(server: StoreServer, paths: list[str]) -> None:
    """Straight into the backend of the moto server the tests talk to (it runs in this
    process): 2,500 uploads over HTTP were 20 s of a test's set-up. Everything under test
    still reaches them over HTTP."""
    from moto.core.models import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends

    backend = s3_backends[DEFAULT_ACCOUNT_ID]["global"]
    for path in paths:
        bucket, key = path.split("/", 1)
        backend.put_object(bucket, key, b"x")


def _plant_over_http(server: StoreServer, paths: list[str]) -> None:
    server.fsspec().pipe(dict.fromkeys(paths, b"x"))


def _endpoint_url(server: StoreServer) -> str:
    """S3, and GCS (native: the XML shim; fsspec: fake-gcs-server)."""
    return server.options["endpoint_url"]


def _endpoint_url_through(server: StoreServer, proxy_url: str) -> dict[str, str]:
    return {**server.options, "endpoint_url": proxy_url}


S3 = Dialect(
    name="s3",
    busy=(503, SLOW_DOWN),
    down=(503, SLOW_DOWN),
    later_page="continuation-token",
    page_size=None,
    listing_orphans=2500,  # three pages of 1,000 keys
    per_key_orphans={"native": 40, "fsspec": 40},
    retried_clients=CLIENTS,
    is_delete=is_delete_objects,
    refusing_odd=_s3_refusing_odd,
    plant=_plant_in_moto,
    target=_endpoint_url,
    through=_endpoint_url_through,
)


# ------------------------------------------------------------ Azure Blob (Azurite)


def _batch_refusing(fs: Any, refused: Callable[[str], bool]) -> Answer:
    """Azure's blob batch answered by the proxy: every blob it names deleted (directly) but
    those `refused` names, which get a `403 AuthorizationFailure` sub-response, as Azure answers
    a batch whose caller may not delete some of its blobs (the batch itself is `202`)."""

    def answer(method: str, path: str, body: bytes) -> tuple[int, bytes, dict[str, str]] | None:
        if not (method == "POST" and "comp=batch" in path):
            return None
        text = body.decode()
        targets = re.findall(r"^DELETE (\S+) HTTP/1\.1", text, flags=re.MULTILINE)
        if not any(refused(t) for t in targets):
            return None
        gone = [t for t in targets if not refused(t)]
        if gone:
            fs.rm([unquote(t).split(f"/{AZURE_ACCOUNT}/", 1)[1] for t in gone])
        boundary = "batchresponse_" + text.split("\r\n", 1)[0].removeprefix("--batch_")
        parts = []
        for number, target in enumerate(targets):
            head = f"--{boundary}\r\nContent-Type: application/http\r\nContent-ID: {number}\r\n\r\n"
            if refused(target):
                error = AUTHORIZATION_FAILURE.decode()
                parts.append(
                    head + "HTTP/1.1 403 This request is not authorized to perform this "
                    "operation.\r\nx-ms-error-code: AuthorizationFailure\r\n"
                    f"Content-Type: application/xml\r\nContent-Length: {len(error)}\r\n\r\n"
                    f"{error}\r\n"
                )
            else:
                parts.append(
                    head + "HTTP/1.1 202 Accepted\r\nx-ms-delete-type-permanent: true\r\n\r\n"
                )
        reply = "".join(parts) + f"--{boundary}--\r\n"
        return 202, reply.encode(), {"Content-Type": f"multipart/mixed; boundary={boundary}"}

    return answer


def _azure_refusing_odd(server: StoreServer) -> Answer:
    """The odd orphans refused inside a blob batch (obstore), or alone (adlfs' single DELETEs)."""
    batch = _batch_refusing(server.fsspec(), _odd_orphan)

    def answer(
        method: str, path: str, body: bytes
    ) -> tuple[int, bytes] | tuple[int, bytes, dict[str, str]] | None:
        if method == "DELETE" and _odd_orphan(path):
            return 403, AUTHORIZATION_FAILURE, {"x-ms-error-code": "AuthorizationFailure"}
        return batch(method, path, body)

    return answer


def _is_azure_delete(method: str, path: str) -> bool:
    return method == "POST" and "comp=batch" in path


def _azurite(server: StoreServer) -> str:
    parts = urlsplit(server.endpoint)
    return f"{parts.scheme}://{parts.netloc}"


def _blob_endpoint_through(server: StoreServer, proxy_url: str) -> dict[str, str]:
    endpoint = f"BlobEndpoint={proxy_url}/{AZURE_ACCOUNT};"
    connection = re.sub(r"BlobEndpoint=[^;]*;?", endpoint, server.options["connection_string"])
    return {**server.options, "connection_string": connection}


AZURE = Dialect(
    name="azure",
    busy=(503, SERVER_BUSY),
    down=(503, SERVER_BUSY),
    later_page="marker",
    page_size=4,
    listing_orphans=12,  # 4 or more pages of 4
    per_key_orphans={"native": 300, "fsspec": 6},
    retried_clients=("native",),
    is_delete=_is_azure_delete,
    refusing_odd=_azure_refusing_odd,
    plant=_plant_over_http,
    target=_azurite,
    through=_blob_endpoint_through,
)


# ------------------------------------------------------------ GCS (fake-gcs-server)


def _gcs_refusing_odd(server: StoreServer) -> Answer:
    """A DELETE of an odd orphan refused as its API refuses it: the JSON API's (gcsfs) `403
    forbidden`, the XML API's (obstore) `403 AccessDenied`; the rest go to the server."""

    def answer(method: str, path: str, body: bytes) -> tuple[int, bytes, dict[str, str]] | None:
        if method != "DELETE" or not _odd_orphan(path):
            return None
        if path.startswith("/storage/v1/"):
            return 403, GCS_FORBIDDEN, {"Content-Type": "application/json"}
        return 403, GCS_ACCESS_DENIED, {}

    return answer


def _is_gcs_delete(method: str, path: str) -> bool:
    return method == "DELETE"


GCS = Dialect(
    name="gcs",
    busy=(429, GCS_SLOW_DOWN),
    down=(503, GCS_SLOW_DOWN),
    later_page="continuation-token",
    page_size=4,
    listing_orphans=12,
    per_key_orphans={"native": 30, "fsspec": 6},
    retried_clients=("native",),
    is_delete=_is_gcs_delete,
    refusing_odd=_gcs_refusing_odd,
    plant=_plant_over_http,
    target=_endpoint_url,
    through=_endpoint_url_through,
)

DIALECTS = {dialect.name: dialect for dialect in (S3, AZURE, GCS)}
#: the (store, client) pairs of the cases whose fault the client retries
RETRIED = [(d.name, client) for d in DIALECTS.values() for client in d.retried_clients]
#: every (store, client) pair
EVERY = [(d.name, client) for d in DIALECTS.values() for client in CLIENTS]


def _on(pairs: list[tuple[str, str]]) -> pytest.MarkDecorator:
    """The test run on each (store, client) of `pairs`, its id `store-client`."""
    return pytest.mark.parametrize("store", pairs, indirect=True, ids="-".join)


# ------------------------------------------------------------ the store under test


@dataclass(frozen=True)
class Store:
    """A store's server through one client, and the store's dialect."""

    dialect: Dialect
    server: StoreServer  # through the client

    @property
    def options(self) -> dict[str, str]:
        return self.server.options

    def proxy(self, **faults: Any) -> StoreProxy:
        """A fault proxy in front of the server (`faults`: `StoreProxy`'s keywords)."""
        return StoreProxy(self.dialect.target(self.server), **faults)

    def cli(
        self, capsys: pytest.CaptureFixture[str], proxy: StoreProxy, *args: str
    ) -> tuple[int, list[str]]:
        """The CLI run through `proxy`: its exit code and its error lines."""
        return fault_cli(capsys, self.dialect.through(self.server, proxy.url), *args)

    def table(self, name: str, count: int) -> tuple[str, Storage, list[dict[str, int]]]:
        """A table of two commits (two live files) with `count` files no version references,
        its storage and the rows deltalake reads."""
        url = self.server.url(name)
        for ids in ([1, 2], [3]):
            write_arrow(
                url, pa.table({"id": pa.array(ids, pa.int64())}), storage_options=self.options
            )
        root = url.split("://", 1)[1]
        if count:
            self.dialect.plant(
                self.server, [f"{root}/orphan-{i:04d}.parquet" for i in range(count)]
            )
        return url, Storage.open(url, self.options), deltalake_rows(url, self.server.peer_options)

    def version(self, url: str) -> int:
        return load_snapshot(url, storage_options=self.options).version

    def checkpoint_version(self, url: str) -> int | None:
        return load_snapshot(url, storage_options=self.options).segment.checkpoint_version

    def reads_the_same(self, url: str, rows: list[dict[str, int]]) -> None:
        reads_the_same(self.server, url, rows)


@pytest.fixture(scope="module")
def servers() -> Iterator[Callable[[str], StoreServer]]:
    """A store's server by name, started when a test first needs it, stopped with the module."""
    with ExitStack() as stack:
        running: dict[str, StoreServer] = {}

        def server(name: str) -> StoreServer:
            if name not in running:
                running[name] = stack.enter_context(SERVERS[name]())
            return running[name]

        yield server


@pytest.fixture
def store(servers: Callable[[str], StoreServer], request: pytest.FixtureRequest) -> Store:
    name, client = request.param
    return Store(DIALECTS[name], servers(name).through(client))


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


# ------------------------------------------------------------ the cases


@_on(RETRIED)
def test_throttling_bursts_are_retried(store: Store, capsys: pytest.CaptureFixture[str]) -> None:
    url, storage, rows = store.table("burst", BURST_ORPHANS)
    seen = [0]

    def every_other(method: str, path: str, body: bytes) -> tuple[int, bytes] | None:
        seen[0] += 1
        return store.dialect.busy if seen[0] <= 24 and seen[0] % 2 else None

    with store.proxy(answer=every_other) as proxy:
        assert store.cli(capsys, proxy, "checkpoint", url) == (0, [])
        assert store.cli(capsys, proxy, "vacuum", url, *FORCED) == (0, [])
    assert seen[0] > 24
    assert orphans(storage) == 0
    store.reads_the_same(url, rows)


@_on(RETRIED)
def test_a_reset_in_the_middle_of_a_body_is_retried(
    store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    url, _storage, rows = store.table("reset", 0)
    resets: list[str] = []

    def first_commit_read(method: str, path: str) -> bool:
        first = _path(path).endswith("00000000000000000000.json")
        if method == "GET" and first and len(resets) < 2:
            resets.append(path)
            return True
        return False

    with store.proxy(reset=first_commit_read) as proxy:
        code, errors = store.cli(capsys, proxy, "checkpoint", url)
    assert resets and code == 0, errors
    assert store.checkpoint_version(url) == 1
    store.reads_the_same(url, rows)


@_on(EVERY)
def test_per_key_delete_refusals_leave_those_files_and_say_so(
    store: Store, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    count = store.dialect.per_key_orphans[store.options["client"]]
    refused = count // 2
    url, storage, rows = store.table("per-key", count)
    with store.proxy(answer=store.dialect.refusing_odd(store.server)) as proxy:
        assert store.cli(capsys, proxy, "vacuum", url, *FORCED) == (0, [])
    warned = _warnings(caplog)
    assert any(f"refused to delete {refused} file(s)" in w for w in warned), warned
    assert orphans(storage) == refused  # the refused ones are still there, only they
    last = store.version(url)
    (end,) = [a["commitInfo"] for a in read_commit_actions(storage, last) if "commitInfo" in a]
    assert end["operation"] == "VACUUM END"
    deleted = end["operationMetrics"]["numDeletedFiles"]
    assert deleted == str(count - refused)  # refused keys not counted, every other one is
    store.reads_the_same(url, rows)


@_on(RETRIED)
def test_deletes_that_keep_failing_fail_the_op_and_keep_the_table(
    store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    url, storage, rows = store.table("deletes-down", DOWN_ORPHANS)

    def down(method: str, path: str, body: bytes) -> tuple[int, bytes] | None:
        return store.dialect.down if store.dialect.is_delete(method, path) else None

    started = time.monotonic()
    with store.proxy(answer=down) as proxy:
        code, errors = store.cli(capsys, proxy, "vacuum", url, *FORCED)
    assert ends_well(code, errors), (code, errors)
    assert time.monotonic() - started < BOUNDED_S
    assert orphans(storage) == DOWN_ORPHANS  # none deleted, none counted
    store.reads_the_same(url, rows)


def _failing_pages(dialect: Dialect, times: int | None) -> tuple[Answer, list[int]]:
    """Listing requests for a later page failed `times` times (None: every time)."""
    failed = [0]

    def answer(method: str, path: str, body: bytes) -> tuple[int, bytes] | None:
        later_page = f"&{dialect.later_page}=" in "&" + _query(path)
        failing = times is None or failed[0] < times
        if _is_listing(method, path) and later_page and failing:
            failed[0] += 1
            return dialect.down
        return None

    return answer, failed


@_on(RETRIED)
def test_a_listing_page_failing_after_the_first_pages(
    store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    url, storage, rows = store.table("pages", store.dialect.listing_orphans)
    answer, failed = _failing_pages(store.dialect, times=2)
    with store.proxy(answer=answer, page_size=store.dialect.page_size) as proxy:
        assert store.cli(capsys, proxy, "vacuum", url, *FORCED) == (0, [])
        assert proxy.counts["GET list"] > 4
    assert failed == [2] and orphans(storage) == 0
    store.reads_the_same(url, rows)


@_on(RETRIED)
def test_a_listing_page_that_keeps_failing_fails_the_op_in_one_line(
    store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    url, storage, rows = store.table("pages-down", store.dialect.listing_orphans)
    version = store.version(url)
    answer, failed = _failing_pages(store.dialect, times=None)
    started = time.monotonic()
    with store.proxy(answer=answer, page_size=store.dialect.page_size) as proxy:
        code, errors = store.cli(capsys, proxy, "vacuum", url, *FORCED)
    assert failed[0] > 0 and code != 0 and ends_well(code, errors), (code, errors)
    assert time.monotonic() - started < BOUNDED_S
    # the listing is part of the plan: nothing was committed and nothing deleted
    assert store.version(url) == version
    assert orphans(storage) == store.dialect.listing_orphans
    store.reads_the_same(url, rows)


# ------------------------------------------------------------ the operation history (52.5)
# A run records itself in the operation history on the same store, through the same proxy: its
# requests meet the faults too. The run's own result never depends on the history; the history
# table is either one row longer or as it was, and always reads.


def _history(store: Store, name: str) -> tuple[str, str, OperationHistory]:
    """The history's location, its key prefix in the bucket, and the history (one row in)."""
    url = store.server.url(name)
    history = OperationHistory(url, store.options)
    history.append(history_record(url))  # the history exists before the faults begin
    return url, url.split(f"{BUCKET}/", 1)[1], history


def _under(prefix: str, path: str) -> bool:
    """Whether a request is for an object under `prefix`, or lists under it."""
    return f"/{prefix}" in _path(path) or f"prefix={prefix}" in _query(path)


@_on(RETRIED)
def test_the_history_records_a_run_through_throttling_bursts_and_resets(
    store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    url, _storage, rows = store.table("history-burst", 0)
    location, prefix, history = _history(store, "history-burst-log")
    seen = [0]
    resets: list[str] = []

    def every_other(method: str, path: str, body: bytes) -> tuple[int, bytes] | None:
        """Writes and listings of the history throttled, every other one (reads are reset)."""
        if not _under(prefix, path) or (method == "GET" and not _is_listing(method, path)):
            return None
        seen[0] += 1
        return store.dialect.busy if seen[0] <= 24 and seen[0] % 2 else None

    def first_log_read(method: str, path: str) -> bool:
        """The first read of a history commit cut off in the middle of its body."""
        commit = _path(path).endswith(".json") and not _is_listing(method, path)
        if method == "GET" and _under(prefix, path) and commit and not resets:
            resets.append(path)
            return True
        return False

    with store.proxy(answer=every_other, reset=first_log_read) as proxy:
        code, errors = store.cli(capsys, proxy, "checkpoint", url, "--history", location)
    assert (code, errors) == (0, []) and seen[0] > 0 and resets
    assert history_rows(history) == [("checkpoint", "succeeded")] * 2  # the run's row landed
    store.reads_the_same(url, rows)


@_on(RETRIED)
def test_a_history_the_store_refuses_to_write_leaves_the_run_done_and_the_history_whole(
    store: Store, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    url, _storage, rows = store.table("history-down", 0)
    location, prefix, history = _history(store, "history-down-log")
    before = history_rows(history)
    refused = [0]

    def writes_down(method: str, path: str, body: bytes) -> tuple[int, bytes] | None:
        if method in ("PUT", "POST") and _under(prefix, path):
            refused[0] += 1
            return store.dialect.down
        return None

    with store.proxy(answer=writes_down) as proxy:
        code, errors = store.cli(capsys, proxy, "checkpoint", url, "--history", location)
    assert code == 0 and refused[0] > 0, errors
    warned = _warnings(caplog)
    assert len(warned) == 1 and "could not record checkpoint" in warned[0], warned
    assert store.checkpoint_version(url) == 1
    assert history_rows(history) == before  # no row, no torn commit: it reads as it was
    store.reads_the_same(url, rows)
