"""Benchmark: Spark reading a Delta table through delta-ops' `delta` source (issue 14), against
Spark's own parquet reader on exactly the live files.

The table: `--files` files of `--rows / --files` rows (id, a double, a string), written by
`deltalake`; no deletion vectors, no column mapping. In one local[2] session, after one warm-up
each, runs alternate:

Ours:   spark.read.format("delta").load(T).agg(sum(id), sum(x), max(s)).collect()
Theirs: spark.read.parquet(*live files).agg(...).collect()

Goal: median ours/theirs <= 1.3.

Same work, checked before timing: the two reads must give the same aggregates (sum(id), sum(x),
max(s), count) over the same live files (delta-ops' snapshot and deltalake list the same ones);
a difference prints ``MISMATCH: ...`` and exits 1.

    python benchmarks/bench_spark_read.py [--runs 5] [--rows 1000000] [--files 200]

Exit status: 0 PASS, 1 FAIL (target missed, or MISMATCH).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.verify import report_mismatch

DATA = ROOT / "benchmarks" / ".data"
RESULTS = DATA / "results"


def build(table: Path, rows: int, files: int) -> None:
    import pyarrow as pa
    from deltalake import write_deltalake

    per_file = rows // files
    for i in range(files):
        ids = pa.array(range(i * per_file, (i + 1) * per_file), pa.int64())
        batch = pa.table(
            {
                "id": ids,
                "x": pa.array([v * 0.5 for v in range(per_file)], pa.float64()),
                "s": pa.array([f"value-{v % 1000}" for v in range(per_file)]),
            }
        )
        write_deltalake(str(table), batch, mode="append")
    (table / "BENCH_SPEC").write_text(json.dumps({"rows": rows, "files": files}))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--files", type=int, default=200)
    p.add_argument("--target", type=float, default=1.3)
    a = p.parse_args(argv)
    table = DATA / f"spark-read-{a.rows}x{a.files}"
    if not (table / "BENCH_SPEC").exists():
        print(f"building {table} ...", flush=True)
        build(table, a.rows, a.files)

    import pyarrow as pa
    from deltalake import DeltaTable
    from pyspark.sql import functions as F

    from delta_ops.spark import get_spark
    from delta_ops.table.snapshot import load_snapshot

    live_paths = load_snapshot(table).file_index.column("path").to_pylist()
    theirs_paths = pa.table(DeltaTable(str(table)).get_add_actions())["path"].to_pylist()
    if sorted(live_paths) != sorted(theirs_paths) or len(live_paths) != a.files:
        return report_mismatch(
            "bench_spark_read",
            f"delta-ops lists {len(live_paths)} live files, deltalake {len(theirs_paths)} "
            f"(expected {a.files}, the same paths)",
        )
    spark = get_spark()
    live = [str(table / p) for p in live_paths]
    aggregates = [F.sum("id"), F.sum("x"), F.max("s"), F.count("*")]
    sides = {
        "delta-ops": lambda: spark.read.format("delta").load(str(table)).agg(*aggregates).collect(),
        "parquet": lambda: spark.read.parquet(*live).agg(*aggregates).collect(),
    }
    answers = {name: run() for name, run in sides.items()}  # warm-up, and the same answer
    if answers["delta-ops"] != answers["parquet"]:
        spark.stop()
        return report_mismatch(
            "bench_spark_read",
            f"delta-ops' source answers {answers['delta-ops']}, the live parquet files "
            f"{answers['parquet']}",
        )
    print(f"same work: both reads answer {answers['delta-ops']}")
    times: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(a.runs):
        for name, run in sides.items():
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)
            print(f"  {name:<9} {times[name][-1]:7.3f} s", flush=True)
    ours, theirs = (statistics.median(times[n]) for n in ("delta-ops", "parquet"))
    ratio = ours / theirs
    verdict = "PASS" if ratio <= a.target else "FAIL"
    print(f"median: delta-ops {ours:.3f} s, spark parquet {theirs:.3f} s")
    print(f"ratio ours/parquet = {ratio:.2f} (target <= {a.target}) {verdict}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "bench_spark_read.json").write_text(
        json.dumps({"times": times, "ratio": ratio, "verdict": verdict}, indent=2) + "\n"
    )
    spark.stop()
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
