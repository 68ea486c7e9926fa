"""The local-disk backend: a table on this machine's file system, through ``os``.

`delta_ops.storage.Storage` serves a local path (and a ``file://`` URL fsspec would open with
its plain local filesystem) with a `LocalBackend` (the interface: `delta_ops.storage.backend`).
Every write stages its content in a hidden, fsynced temp file beside the target
(`temporary_path`, `_staged_local`) and then publishes it in one step: `os.link` for a file
that must not exist yet (a commit: the link fails atomically when another process took the
name), `os.replace` for one that is replaced (`_last_checkpoint`). Readers never see a partial
file; a killed process leaves only a temp file, which `is_temporary_name` recognises and
vacuum collects. A commit we win drops a Hadoop checksum a losing Delta Spark writer may have
left under its name (`_drop_hadoop_checksum_of`). Reads of small files go straight to
``os.read`` (`_read_local`); listings use ``os.scandir``; nothing follows a symlink out of
the root.

    backend = LocalBackend(TableRoot(None, "/data/events"), "/data/events/_delta_log")
    backend.put_if_absent("/data/events/_delta_log/00000000000000000003.json", body)
    backend.read_many(["/data/events/_delta_log/00000000000000000003.json"], None)

fsspec is imported only for `strip_protocol` (an absolute URI in the log), so a CLI run on
a local table starts without it.
"""

from __future__ import annotations

import os
import posixpath
import re
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from types import ModuleType
from typing import BinaryIO

from delta_ops.errors import NotADeltaTable, note_reading, reading
from delta_ops.storage import tree
from delta_ops.storage.backend import FileEntry, StorageBackend, named_from

_TEMPORARY_NAME = re.compile(r"^\..+\.[0-9a-f]{32}\.tmp$")


def temporary_path(directory: str, name: str) -> str:
    """Where a write stages `name` before it is linked or renamed into place (a hidden name:
    readers and vacuum's listing skip it; a crash leaves it behind, see `is_temporary_name`)."""
    return os.path.join(directory, f".{name}.{uuid.uuid4().hex}.tmp")


def is_temporary_name(name: str) -> bool:
    """Whether a file name is one of `temporary_path`'s (a write in progress or a crashed one)."""
    return bool(_TEMPORARY_NAME.match(name))


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


class LocalBackend(StorageBackend):
    """A table on the local disk (see the module docstring)."""

    name = "local"

    # --------------------------------------------------------------------------- paths
    def strip_protocol(self, url: str) -> str:
        return str(self.files.filesystem._strip_protocol(url))

    def resolves_inside(self, path: str) -> bool:
        """Whether `path` is inside the root once its symlinks are resolved."""
        return tree.really_inside(os.path.realpath(self.files.root), path)

    # --------------------------------------------------------------------------- listing
    def list_log(
        self, directory: str, *, subdir: bool, first: str | None, url: str
    ) -> list[FileEntry]:
        must_exist = not subdir
        try:
            with os.scandir(directory) as it:
                entries = []
                for item in it:
                    name = item.name
                    if name.startswith("."):
                        continue  # temp files of concurrent writers, checksum files: never log files
                    if first is not None and not named_from(name, first):
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

    def file_names_in(self, directory: str, prefix: str) -> list[str]:
        try:
            with os.scandir(directory) as it:
                return sorted(e.name for e in it if e.name.startswith(prefix) and e.is_file())
        except (FileNotFoundError, NotADirectoryError):
            return []

    def list_tree(self, top: str) -> list[FileEntry]:
        entries: list[FileEntry] = []
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

    def stat(self, path: str) -> FileEntry | None:
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return None
        return FileEntry(posixpath.basename(path), st.st_size, st.st_mtime_ns // 1_000_000)

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    # --------------------------------------------------------------------------- reading
    def read_bytes(self, path: str) -> bytes:
        with open(path, "rb") as f:
            return f.read()

    def read_many(self, paths: Sequence[str], sizes: Sequence[int | None] | None) -> list[bytes]:
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

    def read_ranges(
        self, paths: Sequence[str], starts: Sequence[int], ends: Sequence[int]
    ) -> list[bytes]:
        out = []
        for path, start, end in zip(paths, starts, ends):
            with reading(path), open(path, "rb") as f:
                f.seek(start)
                out.append(f.read(end - start))
        return out

    def open_input(self, path: str) -> BinaryIO:
        return open(path, "rb")

    # --------------------------------------------------------------------------- writing
    @property
    def supports_conditional_create(self) -> bool:
        return True  # `os.link` refuses a name that is taken

    def put_if_absent(self, path: str, data: bytes) -> bool:
        """A hidden temp file next to the target, then `os.link` to the final name, which
        fails atomically across processes when the name is taken."""
        with _staged_local(path, lambda f: f.write(data)) as tmp:
            try:
                os.link(tmp, path)
            except FileExistsError:
                return False
        _drop_hadoop_checksum_of(path)
        return True

    def create_new(
        self, path: str, write: Callable[[BinaryIO], object], *, replace_empty: bool
    ) -> tuple[bool, int]:
        """The writer fills a hidden temp file, which is linked into place, so readers never
        see a partial file and a concurrent creator wins cleanly."""
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

    def write_atomic(self, path: str, data: bytes) -> None:
        """A temp file + `os.replace`."""
        with _staged_local(path, lambda f: f.write(data)) as tmp:
            os.replace(tmp, path)

    def move_new(self, source: str, target: str) -> bool:
        """A hard link (atomic: fails when the name is taken), then the source unlinked; the
        moved file's mtime becomes now."""
        os.makedirs(os.path.dirname(target), exist_ok=True)
        try:
            os.link(source, target)  # atomic: fails when the name is taken
        except FileExistsError:
            return False
        os.unlink(source)
        os.utime(target)
        return True

    # --------------------------------------------------------------------------- deleting
    def remove_tree(self, relative: str) -> None:
        _shutil().rmtree(self.files.join(relative), ignore_errors=True)

    def delete_files(self, paths: Sequence[str]) -> None:
        """Each file with its Hadoop checksum sidecar (`tree.unlink_local`)."""
        for p in paths:
            try:
                tree.unlink_local(p)
            except FileNotFoundError:
                pass


def _shutil() -> ModuleType:
    """`shutil`, imported on first use (its import, with bz2 and lzma, is start-up cost for a CLI
    run that never removes a tree) and kept as this module's global `shutil`, where a test's fault
    harness finds it to swap."""
    module: ModuleType | None = globals().get("shutil")
    if module is None:
        import shutil

        globals()["shutil"] = module = shutil
    return module


__all__ = ["LocalBackend", "is_temporary_name", "temporary_path"]
