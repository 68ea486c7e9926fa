"""The fsspec backend: a table on any store fsspec opens (``memory://``, ``hdfs://``, a wrapper
of the local filesystem, and s3/azure/gcs with the storage option ``client=fsspec``).

`delta_ops.storage.Storage` serves every table that is neither on the local disk nor on the
native client with an `FsspecBackend` (the interface: `delta_ops.storage.backend`), over the
table's fsspec filesystem (`TableRoot.filesystem`). Every listing invalidates fsspec's
listing cache first (a stale listing could hide a commit). A commit is one
``pipe_file(mode="create")``, which each store's implementation sends as its put-if-absent
(s3fs ``If-None-Match: *``, adlfs ``overwrite=False``, gcsfs ``ifGenerationMatch=0``); it is
trusted on the filesystems in `CONDITIONAL_CREATE_PROTOCOLS` (and wrappers of fsspec's local
filesystem, which open with ``O_EXCL``), and on an object store (`PROBED_CONDITIONAL_PROTOCOLS`)
once its endpoint has refused a second create of a probe; on any other store a commit needs
the caller's ``single_writer``. Data files with a unique name stream up in parts on the stores
of `STREAMED_UPLOAD_PROTOCOLS` (and GCS through gcsfs' own filesystem).

    backend = FsspecBackend(TableRoot(fs, "bucket/events"), "bucket/events/_delta_log")
    backend.put_if_absent("bucket/events/_delta_log/00000000000000000003.json", body)
    backend.read_many(["bucket/events/_delta_log/00000000000000000003.json"], None)

fsspec itself is imported only when a check needs its local filesystem class.
"""

from __future__ import annotations

import posixpath
import uuid
from collections.abc import Callable, Sequence
from contextlib import suppress
from typing import Any, BinaryIO

from delta_ops.errors import NotADeltaTable
from delta_ops.storage.backend import FileEntry, PutBackend, named_from, probed_once
from delta_ops.storage.filesystem import mtime_ms

# fsspec protocols verified (by delta-ops' tests) to refuse "xb" when the file exists
CONDITIONAL_CREATE_PROTOCOLS = frozenset({"file", "local", "memory"})
# Stores whose fsspec implementation sends a conditional PUT for exclusive creates (s3fs:
# `If-None-Match: *`; adlfs: upload with overwrite=False, which Azure refuses for a taken name;
# gcsfs: `ifGenerationMatch=0`). S3-compatible servers that ignore the header would let two
# writers overwrite each other's commits, so each endpoint is probed once before it is trusted.
PROBED_CONDITIONAL_PROTOCOLS = frozenset({"s3", "s3a", "az", "abfs", "abfss", "gs", "gcs"})
#: stores whose uploads `create_new(..., unique_name=True)` streams (see `streams_uploads`)
STREAMED_UPLOAD_PROTOCOLS = frozenset({"s3", "s3a", "az", "abfs", "abfss"})


class FsspecBackend(PutBackend):
    """A table on an fsspec filesystem (see the module docstring)."""

    name = "fsspec"

    @property
    def fs(self) -> Any:
        """The table's fsspec filesystem."""
        return self.files.filesystem

    @property
    def client_name(self) -> str:
        return f"{type(self.fs).__name__} ({self.fs.protocol})"

    @property
    def _protocols(self) -> tuple[str, ...]:
        """The filesystem's protocol names (fsspec gives one or a tuple)."""
        protocol = self.fs.protocol
        return tuple(protocol) if isinstance(protocol, (tuple, list)) else (protocol,)

    # --------------------------------------------------------------------------- paths
    def strip_protocol(self, url: str) -> str:
        return str(self.fs._strip_protocol(url))

    # --------------------------------------------------------------------------- listing
    def list_log(
        self, directory: str, *, subdir: bool, first: str | None, url: str
    ) -> list[FileEntry]:
        self.fs.invalidate_cache(directory)  # a stale listing could hide a commit
        try:
            infos = self.fs.ls(directory, detail=True)
        except FileNotFoundError:
            if subdir:
                return []
            raise NotADeltaTable(url, "no _delta_log directory") from None
        entries = [
            FileEntry(
                posixpath.basename(i["name"].rstrip("/")), int(i.get("size") or 0), mtime_ms(i)
            )
            for i in infos
            if i.get("type") != "directory"
            and not posixpath.basename(i["name"].rstrip("/")).startswith(".")
        ]
        if first is not None:
            entries = [e for e in entries if named_from(e.name, first)]
        entries.sort(key=lambda e: e.name)
        return entries

    def file_names_in(self, directory: str, prefix: str) -> list[str]:
        self.fs.invalidate_cache(directory)
        try:
            infos = self.fs.ls(directory, detail=True)
        except FileNotFoundError:
            return []
        names = (
            posixpath.basename(i["name"].rstrip("/")) for i in infos if i.get("type") != "directory"
        )
        return sorted(n for n in names if n.startswith(prefix))

    def list_tree(self, top: str) -> list[FileEntry]:
        entries: list[FileEntry] = []
        try:
            found = self.fs.find(top, detail=True)
        except FileNotFoundError:
            return []
        prefix = top.rstrip("/") + "/"
        for path, info in found.items():
            if info.get("type") == "directory" or not path.startswith(prefix):
                continue
            entries.append(
                FileEntry(path[len(prefix) :], int(info.get("size") or 0), mtime_ms(info))
            )
        return sorted(entries, key=lambda e: e.name)

    def stat(self, path: str) -> FileEntry | None:
        try:
            info = self.fs.info(path)
        except FileNotFoundError:
            return None
        return FileEntry(posixpath.basename(path), int(info.get("size") or 0), mtime_ms(info))

    def exists(self, path: str) -> bool:
        return bool(self.fs.exists(path))

    # --------------------------------------------------------------------------- reading
    def read_bytes(self, path: str) -> bytes:
        data: bytes = self.fs.cat_file(path)
        return data

    def read_many(self, paths: Sequence[str], sizes: Sequence[int | None] | None) -> list[bytes]:
        """Concurrently where the filesystem can (fsspec's `cat`)."""
        data = self.fs.cat(list(paths), on_error="raise")
        if isinstance(data, bytes):  # a single path comes back unwrapped
            return [data]
        return [data[p] if p in data else data[self.fs._strip_protocol(p)] for p in paths]

    def read_ranges(
        self, paths: Sequence[str], starts: Sequence[int], ends: Sequence[int]
    ) -> list[bytes]:
        ranges: list[bytes] = self.fs.cat_ranges(paths, starts, ends, on_error="raise")
        return ranges

    def open_input(self, path: str) -> BinaryIO:
        handle: BinaryIO = self.fs.open(path, "rb")
        return handle

    # --------------------------------------------------------------------------- writing
    @property
    def supports_conditional_create(self) -> bool:
        """Only filesystems verified to refuse an exclusive create are trusted: one that
        silently treats "xb" as "wb" would let two writers overwrite each other's commits."""
        from fsspec.implementations.local import LocalFileSystem

        if isinstance(self.fs, LocalFileSystem):  # wrappers of the local filesystem: O_EXCL
            return True
        protocols = self._protocols
        if set(protocols) & CONDITIONAL_CREATE_PROTOCOLS:
            return True
        if set(protocols) & PROBED_CONDITIONAL_PROTOCOLS:
            return self._probe_conditional_create(protocols[0])
        return False

    def _probe_conditional_create(self, protocol: str) -> bool:
        """Create a probe object (a fresh hidden name in `_delta_log`) twice, exclusively:
        a store that honours conditional writes refuses the second. Done once per endpoint
        and process; the probe is removed, so nothing is left in the table."""
        fs = self.fs
        client = getattr(fs, "client_kwargs", None) or {}
        key = (protocol, str(client.get("endpoint_url") or fs.storage_options))
        probe = posixpath.join(self.log_dir, f".delta-ops-conditional-probe-{uuid.uuid4().hex}")
        return probed_once(key, probe, self.create_exclusive, lambda: fs.rm_file(probe))

    def create_exclusive(self, path: str, data: bytes) -> None:
        """fsspec's local filesystem (and wrappers of it) opens with O_EXCL; its
        `pipe_file(mode="create")` would check and then write, which two processes can both
        pass. Not `open(mode="xb")` elsewhere: gcsfs' streaming upload drops the precondition
        on some servers, while the single-request form is honoured everywhere."""
        from fsspec.implementations.local import LocalFileSystem

        if isinstance(self.fs, LocalFileSystem):
            with self.fs.open(path, "xb") as handle:
                handle.write(data)
        else:
            self.fs.pipe_file(path, data, mode="create")

    @property
    def streams_uploads(self) -> bool:
        """S3 and Azure Blob (s3fs, adlfs), and GCS through gcsfs' own filesystem. Not GCS
        through gcsfs' extended filesystem, whose files in zonal buckets are visible while
        written; nor memory:// or wrappers of the local filesystem, which write in place."""
        names = set(self._protocols)
        if names & STREAMED_UPLOAD_PROTOCOLS:
            return True
        if names & {"gs", "gcs"}:
            return f"{type(self.fs).__module__}.{type(self.fs).__name__}" == (
                "gcsfs.core.GCSFileSystem"
            )
        return False

    def stream_new(
        self, path: str, write: Callable[[BinaryIO], object], part_bytes: int
    ) -> tuple[bool, int]:
        """When `write` or the upload's completion fails, the upload is abandoned: the file
        is marked closed first (so that nothing, not even its finalizer, completes it), then
        aborted (s3fs aborts the multipart upload, gcsfs cancels it, Azure drops uncommitted
        blocks by itself), and whatever may have appeared under the name, which is this
        upload's alone, is deleted."""
        handle = self.fs.open(path, "wb", block_size=part_bytes)
        try:
            write(handle)
            size = int(handle.tell())
            handle.close()
        except BaseException:
            with suppress(AttributeError):
                handle.closed = True
            with suppress(Exception):
                handle.discard()
            with suppress(Exception):
                self.fs.rm_file(path)
            raise
        return True, size

    def write_atomic(self, path: str, data: bytes) -> None:
        """A single `pipe_file` (one PUT on an object store, which is atomic)."""
        self.fs.pipe_file(path, data)

    def move_new(self, source: str, target: str) -> bool:
        if self.fs.exists(target):
            return False
        self.fs.makedirs(posixpath.dirname(target), exist_ok=True)
        self.fs.mv(source, target)
        return True

    # --------------------------------------------------------------------------- deleting
    def remove_tree(self, relative: str) -> None:
        top = self.files.join(relative)
        if self.fs.exists(top):
            self.fs.rm(top, recursive=True)

    def delete_files(self, paths: Sequence[str]) -> None:
        remove = self.fs.rm_file
        for p in paths:
            try:
                remove(p)
            except FileNotFoundError:
                pass


__all__ = [
    "CONDITIONAL_CREATE_PROTOCOLS",
    "PROBED_CONDITIONAL_PROTOCOLS",
    "STREAMED_UPLOAD_PROTOCOLS",
    "FsspecBackend",
]
