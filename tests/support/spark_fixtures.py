"""The test run's one Spark JVM, reached two ways: a classic session and a Spark Connect client.

The classic session (local[2], sized for a 2-core CI box shared with other suites) starts
Spark's Connect server as a plugin, listening on a free loopback port; the Connect client talks
to that same JVM. So the suite runs its Spark tests in both modes for the price of one JVM.

Imported by `tests/conftest.py`; tests that use them are marked `@pytest.mark.spark`:

* ``spark``: the classic session;
* ``spark_connect``: a Spark Connect session to the same JVM;
* ``any_spark``: each of the two in turn (the test runs once per mode).
"""

from __future__ import annotations

import pytest

from loopback.servers import free_port

#: the modes `any_spark` runs a test in
MODES = ("classic", "connect")


@pytest.fixture(scope="session")
def connect_port() -> int:
    """The loopback port of the Connect server inside the test run's JVM."""
    return free_port()


@pytest.fixture(scope="session")
def spark(connect_port):
    """A session-scoped local SparkSession from :func:`delta_ops.spark.get_spark`, serving
    Spark Connect on `connect_port` too."""
    from delta_ops.spark import get_spark

    session = get_spark(
        "local[2]",
        app_name="delta-ops-tests",
        conf={
            "spark.plugins": "org.apache.spark.sql.connect.SparkConnectPlugin",
            "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.connect.grpc.binding.port": str(connect_port),
        },
    )
    yield session
    session.stop()


@pytest.fixture(scope="session")
def spark_connect(spark, connect_port):
    """A Spark Connect session (:func:`delta_ops.spark.session.get_spark_remote`) to the
    classic session's JVM."""
    from delta_ops.spark.session import get_spark_remote

    session = get_spark_remote(f"sc://127.0.0.1:{connect_port}")
    yield session
    session.stop()


@pytest.fixture(params=MODES)
def any_spark(request):
    """The classic session, then the Connect one: a test using it runs in both modes."""
    return request.getfixturevalue("spark" if request.param == "classic" else "spark_connect")
