"""A minimal, fast S3-compatible server for the object-store benchmark (issue 28): the server
must not be the floor of what is measured.

moto, the S3 server of the correctness tests, parses and renders every request in Python
objects and spends more CPU on a 10,000-key vacuum than both clients together. This one keeps
objects in memory (a dict and a sorted key list), renders listing pages from per-object XML
fragments made once at PUT, ignores signatures and serves from one asyncio process (uvloop when
installed). It implements what delta-ops' clients (obstore, s3fs) and delta-rs send, path-style:

- buckets: create (PUT), HEAD, ListBuckets (GET /);
- ListObjectsV2: prefix, delimiter, start-after, continuation-token, max-keys (<= 1000),
  encoding-type=url;
- GET (Range: ``bytes=a-b``, ``bytes=a-``, suffix ``bytes=-N``; If-Match, If-None-Match), HEAD;
- PUT (If-None-Match: * -> 412 when the key exists, If-Match), CopyObject
  (``x-amz-copy-source``), DELETE, DeleteObjects (POST ``?delete``, per-key results, Quiet);
- multipart uploads: create, upload part, complete (If-None-Match: *), abort;
- aws-chunked request bodies (botocore's streaming checksums).

For benchmarks only: the store tests keep moto, whose behaviour is checked against AWS.

    python benchmarks/fast_s3.py --port 9000          # serves until killed

    with serve_fast_s3() as server:                   # a process of its own (its CPU its own)
        ...                                           # a tests.store_servers.StoreServer
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import html
import re
import sys
import time
import uuid
from bisect import bisect_left, bisect_right, insort
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from email.utils import formatdate
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from aiohttp import web

XMLNS = "http://s3.amazonaws.com/doc/2006-03-01/"
HEAD = '<?xml version="1.0" encoding="UTF-8"?>\n'
KEY_RE = re.compile(rb"<Key>(.*?)</Key>", re.DOTALL)
PART_RE = re.compile(rb"<Part>(.*?)</Part>", re.DOTALL)
NUMBER_RE = re.compile(rb"<PartNumber>\s*(\d+)\s*</PartNumber>")


def _esc(text: str) -> str:
    if "&" in text or "<" in text or ">" in text:
        return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text


@dataclass(slots=True)
class Obj:
    data: bytes
    etag: str  # with its quotes
    mtime: float
    content_type: str
    http_date: str
    #: the object's <Contents> entry of a listing (keys XML-escaped)
    xml: str


def _obj(key: str, data: bytes, content_type: str, etag: str | None = None) -> Obj:
    now = time.time()
    etag = etag or f'"{hashlib.md5(data).hexdigest()}"'
    iso = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now * 1000) % 1000:03d}Z"
    xml = (
        f"<Contents><Key>{_esc(key)}</Key><LastModified>{iso}</LastModified>"
        f"<ETag>{etag}</ETag><Size>{len(data)}</Size>"
        "<StorageClass>STANDARD</StorageClass></Contents>"
    )
    return Obj(data, etag, now, content_type, formatdate(now, usegmt=True), xml)


class Bucket:
    def __init__(self, name: str) -> None:
        self.name = name
        self.objects: dict[str, Obj] = {}
        self.keys: list[str] = []  # sorted

    def put(self, key: str, obj: Obj) -> None:
        if key not in self.objects:
            insort(self.keys, key)
        self.objects[key] = obj

    def delete(self, keys: list[str]) -> None:
        gone = [k for k in keys if self.objects.pop(k, None) is not None]
        if len(gone) > 32:
            dropped = set(gone)
            self.keys = [k for k in self.keys if k not in dropped]
            return
        for k in gone:
            i = bisect_left(self.keys, k)
            del self.keys[i]


def _error(
    status: int, code: str, message: str = "", key: str = "", condition: str = ""
) -> web.Response:
    body = f"{HEAD}<Error><Code>{code}</Code><Message>{_esc(message or code)}</Message>"
    if key:
        body += f"<Key>{_esc(key)}</Key>"
    if condition:  # as S3 names the header that failed (s3fs reads it)
        body += f"<Condition>{condition}</Condition>"
    body += "<RequestId>fast-s3</RequestId></Error>"
    return web.Response(status=status, body=body.encode(), content_type="application/xml")


def _xml(body: str, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        body=(HEAD + body).encode(), content_type="application/xml", headers=headers
    )


def _past(prefix: str) -> str:
    """The least string greater than every string starting with `prefix`."""
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)


def _dechunk(body: bytes) -> bytes:
    """An aws-chunked body's data: ``hex-size[;chunk-signature=...]\\r\\n data \\r\\n``, up to a
    0-size chunk (then trailers)."""
    out = bytearray()
    pos = 0
    while True:
        end = body.index(b"\r\n", pos)
        size = int(body[pos:end].split(b";", 1)[0], 16)
        if size == 0:
            return bytes(out)
        out += body[end + 2 : end + 2 + size]
        pos = end + 2 + size + 2


class S3:
    """The server's state and its one request handler."""

    def __init__(self) -> None:
        self.buckets: dict[str, Bucket] = {}
        self.uploads: dict[str, tuple[str, str, dict[int, bytes]]] = {}

    async def handle(self, request: web.Request) -> web.StreamResponse:
        raw = request.rel_url.raw_path
        bucket_name, _, raw_key = raw.lstrip("/").partition("/")
        bucket_name = unquote(bucket_name)
        key = unquote(raw_key)
        method = request.method
        q = request.query
        body = await request.read()
        if body and (
            "aws-chunked" in request.headers.get("Content-Encoding", "")
            or request.headers.get("x-amz-content-sha256", "").startswith("STREAMING-")
        ):
            body = _dechunk(body)
        if not bucket_name:
            return self.list_buckets()
        bucket = self.buckets.get(bucket_name)
        if not key:
            if method == "PUT":
                self.buckets.setdefault(bucket_name, Bucket(bucket_name))
                return web.Response(headers={"Location": f"/{bucket_name}"})
            if bucket is None:
                if method == "HEAD":
                    return web.Response(status=404)
                return _error(404, "NoSuchBucket", key=bucket_name)
            if method == "HEAD":
                return web.Response()
            if method == "GET" and q.get("list-type") == "2":
                return self.list_v2(bucket, q)
            if method == "GET" and "location" in q:
                return _xml(f'<LocationConstraint xmlns="{XMLNS}"/>')
            if method == "POST" and "delete" in q:
                return self.delete_objects(bucket, body)
            return _error(501, "NotImplemented", f"{method} {raw} (fast_s3)")
        if bucket is None:
            if method == "HEAD":
                return web.Response(status=404)
            return _error(404, "NoSuchBucket", key=bucket_name)
        if "uploadId" in q or (method == "POST" and "uploads" in q):
            return self.multipart(request, bucket, key, body)
        if method in ("GET", "HEAD"):
            return self.get(request, bucket, key, method == "HEAD")
        if method == "PUT":
            source = request.headers.get("x-amz-copy-source")
            if source is not None:
                return self.copy(request, bucket, key, source)
            refused = self._precondition(request, bucket, key)
            if refused is not None:
                return refused
            ctype = request.headers.get("Content-Type", "application/octet-stream")
            obj = _obj(key, body, ctype)
            bucket.put(key, obj)
            return web.Response(headers={"ETag": obj.etag})
        if method == "DELETE":
            bucket.delete([key])
            return web.Response(status=204)
        return _error(501, "NotImplemented", f"{method} {raw} (fast_s3)")

    def list_buckets(self) -> web.Response:
        items = "".join(
            f"<Bucket><Name>{_esc(b)}</Name><CreationDate>2026-01-01T00:00:00.000Z"
            "</CreationDate></Bucket>"
            for b in self.buckets
        )
        return _xml(
            f'<ListAllMyBucketsResult xmlns="{XMLNS}"><Owner><ID>fast-s3</ID></Owner>'
            f"<Buckets>{items}</Buckets></ListAllMyBucketsResult>"
        )

    def list_v2(self, bucket: Bucket, q: Any) -> web.Response:
        prefix = q.get("prefix", "")
        delimiter = q.get("delimiter", "")
        max_keys = max(0, min(int(q.get("max-keys", 1000)), 1000))
        token = q.get("continuation-token")
        start_after = q.get("start-after", "")
        url = q.get("encoding-type") == "url"
        keys, objects = bucket.keys, bucket.objects
        start = bisect_left(keys, prefix)
        if token:
            resume = base64.urlsafe_b64decode(token.encode()).decode()
            # "K" + the last key sent: after it; "P" + the last common prefix: past its keys
            after = resume[1:]
            start = max(start, bisect_left(keys, _past(after)) if resume[0] == "P" else 0)
            if resume[0] == "K":
                start = max(start, bisect_right(keys, after))
        elif start_after:
            start = max(start, bisect_right(keys, start_after))
        entries: list[str] = []
        prefixes: list[str] = []
        count = 0
        last = ""
        truncated = False
        i, n, plen = start, len(keys), len(prefix)
        while i < n:
            k = keys[i]
            if not k.startswith(prefix):
                break
            if count >= max_keys:
                truncated = True
                break
            if delimiter:
                j = k.find(delimiter, plen)
                if j >= 0:
                    common = k[: j + len(delimiter)]
                    prefixes.append(common)
                    count += 1
                    last = "P" + common
                    i = bisect_left(keys, _past(common), i)
                    continue
            if url:
                entries.append(
                    objects[k].xml.replace(f"<Key>{_esc(k)}</Key>", f"<Key>{quote(k)}</Key>", 1)
                )
            else:
                entries.append(objects[k].xml)
            count += 1
            last = "K" + k
            i += 1

        def enc(text: str) -> str:
            return quote(text) if url else _esc(text)

        head = [
            f'<ListBucketResult xmlns="{XMLNS}"><Name>{_esc(bucket.name)}</Name>',
            f"<Prefix>{enc(prefix)}</Prefix><KeyCount>{count}</KeyCount>",
            f"<MaxKeys>{max_keys}</MaxKeys>",
        ]
        if delimiter:
            head.append(f"<Delimiter>{enc(delimiter)}</Delimiter>")
        if url:
            head.append("<EncodingType>url</EncodingType>")
        head.append(f"<IsTruncated>{'true' if truncated else 'false'}</IsTruncated>")
        if token:
            head.append(f"<ContinuationToken>{token}</ContinuationToken>")
        if truncated:
            next_token = base64.urlsafe_b64encode(last.encode()).decode()
            head.append(f"<NextContinuationToken>{next_token}</NextContinuationToken>")
        if start_after:
            head.append(f"<StartAfter>{enc(start_after)}</StartAfter>")
        common = "".join(
            f"<CommonPrefixes><Prefix>{enc(p)}</Prefix></CommonPrefixes>" for p in prefixes
        )
        return _xml("".join(head) + "".join(entries) + common + "</ListBucketResult>")

    def delete_objects(self, bucket: Bucket, body: bytes) -> web.Response:
        keys = [html.unescape(k.decode()) for k in KEY_RE.findall(body)]
        quiet = b"<Quiet>true</Quiet>" in body
        bucket.delete(keys)
        deleted = "" if quiet else "".join(f"<Deleted><Key>{_esc(k)}</Key></Deleted>" for k in keys)
        return _xml(f'<DeleteResult xmlns="{XMLNS}">{deleted}</DeleteResult>')

    def _precondition(self, request: web.Request, bucket: Bucket, key: str) -> web.Response | None:
        """A write's If-None-Match: * and If-Match: 412 when they do not hold."""
        existing = bucket.objects.get(key)
        if request.headers.get("If-None-Match") == "*" and existing is not None:
            return _error(
                412,
                "PreconditionFailed",
                "At least one of the pre-conditions failed",
                key,
                "If-None-Match",
            )
        match = request.headers.get("If-Match")
        if match is not None and (existing is None or match not in ("*", existing.etag)):
            return _error(
                412,
                "PreconditionFailed",
                "At least one of the pre-conditions failed",
                key,
                "If-Match",
            )
        return None

    def get(self, request: web.Request, bucket: Bucket, key: str, head: bool) -> web.Response:
        obj = bucket.objects.get(key)
        if obj is None:
            if head:
                return web.Response(status=404)
            return _error(404, "NoSuchKey", "The specified key does not exist.", key)
        headers = {
            "ETag": obj.etag,
            "Last-Modified": obj.http_date,
            "Accept-Ranges": "bytes",
            "Content-Type": obj.content_type,
        }
        match = request.headers.get("If-Match")
        if match is not None and match not in ("*", obj.etag):
            return _error(
                412,
                "PreconditionFailed",
                "At least one of the pre-conditions failed",
                key,
                "If-Match",
            )
        none_match = request.headers.get("If-None-Match")
        if none_match is not None and none_match in ("*", obj.etag):
            return web.Response(status=304, headers=headers)
        size = len(obj.data)
        spec = request.headers.get("Range")
        if spec is None or not spec.startswith("bytes="):
            if head:
                headers["Content-Length"] = str(size)
                return web.Response(headers=headers)
            return web.Response(body=obj.data, headers=headers)
        first, _, last = spec[6:].partition("-")
        if first:
            start = int(first)
            end = min(int(last), size - 1) if last else size - 1
        else:
            start, end = max(0, size - int(last)), size - 1
        if start >= size or end < start:
            headers["Content-Range"] = f"bytes */{size}"
            return web.Response(
                status=416,
                headers=headers,
                body=b"<Error><Code>InvalidRange</Code></Error>",
            )
        headers["Content-Range"] = f"bytes {start}-{end}/{size}"
        if head:
            headers["Content-Length"] = str(end - start + 1)
            return web.Response(status=206, headers=headers)
        return web.Response(status=206, body=obj.data[start : end + 1], headers=headers)

    def copy(self, request: web.Request, bucket: Bucket, key: str, source: str) -> web.Response:
        source_bucket, _, source_key = unquote(source.split("?", 1)[0]).lstrip("/").partition("/")
        found = self.buckets.get(source_bucket)
        obj = found.objects.get(source_key) if found is not None else None
        if obj is None:
            return _error(404, "NoSuchKey", "The specified key does not exist.", source_key)
        refused = self._precondition(request, bucket, key)
        if refused is not None:
            return refused
        copied = _obj(key, obj.data, obj.content_type, obj.etag)
        bucket.put(key, copied)
        return _xml(
            f"<CopyObjectResult><ETag>{copied.etag}</ETag>"
            f"<LastModified>{copied.xml.split('<LastModified>')[1].split('<')[0]}</LastModified>"
            "</CopyObjectResult>"
        )

    def multipart(
        self, request: web.Request, bucket: Bucket, key: str, body: bytes
    ) -> web.Response:
        method, q = request.method, request.query
        if method == "POST" and "uploads" in q:
            upload = uuid.uuid4().hex
            self.uploads[upload] = (bucket.name, key, {})
            return _xml(
                f'<InitiateMultipartUploadResult xmlns="{XMLNS}"><Bucket>{_esc(bucket.name)}'
                f"</Bucket><Key>{_esc(key)}</Key><UploadId>{upload}</UploadId>"
                "</InitiateMultipartUploadResult>"
            )
        upload = q["uploadId"]
        held = self.uploads.get(upload)
        if held is None or held[:2] != (bucket.name, key):
            return _error(404, "NoSuchUpload", "The specified upload does not exist.", key)
        parts = held[2]
        if method == "PUT":
            number = int(q["partNumber"])
            parts[number] = body
            return web.Response(headers={"ETag": f'"{hashlib.md5(body).hexdigest()}"'})
        if method == "DELETE":
            del self.uploads[upload]
            return web.Response(status=204)
        if method == "POST":
            numbers = [
                int(found.group(1))
                for part in PART_RE.findall(body)
                if (found := NUMBER_RE.search(part)) is not None
            ]
            if any(n not in parts for n in numbers):
                return _error(400, "InvalidPart", "One or more of the parts were not found.", key)
            refused = self._precondition(request, bucket, key)
            if refused is not None:
                return refused
            del self.uploads[upload]
            chosen = [parts[n] for n in numbers]
            digest = hashlib.md5(b"".join(hashlib.md5(p).digest() for p in chosen)).hexdigest()
            obj = _obj(
                key, b"".join(chosen), "application/octet-stream", f'"{digest}-{len(chosen)}"'
            )
            bucket.put(key, obj)
            return _xml(
                f'<CompleteMultipartUploadResult xmlns="{XMLNS}"><Location>/{_esc(bucket.name)}/'
                f"{_esc(key)}</Location><Bucket>{_esc(bucket.name)}</Bucket><Key>{_esc(key)}</Key>"
                f"<ETag>{obj.etag}</ETag></CompleteMultipartUploadResult>"
            )
        return _error(501, "NotImplemented", f"{method} multipart (fast_s3)")


def serve(host: str, port: int) -> None:
    """Serve until killed."""
    try:
        import uvloop

        uvloop.install()
    except ImportError:  # plain asyncio
        pass
    s3 = S3()
    app = web.Application(client_max_size=1 << 31)
    app.router.add_route("*", "/{tail:.*}", s3.handle)
    web.run_app(app, host=host, port=port, access_log=None, print=None, handle_signals=True)


@contextmanager
def serve_fast_s3() -> Iterator[Any]:
    """This server in a process of its own with the `lake` bucket, as a
    `tests.store_servers.StoreServer` (its `pid` for the server's CPU time)."""
    from loopback.servers import BUCKET, _process, free_port, s3_store_server

    port = free_port()
    args = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    with _process(args, port) as proc:
        endpoint = f"http://127.0.0.1:{port}"
        import urllib.request

        urllib.request.urlopen(urllib.request.Request(f"{endpoint}/{BUCKET}", method="PUT")).close()
        yield s3_store_server(endpoint, pid=proc.pid)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=9000)
    a = p.parse_args(argv)
    serve(a.host, a.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["S3", "serve", "serve_fast_s3"]
