"""The Airflow side of a lake of 1,000 small tables (issue 49.10): the DAG folder parses in a
fresh process, and one triggerer coroutine watches every table's commits.

The lake is `bench_lake.make_lake`'s (made directly in a temporary folder, a few seconds).

* **Parse**: a fresh interpreter does what Airflow's DAG processor does with the DAG folder:
  a `DagBag` of one DAG file building ``build_delta_maintenance_dag(<warehouse>)`` (a task
  group of checkpoint, cleanup and vacuum per table) and ``build_delta_commit_dag(<warehouse>)``
  (one lake watcher, one mapped checkpoint), then serializes every DAG as the processor
  stores it for the scheduler and the UI. Timed from outside the child, interpreter start and
  exit included, with the child's stages (import, parse, serialize).
* **Triggerer**: the lake's one `DeltaLakeCommitEventTrigger` in this process: the first look
  (opening each table, reading each head once), then `--looks` idle looks (every table at its
  cursor: one existence check each), wall and CPU time per look, as the triggerer pays them
  every ``poll_interval`` (30 s by default).

Same work, checked: the child reports the DAGs and tasks it built (per table three maintenance
steps, plus the params check; the commit DAG two tasks); an idle look must find no table due
and check one file per table; after commits that make one table due, the next look must name
exactly that table. A difference prints ``MISMATCH: ...`` and exits 1.

    python benchmarks/bench_airflow_lake.py [--tables 1000] [--looks 5]

Exit status: 0 goals met, 1 MISMATCH, 3 a goal missed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE.parent) not in sys.path:
    sys.path.insert(0, str(HERE.parent))

from benchmarks.bench_lake import _add, _commit, make_lake

#: Airflow's own default for one file's parse ([core] dagbag_import_timeout)
PARSE_GOAL_S = 30.0
#: one idle look must fit well inside the default poll interval (30 s)
LOOK_GOAL_S = 3.0
NAME = "lake"

_DAG_FILE = """
import os
from delta_ops.airflow.dags import build_delta_commit_dag, build_delta_maintenance_dag

WAREHOUSE = os.environ["BENCH_WAREHOUSE"]
maintenance = build_delta_maintenance_dag(WAREHOUSE, name="lake", pool="delta_ops")
commits = build_delta_commit_dag(WAREHOUSE, name="lake", pool="delta_ops")
"""

#: what the fresh child runs: the DAG processor's work for the folder, with its counts
_CHILD = """
import sys, time, json
started = time.perf_counter()
from airflow.dag_processing.dagbag import DagBag
from airflow.serialization.serialized_objects import DagSerialization
imported = time.perf_counter()
bag = DagBag(dag_folder=sys.argv[1], safe_mode=False)
parsed = time.perf_counter()
size = sum(len(json.dumps(DagSerialization.to_dict(dag))) for dag in bag.dags.values())
done = time.perf_counter()
print(json.dumps({
    "errors": {k: v[-500:] for k, v in bag.import_errors.items()},
    "dags": len(bag.dags),
    "tasks": sum(len(dag.tasks) for dag in bag.dags.values()),
    "serialized_mb": round(size / 1e6, 1),
    "stages": {"import": imported - started, "parse": parsed - imported,
               "serialize": done - parsed},
}))
"""


def measure_parse(root: Path, warehouse: Path) -> tuple[float, dict[str, Any]]:
    """Seconds for a fresh process to parse and serialize the DAG folder, and its report."""
    home = root / "airflow-home"
    dags = home / "dags"
    dags.mkdir(parents=True)
    (dags / "lake.py").write_text(_DAG_FILE)
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT": "600",
        "BENCH_WAREHOUSE": str(warehouse),
        "PYTHONPATH": str(HERE.parent),
    }
    started = time.perf_counter()
    child = subprocess.run(
        [sys.executable, "-c", _CHILD, str(dags)],
        capture_output=True,
        text=True,
        check=False,
        env=env,
        cwd=HERE.parent,
    )
    seconds = time.perf_counter() - started
    if child.returncode != 0:
        raise SystemExit(f"MISMATCH: the DAG folder did not parse: {child.stderr[-2000:]}")
    return seconds, json.loads(child.stdout.strip().splitlines()[-1])


def measure_looks(warehouse: Path, looks: int) -> tuple[float, list[float], list[float], list[str]]:
    """The first look's seconds, each idle look's wall and CPU seconds, and mismatches."""
    from delta_ops.airflow.dags import build_delta_commit_dag
    from delta_ops.airflow.triggers import CommitWatch, DeltaLakeCommitEventTrigger

    dag = build_delta_commit_dag(str(warehouse), name=NAME)
    [lake] = dag.timetable.asset_condition.objects
    [watcher] = lake.watchers
    trigger = watcher.trigger
    assert isinstance(trigger, DeltaLakeCommitEventTrigger)
    mismatches: list[str] = []

    async def scenario() -> tuple[float, list[float], list[float]]:
        started = time.perf_counter()
        opened = await trigger._watches()
        watches = {n: w for n, w in opened.items() if isinstance(w, CommitWatch)}
        seen = await asyncio.to_thread(trigger._look_all, watches)
        first = time.perf_counter() - started
        due_before = {n for n, d in seen.items() if isinstance(d, dict) and d["status"] == "due"}
        walls, cpus = [], []
        for _ in range(looks):
            wall, cpu = time.perf_counter(), time.process_time()
            seen = await asyncio.to_thread(trigger._look_all, watches)
            walls.append(time.perf_counter() - wall)
            cpus.append(time.process_time() - cpu)
            checked = sum(d["files_checked"] for d in seen.values() if isinstance(d, dict))
            if checked != len(watches):
                mismatches.append(f"an idle look checked {checked} files for {len(watches)}")
        # commits to one table until it is due: the next look must name it, and only it, among
        # the tables that were not due already (the lake has some: the watcher fires for
        # those at its first look)
        name = min(set(watches) - due_before)
        watch = watches[name]
        table = warehouse / name
        now = int(time.time() * 1000)
        while True:
            version = (watch.version or 0) + 1
            _commit(table, version, [_add(f"part-new-{version}.parquet", 100, now)], now)
            seen = await asyncio.to_thread(trigger._look_all, watches)
            if seen[name]["status"] != "waiting":
                break
        due = sorted(
            n
            for n, d in seen.items()
            if isinstance(d, dict) and d["status"] == "due" and n not in due_before
        )
        if due != [name]:
            mismatches.append(f"after commits to {name} the due tables are {due[:5]}")
        return first, walls, cpus

    first, walls, cpus = asyncio.run(scenario())
    return first, walls, cpus, mismatches


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=1000)
    parser.add_argument("--looks", type=int, default=5)
    parser.add_argument("--parse-goal", type=float, default=PARSE_GOAL_S, help="seconds")
    parser.add_argument("--look-goal", type=float, default=LOOK_GOAL_S, help="seconds")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench_airflow_lake_") as tmp:
        started = time.perf_counter()
        warehouse = make_lake(Path(tmp), args.tables)
        print(f"lake: {args.tables} tables made in {time.perf_counter() - started:.1f} s")
        parse_s, parsed = measure_parse(Path(tmp), warehouse)
        first_s, walls, cpus, mismatches = measure_looks(warehouse, args.looks)
    stages = ", ".join(f"{k} {v:.2f} s" for k, v in parsed["stages"].items())
    look_s = statistics.median(walls)
    parse_ok, look_ok = parse_s < args.parse_goal, look_s < args.look_goal
    print(
        f"parse: {parse_s:.2f} s in a fresh process (goal < {args.parse_goal} s: "
        f"{'met' if parse_ok else 'MISSED'}); {stages}; {parsed['dags']} DAGs, "
        f"{parsed['tasks']} tasks, serialized {parsed['serialized_mb']} MB"
    )
    print(
        f"triggerer: one coroutine for {args.tables} tables; first look {first_s:.2f} s; "
        f"idle look {look_s:.3f} s wall, {statistics.median(cpus):.3f} s CPU (median of "
        f"{len(walls)}; goal < {args.look_goal} s: {'met' if look_ok else 'MISSED'}); "
        f"min {min(walls):.3f} s, max {max(walls):.3f} s"
    )
    print(f"cpus: {os.cpu_count()}, load average {os.getloadavg()[0]:.2f}")
    want_tasks = 3 * args.tables + 1 + 2  # maintenance steps, the params check, commit DAG
    if parsed["errors"] or parsed["dags"] != 2 or parsed["tasks"] != want_tasks:
        mismatches.append(
            f"{parsed['dags']} DAGs and {parsed['tasks']} tasks (want 2 and {want_tasks});"
            f" errors: {parsed['errors']}"
        )
    for line in mismatches:
        print(f"MISMATCH: bench_airflow_lake: {line}")
    if mismatches:
        return 1
    return 0 if parse_ok and look_ok else 3


if __name__ == "__main__":
    sys.exit(main())
