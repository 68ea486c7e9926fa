"""An HTTP proxy on loopback in front of a store server, to add latency and the store's own
throttling and refusal answers (tests and benchmarks; issue 13).

    with StoreProxy("http://127.0.0.1:5000", delay_s=0.02) as proxy:
        options = {**s3_options, "endpoint_url": proxy.url}

Every request is forwarded unchanged (Host header included, so signatures hold) after
`delay_s`. `answer` may instead produce the response itself: `(status, body)` or None to
forward, given the method, the path with query and the request body. The helpers below build
S3's answers: 503 SlowDown for a whole request, and a DeleteObjects reply that lists keys as
per-key errors (which S3 sends with status 200).
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Self

Answer = Callable[[str, str, bytes], "tuple[int, bytes] | None"]

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

    def __init__(self, target: str, *, delay_s: float = 0.0, answer: Answer | None = None):
        self.target = target.rstrip("/")
        self.delay_s = delay_s
        self.answer = answer
        self.requests = 0
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
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        own = self.answer(request.method, request.path_qs, body) if self.answer else None
        if own is not None:
            status, payload = own
            return web.Response(status=status, body=payload, content_type="application/xml")
        headers = {k: v for k, v in request.headers.items() if k.lower() not in ("content-length",)}
        async with self._session.request(
            request.method,
            self.target + request.path_qs,
            headers=headers,
            data=body,
            allow_redirects=False,
        ) as upstream:
            payload = await upstream.read()
            drop = {"transfer-encoding", "connection"}
            if request.method != "HEAD":  # a HEAD answer keeps the object's length
                drop.add("content-length")
            out = {k: v for k, v in upstream.headers.items() if k.lower() not in drop}
            if request.method == "HEAD":
                return web.Response(status=upstream.status, headers=out)
            return web.Response(status=upstream.status, body=payload, headers=out)


__all__ = ["SLOW_DOWN", "StoreProxy", "delete_errors", "is_delete_objects"]
