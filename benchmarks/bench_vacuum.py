"""Benchmark: full vacuum of a 2000-commit table with 101k real data files, fresh process.

Ours:   ``delta-ops vacuum WORK --retention '7 days' --mode full --json`` (``python -m delta_ops.cli``)
Theirs: ``DeltaTable(WORK).vacuum(retention_hours=168, dry_run=False, full=True,
        enforce_retention_duration=False)``

The pristine table is the synthetic 2000 x 50 table (every 5th commit removes an earlier
commit's files) with a real parquet file for every add, 1000 untracked orphans, and every
timestamp and mtime 30 days old: 80k live files, 20k tombstones (deleted 30 days ago, past the
7-day retention) and 1000 orphans, so both tools must delete exactly 21k files.

Before every run (untimed) the working copy is rebuilt from the pristine table: the
``_delta_log`` is copied, every data file is *hard-linked* (``cp -al`` style), which is fast
for 101k files; vacuum deleting a link leaves the pristine copy intact, and mtimes live in the
shared inode so they are the pristine ones. After every run (warm-up included, before any
ratio is printed) the files left on disk are listed: each side must have left exactly the live
files ``deltalake`` reads from the pristine log (so deleted exactly the tombstoned files and the
orphans, the same set on both sides). A difference prints ``MISMATCH: ...`` and exits 1.

Both sides write their ``VACUUM START`` / ``VACUUM END`` commits (ours also
``_last_vacuum_info``); delta-rs runs with its default post-commit hooks, which write no
checkpoint after a vacuum (checked: versions 100/101 of a 100-commit table get none). Log files
each side added or removed are reported.

Target: median wall ours/theirs <= 0.4 (issue 35; peak RSS reported, no target).

    python benchmarks/bench_vacuum.py [--runs 3] [--commits 2000 --adds 50 --remove-every 5
                                       --orphans 1000 --age-days 30]

Exit status: 0 PASS, 1 FAIL (target missed, or MISMATCH), 3 ours unavailable (delta-rs is still
measured).
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
from benchmarks.synthetic import SPEC_FILE, ensure_synthetic_table
from benchmarks.verify import Mismatch, read_state, report_mismatch, set_difference

DATA = ROOT / "benchmarks" / ".data"
RESULTS = DATA / "results"
RETENTION_DAYS = 7

THEIRS = """
import sys
from deltalake import DeltaTable
deleted = DeltaTable(sys.argv[1]).vacuum(retention_hours=int(sys.argv[2]), dry_run=False, full=True,
                                         enforce_retention_duration=False)
print("deleted", len(deleted))
"""


def data_files(root: Path) -> list[str]:
    """Table-relative paths of every file outside ``_delta_log`` (and not the spec marker)."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        if rel == ".":
            dirnames[:] = [d for d in dirnames if d != "_delta_log"]
            filenames = [f for f in filenames if f != SPEC_FILE]
            rel = ""
        out.extend(os.path.join(rel, f) for f in filenames)
    return out


def restore(pristine: Path, work: Path) -> None:
    """Rebuild ``work``: a copy of the pristine ``_delta_log``, hard links for every data file."""
    if work.exists():
        shutil.rmtree(work)
    shutil.copytree(pristine / "_delta_log", work / "_delta_log")
    for dirpath, dirnames, filenames in os.walk(pristine):
        rel = os.path.relpath(dirpath, pristine)
        if rel == ".":
            dirnames[:] = [d for d in dirnames if d != "_delta_log"]
            filenames = [f for f in filenames if f != SPEC_FILE]
        target = work / rel
        target.mkdir(parents=True, exist_ok=True)
        for name in filenames:
            os.link(os.path.join(dirpath, name), target / name)


def log_entries(work: Path) -> set[str]:
    return set(os.listdir(work / "_delta_log"))


class Side:
    """One tool's measurement plus what each of its runs deleted."""

    def __init__(self, label: str, cmd: list[str], work: Path) -> None:
        self.m = Measurement(label=label, cmd=cmd)
        self.work = work
        self.deleted: list[int] = []
        self.new_log_files: list[str] = []
        self.removed_log_files: list[str] = []

    def run(
        self,
        pristine: Path,
        pristine_log: set[str],
        expected_deleted: int,
        live: frozenset[str],
        timed: bool,
    ) -> None:
        """One run on a rebuilt copy; raises Mismatch unless exactly the `live` files are left."""
        if self.m.error is not None:
            return
        restore(pristine, self.work)
        result = run_fresh(self.m.cmd, timeout=1800)
        if not result.ok:
            self.m.error = result.error_summary()
            return
        left_files = set(data_files(self.work))
        left = len(left_files)
        deleted = expected_deleted + len(live) - left
        log_now = log_entries(self.work)
        new_log, removed_log = sorted(log_now - pristine_log), sorted(pristine_log - log_now)
        line = f"deleted {deleted} (expected {expected_deleted}); log +{len(new_log)} -{len(removed_log)}"
        print(
            f"  {self.m.label:<9} {'run' if timed else 'warm-up'}: {result.wall_s:7.3f} s  {line}",
            flush=True,
        )
        difference = set_difference(
            f"data files left by {self.m.label}", left_files, "live files in the log", live
        )
        if difference:
            raise Mismatch(f"{difference} ({line})")
        self.m.output = line
        self.new_log_files, self.removed_log_files = new_log, removed_log
        if timed:
            self.m.runs.append(result)
            self.deleted.append(deleted)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--commits", type=int, default=2000)
    p.add_argument("--adds", type=int, default=50)
    p.add_argument("--remove-every", type=int, default=5)
    p.add_argument("--orphans", type=int, default=1000)
    p.add_argument("--age-days", type=float, default=30.0)
    p.add_argument("--target-wall", type=float, default=0.4)
    a = p.parse_args(argv)
    if a.age_days <= RETENTION_DAYS + 1:
        p.error(f"--age-days must exceed the {RETENTION_DAYS}-day retention (plus a day of margin)")
    try:
        return run(a)
    except Mismatch as exc:
        return report_mismatch("bench_vacuum", exc)


def live_files(pristine: Path) -> frozenset[str]:
    """The live files of the pristine table as deltalake reads its log (untimed, once)."""
    import pyarrow.parquet as pq

    state = read_state(pristine, DATA / "vacuum-verify" / "expected")
    return frozenset(pq.read_table(state.files_path, columns=["path"])["path"].to_pylist())


def run(a: argparse.Namespace) -> int:
    """The benchmark; raises Mismatch when a side did not do the expected work."""

    name = f"vacuum-{a.commits}x{a.adds}-r{a.remove_every}-o{a.orphans}-a{a.age_days:g}"
    pristine = DATA / name
    print(f"preparing {pristine} (generated once, then reused) ...", flush=True)
    spec = ensure_synthetic_table(
        pristine,
        commits=a.commits,
        adds_per_commit=a.adds,
        remove_every=a.remove_every,
        seed=0,
        with_data_files=True,
        orphans=a.orphans,
        age_days=a.age_days,
    )
    n_live, n_tomb, n_orph = spec["num_live"], spec["num_tombstones"], spec["num_orphans"]
    n_total = len(data_files(pristine))
    if n_total != n_live + n_tomb + n_orph:
        print(
            f"error: pristine {pristine} holds {n_total} data files, spec says "
            f"{n_live + n_tomb + n_orph}; delete it to regenerate",
            file=sys.stderr,
        )
        return 2
    expected_deleted = n_tomb + n_orph
    print(
        f"table {pristine}: version {spec['version']}, {n_total} data files on disk = {n_live} live + "
        f"{n_tomb} tombstoned + {n_orph} orphans, all {a.age_days:g} days old; retention {RETENTION_DAYS} days"
    )
    pristine_log = log_entries(pristine)

    py = sys.executable
    work_ours, work_theirs = DATA / "vacuum-work-ours", DATA / "vacuum-work-theirs"
    ours = Side(
        "delta-ops",
        [
            py,
            "-m",
            "delta_ops.cli",
            "vacuum",
            str(work_ours),
            "--retention",
            f"{RETENTION_DAYS} days",
            "--mode",
            "full",
            "--json",
        ],
        work_ours,
    )
    theirs = Side(
        "delta-rs", [py, "-c", THEIRS, str(work_theirs), str(RETENTION_DAYS * 24)], work_theirs
    )

    live = live_files(pristine)
    if len(live) != n_live:
        raise Mismatch(
            f"deltalake reads {len(live)} live files in {pristine}, the spec says {n_live}"
        )
    args = (pristine, pristine_log, expected_deleted, live)
    for _ in range(max(1, a.warmup)):
        ours.run(*args, timed=False)
        theirs.run(*args, timed=False)
    for _ in range(a.runs):
        ours.run(*args, timed=True)
        theirs.run(*args, timed=True)
    for side in (ours, theirs):
        if side.work.exists():
            shutil.rmtree(side.work)
    if (
        len(data_files(pristine)) != n_total
    ):  # a hard link must never take the pristine file with it
        print("error: the pristine table lost files", file=sys.stderr)
        return 2

    if ours.m.ok and theirs.m.ok:
        print(
            f"same work: every run of both left exactly the {n_live} live files "
            f"(deleted the {expected_deleted} others)"
        )
    title = f"full vacuum, {n_total} files, delete {expected_deleted}"
    comparison = Comparison(ours=ours.m, theirs=theirs.m, name=title)
    print(format_result(comparison, a.target_wall, None))
    for side in (ours, theirs):
        if side.m.ok:
            print(
                f"{side.m.label}: log files added per run: {', '.join(side.new_log_files) or 'none'}; "
                f"removed: {len(side.removed_log_files)}"
            )
    verdict = evaluate(comparison, a.target_wall, None)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "bench_vacuum.json").write_text(
        json.dumps(
            {
                "table": {**spec, "path": str(pristine), "data_files": n_total},
                "expected_deleted": expected_deleted,
                "deleted": {"ours": ours.deleted, "theirs": theirs.deleted},
                "new_log_files": {"ours": ours.new_log_files, "theirs": theirs.new_log_files},
                "removed_log_files": {
                    "ours": ours.removed_log_files,
                    "theirs": theirs.removed_log_files,
                },
                "comparison": comparison.to_dict(),
                "target_wall_ratio": a.target_wall,
                "verdict": verdict.label,
            },
            indent=2,
        )
        + "\n"
    )
    if not ours.m.ok:
        return 3
    return 0 if verdict.passed else 1


if __name__ == "__main__":
    sys.exit(main())
