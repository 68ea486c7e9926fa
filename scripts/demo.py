"""The README's main command: build a small demo table with delta-ops, then inspect it.

The warehouse is a local folder (`./warehouse`, or $DELTA_OPS_WAREHOUSE). Each run appends a
few batches of events to `events` (partitioned by day) with delta-ops' own writer, checkpoints
it, and prints `delta-ops inspect`, so the output shows the table growing run by run.
"""

from __future__ import annotations

import datetime as dt
import os
import random
import sys
from pathlib import Path

import pyarrow as pa

from delta_ops.cli import main as cli_main
from delta_ops.writer import write_arrow

WAREHOUSE = Path(os.environ.get("DELTA_OPS_WAREHOUSE", Path(__file__).resolve().parents[1] / "warehouse"))


def event_batch(rng: random.Random, start_id: int, rows: int, day: dt.date) -> pa.Table:
    return pa.table(
        {
            "event_id": pa.array(range(start_id, start_id + rows), pa.int64()),
            "user_id": pa.array([rng.randrange(1000) for _ in range(rows)], pa.int64()),
            "kind": pa.array([rng.choice(["view", "click", "buy"]) for _ in range(rows)]),
            "amount": pa.array([round(rng.uniform(0, 100), 2) for _ in range(rows)], pa.float64()),
            "ts": pa.array(
                [dt.datetime.combine(day, dt.time(rng.randrange(24), rng.randrange(60)), dt.timezone.utc) for _ in range(rows)],
                pa.timestamp("us", tz="UTC"),
            ),
            "day": pa.array([day.isoformat()] * rows),
        }
    )


def main() -> int:
    table = WAREHOUSE / "events"
    WAREHOUSE.mkdir(parents=True, exist_ok=True)
    rng = random.Random()
    today = dt.date.today()
    for i in range(3):
        batch = event_batch(rng, rng.randrange(1 << 40), 200, today - dt.timedelta(days=i))
        result = write_arrow(table, batch, partition_by=["day"])
        print(f"appended {batch.num_rows} events as version {result.version}")
    print(f"\n$ delta-ops checkpoint {table}")
    cli_main(["checkpoint", str(table)])
    print(f"\n$ delta-ops inspect {table}")
    return cli_main(["inspect", str(table)])


if __name__ == "__main__":
    sys.exit(main())
