"""Benchmark: delta-ops against Delta Spark, the reference engine (and delta-rs where it can),
on the same generated tables (issue 47).

Operations (`--ops`, all by default), each on a fresh copy of its pristine table per side and run
(log copied, data files hard-linked; built once under `benchmarks/.data/`):

| op | table | delta-ops | Delta Spark | delta-rs |
|---|---|---|---|---|
| checkpoint | synthetic log of `--checkpoint-adds` adds (50 per commit, every 5th commit removes) | `checkpoint` | `DeltaLog.forTable(...).checkpoint()` | `create_checkpoint()` |
| vacuum | the same shape with a real file per add, 1% orphans, all 30 days old | `vacuum --retention 0s --force --in-flight-grace 0s --mode full` | `VACUUM ... RETAIN 0 HOURS` | `vacuum(retention_hours=0, full=True, ...)` |
| compact | `--compact-files` small files in 4 partitions (`bench_compact.py`'s) | `compact --target-size 128MB` | `OPTIMIZE` (maxFileSize 128 MB) | `optimize.compact` |
| zorder | `--zorder-rows` rows in `--zorder-files` files (`bench_cluster.py`'s) | `compact --zorder-by x,y --target-size 32MB` | `OPTIMIZE ... ZORDER BY (x, y)` (maxFileSize 32 MB) | `optimize.z_order` |
| purge | `--purge-rows` rows in `--purge-files` files written by Delta Spark with deletion vectors, then 10% of rows deleted | `purge` | `REORG TABLE ... APPLY (PURGE)` | none |
| restore | the compact table, to half its versions | `restore --version V` | `RESTORE TABLE ... TO VERSION AS OF V` | `restore(V)` |
| cleanup | `bench_cleanup.py`'s log (`--cleanup-commits`, a checkpoint every 100, 60 days old) | `cleanup --retention '30 days'` | `cleanUpExpiredLogs` (30 days, Delta's default) | `cleanup_metadata()` |

Timing. delta-ops and delta-rs run as fresh processes (interpreter start-up and imports included,
as in every benchmark here; peak memory is `ru_maxrss`, or the process tree's summed RSS where
higher). Delta Spark runs in one server (`spark_reference_server.py`, under the reference
virtualenv; `SPARK_CONF` below), started once: its start-up is reported apart, the session is
warmed on a throwaway table by every operation once, and each operation is timed around the JVM
call alone, after
`DeltaLog.clearCache()` (the table is loaded from storage in the timed call, as ours is). Delta
Spark's peak memory is the JVM's `VmHWM`, reset before each call.

Same work, checked after every run before any ratio is printed (`MISMATCH: ...` and exit 1):
checkpoint: each side's checkpoint alone is loaded by deltalake as the JSON log's state, and
both sides' checkpoints hold the same tombstones and other actions (`bench_checkpoint.py`'s
check); vacuum: exactly the live files are left on disk; compact: one file per partition and
every id once, in its partition (deltalake); zorder: exactly the rows written, every file
rewritten (deltalake); purge: Delta Spark reads the same row count and sum of ids from every
side's result, and no live file keeps a deletion vector; restore: the live files are exactly the
version's (deltalake); cleanup: every side deleted the same set of log files and added none.

    python benchmarks/bench_delta_spark.py [--runs 1] [--ops checkpoint,vacuum,...]
        [--checkpoint-adds 20000] [--vacuum-adds 10000] [--compact-files 10000]
        [--zorder-rows 1000000 --zorder-files 100] [--purge-rows 1000000 --purge-files 100]
        [--cleanup-commits 2000] [--driver-memory 1g] [--full]

`--full` takes the issue's sizes: 100k-action checkpoint, 100k-file vacuum, 10k-file compaction,
10M-row Z-order in 1,000 files. Every JVM start must hold `flock /tmp/spark.lock` on a shared
machine (and the benchmark `flock /tmp/bench.lock`).

Exit status: 0 every goal met (time and memory <= 0.5x Delta Spark), 1 a goal missed or
MISMATCH, 3 a side failed.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import bench_checkpoint, bench_cleanup, bench_cluster, bench_compact, bench_vacuum
from benchmarks.harness import RunResult, run_fresh
from benchmarks.resident_cli import ResidentCli
from benchmarks.spark_reference import SparkReference
from benchmarks.synthetic import ensure_synthetic_table
from benchmarks.verify import Mismatch, report_mismatch, set_difference

DATA = ROOT / "benchmarks" / ".data"
WORK = DATA / "dspark-work"
RESULTS = DATA / "results"
GOAL = 0.5
PY = sys.executable
OURS = [PY, "-m", "delta_ops.cli"]
#: Delta Spark's session beyond Spark's and Delta's defaults: tasks sized for 2 cores (Spark's
#: 200 shuffle partitions and VACUUM's 10,000 listing tasks cost it tens of seconds per call
#: on tables this size; 2-4 tasks per core is Spark's tuning guide's advice)
SPARK_CONF = {
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.sources.parallelPartitionDiscovery.parallelism": "8",
}

VACUUM_THEIRS = """
import sys
from deltalake import DeltaTable
print(len(DeltaTable(sys.argv[1]).vacuum(retention_hours=0, dry_run=False, full=True,
                                         enforce_retention_duration=False)))
"""
RESTORE_THEIRS = """
import sys
from deltalake import DeltaTable
print(DeltaTable(sys.argv[1]).restore(int(sys.argv[2])))
"""


@dataclass
class Side:
    """One engine's runs of one operation: wall seconds and peak MB per run."""

    label: str
    walls: list[float] = field(default_factory=list)
    peaks: list[float] = field(default_factory=list)
    note: str = ""

    def wall(self) -> float:
        return statistics.median(self.walls)

    def peak(self) -> float:
        return max(self.peaks)


@dataclass
class Op:
    """An operation: how to build its pristine table, copy it, run each side and check."""

    name: str
    pristine: Path
    copy: Callable[[Path, Path], None]
    ours: list[str]  # WORK stands for the working copy
    theirs: list[str] | None  # delta-rs, or None
    spark: Callable[[SparkReference, Path], float]
    check: Callable[[str, Path], str]  # raises Mismatch; returns what it saw
    spark_conf: dict[str, str] = field(default_factory=dict)


def copy_log(pristine: Path, work: Path) -> None:
    bench_checkpoint.restore(pristine, work)


def copy_table(pristine: Path, work: Path) -> None:
    bench_vacuum.restore(pristine, work)  # log copied, data files hard-linked, spec left out


def fresh(cmd: list[str], work: Path) -> RunResult:
    result = run_fresh([str(work) if c == "WORK" else c for c in cmd], timeout=3600, tree=True)
    if not result.ok:
        raise RuntimeError(result.error_summary())
    return result


def live_paths(table: Path, version: int | None = None) -> set[str]:
    import pyarrow as pa
    from deltalake import DeltaTable

    dt = DeltaTable(str(table), version=version)
    return set(pa.table(dt.get_add_actions(flatten=True))["path"].to_pylist())


# ---------------------------------------------------------------------------- the operations
def op_checkpoint(a: argparse.Namespace) -> Op:
    commits = max(1, a.checkpoint_adds // 50)
    pristine = DATA / f"dspark-checkpoint-{commits}x50"
    spec = ensure_synthetic_table(pristine, commits=commits, adds_per_commit=50, remove_every=5)
    checker = bench_checkpoint.Checker(pristine, spec["version"])

    def check(label: str, work: Path) -> str:
        checker.check(label, work)
        return f"checkpoint of v{spec['version']} read back alone by deltalake as the log's state"

    return Op(
        "checkpoint",
        pristine,
        copy_log,
        [*OURS, "checkpoint", "WORK", "--json"],
        [PY, "-c", bench_checkpoint.THEIRS, "WORK"],
        lambda spark, work: spark.checkpoint(work),
        check,
    )


def op_vacuum(a: argparse.Namespace) -> Op:
    commits = max(1, a.vacuum_adds // 50)
    orphans = max(1, a.vacuum_adds // 100)
    pristine = DATA / f"dspark-vacuum-{commits}x50-o{orphans}"
    spec = ensure_synthetic_table(
        pristine,
        commits=commits,
        adds_per_commit=50,
        remove_every=5,
        seed=0,
        with_data_files=True,
        orphans=orphans,
        age_days=30.0,
    )
    live = frozenset(live_paths(pristine))
    expected = spec["num_tombstones"] + spec["num_orphans"]

    def check(label: str, work: Path) -> str:
        left = set(bench_vacuum.data_files(work))
        difference = set_difference(f"files left by {label}", left, "live files", live)
        if difference:
            raise Mismatch(difference)
        return f"{expected} files deleted, the {len(live)} live files left"

    return Op(
        "vacuum",
        pristine,
        copy_table,
        [*OURS, "vacuum", "WORK", "--retention", "0s", "--force", "--in-flight-grace", "0s"]
        + ["--mode", "full", "--json"],
        [PY, "-c", VACUUM_THEIRS, "WORK"],
        lambda spark, work: spark.sql(f"VACUUM delta.`{work}` RETAIN 0 HOURS"),
        check,
    )


def compact_pristine(files: int) -> tuple[Path, int]:
    pristine = DATA / f"compact-{files}x10"
    if not (pristine / "BENCH_SPEC").exists():
        print(f"building {pristine} ({files} small files; once) ...", flush=True)
        shutil.rmtree(pristine, ignore_errors=True)
        bench_compact.build(pristine, files, 10)
    return pristine, (files // bench_compact.PARTITIONS) * bench_compact.PARTITIONS * 10


def op_compact(a: argparse.Namespace) -> Op:
    pristine, rows = compact_pristine(a.compact_files)

    def check(label: str, work: Path) -> str:
        bench_compact.check(label, work, rows)
        return f"one file per partition ({bench_compact.PARTITIONS}), ids 0..{rows - 1} once each"

    return Op(
        "compact",
        pristine,
        bench_compact.restore,
        [*OURS, "compact", "WORK", "--target-size", "128MB", "--json"],
        [PY, "-c", bench_compact.THEIRS, "WORK"],
        lambda spark, work: spark.sql(f"OPTIMIZE delta.`{work}`"),
        check,
        {"spark.databricks.delta.optimize.maxFileSize": str(128 * 1024 * 1024)},
    )


def op_zorder(a: argparse.Namespace) -> Op:
    pristine = DATA / f"cluster-{a.zorder_rows}x{a.zorder_files}"
    if not (pristine / "BENCH_SPEC").exists():
        print(f"building {pristine} ({a.zorder_rows} rows; once) ...", flush=True)
        shutil.rmtree(pristine, ignore_errors=True)
        bench_cluster.build(pristine, a.zorder_rows, a.zorder_files)
    expected = bench_cluster._sorted_rows(pristine)
    target = 32 * 1024 * 1024

    def check(label: str, work: Path) -> str:
        bench_cluster.check(label, work, pristine, expected)
        return f"the {expected.num_rows} rows written, every file rewritten ({len(live_paths(work))} files)"

    return Op(
        "zorder",
        pristine,
        bench_cluster.restore,
        [*OURS, "compact", "WORK", "--zorder-by", "x,y", "--target-size", "32MB", "--json"],
        [PY, "-c", bench_cluster.THEIRS, "WORK", str(target)],
        lambda spark, work: spark.sql(f"OPTIMIZE delta.`{work}` ZORDER BY (x, y)"),
        check,
        {"spark.databricks.delta.optimize.maxFileSize": str(target)},
    )


def op_purge(a: argparse.Namespace, spark: SparkReference) -> Op:
    pristine = DATA / f"dspark-purge-{a.purge_rows}x{a.purge_files}"
    n, f = a.purge_rows, a.purge_files
    if not (pristine / "BENCH_SPEC").exists():
        print(f"building {pristine} with Delta Spark ({n} rows, {f} files; once) ...", flush=True)
        shutil.rmtree(pristine, ignore_errors=True)
        table = f"delta.`{pristine}`"
        spark.sql(
            f"CREATE TABLE {table} (id BIGINT, x BIGINT, s STRING) USING delta "
            "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')"
        )
        spark.sql(
            f"INSERT INTO {table} SELECT id, (id * 7919) % 1000003, concat('s', id % 5000) "
            f"FROM range(0, {n}, 1, {f})"
        )
        spark.sql(f"DELETE FROM {table} WHERE id % 10 = 0")
        (pristine / "BENCH_SPEC").write_text(json.dumps({"rows": n, "files": f}))
    m = -(-n // 10)  # ids 0, 10, 20, ... deleted
    rows, total = n - m, n * (n - 1) // 2 - 10 * (m * (m - 1) // 2)

    def check(label: str, work: Path) -> str:
        from delta_ops.table.snapshot import load_snapshot

        got = spark.summary(work)
        if (got["rows"], got["sum_id"]) != (rows, total):
            raise Mismatch(
                f"Delta Spark reads {got['rows']} rows (sum {got['sum_id']}) after {label}'s purge, "
                f"expected {rows} (sum {total})"
            )
        files = load_snapshot(str(work)).files
        with_dv = files.num_rows - files["deletionVector"].null_count
        if with_dv:
            raise Mismatch(f"{label} left {with_dv} live files with a deletion vector")
        return f"{rows} rows (Delta Spark's read), no deletion vector, {got['num_files']} files"

    return Op(
        "purge",
        pristine,
        bench_compact.restore,
        [*OURS, "purge", "WORK", "--json"],
        None,
        lambda spark, work: spark.sql(f"REORG TABLE delta.`{work}` APPLY (PURGE)"),
        check,
    )


def op_restore(a: argparse.Namespace) -> Op:
    pristine, _ = compact_pristine(a.compact_files)
    from deltalake import DeltaTable

    version = DeltaTable(str(pristine)).version() // 2
    expected = live_paths(pristine, version)

    def check(label: str, work: Path) -> str:
        difference = set_difference(
            f"live files after {label}'s restore", live_paths(work), f"v{version}'s", expected
        )
        if difference:
            raise Mismatch(difference)
        return f"the {len(expected)} live files of v{version}"

    return Op(
        "restore",
        pristine,
        bench_compact.restore,
        [*OURS, "restore", "WORK", "--version", str(version), "--json"],
        [PY, "-c", RESTORE_THEIRS, "WORK", str(version)],
        lambda spark, work: spark.sql(f"RESTORE TABLE delta.`{work}` TO VERSION AS OF {version}"),
        check,
    )


def op_cleanup(a: argparse.Namespace) -> Op:
    pristine = DATA / f"dspark-cleanup-{a.cleanup_commits}"
    bench_cleanup.prepare(pristine, a.cleanup_commits, 50, 5, 100)
    before = set(os.listdir(pristine / "_delta_log"))
    deleted: dict[str, frozenset[str]] = {}

    def check(label: str, work: Path) -> str:
        now = set(os.listdir(work / "_delta_log"))
        if now - before:
            raise Mismatch(f"{label}'s cleanup added log files: {sorted(now - before)[:3]}")
        gone = frozenset(before - now)
        for other, theirs in deleted.items():
            difference = set_difference(f"deleted by {label}", gone, f"by {other}", theirs)
            if difference:
                raise Mismatch(difference)
        deleted[label] = gone
        return f"{len(gone)} log files deleted"

    return Op(
        "cleanup",
        pristine,
        bench_cleanup.restore,
        [*OURS, "cleanup", "WORK", "--retention", "30 days", "--json"],
        [PY, "-c", bench_cleanup.THEIRS, "WORK"],
        lambda spark, work: spark.cleanup(work),
        check,
    )


# ---------------------------------------------------------------------------- running
def warm(spark: SparkReference) -> None:
    """Every operation once on a throwaway table: classes loaded, the JIT warmed."""
    path = WORK / "warm"
    shutil.rmtree(path, ignore_errors=True)
    t = f"delta.`{path}`"
    spark.sql(
        f"CREATE TABLE {t} (id BIGINT, x BIGINT, y DOUBLE) USING delta "
        "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')"
    )
    for i in range(12):
        spark.sql(
            f"INSERT INTO {t} SELECT id, id % 97, id / 3.0 FROM range({i * 1000}, {(i + 1) * 1000}, 1, 4)"
        )
    spark.sql(f"DELETE FROM {t} WHERE id % 10 = 0")
    spark.sql(f"REORG TABLE {t} APPLY (PURGE)")
    spark.sql(f"OPTIMIZE {t}")
    spark.sql(f"OPTIMIZE {t} ZORDER BY (x, y)")
    spark.sql(f"RESTORE TABLE {t} TO VERSION AS OF 5")
    spark.checkpoint(path)
    spark.sql(f"VACUUM {t} RETAIN 0 HOURS")
    spark.cleanup(path)
    spark.summary(path)
    shutil.rmtree(path, ignore_errors=True)


RESIDENT = "delta-ops resident"


def _resident_argv(op: Op, work: Path) -> list[str]:
    return [str(work) if c == "WORK" else c for c in op.ours[len(OURS) :]]


def run_op(op: Op, spark: SparkReference, runs: int, resident: ResidentCli) -> dict[str, Side]:
    sides = {
        "delta-ops": Side("delta-ops"),
        RESIDENT: Side(RESIDENT),
        "Delta Spark": Side("Delta Spark"),
    }
    if op.theirs is not None:
        sides["delta-rs"] = Side("delta-rs")
    for key, value in op.spark_conf.items():
        spark.sql(f"SET {key} = {value}")
    warm_copy = WORK / f"{op.name}-resident-warm"  # the resident's warm-up, as Spark's warm()
    shutil.rmtree(warm_copy, ignore_errors=True)
    op.copy(op.pristine, warm_copy)
    resident.run(_resident_argv(op, warm_copy))
    shutil.rmtree(warm_copy, ignore_errors=True)
    for run in range(runs):
        for label, side in sides.items():
            work = WORK / f"{op.name}-{label.replace(' ', '-')}-{run}"
            shutil.rmtree(work, ignore_errors=True)
            op.copy(op.pristine, work)
            if label == "Delta Spark":
                spark.clear_cache()
                spark.clear_peak()
                wall = op.spark(spark, work)
                side.walls.append(wall)
                side.peaks.append(spark.peak_rss_mb())
            elif label == RESIDENT:
                _, wall, peak = resident.run(_resident_argv(op, work))
                side.walls.append(wall)
                side.peaks.append(peak)
            else:
                cmd = op.ours if label == "delta-ops" else op.theirs
                assert cmd is not None
                result = fresh(cmd, work)
                side.walls.append(result.wall_s)
                tree = result.tree_rss_mb
                side.peaks.append(max(result.max_rss_mb, 0.0 if math.isnan(tree) else tree))
            side.note = op.check(label, work)
            print(
                f"  {op.name:<10} {label:<11} run {run + 1}: {side.walls[-1]:8.3f} s "
                f"{side.peaks[-1]:7.0f} MB  ({side.note})",
                flush=True,
            )
            shutil.rmtree(work, ignore_errors=True)
    for key in op.spark_conf:
        spark.sql(f"RESET {key}")
    return sides


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=1)
    p.add_argument("--ops", default="checkpoint,vacuum,compact,zorder,purge,restore,cleanup")
    p.add_argument("--checkpoint-adds", type=int, default=20_000)
    p.add_argument("--vacuum-adds", type=int, default=10_000)
    p.add_argument("--compact-files", type=int, default=10_000)
    p.add_argument("--zorder-rows", type=int, default=1_000_000)
    p.add_argument("--zorder-files", type=int, default=100)
    p.add_argument("--purge-rows", type=int, default=1_000_000)
    p.add_argument("--purge-files", type=int, default=100)
    p.add_argument("--cleanup-commits", type=int, default=2000)
    p.add_argument("--driver-memory", default="1g", help="Delta Spark's (Spark's default: 1g)")
    p.add_argument("--full", action="store_true", help="the issue's sizes")
    a = p.parse_args(argv)
    if a.full:
        a.checkpoint_adds, a.vacuum_adds, a.compact_files = 100_000, 100_000, 10_000
        a.zorder_rows, a.zorder_files = 10_000_000, 1000
    try:
        return run(a)
    except Mismatch as exc:
        return report_mismatch("bench_delta_spark", exc)


def run(a: argparse.Namespace) -> int:
    names = [n.strip() for n in a.ops.split(",") if n.strip()]
    known = {"checkpoint", "vacuum", "compact", "zorder", "purge", "restore", "cleanup"}
    if set(names) - known:
        print(f"error: unknown --ops {sorted(set(names) - known)}; known: {sorted(known)}")
        return 2
    WORK.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()
    print(
        f"load average at start: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} on {os.cpu_count()} cores"
    )
    spark = SparkReference(driver_memory=a.driver_memory, conf=SPARK_CONF)
    resident = ResidentCli()
    try:
        print(f"Delta Spark ({spark.package}): start-up {spark.startup_s:.1f} s (not counted)")
        print(f"  session: local[2], driver memory {a.driver_memory}, {SPARK_CONF}")
        spark.clear_peak()
        warm(spark)
        print(
            f"Delta Spark warmed on a throwaway table; JVM peak so far {spark.peak_rss_mb():.0f} MB"
        )
        builders: dict[str, Callable[[], Op]] = {
            "checkpoint": lambda: op_checkpoint(a),
            "vacuum": lambda: op_vacuum(a),
            "compact": lambda: op_compact(a),
            "zorder": lambda: op_zorder(a),
            "purge": lambda: op_purge(a, spark),
            "restore": lambda: op_restore(a),
            "cleanup": lambda: op_cleanup(a),
        }
        results: dict[str, dict[str, Side]] = {}
        for name in names:
            try:
                results[name] = run_op(builders[name](), spark, a.runs, resident)
            except RuntimeError as exc:  # a side failed: say which, go on
                print(f"  {name}: FAILED: {exc}", flush=True)
        startup = spark.startup_s
    finally:
        spark.close()
        resident.close()
    return report(results, startup, a)


def report(results: dict[str, dict[str, Side]], startup: float, a: argparse.Namespace) -> int:
    """The table: every side's median wall and peak, ours over Delta Spark's fresh and
    resident (the goal is judged on the resident ratios: start-up excluded on both sides)."""
    print()
    print(
        f"{'op':<11}{'delta-ops':>20}{'resident':>20}{'delta-rs':>20}{'Delta Spark':>20}"
        f"{'fresh/Spark':>13}{'resident/Spark':>16}{'mem':>7}  goal <= {GOAL}"
    )
    status = 0
    summary: dict = {"startup_s": startup, "args": vars(a), "ops": {}}
    for name, sides in results.items():
        ours, resident, spark = sides["delta-ops"], sides[RESIDENT], sides["Delta Spark"]
        theirs = sides.get("delta-rs")
        fresh_ratio = ours.wall() / spark.wall()
        wall_ratio, mem_ratio = resident.wall() / spark.wall(), resident.peak() / spark.peak()
        met = wall_ratio <= GOAL and mem_ratio <= GOAL
        status = status or (0 if met else 1)

        def cell(side: Side | None) -> str:
            return "n/a" if side is None else f"{side.wall():.3f} s/{side.peak():.0f} MB"

        print(
            f"{name:<11}{cell(ours):>20}{cell(resident):>20}{cell(theirs):>20}{cell(spark):>20}"
            f"{fresh_ratio:>13.3f}{wall_ratio:>16.3f}{mem_ratio:>7.3f}  "
            f"{'met' if met else 'NOT met'}"
        )
        summary["ops"][name] = {
            label: {"walls": s.walls, "peaks_mb": s.peaks, "checked": s.note}
            for label, s in sides.items()
        } | {"fresh_wall_ratio": fresh_ratio, "wall_ratio": wall_ratio, "mem_ratio": mem_ratio}
    print(f"Delta Spark's start-up (JVM, jars, session), excluded above: {startup:.1f} s")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "bench_delta_spark.json").write_text(json.dumps(summary, indent=2) + "\n")
    if len(results) < len([n for n in a.ops.split(",") if n.strip()]):
        return 3
    return status


if __name__ == "__main__":
    sys.exit(main())
