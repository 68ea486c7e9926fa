"""Table storage: one place where delta-ops touches files, through ``os``, obstore or fsspec.

A `Storage` is opened from a URL or local path plus storage options. It knows the
table root and its `_delta_log`, lists the log with sizes and modification times, reads files
(many at once where the filesystem can do that concurrently), and writes with the guarantees
the protocol needs: put-if-absent for commits and atomic replacement for hints.

Who serves it: a local path, ``os`` (fsspec's local filesystem only when asked); ``s3://``,
``az://``/``abfs[s]://`` and ``gs://``, the native client (obstore, `native_store`) when it is
installed, unless the storage option ``client=fsspec`` asks for fsspec (`native_options`);
every other URL, fsspec. Paths are fsspec's either way (``bucket/key``). Each client is one
backend class (`backend.StorageBackend`: `local_backend`, `native_backend`,
`fsspec_backend`), chosen once when the table is opened (`Storage.backend`); `Storage` keeps
what is the same on every store (the root, `_delta_log`'s names, how a path in the log
resolves, what stays inside the root) and asks its backend for every file operation.

For example:

    storage = Storage.open("s3://bucket/table", {"anon": False})
    for entry in storage.list_log():
        print(entry.name, entry.size)
"""

from __future__ import annotations

import logging
import os
import posixpath
import re
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from typing import Any, BinaryIO, TypeAlias
from urllib.parse import unquote

from delta_ops.errors import (
    InvalidLocation,
    MissingExtra,
    UnsafePath,
    reading,
)
from delta_ops.storage import tree
from delta_ops.storage.backend import PROBED as _PROBED  # noqa: F401 - tests reset it here
from delta_ops.storage.backend import FileEntry, StorageBackend
from delta_ops.storage.filesystem import TableRoot, is_local_fs, leaves_root
from delta_ops.storage.fsspec_backend import (
    CONDITIONAL_CREATE_PROTOCOLS,
    PROBED_CONDITIONAL_PROTOCOLS,
    STREAMED_UPLOAD_PROTOCOLS,
    FsspecBackend,
)
from delta_ops.storage.local_backend import LocalBackend, is_temporary_name, temporary_path
from delta_ops.storage.native_backend import NATIVE_PROBE_NAME, NativeBackend
from delta_ops.storage.native_errors import first_line
from delta_ops.storage.native_options import (
    CLIENT_OPTION,
    Unmappable,
    choose_client,
    native_spec,
    option_flag,
)
from delta_ops.storage.native_store import NativeStore
from delta_ops.storage.s3_listing import is_s3
from delta_ops.storage.tree import TreeListing

logger = logging.getLogger(__name__)

LOG_DIR = "_delta_log"

# URL schemes of the object stores, and the extra that installs each one's fsspec implementation
STORE_EXTRAS = {
    "s3": "s3",
    "s3a": "s3",
    "az": "azure",
    "abfs": "azure",
    "abfss": "azure",
    "adl": "azure",
    "gs": "gcs",
    "gcs": "gcs",
}

#: a URI's scheme (RFC 3986: a letter, then letters, digits, ``+-.``), before ``://``
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)://")


def _store_of(scheme: str) -> str:
    """Which store a URI scheme names: the schemes of one store share it (``s3a`` is S3's,
    ``abfss`` Azure's, ``local`` the local disk's), every other scheme is its own."""
    lowered = scheme.lower()
    return "local" if lowered in ("file", "local") else STORE_EXTRAS.get(lowered, lowered)


SINGLE_WRITER_OPTION = "single_writer"
#: the part size of a streamed upload (`create_new(..., unique_name=True)` on an object
#: store): what memory holds of a file being written; a multiple of 256 KiB (GCS chunks) and
#: at least 5 MiB (S3 parts)
STREAM_BLOCK_BYTES = 16 * 1024 * 1024


_flag = option_flag  # true/false storage options: the same words on both clients


#: A table location as callers give it: a local path (str or path-like) or a URL.
Location: TypeAlias = "str | os.PathLike[str]"


class FileReader:
    """Opens files for reading through a Storage (``open(path, "rb")``, as fsspec does)."""

    def __init__(self, storage: Storage) -> None:
        self._storage = storage

    def open(self, path: str, mode: str = "rb") -> BinaryIO:
        if mode != "rb":
            raise ValueError(f"a FileReader only reads ('rb'), not {mode!r}")
        return self._storage.open_input(path)

    def cat_ranges(
        self,
        paths: Sequence[str],
        starts: Sequence[int],
        ends: Sequence[int],
        on_error: str = "raise",
    ) -> list[bytes]:
        """Byte ranges ``[start, end)`` of files (fsspec's `cat_ranges`; errors raise)."""
        return self._storage.backend.read_ranges(paths, starts, ends)


def _native_for(text: str, options: Mapping[str, Any], *, explicit: bool) -> NativeStore | None:
    """The native client for a table URL, or None when an option has no native name and the
    client was not asked for explicitly (fsspec then serves the table, as before)."""
    try:
        spec = native_spec(text, options)
    except Unmappable as exc:
        if explicit:
            raise InvalidLocation(
                f"{text}: the native client has no storage option {exc}; drop it, or use "
                f"--storage-option {CLIENT_OPTION}=fsspec"
            ) from None
        logger.info("%s: fsspec serves the table (the native client has no option %s)", text, exc)
        return None
    try:
        return NativeStore(spec)
    except OSError as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        scheme = text.split("://", 1)[0]
        raise InvalidLocation(f"{text}: cannot open the {scheme}:// store: {first}") from None


def _filesystem_for(text: str, scheme: str, options: Mapping[str, Any]) -> tuple[Any, str]:
    """The fsspec filesystem and path for a table URL.

    Object stores get no directory-listing cache unless the caller asks for one: a cached
    `_delta_log` listing misses commits and checkpoints written since (by us or anyone), and
    every decision here (the next version, what a cleanup may delete, whether a checkpoint we
    just wrote reads back) needs the store's current state.

    GCS with an explicit `endpoint_url` (an emulator or a private endpoint) gets gcsfs' JSON-API
    filesystem: its default class first asks a gRPC service for the bucket type, which such
    endpoints do not serve, and stalls two minutes per bucket before falling back.
    """
    import fsspec

    if scheme in STORE_EXTRAS:
        cached = _flag(options.get("use_listings_cache", False), "use_listings_cache")
        options = {**options, "use_listings_cache": cached}
    try:
        if scheme in ("gs", "gcs") and options.get("endpoint_url"):
            from gcsfs.core import GCSFileSystem

            fs = GCSFileSystem(**options)
            return fs, str(fs._strip_protocol(text))
        fs, path = fsspec.core.url_to_fs(text, **options)
        if is_s3(fs):
            # s3fs hands options it does not know to botocore's session, which refuses them
            # only at the first request (a TypeError deep in a listing): set the session up
            # now, so a wrong option is a one-line error before anything is read or written
            fs.connect()
    except (TypeError, AttributeError) as exc:  # an option's name, or its value's type, refused
        raise InvalidLocation(
            f"{text}: the {scheme}:// client refuses a storage option ({first_line(exc)}):"
            " check its name and its value (KEY:=JSON passes a value that is not a string)"
        ) from None
    return fs, str(path)


class Storage:
    """A Delta table's location: the fsspec filesystem plus the root path inside it.

    Local tables use the OS directly on hot paths (listing, reading, linking) and create their
    fsspec filesystem only when something asks for `fs`, which keeps a CLI start fast. Every
    file operation goes to `backend`, the client's (`local_backend`, `native_backend`,
    `fsspec_backend`).
    """

    def __init__(
        self,
        fs: Any | None,
        root: str,
        url: str,
        *,
        local: bool | None = None,
        single_writer: bool = False,
        options: Mapping[str, Any] | None = None,
        native: NativeStore | None = None,
    ):
        self._files = TableRoot(fs, root, local=local, native=native)
        #: the client's file operations, chosen once (`backend`: local disk, native, fsspec)
        self.backend: StorageBackend = _backend_for(self._files, self.log_path)
        self.url = url
        #: the storage options it was opened with, so another process can open it the same way
        self.options: dict[str, Any] = dict(options or {})
        #: the caller declared that no other process writes this table (a store without
        #: conditional writes may then commit with a plain PUT)
        self.single_writer = single_writer

    @classmethod
    def open(
        cls, url: str | os.PathLike[str], storage_options: Mapping[str, Any] | None = None
    ) -> Storage:
        """Open a table location from a local path, `file://`, `memory://` or any fsspec URL.

        `storage_options` go to the store's client (credentials, endpoint: fsspec's names, or
        the native client's), except ``single_writer`` ("true"/"false"), which declares that
        no other process writes the table (only then may commits on a store without
        conditional writes go ahead), and ``client`` (``auto``, ``native``, ``fsspec``: which
        client serves an s3/azure/gcs table, see `native_options`).
        """
        text = os.fspath(url)
        given = dict(storage_options or {})
        options = dict(given)
        single_writer = _flag(options.pop(SINGLE_WRITER_OPTION, False), SINGLE_WRITER_OPTION)
        client_option = {CLIENT_OPTION: options.pop(CLIENT_OPTION, "auto")}
        storage_options = options
        if not text.strip() or text.rstrip("/").endswith("://"):
            raise InvalidLocation(
                f"table location {text!r} is empty: pass a path or a URL such as s3://bucket/table"
                " (an unset shell variable?)"
            )
        if "://" not in text and not storage_options:
            return cls(
                None,
                os.path.abspath(text),
                text,
                local=True,
                single_writer=single_writer,
                options=given,
            )
        scheme = text.split("://", 1)[0].lower() if "://" in text else "file"
        client = choose_client(scheme, client_option)
        if client != "fsspec":
            native = _native_for(text, storage_options, explicit=client == "native")
            if native is not None:
                return cls(
                    None,
                    native.spec.root,
                    text,
                    single_writer=single_writer,
                    options=given,
                    native=native,
                )
        try:
            fs, path = _filesystem_for(text, scheme, storage_options)
        except ImportError:
            extra = STORE_EXTRAS.get(scheme)
            if extra is None:
                raise InvalidLocation(
                    f"{text}: the {scheme}:// store needs a package that is not installed"
                ) from None
            raise MissingExtra(extra, f"{scheme}:// tables") from None
        except ValueError as exc:
            if "Protocol not known" not in str(exc):
                raise
            known = ", ".join(sorted({*STORE_EXTRAS, "file", "memory"}))
            raise InvalidLocation(
                f"{text}: unknown storage scheme {scheme!r}; supported: {known} (or a local path)"
            ) from None
        except (OSError, RuntimeError) as exc:  # e.g. hdfs:// without a JVM, bad credentials
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise InvalidLocation(f"{text}: cannot open the {scheme}:// store: {first}") from None
        if is_local_fs(fs):
            path = os.path.abspath(path)
        return cls(fs, path, text, single_writer=single_writer, options=given)

    @property
    def location(self) -> str:
        """Where another process (a Spark executor) opens this table: the absolute root of a
        local table, else its URL (with `options`)."""
        return self.root if self.is_local and "://" not in self.url else self.url

    @property
    def root(self) -> str:
        """The table root's path inside its filesystem (no trailing slash)."""
        return self._files.root

    @property
    def client(self) -> str:
        """Which client serves the table: ``local``, ``native`` (obstore) or ``fsspec``."""
        return self.backend.name

    @property
    def _filesystem(self) -> Any:
        """The fsspec filesystem behind a non-local table: for the storage package only, so
        that nothing above it depends on fsspec."""
        return self._files.filesystem

    @property
    def is_local(self) -> bool:
        """True when the table lives on the local filesystem (enables link/rename atomics)."""
        return self._files.is_local

    @property
    def log_path(self) -> str:
        """Absolute path of `_delta_log` inside the filesystem."""
        return self.join(LOG_DIR)

    def join(self, relative: str) -> str:
        """Join a table-relative path (already URL-decoded) to the root."""
        return self._files.join(relative)

    def table_path(self, path_in_log: str) -> str:
        """Resolve a path as written in the log (URL-encoded, relative or absolute) to a
        filesystem path to read.

        Relative paths are URL-decoded (RFC 2396) and joined to the root; absolute URIs are
        decoded and stripped of their scheme for the filesystem (the protocol lets an add name
        a file outside the table: a shallow clone's). Refused (`UnsafePath`): a relative
        path that leaves the root once decoded (``../x``, ``%2E%2E/x``, ``a%2F..%2F..%2Fx``,
        ``%2Fx``: Delta Spark would resolve these to a file outside the table, delta-ops reads
        none), and a URI of another store than the table's (``s3://`` in a local table, whose
        stripped form would name a file of this store that the log never meant).
        """
        scheme = _SCHEME.match(path_in_log)
        if scheme is not None or path_in_log.startswith("/"):
            if scheme is not None and _store_of(scheme.group(1)) != _store_of(self._scheme):
                raise UnsafePath(
                    f"{path_in_log!r} is on another store than the table {self.url}:"
                    " delta-ops reads and deletes only through the table's own store"
                )
            return self.backend.strip_protocol(unquote(path_in_log))
        decoded = unquote(path_in_log)
        if leaves_root(decoded):
            raise UnsafePath(
                f"{path_in_log!r} leaves the table root {self.root} (decoded: {decoded!r}):"
                " a relative path in the log must stay inside the table"
            )
        return self.join(decoded)

    @property
    def _scheme(self) -> str:
        """The scheme of the table's URL (``file`` for a local path)."""
        found = _SCHEME.match(self.url)
        return found.group(1) if found is not None else "file"

    def relative_inside_root(self, path_in_log: str) -> str:
        """Return the decoded table-relative path, refusing (`UnsafePath`) anything
        outside the root: `table_path`'s refusals and absolute paths elsewhere."""
        full = posixpath.normpath(self.table_path(path_in_log))
        root = posixpath.normpath(self.root)
        if full != root and not full.startswith(root.rstrip("/") + "/"):
            raise UnsafePath(f"{path_in_log!r} resolves outside the table root {self.root}")
        return full[len(root) :].lstrip("/")

    def stays_inside(self, relative: str) -> bool:
        """True when a decoded table-relative path (a file or a directory) is inside the root
        as written and, on a local disk, once its symlinks are resolved: what a rewrite may
        write into and a vacuum may plan to delete."""
        if leaves_root(relative):
            return False
        if not relative:
            return True
        return self.backend.resolves_inside(self.join(relative))

    def log_file(self, name: str) -> str:
        """Absolute path of a file inside `_delta_log`."""
        return posixpath.join(self.log_path, name)

    # ----------------------------------------------------------------------------- listing
    def list_log(self, subdir: str = "", *, from_version: int | None = None) -> list[FileEntry]:
        """List files directly in `_delta_log` (or one of its subdirectories), sorted by name.
        Hidden names (temp files of concurrent writers, `.crc` checksums) are never log files
        and are left out, on every store alike.

        With `from_version`, only the files named by a version at or after it (commits,
        checkpoints, checksums, compacted logs; no `_last_checkpoint`): an object store lists
        from that name on, and a local listing stats only those, so asking about the newest
        versions costs what they hold, not the whole log.

        Raises NotADeltaTable when `_delta_log` itself does not exist.
        """
        directory = self.log_path if not subdir else self.log_file(subdir)
        first = f"{from_version:020d}" if from_version is not None else None
        return self.backend.list_log(directory, subdir=bool(subdir), first=first, url=self.url)

    def file_names_in(self, relative_dir: str, prefix: str = "") -> list[str]:
        """Names of the files directly in a table-relative directory ("" for the root) that
        start with `prefix`, sorted; [] when the directory does not exist. Listed fresh (no
        cached listing), so files other processes just wrote are seen."""
        directory = self.join(relative_dir) if relative_dir.strip("/") else self.root
        return self.backend.file_names_in(directory, prefix)

    # ----------------------------------------------------------------------------- reading
    def read_bytes(self, path: str) -> bytes:
        """Read a whole file given its absolute filesystem path."""
        with reading(path):
            return self.backend.read_bytes(path)

    def read_many(
        self, paths: Sequence[str], sizes: Sequence[int | None] | None = None
    ) -> list[bytes]:
        """Read several whole files, in order; concurrently where the filesystem supports it.
        `sizes`, what the log says each file holds, saves a local read asking the file."""
        if not paths:
            return []
        return self.backend.read_many(paths, sizes)

    def read_into(self, path: str, target: memoryview, expected_size: int) -> int:
        """Read a local file into `target`; return the bytes read.

        The file may have grown since it was listed (only `_last_checkpoint`-like files do;
        commits are immutable), so at most `len(target)` bytes are read.
        """
        with reading(path), open(path, "rb", buffering=0) as f:
            total = 0
            while total < len(target):
                n = f.readinto(target[total:])
                if not n:
                    break
                total += n
            return total

    def exists(self, path: str) -> bool:
        """Whether a file (or a directory: a prefix with files under it) exists."""
        return self.backend.exists(path)

    # ----------------------------------------------------------------------------- writing
    def put_if_absent(self, path: str, data: bytes) -> bool:
        """Create `path` with `data` only if it does not exist; return False if it already did.

        Local files: write a hidden temp file next to the target, then `os.link` it to the final
        name, which fails atomically across processes when the name is taken. Other filesystems:
        one `pipe_file(mode="create")` request, which each store's fsspec implementation sends as
        its put-if-absent (s3fs `If-None-Match: *`, adlfs `overwrite=False`, gcsfs
        `ifGenerationMatch=0`). Not `open(mode="xb")`: gcsfs' streaming upload drops the
        precondition on some servers, while the single-request form is honoured everywhere.
        """
        return self.backend.put_if_absent(path, data)

    @property
    def supports_conditional_create(self) -> bool:
        """Whether this filesystem is known to honour exclusive create (`mode="xb"`).

        An implementation that silently treats "xb" as "wb" would let two writers overwrite
        each other's commits, so only filesystems verified to refuse are trusted; for others
        the transaction refuses to commit unless the caller declares a single writer.
        """
        return self.backend.supports_conditional_create

    def create_new(
        self,
        path: str,
        write: Callable[[BinaryIO], object],
        *,
        replace_empty: bool = False,
        unique_name: bool = False,
    ) -> tuple[bool, int]:
        """Create `path` from a streaming writer, only if absent; return (created, size).

        Local: the writer fills a hidden temp file, which is linked into place, so readers
        never see a partial file and a concurrent creator wins cleanly. Elsewhere the content
        is buffered and put with `put_if_absent` (one request). With `replace_empty`, an
        existing 0-byte file (which every Delta reader ignores) is replaced.

        `unique_name`: the caller made the name unique (a random UUID in it, as data files
        have), so no other writer can want it. On an object store the content is then
        streamed in parts of STREAM_BLOCK_BYTES (memory holds one part, not the file), and the
        object appears whole when the upload completes, or not at all.
        """
        if unique_name and self.backend.streams_uploads:
            return self.backend.stream_new(path, write, STREAM_BLOCK_BYTES)
        return self.backend.create_new(path, write, replace_empty=replace_empty)

    def write_atomic(self, path: str, data: bytes) -> None:
        """Write or replace `path` so that readers see either the old or the new content.

        Local: temp file + `os.replace`. Object stores: a single PUT, which is atomic.
        """
        self.backend.write_atomic(path, data)

    def stat(self, path: str) -> FileEntry | None:
        """Size and mtime of a file (name: its base name), or None when it does not exist."""
        return self.backend.stat(path)

    def list_tree(self, relative: str) -> list[FileEntry]:
        """Every file under a table-relative directory, hidden names included, symlinks not
        followed (names relative to that directory; [] when it does not exist).

        A directory that cannot be listed raises: the listing is never silently partial
        (vacuum judges a staging folder by its newest file, and one it could not see may be
        a running write's). Only a directory removed meanwhile has nothing to list."""
        return self.backend.list_tree(self.join(relative))

    def open_input(self, path: str) -> BinaryIO:
        """A seekable binary reader of a file given its filesystem path."""
        with reading(path):
            return self.backend.open_input(path)

    @property
    def reader(self) -> FileReader:
        """This storage as the ``open(path, "rb")`` reader the protocol's file readers take
        (footer statistics, deletion vectors), so they never see fsspec."""
        return FileReader(self)

    def move_new(self, source: str, relative: str) -> bool:
        """Move a staged file to a table-relative path that must not exist yet; False if it
        does. The moved file's mtime becomes now (locally; on object stores the copy is new),
        so vacuum's in-flight grace measures how long ago it was staged, not when a task
        started writing it."""
        return self.backend.move_new(source, self.join(relative))

    def remove_tree(self, relative: str) -> None:
        """Delete a table-relative directory and everything in it (missing: nothing to do);
        one outside the root is refused (`UnsafePath`)."""
        if not relative or leaves_root(relative):
            raise UnsafePath(f"{relative!r}: not a directory inside the table root {self.root}")
        self.backend.remove_tree(relative)

    def walk(
        self,
        skip_name: Callable[[str], bool],
        known_names: Sequence[str] = (),
        omit: Container[str] = frozenset(),
        *,
        under: str = "",
        recursive: bool = True,
    ) -> TreeListing:
        """Files and directories under the root (or the directory `under`; only its own
        entries when not `recursive`), pruning names `skip_name` accepts; `known_names` (paths
        expected to exist) let a store list in parallel ranges; files in `omit` (relative
        paths the caller needs no facts about) are left out unexamined."""
        return tree.walk(
            self._files, skip_name, known_names, omit, under=under, recursive=recursive
        )

    def delete_many(
        self,
        relative_paths: Sequence[str],
        on_deleted: Callable[[Sequence[str]], object] | None = None,
    ) -> list[str]:
        """Delete table-relative files in parallel, never outside the root; the deleted ones.
        `on_deleted` hears about each finished batch (for progress)."""
        return tree.delete_many(self._files, relative_paths, on_deleted)

    def remove_empty_dirs(self, relative_dirs: Sequence[str]) -> int:
        """Remove those of the table-relative directories that are empty, in order."""
        return tree.remove_empty_dirs(self._files, relative_dirs)

    def delete(self, paths: Iterable[str]) -> None:
        """Delete files (not directories) given as paths in the filesystem; a file that is
        already gone is not an error. A local file's Hadoop checksum sidecar goes with it
        (`tree.unlink_local`). A path outside the table root refuses the whole call
        (`UnsafePath`) before anything is deleted."""
        paths = list(paths)
        root = posixpath.normpath(self.root).rstrip("/") + "/"
        for p in paths:
            if not posixpath.normpath(p).startswith(root):
                raise UnsafePath(f"{p!r} is outside the table root {self.root}: not deleted")
        self.backend.delete_files(paths)


def _backend_for(files: TableRoot, log_dir: str) -> StorageBackend:
    """The backend of the client that serves `files`: the native client's when it is there,
    the local disk's for a local table, else fsspec's."""
    if files.native is not None:
        return NativeBackend(files, log_dir)
    if files.is_local:
        return LocalBackend(files, log_dir)
    return FsspecBackend(files, log_dir)


__all__ = [
    "CONDITIONAL_CREATE_PROTOCOLS",
    "LOG_DIR",
    "NATIVE_PROBE_NAME",
    "PROBED_CONDITIONAL_PROTOCOLS",
    "STREAMED_UPLOAD_PROTOCOLS",
    "STREAM_BLOCK_BYTES",
    "FileEntry",
    "FileReader",
    "Location",
    "Storage",
    "is_temporary_name",
    "temporary_path",
]
