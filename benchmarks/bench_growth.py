"""Benchmark: how loading a table grows with its file count, delta-ops against delta-rs.

Synthetic tables of 10,000, 100,000 and 1,000,000 live files (commits of 100 adds with stats,
no removes), each checkpointed at its last version by delta-ops (untimed, once) so that both
tools load a classic checkpoint, as they would a real table of that size; 10,000,000 files
(``--sizes ... 10000000``) are made directly as a checkpoint with the same schema and stats. For each size, fresh
processes load the latest state (ours: `load_snapshot`; theirs: `DeltaTable` + `file_uris()`),
alternating after one warm-up; the median wall time and the highest peak RSS are plotted on
log-log axes, so the growth rate shows, not just one point.

Same work, checked per size before its figures are printed: every run of each side must print
the same ``version num_files`` with ``num_files`` the size, and (untimed) both libraries must
load the same state: version, protocol, metaData and live files (path, size, modification
time, ``numRecords``). A difference prints ``MISMATCH: ...`` and exits 1 (no plot is drawn).

Writes `benchmarks/results/growth.png` (linked from BENCHMARKS.md; `--plot` draws it elsewhere,
e.g. for a quick check at small sizes) and prints the table.

    python benchmarks/bench_growth.py [--runs 2] [--sizes 10000 100000 1000000 10000000]
        [--plot benchmarks/results/growth.png]

Exit status: 0 (every size measured and verified), 1 MISMATCH or a side failed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.bench_load import OURS, THEIRS
from benchmarks.harness import Measurement, compare
from benchmarks.synthetic import ensure_synthetic_table
from benchmarks.verify import Mismatch, printed, readers_agree, report_mismatch

DATA = ROOT / "benchmarks" / ".data"
PLOT = ROOT / "benchmarks" / "results" / "growth.png"
ADDS_PER_COMMIT = 100


#: above this many files the table is made directly as a checkpoint (bench_big_checkpoint's
#: maker: the same 5-column schema with full stats, 1,000 partitions), not from 100k commits
DIRECT_ABOVE = 1_000_000


def prepare(files: int) -> Path:
    """The synthetic table with `files` live files, checkpointed at its latest version."""
    if files > DIRECT_ABOVE:
        from benchmarks.bench_big_checkpoint import prepare as make_checkpointed

        return make_checkpointed(files, commits=0, churn=0)
    table = DATA / f"growth-{files}"
    ensure_synthetic_table(
        table,
        commits=files // ADDS_PER_COMMIT,
        adds_per_commit=ADDS_PER_COMMIT,
        remove_every=0,
        seed=0,
    )
    version = files // ADDS_PER_COMMIT - 1
    if not (table / "_delta_log" / f"{version:020d}.checkpoint.parquet").exists():
        from delta_ops.ops.checkpoint import checkpoint

        checkpoint(str(table))
    return table


def plot(rows: list[dict[str, float]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = [r["files"] for r in rows]
    figure, (time_axis, memory_axis) = plt.subplots(1, 2, figsize=(11, 4.2))
    for key, label, style in (("ours", "delta-ops", "o-"), ("theirs", "delta-rs", "s--")):
        time_axis.plot(sizes, [r[f"{key}_s"] for r in rows], style, label=label)
        memory_axis.plot(sizes, [r[f"{key}_mb"] for r in rows], style, label=label)
    for axis, unit in ((time_axis, "wall time (s)"), (memory_axis, "peak RSS (MB)")):
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_xlabel("live files (checkpointed table)")
        axis.set_ylabel(unit)
        axis.grid(True, which="both", alpha=0.3)
        axis.legend()
    time_axis.set_title("load the latest snapshot")
    memory_axis.set_title("peak memory of the loading process")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--plot", type=Path, default=PLOT, help="where to draw the plot")
    args = parser.parse_args(argv)
    try:
        rows = measure_sizes(args.sizes, args.runs)
    except Mismatch as exc:
        return report_mismatch("bench_growth", exc)
    plot(rows, args.plot)
    (DATA / "results").mkdir(parents=True, exist_ok=True)
    (DATA / "results" / "bench_growth.json").write_text(json.dumps(rows, indent=2) + "\n")
    print(f"plot: {args.plot}")
    return 0


def same_work(files: int, table: Path, ours: Measurement, theirs: Measurement) -> str:
    """Both sides printed one `version num_files` line with `files` files in every run, and
    both libraries load the same state. Returns that line; raises Mismatch."""
    lines = {label: set(printed(m)) for label, m in (("delta-ops", ours), ("delta-rs", theirs))}
    if len(lines["delta-ops"] | lines["delta-rs"]) != 1:
        raise Mismatch(
            f"{files} files: delta-ops printed {lines['delta-ops']}, delta-rs {lines['delta-rs']}"
        )
    line = lines["delta-ops"].pop()
    if line.split()[-1:] != [str(files)]:
        raise Mismatch(f"{files} files: both printed {line!r} (version, files)")
    readers_agree(table, DATA / "growth-verify")
    return line


def measure_sizes(sizes: list[int], runs: int) -> list[dict[str, float]]:
    """Measure and verify each size; raises Mismatch."""
    rows = []
    for files in sizes:
        table = prepare(files)
        result = compare(
            [sys.executable, "-c", OURS, str(table)],
            [sys.executable, "-c", THEIRS, str(table)],
            runs=runs,
            warmup=1,
        )
        ours, theirs = result.ours, result.theirs
        if ours.error or theirs.error:
            raise SystemExit(f"{files} files: {ours.error or theirs.error}")
        line = same_work(files, table, ours, theirs)
        print(f"same work: every run of both printed {line!r}; both load the same state")
        rows.append(
            {
                "files": files,
                "ours_s": ours.median_wall_s,
                "theirs_s": theirs.median_wall_s,
                "ours_mb": ours.max_rss_mb,
                "theirs_mb": theirs.max_rss_mb,
            }
        )
        print(
            f"{files:>9,} files: delta-ops {ours.median_wall_s:7.3f} s {ours.max_rss_mb:7.0f} MB"
            f" | delta-rs {theirs.median_wall_s:7.3f} s {theirs.max_rss_mb:7.0f} MB"
            f" | ratio {ours.median_wall_s / theirs.median_wall_s:.2f} time,"
            f" {ours.max_rss_mb / theirs.max_rss_mb:.2f} memory",
            flush=True,
        )
    return rows


if __name__ == "__main__":
    sys.exit(main())
