"""The library's own log lines in Dagster's run log.

delta-ops logs through the standard `logging` module (`delta_ops.*` loggers: progress of a
backfill, a damaged checkpoint skipped, a concurrent commit retried). While a maintenance step
runs, `library_logs_to` forwards those records to the step's Dagster logger, so they show
in the run's event log next to the step's own messages:

    with library_logs_to(context.log):
        resource.execute("vacuum", plan)
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class _ToDagster(logging.Handler):
    def __init__(self, log: Any) -> None:
        super().__init__(level=logging.INFO)
        self._log = log

    def emit(self, record: logging.LogRecord) -> None:
        message = f"{record.name}: {record.getMessage()}"
        if record.levelno >= logging.ERROR:
            self._log.error(message)
        elif record.levelno >= logging.WARNING:
            self._log.warning(message)
        else:
            self._log.info(message)


@contextmanager
def library_logs_to(log: Any) -> Iterator[None]:
    """Forward INFO and above from the `delta_ops` loggers to `log` inside the block."""
    library = logging.getLogger("delta_ops")
    handler = _ToDagster(log)
    previous = library.level
    library.addHandler(handler)
    if library.getEffectiveLevel() > logging.INFO:
        library.setLevel(logging.INFO)
    try:
        yield
    finally:
        library.removeHandler(handler)
        library.setLevel(previous)
