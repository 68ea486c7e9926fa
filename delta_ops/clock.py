"""The wall clock that bounds every destructive decision.

Ops take a `now_ms` so that a plan can be made "as of" a moment (``--now`` in the CLI), but no
write may be more destructive than the real clock allows: expiring tombstones or `txn` entries
in a checkpoint, the log-cleanup cutoff, vacuum's retention window and its in-flight grace all
use `clamp`, which never lets a requested time run ahead of the wall clock and says
whether it had to lower it (a plan reports what was asked). A `now_ms` in the past is honoured
(it only makes an op keep more).

Tests and simulations move the wall clock with `fixed_wall_clock`:

    with fixed_wall_clock(1_700_000_000_000 + 30 * DAY_MS):
        execute_vacuum(plan_vacuum(load_snapshot(path), now_ms=clock.now_ms()))
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

_override = threading.local()
_process_override: list[int] = []


def now_ms() -> int:
    """The wall clock in epoch milliseconds (or the innermost `fixed_wall_clock`)."""
    fixed: int | None = getattr(_override, "ms", None)
    if fixed is not None:
        return fixed
    if _process_override:
        return _process_override[-1]
    return time.time_ns() // 1_000_000


@dataclass(frozen=True)
class Clamped:
    """The moment an op acts as of, and what its caller asked for when that was later."""

    now_ms: int
    requested_ms: int | None  # None: nothing was asked, or it was honoured as asked


def clamp(requested_ms: int | None) -> Clamped:
    """`requested_ms` (default: now) clamped so that it never runs ahead of the wall clock."""
    wall = now_ms()
    if requested_ms is None or requested_ms <= wall:
        return Clamped(wall if requested_ms is None else requested_ms, None)
    return Clamped(wall, requested_ms)


@contextmanager
def fixed_wall_clock(ms: int, *, all_threads: bool = False) -> Iterator[None]:
    """Pretend the wall clock reads `ms` inside the block (this thread, or every thread)."""
    if all_threads:
        _process_override.append(ms)
        try:
            yield
        finally:
            _process_override.pop()
        return
    previous: int | None = getattr(_override, "ms", None)
    _override.ms = ms
    try:
        yield
    finally:
        _override.ms = previous
