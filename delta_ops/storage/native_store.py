"""One bucket of S3, Azure Blob or GCS through the native client (obstore), by fsspec-style path.

`delta_ops.storage.Storage` addresses an object-store table's files as fsspec does,
``bucket/key`` (the root ``lake/events``, a commit ``lake/events/_delta_log/...json``), so
the layers above see the same paths whichever client serves the table. A `NativeStore`
turns those paths into keys of its bucket and calls obstore, whose requests, retries (with
backoff, on 5xx answers, throttling, resets and timeouts) and reply parsing run in Rust:

    store = NativeStore(native_spec("s3://lake/events", options))
    store.put("lake/events/_delta_log/00000000000000000003.json", body, create=True)
    files, dirs = store.list_dir("lake/events/_delta_log")
    store.get_many(["lake/events/a.json", "lake/events/b.json"])  # concurrently

Every call raises Python's file errors or
`delta_ops.storage.native_errors.StoreUnavailable` (`native_errors`). Nothing here
caches: every listing asks the store. Deletes (with per-key outcomes) are in `bulk_delete`,
parallel range listings in `s3_listing`.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from dataclasses import dataclass
from datetime import datetime
from typing import Any, BinaryIO

from delta_ops.storage.native_errors import translated
from delta_ops.storage.native_options import NativeSpec, strip_protocol

#: concurrent requests of one read_many / range read
READ_WORKERS = 16
#: keys per request of a bulk delete where obstore sends several (Azure's blob batch, GCS'
#: single DELETE); S3's DeleteObjects takes a whole `bulk_delete` batch (1,000)
DELETE_UNIT = {"azure": 256, "gcs": 1}
#: concurrent requests of one bulk delete (obstore's own: 10)
DELETE_WORKERS = 10
#: objects per page of a listing (the most S3, Azure and GCS return per request)
PAGE = 1000


@dataclass(frozen=True)
class StoreObject:
    """One object: its path (``bucket/key``), size and modification time in ms."""

    path: str
    size: int
    modification_time: int


def _ms(value: datetime | None) -> int:
    return int(value.timestamp() * 1000) if value is not None else 0


class NativeStore:
    """The native client of one table's bucket (container); see the module docstring."""

    def __init__(self, spec: NativeSpec) -> None:
        from obstore.store import AzureStore, GCSStore, S3Store  # a URL needs it: import now

        self.spec = spec
        self.kind = spec.kind
        self.bucket = spec.bucket
        kwargs: dict[str, Any] = {"config": dict(spec.config)}
        if spec.client_options:
            kwargs["client_options"] = dict(spec.client_options)
        if spec.retry:
            kwargs["retry_config"] = dict(spec.retry)
        if spec.credential_provider is not None:
            kwargs["credential_provider"] = spec.credential_provider
        with translated(spec.root):
            if spec.kind == "s3":
                self.store: Any = S3Store(spec.bucket, **kwargs)
            elif spec.kind == "azure":
                self.store = AzureStore(spec.bucket, **kwargs)
            else:
                self.store = GCSStore(spec.bucket, **kwargs)

    # ------------------------------------------------------------------------- paths
    def key(self, path: str) -> str:
        """The key of an fsspec-style path of this bucket (``bucket/key`` -> ``key``)."""
        text = path.lstrip("/")
        if text == self.bucket:
            return ""
        if not text.startswith(self.bucket + "/"):
            raise ValueError(f"{path!r} is not in the bucket {self.bucket!r}")
        return text[len(self.bucket) + 1 :]

    def path(self, key: str) -> str:
        """The fsspec-style path of a key."""
        return f"{self.bucket}/{key}" if key else self.bucket

    @staticmethod
    def strip_protocol(url: str) -> str:
        """A URL of this store as a path (``s3://lake/a`` -> ``lake/a``), as fsspec does."""
        return strip_protocol(url) if "://" in url else url.lstrip("/")

    def _object(self, meta: Any) -> StoreObject:
        return StoreObject(
            self.path(str(meta["path"])), int(meta["size"]), _ms(meta.get("last_modified"))
        )

    # ------------------------------------------------------------------------- listing
    def list_dir(self, path: str) -> tuple[list[StoreObject], list[str]]:
        """The objects directly under a directory path and its subdirectories (paths), one
        request per page; ([], []) when there is nothing under it."""
        import obstore

        prefix = self.key(path).rstrip("/")
        with translated(path):
            found = obstore.list_with_delimiter(self.store, prefix or None)
        files = [self._object(meta) for meta in found["objects"]]
        dirs = [self.path(str(p).rstrip("/")) for p in found["common_prefixes"]]
        return files, dirs

    def list_tree(self, path: str, offset: str | None = None) -> Iterator[list[StoreObject]]:
        """Every object under a directory path, recursively, in pages as the store returns
        them; with `offset` (a path), only keys after it. Stopping early stops the requests."""
        import obstore

        prefix = self.key(path).rstrip("/")
        after = self.key(offset) if offset is not None else None
        with translated(path):
            stream = obstore.list(self.store, prefix or None, offset=after, chunk_size=PAGE)
            for chunk in stream:
                objects = [self._object(meta) for meta in chunk]
                if after is not None:  # Azure (and some servers) ignore the offset
                    objects = [o for o in objects if self.key(o.path) > after]
                yield objects

    # ------------------------------------------------------------------------- reading
    def head(self, path: str) -> StoreObject | None:
        """Size and mtime of an object, or None when there is none."""
        import obstore

        try:
            with translated(path):
                return self._object(obstore.head(self.store, self.key(path)))
        except FileNotFoundError:
            return None

    def get(self, path: str) -> bytes:
        """A whole object (FileNotFoundError when missing)."""
        import obstore

        with translated(path):
            return bytes(obstore.get(self.store, self.key(path)).bytes())

    def get_many(self, paths: Sequence[str]) -> list[bytes]:
        """Whole objects, in order, READ_WORKERS at a time."""
        if len(paths) <= 1:
            return [self.get(p) for p in paths]
        with ThreadPoolExecutor(max_workers=min(READ_WORKERS, len(paths))) as pool:
            return list(pool.map(self.get, paths))

    def get_ranges(
        self, paths: Sequence[str], starts: Sequence[int], ends: Sequence[int]
    ) -> list[bytes]:
        """Byte ranges ``[start, end)`` of objects, in order (ranges of one object in one
        call, which coalesces near ones; objects concurrently)."""
        import obstore

        by_path: dict[str, list[int]] = {}
        for i, path in enumerate(paths):
            by_path.setdefault(path, []).append(i)
        out: list[bytes] = [b""] * len(paths)

        def one(path: str) -> None:
            wanted = by_path[path]
            with translated(path):
                found = obstore.get_ranges(
                    self.store,
                    self.key(path),
                    starts=[starts[i] for i in wanted],
                    ends=[ends[i] for i in wanted],
                )
            for i, data in zip(wanted, found, strict=True):
                out[i] = bytes(data)

        with ThreadPoolExecutor(max_workers=max(1, min(READ_WORKERS, len(by_path)))) as pool:
            list(pool.map(one, by_path))
        return out

    def open_reader(self, path: str) -> BinaryIO:
        """A seekable, buffered reader of an object (FileNotFoundError when missing).

        It starts with the object's last TAIL_BYTES (S3 and GCS: one suffix-range GET, which
        also gives the size; Azure, which has no suffix ranges: a HEAD, then that range):
        a small file (a commit, a checkpoint, a deletion vector) is then read whole in that
        request, and a parquet reader finds its footer there; other bytes are ranged GETs."""
        return io.BufferedReader(_TailReader(self, path), buffer_size=1 << 20)

    # ------------------------------------------------------------------------- writing
    def put(self, path: str, data: bytes, *, create: bool) -> None:
        """One PUT of a whole object; with `create`, only if the name is free (S3
        ``If-None-Match: *``, Azure ``If-None-Match: *``, GCS ``ifGenerationMatch=0``):
        FileExistsError when it is taken."""
        import obstore

        with translated(path):
            obstore.put(
                self.store,
                self.key(path),
                data,
                mode="create" if create else "overwrite",
                use_multipart=False,
            )

    def upload(self, path: str, write: Callable[[BinaryIO], object], part_bytes: int) -> int:
        """Stream an object as `write` produces it, in parts of `part_bytes` (a multipart
        upload; memory holds about one part); the object appears whole when the upload
        completes. When `write` or the upload fails, the upload is aborted and nothing
        appears under the name; the error is raised. Returns the size written."""
        import obstore

        with translated(path):
            writer = obstore.open_writer(self.store, self.key(path), buffer_size=part_bytes)
        sink = _Sink(writer, path)
        try:
            write(sink)  # type: ignore[arg-type]
        except BaseException as exc:
            with suppress(Exception):  # aborts the multipart upload: nothing appears
                writer.__exit__(type(exc), exc, exc.__traceback__)
            raise
        with translated(path):
            writer.close()  # uploads the last part and completes the upload
        return sink.written

    def copy(self, source: str, target: str) -> None:
        """Copy an object within the bucket (overwriting the target)."""
        import obstore

        with translated(source):
            obstore.copy(self.store, self.key(source), self.key(target), overwrite=True)

    def delete_one(self, path: str) -> None:
        """Delete one object; FileNotFoundError (some stores) when it is gone already."""
        import obstore

        with translated(path):
            obstore.delete(self.store, self.key(path))

    def delete_keys(self, keys: Sequence[str]) -> None:
        """One bulk delete of keys (S3 DeleteObjects of <= 1000, Azure blob batches of 256,
        GCS one request per key); raises on a key that failed (see `bulk_delete`), once every
        request has been answered.

        obstore's own bulk delete of a list stops at the first failed request and drops the
        rest: some never sent, some still in flight. `bulk_delete` lists the keys afterwards to
        learn which went, so it would report keys never tried as refused (GCS: all but the
        first few of a batch), and race with deletes still landing. So a list longer than one
        request is sent here request by request, DELETE_WORKERS at a time, each to its end."""
        import obstore

        unit = DELETE_UNIT.get(self.kind, len(keys))
        if len(keys) <= unit:
            with translated(self.path(keys[0]) if keys else self.bucket):
                obstore.delete(self.store, list(keys))
            return
        requests = [list(keys[i : i + unit]) for i in range(0, len(keys), unit)]

        def send(request: list[str]) -> OSError | None:
            try:
                with translated(self.path(request[0])):
                    obstore.delete(self.store, request if len(request) > 1 else request[0])
            except OSError as exc:
                return exc
            return None

        with ThreadPoolExecutor(max_workers=min(DELETE_WORKERS, len(requests))) as pool:
            failed = [error for error in pool.map(send, requests) if error is not None]
        if failed:
            # a refusal last: a throttled or vanished key among them keeps its retry
            raise min(failed, key=lambda error: isinstance(error, PermissionError))


#: what a reader fetches first: the object's tail (a parquet footer, or the whole file)
TAIL_BYTES = 1 << 20


class _TailReader(io.RawIOBase):
    """An object as a raw, seekable binary stream: its tail fetched on opening, the rest by
    ranged GETs (see `NativeStore.open_reader`)."""

    def __init__(self, owner: NativeStore, path: str) -> None:
        import obstore

        self._owner = owner
        self._path = path
        self._key = owner.key(path)
        self._pos = 0
        with translated(path):
            try:
                if owner.kind == "azure":
                    raise NotImplementedError  # no suffix ranges on Azure
                got = obstore.get(owner.store, self._key, options={"range": {"suffix": TAIL_BYTES}})
                self.size = int(got.meta["size"])
                self._tail_start = int(got.range[0])
                self._tail = bytes(got.bytes())
            except FileNotFoundError:
                raise
            except Exception:  # noqa: BLE001 - Azure, or an empty object (no range to answer)
                self.size = int(obstore.head(owner.store, self._key)["size"])
                self._tail_start = max(0, self.size - TAIL_BYTES)
                self._tail = (
                    bytes(
                        obstore.get_range(
                            owner.store, self._key, start=self._tail_start, end=self.size
                        )
                    )
                    if self.size
                    else b""
                )

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        import obstore

        view = memoryview(buffer).cast("B")
        end = min(self.size, self._pos + len(view))
        if end <= self._pos:
            return 0
        if self._pos >= self._tail_start:
            data: Any = memoryview(self._tail)[
                self._pos - self._tail_start : end - self._tail_start
            ]
        else:
            end = min(end, self._tail_start) if end > self._tail_start else end
            with translated(self._path):
                data = obstore.get_range(self._owner.store, self._key, start=self._pos, end=end)
        n = len(data)
        view[:n] = memoryview(data)
        self._pos += n
        return n

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_SET:
            self._pos = offset
        elif whence == io.SEEK_CUR:
            self._pos += offset
        else:
            self._pos = self.size + offset
        if self._pos < 0:
            raise ValueError("negative seek position")
        return self._pos

    def tell(self) -> int:
        return self._pos


class _Sink(io.RawIOBase):
    """The writable end a streaming writer gets: obstore's WritableFile, plus the position
    (`tell`) pyarrow's writers ask for."""

    def __init__(self, writer: Any, path: str) -> None:
        self._writer = writer
        self._path = path
        self.written = 0

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        with translated(self._path):  # a full part goes up here
            n = int(self._writer.write(data))
        self.written += n
        return n

    def tell(self) -> int:
        return self.written

    def flush(self) -> None:
        pass  # parts go up as they fill; the last one when the upload completes

    def close(self) -> None:
        super().close()  # the upload is completed (or aborted) by its owner, not here


__all__ = ["PAGE", "NativeStore", "StoreObject"]
