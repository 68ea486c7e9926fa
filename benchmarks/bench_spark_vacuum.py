"""Benchmark: FULL vacuum with the local engine against the Spark engine (issue 14).

The table is the vacuum benchmark's (`bench_vacuum.py`): 2000 commits, 101,000 data files in
10 partitions (80,000 live, 20,000 tombstoned, 1,000 orphans), all 30 days old; each run must
delete exactly 21,000 files. One process: the Spark session (local[2]) is started once,
untimed, as a Dagster run or a pipeline would already have it; then runs alternate local /
spark, each on a fresh hard-linked copy (restored untimed). Reported: median wall time of plan
+ execute, and how many listing rows reached the driver (the Spark engine's point: tasks
return only unprotected files, the local engine's walk holds every unprotected file too but
lists the whole tree in this process).

    python benchmarks/bench_spark_vacuum.py [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.bench_vacuum import restore

DATA = ROOT / "benchmarks" / ".data"
PRISTINE = DATA / "vacuum-2000x50-r5-o1000-a30"
EXPECTED = 21_000
RETENTION_MS = 7 * 86_400_000


def one_run(work: Path, engine: str) -> tuple[float, int, int]:
    from delta_ops.ops.vacuum import execute_vacuum, plan_vacuum
    from delta_ops.table.snapshot import load_snapshot

    restore(PRISTINE, work)
    start = time.perf_counter()
    plan = plan_vacuum(
        load_snapshot(str(work)),
        int(time.time() * 1000),
        retention_ms=RETENTION_MS,
        engine=engine,
    )
    result = execute_vacuum(plan)
    elapsed = time.perf_counter() - start
    if len(result.deleted) != EXPECTED:
        raise SystemExit(f"{engine}: deleted {len(result.deleted)}, expected {EXPECTED}")
    return elapsed, len(plan.candidates), len(result.deleted)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    if not PRISTINE.exists():
        raise SystemExit(f"{PRISTINE} is missing: run benchmarks/bench_vacuum.py once first")

    from delta_ops.spark import get_spark

    started = time.perf_counter()
    spark = get_spark("local[2]", app_name="bench-spark-vacuum")
    print(f"Spark session started in {time.perf_counter() - started:.1f} s (untimed)")
    times: dict[str, list[float]] = {"local": [], "spark": []}
    rows = {}
    for run in range(args.runs + 1):  # the first round warms both up
        for engine in ("local", "spark"):
            elapsed, candidates, deleted = one_run(DATA / f"spark-vacuum-{engine}", engine)
            rows[engine] = candidates
            if run:
                times[engine].append(elapsed)
            print(f"  {engine:5s} run {run}: {elapsed:.3f} s, deleted {deleted}")
    spark.stop()
    local, remote = statistics.median(times["local"]), statistics.median(times["spark"])
    print(f"\n== FULL vacuum of 101,000 files, 21,000 deleted (median of {args.runs}) ==")
    print(f"local engine  {local:.3f} s")
    print(f"spark engine  {remote:.3f} s   (local[2], 2 cores shared with the driver)")
    print(f"ratio spark/local = {remote / local:.2f}")
    print(f"listing rows returned to the driver by Spark tasks: {rows['spark']:,} of 101,000 files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
