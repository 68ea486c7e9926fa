"""Benchmark: checkpoint a 2000-commit / 100k-add log, fresh process (load + write).

Ours:   ``delta-ops checkpoint PATH --json`` (``python -m delta_ops.cli``)
Theirs: ``DeltaTable(PATH).create_checkpoint()``

Before every timed run the working copy's ``_delta_log`` is restored from the pristine synthetic
log (untimed), so each run writes a checkpoint from JSON. Runs alternate ours / theirs after one
warm-up each. Targets: median wall ours/theirs <= 0.5, peak RSS ours <= theirs.

``--big`` instead checkpoints a 1,000,000-file log (10k commits x 100 adds, no removes) with our
command only and checks its peak RSS stays under 4 GB.

    python benchmarks/bench_checkpoint.py [--runs 5] [--big]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.harness import (
    Comparison,
    Measurement,
    evaluate,
    format_measurements,
    format_result,
    run_fresh,
)
from benchmarks.synthetic import ensure_synthetic_table

DATA = ROOT / "benchmarks" / ".data"
RESULTS = DATA / "results"
THEIRS = "import sys; from deltalake import DeltaTable; DeltaTable(sys.argv[1]).create_checkpoint(); print('ok')"


def restore(pristine: Path, work: Path) -> None:
    """Reset `work` to the pristine log (no checkpoint, no _last_checkpoint)."""
    if work.exists():
        shutil.rmtree(work)
    shutil.copytree(pristine / "_delta_log", work / "_delta_log")


def checkpoint_written(work: Path, version: int) -> bool:
    return (work / "_delta_log" / f"{version:020d}.checkpoint.parquet").stat().st_size > 0


def timed(
    label: str,
    cmd: list[str],
    pristine: Path,
    work: Path,
    version: int,
    measurement: Measurement | None,
) -> Measurement:
    m = measurement or Measurement(label=label, cmd=cmd)
    restore(pristine, work)
    result = run_fresh(cmd)
    if not result.ok or not checkpoint_written(work, version):
        m.error = result.error_summary() if not result.ok else "no checkpoint file was written"
    elif measurement is None:
        m.output = result.first_line[:60]
    else:
        m.runs.append(result)
    return m


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--big", action="store_true", help="checkpoint the 1M-file log (ours only)")
    a = p.parse_args(argv)
    py = sys.executable
    ours = [py, "-m", "delta_ops.cli", "checkpoint"]
    RESULTS.mkdir(parents=True, exist_ok=True)

    if a.big:
        pristine = DATA / "cp-10000x100"
        spec = ensure_synthetic_table(
            pristine, commits=10_000, adds_per_commit=100, remove_every=0, seed=1
        )
        work = DATA / "cp-work-big"
        m = Measurement(label="delta-ops (1M files)", cmd=ours)
        for _ in range(max(1, a.runs // 2)):
            timed(m.label, [*ours, str(work), "--json"], pristine, work, spec["version"], m)
        print(f"table {pristine}: version {spec['version']}, {spec['num_live']} live files")
        print(format_measurements([m], "checkpoint 1,000,000-file log"))
        ok = m.ok and m.max_rss_mb < 4096
        print(f"peak RSS {m.max_rss_mb:.0f} MB (limit 4096 MB) => {'PASS' if ok else 'FAIL'}")
        (RESULTS / "bench_checkpoint_big.json").write_text(
            json.dumps({"table": spec, "ours": m.to_dict(), "pass": ok}, indent=2) + "\n"
        )
        return 0 if ok else 1

    pristine = DATA / "load-2000x50"
    spec = ensure_synthetic_table(
        pristine, commits=2000, adds_per_commit=50, remove_every=5, seed=0
    )
    version = spec["version"]
    print(
        f"table {pristine}: version {version}, {spec['num_live']} live files, {spec['num_tombstones']} tombstones"
    )
    work_ours, work_theirs = DATA / "cp-work-ours", DATA / "cp-work-theirs"
    ours_cmd = [*ours, str(work_ours), "--json"]
    theirs_cmd = [py, "-c", THEIRS, str(work_theirs)]
    m_ours = timed("delta-ops", ours_cmd, pristine, work_ours, version, None)
    m_theirs = timed("delta-rs", theirs_cmd, pristine, work_theirs, version, None)
    for _ in range(a.runs):
        if m_ours.error is None:
            timed("delta-ops", ours_cmd, pristine, work_ours, version, m_ours)
        if m_theirs.error is None:
            timed("delta-rs", theirs_cmd, pristine, work_theirs, version, m_theirs)
    comparison = Comparison(ours=m_ours, theirs=m_theirs, name="checkpoint 2000-commit log")
    print(format_result(comparison, 0.5, 1.0))
    verdict = evaluate(comparison, 0.5, 1.0)
    (RESULTS / "bench_checkpoint.json").write_text(
        json.dumps(
            {"table": spec, "comparison": comparison.to_dict(), "verdict": verdict.label}, indent=2
        )
        + "\n"
    )
    return 0 if verdict.passed else 1


if __name__ == "__main__":
    sys.exit(main())
