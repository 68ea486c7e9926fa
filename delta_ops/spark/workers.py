"""Setting up where Spark runs delta-ops' Python code: worker processes and caller threads.

Spark runs the `delta` data source's planner, readers and writers in Python worker processes
it starts with ``$PYSPARK_PYTHON`` (else ``python3`` from the PATH, which may lack pyarrow and
delta-ops), and PySpark gives each Python thread its own JVM thread, with no active session.
This module holds what the session builder (`delta_ops.spark.session`), the data source
(`delta_ops.spark.source`) and the writers do about both. It needs no PySpark at import
and imports no other module of ``delta_ops.spark`` but `delta_ops.spark.worker_errors`:

    use_this_python_for_local_workers("local[2]")   # before the session starts
    set_up_workers(spark)                           # errors back as one line; warn on $PYSPARK_PYTHON
    spark = activate(spark)                         # on a worker thread (Dagster, a pipeline)

It is the one module of the Spark engine that reads and sets the environment.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import TYPE_CHECKING, Any

from delta_ops.spark import worker_errors

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

logger = logging.getLogger(__name__)


def is_connect(session: SparkSession) -> bool:
    """Whether `session` is a Spark Connect client (its JVM, and its workers, are elsewhere)."""
    return type(session).__module__.startswith("pyspark.sql.connect")


def functions_for(session: SparkSession) -> Any:
    """`pyspark.sql.functions` for `session`'s kind: a process may hold a classic session and a
    Spark Connect one, and a classic Column in a Connect DataFrame (or the reverse) fails."""
    if is_connect(session):
        # PySpark is optional: imported only when a session of its kind asks
        from pyspark.sql.connect import functions as connect_functions

        return connect_functions
    # PySpark is optional: imported only when a session of its kind asks
    from pyspark.sql import functions

    return functions


def use_this_python_for_local_workers(master: str) -> None:
    """For a local master, make Spark start its Python workers (and the data source planner)
    with this interpreter, unless ``$PYSPARK_PYTHON`` says otherwise; a cluster's workers have
    their own. Call it before the session starts: the JVM reads the variable then."""
    if master.startswith("local"):
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


def warn_if_workers_lack_this_python(spark: SparkSession) -> None:
    """Log a warning when a local session's Python workers will not run this interpreter.

    Spark starts the `delta` source's planner and its readers with $PYSPARK_PYTHON as the JVM
    saw it when the session started (else `python3` from the PATH, which may lack pyarrow and
    delta-ops); a session built elsewhere (a notebook, `PySparkResource`) may not have set it.
    """
    if is_connect(spark):
        return  # the server's workers run the server's Python, which this process cannot see
    master = spark.sparkContext.master or ""
    if master.startswith("local") and os.environ.get("PYSPARK_PYTHON") != sys.executable:
        logger.warning(
            "this Spark session's Python workers may not run %s (PYSPARK_PYTHON is %r); if "
            "reading with format('delta') fails with 'No module named pyarrow', set "
            "PYSPARK_PYTHON=%s before the session starts (get_spark() does)",
            sys.executable,
            os.environ.get("PYSPARK_PYTHON"),
            sys.executable,
        )


def set_up_workers(spark: SparkSession) -> None:
    """Make delta-ops errors in `spark`'s Python workers reach the caller as one line
    (`delta_ops.spark.worker_errors`, classic or Spark Connect), and warn when
    the workers may not run this interpreter."""
    if is_connect(spark):
        worker_errors.install_connect()
    elif getattr(spark, "_jvm", None) is not None:
        worker_errors.install()
    warn_if_workers_lack_this_python(spark)


def activate(spark: SparkSession) -> SparkSession:
    """Make `spark` the active session of the calling thread, and return it.

    PySpark gives each Python thread its own JVM thread, which does not inherit the session
    another thread made active: code on a Dagster or pipeline worker thread would find no
    active session (and `getOrCreate` there would apply a builder's options to the running
    session). Our writers and engine call this with the session they use, as PySpark's own
    `createDataFrame` does. A Spark Connect session (no JVM here) is returned unchanged.
    """
    from pyspark.sql import SparkSession

    jvm = getattr(spark, "_jvm", None)
    if jvm is None:
        return spark
    SparkSession._activeSession = spark
    SparkSession._get_j_spark_session_class(jvm).setActiveSession(spark._jsparkSession)
    return spark


__all__ = [
    "activate",
    "functions_for",
    "is_connect",
    "set_up_workers",
    "use_this_python_for_local_workers",
    "warn_if_workers_lack_this_python",
]
