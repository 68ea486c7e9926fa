"""The reference tier's fixtures: one Delta Spark server for the whole test run."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.reference.corpus import Corpus
from tests.reference.delta_spark import REPO, DeltaSpark
from tests.reference.judge import TALLY

REPORT = REPO / "build" / "reference-report.txt"


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


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The reference report: per operation, the corpus tables Delta Spark read back identically
    at every retained version (also written to build/reference-report.txt)."""
    lines = TALLY.lines()
    if not lines:
        return
    terminalreporter.section("Delta Spark's verdict (reference tier)")
    for line in lines:
        terminalreporter.write_line(line)
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text("\n".join(lines) + "\n")
