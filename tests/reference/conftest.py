"""The reference tier's fixtures: one Delta Spark server for the whole test run."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.reference.delta_spark import DeltaSpark


@pytest.fixture(scope="session")
def delta_spark() -> Iterator[DeltaSpark]:
    """Delta Spark (the reference engine) in its own process; it failing to start fails the
    tests that need it (never a skip: `make reference` sets it up)."""
    server = DeltaSpark()
    try:
        yield server
    finally:
        server.close()
