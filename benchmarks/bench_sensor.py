"""Benchmark: one commit-sensor tick on a 100,000-commit log (issue 16).

A Dagster sensor tick runs inside the long-lived daemon, so this measures in-process: the call
the sensor makes, `probe_commits(storage, known_version=cursor)`, with the cursor at the latest
version (no new commit) and ten versions behind (ten new commits). The log is synthetic: one
commit creating the table, then 99,999 commits of one small `add` each, no checkpoint (the
worst case for anything that lists or replays). Beside it, delta-rs' incremental refresh of an
already loaded `DeltaTable` (`update_incremental()`) for the same two situations.

Targets: no new commit < 20 ms; ten new commits < 50 ms; the cost grows with new commits only
(a second log ten times smaller must give the same times).

Same work, checked before timing: both sides must find the latest version (ours idle with a
single existence check, and from ten versions behind; delta-rs' refreshed table at it); a
difference prints ``MISMATCH: ...`` and exits 1.

    python benchmarks/bench_sensor.py [--commits 100000] [--repeat 50]

Exit status: 0 targets met, 1 MISMATCH, 3 targets not met.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.verify import Mismatch, report_mismatch

DATA = ROOT / "benchmarks" / ".data"
NEW_COMMITS = 10
TARGET_IDLE_MS = 20.0
TARGET_NEW_MS = 50.0


def build_log(table: Path, commits: int) -> None:
    """`commits` commit files, written directly (a few seconds for 100k)."""
    log = table / "_delta_log"
    if (log / f"{commits - 1:020d}.json").exists() and not (log / f"{commits:020d}.json").exists():
        return
    shutil.rmtree(table, ignore_errors=True)
    log.mkdir(parents=True)
    schema = {
        "type": "struct",
        "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}],
    }
    first = [
        {"commitInfo": {"timestamp": 0, "operation": "CREATE TABLE"}},
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
        {
            "metaData": {
                "id": "bench-sensor",
                "format": {"provider": "parquet", "options": {}},
                "schemaString": json.dumps(schema),
                "partitionColumns": [],
                "configuration": {"delta.checkpointInterval": "1000000"},
                "createdTime": 0,
            }
        },
    ]
    (log / f"{0:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in first))
    for v in range(1, commits):
        add = {
            "add": {
                "path": f"part-{v}.parquet",
                "partitionValues": {},
                "size": 100,
                "modificationTime": v,
                "dataChange": True,
            }
        }
        info = {"commitInfo": {"timestamp": v, "operation": "WRITE"}}
        (log / f"{v:020d}.json").write_text(json.dumps(info) + "\n" + json.dumps(add) + "\n")


def timed_ms(call: Callable[[], object], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def measure(table: Path, commits: int, repeat: int) -> dict[str, float]:
    from deltalake import DeltaTable

    from delta_ops.service.probe import probe_commits
    from delta_ops.storage import Storage

    storage = Storage.open(str(table))
    latest = commits - 1
    idle = probe_commits(storage, known_version=latest, known_interval=1_000_000)
    if idle.latest_version != latest or idle.files_checked != 1:
        raise Mismatch(
            f"delta-ops' idle probe found version {idle.latest_version} with "
            f"{idle.files_checked} checks, expected {latest} with 1"
        )
    behind = probe_commits(storage, known_version=latest - NEW_COMMITS, known_interval=1_000_000)
    if behind.latest_version != latest:
        raise Mismatch(
            f"delta-ops' probe from {NEW_COMMITS} behind found version "
            f"{behind.latest_version}, expected {latest}"
        )
    out = {
        "ours_idle_ms": timed_ms(
            lambda: probe_commits(storage, known_version=latest, known_interval=1_000_000),
            repeat,
        ),
        "ours_new_ms": timed_ms(
            lambda: probe_commits(
                storage, known_version=latest - NEW_COMMITS, known_interval=1_000_000
            ),
            repeat,
        ),
    }
    start = time.perf_counter()
    dt = DeltaTable(str(table))
    out["theirs_load_s"] = time.perf_counter() - start
    if dt.version() != latest:
        raise Mismatch(f"delta-rs loads version {dt.version()}, expected {latest}")
    out["theirs_idle_ms"] = timed_ms(dt.update_incremental, repeat)
    behind_tables = [DeltaTable(str(table), version=latest - NEW_COMMITS) for _ in range(3)]
    samples = []
    for t in behind_tables:
        start = time.perf_counter()
        t.update_incremental()
        samples.append((time.perf_counter() - start) * 1000)
        if t.version() != latest:
            raise Mismatch(
                f"delta-rs refreshed from {NEW_COMMITS} behind to {t.version()}, expected {latest}"
            )
    out["theirs_new_ms"] = statistics.median(samples)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commits", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=50)
    args = parser.parse_args(argv)
    if args.commits // 10 <= NEW_COMMITS:
        parser.error(f"--commits must be at least {(NEW_COMMITS + 1) * 10}")
    rows = []
    for commits in (args.commits, args.commits // 10):
        table = DATA / f"sensor-{commits}"
        start = time.perf_counter()
        build_log(table, commits)
        print(f"log of {commits} commits ready in {time.perf_counter() - start:.1f} s")
        try:
            rows.append((commits, measure(table, commits, args.repeat)))
        except Mismatch as exc:
            return report_mismatch("bench_sensor", exc)
    print(f"\n== commit sensor tick (median of {args.repeat}, in process) ==")
    print(
        f"{'commits':>9} {'ours idle':>10} {'ours +10':>9} {'delta-rs idle':>14} {'delta-rs +10':>13}"
    )
    for commits, m in rows:
        print(
            f"{commits:>9} {m['ours_idle_ms']:>8.2f}ms {m['ours_new_ms']:>7.2f}ms "
            f"{m['theirs_idle_ms']:>12.2f}ms {m['theirs_new_ms']:>11.2f}ms"
            f"   (delta-rs initial load {m['theirs_load_s']:.1f} s)"
        )
    big = rows[0][1]
    ok = big["ours_idle_ms"] < TARGET_IDLE_MS and big["ours_new_ms"] < TARGET_NEW_MS
    print(
        f"targets: idle < {TARGET_IDLE_MS:.0f} ms, +{NEW_COMMITS} < {TARGET_NEW_MS:.0f} ms: "
        f"{'met' if ok else 'NOT met'}"
    )
    return 0 if ok else 3


if __name__ == "__main__":
    sys.exit(main())
