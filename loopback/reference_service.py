"""What every Delta Spark (reference engine) server of ours shares: the artifact name of the
installed delta-spark, the JSON-lines request loop and the stdout swap.

Two servers run Delta Spark in its own virtualenv (`make reference`: `.venv-reference`) and take
one JSON request per line: the tests' judge (tests/reference/delta_spark_server.py, a session
tuned for tiny tables) and the benchmarks' timed engine (benchmarks/spark_reference_server.py,
Spark's and Delta's defaults). Each is a script run by that virtualenv's python, so it puts the
repository on `sys.path` and imports this module; only the standard library and pyspark are
used here.

    replies = take_stdout()
    spark = start_session(...)
    serve(replies, lambda request: handle(spark, request), error_reply)
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Callable
from typing import Any, TextIO

SCALA = "2.13"


def delta_package() -> str:
    """The Delta Spark artifact matching the installed pip packages (its jars come from Maven
    Central through `spark.jars.packages`)."""
    from importlib.metadata import version

    import pyspark

    spark_minor = ".".join(pyspark.__version__.split(".")[:2])
    return f"io.delta:delta-spark_{spark_minor}_{SCALA}:{version('delta-spark')}"


def delta_session_conf(ivy: str, app_name: str) -> dict[str, str]:
    """What every reference session sets: `local[2]` on loopback, Delta's jars (from the Ivy
    cache `ivy`), its SQL extension and catalog, no UI, warnings only."""
    return {
        "spark.master": "local[2]",
        "spark.app.name": app_name,
        "spark.jars.packages": delta_package(),
        "spark.jars.ivy": ivy,
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.log.level": "WARN",
    }


def take_stdout() -> TextIO:
    """A private copy of stdout for the replies; fd 1 (which the JVM inherits and prints to)
    goes to stderr from now on."""
    replies = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return replies


def reply(replies: TextIO, message: dict[str, Any]) -> None:
    replies.write(json.dumps(message, default=str) + "\n")
    replies.flush()


def serve(
    replies: TextIO,
    handle: Callable[[dict[str, Any]], dict[str, Any]],
    error_reply: Callable[[BaseException], dict[str, Any]],
) -> None:
    """Answer each request line until `stop` (answered) or the end of stdin; a failing request
    is an error reply (its traceback on stderr), never a dead server."""
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
            if request.get("op") == "stop":
                reply(replies, {"ok": True})
                return
            answer = handle(request)
        except Exception as exc:  # noqa: BLE001 - every failure is a reply
            traceback.print_exc(file=sys.stderr)
            answer = error_reply(exc)
        reply(replies, answer)
