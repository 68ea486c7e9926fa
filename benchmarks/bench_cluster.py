"""Benchmark: Z-order clustering by two columns (issue 36), against delta-rs' `optimize.z_order`.

The table: `--rows` rows in `--files` appends by `deltalake` (unpartitioned, no checkpoints):
`id` (unique), `x` (int64, uniform over a million values), `y` (double, skewed: exponential)
and `s` (a short string), every file spanning the whole range of `x` and `y`. Before every run
(untimed) the working copy is rebuilt from the pristine table (hard links for data files, a
copy of the log). Both sides Z-order by `x, y` into files of `--target-size`.

Ours:   ``delta-ops compact WORK --zorder-by x,y --target-size T --json``
Theirs: ``DeltaTable(WORK).optimize.z_order(["x", "y"], target_size=T)``

Same work, checked by ``deltalake`` after every run before any ratio is printed: the table's
rows are exactly the rows written (every id once, with its `x`, `y` and `s`), and every live
file was written by the run. A difference prints ``MISMATCH: ...`` and exits 1.

Data skipping, after the last run of each side (and of the table before): over 100 random
predicates on `x` and `y` (50 points ``x = a AND y = b`` taken from rows of the table, 50
ranges ``x BETWEEN .. AND y BETWEEN ..``, each a tenth of a column's range), the mean share of
live files whose min/max statistics cannot exclude them (lower is better; the same predicates
for every side).

Peak memory is the process tree's: the summed RSS of the command and every process it forks,
sampled every 10 ms (`harness.run_fresh(tree=True)`), or the biggest process's own peak where
that is higher.

Goals (the issue): median wall ours/theirs <= 0.5, peak memory ours/theirs <= 0.5, skipping
share ours <= theirs.

    python benchmarks/bench_cluster.py [--runs 3] [--rows 10000000] [--files 1000]
                                       [--target-size-mb 32]

Exit status: 0 PASS, 1 FAIL (a goal missed, or MISMATCH), 3 ours failed.
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
PREDICATES = 100

THEIRS = """
import sys
from deltalake import DeltaTable
print(DeltaTable(sys.argv[1]).optimize.z_order(["x", "y"], target_size=int(sys.argv[2])))
"""


def build(pristine: Path, rows: int, files: int) -> None:
    """`files` appends of rows // files random rows each, by deltalake."""
    import numpy as np
    import pyarrow as pa
    from deltalake import write_deltalake

    rng = np.random.default_rng(36)
    per_file = rows // files
    for i in range(files):
        ids = np.arange(i * per_file, (i + 1) * per_file, dtype=np.int64)
        batch = pa.table(
            {
                "id": ids,
                "x": rng.integers(0, 1_000_000, per_file),
                "y": rng.exponential(100.0, per_file),
                "s": pa.array([f"s{v:04d}" for v in rng.integers(0, 5000, per_file)]),
            }
        )
        write_deltalake(str(pristine), batch, mode="append")
    (pristine / "BENCH_SPEC").write_text(json.dumps({"rows": per_file * files, "files": files}))


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


def _sorted_rows(path: Path):  # -> pa.Table sorted by id
    from deltalake import DeltaTable

    table = DeltaTable(str(path)).to_pyarrow_table(columns=["id", "x", "y", "s"])
    return table.sort_by("id")


def check(label: str, work: Path, pristine: Path, expected) -> None:
    """The rows are exactly the pristine table's, and no live file is one of the pristine
    table's (every file was rewritten). Raises Mismatch."""
    import pyarrow as pa
    from deltalake import DeltaTable

    got = _sorted_rows(work)
    if got.num_rows != expected.num_rows:
        raise Mismatch(f"{label} left {got.num_rows} rows, expected {expected.num_rows}")
    for name in expected.column_names:
        if not got.column(name).equals(expected.column(name)):
            raise Mismatch(f"{label} changed column {name} (rows compared by id)")
    before = set(
        pa.table(DeltaTable(str(pristine)).get_add_actions(flatten=True))["path"].to_pylist()
    )
    after = set(pa.table(DeltaTable(str(work)).get_add_actions(flatten=True))["path"].to_pylist())
    if before & after:
        raise Mismatch(f"{label} left {len(before & after)} of the original files live")


def predicates(expected, seed: int = 7) -> list[tuple[float, float, float, float]]:
    """(x low, x high, y low, y high) of PREDICATES predicates: half points at rows of the
    table, half ranges of a tenth of each column's range."""
    import numpy as np

    rng = np.random.default_rng(seed)
    x = expected.column("x").to_numpy()
    y = expected.column("y").to_numpy()
    out = []
    for i in range(PREDICATES):
        if i % 2:
            row = int(rng.integers(0, len(x)))
            out.append((float(x[row]), float(x[row]), float(y[row]), float(y[row])))
        else:
            wx, wy = (x.max() - x.min()) / 10, (y.max() - y.min()) / 10
            lx = float(rng.uniform(x.min(), x.max() - wx))
            ly = float(rng.uniform(y.min(), y.max() - wy))
            out.append((lx, lx + wx, ly, ly + wy))
    return out


def unskippable_share(path: Path, preds: list[tuple[float, float, float, float]]) -> float:
    """The mean share of live files whose min/max stats on x and y cannot exclude a predicate."""
    import numpy as np
    import pyarrow as pa
    from deltalake import DeltaTable

    actions = pa.table(DeltaTable(str(path)).get_add_actions(flatten=True))
    lo_x = actions["min.x"].to_numpy(zero_copy_only=False).astype(float)
    hi_x = actions["max.x"].to_numpy(zero_copy_only=False).astype(float)
    lo_y = actions["min.y"].to_numpy(zero_copy_only=False).astype(float)
    hi_y = actions["max.y"].to_numpy(zero_copy_only=False).astype(float)
    shares = [
        float(np.mean((lo_x <= xh) & (hi_x >= xl) & (lo_y <= yh) & (hi_y >= yl)))
        for xl, xh, yl, yh in preds
    ]
    return float(np.mean(shares))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--rows", type=int, default=10_000_000)
    p.add_argument("--files", type=int, default=1_000)
    p.add_argument("--target-size-mb", type=int, default=32)
    p.add_argument("--target-wall", type=float, default=0.5)
    p.add_argument("--target-rss", type=float, default=0.5)
    a = p.parse_args(argv)
    try:
        return run(a)
    except Mismatch as exc:
        return report_mismatch("bench_cluster", exc)


def run(a: argparse.Namespace) -> int:
    """The benchmark; raises Mismatch when a side did not do the expected work."""
    pristine = DATA / f"cluster-{a.rows}x{a.files}"
    if not (pristine / "BENCH_SPEC").exists():
        print(f"building {pristine} ({a.rows} rows in {a.files} files; once) ...", flush=True)
        shutil.rmtree(pristine, ignore_errors=True)
        build(pristine, a.rows, a.files)
    expected = _sorted_rows(pristine)
    preds = predicates(expected)
    target = a.target_size_mb * 1024 * 1024
    py = sys.executable
    sides = {
        "delta-ops": [
            py,
            "-m",
            "delta_ops.cli",
            "compact",
            "WORK",
            "--zorder-by",
            "x,y",
            "--target-size",
            f"{a.target_size_mb}MB",
            "--json",
        ],
        "delta-rs": [py, "-c", THEIRS, "WORK", str(target)],
    }
    measured: dict[str, Measurement] = {}
    skipping = {"before": unskippable_share(pristine, preds)}
    files_after: dict[str, int] = {}
    for label, template in sides.items():
        work = DATA / f"cluster-work-{label}"
        cmd = [str(work) if c == "WORK" else c for c in template]
        m = Measurement(label=label, cmd=cmd)
        for _ in range(a.runs):
            restore(pristine, work)
            result = run_fresh(cmd, timeout=3600, tree=True)
            # peak memory: the process tree's summed RSS (forked workers count), at least the
            # biggest single process's
            result.max_rss_mb = max(result.max_rss_mb, result.tree_rss_mb)
            if not result.ok:
                m.error = result.error_summary()
                break
            check(label, work, pristine, expected)
            print(f"  {label:<9} {result.wall_s:7.3f} s  {result.max_rss_mb:6.0f} MB", flush=True)
            m.runs.append(result)
        if m.ok:
            skipping[label] = unskippable_share(work, preds)
            import pyarrow as pa
            from deltalake import DeltaTable

            files_after[label] = pa.table(DeltaTable(str(work)).get_add_actions()).num_rows
        shutil.rmtree(work, ignore_errors=True)
        measured[label] = m
    if all(m.ok for m in measured.values()):
        print(
            f"same rows: every run of both sides left exactly the {expected.num_rows} rows written"
        )
    comparison = Comparison(
        ours=measured["delta-ops"],
        theirs=measured["delta-rs"],
        name=f"z-order {a.rows} rows in {a.files} files by x, y",
    )
    print(format_result(comparison, a.target_wall, a.target_rss))
    print(
        f"data skipping over {PREDICATES} predicates on x, y (share of files a reader opens,"
        " lower is better): "
        + ", ".join(
            f"{label} {share:.3f}"
            + (f" ({files_after[label]} files)" if label in files_after else f" ({a.files} files)")
            for label, share in skipping.items()
        )
    )
    verdict = evaluate(comparison, a.target_wall, a.target_rss)
    skip_ok = (
        "delta-ops" in skipping
        and "delta-rs" in skipping
        and skipping["delta-ops"] <= skipping["delta-rs"] + 1e-9
    )
    print(f"skipping ours <= theirs: {'PASS' if skip_ok else 'FAIL'}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "bench_cluster.json").write_text(
        json.dumps(
            {
                "rows": a.rows,
                "files": a.files,
                "target_size_mb": a.target_size_mb,
                "comparison": comparison.to_dict(),
                "skipping": skipping,
                "files_after": files_after,
                "verdict": verdict.label,
                "skipping_ok": skip_ok,
            },
            indent=2,
        )
        + "\n"
    )
    if not comparison.ours.ok:
        return 3
    return 0 if verdict.passed and skip_ok else 1


if __name__ == "__main__":
    sys.exit(main())
