"""Table storage: one place where delta-ops touches files, through ``os``, obstore or fsspec.

A `Storage` is opened from a URL or local path plus storage options. It knows the
table root and its `_delta_log`, lists the log with sizes and modification times, reads files
(many at once where the filesystem can do that concurrently), and writes with the guarantees
the protocol needs: put-if-absent for commits and atomic replacement for hints.

Who serves it: a local path, ``os`` (fsspec's local filesystem only when asked); ``s3://``,
``az://``/``abfs[s]://`` and ``gs://``, the native client (obstore, `native_store`) when it is
installed, unless the storage option ``client=fsspec`` asks for fsspec (`native_options`);
every other URL, fsspec. Paths are fsspec's either way (``bucket/key``).

For example:

    storage = Storage.open("s3://bucket/table", {"anon": False})
    for entry in storage.list_log():
        print(entry.name, entry.size)
"""

from __future__ import annotations

import io
import logging
import os
import posixpath
import re
import uuid
from collections.abc import Callable, Container, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any, BinaryIO, TypeAlias
from urllib.parse import unquote

from delta_ops.errors import (
    InvalidLocation,
    MissingExtra,
    NotADeltaTable,
    UnsafePath,
    note_reading,
    reading,
)
from delta_ops.storage import tree
from delta_ops.storage.filesystem import TableRoot, is_local_fs, leaves_root, mtime_ms
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

# fsspec protocols verified (by delta-ops' tests) to refuse "xb" when the file exists
CONDITIONAL_CREATE_PROTOCOLS = frozenset({"file", "local", "memory"})
# Stores whose fsspec implementation sends a conditional PUT for exclusive creates (s3fs:
# `If-None-Match: *`; adlfs: upload with overwrite=False, which Azure refuses for a taken name;
# gcsfs: `ifGenerationMatch=0`). S3-compatible servers that ignore the header would let two
# writers overwrite each other's commits, so each endpoint is probed once before it is trusted.
PROBED_CONDITIONAL_PROTOCOLS = frozenset({"s3", "s3a", "az", "abfs", "abfss", "gs", "gcs"})
_PROBED: dict[tuple[str, str], bool] = {}  # (protocol, endpoint) -> honours If-None-Match


@dataclass(frozen=True)
class FileEntry:
    """One listed file: its name relative to the listed directory, size and mtime in ms."""

    name: str
    size: int
    modification_time: int


_TEMPORARY_NAME = re.compile(r"^\..+\.[0-9a-f]{32}\.tmp$")

#: a URI's scheme (RFC 3986: a letter, then letters, digits, ``+-.``), before ``://``
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)://")


def _store_of(scheme: str) -> str:
    """Which store a URI scheme names: the schemes of one store share it (``s3a`` is S3's,
    ``abfss`` Azure's, ``local`` the local disk's), every other scheme is its own."""
    lowered = scheme.lower()
    return "local" if lowered in ("file", "local") else STORE_EXTRAS.get(lowered, lowered)


SINGLE_WRITER_OPTION = "single_writer"
#: stores whose uploads `create_new(..., unique_name=True)` streams (see `_streams_uploads`)
STREAMED_UPLOAD_PROTOCOLS = frozenset({"s3", "s3a", "az", "abfs", "abfss"})
#: the part size of a streamed upload (`create_new(..., unique_name=True)` on an object
#: store): what memory holds of a file being written; a multiple of 256 KiB (GCS chunks) and
#: at least 5 MiB (S3 parts)
STREAM_BLOCK_BYTES = 16 * 1024 * 1024


_flag = option_flag  # true/false storage options: the same words on both clients


def temporary_path(directory: str, name: str) -> str:
    """Where a write stages `name` before it is linked or renamed into place (a hidden name:
    readers and vacuum's listing skip it; a crash leaves it behind, see `is_temporary_name`)."""
    return os.path.join(directory, f".{name}.{uuid.uuid4().hex}.tmp")


def is_temporary_name(name: str) -> bool:
    """Whether a file name is one of `temporary_path`'s (a write in progress or a crashed one)."""
    return bool(_TEMPORARY_NAME.match(name))


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
        native = self._storage._native
        if native is not None:
            return native.get_ranges(paths, starts, ends)
        if not self._storage.is_local:
            ranges: list[bytes] = self._storage._filesystem.cat_ranges(
                paths, starts, ends, on_error="raise"
            )
            return ranges
        out = []
        for path, start, end in zip(paths, starts, ends):
            with reading(path), open(path, "rb") as f:
                f.seek(start)
                out.append(f.read(end - start))
        return out


def _drop_hadoop_checksum_of(path: str) -> None:
    """Remove Hadoop's checksum sidecar (`.NAME.crc`) of a file we just created, if one is there.

    Delta Spark on a local filesystem writes a commit through Hadoop's checksummed filesystem,
    which keeps `.00000000000000000006.json.crc` beside `00000000000000000006.json` and checks
    every later read against it. When our commit wins a version that a Delta Spark writer also
    tried, the loser's rename can leave its checksum under the winner's name (seen in the races
    with Delta Spark: tests/reference/test_races.py), and every Delta Spark read of that commit
    then fails with a ChecksumException. A checksum file of a name we have just created can only
    be such a leftover: without it Hadoop reads the file unchecked.
    """
    folder, name = os.path.split(path)
    try:
        os.unlink(os.path.join(folder, f".{name}.crc"))
    except FileNotFoundError:
        pass


@contextmanager
def _staged_local(path: str, write: Callable[[BinaryIO], object]) -> Iterator[str]:
    """A durable (fsynced) hidden temp file next to local `path`, filled by `write`; the block
    links or renames it into place, and whatever is left of it is removed afterwards, even
    when the write fails (only a killed process leaves one, for vacuum to collect)."""
    directory, name = os.path.split(path)
    os.makedirs(directory, exist_ok=True)
    tmp = temporary_path(directory, name)
    try:
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        yield tmp
    finally:
        with suppress(FileNotFoundError):
            os.unlink(tmp)


def _raise_unless_gone(error: OSError) -> None:
    """`os.walk`'s error handler: a directory removed meanwhile has nothing to list; any other
    error (EIO, EACCES) is raised instead of leaving the directory out of the walk."""
    if not isinstance(error, FileNotFoundError):
        raise error


#: the native client's conditional-write probe in `_delta_log` (a hidden name), deleted once
#: it has answered
NATIVE_PROBE_NAME = ".delta-ops-conditional-probe"


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


def _named_from(name: str, first: str) -> bool:
    """Whether a log file name is a version's (it starts with a digit) at or after `first`."""
    return name[:1].isdigit() and name >= first


class Storage:
    """A Delta table's location: the fsspec filesystem plus the root path inside it.

    Local tables use the OS directly on hot paths (listing, reading, linking) and create their
    fsspec filesystem only when something asks for `fs`, which keeps a CLI start fast.
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
    def _native(self) -> NativeStore | None:
        """The native object-store client serving this table, or None."""
        return self._files.native

    @property
    def client(self) -> str:
        """Which client serves the table: ``local``, ``native`` (obstore) or ``fsspec``."""
        if self._files.native is not None:
            return "native"
        return "local" if self.is_local else "fsspec"

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
            decoded = unquote(path_in_log)
            if self._native is not None:
                return self._native.strip_protocol(decoded)
            return str(self._filesystem._strip_protocol(decoded))
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
        if not self.is_local or not relative:
            return True
        return tree.really_inside(os.path.realpath(self.root), self.join(relative))

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
        if self.is_local:
            return self._list_local(directory, must_exist=not subdir, first=first)
        if self._native is not None:
            if first is not None:
                return self._list_native_from(directory, first)
            objects, dirs = self._native.list_dir(directory)
            if not objects and not dirs and not subdir:
                raise NotADeltaTable(self.url, "no _delta_log directory")
            listed = [
                FileEntry(posixpath.basename(o.path), o.size, o.modification_time) for o in objects
            ]
            return sorted((e for e in listed if not e.name.startswith(".")), key=lambda e: e.name)
        self._filesystem.invalidate_cache(directory)  # a stale listing could hide a commit
        try:
            infos = self._filesystem.ls(directory, detail=True)
        except FileNotFoundError:
            if subdir:
                return []
            raise NotADeltaTable(self.url, "no _delta_log directory") from None
        entries = [
            FileEntry(
                posixpath.basename(i["name"].rstrip("/")), int(i.get("size") or 0), mtime_ms(i)
            )
            for i in infos
            if i.get("type") != "directory"
            and not posixpath.basename(i["name"].rstrip("/")).startswith(".")
        ]
        if first is not None:
            entries = [e for e in entries if _named_from(e.name, first)]
        entries.sort(key=lambda e: e.name)
        return entries

    def _list_native_from(self, directory: str, first: str) -> list[FileEntry]:
        """The version-named files directly in `directory` from `first` (a version's 20-digit
        name) on: one listing that starts after it and stops at the first name that is not a
        version's (every version-named file sorts before `_last_checkpoint`, `_sidecars/`)."""
        native = self._native
        assert native is not None
        base = native.key(directory).rstrip("/") + "/"
        entries: list[FileEntry] = []
        for page in native.list_tree(directory, offset=f"{directory.rstrip('/')}/{first}"):
            for o in page:
                name = native.key(o.path).removeprefix(base)
                if not name[:1].isdigit():
                    return entries  # past the versions: the rest is `_...` names and subtrees
                if "/" not in name and name >= first:
                    entries.append(FileEntry(name, o.size, o.modification_time))
        return entries

    def file_names_in(self, relative_dir: str, prefix: str = "") -> list[str]:
        """Names of the files directly in a table-relative directory ("" for the root) that
        start with `prefix`, sorted; [] when the directory does not exist. Listed fresh (no
        cached listing), so files other processes just wrote are seen."""
        directory = self.join(relative_dir) if relative_dir.strip("/") else self.root
        if self.is_local:
            try:
                with os.scandir(directory) as it:
                    return sorted(e.name for e in it if e.name.startswith(prefix) and e.is_file())
            except (FileNotFoundError, NotADirectoryError):
                return []
        if self._native is not None:
            objects, _dirs = self._native.list_dir(directory)
            names = (posixpath.basename(o.path) for o in objects)
            return sorted(n for n in names if n.startswith(prefix))
        self._filesystem.invalidate_cache(directory)
        try:
            infos = self._filesystem.ls(directory, detail=True)
        except FileNotFoundError:
            return []
        names = (
            posixpath.basename(i["name"].rstrip("/")) for i in infos if i.get("type") != "directory"
        )
        return sorted(n for n in names if n.startswith(prefix))

    @staticmethod
    def _list_local(directory: str, must_exist: bool, first: str | None = None) -> list[FileEntry]:
        try:
            with os.scandir(directory) as it:
                entries = []
                for item in it:
                    name = item.name
                    if name.startswith("."):
                        continue  # temp files of concurrent writers, checksum files: never log files
                    if first is not None and not _named_from(name, first):
                        continue  # not asked for: no stat
                    try:
                        if not item.is_file():
                            continue
                        st = item.stat()
                    except FileNotFoundError:
                        continue  # vanished between readdir and stat (another writer's cleanup)
                    entries.append(FileEntry(name, st.st_size, st.st_mtime_ns // 1_000_000))
        except FileNotFoundError:
            if must_exist:
                raise NotADeltaTable(
                    os.path.dirname(directory), "no _delta_log directory"
                ) from None
            return []
        except NotADirectoryError:
            raise NotADeltaTable(
                os.path.dirname(directory), "_delta_log is not a directory"
            ) from None
        entries.sort(key=lambda e: e.name)
        return entries

    # ----------------------------------------------------------------------------- reading
    def read_bytes(self, path: str) -> bytes:
        """Read a whole file given its absolute filesystem path."""
        with reading(path):
            if self.is_local:
                with open(path, "rb") as f:
                    return f.read()
            if self._native is not None:
                return self._native.get(path)
            data: bytes = self._filesystem.cat_file(path)
            return data

    def read_many(
        self, paths: Sequence[str], sizes: Sequence[int | None] | None = None
    ) -> list[bytes]:
        """Read several whole files, in order; concurrently where the filesystem supports it.
        `sizes`, what the log says each file holds, saves a local read asking the file."""
        if not paths:
            return []
        if self.is_local:
            out = []
            path = ""
            try:
                if sizes is None:
                    for path in paths:
                        out.append(_read_local(path))
                else:
                    for path, size in zip(paths, sizes, strict=True):
                        out.append(_read_local(path, size))
            except Exception as exc:
                note_reading(exc, path)  # as `reading(path)` would
                raise
            return out
        if self._native is not None:
            return self._native.get_many(paths)
        data = self._filesystem.cat(list(paths), on_error="raise")
        if isinstance(data, bytes):  # a single path comes back unwrapped
            return [data]
        return [data[p] if p in data else data[self._filesystem._strip_protocol(p)] for p in paths]

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
        if self.is_local:
            return os.path.exists(path)
        if self._native is not None:
            if self._native.head(path) is not None:
                return True
            if "." in posixpath.basename(path):  # a file's name: no directory to look for
                return False
            objects, dirs = self._native.list_dir(path)
            return bool(objects or dirs)
        return bool(self._filesystem.exists(path))

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
        if self.is_local:
            with _staged_local(path, lambda f: f.write(data)) as tmp:
                try:
                    os.link(tmp, path)
                except FileExistsError:
                    return False
            _drop_hadoop_checksum_of(path)
            return True
        if not self.supports_conditional_create:
            raise NotImplementedError(
                f"{self._client_name} is not known to create files only-if-absent"
            )
        try:
            self._create_exclusive(path, data)
            return True
        except FileExistsError:
            return False

    def _create_exclusive(self, path: str, data: bytes) -> None:
        """One exclusive create; FileExistsError when the name is taken. fsspec's local
        filesystem (and wrappers of it) opens with O_EXCL; its `pipe_file(mode="create")` would
        check and then write, which two processes can both pass."""
        if self._native is not None:
            self._native.put(path, data, create=True)
            return
        from fsspec.implementations.local import LocalFileSystem

        if isinstance(self._filesystem, LocalFileSystem):
            with self._filesystem.open(path, "xb") as handle:
                handle.write(data)
        else:
            self._filesystem.pipe_file(path, data, mode="create")

    @property
    def supports_conditional_create(self) -> bool:
        """Whether this filesystem is known to honour exclusive create (`mode="xb"`).

        An implementation that silently treats "xb" as "wb" would let two writers overwrite
        each other's commits, so only filesystems verified to refuse are trusted; for others
        the transaction refuses to commit unless the caller declares a single writer.
        """
        if self.is_local:
            return True
        if self._native is not None:
            return self._probe_conditional_create(self._native.spec.kind)
        from fsspec.implementations.local import LocalFileSystem

        if isinstance(
            self._filesystem, LocalFileSystem
        ):  # wrappers of the local filesystem: O_EXCL
            return True
        protocols = self._protocols
        if set(protocols) & CONDITIONAL_CREATE_PROTOCOLS:
            return True
        if set(protocols) & PROBED_CONDITIONAL_PROTOCOLS:
            return self._probe_conditional_create(protocols[0])
        return False

    @property
    def _client_name(self) -> str:
        if self._native is not None:
            return f"the native {self._native.spec.kind} client ({self._native.spec.endpoint})"
        return f"{type(self._filesystem).__name__} ({self._filesystem.protocol})"

    @property
    def _protocols(self) -> tuple[str, ...]:
        """The filesystem's protocol names (fsspec gives one or a tuple)."""
        protocol = self._filesystem.protocol
        return tuple(protocol) if isinstance(protocol, (tuple, list)) else (protocol,)

    def _probe_conditional_create(self, protocol: str) -> bool:
        """Create a probe object twice, exclusively: a store that honours conditional writes
        refuses the second. Done once per endpoint and process; the probe is removed, so
        nothing is left in the table.

        The native client's probe has a fixed hidden name in `_delta_log`
        (`NATIVE_PROBE_NAME`): one an older delta-ops kept there (readers and every
        listing of delta-ops skip hidden names) still answers (a refused create proves the
        endpoint conditional, since a server ignoring the precondition would overwrite it)
        and is removed with the new one."""
        if self._native is not None:
            return self._probe_native()
        client = getattr(self._filesystem, "client_kwargs", None) or {}
        key = (protocol, str(client.get("endpoint_url") or self._filesystem.storage_options))
        if key not in _PROBED:
            probe = self.log_file(f".delta-ops-conditional-probe-{uuid.uuid4().hex}")
            try:
                for attempt in (b"1", b"2"):  # the same exclusive create put_if_absent uses
                    self._create_exclusive(probe, attempt)
                _PROBED[key] = False  # the second create went through: not conditional
            except FileExistsError:
                _PROBED[key] = True
            finally:
                self._remove_probe(lambda: self._filesystem.rm_file(probe), probe)
        return _PROBED[key]

    @staticmethod
    def _remove_probe(remove: Callable[[], object], probe: str) -> None:
        """Remove a probe object; a store that refuses (a role allowed to write the log but
        not to delete from it) or fails keeps it: the probe is hidden, harmless, and never
        worth failing the operation that needed the answer."""
        try:
            remove()
        except FileNotFoundError:
            pass
        except Exception as exc:  # noqa: BLE001 - the answer stands; the probe is left
            logger.debug("%s: the conditional-write probe was left: %s", probe, exc)

    def _probe_native(self) -> bool:
        native = self._native
        assert native is not None
        key = ("native", native.spec.endpoint)
        if key not in _PROBED:
            probe = self.log_file(NATIVE_PROBE_NAME)
            try:
                for attempt in (b"1", b"2"):
                    native.put(probe, attempt, create=True)
                _PROBED[key] = False  # two creates of one name went through: not conditional
            except FileExistsError:
                _PROBED[key] = True
            finally:
                self._remove_probe(lambda: native.delete_one(probe), probe)
        return _PROBED[key]

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
        if unique_name and self._streams_uploads:
            return self._stream_new(path, write)
        if self.is_local:
            with _staged_local(path, write) as tmp:
                size = os.path.getsize(tmp)
                try:
                    os.link(tmp, path)
                    return True, size
                except FileExistsError:
                    if replace_empty and os.path.getsize(path) == 0:
                        os.replace(tmp, path)
                        return True, size
                    return False, size
        buffer = io.BytesIO()
        write(buffer)
        data = buffer.getvalue()
        if not self.supports_conditional_create:
            # checkpoint-like files only: a race is last-writer-wins, as Delta Spark on S3
            existing = self.stat(path)
            if existing is not None and not (replace_empty and existing.size == 0):
                return False, len(data)
            self.write_atomic(path, data)
            return True, len(data)
        if self.put_if_absent(path, data):
            return True, len(data)
        existing = self.stat(path)
        if replace_empty and existing is not None and existing.size == 0:
            self.write_atomic(path, data)
            return True, len(data)
        return False, len(data)

    @property
    def _streams_uploads(self) -> bool:
        """A store whose uploads go up in parts and appear only when complete: S3 and Azure
        Blob (s3fs, adlfs), and GCS through gcsfs' own filesystem. Not GCS through gcsfs'
        extended filesystem, whose files in zonal buckets are visible while written; nor
        memory://, local paths or wrappers of them, which write in place. The native client
        streams on all three stores (GCS through its XML API's multipart uploads, which
        appear only when completed)."""
        if self._native is not None:
            return True
        if self.is_local:
            return False
        names = set(self._protocols)
        if names & STREAMED_UPLOAD_PROTOCOLS:
            return True
        if names & {"gs", "gcs"}:
            return f"{type(self._filesystem).__module__}.{type(self._filesystem).__name__}" == (
                "gcsfs.core.GCSFileSystem"
            )
        return False

    def _stream_new(self, path: str, write: Callable[[BinaryIO], object]) -> tuple[bool, int]:
        """Upload `path` as `write` produces it. When `write` or the upload's completion
        fails, the upload is abandoned: the file is marked closed first (so that nothing, not
        even its finalizer, completes it), then aborted (s3fs aborts the multipart upload,
        gcsfs cancels it, Azure drops uncommitted blocks by itself), and whatever may have
        appeared under the name, which is this upload's alone, is deleted. The native client
        aborts its multipart upload the same way."""
        if self._native is not None:
            try:
                return True, self._native.upload(path, write, STREAM_BLOCK_BYTES)
            except BaseException:
                with suppress(Exception):
                    self._native.delete_one(path)
                raise
        handle = self._filesystem.open(path, "wb", block_size=STREAM_BLOCK_BYTES)
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
                self._filesystem.rm_file(path)
            raise
        return True, size

    def write_atomic(self, path: str, data: bytes) -> None:
        """Write or replace `path` so that readers see either the old or the new content.

        Local: temp file + `os.replace`. Object stores: a single PUT, which is atomic.
        """
        if self.is_local:
            with _staged_local(path, lambda f: f.write(data)) as tmp:
                os.replace(tmp, path)
            return
        if self._native is not None:
            self._native.put(path, data, create=False)
            return
        self._filesystem.pipe_file(path, data)

    def stat(self, path: str) -> FileEntry | None:
        """Size and mtime of a file (name: its base name), or None when it does not exist."""
        try:
            if self.is_local:
                st = os.stat(path)
                return FileEntry(posixpath.basename(path), st.st_size, st.st_mtime_ns // 1_000_000)
            if self._native is not None:
                found = self._native.head(path)
                if found is None:
                    return None
                return FileEntry(posixpath.basename(path), found.size, found.modification_time)
            info = self._filesystem.info(path)
        except FileNotFoundError:
            return None
        return FileEntry(posixpath.basename(path), int(info.get("size") or 0), mtime_ms(info))

    def list_tree(self, relative: str) -> list[FileEntry]:
        """Every file under a table-relative directory, hidden names included, symlinks not
        followed (names relative to that directory; [] when it does not exist).

        A directory that cannot be listed raises: the listing is never silently partial
        (vacuum judges a staging folder by its newest file, and one it could not see may be
        a running write's). Only a directory removed meanwhile has nothing to list."""
        top = self.join(relative)
        entries: list[FileEntry] = []
        if self.is_local:
            # every path os.walk yields starts with `top` and a separator: cut, not relpath
            # (which normalises each path: a third of a 2,000-file walk)
            cut = len(os.path.join(top, ""))
            for dirpath, _dirs, files in os.walk(top, onerror=_raise_unless_gone):
                for name in files:
                    full = os.path.join(dirpath, name)
                    try:
                        st = os.lstat(full)
                    except FileNotFoundError:
                        continue
                    rel = full[cut:].replace(os.sep, "/")
                    entries.append(FileEntry(rel, st.st_size, st.st_mtime_ns // 1_000_000))
            return sorted(entries, key=lambda e: e.name)
        prefix = top.rstrip("/") + "/"
        if self._native is not None:
            for page in self._native.list_tree(top):
                entries.extend(
                    FileEntry(o.path[len(prefix) :], o.size, o.modification_time)
                    for o in page
                    if o.path.startswith(prefix)
                )
            return sorted(entries, key=lambda e: e.name)
        try:
            found = self._filesystem.find(top, detail=True)
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

    def open_input(self, path: str) -> BinaryIO:
        """A seekable binary reader of a file given its filesystem path."""
        with reading(path):
            if self.is_local:
                return open(path, "rb")
            if self._native is not None:
                return self._native.open_reader(path)
            handle: BinaryIO = self._filesystem.open(path, "rb")
            return handle

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
        target = self.join(relative)
        if self.is_local:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            try:
                os.link(source, target)  # atomic: fails when the name is taken
            except FileExistsError:
                return False
            os.unlink(source)
            os.utime(target)
            return True
        if self._native is not None:
            if self._native.head(target) is not None:
                return False
            self._native.copy(source, target)
            with suppress(FileNotFoundError):
                self._native.delete_one(source)
            return True
        if self._filesystem.exists(target):
            return False
        self._filesystem.makedirs(posixpath.dirname(target), exist_ok=True)
        self._filesystem.mv(source, target)
        return True

    def remove_tree(self, relative: str) -> None:
        """Delete a table-relative directory and everything in it (missing: nothing to do);
        one outside the root is refused (`UnsafePath`)."""
        if not relative or leaves_root(relative):
            raise UnsafePath(f"{relative!r}: not a directory inside the table root {self.root}")
        top = self.join(relative)
        if self.is_local:
            import shutil  # here: its import (with bz2 and lzma) is start-up cost elsewhere

            shutil.rmtree(top, ignore_errors=True)
            return
        if self._native is not None:
            names = [e.name for e in self.list_tree(relative)]
            self.delete_many([posixpath.join(relative, n) for n in names])
            return
        if self._filesystem.exists(top):
            self._filesystem.rm(top, recursive=True)

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
        if self._native is not None:
            for p in paths:
                with suppress(FileNotFoundError):
                    self._native.delete_one(p)
            return
        remove = tree.unlink_local if self.is_local else self._filesystem.rm_file
        for p in paths:
            try:
                remove(p)
            except FileNotFoundError:
                pass


def _read_local(path: str, size: int | None = None) -> bytes:
    """A local file's whole content, by `os` calls: for a file of a few hundred bytes (a
    compaction reads thousands), a file object's set-up costs more than the read itself.
    `size` (what the log says, else asked of the file) is read in one call that asks for a
    byte more; a file longer or shorter than that is read to its end, as `open(path,
    "rb").read()` reads it. Its access time is left alone where the process may do that
    (O_NOATIME, its owner's): a maintenance read is no use of the data."""
    global _OPEN_FLAGS
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except PermissionError:
        if _OPEN_FLAGS == os.O_RDONLY:
            raise
        _OPEN_FLAGS = os.O_RDONLY  # not the files' owner: O_NOATIME is refused, never ask again
        fd = os.open(path, _OPEN_FLAGS)
    try:
        if size is None or size < 0:
            size = os.fstat(fd).st_size
        data = os.read(fd, size + 1)
        if len(data) == size:
            return data  # all of it: the byte more was not there
        chunks = [data]
        while chunk := os.read(fd, 1024 * 1024):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


#: how `_read_local` opens files: without updating their access time where the OS can
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NOATIME", 0)
