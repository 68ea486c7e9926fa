"""Progress of long work (files and bytes done, rate, time left), shown however the caller likes.

An op opens a task around work whose size it knows and advances it as pieces finish, from any
thread:

    with progress.task("vacuum: deleting", files=len(paths), bytes=total) as task:
        task.advance(files=1000, bytes=n)

A front end decides where progress goes for the ops it runs, for the current thread and context:

    with progress.reporting(TerminalBar(sys.stderr)):     # the CLI on an interactive terminal
        execute_vacuum(plan)
    with progress.reporting(LogLines(context.log.info)):  # Dagster: periodic lines in the run log
        execute_vacuum(plan)

Without a reporter a task only counts (one lock per advance). Reporters decide how often they
draw or log; every task ends with one final update.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Protocol, TextIO

from delta_ops.protocol.units import format_bytes, format_duration


@dataclass(frozen=True)
class ProgressState:
    """Where one task stands. Totals are None when unknown."""

    label: str
    files_done: int
    files_total: int | None
    bytes_done: int
    bytes_total: int | None
    elapsed_s: float
    finished: bool = False

    @property
    def files_per_second(self) -> float:
        return self.files_done / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def seconds_left(self) -> float | None:
        """Estimated from the rate so far; None until something is done or without a total."""
        if self.files_total is None or self.files_done == 0 or self.elapsed_s <= 0:
            return None
        return (self.files_total - self.files_done) / self.files_per_second

    def describe(self) -> str:
        """One line: `vacuum: deleting 4,000/10,000 files, 1.2 MB/3.0 MB, 812 files/s, about
        7 s left` (or `... in 12 s` once finished)."""
        total = f"/{self.files_total:,}" if self.files_total is not None else ""
        parts = [f"{self.label} {self.files_done:,}{total} files"]
        if self.bytes_total or self.bytes_done:
            of = f"/{format_bytes(self.bytes_total)}" if self.bytes_total is not None else ""
            parts.append(f"{format_bytes(self.bytes_done)}{of}")
        if self.finished:
            parts.append(f"in {format_duration(int(self.elapsed_s * 1000))}")
            return ", ".join(parts)
        parts.append(f"{self.files_per_second:,.0f} files/s")
        left = self.seconds_left
        if left is not None:
            parts.append(f"about {format_duration(int(left * 1000))} left")
        return ", ".join(parts)


class Reporter(Protocol):
    """Receives every update of every task; decides itself what to show and how often."""

    def update(self, state: ProgressState) -> None: ...


_REPORTER: ContextVar[Reporter | None] = ContextVar("delta_ops_progress", default=None)


@contextmanager
def reporting(reporter: Reporter | None) -> Iterator[None]:
    """Send the progress of tasks opened inside the block to `reporter`."""
    token = _REPORTER.set(reporter)
    try:
        yield
    finally:
        _REPORTER.reset(token)


class Task:
    """Counters of one piece of work; `advance` is safe from worker threads."""

    def __init__(
        self, label: str, files: int | None, bytes_total: int | None, reporter: Reporter | None
    ) -> None:
        self._label = label
        self._files_total = files
        self._bytes_total = bytes_total
        self._reporter = reporter
        self._lock = threading.Lock()
        self._files = 0
        self._bytes = 0
        self._started = time.monotonic()

    def advance(self, files: int = 0, bytes: int = 0) -> None:
        with self._lock:
            self._files += files
            self._bytes += bytes
            state = self._state(finished=False)
        if self._reporter is not None:
            self._reporter.update(state)

    def _state(self, finished: bool) -> ProgressState:
        return ProgressState(
            self._label,
            self._files,
            self._files_total,
            self._bytes,
            self._bytes_total,
            time.monotonic() - self._started,
            finished,
        )

    def finish(self) -> ProgressState:
        with self._lock:
            state = self._state(finished=True)
        if self._reporter is not None:
            self._reporter.update(state)
        return state


@contextmanager
def task(label: str, *, files: int | None = None, bytes: int | None = None) -> Iterator[Task]:
    """A task reported to the current reporter; finished (one last update) when the block ends."""
    current = Task(label, files, bytes, _REPORTER.get())
    try:
        yield current
    finally:
        current.finish()


class LogLines:
    """A line per task every `every_s` seconds, and one when it finishes: for logs (Dagster's
    run log, a file), where a redrawn bar would be noise. Tasks that finish before the first
    interval log only their final line."""

    def __init__(self, emit: Callable[[str], object], every_s: float = 10.0) -> None:
        self._emit = emit
        self._every_s = every_s
        self._last: dict[str, float] = {}
        self._lock = threading.Lock()

    def update(self, state: ProgressState) -> None:
        with self._lock:
            if not state.finished:
                last = self._last.setdefault(state.label, 0.0)
                if state.elapsed_s - last < self._every_s:
                    return
                self._last[state.label] = state.elapsed_s
            else:
                self._last.pop(state.label, None)
        self._emit(state.describe())


class TerminalBar:
    """One line redrawn in place on an interactive terminal (at most 10 times a second), with a
    bar when the total is known; the finished line stays. Nothing at all when `stream` is not a
    terminal (piped or redirected output stays clean)."""

    WIDTH = 24

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._enabled = stream.isatty()
        self._drawn_at = 0.0
        self._lock = threading.Lock()

    def update(self, state: ProgressState) -> None:
        if not self._enabled:
            return
        with self._lock:
            now = time.monotonic()
            if not state.finished and now - self._drawn_at < 0.1:
                return
            self._drawn_at = now
            line = state.describe()
            if state.files_total:
                filled = round(self.WIDTH * state.files_done / state.files_total)
                line = f"[{'#' * filled}{'.' * (self.WIDTH - filled)}] {line}"
            self._stream.write(f"\r\x1b[K{line}" + ("\n" if state.finished else ""))
            self._stream.flush()


__all__ = ["LogLines", "ProgressState", "Reporter", "Task", "TerminalBar", "reporting", "task"]
