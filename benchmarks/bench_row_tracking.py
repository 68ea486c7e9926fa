"""Benchmark: enable row tracking (protocol upgrade + row-id backfill) on a 100k-file log.

Ours only (delta-rs cannot backfill row ids):
``delta-ops enable-row-tracking WORK --json [--batch-files N]`` (``python -m delta_ops.cli``),
fresh process, start-up included.

Tables (synthetic logs, stats carry ``numRecords``, so no data files are needed):

* headline: 2000 commits x 50 adds, no removes: **100k live files**
  (``--remove-every 0``, shared with ``bench_load.py --remove-every 0``);
* also: the same log where every 5th commit removes an earlier commit's files: 80k live files,
  20k tombstones (``--remove-every 5``, the ``bench_load.py`` table).

Before every run (untimed) the working copy's ``_delta_log`` is restored by copying the
pristine one. Reported per table: median wall, files per second (files backfilled / median
wall), peak RSS, and the commits written. Each run must backfill every live file; after the last
run delta-rs loads the result (untimed) and must see the ``rowTracking`` writer feature,
``delta.enableRowTracking=true`` and all live files.

Checked before the figures are printed: every run must report every live file backfilled
and the property commit, and delta-rs must read the last run's result as above; a difference
prints ``MISMATCH: ...`` and exits 1.

No target: exit 0 when every run succeeded and checked out, 1 on a MISMATCH, 3 when a run
failed.

    python benchmarks/bench_row_tracking.py [--runs 3] [--commits 2000 --adds 50]
                                            [--remove-every 0 5] [--batch-files 22000]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.harness import Measurement, format_measurements, run_fresh
from benchmarks.synthetic import ensure_synthetic_table
from benchmarks.verify import Mismatch, report_mismatch

DATA = ROOT / "benchmarks" / ".data"
RESULTS = DATA / "results"

CHECK = """
import json, sys
from deltalake import DeltaTable
t = DeltaTable(sys.argv[1])
p = t.protocol()
print(json.dumps({"version": t.version(), "num_files": len(t.file_uris()),
                  "writer_features": sorted(p.writer_features or []),
                  "enableRowTracking": t.metadata().configuration.get("delta.enableRowTracking")}))
"""


def restore(pristine: Path, work: Path) -> None:
    if work.exists():
        shutil.rmtree(work)
    shutil.copytree(pristine / "_delta_log", work / "_delta_log")


def bench_table(
    py: str,
    commits: int,
    adds: int,
    remove_every: int,
    runs: int,
    warmup: int,
    batch_files: int | None,
) -> tuple[Measurement, dict]:
    # the bench_load.py naming, so both benchmarks share their tables
    path = DATA / f"load-{commits}x{adds}"
    if remove_every != 5:
        path = path.with_name(path.name + f"-r{remove_every}")
    spec = ensure_synthetic_table(
        path, commits=commits, adds_per_commit=adds, remove_every=remove_every, seed=0
    )
    n_live = spec["num_live"]
    print(
        f"table {path}: version {spec['version']}, {n_live} live files, {spec['num_tombstones']} tombstones, "
        f"{commits} JSON commits",
        flush=True,
    )
    work = DATA / "row-tracking-work"
    cmd = [py, "-m", "delta_ops.cli", "enable-row-tracking", str(work), "--json"]
    if batch_files is not None:
        cmd += ["--batch-files", str(batch_files)]
    m = Measurement(label=f"delta-ops {n_live:,} files", cmd=cmd)
    info: dict = {"table": {**spec, "path": str(path)}}
    for i in range(max(1, warmup) + runs):
        restore(path, work)
        r = run_fresh(cmd, timeout=1800)
        if not r.ok:
            m.error = r.error_summary()
            break
        try:
            out = json.loads(r.stdout)
        except ValueError:
            m.error = f"output is not JSON: {r.first_line[:200]}"
            break
        ok = (
            out.get("files_backfilled") == n_live and out.get("property_commit_version") is not None
        )
        commits_ = out.get("backfill_commits", [])
        print(
            f"  {'run' if i >= max(1, warmup) else 'warm-up'}: {r.wall_s:7.3f} s  {r.max_rss_mb:7.1f} MB  "
            f"backfilled {out.get('files_backfilled')} files in {len(commits_)} commits",
            flush=True,
        )
        if not ok:
            raise Mismatch(
                f"backfilled {out.get('files_backfilled')} of {n_live} files "
                f"(property commit {out.get('property_commit_version')})"
            )
        info["result"] = out
        m.output = (
            f"{out['files_backfilled']} files, {len(commits_)} backfill commits, "
            f"v{out['protocol_upgrade_version']}..v{out['property_commit_version']}"
        )
        if i >= max(1, warmup):
            m.runs.append(r)
    if m.ok:
        check = subprocess.run(
            [py, "-c", CHECK, str(work)], capture_output=True, text=True, check=False
        )
        try:
            seen = json.loads(check.stdout)
        except ValueError:
            seen = {"error": (check.stderr.strip().splitlines() or ["no output"])[-1]}
        info["delta_rs_check"] = seen
        good = (
            seen.get("num_files") == n_live
            and "rowTracking" in seen.get("writer_features", [])
            and seen.get("enableRowTracking") == "true"
        )
        print(f"  delta-rs reads the result: {seen} => {'OK' if good else 'WRONG'}")
        if not good:
            raise Mismatch(
                f"delta-rs reads the result as {seen}, expected {n_live} files, the rowTracking "
                "writer feature and delta.enableRowTracking=true"
            )
    if work.exists():
        shutil.rmtree(work)
    if m.ok:
        info["files_per_s"] = n_live / m.median_wall_s
    info["measurement"] = m.to_dict()
    return m, info


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--commits", type=int, default=2000)
    p.add_argument("--adds", type=int, default=50)
    p.add_argument(
        "--remove-every",
        type=int,
        nargs="+",
        default=[0, 5],
        help="one table per value; the first is the headline (default: 0 5)",
    )
    p.add_argument(
        "--batch-files",
        type=int,
        default=None,
        help="passed to the command (default: its own, 22000)",
    )
    a = p.parse_args(argv)
    py = sys.executable

    results, ms = [], []
    for re_ in a.remove_every:
        try:
            m, info = bench_table(py, a.commits, a.adds, re_, a.runs, a.warmup, a.batch_files)
        except Mismatch as exc:
            return report_mismatch("bench_row_tracking", exc)
        ms.append(m)
        results.append({"remove_every": re_, **info})

    n = max((len(m.runs) for m in ms), default=0)
    print(format_measurements(ms, f"enable row tracking, {a.commits}-commit logs ({n} runs)"))
    for m, info in zip(ms, results):
        if m.ok:
            r = info["result"]
            print(
                f"{m.label}: {info['files_per_s']:,.0f} files/s, peak {m.max_rss_mb:.0f} MB, "
                f"{len(r['backfill_commits'])} backfill commits {r['backfill_commits']} "
                f"(+ protocol v{r['protocol_upgrade_version']}, property v{r['property_commit_version']})"
            )
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "bench_row_tracking.json").write_text(
        json.dumps({"tables": results}, indent=2) + "\n"
    )
    return 0 if all(m.ok for m in ms) else 3


if __name__ == "__main__":
    sys.exit(main())
