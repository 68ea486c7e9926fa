"""A lake of 1,000 to 10,000 small tables in Dagster and the CLI (issues 31 and 45): the code
location loads within 1.2x of Dagster's own floor for the same definitions, the commit sensor
ticks in under 1 s, `delta-ops plan` decides in under 5 s at 1,000 tables, and each of them
costs as much per table at 10,000 tables as at 1,000 (the curve is printed).

The lake is `bench_lake.make_lake`'s (made directly in a temporary folder, a few seconds per
1,000 tables).

* **Load**: a fresh interpreter does what a code server does when it serves the location:
  imports delta-ops' Dagster package, builds the `Definitions` with
  `build_delta_maintenance_defs(<warehouse root>)` (discovering the tables), resolves the
  repository with all its definitions, and builds and serializes the repository snapshot the
  webserver reads. Timed from outside the child, interpreter start and exit included.
* **Floor**: a fresh interpreter with Dagster alone builds the same definitions (same asset
  keys, dependencies, descriptions, tags, pools and checks, bodies that do nothing; see
  `dagster_floor.py`), resolves and snapshots them the same way. The load's ratio to it is
  what delta-ops adds.
* **Tick**: the real commit sensor, evaluated with Dagster's `build_sensor_context` in this
  process (a sensor ticks in the long-lived daemon), with the cursor of a first tick, so at
  the latest version of every table. Median of `--ticks`.
* **Plan**: `delta-ops plan <warehouse> --json` in a fresh process, timed from outside.

Same work, checked: the location and the floor hold the same number of assets and checks; the
idle tick must carry every table in its cursor unchanged; after one new commit to one table a
tick must move exactly that table's cursor; the plan decides for every table. A difference
prints ``MISMATCH: ...`` and exits 1.

    python benchmarks/bench_lake_dagster.py [--tables 1000,5000,10000] [--ticks 5]

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
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE.parent) not in sys.path:
    sys.path.insert(0, str(HERE.parent))

from benchmarks.bench_lake import make_lake
from benchmarks.dagster_floor import FLOOR_CHILD, SERVE_TAIL, shape_of

LOAD_GOAL_RATIO = 1.2  # of Dagster's own floor
TICK_GOAL_S = 1.0
PLAN_GOAL_S = 5.0  # at 1,000 tables
FLAT_GOAL = 1.25  # per-table cost at the largest size over the smallest's
NAME = "lake"

#: what the fresh child runs: the code server's work for one location, with its counts
_CHILD = (
    """
import json, sys, time
started = time.perf_counter()
from dagster._core.remote_representation.external_data import RepositorySnap
from dagster_shared.serdes import serialize_value
from delta_ops.dagster import build_delta_maintenance_defs
imported = time.perf_counter()
defs = build_delta_maintenance_defs(sys.argv[1], name=sys.argv[2])
"""
    + SERVE_TAIL
)


def _timed_child(args: list[str], what: str) -> tuple[float, str]:
    """Seconds a fresh interpreter running `args` took, timed from outside, and its stdout."""
    started = time.perf_counter()
    child = subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, check=False, cwd=HERE.parent
    )
    seconds = time.perf_counter() - started
    if child.returncode != 0:
        raise SystemExit(f"MISMATCH: {what} failed: {child.stderr[-2000:]}")
    return seconds, child.stdout


def measure_load(warehouse: Path) -> tuple[float, dict]:
    """Seconds for a fresh process to load the location, and what it reported."""
    seconds, out = _timed_child(["-c", _CHILD, str(warehouse), NAME], "the code location")
    return seconds, json.loads(out.strip().splitlines()[-1])


def measure_floor(warehouse: Path, scratch: Path) -> tuple[float, dict]:
    """Seconds for a fresh process with Dagster alone to load the same definitions."""
    from delta_ops.dagster import build_delta_maintenance_defs

    shape_file = scratch / "shape.json"
    shape_file.write_text(
        json.dumps(shape_of(build_delta_maintenance_defs(str(warehouse), name=NAME)))
    )
    seconds, out = _timed_child(["-c", FLOOR_CHILD, str(shape_file)], "the floor location")
    return seconds, json.loads(out.strip().splitlines()[-1])


def measure_plan(warehouse: Path) -> tuple[float, int]:
    """Seconds of `delta-ops plan --json` in a fresh process, and the tables it decided."""
    seconds, out = _timed_child(
        ["-m", "delta_ops.cli", "plan", str(warehouse), "--json"], "delta-ops plan"
    )
    return seconds, len(json.loads(out)["choices"])


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


@dataclass(frozen=True)
class Row:
    """One size of the curve."""

    tables: int
    load_s: float
    floor_s: float
    tick_s: float
    plan_s: float
    loaded: dict
    floor: dict


def measure(tables: int, ticks: int) -> tuple[Row, list[str]]:
    """One lake of `tables` tables, measured; the mismatches found."""
    with tempfile.TemporaryDirectory(prefix="bench_lake_dagster_") as tmp:
        started = time.perf_counter()
        warehouse = make_lake(Path(tmp), tables)
        print(f"lake: {tables} tables made in {time.perf_counter() - started:.1f} s", flush=True)
        load_s, loaded = measure_load(warehouse)
        floor_s, floor = measure_floor(warehouse, Path(tmp))
        plan_s, decided = measure_plan(warehouse)
        tick_times, in_cursor, mismatches = measure_tick(warehouse, ticks)
    if (loaded["assets"], loaded["checks"]) != (floor["assets"], floor["checks"]):
        mismatches.append(
            f"{tables} tables: the location has {loaded['assets']} assets and "
            f"{loaded['checks']} checks, the floor {floor['assets']} and {floor['checks']}"
        )
    if in_cursor != tables or decided != tables:
        mismatches.append(
            f"{tables} tables: {in_cursor} in the sensor's cursor, {decided} decided by plan"
        )
    row = Row(tables, load_s, floor_s, statistics.median(tick_times), plan_s, loaded, floor)
    return row, mismatches


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", default="1000,5000,10000", help="sizes, comma-separated")
    parser.add_argument("--ticks", type=int, default=5)
    args = parser.parse_args()
    sizes = sorted(int(size) for size in args.tables.split(","))
    rows: list[Row] = []
    mismatches: list[str] = []
    for size in sizes:
        row, found = measure(size, args.ticks)
        rows.append(row)
        mismatches += found
        stages = ", ".join(f"{k} {v:.2f}" for k, v in row.loaded["stages"].items())
        floor_stages = ", ".join(f"{k} {v:.2f}" for k, v in row.floor["stages"].items())
        print(
            f"{size} tables: load {row.load_s:.2f} s ({stages}), floor {row.floor_s:.2f} s "
            f"({floor_stages}), ratio {row.load_s / row.floor_s:.2f}; tick {row.tick_s:.3f} s; "
            f"plan {row.plan_s:.2f} s; {row.loaded['assets']} assets, {row.loaded['checks']} "
            f"checks, snapshot {row.loaded['snapshot_mb']} MB (floor {row.floor['snapshot_mb']})",
            flush=True,
        )
    print(
        "\n| tables | load (s) | Dagster floor (s) | ratio | tick (s) | plan (s) | load / plan per table (ms) |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        print(
            f"| {row.tables:,} | {row.load_s:.2f} | {row.floor_s:.2f} | "
            f"{row.load_s / row.floor_s:.2f} | {row.tick_s:.3f} | {row.plan_s:.2f} | "
            f"{1000 * row.load_s / row.tables:.2f} / {1000 * row.plan_s / row.tables:.2f} |"
        )
    print(f"cpus: {os.cpu_count()}, load average {os.getloadavg()[0]:.2f}")
    missed = [
        f"load {r.load_s / r.floor_s:.2f}x the floor at {r.tables} (goal <= {LOAD_GOAL_RATIO})"
        for r in rows
        if r.load_s / r.floor_s > LOAD_GOAL_RATIO
    ]
    missed += [
        f"tick {r.tick_s:.3f} s at {r.tables} (goal < {TICK_GOAL_S})"
        for r in rows
        if r.tick_s >= TICK_GOAL_S
    ]
    missed += [
        f"plan {r.plan_s:.2f} s at {r.tables} (goal < {PLAN_GOAL_S})"
        for r in rows
        if r.tables <= 1000 and r.plan_s >= PLAN_GOAL_S
    ]
    if len(rows) > 1:
        small, big = rows[0], rows[-1]
        for what, cost in (("load", lambda r: r.load_s), ("plan", lambda r: r.plan_s)):
            growth = (cost(big) / big.tables) / (cost(small) / small.tables)
            print(f"{what}: per-table cost at {big.tables} is {growth:.2f}x that at {small.tables}")
            if growth > FLAT_GOAL:
                missed.append(f"{what} per table grows {growth:.2f}x (goal <= {FLAT_GOAL})")
    for line in missed:
        print(f"MISSED: {line}")
    for line in mismatches:
        print(f"MISMATCH: bench_lake_dagster: {line}")
    if mismatches:
        return 1
    return 3 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
