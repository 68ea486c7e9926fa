"""The demo's PySpark pipeline, without its orchestrator: one batch of generated events appended
to a Delta table through delta-ops' commit layer, and the table read back.

`definitions.py` runs it as the Dagster asset `events` (`make demo`, `make demo-delta-spark`);
the reference tier runs it on Delta Spark's own session (tests/reference/test_demo_on_delta_spark.py),
where Dagster is not installed. So this module imports only PySpark and delta-ops.

    report = append_events(spark, "warehouse/events", rows=500, days=3)
    report.version, report.total, report.per_day, report.reader

`let_time_pass` is the demo's stand-in for weeks of real time: it dates every file of a table
back and leaves a crashed write's file, so retention has something to expire.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: the demo's Delta table properties: a checkpoint every 3 commits (Delta's default is 10), so
#: the demo's four runs reach one
TABLE_CONFIGURATION = {"delta.checkpointInterval": "3"}
#: how far `let_time_pass` dates a table back: past the 30-day log retention
AGE_DAYS = 40
#: the file a write that "crashed" back then left, no commit naming it
CRASHED_FILE = "day=1970-01-01/part-00000-crashed-write.c000.snappy.parquet"


@dataclass(frozen=True)
class AppendReport:
    """What one run of the pipeline did, and what reading the table back gave."""

    version: int  # the version the batch committed
    total: int  # rows in the table after it
    per_day: dict[str, int]  # rows per partition (day)
    reader: str  # who `format("delta")` is in this session: "delta-ops" or "Delta Spark"


def events_batch(spark: Any, rows: int, days: int) -> Any:
    """A DataFrame of `rows` generated events over the last `days` days."""
    from pyspark.sql import functions as F

    return (
        spark.range(rows)
        .withColumn("event_id", F.expr("uuid()"))
        .withColumn("user_id", (F.rand() * 1000).cast("long"))
        .withColumn(
            "kind",
            F.element_at(
                F.array(F.lit("view"), F.lit("click"), F.lit("buy")), (F.rand() * 3).cast("int") + 1
            ),
        )
        .withColumn("amount", F.round(F.rand() * 100, 2))
        .withColumn("day", F.date_sub(F.current_date(), (F.col("id") % days).cast("int")))
        .withColumn("ts", F.current_timestamp())
        .drop("id")
    )


def append_events(spark: Any, table: str, rows: int = 500, days: int = 3) -> AppendReport:
    """Append a batch to `table` (partitioned by day) with `write_delta`, then read the table
    back with `format("delta")`: delta-ops' source, or Delta Spark's where its jars hold the
    name (`register` then returns "delta_ops")."""
    from delta_ops.spark import register, write_delta

    reader = "delta-ops" if register(spark) == "delta" else "Delta Spark"
    result = write_delta(
        events_batch(spark, rows, days),
        table,
        mode="append",
        partition_by=["day"],
        configuration=TABLE_CONFIGURATION,
    )
    read = spark.read.format("delta").load(table)
    per_day = {str(r["day"]): int(r["count"]) for r in read.groupBy("day").count().collect()}
    return AppendReport(
        result.version, sum(per_day.values()), dict(sorted(per_day.items())), reader
    )


def let_time_pass(table: Path, days: int = AGE_DAYS) -> Path:
    """Date every file of `table` back `days` days and leave a crashed write's file (returned)."""
    crashed = table / CRASHED_FILE
    crashed.parent.mkdir(parents=True, exist_ok=True)
    crashed.write_bytes(b"PAR1 a write that died before its commit PAR1")
    then = time.time() - days * 86_400
    for path in table.rglob("*"):
        if path.is_file():
            os.utime(path, (then, then))
    return crashed
