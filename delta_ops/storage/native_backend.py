"""The native-client backend: an S3, Azure Blob or GCS table through obstore.

`delta_ops.storage.Storage` serves ``s3://``, ``az://``/``abfs[s]://`` and ``gs://`` tables
with a `NativeBackend` (the interface: `delta_ops.storage.backend`) when the native client is
installed and no storage option asks for fsspec (`native_options.choose_client`). It turns
each of the interface's operations into requests of the table's
`delta_ops.storage.native_store.NativeStore`: a commit is one conditional PUT
(``If-None-Match: *`` or ``ifGenerationMatch=0``), trusted once the endpoint has refused a
second create of a probe (`NATIVE_PROBE_NAME` and a unique suffix) in `_delta_log`; a data file with a unique
name streams up as a multipart upload, which appears only when complete; a listing from a
version on starts at that version's name.

    backend = NativeBackend(TableRoot(None, "lake/events", native=store), "lake/events/_delta_log")
    backend.put_if_absent("lake/events/_delta_log/00000000000000000003.json", body)
    backend.list_log("lake/events/_delta_log", subdir=False, first=None, url="s3://lake/events")
"""

from __future__ import annotations

import posixpath
import uuid
from collections.abc import Callable, Sequence
from contextlib import suppress
from typing import BinaryIO

from delta_ops.errors import NotADeltaTable
from delta_ops.storage import tree
from delta_ops.storage.backend import FileEntry, PutBackend, probed_once
from delta_ops.storage.filesystem import TableRoot
from delta_ops.storage.native_store import NativeStore

#: the native client's conditional-write probe in `_delta_log` (a hidden name), deleted once
#: it has answered
NATIVE_PROBE_NAME = ".delta-ops-conditional-probe"


class NativeBackend(PutBackend):
    """A table the native client serves (see the module docstring)."""

    name = "native"

    def __init__(self, files: TableRoot, log_dir: str) -> None:
        super().__init__(files, log_dir)
        assert files.native is not None
        #: the table's bucket (container) on the native client
        self.store: NativeStore = files.native

    @property
    def client_name(self) -> str:
        return f"the native {self.store.spec.kind} client ({self.store.spec.endpoint})"

    # --------------------------------------------------------------------------- paths
    def strip_protocol(self, url: str) -> str:
        return self.store.strip_protocol(url)

    # --------------------------------------------------------------------------- listing
    def list_log(
        self, directory: str, *, subdir: bool, first: str | None, url: str
    ) -> list[FileEntry]:
        if first is not None:
            return self._list_from(directory, first)
        objects, dirs = self.store.list_dir(directory)
        if not objects and not dirs and not subdir:
            raise NotADeltaTable(url, "no _delta_log directory")
        listed = [
            FileEntry(posixpath.basename(o.path), o.size, o.modification_time) for o in objects
        ]
        return sorted((e for e in listed if not e.name.startswith(".")), key=lambda e: e.name)

    def _list_from(self, directory: str, first: str) -> list[FileEntry]:
        """The version-named files directly in `directory` from `first` (a version's 20-digit
        name) on: one listing that starts after it and stops at the first name that is not a
        version's (every version-named file sorts before `_last_checkpoint`, `_sidecars/`)."""
        native = self.store
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

    def file_names_in(self, directory: str, prefix: str) -> list[str]:
        objects, _dirs = self.store.list_dir(directory)
        names = (posixpath.basename(o.path) for o in objects)
        return sorted(n for n in names if n.startswith(prefix))

    def list_tree(self, top: str) -> list[FileEntry]:
        entries: list[FileEntry] = []
        prefix = top.rstrip("/") + "/"
        for page in self.store.list_tree(top):
            entries.extend(
                FileEntry(o.path[len(prefix) :], o.size, o.modification_time)
                for o in page
                if o.path.startswith(prefix)
            )
        return sorted(entries, key=lambda e: e.name)

    def stat(self, path: str) -> FileEntry | None:
        try:
            found = self.store.head(path)
        except FileNotFoundError:
            return None
        if found is None:
            return None
        return FileEntry(posixpath.basename(path), found.size, found.modification_time)

    def exists(self, path: str) -> bool:
        if self.store.head(path) is not None:
            return True
        if "." in posixpath.basename(path):  # a file's name: no directory to look for
            return False
        objects, dirs = self.store.list_dir(path)
        return bool(objects or dirs)

    # --------------------------------------------------------------------------- reading
    def read_bytes(self, path: str) -> bytes:
        return self.store.get(path)

    def read_many(self, paths: Sequence[str], sizes: Sequence[int | None] | None) -> list[bytes]:
        return self.store.get_many(paths)

    def read_ranges(
        self, paths: Sequence[str], starts: Sequence[int], ends: Sequence[int]
    ) -> list[bytes]:
        return self.store.get_ranges(paths, starts, ends)

    def open_input(self, path: str) -> BinaryIO:
        return self.store.open_reader(path)

    # --------------------------------------------------------------------------- writing
    @property
    def supports_conditional_create(self) -> bool:
        """Probed once per endpoint and process, with a probe of its own: a hidden name in
        `_delta_log` made unique per probe (`NATIVE_PROBE_NAME` and a random suffix). One
        shared name let processes probing at once answer each other wrongly: B's create was
        refused by A's probe, B deleted it, and A's second create then went through, so A
        judged the store unconditional and refused its commit. The probe is deleted with the
        fixed name an older delta-ops kept there (readers and every listing skip hidden
        names), in one bulk request."""
        native = self.store
        probe = posixpath.join(self.log_dir, f"{NATIVE_PROBE_NAME}-{uuid.uuid4().hex}")
        legacy = posixpath.join(self.log_dir, NATIVE_PROBE_NAME)
        return probed_once(
            ("native", native.spec.endpoint),
            probe,
            lambda path, data: native.put(path, data, create=True),
            lambda: native.delete_keys([native.key(probe), native.key(legacy)]),
        )

    def create_exclusive(self, path: str, data: bytes) -> None:
        self.store.put(path, data, create=True)

    @property
    def streams_uploads(self) -> bool:
        """The native client streams on all three stores (GCS through its XML API's
        multipart uploads, which appear only when completed)."""
        return True

    def stream_new(
        self, path: str, write: Callable[[BinaryIO], object], part_bytes: int
    ) -> tuple[bool, int]:
        """A failed upload is aborted (by `NativeStore.upload`), and whatever may have
        appeared under the name, which is this upload's alone, is deleted."""
        try:
            return True, self.store.upload(path, write, part_bytes)
        except BaseException:
            with suppress(Exception):
                self.store.delete_one(path)
            raise

    def write_atomic(self, path: str, data: bytes) -> None:
        """A single PUT, which is atomic."""
        self.store.put(path, data, create=False)

    def move_new(self, source: str, target: str) -> bool:
        """A copy (the target's mtime is the copy's), then the source deleted."""
        if self.store.head(target) is not None:
            return False
        self.store.copy(source, target)
        with suppress(FileNotFoundError):
            self.store.delete_one(source)
        return True

    # --------------------------------------------------------------------------- deleting
    def remove_tree(self, relative: str) -> None:
        """Every object under it, by the bulk deleter (`tree.delete_many`)."""
        names = [e.name for e in self.list_tree(self.files.join(relative))]
        tree.delete_many(self.files, [posixpath.join(relative, n) for n in names])

    def delete_files(self, paths: Sequence[str]) -> None:
        for p in paths:
            with suppress(FileNotFoundError):
                self.store.delete_one(p)


__all__ = ["NATIVE_PROBE_NAME", "NativeBackend"]
