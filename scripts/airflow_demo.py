"""`make demo-airflow`: the example DAG (examples/airflow/) run once by Airflow on the demo warehouse.

Airflow keeps its home and SQLite metadata database in `build/airflow-home` (no scheduler, no
webserver: `airflow dags test` runs the DAG in this process's child). The warehouse is the
demo's (`./warehouse`, or $DELTA_OPS_WAREHOUSE): `make demo` fills it with the PySpark
pipeline's `events` table; when it holds no table yet, this script writes one without Spark
(three daily batches dated 40 days back with a crashed write's file, as `make demo` leaves
them, then one fresh batch), so compaction, cleanup and vacuum have work.

1. `airflow db migrate`, then the DAG's pools (`airflow pools import`), as a deployment would.
2. `airflow dags test lake_maintenance`: per table compact -> checkpoint -> cleanup -> vacuum.
3. `delta-ops inspect` of each table.
"""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HOME = ROOT / "build" / "airflow-home"
DAGS = ROOT / "examples" / "airflow"
DAG_ID = "lake_maintenance"


def seed(table: Path) -> None:
    """The demo's events table, written by delta-ops without Spark."""
    import pyarrow as pa

    sys.path.insert(0, str(ROOT))
    from delta_ops.table.writer import write_arrow
    from demo_pipeline import let_time_pass

    today = dt.date.today()

    def batch(n: int) -> pa.Table:
        days = [today - dt.timedelta(days=i % 3) for i in range(n)]
        return pa.table(
            {
                "user_id": pa.array([i % 1000 for i in range(n)], pa.int64()),
                "kind": pa.array([("view", "click", "buy")[i % 3] for i in range(n)]),
                "amount": pa.array([round(i * 0.37 % 100, 2) for i in range(n)], pa.float64()),
                "day": pa.array(days, pa.date32()),
            }
        )

    for _ in range(3):
        write_arrow(table, batch(300), partition_by=["day"])
    crashed = let_time_pass(table)
    write_arrow(table, batch(300), partition_by=["day"])
    print(f"(demo) wrote {table}: 4 batches, the first 3 dated 40 days back, and {crashed.name}")


def main() -> int:
    warehouse = Path(os.environ.get("DELTA_OPS_WAREHOUSE", ROOT / "warehouse")).resolve()
    sys.path.insert(0, str(ROOT))
    from delta_ops.airflow.tables import discover_tables

    if not discover_tables(str(warehouse)):
        seed(warehouse / "events")
    (HOME / "dags").mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(HOME),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{HOME / 'airflow.db'}",
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "DELTA_OPS_WAREHOUSE": str(warehouse),
    }
    airflow = [sys.executable, "-m", "airflow"]

    def run(*args: str, quiet: bool = False) -> int:
        print(f"\n$ airflow {' '.join(args)}", flush=True)
        out = subprocess.DEVNULL if quiet else None
        return subprocess.run([*airflow, *args], env=env, stdout=out, check=False).returncode

    if run("db", "migrate", quiet=True) != 0:
        return 1
    pools = HOME / "pools.json"
    dag_file = DAGS / "delta_maintenance_dag.py"
    subprocess.run([sys.executable, str(dag_file), str(pools)], env=env, check=True)
    if run("pools", "import", str(pools), quiet=True) != 0:
        return 1
    code = run("dags", "test", DAG_ID)
    from delta_ops.cli import main as cli

    for table in discover_tables(str(warehouse)):
        print(f"\n$ delta-ops inspect {table.url}", flush=True)
        cli(["inspect", table.url])
    print(f"\nAirflow's home and metadata database are in {HOME}")
    return code


if __name__ == "__main__":
    sys.exit(main())
