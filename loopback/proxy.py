"""An HTTP proxy on loopback in front of a store server, to add latency and the store's own
throttling and refusal answers (tests and benchmarks; issue 13).

    with StoreProxy("http://127.0.0.1:5000", delay_s=0.02) as proxy:
        options = {**s3_options, "endpoint_url": proxy.url}

Every request is forwarded unchanged (Host header included, so signatures hold) after
`delay_s`. `answer` may instead produce the response itself: `(status, body)` or None to
forward, given the method, the path with query and the request body. The helpers below build
S3's answers: 503 SlowDown for a whole request, and a DeleteObjects reply that lists keys as
per-key errors (which S3 sends with status 200).

An answer may carry a third item, headers of its own (a `Content-Type` replacing the default
`application/xml`): Azure's blob batch reply is `multipart/mixed` with the request's boundary.

`page_size=N` splits every listing without a delimiter (S3/GCS XML `list-type=2`, Azure
`comp=list`) that the server answers in one page into pages of N entries: the first page
carries a continuation token of the proxy's own (`NextContinuationToken` with
`IsTruncated`, or Azure's `NextMarker`), and a request with that token (`continuation-token=`
or `marker=`) gets the next page from the proxy's copy of the whole answer, never from the
server. fake-gcs-server never pages an XML listing and Azurite pages at 5,000 blobs, so this
is how a test reaches a later page with a few objects (the `answer` hook sees such a request
first, so it can fail it).

`reset` (method, path with query) -> bool: for a request it accepts, the proxy forwards the
request, starts the upstream answer (status, headers, half of the body) and then drops the
connection: a reset in the middle of a body.

`gcs_xml=True` puts fake-gcs-server behind the XML API that the native client (Rust
object_store) writes with: fake-gcs serves reads, listings and deletes of it, but answers
uploads of percent-encoded names as JSON-API uploads it cannot parse. The proxy turns a PUT
(with its `x-goog-if-generation-match: 0`) into a JSON-API multipart upload with
`ifGenerationMatch=0`, a copy into a JSON-API rewrite, and holds XML multipart uploads'
parts until their completion uploads the whole object (an aborted or never completed upload
leaves nothing), and applies a listing's `start-after`, which fake-gcs-server ignores (and
every proxy applies an Azure listing's `startFrom`, which Azurite ignores).
Preconditions are fake-gcs-server's own.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import uuid
from collections.abc import Callable
from types import TracebackType
from typing import Any, Self
from urllib.parse import parse_qs, quote, unquote, urlsplit

Answer = Callable[[str, str, bytes], "tuple[int, bytes] | tuple[int, bytes, dict[str, str]] | None"]
Reset = Callable[[str, str], bool]

SLOW_DOWN = (
    b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
    b"<Message>Please reduce your request rate.</Message></Error>"
)


def is_delete_objects(method: str, path: str) -> bool:
    return method == "POST" and bool(re.search(r"[?&]delete(=|&|$)", path))


def delete_errors(body: bytes, code: str) -> bytes:
    """S3's DeleteObjects reply refusing every key of the request with `code`."""
    keys = re.findall(rb"<Key>(.*?)</Key>", body)
    errors = b"".join(
        b"<Error><Key>" + key + b"</Key><Code>" + code.encode() + b"</Code>"
        b"<Message>refused by the test proxy</Message></Error>"
        for key in keys
    )
    return (
        b'<?xml version="1.0" encoding="UTF-8"?>'
        b'<DeleteResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
        + errors
        + b"</DeleteResult>"
    )


class StoreProxy:
    """The proxy, serving from a thread of its own until the block ends."""

    def __init__(
        self,
        target: str,
        *,
        delay_s: float = 0.0,
        answer: Answer | None = None,
        reset: Reset | None = None,
        gcs_xml: bool = False,
        drop_headers: frozenset[str] = frozenset(),
        page_size: int | None = None,
    ):
        self.target = target.rstrip("/")
        self.delay_s = delay_s
        self.answer = answer
        self.reset = reset
        self.gcs_xml = gcs_xml
        #: request headers (lower case) the proxy does not forward: `if-none-match` makes
        #: the server behind it one without conditional writes
        self.drop_headers = drop_headers
        self.page_size = page_size
        #: a paged listing by the proxy's tokens: (envelope, all entries, "xml" or "azure")
        self._pages: dict[str, tuple[str, list[str], str]] = {}
        self._uploads: dict[str, tuple[str, str, dict[int, bytes]]] = {}
        self.requests = 0
        #: requests by kind ("GET list", "PUT", "POST delete", ...), for request counts
        self.counts: dict[str, int] = {}
        self.url = ""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: object = None

    def __enter__(self) -> Self:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=30)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(timeout=30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    async def _start(self) -> None:
        import aiohttp
        from aiohttp import web

        self._session = aiohttp.ClientSession(auto_decompress=False)
        app = web.Application(client_max_size=1 << 30)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"
        self._runner = runner

    async def _stop(self) -> None:
        await self._session.close()
        await self._runner.cleanup()  # type: ignore[attr-defined]

    async def _handle(self, request: object) -> object:
        from aiohttp import web

        assert isinstance(request, web.Request)
        body = await request.read()
        self.requests += 1
        kind = request_kind(request.method, request.path_qs)
        self.counts[kind] = self.counts.get(kind, 0) + 1
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        own = self.answer(request.method, request.path_qs, body) if self.answer else None
        if own is not None:
            status, payload, *extra = own
            own_headers = {"Content-Type": "application/xml", **(extra[0] if extra else {})}
            return web.Response(status=status, body=payload, headers=own_headers)
        paging = self.page_size is not None and _pageable(request.method, request.path_qs)
        if paging and (token := _page_token(request.path_qs)) in self._pages:
            return self._next_page(token)
        response = await self._forward(request, body)
        if paging and response.status == 200 and isinstance(response.body, bytes):
            return self._first_page(response)
        return response

    async def _forward(self, request: Any, body: bytes) -> Any:
        """The server's answer to the request (through the GCS XML shim and the listing
        filters when they apply; cut off mid-body when `reset` accepts it)."""
        from aiohttp import web

        dropped = {"content-length", *self.drop_headers}
        headers = {k: v for k, v in request.headers.items() if k.lower() not in dropped}
        if self.gcs_xml:
            headers["Host"] = urlsplit(self.target).netloc
            translated = await self._gcs_xml(request.method, request.path_qs, headers, body)
            if translated is not None:
                return translated
        if request.method == "GET" and "startFrom=" in request.path_qs:
            start = parse_qs(urlsplit(request.path_qs).query).get("startFrom", [""])[0]
            return await self._listing_after(
                request.path_qs, headers, start, entry="Blob", name="Name", inclusive=True
            )
        if self.reset is not None and self.reset(request.method, request.path_qs):
            return await self._reset_mid_body(request, headers, body)
        async with self._session.request(
            request.method,
            self.target + request.path_qs,
            headers=headers,
            data=body or None,  # no Content-Length: 0 the client did not sign
            allow_redirects=False,
            skip_auto_headers=_unsent(headers),
        ) as upstream:
            payload = await upstream.read()
            drop = {"transfer-encoding", "connection"}
            if request.method != "HEAD":  # a HEAD answer keeps the object's length
                drop.add("content-length")
            out = {k: v for k, v in upstream.headers.items() if k.lower() not in drop}
            if request.method == "HEAD":
                return web.Response(status=upstream.status, headers=out)
            return web.Response(status=upstream.status, body=payload, headers=out)

    def _first_page(self, response: Any) -> Any:
        """The server's one-page listing split at `page_size` (see the module docstring)."""
        text = response.body.decode()
        flavour = "azure" if "<EnumerationResults" in text else "xml"
        entry = _ENTRY[flavour]
        entries = re.findall(rf"<{entry}>.*?</{entry}>", text, flags=re.DOTALL)
        paged = re.search(r"<NextMarker>[^<]|<NextContinuationToken>[^<]", text)
        if paged or len(entries) <= (self.page_size or 0):
            return response  # the server paged it itself, or one page is all there is
        envelope = re.sub(rf"<{entry}>.*?</{entry}>", "", text, flags=re.DOTALL)
        after = "<Blobs>" if flavour == "azure" else "</KeyCount>"
        envelope = envelope.replace(after, after + "<!--entries-->", 1)
        return self._page_from(f"proxy-page-{uuid.uuid4().hex}", envelope, entries, flavour, 0)

    def _next_page(self, token: str) -> Any:
        envelope, entries, flavour = self._pages[token]
        base, offset = token.rsplit("-at-", 1)
        return self._page_from(base, envelope, entries, flavour, int(offset))

    def _page_from(
        self, base: str, envelope: str, entries: list[str], flavour: str, offset: int
    ) -> Any:
        """The page of `entries` from `offset`, naming the next page's token (kept, so a
        retried request for a page gets it again) unless it is the last."""
        from aiohttp import web

        end = offset + (self.page_size or len(entries))
        following = f"{base}-at-{end}" if end < len(entries) else ""
        if following:
            self._pages[following] = (envelope, entries, flavour)
        body = _page(envelope, entries[offset:end], flavour, following)
        return web.Response(status=200, body=body.encode(), content_type="application/xml")

    async def _reset_mid_body(self, request: Any, headers: dict[str, str], body: bytes) -> Any:
        from aiohttp import web

        async with self._session.request(
            request.method,
            self.target + request.path_qs,
            headers=headers,
            data=body or None,
            skip_auto_headers=_unsent(headers),
        ) as upstream:
            payload = await upstream.read()
            drop = {"transfer-encoding", "connection", "content-length"}
            out = {k: v for k, v in upstream.headers.items() if k.lower() not in drop}
        response = web.StreamResponse(status=upstream.status, headers=out)
        response.content_length = len(payload)
        await response.prepare(request)
        await response.write(payload[: len(payload) // 2])
        assert request.transport is not None
        request.transport.abort()  # the client sees the connection reset mid-body
        return response

    async def _gcs_xml(
        self, method: str, path_qs: str, headers: dict[str, str], body: bytes
    ) -> Any:
        """fake-gcs-server's JSON API doing what an XML-API write asks (see the module
        docstring); None for requests fake-gcs-server serves itself."""
        from aiohttp import web

        parts = urlsplit(path_qs)
        query = parse_qs(parts.query, keep_blank_values=True)
        bucket, _, encoded = parts.path.lstrip("/").partition("/")
        name = unquote(encoded)
        if method == "GET" and "start-after" in query and "list-type" in query:
            return await self._listing_after(path_qs, headers, query["start-after"][0])
        json_api = parts.path.startswith(("/upload/", "/storage/", "/download/"))
        if not name or json_api or method not in ("PUT", "POST", "DELETE"):
            return None
        if method == "POST" and "uploads" in query:
            upload = uuid.uuid4().hex
            self._uploads[upload] = (bucket, name, {})
            xml = (
                f"<InitiateMultipartUploadResult><Bucket>{bucket}</Bucket><Key>{name}</Key>"
                f"<UploadId>{upload}</UploadId></InitiateMultipartUploadResult>"
            )
            return web.Response(status=200, body=xml.encode(), content_type="application/xml")
        if "uploadId" in query:
            upload = query["uploadId"][0]
            if upload not in self._uploads:
                return web.Response(status=404, body=b"<Error><Code>NoSuchUpload</Code></Error>")
            if method == "PUT":
                number = int(query["partNumber"][0])
                self._uploads[upload][2][number] = body
                return web.Response(status=200, headers={"ETag": f'"part-{number}"'})
            if method == "DELETE":
                del self._uploads[upload]
                return web.Response(status=204)
            _bucket, _name, held = self._uploads.pop(upload)
            data = b"".join(held[n] for n in sorted(held))
            return await self._media_upload(bucket, name, data, headers, complete=True)
        if method == "PUT" and "x-goog-copy-source" in {k.lower() for k in headers}:
            source = next(v for k, v in headers.items() if k.lower() == "x-goog-copy-source")
            source_bucket, _, source_name = unquote(source).lstrip("/").partition("/")
            url = (
                f"{self.target}/storage/v1/b/{source_bucket}/o/{quote(source_name, safe='')}"
                f"/rewriteTo/b/{bucket}/o/{quote(name, safe='')}"
            )
            async with self._session.post(url, data=b"{}") as upstream:
                payload = await upstream.read()
            return web.Response(status=upstream.status, body=payload)
        if method == "PUT":
            return await self._media_upload(bucket, name, body, headers, complete=False)
        return None

    async def _listing_after(
        self,
        path_qs: str,
        headers: dict[str, str],
        after: str,
        *,
        entry: str = "Contents",
        name: str = "Key",
        inclusive: bool = False,
    ) -> Any:
        """An XML listing from `start-after` (GCS) or `startFrom` (Azure, inclusive), which
        fake-gcs-server and Azurite ignore: their answer with the keys before it left out."""
        from aiohttp import web

        async with self._session.get(self.target + path_qs, headers=headers) as upstream:
            payload = (await upstream.read()).decode()
            status = upstream.status

        def kept(match: re.Match[str]) -> str:
            key = re.search(rf"<{name}>(.*?)</{name}>", match.group(0))
            if key is None:
                return match.group(0)
            found = unquote(key.group(1))
            return match.group(0) if found > after or (inclusive and found == after) else ""

        body = re.sub(rf"<{entry}>.*?</{entry}>", kept, payload, flags=re.DOTALL)
        return web.Response(status=status, body=body.encode(), content_type="application/xml")

    async def _media_upload(
        self, bucket: str, name: str, data: bytes, headers: dict[str, str], *, complete: bool
    ) -> Any:
        from aiohttp import web

        # a multipart (metadata + media) upload: fake-gcs-server checks ifGenerationMatch on
        # it, not on a plain media upload
        url = f"{self.target}/upload/storage/v1/b/{bucket}/o?uploadType=multipart"
        lowered = {k.lower(): v for k, v in headers.items()}
        if "x-goog-if-generation-match" in lowered:
            url += f"&ifGenerationMatch={lowered['x-goog-if-generation-match']}"
        boundary = uuid.uuid4().hex
        related = (
            (
                f"--{boundary}\r\nContent-Type: application/json\r\n\r\n"
                f"{json.dumps({'name': name})}\r\n--{boundary}\r\n"
                "Content-Type: application/octet-stream\r\n\r\n"
            ).encode()
            + data
            + f"\r\n--{boundary}--".encode()
        )
        async with self._session.post(
            url,
            data=related,
            headers={"Content-Type": f"multipart/related; boundary={boundary}"},
        ) as upstream:
            payload = await upstream.read()
        if upstream.status == 412:
            error = b"<Error><Code>PreconditionFailed</Code></Error>"
            return web.Response(status=412, body=error, content_type="application/xml")
        if upstream.status >= 300:
            return web.Response(status=upstream.status, body=payload)
        created = json.loads(payload)
        etag = f'"{created.get("etag", "")}"'
        out = {"ETag": etag, "x-goog-generation": str(created.get("generation", ""))}
        if complete:
            xml = f"<CompleteMultipartUploadResult><ETag>{etag}</ETag></CompleteMultipartUploadResult>"
            return web.Response(status=200, body=xml.encode(), headers=out)
        return web.Response(status=200, headers=out)


_ENTRY = {"xml": "Contents", "azure": "Blob"}


def _pageable(method: str, path_qs: str) -> bool:
    query = parse_qs(urlsplit(path_qs).query, keep_blank_values=True)
    listing = "list-type" in query or query.get("comp") == ["list"]
    return method == "GET" and listing and not query.get("delimiter", [""])[0]


def _page_token(path_qs: str) -> str:
    query = parse_qs(urlsplit(path_qs).query)
    return (query.get("continuation-token") or query.get("marker") or [""])[0]


def _page(envelope: str, entries: list[str], flavour: str, token: str) -> str:
    """A listing of `entries` in the server's `envelope` (its entries taken out, at
    `<!--entries-->`), naming `token` as the next page's ("" for the last page)."""
    body = envelope.replace("<!--entries-->", "".join(entries), 1)
    if flavour == "azure":
        body = re.sub(r"<NextMarker\s*/>|<NextMarker>.*?</NextMarker>", "", body)
        return body.replace(
            "</EnumerationResults>", f"<NextMarker>{token}</NextMarker></EnumerationResults>"
        )
    body = re.sub(r"<KeyCount>\d+</KeyCount>", f"<KeyCount>{len(entries)}</KeyCount>", body)
    body = re.sub(r"<IsTruncated>.*?</IsTruncated>", "", body)
    more = f"<IsTruncated>true</IsTruncated><NextContinuationToken>{token}</NextContinuationToken>"
    tail = more if token else "<IsTruncated>false</IsTruncated>"
    return body.replace("</ListBucketResult>", tail + "</ListBucketResult>")


def _unsent(headers: dict[str, str]) -> tuple[str, ...]:
    """Headers aiohttp would add that the client did not send: Azure's shared-key signature
    covers Content-Type, so an added one makes the server refuse the request."""
    return () if any(k.lower() == "content-type" for k in headers) else ("Content-Type",)


def request_kind(method: str, path_qs: str) -> str:
    """What a request is, for the counts: its method, and for S3, Azure and GCS the kind of
    listing, bulk delete or multipart step its query names."""
    query = urlsplit(path_qs).query
    for marker, name in (
        ("list-type=2", "list"),
        ("comp=list", "list"),
        ("delete", "bulk delete"),
        ("comp=batch", "bulk delete"),
        ("uploads", "multipart start"),
        ("partNumber", "multipart part"),
        ("comp=block", "block"),
        ("uploadId", "multipart end"),
        ("comp=blocklist", "block list"),
    ):
        if re.search(rf"(^|&){re.escape(marker)}(=|&|$)", query) or marker in query.split("&"):
            return f"{method} {name}"
    return method


__all__ = ["SLOW_DOWN", "StoreProxy", "delete_errors", "is_delete_objects", "request_kind"]
