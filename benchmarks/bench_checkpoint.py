"""Benchmark: checkpoint a 2000-commit / 100k-add log, fresh process (load + write).

Ours:   ``delta-ops checkpoint PATH --json`` (``python -m delta_ops.cli``)
Theirs: ``DeltaTable(PATH).create_checkpoint()``

Before every timed run the working copy's ``_delta_log`` is restored from the pristine synthetic
log (untimed), so each run writes a checkpoint from JSON. Runs alternate ours / theirs after one
warm-up each. Targets: median wall ours/theirs <= 0.3 (issue 35), peak RSS ours <= theirs.

Same work, checked after every run (warm-up included) before any ratio is printed: the
checkpoint each side wrote is put alone (with that side's ``_last_checkpoint``, no JSON commit)
into a scratch table, which ``deltalake`` must load with the state it loads from the pristine
JSON log: the same version, protocol, metaData and live files (path, size, modification time,
``numRecords``). Read straight from the parquet, both checkpoints must also hold the same rows
of each other action kind and keep the same tombstones (both keep every unexpired remove).
A difference prints ``MISMATCH: ...`` and exits 1.

``--big`` instead checkpoints a 1,000,000-file log (10k commits x 100 adds, no removes) with our
command only and checks its peak RSS stays under 4 GB, and that deltalake reads the checkpoint
with the log's state.

    python benchmarks/bench_checkpoint.py [--runs 5] [--big]
        [--commits 2000 --adds 50 --remove-every 5]   (--big: 10000, 100, 0)

Exit status: 0 PASS, 1 FAIL (target missed, a side failed, or MISMATCH).
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
from benchmarks.verify import (
    CheckpointContents,
    Mismatch,
    TableState,
    checkpoint_contents,
    checkpoint_only_copy,
    contents_difference,
    read_state,
    report_mismatch,
    state_difference,
)

DATA = ROOT / "benchmarks" / ".data"
RESULTS = DATA / "results"
THEIRS = "import sys; from deltalake import DeltaTable; DeltaTable(sys.argv[1]).create_checkpoint(); print('ok')"


def restore(pristine: Path, work: Path) -> None:
    """Reset `work` to the pristine log (no checkpoint, no _last_checkpoint)."""
    if work.exists():
        shutil.rmtree(work)
    shutil.copytree(pristine / "_delta_log", work / "_delta_log")


class Checker:
    """Checks each side's checkpoint against the state deltalake loads from the pristine log,
    and both sides' checkpoints against each other."""

    def __init__(self, pristine: Path, version: int) -> None:
        self.version = version
        self.expected: TableState = read_state(pristine, DATA / "cp-verify" / "expected")
        self.contents: dict[str, CheckpointContents] = {}

    def check(self, label: str, work: Path) -> None:
        """Raises Mismatch naming the first difference."""
        log = work / "_delta_log"
        scratch = checkpoint_only_copy(log, self.version, DATA / "cp-verify" / f"{label}-table")
        got = read_state(scratch, DATA / "cp-verify" / f"{label}-state")
        where = f"the checkpoint {label} wrote (read alone by deltalake)"
        difference = state_difference("the JSON log", self.expected, where, got)
        if difference:
            raise Mismatch(difference)
        contents = checkpoint_contents(log, self.version)
        self.contents[label] = contents
        for other, theirs in self.contents.items():
            difference = contents_difference(label, contents, other, theirs)
            if difference:
                raise Mismatch(difference)

    def describe(self) -> str:
        rows = next(iter(self.contents.values())).rows
        return (
            f"same work: both checkpoints read back by deltalake as the log's state "
            f"({self.expected.summary()}); both keep {rows['remove']} tombstones"
        )


def timed(
    label: str,
    cmd: list[str],
    pristine: Path,
    work: Path,
    checker: Checker,
    measurement: Measurement | None,
) -> Measurement:
    """One run of `cmd` on a restored copy (the warm-up when `measurement` is None), its
    checkpoint checked. Raises Mismatch."""
    m = measurement or Measurement(label=label, cmd=cmd)
    restore(pristine, work)
    result = run_fresh(cmd)
    if not result.ok:
        m.error = result.error_summary()
        return m
    checker.check(label, work)
    if measurement is None:
        m.output = result.first_line[:60]
    else:
        m.runs.append(result)
    return m


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--big", action="store_true", help="checkpoint the 1M-file log (ours only)")
    p.add_argument("--commits", type=int, help="commits of the log (2000; --big: 10000)")
    p.add_argument("--adds", type=int, help="adds per commit (50; --big: 100)")
    p.add_argument("--remove-every", type=int, help="(5; --big: 0)")
    p.add_argument("--target-wall", type=float, default=0.3)  # issue 35
    a = p.parse_args(argv)
    try:
        return run(a)
    except Mismatch as exc:
        return report_mismatch("bench_checkpoint", exc)


def run(a: argparse.Namespace) -> int:
    """The benchmark; raises Mismatch when the sides did not do the same work."""
    py = sys.executable
    ours = [py, "-m", "delta_ops.cli", "checkpoint"]
    RESULTS.mkdir(parents=True, exist_ok=True)

    if a.big:
        commits = 10_000 if a.commits is None else a.commits
        adds = 100 if a.adds is None else a.adds
        remove_every = 0 if a.remove_every is None else a.remove_every
        pristine = DATA / f"cp-{commits}x{adds}"
        if remove_every:
            pristine = pristine.with_name(pristine.name + f"-r{remove_every}")
        spec = ensure_synthetic_table(
            pristine, commits=commits, adds_per_commit=adds, remove_every=remove_every, seed=1
        )
        work = DATA / "cp-work-big"
        checker = Checker(pristine, spec["version"])
        m = Measurement(label="delta-ops", cmd=ours)
        for _ in range(max(1, a.runs // 2)):
            timed(m.label, [*ours, str(work), "--json"], pristine, work, checker, m)
        print(f"table {pristine}: version {spec['version']}, {spec['num_live']} live files")
        if m.ok:
            print(
                f"deltalake reads the checkpoint as the log's state: {checker.expected.summary()}"
            )
        print(format_measurements([m], f"checkpoint {spec['num_live']:,}-file log"))
        ok = m.ok and m.max_rss_mb < 4096
        print(f"peak RSS {m.max_rss_mb:.0f} MB (limit 4096 MB) => {'PASS' if ok else 'FAIL'}")
        (RESULTS / "bench_checkpoint_big.json").write_text(
            json.dumps({"table": spec, "ours": m.to_dict(), "pass": ok}, indent=2) + "\n"
        )
        return 0 if ok else 1

    commits = 2000 if a.commits is None else a.commits
    adds = 50 if a.adds is None else a.adds
    remove_every = 5 if a.remove_every is None else a.remove_every
    pristine = DATA / f"load-{commits}x{adds}"  # bench_load.py's naming: the same table
    if remove_every != 5:
        pristine = pristine.with_name(pristine.name + f"-r{remove_every}")
    spec = ensure_synthetic_table(
        pristine, commits=commits, adds_per_commit=adds, remove_every=remove_every, seed=0
    )
    version = spec["version"]
    print(
        f"table {pristine}: version {version}, {spec['num_live']} live files, {spec['num_tombstones']} tombstones"
    )
    checker = Checker(pristine, version)
    work_ours, work_theirs = DATA / "cp-work-ours", DATA / "cp-work-theirs"
    ours_cmd = [*ours, str(work_ours), "--json"]
    theirs_cmd = [py, "-c", THEIRS, str(work_theirs)]
    m_ours = timed("delta-ops", ours_cmd, pristine, work_ours, checker, None)
    m_theirs = timed("delta-rs", theirs_cmd, pristine, work_theirs, checker, None)
    for _ in range(a.runs):
        if m_ours.error is None:
            timed("delta-ops", ours_cmd, pristine, work_ours, checker, m_ours)
        if m_theirs.error is None:
            timed("delta-rs", theirs_cmd, pristine, work_theirs, checker, m_theirs)
    if m_ours.ok and m_theirs.ok:
        print(checker.describe())
    comparison = Comparison(ours=m_ours, theirs=m_theirs, name=f"checkpoint {commits}-commit log")
    print(format_result(comparison, a.target_wall, 1.0))
    verdict = evaluate(comparison, a.target_wall, 1.0)
    (RESULTS / "bench_checkpoint.json").write_text(
        json.dumps(
            {"table": spec, "comparison": comparison.to_dict(), "verdict": verdict.label}, indent=2
        )
        + "\n"
    )
    return 0 if verdict.passed else 1


if __name__ == "__main__":
    sys.exit(main())
