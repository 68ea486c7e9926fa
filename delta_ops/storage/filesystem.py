"""A table's root on its filesystem: what the storage package's modules share.

`delta_ops.storage.Storage` (``table_storage``), its backends (``local_backend``,
``native_backend``, ``fsspec_backend``), its tree walker and safe deleter (``tree``) and its
bulk deleter (``bulk_delete``) all work on one `TableRoot`: the fsspec
filesystem (made on first use for a local table, which lists and reads through ``os``), or
the native object-store client (``native``: a
`delta_ops.storage.native_store.NativeStore`, when it serves the table), the root path
inside it, whether it is local, and how a table-relative path joins the root.
`mtime_ms` reads the modification time of an fsspec listing entry, whatever the store
calls it. `leaves_root` is the one test of whether a decoded table-relative path names
something outside the root (absolute, or ``..`` segments climbing above it): reads refuse such a
path and deletes skip it, on every store. This module imports nothing else of delta-ops, so they all build on it without
importing one another's internals:

    files = TableRoot(None, "/data/events")       # a local table
    files.join("p=1/part-0.parquet")               # '/data/events/p=1/part-0.parquet'
    files.filesystem.ls(files.join("p=1"))         # fsspec, for the storage package only
    mtime_ms({"mtime": 1_700_000_000.5})           # 1700000000500
    leaves_root("a/../../outside.parquet")         # True

Nothing above the storage package uses it: the rest of delta-ops sees ``Storage`` only.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from delta_ops.storage.native_store import NativeStore


def is_local_fs(fs: Any) -> bool:
    """Whether `fs` (None: no filesystem made yet) is exactly fsspec's local filesystem: a
    subclass (e.g. a wrapper injecting faults in tests) must see every write go through
    fsspec, so it does not count as local."""
    if fs is None:
        return True
    from fsspec.implementations.local import LocalFileSystem  # fsspec only when a store is used

    return type(fs) is LocalFileSystem


def mtime_ms(info: Mapping[str, Any]) -> int:
    """An fsspec `info` entry's modification time in epoch milliseconds (0 when it has none)."""
    for key in ("mtime", "LastModified", "last_modified", "updated", "created", "modified"):
        value = info.get(key)
        if value is None:
            continue
        if isinstance(value, datetime):
            return int(value.timestamp() * 1000)
        if isinstance(value, (int, float)):
            # local filesystems report seconds, a few stores report ms already
            return int(value * 1000) if value < 1e11 else int(value)
        if isinstance(value, str):
            return int(datetime.fromisoformat(value).timestamp() * 1000)
    return 0


def leaves_root(relative: str) -> bool:
    """True when a decoded table-relative path names something outside the root: an absolute
    path, or one whose ``..`` segments climb above it (``a/../b`` stays inside). A name that
    merely contains dots (``a..b``) is inside."""
    if relative.startswith("/"):
        return True
    if ".." not in relative:
        return False
    normal = posixpath.normpath(relative)
    return normal == ".." or normal.startswith("../")


class TableRoot:
    """A table's root path on its fsspec filesystem (None until needed for a local table), or
    on the native client (`native`; then there is no fsspec filesystem)."""

    __slots__ = ("_fs", "is_local", "native", "root")

    def __init__(
        self,
        fs: Any | None,
        root: str,
        *,
        local: bool | None = None,
        native: NativeStore | None = None,
    ) -> None:
        self._fs = fs
        #: the native object-store client serving the table, or None (fsspec or ``os``)
        self.native = native
        #: the root path inside the filesystem, without a trailing slash ("/" stays "/")
        self.root = root.rstrip("/") or "/"
        #: True when the table lives on the local filesystem (``os`` serves the hot paths)
        self.is_local = (
            False if native is not None else local if local is not None else (is_local_fs(fs))
        )

    @property
    def filesystem(self) -> Any:
        """The fsspec filesystem; a local table's is made on first use, which keeps a CLI
        start fast. A table the native client serves has none (the storage package's code
        branches on `native` first)."""
        if self.native is not None:
            raise TypeError(f"{self.root}: served by the native client, not fsspec")
        if self._fs is None:
            from fsspec.implementations.local import LocalFileSystem  # start-up: made when asked

            self._fs = LocalFileSystem()
        return self._fs

    def join(self, relative: str) -> str:
        """Join a table-relative path (already URL-decoded) to the root."""
        return posixpath.join(self.root, relative) if self.root != "/" else "/" + relative


__all__ = ["TableRoot", "is_local_fs", "leaves_root", "mtime_ms"]
