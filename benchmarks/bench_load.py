"""Benchmark: load the latest snapshot of a 2000-commit table (no checkpoint), fresh process.

Ours:   ``load_snapshot(PATH)`` (with the CLI's process set-up) then ``print(s.version, s.num_files)``
Theirs: ``DeltaTable(PATH)`` then ``print(t.version(), len(t.file_uris()))`` (delta-rs must also
        materialise the live file list, which is what ``file_uris()`` does).

Both commands run in fresh interpreters (start-up and imports included, as a CLI user sees them);
the bare interpreter and import-only times are measured too so the report can separate them.
Targets: median wall ours/theirs <= 0.5, peak RSS ours <= theirs.

Same work, checked before the ratios are printed: every run of each side must print the
generator's ``version num_files``, and (untimed) both libraries must load the same state: version,
protocol, metaData and live files (path, size, modification time, ``numRecords``). A difference
prints ``MISMATCH: ...`` and exits 1.

    python benchmarks/bench_load.py [--runs 5] [--commits 2000 --adds 50 --remove-every 5]

Exit status: 0 PASS, 1 FAIL (target missed, or MISMATCH), 3 ours unavailable (delta-rs is still
measured).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.harness import (
    compare,
    evaluate,
    format_measurements,
    format_result,
    measure,
    rss_floor_mb,
)
from benchmarks.synthetic import ensure_synthetic_table
from benchmarks.verify import Mismatch, outputs_agree, printed, readers_agree, report_mismatch

DATA = ROOT / "benchmarks" / ".data"
RESULTS = DATA / "results"

# The same process set-up as the `delta-ops` command (its environment, then the system
# allocator; see delta_ops.cli).
OURS = (
    "import sys; from delta_ops.cli import prepare_own_process; prepare_own_process(); "
    "from delta_ops.cli.commands import use_system_allocator; use_system_allocator(); "
    "from delta_ops.table.snapshot import load_snapshot; "
    "s = load_snapshot(sys.argv[1]); print(s.version, s.num_files)"
)
THEIRS = (
    "import sys; from deltalake import DeltaTable; "
    "t = DeltaTable(sys.argv[1]); print(t.version(), len(t.file_uris()))"
)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--commits", type=int, default=2000)
    p.add_argument("--adds", type=int, default=50)
    p.add_argument("--remove-every", type=int, default=5)
    p.add_argument("--target-wall", type=float, default=0.5)
    p.add_argument("--target-rss", type=float, default=1.0)
    p.add_argument("--skip-baselines", action="store_true")
    a = p.parse_args(argv)

    path = DATA / f"load-{a.commits}x{a.adds}"
    if a.remove_every != 5:
        path = path.with_name(path.name + f"-r{a.remove_every}")
    spec = ensure_synthetic_table(
        path, commits=a.commits, adds_per_commit=a.adds, remove_every=a.remove_every, seed=0
    )
    expected = f"{spec['version']} {spec['num_live']}"
    print(
        f"table {path}: version {spec['version']}, {spec['num_live']} live files, "
        f"{spec['num_tombstones']} tombstones, {a.commits} JSON commits, no checkpoint"
    )
    py = sys.executable
    table = str(path)

    baselines = []
    if not a.skip_baselines:
        baselines = [
            measure([py, "-c", "pass"], a.runs, a.warmup, label="python (bare)"),
            measure([py, "-c", "import deltalake"], a.runs, a.warmup, label="import deltalake"),
            measure(
                [py, "-c", "import delta_ops.table.snapshot"],
                a.runs,
                a.warmup,
                label="import delta_ops.table.snapshot",
            ),
        ]
        print(format_measurements(baselines, "interpreter start + imports"))
        print(f"(RSS measurement floor: {rss_floor_mb():.1f} MB)")
        print()

    c = compare(
        [py, "-c", OURS, table],
        [py, "-c", THEIRS, table],
        a.runs,
        a.warmup,
        name="load latest snapshot",
    )
    agree, status = True, 0
    try:
        outputs_agree(
            expected, {m.label: printed(m) for m in (c.ours, c.theirs) if m.ok}, "version, files"
        )
        if c.ours.ok and c.theirs.ok:
            state = readers_agree(path, DATA / "load-verify")
            print(f"same work: every run printed {expected!r}; both load {state.summary()}")
    except Mismatch as exc:
        agree = False
        status = report_mismatch("bench_load", exc)
    if agree:
        print(format_result(c, a.target_wall, a.target_rss))

    v = evaluate(c, a.target_wall, a.target_rss)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "bench_load.json").write_text(
        json.dumps(
            {
                "benchmark": "load",
                "table": spec,
                "expected_output": expected,
                "outputs_agree": agree,
                "baselines": [b.to_dict() for b in baselines],
                "comparison": c.to_dict(),
                "verdict": v.label,
            },
            indent=2,
        )
        + "\n"
    )
    if not agree:
        return status
    if not c.ours.ok:
        return 3
    return 0 if v.passed else 1


if __name__ == "__main__":
    sys.exit(main())
