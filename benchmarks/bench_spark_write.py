"""Benchmark: Spark writing through delta-ops' `delta` data source (issue 32), against Spark's
own parquet writer on the same data in the same session.

The data: `--rows` rows in `--files` Spark partitions (one data file each on both sides),
computed from ``spark.range``: id (bigint), x (double), s (string), ts (timestamp). In one
local[2] session, after one warm-up each, runs alternate:

Ours:   df.write.format("delta").mode("append").save(T)     (T: one table, each run appends)
Theirs: df.write.parquet(P_run)                             (a fresh directory per run)

Goal: median ours/theirs <= 1.2 (wall time). Each run also reports the CPU seconds the driver,
the JVM and Spark's Python workers used (from /proc), which other load on the machine disturbs
less than wall time.

Same work, checked after the runs and before a ratio is printed: each delta append committed
one version of exactly `--files` files and `--rows` rows, and DuckDB reads from the table's
last version's files and from the last parquet directory the same count, sum(id), sum(x),
min/max(s) and sum of the epoch microseconds of ts; a difference prints ``MISMATCH: ...`` and
exits 1.

    python benchmarks/bench_spark_write.py [--runs 3] [--rows 10000000] [--files 100] [--floor]

``--floor`` adds a third side: a Python data source whose tasks only receive their Arrow
batches, the cost of PySpark's Python write path itself (ours cannot go below it).

Exit status: 0 PASS, 1 FAIL (target missed, or MISMATCH).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.verify import report_mismatch

DATA = ROOT / "benchmarks" / ".data"
RESULTS = DATA / "results"
WORK = DATA / "spark-write"
COLUMNS = [
    "id",
    "id * 0.5 as x",
    "concat('value-', id % 1000) as s",
    "timestamp_micros(1704067200000000 + id * 1000) as ts",
]
AGGREGATE = (
    "count(*), sum(id), sum(x), min(s), max(s), sum(epoch_us(ts)::HUGEINT), count(DISTINCT id)"
)


def tree_cpu_seconds() -> float:
    """CPU seconds used so far by this process and its descendants (the JVM, Spark's Python
    daemon and workers), from /proc: less sensitive to other load on the machine than wall
    time. A descendant that exited counts in its parent's waited-for children's times."""
    tick = os.sysconf("SC_CLK_TCK")
    stats: dict[int, tuple[int, float, float]] = {}  # pid -> (ppid, own, own + waited children)
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            text = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2 :].split()
        own = (int(fields[11]) + int(fields[12])) / tick
        waited = (int(fields[13]) + int(fields[14])) / tick
        stats[int(entry.name)] = (int(fields[1]), own, own + waited)
    tree = {os.getpid()}
    grew = True
    while grew:
        grew = False
        for pid, (ppid, _, _) in stats.items():
            if ppid in tree and pid not in tree:
                tree.add(pid)
                grew = True
    return sum(stats[pid][1 if pid == os.getpid() else 2] for pid in tree if pid in stats)


def duckdb_answer(files: list[str]) -> tuple[Any, ...]:
    import duckdb

    con = duckdb.connect()
    try:
        row = con.execute(f"SELECT {AGGREGATE} FROM read_parquet(?)", [files]).fetchone()
    finally:
        con.close()
    assert row is not None
    return tuple(row)


def last_append(table: Path) -> tuple[int, list[str], int]:
    """The table's last version, the files it added, and the rows its commitInfo counts."""
    from delta_ops.log.reader import read_commit_actions
    from delta_ops.storage import Storage
    from delta_ops.table.snapshot import load_snapshot

    storage = Storage.open(table)
    version = load_snapshot(storage).version
    actions = read_commit_actions(storage, version)
    adds = [storage.table_path(a["add"]["path"]) for a in actions if "add" in a]
    info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
    return version, adds, int(info["operationMetrics"]["numOutputRows"])


def register_floor(spark: Any) -> None:
    """A Python data source named ``arrow_floor`` whose tasks only receive their Arrow batches
    (they write nothing): what any Python data source's write costs before it does anything,
    the floor under ours."""
    from dataclasses import dataclass

    from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage

    @dataclass
    class Received(WriterCommitMessage):
        rows: int

    class FloorWriter(DataSourceArrowWriter):
        def __init__(self, rows: int) -> None:
            self.rows = rows

        def write(self, iterator: Any) -> Received:
            return Received(sum(batch.num_rows for batch in iterator))

        def commit(self, messages: Any) -> None:
            received = sum(m.rows for m in messages)
            assert received == self.rows, f"the floor's tasks received {received} rows"

    class Floor(DataSource):
        @classmethod
        def name(cls) -> str:
            return "arrow_floor"

        def writer(self, schema: Any, overwrite: bool) -> FloorWriter:
            return FloorWriter(int(self.options["rows"]))

    spark.dataSource.register(Floor)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--rows", type=int, default=10_000_000)
    p.add_argument("--files", type=int, default=100)
    p.add_argument("--target", type=float, default=1.2)
    p.add_argument(
        "--floor",
        action="store_true",
        help="also time a Python data source whose tasks only receive the rows (the floor)",
    )
    a = p.parse_args(argv)
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    table = WORK / "delta"

    from delta_ops.spark import get_spark

    spark = get_spark()
    df = spark.range(0, a.rows, numPartitions=a.files).selectExpr(*COLUMNS)
    outputs: list[Path] = []

    def ours() -> None:
        df.write.format("delta").mode("append").save(str(table))

    def theirs() -> None:
        out = WORK / f"parquet-{len(outputs)}"
        outputs.append(out)
        df.write.parquet(str(out))

    sides = {"delta-ops": ours, "parquet": theirs}
    if a.floor:
        register_floor(spark)
        floor_write = df.write.format("arrow_floor").mode("append").option("rows", str(a.rows))
        sides["floor"] = floor_write.save
    times: dict[str, list[float]] = {name: [] for name in sides}
    cpu: dict[str, list[float]] = {name: [] for name in sides}
    for run in range(a.runs + 1):  # the first round warms up
        for name, write in sides.items():
            cpu_before = tree_cpu_seconds()
            start = time.perf_counter()
            write()
            elapsed = time.perf_counter() - start
            used = tree_cpu_seconds() - cpu_before
            if run:
                times[name].append(elapsed)
                cpu[name].append(used)
            label = "warm-up" if not run else f"run {run}"
            print(
                f"  {label:<8} {name:<9} {elapsed:7.3f} s  (CPU {used:6.2f} s, load"
                f" {os.getloadavg()[0]:.1f})",
                flush=True,
            )
        for old in outputs[:-1]:  # keep the disk from filling: only the last one is checked
            shutil.rmtree(old, ignore_errors=True)
    spark.stop()

    version, added, counted = last_append(table)
    parquet_files = sorted(str(f) for f in outputs[-1].glob("part-*.parquet"))
    if version != a.runs or len(added) != a.files or counted != a.rows:
        return report_mismatch(
            "bench_spark_write",
            f"the table is at version {version} (expected {a.runs}); its last append added "
            f"{len(added)} files (expected {a.files}) and counts {counted} rows ({a.rows})",
        )
    if len(parquet_files) != a.files:
        return report_mismatch(
            "bench_spark_write", f"Spark wrote {len(parquet_files)} parquet files, not {a.files}"
        )
    answers = {"delta-ops": duckdb_answer(added), "parquet": duckdb_answer(parquet_files)}
    if answers["delta-ops"] != answers["parquet"] or answers["parquet"][0] != a.rows:
        return report_mismatch(
            "bench_spark_write",
            f"the delta append holds {answers['delta-ops']}, the parquet write "
            f"{answers['parquet']} (count, sum(id), sum(x), min(s), max(s), sum(ts), "
            "distinct ids)",
        )
    print(f"same work: both wrote {a.files} files holding {answers['parquet']}")
    ours_s, theirs_s = (statistics.median(times[n]) for n in ("delta-ops", "parquet"))
    ratio = ours_s / theirs_s
    verdict = "PASS" if ratio <= a.target else "FAIL"
    cpu_ratio = statistics.median(cpu["delta-ops"]) / statistics.median(cpu["parquet"])
    print(f"median: delta-ops {ours_s:.3f} s, spark parquet {theirs_s:.3f} s")
    print(
        f"CPU (driver, JVM, Python workers), median: delta-ops"
        f" {statistics.median(cpu['delta-ops']):.2f} s, parquet"
        f" {statistics.median(cpu['parquet']):.2f} s, ratio {cpu_ratio:.2f}"
    )
    if a.floor:
        print(
            f"floor (a Python data source that only receives the rows): median"
            f" {statistics.median(times['floor']):.3f} s, CPU {statistics.median(cpu['floor']):.2f}"
            f" s; floor/parquet = {statistics.median(times['floor']) / theirs_s:.2f}"
        )
    print(f"ratio ours/parquet = {ratio:.2f} (goal <= {a.target}) {verdict}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "bench_spark_write.json").write_text(
        json.dumps(
            {
                "times": times,
                "cpu": cpu,
                "ratio": ratio,
                "cpu_ratio": cpu_ratio,
                "verdict": verdict,
            },
            indent=2,
        )
        + "\n"
    )
    shutil.rmtree(WORK, ignore_errors=True)
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
