"""Benchmark: vacuum and compaction on a two-worker Spark standalone cluster, over Spark Connect,
against the local engine (issue 46).

The cluster is the tests' (`loopback/spark_cluster.py`): a master, two one-core workers and a
Spark Connect server driving them, each a JVM of its own on loopback; this process is only a
Connect client (`SparkEngine(get_spark_remote(url))`), as a Databricks job or an Airflow task
would be. Started once, untimed. The tables are the vacuum and compaction benchmarks' own
(`bench_spark_vacuum.py`: 101,000 files, 21,000 to delete; `bench_compact.py`: 10,000 small
files in 4 partitions), on the local disk both engines see; each run starts from a fresh
hard-linked copy (restored untimed). Reported: median wall time of plan + execute per engine,
and the Spark side split into the driver's own work (log replay, planning, committing) and the
Spark jobs (the time spent in `SparkEngine` calls), the rest.

Same work, checked after every run: vacuum must leave exactly the live files and delete the
same files on both engines (bench_spark_vacuum's Verifier); compaction must leave one file per
partition holding every row once (bench_compact's check). A difference prints ``MISMATCH``.

    python benchmarks/bench_spark_cluster.py [--runs 2] [--only vacuum|compact]

Exit status: 0 same work on both engines, 1 MISMATCH.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import bench_compact, bench_spark_vacuum
from benchmarks.bench_vacuum import restore as restore_vacuum
from benchmarks.synthetic import ensure_synthetic_table
from benchmarks.verify import Mismatch, report_mismatch

DATA = bench_spark_vacuum.DATA


class Timed:
    """Wraps an engine's list/delete/map calls and adds up the wall time spent in them."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.name = engine.name
        self.in_jobs = 0.0

    def __getattr__(self, attribute: str) -> Any:
        inner = getattr(self.engine, attribute)
        if attribute not in ("list_unprotected", "delete", "map_ordered"):
            return inner

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                self.in_jobs += time.perf_counter() - start

        return timed


def vacuum_once(work: Path, engine: Any) -> tuple[float, frozenset[str]]:
    from delta_ops.ops.vacuum import execute_vacuum, plan_vacuum
    from delta_ops.table.snapshot import load_snapshot

    start = time.perf_counter()
    plan = plan_vacuum(
        load_snapshot(str(work)),
        int(time.time() * 1000),
        retention_ms=bench_spark_vacuum.RETENTION_MS,
        engine=engine,
    )
    result = execute_vacuum(plan)
    return time.perf_counter() - start, frozenset(map(str, result.deleted))


def compact_once(work: Path, engine: Any) -> float:
    from delta_ops.ops.compact import OPERATION as COMPACT
    from delta_ops.table.snapshot import load_snapshot

    start = time.perf_counter()
    values = COMPACT.parse({"target_size": "128MB", "engine": engine.name})
    COMPACT.execute(COMPACT.plan(load_snapshot(str(work)), values, engine))
    return time.perf_counter() - start


def measure(
    label: str, runs: int, engines: dict[str, Any], once: Callable[[str, Any], float]
) -> None:
    times: dict[str, list[float]] = {name: [] for name in engines}
    jobs: list[float] = []
    for run in range(runs + 1):  # the first round warms both up
        for name, engine in engines.items():
            timed = Timed(engine)
            elapsed = once(name, timed)
            print(f"  {label} {name:7s} run {run}: {elapsed:.2f} s", flush=True)
            if run:
                times[name].append(elapsed)
                if name == "cluster":
                    jobs.append(timed.in_jobs)
    local, cluster = statistics.median(times["local"]), statistics.median(times["cluster"])
    in_jobs = statistics.median(jobs)
    print(f"== {label} (median of {runs}) ==")
    print(f"local engine    {local:.2f} s")
    print(
        f"2-worker cluster {cluster:.2f} s: Spark jobs {in_jobs:.2f} s, the driver's own work"
        f" {cluster - in_jobs:.2f} s; cluster/local = {cluster / local:.2f}",
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--only", choices=("vacuum", "compact"), default=None)
    args = parser.parse_args(argv)
    try:
        return run(args)
    except Mismatch as exc:
        return report_mismatch("bench_spark_cluster", exc)


def run(args: argparse.Namespace) -> int:
    from delta_ops.ops.engines import LOCAL
    from delta_ops.spark.engine import SparkEngine
    from delta_ops.spark.session import get_spark_remote
    from loopback.spark_cluster import standalone_cluster

    with tempfile.TemporaryDirectory() as logs, standalone_cluster(Path(logs)) as cluster:
        started = time.perf_counter()
        session = get_spark_remote(cluster.connect_url)
        try:
            engine = SparkEngine(session)
            engine.map_ordered(len, ["warm", "up"])  # executors and Python workers start
            print(f"cluster's first job in {time.perf_counter() - started:.1f} s (untimed)")
            _measure(args, {"local": LOCAL, "cluster": engine})
        finally:
            # the Connect session ends while its server still runs: stopped after the
            # cluster, its client retried releasing it against a closed port for minutes
            session.stop()
    return 0


def _measure(args: argparse.Namespace, engines: dict[str, Any]) -> None:
    """Vacuum and compaction (or the one `--only` names), on each engine."""
    if args.only in (None, "vacuum"):
        pristine = DATA / f"vacuum-2000x50-r5-o1000-a{bench_spark_vacuum.AGE_DAYS:g}"
        spec = ensure_synthetic_table(
            pristine,
            commits=2000,
            adds_per_commit=50,
            remove_every=5,
            seed=0,
            with_data_files=True,
            orphans=1000,
            age_days=float(bench_spark_vacuum.AGE_DAYS),
        )
        expected = spec["num_tombstones"] + spec["num_orphans"]
        verifier = bench_spark_vacuum.Verifier(pristine, expected)

        def vacuum(name: str, timed: Any) -> float:
            work = DATA / f"cluster-vacuum-{name}"
            restore_vacuum(pristine, work)
            elapsed, deleted = vacuum_once(work, timed)
            verifier.check(name, work, deleted)
            return elapsed

        total = expected + spec["num_live"]
        measure(f"vacuum {total:,} files ({expected:,} deleted)", args.runs, engines, vacuum)
    if args.only in (None, "compact"):
        pristine = DATA / "compact-10000x10"
        if not (pristine / "BENCH_SPEC").exists():
            bench_compact.build(pristine, 10_000, 10)
        rows = 10_000 * 10

        def compact(name: str, timed: Any) -> float:
            work = DATA / f"cluster-compact-{name}"
            bench_compact.restore(pristine, work)
            elapsed = compact_once(work, timed)
            bench_compact.check(name, work, rows)
            return elapsed

        measure("compaction of 10,000 small files", args.runs, engines, compact)


if __name__ == "__main__":
    sys.exit(main())
