"""Benchmark: compaction of 10,000 small files (issue 18), against delta-rs' `optimize.compact`.

The table: `--files` appends by `deltalake` of `--rows` rows each into 4 partitions (so 2,500
small files per partition), no checkpoints. Before every run (untimed) the working copy is
rebuilt from the pristine table (hard links for data files, a copy of the log). Both sides
compact to the same 128 MB target.

Same work, checked by ``deltalake`` after every run before any ratio is printed: exactly one
live file per partition, and the table's rows are exactly the rows written (every id once, each
in its partition). A difference prints ``MISMATCH: ...`` and exits 1.

Ours:   ``delta-ops compact WORK --target-size 128MB --json`` (``python -m delta_ops.cli``)
Theirs: ``DeltaTable(WORK).optimize.compact(target_size=128 * 1024**2)``

Goal: median wall ours/theirs <= 0.7; peak RSS reported.

    python benchmarks/bench_compact.py [--runs 3] [--files 10000] [--rows 10]

Exit status: 0 PASS, 1 FAIL (target missed, or MISMATCH), 3 ours failed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.harness import Comparison, Measurement, evaluate, format_result, run_fresh
from benchmarks.verify import Mismatch, report_mismatch

DATA = ROOT / "benchmarks" / ".data"
RESULTS = DATA / "results"
PARTITIONS = 4

THEIRS = """
import sys
from deltalake import DeltaTable
print(DeltaTable(sys.argv[1]).optimize.compact(target_size=128 * 1024 * 1024))
"""


def build(pristine: Path, files: int, rows: int) -> None:
    """`files` small appends, batched so that each commit adds one file per partition."""
    import pyarrow as pa
    from deltalake import write_deltalake

    per_commit = PARTITIONS
    next_id = 0
    for _ in range(files // per_commit):
        ids = list(range(next_id, next_id + rows * per_commit))
        next_id += len(ids)
        batch = pa.table(
            {"id": pa.array(ids, pa.int64()), "part": pa.array([i % PARTITIONS for i in ids])}
        )
        write_deltalake(str(pristine), batch, mode="append", partition_by=["part"])
    (pristine / "BENCH_SPEC").write_text(json.dumps({"files": files, "rows": rows}))


def restore(pristine: Path, work: Path) -> None:
    if work.exists():
        shutil.rmtree(work)
    shutil.copytree(pristine / "_delta_log", work / "_delta_log")
    for dirpath, _, filenames in os.walk(pristine):
        rel = os.path.relpath(dirpath, pristine)
        if rel.startswith("_delta_log"):
            continue
        (work / rel).mkdir(parents=True, exist_ok=True)
        for name in filenames:
            if name != "BENCH_SPEC":
                os.link(os.path.join(dirpath, name), work / rel / name)


def check(label: str, work: Path, expected_rows: int) -> None:
    """One live file per partition, and every id written exactly once, in its partition (read
    by deltalake). Raises Mismatch."""
    import numpy as np
    import pyarrow as pa
    from deltalake import DeltaTable

    table = DeltaTable(str(work))
    actions = pa.table(table.get_add_actions(flatten=True))
    parts = sorted(str(p) for p in actions["partition.part"].to_pylist())
    if parts != [str(p) for p in range(PARTITIONS)]:
        raise Mismatch(
            f"{label} left {len(parts)} live files in partitions {parts[:8]}, "
            f"expected one in each of {PARTITIONS}"
        )
    rows = table.to_pyarrow_table(columns=["id", "part"])
    ids = rows["id"].to_numpy()
    order = np.argsort(ids, kind="stable")
    if len(ids) != expected_rows or not np.array_equal(ids[order], np.arange(expected_rows)):
        missing = np.setdiff1d(np.arange(expected_rows), ids)
        raise Mismatch(
            f"{label} left {len(ids)} rows with {len(np.unique(ids))} distinct ids, expected ids "
            f"0..{expected_rows - 1} once each"
            + (f" (e.g. {int(missing[0])} missing)" if len(missing) else "")
        )
    misplaced = np.flatnonzero(rows["part"].to_numpy()[order] != ids[order] % PARTITIONS)
    if len(misplaced):
        raise Mismatch(f"{label} moved id {int(misplaced[0])} out of its partition")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--files", type=int, default=10_000)
    p.add_argument("--rows", type=int, default=10)
    p.add_argument("--target-wall", type=float, default=0.5)  # issue 35
    a = p.parse_args(argv)
    try:
        return run(a)
    except Mismatch as exc:
        return report_mismatch("bench_compact", exc)


def run(a: argparse.Namespace) -> int:
    """The benchmark; raises Mismatch when a side did not do the expected work."""
    pristine = DATA / f"compact-{a.files}x{a.rows}"
    if not (pristine / "BENCH_SPEC").exists():
        print(f"building {pristine} ({a.files} small files; once) ...", flush=True)
        shutil.rmtree(pristine, ignore_errors=True)
        build(pristine, a.files, a.rows)
    expected_rows = (a.files // PARTITIONS) * PARTITIONS * a.rows
    py = sys.executable
    sides = {
        "delta-ops": [
            py,
            "-m",
            "delta_ops.cli",
            "compact",
            "WORK",
            "--target-size",
            "128MB",
            "--json",
        ],
        "delta-rs": [py, "-c", THEIRS, "WORK"],
    }
    measured = {}
    for label, template in sides.items():
        work = DATA / f"compact-work-{label}"
        cmd = [str(work) if c == "WORK" else c for c in template]
        m = Measurement(label=label, cmd=cmd)
        for _ in range(a.runs):
            restore(pristine, work)
            result = run_fresh(cmd, timeout=1800)
            if not result.ok:
                m.error = result.error_summary()
                break
            check(label, work, expected_rows)
            print(f"  {label:<9} {result.wall_s:7.3f} s  {result.max_rss_mb:6.0f} MB", flush=True)
            m.runs.append(result)
        shutil.rmtree(work, ignore_errors=True)
        measured[label] = m
    if all(m.ok for m in measured.values()):
        print(
            f"same work: every run of both left one file per partition holding exactly the "
            f"{expected_rows} rows written"
        )
    comparison = Comparison(
        ours=measured["delta-ops"], theirs=measured["delta-rs"], name=f"compact {a.files} files"
    )
    print(format_result(comparison, a.target_wall, None))
    verdict = evaluate(comparison, a.target_wall, None)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "bench_compact.json").write_text(
        json.dumps(
            {"files": a.files, "comparison": comparison.to_dict(), "verdict": verdict.label},
            indent=2,
        )
        + "\n"
    )
    if not comparison.ours.ok:
        return 3
    return 0 if verdict.passed else 1


if __name__ == "__main__":
    sys.exit(main())
