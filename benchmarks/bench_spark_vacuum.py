"""Benchmark: FULL vacuum with the local engine against the Spark engine (issue 14).

The table is the vacuum benchmark's (`bench_vacuum.py`): 2000 commits, 101,000 data files in
10 partitions (80,000 live, 20,000 tombstoned, 1,000 orphans), all 30 days old; each run must
delete exactly 21,000 files. One process: the Spark session (local[2]) is started once,
untimed, as a Dagster run or a pipeline would already have it; then runs alternate local /
spark, each on a fresh hard-linked copy (restored untimed). Reported: median wall time of plan
+ execute, and how many listing rows reached the driver (the Spark engine's point: tasks
return only unprotected files, the local engine's walk holds every unprotected file too but
lists the whole tree in this process).

Same work, checked after every run before the figures are printed: each engine must leave
exactly the live files deltalake reads from the pristine log on disk, and delete the same set
of files as every earlier run of either engine; a difference prints ``MISMATCH: ...`` and
exits 1. The table's size follows bench_vacuum.py's options (which share its tables).

    python benchmarks/bench_spark_vacuum.py [--runs 3] [--commits 2000 --adds 50
        --remove-every 5 --orphans 1000]

Exit status: 0 both engines did the same work, 1 MISMATCH.
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

from benchmarks.bench_vacuum import data_files, live_files, restore
from benchmarks.synthetic import ensure_synthetic_table
from benchmarks.verify import Mismatch, report_mismatch, set_difference

DATA = ROOT / "benchmarks" / ".data"
AGE_DAYS = 30
RETENTION_MS = 7 * 86_400_000


class Verifier:
    """Every run must leave exactly the live files and delete what every earlier run did."""

    def __init__(self, pristine: Path, expected: int) -> None:
        self.live = live_files(pristine)
        self.expected = expected
        self.deleted: dict[str, frozenset[str]] = {}

    def check(self, engine: str, work: Path, deleted: frozenset[str]) -> None:
        """Raises Mismatch naming the first difference."""
        left = set(data_files(work))
        difference = set_difference(
            f"data files left by the {engine} engine", left, "live files in the log", self.live
        )
        if difference:
            raise Mismatch(difference)
        if len(deleted) != self.expected:
            raise Mismatch(
                f"the {engine} engine deleted {len(deleted)} files, expected {self.expected}"
            )
        for other, earlier in self.deleted.items():
            difference = set_difference(
                f"files deleted by the {engine} engine", deleted, f"by the {other} engine", earlier
            )
            if difference:
                raise Mismatch(difference)
        self.deleted[engine] = deleted


def one_run(pristine: Path, work: Path, engine: str, verifier: Verifier) -> tuple[float, int, int]:
    from delta_ops.ops.vacuum import execute_vacuum, plan_vacuum
    from delta_ops.table.snapshot import load_snapshot

    restore(pristine, work)
    start = time.perf_counter()
    plan = plan_vacuum(
        load_snapshot(str(work)),
        int(time.time() * 1000),
        retention_ms=RETENTION_MS,
        engine=engine,
    )
    result = execute_vacuum(plan)
    elapsed = time.perf_counter() - start
    verifier.check(engine, work, frozenset(map(str, result.deleted)))
    return elapsed, len(plan.candidates), len(result.deleted)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--commits", type=int, default=2000)
    parser.add_argument("--adds", type=int, default=50)
    parser.add_argument("--remove-every", type=int, default=5)
    parser.add_argument("--orphans", type=int, default=1000)
    args = parser.parse_args(argv)
    try:
        return run(args)
    except Mismatch as exc:
        return report_mismatch("bench_spark_vacuum", exc)


def run(args: argparse.Namespace) -> int:
    """The benchmark; raises Mismatch when an engine did not do the expected work."""
    pristine = DATA / (
        f"vacuum-{args.commits}x{args.adds}-r{args.remove_every}-o{args.orphans}-a{AGE_DAYS:g}"
    )
    spec = ensure_synthetic_table(  # bench_vacuum.py's table (made there, or here if missing)
        pristine,
        commits=args.commits,
        adds_per_commit=args.adds,
        remove_every=args.remove_every,
        seed=0,
        with_data_files=True,
        orphans=args.orphans,
        age_days=float(AGE_DAYS),
    )
    expected = spec["num_tombstones"] + spec["num_orphans"]
    total = expected + spec["num_live"]
    verifier = Verifier(pristine, expected)

    from delta_ops.spark import get_spark

    started = time.perf_counter()
    spark = get_spark("local[2]", app_name="bench-spark-vacuum")
    print(f"Spark session started in {time.perf_counter() - started:.1f} s (untimed)")
    times: dict[str, list[float]] = {"local": [], "spark": []}
    rows = {}
    for run in range(args.runs + 1):  # the first round warms both up
        for engine in ("local", "spark"):
            elapsed, candidates, deleted = one_run(
                pristine, DATA / f"spark-vacuum-{engine}", engine, verifier
            )
            rows[engine] = candidates
            if run:
                times[engine].append(elapsed)
            print(f"  {engine:5s} run {run}: {elapsed:.3f} s, deleted {deleted}")
    spark.stop()
    local, remote = statistics.median(times["local"]), statistics.median(times["spark"])
    print(f"same work: every run of both engines deleted the same {expected:,} files")
    print(f"\n== FULL vacuum of {total:,} files, {expected:,} deleted (median of {args.runs}) ==")
    print(f"local engine  {local:.3f} s")
    print(f"spark engine  {remote:.3f} s   (local[2], 2 cores shared with the driver)")
    print(f"ratio spark/local = {remote / local:.2f}")
    print(
        f"listing rows returned to the driver by Spark tasks: {rows['spark']:,} of {total:,} files"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
