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
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from typing import Any, Self

import fsspec
from fsspec.implementations.local import LocalFileSystem

PROTOCOL = "faultyfile"

_WRITE_MODE_CHARS = set("wxa+")


class InjectedCrash(RuntimeError):
    """The injected failure: a stand-in for the process dying at this point."""


@dataclass
class FaultPlan:
    """When to crash, and a record of the write operations seen so far."""

    crash_on: int | None = None  # 1-based index of the write that crashes; None: never
    when: str = "before"  # "before" the write happens, or "after" it completed
    writes: list[tuple[str, str]] = field(default_factory=list)
    crashed: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.when not in ("before", "after"):
            raise ValueError(f"when must be 'before' or 'after', got {self.when!r}")

    @property
    def count(self) -> int:
        return len(self.writes)

    def record(self, op: str, path: str) -> bool:
        """Count one write; True when it is the one that must crash."""
        with self._lock:
            self.writes.append((op, path))
            hit = (
                not self.crashed and self.crash_on is not None and len(self.writes) == self.crash_on
            )
            if hit:
                self.crashed = True
            return hit

    def crash(self, op: str, path: str) -> InjectedCrash:
        return InjectedCrash(f"injected crash {self.when} write #{self.crash_on} ({op} {path})")

    def __str__(self) -> str:  # fsspec tokenizes storage options with str()
        return f"FaultPlan(id={id(self)}, crash_on={self.crash_on}, when={self.when})"


class _CrashAfterClose:
    """A file open for writing that raises `crash` once its content is closed (durable)."""

    def __init__(self, f: Any, crash: InjectedCrash):
        self._f = f
        self._crash = crash
        self._raised = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._f, name)

    def _raise_once(self) -> None:
        if not self._raised:
            self._raised = True
            raise self._crash

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

    def _write(self, op: str, path: str, action):
        """Run `action` as one counted write (nested fsspec calls are not counted again)."""
        if not self._outermost():
            return action()
        hit = self.faults.record(op, str(path))
        if hit and self.faults.when == "before":
            raise self.faults.crash(op, str(path))
        self._depth.n = 1
        try:
            result = action()
        finally:
            self._depth.n = 0
        if hit:
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
        if hit:  # "after": the write completes when the file is closed, then the crash
            return _CrashAfterClose(f, self.faults.crash(f"open:{mode}", str(path)))
        return f

    def pipe_file(self, path, value, mode="overwrite", **kwargs):
        return self._write(
            "pipe_file",
            path,
            lambda: super(FaultyFileSystem, self).pipe_file(path, value, mode=mode, **kwargs),
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
    "PROTOCOL",
    "FaultPlan",
    "FaultyFileSystem",
    "InjectedCrash",
    "faulty_options",
    "faulty_url",
    "register",
]
