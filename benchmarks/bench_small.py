"""Benchmark: small tables, where start-up is most of the wait: a 10k-file load and inspect.

The table is `bench_growth.py`'s 10,000-file one (100 commits of 100 adds with stats,
checkpointed at its last version by delta-ops, once). Fresh processes, in turn after one
warm-up each: our load (``load_snapshot`` with the CLI's process set-up, as in
`bench_load.py`), delta-rs' load (``DeltaTable`` + ``file_uris()``) and ``delta-ops inspect
--json``. Goal (issue 35): our load <= 1.0 x delta-rs'; inspect's ratio to delta-rs' load is
reported. The interpreter alone and the imports alone (`import deltalake`, `import
delta_ops.cli.commands`) are timed in the same rounds, so the start-up floor shows beside the
loads.

Same work, checked before the ratios are printed: every run of both loads prints the table's
``version 10000`` and every inspect run reports them; (untimed) both libraries load the same
state. A difference prints ``MISMATCH: ...`` and exits 1.

The fresh-process cleanup of the issue's table is `bench_cleanup.py`.

    python benchmarks/bench_small.py [--runs 7] [--files 10000]

Exit status: 0 PASS, 1 FAIL (the goal missed, or MISMATCH), 3 ours unavailable.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.bench_growth import prepare
from benchmarks.bench_inspect import inspected
from benchmarks.bench_load import OURS, THEIRS
from benchmarks.harness import alternate, compile_package, format_measurements
from benchmarks.verify import Mismatch, outputs_agree, printed, readers_agree, report_mismatch

DATA = ROOT / "benchmarks" / ".data"
RESULTS = DATA / "results"
BARE, IMPORT_RS, IMPORT_OURS = "python (bare)", "import deltalake", "import delta_ops.cli"
LOAD, THEIRS_LOAD, INSPECT = "delta-ops load", "delta-rs load", "inspect --json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--files", type=int, default=10_000, help="a multiple of 100")
    parser.add_argument("--target-wall", type=float, default=1.0)
    args = parser.parse_args(argv)

    compile_package()
    table = str(prepare(args.files))
    py = sys.executable
    measured = alternate(
        {
            BARE: [py, "-c", "pass"],
            IMPORT_RS: [py, "-c", "import deltalake"],
            IMPORT_OURS: [py, "-c", "import delta_ops.cli.commands"],
            LOAD: [py, "-c", OURS, table],
            THEIRS_LOAD: [py, "-c", THEIRS, table],
            INSPECT: [py, "-m", "delta_ops.cli", "inspect", table, "--json"],
        },
        args.runs,
        args.warmup,
    )
    load, theirs, inspect = measured[LOAD], measured[THEIRS_LOAD], measured[INSPECT]
    expected = f"{args.files // 100 - 1} {args.files}"
    if load.ok and theirs.ok and inspect.ok:
        try:
            outputs = {LOAD: printed(load), THEIRS_LOAD: printed(theirs)}
            outputs_agree(expected, outputs | {INSPECT: inspected(inspect)}, "version, files")
            state = readers_agree(table, DATA / "small-verify")
        except Mismatch as exc:
            return report_mismatch("bench_small", exc)
        print(f"same work: every run reported {expected!r}; both libraries load {state.summary()}")
    print(format_measurements(list(measured.values()), f"{args.files} files, {args.runs} runs"))
    if not (load.ok and inspect.ok):
        return 3
    if not theirs.ok:
        return 1
    wall = load.median_wall_s / theirs.median_wall_s
    passed = wall <= args.target_wall
    print(
        f"load / delta-rs load, median wall = {wall:.3f}  (target <= {args.target_wall:g})"
        f"  {'PASS' if passed else 'FAIL'}"
    )
    inspect_ratio = inspect.median_wall_s / theirs.median_wall_s
    floor = measured[IMPORT_OURS].median_wall_s / theirs.median_wall_s
    print(
        f"(inspect / delta-rs load = {inspect_ratio:.3f}; importing delta_ops.cli.commands alone"
        f" = {floor:.3f} of delta-rs' whole load)\n=> {'PASS' if passed else 'FAIL'}"
    )
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "bench_small.json").write_text(
        json.dumps(
            {
                "files": args.files,
                "load": {"wall_ratio": wall, "rss_ratio": load.max_rss_mb / theirs.max_rss_mb},
                "inspect": {"wall_ratio": inspect_ratio},
                "measurements": {label: m.to_dict() for label, m in measured.items()},
                "verdict": "PASS" if passed else "FAIL",
            },
            indent=2,
        )
        + "\n"
    )
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
