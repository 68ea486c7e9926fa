"""Run every ``benchmarks/bench_*.py`` in turn (never in parallel) and summarise.

    python benchmarks/run_all.py [-k load] [--no-fail] [-- extra args passed to every bench]

Each benchmark exits 0 (PASS), 1 (FAIL against its target) or 3 (our implementation missing or
producing the wrong answer); anything else is reported as ERROR. Exit status: 0 when all passed
(or with ``--no-fail``), else 1. Per-benchmark JSON results land in ``benchmarks/.data/results``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
STATUS = {0: "PASS", 1: "FAIL", 3: "OURS UNAVAILABLE"}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="run all delta-ops benchmarks")
    p.add_argument("-k", dest="pattern", default="", help="only benches whose name contains this")
    p.add_argument("--no-fail", action="store_true", help="exit 0 even if a benchmark fails")
    p.add_argument("extra", nargs=argparse.REMAINDER, help="arguments after -- go to every bench")
    a = p.parse_args(argv)
    extra = a.extra[1:] if a.extra[:1] == ["--"] else a.extra

    benches = sorted(b for b in HERE.glob("bench_*.py") if a.pattern in b.stem)
    if not benches:
        print("no benchmarks matched", file=sys.stderr)
        return 1
    summary = []
    for bench in benches:
        print(f"\n######## {bench.stem} ########", flush=True)
        t0 = time.perf_counter()
        rc = subprocess.call([sys.executable, str(bench), *extra], cwd=HERE.parent)
        summary.append((bench.stem, STATUS.get(rc, f"ERROR (exit {rc})"), time.perf_counter() - t0))

    print("\n######## summary ########")
    for name, status, secs in summary:
        print(f"{name:<30} {status:<20} {secs:7.1f} s")
    all_ok = all(status == "PASS" for _, status, _ in summary)
    return 0 if all_ok or a.no_fail else 1


if __name__ == "__main__":
    sys.exit(main())
