"""The Spark engine: read and write Delta tables from PySpark through delta-ops' protocol core.

Read: `spark.read.format("delta").load(path)` (a Python data source, registered by
`get_spark`, or `register` for a session made elsewhere; `format("delta_ops")` in a session
whose `delta` is Delta Spark's; see `delta_ops.spark.source`).

There are no Delta jars here: Spark writes plain parquet into a staging directory inside the
table, and `write_delta` moves the files into place and commits them with per-file
statistics (see `delta_ops.spark.writer`). `get_spark` builds a session with the
options Delta readers need (microsecond timestamps) and a UTC session time zone, which shows
timestamps as the log holds them (the writers and the reader are exact in any zone).

Importing this package does not import PySpark or start a JVM; the functions do, when called.

For example:

    from delta_ops.spark import get_spark, write_delta

    spark = get_spark()
    write_delta(spark.range(10), "/warehouse/numbers")
"""

from __future__ import annotations

from importlib.util import find_spec
from typing import TYPE_CHECKING

from delta_ops.errors import MissingExtra

# pandas too: PySpark's mapInArrow, which the Spark engine runs every job with, refuses to
# start without it (an internal error deep in a job, where this is one line up front)
if find_spec("pyspark") is None or find_spec("pandas") is None:
    raise MissingExtra("spark", "delta_ops.spark")

from delta_ops.spark.session import get_spark
from delta_ops.spark.writer import write_delta

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def register(spark: SparkSession) -> str:
    """Make `spark.read.format("delta")` read through delta-ops in a session made elsewhere
    (`get_spark` does this itself); where the session has Delta Spark, `format("delta")`
    stays Delta Spark's and delta-ops' source is `format("delta_ops")`. Returns the format
    name that reads through delta-ops (`delta_ops.spark.source.register`)."""
    # start-up cost: `source` imports PySpark, which importing this package must not
    from delta_ops.spark.source import register as register_source

    return register_source(spark)


__all__ = ["get_spark", "register", "write_delta"]
