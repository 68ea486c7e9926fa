"""Run every ``benchmarks/bench_*.py`` in turn (never in parallel) and summarise, then print
each goal of issue 35 beside the figure this run measured (``benchmarks/goals.py``).

    python benchmarks/run_all.py [-k load [-k inspect ...]] [--no-fail]
        [-- extra args passed to every bench]

Each benchmark exits 0 (PASS), 1 (FAIL against its target, or the two sides did not do the
same work) or 3 (our implementation missing or failing); anything else is reported as ERROR.
A benchmark whose output has a ``MISMATCH:`` line (the sides did different work, see
``verify.py``) is reported as MISMATCH. Exit status: 0 when all passed (or with ``--no-fail``,
which never hides a MISMATCH), else 1. Per-benchmark JSON results land in
``benchmarks/.data/results``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE.parent) not in sys.path:
    sys.path.insert(0, str(HERE.parent))

from benchmarks.goals import goal_lines

STATUS = {0: "PASS", 1: "FAIL", 3: "OURS UNAVAILABLE"}
MISMATCH = "MISMATCH"  # a line starting "MISMATCH:" (benchmarks/verify.py)


def run_bench(bench: Path, extra: list[str]) -> str:
    """Run one benchmark, echoing its output as it comes; returns its status."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with subprocess.Popen(
        [sys.executable, str(bench), *extra],
        cwd=HERE.parent,
        stdout=subprocess.PIPE,
        text=True,
        errors="replace",
        env=env,
    ) as proc:
        assert proc.stdout is not None
        mismatch = False
        for line in proc.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            mismatch = mismatch or line.startswith(f"{MISMATCH}:")
        rc = proc.wait()
    if mismatch:
        return MISMATCH
    return STATUS.get(rc, f"ERROR (exit {rc})")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="run all delta-ops benchmarks")
    p.add_argument(
        "-k",
        dest="patterns",
        action="append",
        default=[],
        help="only benches whose name contains this (repeatable: any of them)",
    )
    p.add_argument("--no-fail", action="store_true", help="exit 0 even if a benchmark fails")
    p.add_argument("extra", nargs=argparse.REMAINDER, help="arguments after -- go to every bench")
    a = p.parse_args(argv)
    extra = a.extra[1:] if a.extra[:1] == ["--"] else a.extra

    benches = sorted(
        b for b in HERE.glob("bench_*.py") if not a.patterns or any(k in b.stem for k in a.patterns)
    )
    if not benches:
        print("no benchmarks matched", file=sys.stderr)
        return 1
    summary = []
    started = time.time()
    for bench in benches:
        print(f"\n######## {bench.stem} ########", flush=True)
        t0 = time.perf_counter()
        summary.append((bench.stem, run_bench(bench, extra), time.perf_counter() - t0))

    print("\n######## summary ########")
    for name, status, secs in summary:
        print(f"{name:<30} {status:<20} {secs:7.1f} s")
    print("\n######## goals (issue 35): ratios of this run beside each goal ########")
    print("\n".join(goal_lines(since=started)))
    all_ok = all(status == "PASS" for _, status, _ in summary)
    if any(status == MISMATCH for _, status, _ in summary):
        return 1  # the sides did different work: never hidden by --no-fail
    return 0 if all_ok or a.no_fail else 1


if __name__ == "__main__":
    sys.exit(main())
