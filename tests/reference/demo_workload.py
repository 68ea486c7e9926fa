"""The demo's pipeline on Delta Spark (tests/reference/test_demo_on_delta_spark.py): runs inside
the reference server (`call` request), whose session has Delta's jars, SQL extension and
catalog, as `make demo-delta-spark` runs it under Dagster.

`run` does the demo's steps without its orchestrator (Dagster is not in the reference
virtualenv): three runs of the pipeline (`demo_pipeline.append_events`: `write_delta` appends,
Delta Spark reads back), time passing (`let_time_pass`: 40 days, a crashed write's file), a
fourth run, then what the maintenance schedule would ask: `delta-ops plan` on the warehouse,
then the actions it chose by the CLI in this process: the demo's checkpoint, log cleanup and
vacuum, then the rest (compaction of the small batches). It reports, as data the
test asserts on:

- `runs`: each pipeline run's version, row total and reader;
- `before` / `after`: per version (after: up to the newest maintenance wrote), a digest of the
  sorted `event_id`s Delta Spark reads at `versionAsOf` ("error: ..." where Delta Spark cannot read it), before and after maintenance;
- `planned_actions`: the actions the planner chose for the table (`planned`: its choices); `maintenance`: each CLI run's JSON;
- `history`: Delta Spark's `DESCRIBE HISTORY` operations, newest first;
- `continued`: the row count after Delta Spark appends 50 rows and deletes the `buy` events,
  against the count it expects.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict
from pathlib import Path
from typing import Any

from one_session_workload import cli_json

from demo_pipeline import append_events, let_time_pass

ROWS = 300
#: what the demo's maintenance schedule runs (the Dagster factory's default actions), in order
DEMO_ACTIONS = ("checkpoint", "cleanup", "vacuum")


def run(spark: Any, request: dict[str, Any]) -> dict[str, Any]:
    warehouse = Path(str(request["scratch"])) / "warehouse"
    table = str(warehouse / "events")
    runs = [asdict(append_events(spark, table, rows=ROWS)) for _ in range(3)]
    crashed = let_time_pass(warehouse / "events")
    runs.append(asdict(append_events(spark, table, rows=ROWS)))
    latest = runs[-1]["version"]
    before = {v: _digest(spark, table, v) for v in range(latest + 1)}
    plan = cli_json("plan", str(warehouse))
    planned = [a for c in plan["choices"] if c["chosen"] for a in c["actions"]]
    # the demo's schedule asks for its three first (Dagster's defaults), then the rest
    first = [a for a in DEMO_ACTIONS if a in planned]
    maintenance = {a: cli_json(a, table) for a in first + [a for a in planned if a not in first]}
    newest = int(spark.sql(f"DESCRIBE HISTORY delta.`{table}` LIMIT 1").collect()[0]["version"])
    after = {v: _digest(spark, table, v) for v in range(newest + 1)}
    history = [r["operation"] for r in spark.sql(f"DESCRIBE HISTORY delta.`{table}`").collect()]
    return {
        "runs": runs,
        "before": before,
        "after": after,
        "planned_actions": planned,
        "planned": plan["choices"],
        "maintenance": maintenance,
        "crashed_file_left": crashed.exists(),
        "history": history,
        "continued": _continue(spark, table),
    }


def _digest(spark: Any, table: str, version: int) -> str:
    """A digest of the sorted event ids Delta Spark reads at `version` ("rows:digest"), or
    "error: ..." with the first line of why it cannot."""
    try:
        frame = spark.read.format("delta").option("versionAsOf", version).load(table)
        ids = sorted(r["event_id"] for r in frame.select("event_id").collect())
    except Exception as exc:  # noqa: BLE001 - an unreadable version is the answer
        return "error: " + str(exc).splitlines()[0][:300]
    return f"{len(ids)}:" + hashlib.sha256("\n".join(ids).encode()).hexdigest()[:16]


def _continue(spark: Any, table: str) -> dict[str, int]:
    """Delta Spark appends to the maintained table and deletes from it."""
    from pyspark.sql import functions as F

    current = spark.read.format("delta").load(table)
    start = current.count()
    buys = current.filter(F.col("kind") == "buy").count()
    more = (
        current.limit(50).withColumn("event_id", F.expr("uuid()")).withColumn("kind", F.lit("view"))
    )
    more.write.format("delta").mode("append").save(table)
    spark.sql(f"DELETE FROM delta.`{table}` WHERE kind = 'buy'")
    return {"expected": start + 50 - buys, "read": spark.read.format("delta").load(table).count()}
