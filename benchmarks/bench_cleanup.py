"""Benchmark: metadata (log) cleanup of a 2000-commit log with 20 checkpoints, fresh process.

Ours:   ``delta-ops cleanup WORK --retention '30 days' --json`` (``python -m delta_ops.cli``)
Theirs: ``DeltaTable(WORK).cleanup_metadata()`` (``delta.logRetentionDuration``: 30 days)

The pristine log is the synthetic 2000 x 50 log (every 5th commit removes an earlier commit's
files; no data files) with commits one second apart and 60 days old (version v has
mtime = base + v s, base = 60 days ago), plus a classic checkpoint every 100 versions
(99, 199, ..., 1999, written once with our ``checkpoint()`` and given their version's mtime).
Every log file is past the 30-day retention, so both tools may delete everything older than
the newest checkpoint. They follow their own rules (ours: Spark's truncated-day cutoff and
whole segments up to ``_last_checkpoint``; delta-rs: files older than the cutoff below the
newest checkpoint), which on this log select the same files: every commit before the newest
checkpoint and every older checkpoint.

Same work, checked after every run (warm-up included) before the ratios are printed: the log
is listed before and after, and each run of either side must have deleted the same set of log
files and added none; ``deltalake`` must then load the cleaned log with the same state
(version, protocol, metaData, live files with sizes and ``numRecords``) as the pristine log. A
difference prints ``MISMATCH: ...`` and exits 1.

Before every run (untimed) the working copy's ``_delta_log`` is restored by copying the
pristine one (mtimes preserved). Runs alternate ours / theirs after one warm-up each. Target
(issue 35): median wall ours/theirs <= 0.5; the peak RSS ratio is reported.

    python benchmarks/bench_cleanup.py [--runs 5] [--commits 2000 --adds 50 --remove-every 5
                                        --checkpoint-every 100] [--in-process]

``--in-process`` also times both calls in one resident process (imports paid once, as in the
Dagster daemon or a notebook), each on a freshly restored copy: ours ``load_head`` +
``plan_cleanup`` + ``execute_cleanup``, theirs ``DeltaTable(WORK).cleanup_metadata()``.

Exit status: 0 PASS, 1 FAIL (target missed, delta-rs failed, or MISMATCH), 3 ours failed or
deleted nothing.
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

from benchmarks.harness import Comparison, Measurement, format_measurements, run_fresh
from benchmarks.synthetic import ensure_synthetic_table
from benchmarks.verify import (
    Mismatch,
    TableState,
    read_state,
    report_mismatch,
    set_difference,
    state_difference,
)

DATA = ROOT / "benchmarks" / ".data"
RESULTS = DATA / "results"
AGE_DAYS = 60
RETENTION = "30 days"
MARKER = "_bench_cleanup_checkpoints.json"  # in the table root, next to the synthetic spec

THEIRS = "import sys; from deltalake import DeltaTable; DeltaTable(sys.argv[1]).cleanup_metadata(); print('ok')"


def prepare(
    pristine: Path, commits: int, adds: int, remove_every: int, every: int
) -> tuple[dict, list[int]]:
    """The pristine log with a checkpoint every ``every`` versions, each with its version's mtime."""
    spec = ensure_synthetic_table(
        pristine,
        commits=commits,
        adds_per_commit=adds,
        remove_every=remove_every,
        seed=0,
        age_days=AGE_DAYS,
        commit_interval_ms=1000,
    )
    versions = list(range(every - 1, commits, every))
    marker = pristine / MARKER
    want = {"spec": spec, "checkpoint_versions": versions}  # a regenerated log has a new spec
    try:
        if json.loads(marker.read_text()) == want:
            return spec, versions
    except (OSError, ValueError):
        pass
    from delta_ops.ops.checkpoint import checkpoint  # only when (re)building the pristine log

    log = pristine / "_delta_log"
    for name in os.listdir(log):
        if not name.endswith(".json"):  # checkpoints, _last_checkpoint, ... of an older build
            path = log / name
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    print(f"writing {len(versions)} checkpoints into {pristine} (once) ...", flush=True)
    for v in versions:
        checkpoint(str(pristine), version=v)
    for name in os.listdir(log):
        if name.endswith(".json"):
            continue
        head = name.split(".")[0]
        v = int(head) if head.isdigit() else versions[-1]
        t = (log / f"{v:020d}.json").stat().st_mtime_ns
        os.utime(log / name, ns=(t, t))
    marker.write_text(json.dumps(want) + "\n")
    return spec, versions


def restore(pristine: Path, work: Path) -> None:
    if work.exists():
        shutil.rmtree(work)
    shutil.copytree(pristine / "_delta_log", work / "_delta_log")  # copy2: mtimes kept


class Verifier:
    """What every run must have done: delete the same log files as every earlier run of either
    side, add none, and leave a log deltalake loads with the pristine log's state."""

    def __init__(self, pristine: Path) -> None:
        self.expected: TableState = read_state(pristine, DATA / "cleanup-verify" / "expected")
        self.deleted: dict[str, frozenset[str]] = {}

    def check(self, label: str, work: Path, gone: list[str], added: list[str]) -> None:
        """Raises Mismatch naming the first difference."""
        if added:
            raise Mismatch(f"the cleanup by {label} added {len(added)} log files (e.g. {added[0]})")
        for other, earlier in self.deleted.items():
            difference = set_difference(
                f"log files deleted by {label}", gone, f"by {other}", earlier
            )
            if difference:
                raise Mismatch(difference)
        self.deleted[label] = frozenset(gone)
        got = read_state(work, DATA / "cleanup-verify" / label)
        where = f"the log {label} cleaned (read by deltalake)"
        difference = state_difference("the pristine log", self.expected, where, got)
        if difference:
            raise Mismatch(difference)


class Side:
    def __init__(self, label: str, cmd: list[str], work: Path) -> None:
        self.m = Measurement(label=label, cmd=cmd)
        self.work = work
        self.deleted: list[int] = []
        self.sample: dict = {}

    def run(self, pristine: Path, pristine_log: set[str], timed: bool, verifier: Verifier) -> None:
        """One run on a restored copy, checked by `verifier` (raises Mismatch)."""
        if self.m.error is not None:
            return
        restore(pristine, self.work)
        result = run_fresh(self.m.cmd, timeout=1800)
        if not result.ok:
            self.m.error = result.error_summary()
            return
        now = set(os.listdir(self.work / "_delta_log"))
        gone, added = sorted(pristine_log - now), sorted(now - pristine_log)
        verifier.check(self.m.label, self.work, gone, added)
        commits_gone = [n for n in gone if n.endswith(".json")]
        cps_gone = [n for n in gone if ".checkpoint." in n]
        line = f"deleted {len(gone)} ({len(commits_gone)} commits, {len(cps_gone)} checkpoints)" + (
            f", added {len(added)}" if added else ""
        )
        print(
            f"  {self.m.label:<9} {'run' if timed else 'warm-up'}: {result.wall_s:7.3f} s  {line}",
            flush=True,
        )
        self.m.output = line
        remaining = sorted(n for n in now if n.endswith(".json"))
        self.sample = {
            "deleted": len(gone),
            "commits_deleted": len(commits_gone),
            "checkpoints_deleted": len(cps_gone),
            "added": added,
            "oldest_remaining_commit": remaining[0] if remaining else None,
            "newest_checkpoint_deleted": max(cps_gone) if cps_gone else None,
        }
        if timed:
            self.m.runs.append(result)
            self.deleted.append(len(gone))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--commits", type=int, default=2000)
    p.add_argument("--adds", type=int, default=50)
    p.add_argument("--remove-every", type=int, default=5)
    p.add_argument("--checkpoint-every", type=int, default=100)
    p.add_argument("--in-process", action="store_true", help="also time both calls in process")
    p.add_argument("--target-wall", type=float, default=0.5)  # issue 35
    a = p.parse_args(argv)
    if not 1 <= a.checkpoint_every <= a.commits:
        p.error("--checkpoint-every must be between 1 and --commits")
    try:
        return run(a)
    except Mismatch as exc:
        return report_mismatch("bench_cleanup", exc)


def run(a: argparse.Namespace) -> int:
    """The benchmark; raises Mismatch when the sides did not do the same work."""

    pristine = DATA / f"cleanup-{a.commits}x{a.adds}-r{a.remove_every}-cp{a.checkpoint_every}"
    spec, versions = prepare(pristine, a.commits, a.adds, a.remove_every, a.checkpoint_every)
    pristine_log = set(os.listdir(pristine / "_delta_log"))
    n_cp = sum(".checkpoint." in n for n in pristine_log)
    print(
        f"table {pristine}: version {spec['version']}, {spec['num_live']} live files, "
        f"{a.commits} commits + {n_cp} checkpoints ({versions[0]}..{versions[-1]}), "
        f"log files {AGE_DAYS} days old; retention {RETENTION}"
    )

    py = sys.executable
    work_ours, work_theirs = DATA / "cleanup-work-ours", DATA / "cleanup-work-theirs"
    ours = Side(
        "delta-ops",
        [py, "-m", "delta_ops.cli", "cleanup", str(work_ours), "--retention", RETENTION, "--json"],
        work_ours,
    )
    theirs = Side("delta-rs", [py, "-c", THEIRS, str(work_theirs)], work_theirs)
    verifier = Verifier(pristine)
    for _ in range(max(1, a.warmup)):
        ours.run(pristine, pristine_log, False, verifier)
        theirs.run(pristine, pristine_log, False, verifier)
    for _ in range(a.runs):
        ours.run(pristine, pristine_log, True, verifier)
        theirs.run(pristine, pristine_log, True, verifier)
    for side in (ours, theirs):
        if side.work.exists():
            shutil.rmtree(side.work)
    if ours.m.ok and not ours.sample.get("deleted"):
        ours.m.error = "deleted nothing"

    comparison = Comparison(
        ours=ours.m, theirs=theirs.m, name=f"log cleanup, {a.commits} commits + {n_cp} checkpoints"
    )
    if ours.m.ok and theirs.m.ok:
        print(
            f"same work: every run of both deleted the same {len(verifier.deleted['delta-ops'])} "
            f"log files; deltalake loads each cleaned log as the pristine one "
            f"({verifier.expected.summary()})"
        )
    print(
        format_measurements(
            [ours.m, theirs.m], f"{comparison.name} ({len(theirs.m.runs) or len(ours.m.runs)} runs)"
        )
    )
    if comparison.wall_ratio is None:
        print(
            "ratio: n/a (" + ", ".join(m.label for m in (ours.m, theirs.m) if not m.ok) + " failed)"
        )
    else:
        met = "PASS" if comparison.wall_ratio <= a.target_wall else "FAIL"
        print(
            f"wall ratio ours/theirs = {comparison.wall_ratio:.3f}  (target <= {a.target_wall:g})"
            f"  {met}"
        )
        print(f"peak RSS ratio ours/theirs = {comparison.rss_ratio:.3f}  (no target)")
    for side in (ours, theirs):
        if side.m.ok:
            s = side.sample
            print(
                f"{side.m.label}: deleted {s['deleted']} files ({s['commits_deleted']} commits, "
                f"{s['checkpoints_deleted']} checkpoints, newest {s['newest_checkpoint_deleted']}); "
                f"oldest commit kept {s['oldest_remaining_commit']}"
            )
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "bench_cleanup.json").write_text(
        json.dumps(
            {
                "table": {
                    **spec,
                    "path": str(pristine),
                    "checkpoint_versions": versions,
                    "age_days": AGE_DAYS,
                },
                "retention": RETENTION,
                "deleted": {"ours": ours.sample, "theirs": theirs.sample},
                "comparison": comparison.to_dict(),
                "target_wall_ratio": a.target_wall,
            },
            indent=2,
        )
        + "\n"
    )
    if a.in_process and ours.m.ok:
        in_process(pristine, work_ours, a.runs, verifier.deleted["delta-ops"])
    if not ours.m.ok:
        return 3
    ratio = comparison.wall_ratio
    return 0 if ratio is not None and ratio <= a.target_wall else 1


def in_process(pristine: Path, work: Path, runs: int, expected: frozenset[str]) -> None:
    """Median time of each side's cleanup call in this process, after a warm-up each; each
    call must delete the `expected` log files (raises Mismatch)."""
    import statistics
    import time

    from deltalake import DeltaTable

    from delta_ops.ops.cleanup import execute_cleanup, plan_cleanup
    from delta_ops.table.snapshot import load_head

    def ours() -> None:
        head = load_head(str(work))
        execute_cleanup(plan_cleanup(head, int(time.time() * 1000), retention_ms=30 * 86_400_000))

    def theirs() -> None:
        DeltaTable(str(work)).cleanup_metadata()

    times: dict[str, list[float]] = {"delta-ops": [], "delta-rs": []}
    for run in range(runs + 1):
        for label, call in (("delta-ops", ours), ("delta-rs", theirs)):
            restore(pristine, work)
            before = set(os.listdir(work / "_delta_log"))
            start = time.perf_counter()
            call()
            if run:  # the first round warms up
                times[label].append(time.perf_counter() - start)
            gone = before - set(os.listdir(work / "_delta_log"))
            difference = set_difference(
                f"log files deleted in process by {label}", gone, "in fresh processes", expected
            )
            if difference:
                raise Mismatch(difference)
    shutil.rmtree(work, ignore_errors=True)
    median = {label: statistics.median(values) for label, values in times.items()}
    print(f"== in process, median of {runs} ==")
    for label, value in median.items():
        print(f"{label:<10} {value * 1000:8.1f} ms")
    print(f"wall ratio ours/theirs = {median['delta-ops'] / median['delta-rs']:.3f}")


if __name__ == "__main__":
    sys.exit(main())
