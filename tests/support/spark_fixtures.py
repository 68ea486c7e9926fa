"""The test run's one SparkSession (local[2], sized for a 2-core CI box shared with other suites).

Imported by `tests/conftest.py`; tests that use it are marked `@pytest.mark.spark`.
"""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def spark():
    """A session-scoped local SparkSession from :func:`delta_ops.spark.get_spark`."""
    from delta_ops.spark import get_spark

    session = get_spark("local[2]", app_name="delta-ops-tests")
    yield session
    session.stop()
