"""Errors delta-ops raises inside Spark's Python workers, back to the caller as one line.

The `delta` data source runs in Spark's Python workers: the writer's planning and commit, its
tasks, the reader. An error there (a NOT NULL column given nulls, a table feature the writer
refuses, a path that is no table) reaches the caller of ``df.write.format("delta").save()``
or ``spark.read.format("delta").load()`` as a Spark exception whose text is the worker's
whole traceback, wrapped in JVM frames. `install` hooks PySpark's exception handler (as
PySpark hooks py4j's) so that such an exception is raised instead as a
`delta_ops.errors.DeltaOpsError` with the worker's message, one line (the Spark
exception stays reachable as its ``__context__``). Only the exception the worker died of
decides: a Spark error whose Python worker failed with anything else (a user's UDF, a bug)
stays as Spark raised it.

`delta_ops.spark.get_spark` and `delta_ops.spark.register` install the hook;
for a Spark Connect session, which has no py4j gateway, `install_connect` hooks the
Connect client's conversion of a server error into an exception the same way.
"""

from __future__ import annotations

import functools
import importlib
import re
from collections.abc import Callable
from typing import Any

from delta_ops import errors
from delta_ops.errors import DeltaOpsError

#: the last line of a worker's traceback when it died of one of ours
_OUR_ERROR = re.compile(r"^delta_ops\.errors\.(\w+): (.+)$")
_MARK = "_delta_ops_translates"


def final_exception_line(report: str) -> str:
    """The `Type: message` line that ends the last Python traceback in a Spark error report
    (the exception the worker died of, not one it was handling); "" when there is none."""
    start = report.rfind("Traceback (most recent call last):")
    if start < 0:
        return ""
    lines = report[start:].splitlines()[1:]
    return next((line for line in lines if line and not line[0].isspace()), "")


def error_in_report(report: str) -> DeltaOpsError | None:
    """The delta-ops error a Spark error report says a Python worker died of, else None: of the
    worker's class (so its ``retryable`` too), with the worker's message."""
    match = _OUR_ERROR.match(final_exception_line(report))
    if match is None:
        return None
    kind = getattr(errors, match.group(1), None)
    if not (isinstance(kind, type) and issubclass(kind, DeltaOpsError)):
        kind = DeltaOpsError
    return errors.rebuilt(kind, match.group(2))


def translating(call: Callable[..., Any]) -> Callable[..., Any]:
    """`call` (py4j's handler of a JVM call's answer), raising a Spark exception that a
    delta-ops error in a Python worker caused as that error, one line."""

    @functools.wraps(call)
    def answer(*args: Any, **kwargs: Any) -> Any:
        try:
            return call(*args, **kwargs)
        except Exception as exc:
            if not type(exc).__module__.startswith(("pyspark.", "py4j.")):
                raise
            try:
                report = str(exc)
            except Exception:  # noqa: BLE001 - the JVM went away describing it: Spark's error
                raise exc from None
            error = error_in_report(report)
            if error is None:
                raise
            raise error from None

    setattr(answer, _MARK, True)
    return answer


def install() -> None:
    """Wrap the handler PySpark installed in py4j (idempotent). PySpark re-installs its own
    when it builds another session object, so every entry point calls this again."""
    gateway: Any = importlib.import_module("py4j.java_gateway")
    current = gateway.get_return_value
    if not getattr(current, _MARK, False):
        gateway.get_return_value = translating(current)


def converting(convert: Callable[..., Any]) -> Callable[..., Any]:
    """`convert` (the Connect client's maker of an exception from a server error), giving a
    delta-ops error in a Python worker as that error, one line."""

    @functools.wraps(convert)
    def exception(*args: Any, **kwargs: Any) -> Any:
        made = convert(*args, **kwargs)
        error = error_in_report(str(made))
        return made if error is None else error

    setattr(exception, _MARK, True)
    return exception


def install_connect() -> None:
    """Wrap the Connect client's error conversion (idempotent)."""
    client: Any = importlib.import_module("pyspark.sql.connect.client.core")
    if not getattr(client.convert_exception, _MARK, False):
        client.convert_exception = converting(client.convert_exception)


__all__ = [
    "converting",
    "error_in_report",
    "final_exception_line",
    "install",
    "install_connect",
    "translating",
]
