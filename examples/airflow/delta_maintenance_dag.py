"""Example DAG file: delta-ops maintenance of a warehouse of Delta tables, in Airflow.

Every Delta table under the warehouse folder ($DELTA_OPS_WAREHOUSE, default `./warehouse`,
which `make demo` fills) gets, in the DAG `lake_maintenance` (daily at 03:00), a compaction,
then checkpoint -> log cleanup -> vacuum (7-day retention), each skipped when there is nothing
to do; and the DAG `lake_checkpoint_on_commits` checkpoints each table whenever
`delta.checkpointInterval` commits piled up (one AssetWatcher for the whole lake). Both start
paused. `make demo-airflow` runs the maintenance DAG once with `airflow dags test`.

Copy it into your DAGs folder and point it at your tables: a warehouse root, table URLs, or
`DeltaTable(name, url, delta_ops_conn_id=...)` for tables on an object store whose credentials
live in an Airflow connection. Every step runs in the pool `delta_ops`, whose slots bound how
many steps work at once; create it once, or write it for `airflow pools import`::

    airflow pools set delta_ops 4 "delta-ops maintenance"
    python examples/airflow/delta_maintenance_dag.py pools.json && airflow pools import pools.json
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from delta_ops.airflow.dags import build_delta_commit_dag, build_delta_maintenance_dag, pools_file

WAREHOUSE = os.environ.get(
    "DELTA_OPS_WAREHOUSE", str(Path(__file__).resolve().parents[2] / "warehouse")
)
POOL = "delta_ops"

maintenance = build_delta_maintenance_dag(
    WAREHOUSE,
    name="lake",
    schedule="0 3 * * *",
    rewrites=["compact"],
    options={"vacuum": {"retention": "7d"}},
    pool=POOL,
    max_active_tasks=8,
)
commits = build_delta_commit_dag(WAREHOUSE, name="lake", pool=POOL, max_active_tis_per_dag=4)

if __name__ == "__main__":
    print(pools_file(sys.argv[1] if len(sys.argv) > 1 else "pools.json", maintenance, commits))
