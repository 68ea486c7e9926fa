"""The store fault cases of `test_object_store_faults.py` (S3) on Azure Blob (Azurite) and GCS
(fake-gcs-server), through the native client (obstore), injected by a `StoreProxy` in front of
the server (issue 52 item 5):

- throttling bursts (Azure `503 ServerBusy`, GCS `429`) on every other request: checkpoint and a
  forced vacuum succeed and every orphan goes;
- a connection reset in the middle of the first commit's body: retried, the checkpoint lands;
- per-key delete refusals: Azure deletes in blob batches (`comp=batch`), so the proxy answers
  a batch itself, deleting the even orphans and refusing the odd ones inside the batch reply
  (a `403 AuthorizationFailure` sub-response each, as Azure answers a blob it may not
  delete); GCS deletes object by object (XML API `DELETE`), and the odd ones get `403
  AccessDenied`. The vacuum ends 0 with a warning, the refused files stay and are not counted,
  and every other orphan goes: more orphans than one request takes (300 on Azure, 30 on GCS),
  so a refusal in the first request must not stop the rest. The fsspec clients (adlfs,
  gcsfs: single DELETEs, refused `403`) run this case too;
- deletes that keep failing (`503`): one error line or success, nothing counted;
- a later listing page failing (`marker=` on Azure, `continuation-token=` on GCS' XML API),
  twice and then answered, and for good: the op fails in one line in bounded time, with nothing
  committed or deleted. Azurite pages at 5,000 blobs and fake-gcs-server never pages an XML
  listing, so the proxy pages the listings itself (`page_size=4`, its own tokens): a handful
  of objects give real later pages;
- the operation history on the same store through bursts and resets, and a store refusing its
  writes (the two history tests of the S3 file).

Every op runs as the CLI runs it and must end with success (exit 0) or one error line (never
an internal error, exit 70), and the table must read as before or as after: deltalake, through
its own client, reads the same rows, and the table keeps its two live files.

How the proxy goes in: Azure's endpoint is the `BlobEndpoint` inside `connection_string`,
rewritten to the proxy's URL plus the account path; the proxy's target is Azurite's
scheme://host:port. GCS' native client talks to fake-gcs-server through the XML shim
(`StoreServer.native_options`), so the chain is fault proxy -> shim -> fake-gcs-server.

Left to S3 (`test_object_store_faults.py`), and why:

- the fsspec clients in every case but the per-key refusals (a `403` is not retried, so it
  is fast). adlfs goes through the Azure SDK, whose retry policy waits about 15 s before a
  retry (exponential from there), so one burst is minutes; gcsfs backs off 1-2 s growing with
  each retry of a request, so the bursts here are tens of seconds. Retrying is the clients'
  own there; what delta-ops does above them (listings, commits, the history) is the code s3fs
  runs through in the S3 file.
- per-key errors in a DeleteObjects reply: that is S3's own bulk delete. Azure's per-key
  errors are covered here (inside the blob batch reply); GCS' native client deletes one key
  per request, so a refusal is the request's own answer.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterator
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
from loopback.proxy import Answer, StoreProxy
from loopback.servers import AZURE_ACCOUNT, BUCKET, StoreServer, serve_azure, serve_gcs
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

SERVE = {"azure": serve_azure, "gcs": serve_gcs}
SERVER_BUSY = (
    b'<?xml version="1.0" encoding="utf-8"?><Error><Code>ServerBusy</Code>'
    b"<Message>The server is currently unable to receive requests. Please retry your request."
    b"</Message></Error>"
)
GCS_BUSY = (
    b"<?xml version='1.0' encoding='UTF-8'?><Error><Code>SlowDown</Code>"
    b"<Message>Please reduce your request rate.</Message></Error>"
)
#: the store's answer to a request it throttles in a burst, and to one while it is down
BUSY = {"azure": (503, SERVER_BUSY), "gcs": (429, GCS_BUSY)}
DOWN = {"azure": (503, SERVER_BUSY), "gcs": (503, GCS_BUSY)}
ACCESS_DENIED = (
    b"<?xml version='1.0' encoding='UTF-8'?><Error><Code>AccessDenied</Code>"
    b"<Message>Access denied.</Message></Error>"
)
PAGE_SIZE = 4
#: orphans of the per-key refusal case: more than one request's worth (Azure's blob batch
#: takes 256 keys; obstore sends GCS' single DELETEs 10 at a time), so a refusal in the first
#: request must not stop the others
PER_KEY_ORPHANS = {"azure": 300, "gcs": 30}


@dataclass(frozen=True)
class CloudStore:
    """A store server through one client, and how a fault proxy goes in front of it."""

    kind: str  # "azure" or "gcs"
    running: StoreServer
    client: str = "native"

    @property
    def server(self) -> StoreServer:
        return self.running.through(self.client)

    @property
    def target(self) -> str:
        """Where the fault proxy forwards to: Azurite's scheme://host:port, or the GCS shim."""
        if self.kind == "azure":
            parts = urlsplit(self.server.endpoint)
            return f"{parts.scheme}://{parts.netloc}"
        return self.server.options["endpoint_url"]

    def through(self, proxy: StoreProxy) -> dict[str, str]:
        """The storage options that reach the store through `proxy`."""
        options = dict(self.server.options)
        if self.kind == "azure":
            endpoint = f"BlobEndpoint={proxy.url}/{AZURE_ACCOUNT};"
            connection = re.sub(r"BlobEndpoint=[^;]*;?", endpoint, options["connection_string"])
            return {**options, "connection_string": connection}
        return {**options, "endpoint_url": proxy.url}


@pytest.fixture(scope="module", params=sorted(SERVE))
def store(request: pytest.FixtureRequest) -> Iterator[CloudStore]:
    with SERVE[request.param]() as running:
        yield CloudStore(request.param, running)


def _table(store: CloudStore, name: str, count: int) -> tuple[str, Storage, list[dict[str, int]]]:
    """A table of two commits (two live files) with `count` files no version references."""
    server = store.server
    url = server.url(name)
    for ids in ([1, 2], [3]):
        write_arrow(
            url, pa.table({"id": pa.array(ids, pa.int64())}), storage_options=server.options
        )
    root = url.split("://", 1)[1]
    if count:
        server.fsspec().pipe({f"{root}/orphan-{i:04d}.parquet": b"x" for i in range(count)})
    return url, Storage.open(url, server.options), deltalake_rows(url, server.peer_options)


def _cli(
    capsys: pytest.CaptureFixture[str], store: CloudStore, proxy: StoreProxy, *args: str
) -> tuple[int, list[str]]:
    return fault_cli(capsys, store.through(proxy), *args)


def _reads_the_same(store: CloudStore, url: str, rows: list[dict[str, int]]) -> None:
    reads_the_same(store.server, url, rows)


def _path(path_qs: str) -> str:
    """The request's object path, decoded (GCS' XML API percent-encodes every `/` and `.`)."""
    return unquote(path_qs.split("?", 1)[0])


def _query(path_qs: str) -> str:
    return unquote(path_qs.partition("?")[2])


def _is_listing(method: str, path_qs: str) -> bool:
    query = "&" + _query(path_qs)
    return method == "GET" and ("&comp=list" in query or "&list-type=2" in query)


def _is_delete(store: CloudStore, method: str, path_qs: str) -> bool:
    if store.kind == "azure":
        return method == "POST" and "comp=batch" in path_qs
    return method == "DELETE"


def test_throttling_bursts_are_retried(
    store: CloudStore, capsys: pytest.CaptureFixture[str]
) -> None:
    url, storage, rows = _table(store, "burst", 12)
    seen = [0]

    def every_other(method: str, path: str, body: bytes) -> tuple[int, bytes] | None:
        seen[0] += 1
        return BUSY[store.kind] if seen[0] <= 24 and seen[0] % 2 else None

    with StoreProxy(store.target, answer=every_other) as proxy:
        assert _cli(capsys, store, proxy, "checkpoint", url) == (0, [])
        assert _cli(capsys, store, proxy, "vacuum", url, *FORCED) == (0, [])
    assert seen[0] > 24
    assert orphans(storage) == 0
    _reads_the_same(store, url, rows)


def test_a_reset_in_the_middle_of_a_body_is_retried(
    store: CloudStore, capsys: pytest.CaptureFixture[str]
) -> None:
    url, _storage, rows = _table(store, "reset", 0)
    resets: list[str] = []

    def first_commit_read(method: str, path: str) -> bool:
        first = _path(path).endswith("00000000000000000000.json")
        if method == "GET" and first and len(resets) < 2:
            resets.append(path)
            return True
        return False

    with StoreProxy(store.target, reset=first_commit_read) as proxy:
        code, errors = _cli(capsys, store, proxy, "checkpoint", url)
    assert resets and code == 0, errors
    assert load_snapshot(url, storage_options=store.server.options).segment.checkpoint_version == 1
    _reads_the_same(store, url, rows)


def _number(path: str) -> int:
    """The N of a request for `.../orphan-NNNN.parquet`, else -1."""
    found = re.search(r"orphan-(\d{4})\.parquet", unquote(path))
    return int(found.group(1)) if found else -1


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
                error = (
                    '<?xml version="1.0" encoding="utf-8"?><Error><Code>AuthorizationFailure'
                    "</Code><Message>This request is not authorized to perform this operation."
                    "</Message></Error>"
                )
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


def test_per_key_delete_refusals_leave_those_files_and_say_so(
    store: CloudStore, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    count = PER_KEY_ORPHANS[store.kind]
    url, storage, rows = _table(store, "per-key", count)

    def odd(path: str) -> bool:
        return _number(path) % 2 == 1

    def refuse_odd(method: str, path: str, body: bytes) -> tuple[int, bytes] | None:
        """GCS: a DELETE of an odd orphan refused; the rest go to the server."""
        return (403, ACCESS_DENIED) if method == "DELETE" and odd(path) else None

    answer = _batch_refusing(store.server.fsspec(), odd) if store.kind == "azure" else refuse_odd
    with StoreProxy(store.target, answer=answer) as proxy:
        code, errors = _cli(capsys, store, proxy, "vacuum", url, *FORCED)
    assert code == 0, errors
    warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert any(f"refused to delete {count // 2} file(s)" in w for w in warned), warned
    assert orphans(storage) == count // 2  # the refused ones are still there, only they
    last = load_snapshot(url, storage_options=store.server.options).version
    (end,) = [a["commitInfo"] for a in read_commit_actions(storage, last) if "commitInfo" in a]
    assert end["operation"] == "VACUUM END"
    deleted = end["operationMetrics"]["numDeletedFiles"]
    assert deleted == str(count - count // 2)  # refused keys not counted, every other one is
    _reads_the_same(store, url, rows)


def _refused_alone(kind: str) -> tuple[int, bytes, dict[str, str]]:
    """A single DELETE refused as the fsspec clients' APIs refuse it: Azure's `403
    AuthorizationFailure`, GCS' JSON API `403 forbidden`."""
    if kind == "azure":
        error = (
            b'<?xml version="1.0" encoding="utf-8"?><Error><Code>AuthorizationFailure</Code>'
            b"<Message>This request is not authorized to perform this operation.</Message>"
            b"</Error>"
        )
        return 403, error, {"x-ms-error-code": "AuthorizationFailure"}
    error = (
        b'{"error": {"code": 403, "message": "Access denied.", "errors": [{"reason": '
        b'"forbidden", "message": "Access denied."}]}}'
    )
    return 403, error, {"Content-Type": "application/json"}


def test_per_key_delete_refusals_through_fsspec(
    store: CloudStore, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """adlfs and gcsfs delete object by object and raise on a refusal without saying which
    went (adlfs a RuntimeError naming the whole batch): the refused ones stay, uncounted."""
    fsspec = CloudStore(store.kind, store.running, "fsspec")
    url, storage, rows = _table(fsspec, "per-key-fsspec", 6)

    def refuse_odd(method: str, path: str, body: bytes) -> tuple[int, bytes, dict[str, str]] | None:
        return _refused_alone(store.kind) if method == "DELETE" and _number(path) % 2 else None

    with StoreProxy(fsspec.target, answer=refuse_odd) as proxy:
        code, errors = _cli(capsys, fsspec, proxy, "vacuum", url, *FORCED)
    assert (code, errors) == (0, [])
    warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert any("refused to delete 3 file(s)" in w for w in warned), warned
    assert orphans(storage) == 3
    last = load_snapshot(url, storage_options=fsspec.server.options).version
    (end,) = [a["commitInfo"] for a in read_commit_actions(storage, last) if "commitInfo" in a]
    assert end["operationMetrics"]["numDeletedFiles"] == "3"
    _reads_the_same(fsspec, url, rows)


def test_deletes_that_keep_failing_fail_the_op_and_keep_the_table(
    store: CloudStore, capsys: pytest.CaptureFixture[str]
) -> None:
    url, storage, rows = _table(store, "deletes-down", 6)

    def down(method: str, path: str, body: bytes) -> tuple[int, bytes] | None:
        return DOWN[store.kind] if _is_delete(store, method, path) else None

    started = time.monotonic()
    with StoreProxy(store.target, answer=down) as proxy:
        code, errors = _cli(capsys, store, proxy, "vacuum", url, *FORCED)
    assert ends_well(code, errors), (code, errors)
    assert time.monotonic() - started < 60
    assert orphans(storage) == 6  # none deleted, none counted
    _reads_the_same(store, url, rows)


def _failing_pages(store: CloudStore, times: int | None) -> tuple[Answer, list[int]]:
    """Listing requests for a later page (the proxy's own token) failed `times` times (None:
    every time)."""
    failed = [0]
    token = "&marker=" if store.kind == "azure" else "&continuation-token="

    def answer(method: str, path: str, body: bytes) -> tuple[int, bytes] | None:
        later_page = token in "&" + _query(path)
        failing = times is None or failed[0] < times
        if _is_listing(method, path) and later_page and failing:
            failed[0] += 1
            return DOWN[store.kind]
        return None

    return answer, failed


def test_a_listing_page_failing_after_the_first_pages(
    store: CloudStore, capsys: pytest.CaptureFixture[str]
) -> None:
    url, storage, rows = _table(store, "pages", 12)  # 4 or more pages of 4
    answer, failed = _failing_pages(store, times=2)
    with StoreProxy(store.target, answer=answer, page_size=PAGE_SIZE) as proxy:
        assert _cli(capsys, store, proxy, "vacuum", url, *FORCED) == (0, [])
        assert proxy.counts["GET list"] > 4
    assert failed == [2] and orphans(storage) == 0
    _reads_the_same(store, url, rows)


def test_a_listing_page_that_keeps_failing_fails_the_op_in_one_line(
    store: CloudStore, capsys: pytest.CaptureFixture[str]
) -> None:
    url, storage, rows = _table(store, "pages-down", 12)
    version = load_snapshot(url, storage_options=store.server.options).version
    answer, failed = _failing_pages(store, times=None)
    started = time.monotonic()
    with StoreProxy(store.target, answer=answer, page_size=PAGE_SIZE) as proxy:
        code, errors = _cli(capsys, store, proxy, "vacuum", url, *FORCED)
    assert failed[0] > 0 and code != 0 and ends_well(code, errors), (code, errors)
    assert time.monotonic() - started < 60
    # the listing is part of the plan: nothing was committed and nothing deleted
    assert load_snapshot(url, storage_options=store.server.options).version == version
    assert orphans(storage) == 12
    _reads_the_same(store, url, rows)


# ------------------------------------------------------------ the operation history (52.5)
# A run records itself in the operation history on the same store, through the same proxy: its
# requests meet the faults too. The run's own result never depends on the history; the history
# table is either one row longer or as it was, and always reads.


def _history(store: CloudStore, name: str) -> tuple[str, str, OperationHistory]:
    """The history's location, its key prefix in the bucket, and the history (one row in)."""
    url = store.server.url(name)
    history = OperationHistory(url, store.server.options)
    history.append(history_record(url))  # the history exists before the faults begin
    return url, url.split(f"{BUCKET}/", 1)[1], history


def _on(prefix: str, path: str) -> bool:
    """Whether a request is for an object under `prefix`, or lists under it."""
    return f"/{prefix}" in _path(path) or f"prefix={prefix}" in _query(path)


def test_the_history_records_a_run_through_throttling_bursts_and_resets(
    store: CloudStore, capsys: pytest.CaptureFixture[str]
) -> None:
    url, _storage, rows = _table(store, "history-burst", 0)
    location, prefix, history = _history(store, "history-burst-log")
    seen, resets = [0], []

    def every_other(method: str, path: str, body: bytes) -> tuple[int, bytes] | None:
        """Writes and listings of the history throttled, every other one (reads are reset)."""
        if not _on(prefix, path) or (method == "GET" and not _is_listing(method, path)):
            return None
        seen[0] += 1
        return BUSY[store.kind] if seen[0] <= 24 and seen[0] % 2 else None

    def first_log_read(method: str, path: str) -> bool:
        """The first read of a history commit cut off in the middle of its body."""
        commit = _path(path).endswith(".json") and not _is_listing(method, path)
        if method == "GET" and _on(prefix, path) and commit and not resets:
            resets.append(path)
            return True
        return False

    with StoreProxy(store.target, answer=every_other, reset=first_log_read) as proxy:
        code, errors = _cli(capsys, store, proxy, "checkpoint", url, "--history", location)
    assert (code, errors) == (0, []) and seen[0] > 0 and resets
    assert history_rows(history) == [("checkpoint", "succeeded")] * 2  # the run's row landed
    _reads_the_same(store, url, rows)


def test_a_history_the_store_refuses_to_write_leaves_the_run_done_and_the_history_whole(
    store: CloudStore, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    url, _storage, rows = _table(store, "history-down", 0)
    location, prefix, history = _history(store, "history-down-log")
    before = history_rows(history)
    refused = [0]

    def writes_down(method: str, path: str, body: bytes) -> tuple[int, bytes] | None:
        if method in ("PUT", "POST") and _on(prefix, path):
            refused[0] += 1
            return DOWN[store.kind]
        return None

    with StoreProxy(store.target, answer=writes_down) as proxy:
        code, errors = _cli(capsys, store, proxy, "checkpoint", url, "--history", location)
    assert code == 0 and refused[0] > 0, errors
    warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warned) == 1 and "could not record checkpoint" in warned[0], warned
    assert load_snapshot(url, storage_options=store.server.options).segment.checkpoint_version == 1
    assert history_rows(history) == before  # no row, no torn commit: it reads as it was
    _reads_the_same(store, url, rows)
