"""The Dagster side of a lake of 1,000 small tables (issue 31): the code location loads in
under 10 s in a fresh process, and the commit sensor ticks over every table in under 1 s when
nothing changed.

The lake is `bench_lake.make_lake`'s (made directly in a temporary folder, a few seconds).

* **Load**: a fresh interpreter does what a code server does when it serves the location:
  imports delta-ops' Dagster package, builds the `Definitions` with
  `build_delta_maintenance_defs(<warehouse root>)` (discovering the tables), resolves the
  repository with all its definitions, and builds and serializes the repository snapshot the
  webserver reads. Timed from outside the child, interpreter start and exit included.
* **Tick**: the real commit sensor, evaluated with Dagster's `build_sensor_context` in this
  process (a sensor ticks in the long-lived daemon), with the cursor of a first tick, so at
  the latest version of every table. Median of `--ticks`.

Same work, checked: the child reports how many assets it built (per table four maintenance
actions and the table, plus the operation history's asset); the idle tick must carry every
table in its cursor unchanged; after one new commit to one table a tick must move exactly
that table's cursor. A difference prints ``MISMATCH: ...`` and exits 1.

    python benchmarks/bench_lake_dagster.py [--tables 1000] [--ticks 5]

Exit status: 0 goals met, 1 MISMATCH, 3 a goal missed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE.parent) not in sys.path:
    sys.path.insert(0, str(HERE.parent))

from benchmarks.bench_lake import make_lake

LOAD_GOAL_S = 10.0
TICK_GOAL_S = 1.0
NAME = "lake"

#: what the fresh child runs: the code server's work for one location, with its counts
_CHILD = """
import sys, time
started = time.perf_counter()
from dagster._core.remote_representation.external_data import RepositorySnap
from dagster_shared.serdes import serialize_value
from delta_ops.dagster import build_delta_maintenance_defs
imported = time.perf_counter()
defs = build_delta_maintenance_defs(sys.argv[1], name=sys.argv[2])
built = time.perf_counter()
repo = defs.get_repository_def()
repo.load_all_definitions()
resolved = time.perf_counter()
snapshot = serialize_value(RepositorySnap.from_def(repo))
done = time.perf_counter()
import json
print(json.dumps({
    "assets": len(repo.assets_defs_by_key),
    "checks": len(repo.asset_checks_defs_by_key),
    "snapshot_mb": round(len(snapshot) / 1e6, 1),
    "stages": {"import": imported - started, "build": built - imported,
               "repository": resolved - built, "snapshot": done - resolved},
}))
"""


def measure_load(warehouse: Path) -> tuple[float, dict]:
    """Seconds for a fresh process to load the location, and what it reported."""
    started = time.perf_counter()
    child = subprocess.run(
        [sys.executable, "-c", _CHILD, str(warehouse), NAME],
        capture_output=True,
        text=True,
        check=False,
        cwd=HERE.parent,
    )
    seconds = time.perf_counter() - started
    if child.returncode != 0:
        raise SystemExit(f"MISMATCH: the code location did not load: {child.stderr[-2000:]}")
    return seconds, json.loads(child.stdout.strip().splitlines()[-1])


def measure_tick(warehouse: Path, ticks: int) -> tuple[list[float], int, list[str]]:
    """Seconds of each idle tick, the tables in the cursor, and mismatches found."""
    import dagster as dg

    from benchmarks.bench_lake import _add, _commit
    from delta_ops import clock
    from delta_ops.dagster import build_delta_maintenance_defs

    defs = build_delta_maintenance_defs(str(warehouse), name=NAME)
    sensor = defs.resolve_sensor_def(f"{NAME}_commit_sensor")
    key = f"{NAME}_delta_maintenance"
    resources = {key: defs.resources[key]}
    instance = dg.DagsterInstance.ephemeral()

    def tick(cursor: str | None) -> tuple[float, dg.SensorExecutionData]:
        started = time.perf_counter()
        with dg.build_sensor_context(cursor=cursor, resources=resources, instance=instance) as c:
            data = sensor.evaluate_tick(c)
        return time.perf_counter() - started, data

    _, first = tick(None)  # the cursor at every table's latest version
    cursor = first.cursor
    mismatches = []
    seconds = []
    for _ in range(ticks):
        spent, data = tick(cursor)
        seconds.append(spent)
        if data.cursor != cursor or data.run_requests:
            mismatches.append("an idle tick changed the cursor or requested a run")
    state = json.loads(cursor or "{}")
    # one new commit to one table: the next tick must see it, and only it
    changed = min(state)
    table = warehouse / changed
    version = state[changed]["version"] + 1
    now = clock.now_ms()
    _commit(table, version, [_add(f"part-new-{version}.parquet", 100, now)], now)
    _, moved = tick(cursor)
    after = json.loads(moved.cursor or "{}")
    differs = sorted(name for name in state if after.get(name) != state[name])
    if differs != [changed] or after[changed]["version"] != version:
        mismatches.append(f"after a commit to {changed} the cursor moved for {differs[:5]}")
    return seconds, len(state), mismatches


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=1000)
    parser.add_argument("--ticks", type=int, default=5)
    parser.add_argument("--load-goal", type=float, default=LOAD_GOAL_S, help="seconds")
    parser.add_argument("--tick-goal", type=float, default=TICK_GOAL_S, help="seconds")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench_lake_dagster_") as tmp:
        started = time.perf_counter()
        warehouse = make_lake(Path(tmp), args.tables)
        print(f"lake: {args.tables} tables made in {time.perf_counter() - started:.1f} s")
        load_s, loaded = measure_load(warehouse)
        ticks, in_cursor, mismatches = measure_tick(warehouse, args.ticks)
    stages = ", ".join(f"{k} {v:.2f} s" for k, v in loaded["stages"].items())
    tick_s = statistics.median(ticks)
    load_ok, tick_ok = load_s < args.load_goal, tick_s < args.tick_goal
    print(
        f"load: {load_s:.2f} s in a fresh process (goal < {args.load_goal} s: "
        f"{'met' if load_ok else 'MISSED'}); {stages}; {loaded['assets']} assets, "
        f"{loaded['checks']} checks, snapshot {loaded['snapshot_mb']} MB"
    )
    print(
        f"tick: {tick_s:.3f} s median of {len(ticks)} idle ticks over {in_cursor} tables "
        f"(goal < {args.tick_goal} s: {'met' if tick_ok else 'MISSED'}); "
        f"min {min(ticks):.3f} s, max {max(ticks):.3f} s"
    )
    print(f"cpus: {os.cpu_count()}, load average {os.getloadavg()[0]:.2f}")
    # one multi-asset of 4 actions per table, one external table asset per table, and the
    # operation history's asset
    want = 5 * args.tables + 1
    if loaded["assets"] != want or in_cursor != args.tables:
        mismatches.append(
            f"{loaded['assets']} assets (want {want}), {in_cursor} tables in the "
            f"cursor (want {args.tables})"
        )
    for line in mismatches:
        print(f"MISMATCH: bench_lake_dagster: {line}")
    if mismatches:
        return 1
    return 0 if load_ok and tick_ok else 3


if __name__ == "__main__":
    sys.exit(main())
