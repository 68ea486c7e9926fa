"""The storage backend interface: what `Storage` asks of the client that serves a table.

`delta_ops.storage.Storage` (``table_storage``) knows a table's paths: its root, its
`_delta_log`, how a path written in the log resolves, what stays inside the root. What a
path's bytes are, and how a file is listed, read, created or deleted, it asks one
`StorageBackend`, chosen once when the table is opened, one class per client (as
delta-kernel-rs passes one storage handler per store):

* `delta_ops.storage.local_backend.LocalBackend`: a local disk, through ``os`` (a temp file
  linked or renamed into place for every write);
* `delta_ops.storage.native_backend.NativeBackend`: S3, Azure Blob and GCS through the native
  client (obstore, `delta_ops.storage.native_store.NativeStore`);
* `delta_ops.storage.fsspec_backend.FsspecBackend`: every other URL (and an object store with
  the storage option ``client=fsspec``), through its fsspec filesystem.

Paths are the client's own (a local path, or fsspec's ``bucket/key``) and absolute; `Storage`
joins table-relative names before it asks. Every backend is made from the table's
`delta_ops.storage.filesystem.TableRoot` and its `_delta_log` path (where a conditional-write
probe may be made):

    backend = LocalBackend(TableRoot(None, "/data/events"), "/data/events/_delta_log")
    backend.put_if_absent("/data/events/_delta_log/00000000000000000003.json", body)
    backend.list_log("/data/events/_delta_log", subdir=False, first=None, url="/data/events")

`PutBackend` is what the two object-store clients share: a create is one conditional PUT
(there is no link to make), trusted only on a store known or probed to honour it
(`probed_once`, whose answers `PROBED` keeps for the process). `FileEntry` is a listed file
as every backend returns it.
"""

from __future__ import annotations

import io
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import BinaryIO

from delta_ops.storage.filesystem import TableRoot

logger = logging.getLogger(__name__)

#: (protocol, endpoint) -> whether that endpoint honours conditional creates (If-None-Match),
#: asked once per process (`probed_once`)
PROBED: dict[tuple[str, str], bool] = {}


@dataclass(frozen=True)
class FileEntry:
    """One listed file: its name relative to the listed directory, size and mtime in ms."""

    name: str
    size: int
    modification_time: int


def named_from(name: str, first: str) -> bool:
    """Whether a log file name is a version's (it starts with a digit) at or after `first`."""
    return name[:1].isdigit() and name >= first


def remove_probe(remove: Callable[[], object], probe: str) -> None:
    """Remove a probe object; a store that refuses (a role allowed to write the log but
    not to delete from it) or fails keeps it: the probe is hidden, harmless, and never
    worth failing the operation that needed the answer."""
    try:
        remove()
    except FileNotFoundError:
        pass
    except Exception as exc:  # noqa: BLE001 - the answer stands; the probe is left
        logger.debug("%s: the conditional-write probe was left: %s", probe, exc)


def probed_once(
    key: tuple[str, str],
    probe: str,
    create: Callable[[str, bytes], object],
    remove: Callable[[], object],
) -> bool:
    """Whether the endpoint `key` names honours exclusive creates: `create` (one exclusive
    create, FileExistsError when the name is taken) makes `probe` twice, and a store that
    honours the precondition refuses the second. Asked once per endpoint and process
    (`PROBED`); the probe is removed with `remove` (`remove_probe`)."""
    if key not in PROBED:
        try:
            for attempt in (b"1", b"2"):  # the same exclusive create put_if_absent uses
                create(probe, attempt)
            PROBED[key] = False  # the second create went through: not conditional
        except FileExistsError:
            PROBED[key] = True
        finally:
            remove_probe(remove, probe)
    return PROBED[key]


class StorageBackend(ABC):
    """One client's file operations on one table (see the module docstring). Paths are
    absolute paths of the client; `Storage` has checked that they are the table's."""

    #: which client this is (`Storage.client`): ``local``, ``native`` or ``fsspec``
    name: str

    def __init__(self, files: TableRoot, log_dir: str) -> None:
        #: the table root on its filesystem (shared with `tree` and `bulk_delete`)
        self.files = files
        #: the table's `_delta_log` path: where a conditional-write probe is made
        self.log_dir = log_dir

    # --------------------------------------------------------------------------- paths
    @abstractmethod
    def strip_protocol(self, url: str) -> str:
        """An absolute URI (or path) of this store as this client's path."""

    def resolves_inside(self, path: str) -> bool:
        """Whether `path`, a path inside the root as written, stays inside it once resolved
        (symlinks: a local disk's only; object stores have none)."""
        return True

    # --------------------------------------------------------------------------- listing
    @abstractmethod
    def list_log(
        self, directory: str, *, subdir: bool, first: str | None, url: str
    ) -> list[FileEntry]:
        """The files directly in `directory` (`_delta_log`, or one of its subdirectories when
        `subdir`), hidden names left out, sorted by name; with `first` (a version's 20-digit
        name), only the version-named files from it on. A missing `_delta_log` raises
        `NotADeltaTable` (naming `url`, the table); a missing subdirectory lists nothing."""

    @abstractmethod
    def file_names_in(self, directory: str, prefix: str) -> list[str]:
        """Names of the files directly in `directory` starting with `prefix`, sorted, listed
        fresh; [] when it does not exist."""

    @abstractmethod
    def list_tree(self, top: str) -> list[FileEntry]:
        """Every file under `top` (names relative to it), hidden ones included, sorted; []
        when there is none. A directory that cannot be listed raises."""

    @abstractmethod
    def stat(self, path: str) -> FileEntry | None:
        """Size and mtime of a file (name: its base name), or None when it does not exist."""

    @abstractmethod
    def exists(self, path: str) -> bool:
        """Whether a file (or a directory: a prefix with files under it) exists."""

    # --------------------------------------------------------------------------- reading
    @abstractmethod
    def read_bytes(self, path: str) -> bytes:
        """A whole file."""

    @abstractmethod
    def read_many(self, paths: Sequence[str], sizes: Sequence[int | None] | None) -> list[bytes]:
        """Several whole files, in order (`paths` is not empty); `sizes`, what the log says
        each holds, may save asking the file."""

    @abstractmethod
    def read_ranges(
        self, paths: Sequence[str], starts: Sequence[int], ends: Sequence[int]
    ) -> list[bytes]:
        """Byte ranges ``[start, end)`` of files, in order (errors raise)."""

    @abstractmethod
    def open_input(self, path: str) -> BinaryIO:
        """A seekable binary reader of a file."""

    # --------------------------------------------------------------------------- writing
    @property
    @abstractmethod
    def supports_conditional_create(self) -> bool:
        """Whether this client is known (or probed) to create a file only if absent."""

    @abstractmethod
    def put_if_absent(self, path: str, data: bytes) -> bool:
        """Create `path` with `data` only if it does not exist; False if it already did."""

    @abstractmethod
    def create_new(
        self, path: str, write: Callable[[BinaryIO], object], *, replace_empty: bool
    ) -> tuple[bool, int]:
        """Create `path` from a streaming writer only if absent (with `replace_empty`, an
        existing 0-byte file is replaced); (created, size)."""

    @property
    def streams_uploads(self) -> bool:
        """Whether a new file with a unique name goes up in parts and appears only when
        complete (`stream_new`)."""
        return False

    def stream_new(
        self, path: str, write: Callable[[BinaryIO], object], part_bytes: int
    ) -> tuple[bool, int]:
        """Upload `path` as `write` produces it, in parts of `part_bytes`; nothing appears
        under the name when it fails. Only where `streams_uploads`."""
        raise NotImplementedError(f"{self.name} does not stream uploads")

    @abstractmethod
    def write_atomic(self, path: str, data: bytes) -> None:
        """Write or replace `path` so that readers see either the old or the new content."""

    @abstractmethod
    def move_new(self, source: str, target: str) -> bool:
        """Move a staged file to `target`, which must not exist yet; False if it does."""

    # --------------------------------------------------------------------------- deleting
    @abstractmethod
    def remove_tree(self, relative: str) -> None:
        """Delete a table-relative directory (checked inside the root) and everything in it;
        missing: nothing to do."""

    @abstractmethod
    def delete_files(self, paths: Sequence[str]) -> None:
        """Delete files (checked inside the root); one already gone is not an error."""


class PutBackend(StorageBackend):
    """A client whose creates are single requests (the object stores' conditional PUT):
    `put_if_absent` and `create_new` on top of `create_exclusive`, trusted only where
    `supports_conditional_create`."""

    @property
    @abstractmethod
    def client_name(self) -> str:
        """The client and its endpoint, as an error names them."""

    @abstractmethod
    def create_exclusive(self, path: str, data: bytes) -> None:
        """One exclusive create; FileExistsError when the name is taken."""

    def put_if_absent(self, path: str, data: bytes) -> bool:
        if not self.supports_conditional_create:
            raise NotImplementedError(
                f"{self.client_name} is not known to create files only-if-absent"
            )
        try:
            self.create_exclusive(path, data)
            return True
        except FileExistsError:
            return False

    def create_new(
        self, path: str, write: Callable[[BinaryIO], object], *, replace_empty: bool
    ) -> tuple[bool, int]:
        """The content is buffered and put with `put_if_absent` (one request)."""
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


__all__ = [
    "PROBED",
    "FileEntry",
    "PutBackend",
    "StorageBackend",
    "named_from",
    "probed_once",
    "remove_probe",
]
