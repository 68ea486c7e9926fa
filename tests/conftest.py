"""Test-run configuration: hypothesis profiles sized for CI's 2 cores, the run's seed and the
JVM group.

`make test` runs the suite on two pytest-xdist workers (`-n 2`), one per core.
Every test that talks to a JVM (the shared Spark session, Delta Spark's reference server, a
Spark Connect server or cluster) lives under `JVM_PATHS`, which the scheduler hands to one
worker as one unit of work: those tests run on that worker, one at a time, so a run never has two Spark sessions or reference servers at once and
each starts once per run; the other worker takes the rest.

Every run has one seed: ``RELIABILITY_SEED`` (or ``--hypothesis-seed``) when given, else a
random one. Hypothesis generates every test's examples from it, and the crash sweep
(tests/reliability/test_crashes.py) picks its sample of fault points with it; it is printed
at the end of the run, so ``RELIABILITY_SEED=N`` replays a failure's examples and points.
"""

from __future__ import annotations

import os
import random
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, settings

settings.register_profile(
    "ci",
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.register_profile(
    "thorough",
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
# `make soak`: the reliability suite for as long as it is given (stop it with Ctrl-C or a timeout)
settings.register_profile(
    "soak",
    max_examples=100_000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
# scripts/mutation_check.py: a failure is all a mutant run needs to know, so no shrinking
settings.register_profile(
    "mutation",
    max_examples=25,
    deadline=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

_SEED_HELP = "RELIABILITY_SEED={seed} replays this run's examples and crash-sweep sample"


# The store tests talk to servers on 127.0.0.1 only: no client may look for cloud credentials on
# a metadata endpoint (a stall off-cloud, a real identity on-cloud). Set before any client loads.
os.environ["AWS_EC2_METADATA_DISABLED"] = "true"
os.environ["NO_GCE_CHECK"] = "true"  # gcsfs / google-auth: no GCE metadata probe
os.environ["GCE_METADATA_HOST"] = "127.0.0.1:9"  # and if one is made anyway, it is refused
os.environ["GCE_METADATA_IP"] = "127.0.0.1:9"
os.environ["MSI_ENDPOINT"] = "http://127.0.0.1:9"  # Azure managed identity
os.environ["IDENTITY_ENDPOINT"] = "http://127.0.0.1:9"

from tests.support.spark_fixtures import (  # noqa: F401  (one Spark JVM per test run)
    any_spark,
    connect_port,
    spark,
    spark_connect,
)

#: the fixtures that start or reach a JVM (tests/support/spark_fixtures.py, tests/reference/conftest.py)
JVM_FIXTURES = frozenset(
    {"spark", "spark_connect", "any_spark", "connect_port", "delta_spark", "corpus"}
)
REFERENCE_TIER = Path(__file__).resolve().parent / "reference"
#: Delta Spark's verdict on our writes, per operation (written by tests/reference/conftest.py)
REFERENCE_REPORT = REFERENCE_TIER.parents[1] / "build" / "reference-report.txt"


#: where the tests that need a JVM live: the scheduler below knows a test by its node id only
JVM_PATHS = (
    "tests/spark/",
    "tests/reference/",
    "tests/log/test_multipart_part_schemas.py",
    "tests/project/test_demo_location.py",
)


def _needs_jvm(item: pytest.Item) -> bool:
    fixtures = set(getattr(item, "fixturenames", ()))
    return (
        item.get_closest_marker("spark") is not None
        or bool(fixtures & JVM_FIXTURES)
        or REFERENCE_TIER in Path(str(item.path)).parents
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that needs a JVM outside `JVM_PATHS` stops the run: the scheduler would send it
    to either worker, and a second Spark session would start beside the first."""
    strays = [
        item.nodeid for item in items if _needs_jvm(item) and not item.nodeid.startswith(JVM_PATHS)
    ]
    if strays:
        raise pytest.UsageError(
            f"tests that need a JVM outside JVM_PATHS (tests/conftest.py): {strays[:3]};"
            " add their file to JVM_PATHS"
        )


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """The JVM tests as one unit of work for one worker (see the module's doc), every other
    test on its own. (xdist's ``loadgroup`` would do it from ``xdist_group`` marks, but it
    renames node ids in a way pytest 9 no longer reads.)"""
    from xdist.scheduler import LoadScopeScheduling

    class JvmGroupScheduling(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return "jvm" if nodeid.startswith(JVM_PATHS) else nodeid

    return JvmGroupScheduling(config, log)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """The run's seed, decided before hypothesis' plugin reads ``--hypothesis-seed`` and
    before the test modules (and the processes and xdist workers they start) read
    ``RELIABILITY_SEED``; and a run starts without the last run's reference report (the
    controller, or a run without xdist: workers leave it alone)."""
    given = config.getoption("hypothesis_seed", None) or os.environ.get("RELIABILITY_SEED")
    seed = str(int(given)) if given else str(random.randrange(2**32))
    config.option.hypothesis_seed = seed
    os.environ["RELIABILITY_SEED"] = seed
    if not hasattr(config, "workerinput"):
        REFERENCE_REPORT.unlink(missing_ok=True)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The run's seed; Delta Spark's verdict (reference tier), when this run wrote one."""
    seed = os.environ["RELIABILITY_SEED"]
    terminalreporter.write_line(f"seed {seed}: {_SEED_HELP.format(seed=seed)}")
    if not REFERENCE_REPORT.exists():
        return
    terminalreporter.section("Delta Spark's verdict (reference tier)")
    for line in REFERENCE_REPORT.read_text().splitlines():
        terminalreporter.write_line(line)


@pytest.fixture(autouse=True)
def _no_dagster_state_storage_left_behind() -> Iterator[None]:
    """Dagster keeps the current defs-state storage in a context variable that holds only a
    weak reference to its instance; a test whose instance is gone left it set, and the next
    test to load definitions in this process failed ("Attempted to resolve undefined
    DagsterInstance weakref"). Cleared after every test that loaded Dagster."""
    yield
    state = sys.modules.get("dagster._core.storage.defs_state.base")
    if state is not None:
        state._current_storage.set(None)
