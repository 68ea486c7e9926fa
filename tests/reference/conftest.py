"""The reference tier's fixtures: one Delta Spark server for the whole test run."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import REFERENCE_REPORT
from tests.reference.corpus import Corpus
from tests.reference.delta_spark import DeltaSpark
from tests.reference.judge import TALLY
from tests.reference.race_model import REPORT as RACES


@pytest.fixture(scope="session")
def delta_spark() -> Iterator[DeltaSpark]:
    """Delta Spark (the reference engine) in its own process; it failing to start fails the
    tests that need it (never a skip: `make reference` sets it up)."""
    server = DeltaSpark()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture(scope="session")
def corpus(delta_spark: DeltaSpark, tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    """The corpus Delta Spark writes (tests/reference/corpus.py), with its rows at every version;
    tests copy a table before changing it."""
    return Corpus(delta_spark, tmp_path_factory.mktemp("reference-corpus"))


def pytest_sessionfinish(session: pytest.Session) -> None:
    """The reference report: per operation, the corpus tables Delta Spark read back identically
    at every retained version, written to build/reference-report.txt by the process that ran
    the tier (an xdist worker, or the run itself); `tests/conftest.py` prints it at the end."""
    lines = TALLY.lines() + RACES
    if lines:
        REFERENCE_REPORT.parent.mkdir(parents=True, exist_ok=True)
        REFERENCE_REPORT.write_text("\n".join(lines) + "\n")
