"""Fault injection for storage tests: a local fsspec filesystem that crashes on its Nth write.

:class:`FaultyFileSystem` is fsspec's ``LocalFileSystem`` under its own protocol
(``faultyfile://``), so delta-ops' :class:`~delta_ops.storage.Storage` does not take its OS
fast path and every write goes through fsspec. It counts write operations (opening a file
for writing, ``pipe_file``, ``mv``, ``cp_file``, ``rm_file``/``rm``, ``touch``) and raises
:class:`InjectedCrash` on the ``crash_on``-th one, either before the write happens
(``when="before"``: nothing of it reaches the disk) or after it completed
(``when="after"``: the write is durable but the caller never learns it succeeded, like a
process killed right after a PUT returned).

The counter lives in a :class:`FaultPlan` passed as a storage option, so a test can read
back how many writes a run did and which::

    faults = FaultPlan(crash_on=3, when="after")
    with pytest.raises(InjectedCrash):
        enable_row_tracking(faulty_url(path), storage_options=faulty_options(faults))
    print(faults.writes)        # [("open:xb", ".../_delta_log/00000000000000000001.json"), ...]

A plan with ``crash_on=None`` only counts.

The same plan drives three more kinds of fault, and :func:`local_faults` injects all of them
into the path local tables really take (``delta_ops.storage`` on the OS: a temp file linked or
renamed into place, ``os.unlink``/``os.rmdir``, ``os.scandir``/``os.walk``), in this process::

    faults = FaultPlan(crash_on=2, when="torn", dies=True)
    with local_faults(faults), pytest.raises(InjectedCrash):
        checkpoint(path)

* ``when="torn"``: the ``crash_on``-th write is a file's content and only a prefix of its bytes
  reaches the disk before the crash (an atomic write, a link, a rename or a delete, cannot be
  torn: there it is ``before``);
* ``fail_read_on``: the N-th read (a file opened for reading, a parquet file Arrow opens by its
  path) raises :class:`InjectedIOError`, an ``OSError`` (EIO);
* ``fail_listing_on``: the N-th directory listing raises :class:`InjectedIOError` at once
  (``listing_fault="raise"``) or after yielding half of its entries (``"partial"``). Inside
  ``os.walk`` the error goes where the real ``os.walk`` sends it: to the caller's ``onerror``,
  else nowhere (the directory is silently missing from the walk).

``dies=True`` makes the crash a killed process: every write after it fails too (a ``finally``
that would remove a temp file does not run in a dead process). Without it only the N-th write
fails, as the plain counting tests expect.
"""

from __future__ import annotations

import builtins
import errno
import os
import shutil
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Self

import fsspec
from fsspec.implementations.local import LocalFileSystem

PROTOCOL = "faultyfile"

_WRITE_MODE_CHARS = set("wxa+")


class InjectedCrash(RuntimeError):
    """The injected failure: a stand-in for the process dying at this point."""


class InjectedIOError(OSError):
    """An injected I/O error (EIO) of a read or a listing: the process lives on."""

    def __init__(self, what: str, path: str):
        super().__init__(errno.EIO, f"injected I/O error ({what})", path)


WHEN = ("before", "after", "torn")
LISTING_FAULTS = ("raise", "partial")


@dataclass
class FaultPlan:
    """When to crash, and a record of the write operations seen so far."""

    crash_on: int | None = None  # 1-based index of the write that crashes; None: never
    when: str = "before"  # "before" the write happens, "after" it completed, or "torn"
    dies: bool = False  # after the crash, every later write fails too (a killed process)
    fail_read_on: int | None = None  # 1-based index of the read that raises EIO
    fail_listing_on: int | None = None  # 1-based index of the listing that fails
    listing_fault: str = "raise"  # the failing listing: "raise" at once, or "partial"
    writes: list[tuple[str, str]] = field(default_factory=list)
    reads: list[str] = field(default_factory=list)
    listings: list[str] = field(default_factory=list)
    crashed: bool = False
    failed: bool = False  # an injected read or listing error was raised
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.when not in WHEN:
            raise ValueError(f"when must be one of {WHEN}, got {self.when!r}")
        if self.listing_fault not in LISTING_FAULTS:
            raise ValueError(f"listing_fault must be one of {LISTING_FAULTS}")

    @property
    def count(self) -> int:
        return len(self.writes)

    def record(self, op: str, path: str) -> bool:
        """Count one write; True when it is the one that must crash. A write after the crash
        of a plan that `dies` raises instead: a dead process writes nothing."""
        with self._lock:
            if self.crashed and self.dies:
                raise InjectedCrash(f"{op} {path} after the injected crash: the process is dead")
            self.writes.append((op, path))
            hit = (
                not self.crashed and self.crash_on is not None and len(self.writes) == self.crash_on
            )
            if hit:
                self.crashed = True
            return hit

    def crash(self, op: str, path: str) -> InjectedCrash:
        return InjectedCrash(f"injected crash {self.when} write #{self.crash_on} ({op} {path})")

    def record_read(self, path: str) -> None:
        """Count one read; raise the injected error when it is the one that fails."""
        with self._lock:
            self.reads.append(path)
            hit = len(self.reads) == self.fail_read_on
            self.failed |= hit
        if hit:
            raise InjectedIOError(f"read #{self.fail_read_on}", path)

    def record_listing(self, path: str) -> bool:
        """Count one directory listing; True when it is the one that fails."""
        with self._lock:
            self.listings.append(path)
            hit = len(self.listings) == self.fail_listing_on
            self.failed |= hit
            return hit

    def listing_error(self, path: str) -> InjectedIOError:
        return InjectedIOError(f"{self.listing_fault} listing #{self.fail_listing_on}", path)

    def __str__(self) -> str:  # fsspec tokenizes storage options with str()
        return (
            f"FaultPlan(id={id(self)}, crash_on={self.crash_on}, when={self.when},"
            f" fail_read_on={self.fail_read_on}, fail_listing_on={self.fail_listing_on}"
            f" ({self.listing_fault}))"
        )


def _tear(path: str) -> None:
    """Keep only the first half of the file's bytes: what reached the disk of a torn write."""
    os.truncate(path, os.path.getsize(path) // 2)


class _CrashAfterClose:
    """A file open for writing that raises `crash` once its content is closed (durable); with
    `torn_path`, the file is cut to a prefix of its bytes first."""

    def __init__(self, f: Any, crash: InjectedCrash, torn_path: str | None = None):
        self._f = f
        self._crash = crash
        self._torn_path = torn_path
        self._raised = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._f, name)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._f)

    def _raise_once(self) -> None:
        if not self._raised:
            self._raised = True
            if self._torn_path is not None:
                _tear(self._torn_path)
            raise self._crash

    def write(self, data: Any) -> Any:
        return self._f.write(data)

    def close(self) -> None:
        self._f.close()
        self._raise_once()

    def __enter__(self) -> Self:
        self._f.__enter__()
        return self

    def __exit__(self, exc_type, exc_value, traceback) -> None:
        self._f.__exit__(exc_type, exc_value, traceback)
        if exc_type is None:
            self._raise_once()

    def __del__(self) -> None:
        self._raised = True  # a file dropped without close() never crashes from a finalizer


class FaultyFileSystem(LocalFileSystem):
    """LocalFileSystem under ``faultyfile://`` that counts writes and crashes on the Nth."""

    protocol = (PROTOCOL,)
    cachable = False  # every Storage.open gets a fresh instance bound to its own FaultPlan

    def __init__(self, faults: FaultPlan | None = None, **kwargs: Any):
        super().__init__(**kwargs)
        self.faults = faults if faults is not None else FaultPlan()
        self._depth = threading.local()

    # ------------------------------------------------------------------ bookkeeping
    def _outermost(self) -> bool:
        return getattr(self._depth, "n", 0) == 0

    def _write(self, op: str, path: str, action, torn_path: str | None = None):
        """Run `action` as one counted write (nested fsspec calls are not counted again).
        `torn_path`: the file whose content the write puts in place (it can be torn)."""
        if not self._outermost():
            return action()
        hit = self.faults.record(op, str(path))
        when = self.faults.when
        if hit and (when == "before" or (when == "torn" and torn_path is None)):
            raise self.faults.crash(op, str(path))
        self._depth.n = 1
        try:
            result = action()
        finally:
            self._depth.n = 0
        if hit:
            if torn_path is not None and when == "torn":
                _tear(torn_path)
            raise self.faults.crash(op, str(path))
        return result

    # ------------------------------------------------------------------ write operations
    def _open(
        self, path, mode="rb", block_size=None, autocommit=True, cache_options=None, **kwargs
    ):
        opener = super()._open
        if not (_WRITE_MODE_CHARS & set(mode)) or not self._outermost():
            return opener(
                path,
                mode=mode,
                block_size=block_size,
                autocommit=autocommit,
                cache_options=cache_options,
                **kwargs,
            )
        hit = self.faults.record(f"open:{mode}", str(path))
        if hit and self.faults.when == "before":
            raise self.faults.crash(f"open:{mode}", str(path))
        f = opener(
            path,
            mode=mode,
            block_size=block_size,
            autocommit=autocommit,
            cache_options=cache_options,
            **kwargs,
        )
        if hit:  # "after" (or "torn"): the write completes when the file is closed, then the crash
            torn = self._strip_protocol(path) if self.faults.when == "torn" else None
            return _CrashAfterClose(f, self.faults.crash(f"open:{mode}", str(path)), torn)
        return f

    def pipe_file(self, path, value, mode="overwrite", **kwargs):
        return self._write(
            "pipe_file",
            path,
            lambda: super(FaultyFileSystem, self).pipe_file(path, value, mode=mode, **kwargs),
            torn_path=self._strip_protocol(path),
        )

    def mv(self, path1, path2, recursive: bool = True, **kwargs):
        return self._write(
            "mv",
            f"{path1} -> {path2}",
            lambda: super(FaultyFileSystem, self).mv(path1, path2, recursive=recursive, **kwargs),
        )

    def cp_file(self, path1, path2, **kwargs):
        return self._write(
            "cp_file",
            f"{path1} -> {path2}",
            lambda: super(FaultyFileSystem, self).cp_file(path1, path2, **kwargs),
        )

    def rm_file(self, path):
        return self._write("rm_file", path, lambda: super(FaultyFileSystem, self).rm_file(path))

    def rm(self, path, recursive=False, maxdepth=None):
        return self._write(
            "rm",
            str(path),
            lambda: super(FaultyFileSystem, self).rm(path, recursive=recursive, maxdepth=maxdepth),
        )

    def touch(self, path, truncate=True, **kwargs):
        return self._write(
            "touch",
            path,
            lambda: super(FaultyFileSystem, self).touch(path, truncate=truncate, **kwargs),
        )


# ---------------------------------------------------------------------------- the local path
class _PartialListing:
    """A directory listing that yields the first half of its entries, then raises."""

    def __init__(self, entries: list[Any], error: InjectedIOError):
        self._entries = entries[: len(entries) // 2]
        self._error = error

    def __iter__(self) -> Iterator[Any]:
        yield from self._entries
        raise self._error

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def close(self) -> None:
        return None


class _FaultyOs:
    """The `os` module as `delta_ops.storage` sees it under :func:`local_faults`: its writes,
    deletes and listings counted and failed per the plan; everything else is the real `os`."""

    def __init__(self, faults: FaultPlan):
        self._faults = faults

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)

    def _write(self, op: str, path: str, action: Callable[[], Any]) -> Any:
        faults = self._faults
        hit = faults.record(op, path)
        if hit and faults.when != "after":  # a link, rename or delete is never torn
            raise faults.crash(op, path)
        try:
            result = action()
        except OSError:
            if hit:  # it failed (a temp file already gone), then the process died
                raise faults.crash(op, path) from None
            raise
        if hit:
            raise faults.crash(op, path)
        return result

    # writes
    def link(self, src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
        self._write("link", f"{src} -> {dst}", lambda: os.link(src, dst, *args, **kwargs))

    def replace(self, src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
        self._write("replace", f"{src} -> {dst}", lambda: os.replace(src, dst, *args, **kwargs))

    def rename(self, src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
        self._write("rename", f"{src} -> {dst}", lambda: os.rename(src, dst, *args, **kwargs))

    def unlink(self, path: Any, *args: Any, **kwargs: Any) -> None:
        self._write("unlink", str(path), lambda: os.unlink(path, *args, **kwargs))

    remove = unlink

    def rmdir(self, path: Any, *args: Any, **kwargs: Any) -> None:
        self._write("rmdir", str(path), lambda: os.rmdir(path, *args, **kwargs))

    def utime(self, path: Any, *args: Any, **kwargs: Any) -> None:
        self._write("utime", str(path), lambda: os.utime(path, *args, **kwargs))

    def open_file(self, file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        """`open` for the storage module: a write counted, torn or crashed; a read counted."""
        faults = self._faults
        if not (_WRITE_MODE_CHARS & set(mode)):
            faults.record_read(str(file))
            return builtins.open(file, mode, *args, **kwargs)
        op = f"open:{mode}"
        hit = faults.record(op, str(file))
        if hit and faults.when == "before":
            raise faults.crash(op, str(file))
        f = builtins.open(file, mode, *args, **kwargs)  # noqa: SIM115 - the caller closes it
        if hit:  # the content is written, then cut ("torn") or left whole ("after"), then the crash
            torn = os.fspath(file) if faults.when == "torn" else None
            return _CrashAfterClose(f, faults.crash(op, str(file)), torn)
        return f

    # listings
    def scandir(self, path: Any = ".") -> Any:
        faults = self._faults
        if not faults.record_listing(str(path)):
            return os.scandir(path)
        if faults.listing_fault == "raise":
            raise faults.listing_error(str(path))
        with os.scandir(path) as it:
            entries = list(it)
        return _PartialListing(entries, faults.listing_error(str(path)))

    def walk(
        self,
        top: Any,
        topdown: bool = True,
        onerror: Callable[[OSError], object] | None = None,
        followlinks: bool = False,
    ) -> Iterator[tuple[str, list[str], list[str]]]:
        """`os.walk` over the faulty `scandir`, with the real one's error handling: a
        directory that cannot be listed goes to `onerror`, else it is silently skipped."""
        assert topdown and not followlinks, "delta-ops walks top-down without following links"
        stack = [os.fspath(top)]
        while stack:
            current = stack.pop()
            dirs: list[str] = []
            files: list[str] = []
            try:
                with self.scandir(current) as it:
                    for entry in it:
                        (dirs if entry.is_dir(follow_symlinks=False) else files).append(entry.name)
            except OSError as exc:
                if onerror is not None:
                    onerror(exc)
                continue
            yield current, dirs, files
            stack.extend(os.path.join(current, d) for d in reversed(dirs))


class _FaultyShutil:
    """`shutil` for the storage module: `rmtree` is one counted write (torn: it stops halfway)."""

    def __init__(self, faulty_os: _FaultyOs):
        self._os = faulty_os

    def __getattr__(self, name: str) -> Any:
        return getattr(shutil, name)

    def rmtree(self, path: Any, *args: Any, **kwargs: Any) -> None:
        faults = self._os._faults
        hit = faults.record("rmtree", str(path))
        if hit and faults.when == "before":
            raise faults.crash("rmtree", str(path))
        if hit and faults.when == "torn":
            found = sorted(os.path.join(d, f) for d, _, files in os.walk(path) for f in files)
            for name in found[: len(found) // 2]:
                os.unlink(name)
            raise faults.crash("rmtree", str(path))
        shutil.rmtree(path, *args, **kwargs)
        if hit:
            raise faults.crash("rmtree", str(path))


def _counting_parquet_file(faults: FaultPlan, real: type) -> type:
    """`pyarrow.parquet.ParquetFile` whose opening of a local file by its path is a read."""

    class CountingParquetFile(real):  # type: ignore[misc, valid-type]
        def __init__(self, source: Any, *args: Any, **kwargs: Any):
            if isinstance(source, (str, os.PathLike)):
                faults.record_read(os.fspath(source))
            super().__init__(source, *args, **kwargs)

    return CountingParquetFile


@contextmanager
def local_faults(faults: FaultPlan) -> Iterator[FaultPlan]:
    """Count (and fail, per `faults`) the writes, reads and listings delta-ops' local storage
    path makes in this process: `delta_ops.storage.table_storage`, `.local_backend` and `.tree`
    get a faulty `os`, `open` and `shutil`, and Arrow's `ParquetFile` counts the local files it
    opens."""
    import pyarrow.parquet as pq

    from delta_ops.storage import local_backend, table_storage, tree

    faulty_os = _FaultyOs(faults)
    patches: list[tuple[Any, str, Any]] = [
        (table_storage, "os", faulty_os),
        (tree, "os", faulty_os),
        (table_storage, "shutil", _FaultyShutil(faulty_os)),
        (table_storage, "open", faulty_os.open_file),
        (local_backend, "os", faulty_os),
        (local_backend, "shutil", _FaultyShutil(faulty_os)),
        (local_backend, "open", faulty_os.open_file),
        (pq, "ParquetFile", _counting_parquet_file(faults, pq.ParquetFile)),
    ]
    saved = [(module, name, module.__dict__.get(name, _MISSING)) for module, name, _ in patches]
    for module, name, value in patches:
        setattr(module, name, value)
    try:
        yield faults
    finally:
        for module, name, value in saved:
            if value is _MISSING:
                delattr(module, name)
            else:
                setattr(module, name, value)


_MISSING = object()


def register() -> None:
    """Register ``faultyfile://`` with fsspec (idempotent)."""
    fsspec.register_implementation(PROTOCOL, FaultyFileSystem, clobber=True)


def faulty_url(path: str | os.PathLike[str]) -> str:
    """The ``faultyfile://`` URL of a local path."""
    return f"{PROTOCOL}://{os.path.abspath(os.fspath(path))}"


def faulty_options(faults: FaultPlan) -> dict[str, Any]:
    """Storage options that bind the opened filesystem to `faults`."""
    return {"faults": faults}


register()

__all__ = [
    "LISTING_FAULTS",
    "PROTOCOL",
    "WHEN",
    "FaultPlan",
    "FaultyFileSystem",
    "InjectedCrash",
    "InjectedIOError",
    "faulty_options",
    "faulty_url",
    "local_faults",
    "register",
]
