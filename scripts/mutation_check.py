"""Hand-made mutants of delta-ops' protection and cutoff logic, run against the general
reliability suite alone (the model-based histories, the crash sweep and the concurrency test):
how many data-loss bugs nobody has named does that suite catch?

Each mutant is one small edit a plausible bug would make (a retention off by a day, a
protection dropped, a clock not clamped, a wrong timestamp written). For each, the repository
is copied to a scratch folder, the edit applied there (the working tree is never touched), and
the suite run with `-x`: a failing suite kills the mutant, a passing one lets it survive.

With `--races`, the mutants are those of the races with Delta Spark instead
(tests/reference/test_races.py, issue 47): each is aimed at some of the race scenarios, which
alone are run against it (`-k` is not used: every scenario it names runs, without `-x`), and
the summary says which scenarios each mutant turned red and which scenario no mutant did.

Usage::

    .venv/bin/python scripts/mutation_check.py              # every mutant, a summary at the end
    .venv/bin/python scripts/mutation_check.py --races      # the race mutants (Delta Spark)
    RACE_WRITES=20 MUTATION_RACES=purge,restore .venv/bin/python scripts/mutation_check.py --races
    .venv/bin/python scripts/mutation_check.py vacuum-retention-a-day-short  # some by name
    RELIABILITY_HISTORIES=40 .venv/bin/python scripts/mutation_check.py  # a longer model run
    MUTATION_SUITE=tests/reliability/test_model.py .venv/bin/python scripts/mutation_check.py

The score it prints (killed / total) goes into the closing note of the issue that changed the
suite. It runs for tens of minutes on two cores: never beside a benchmark or a Spark suite.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SUITE = (
    "tests/reliability/test_model.py",
    "tests/reliability/test_crashes.py",
    "tests/reliability/test_concurrency.py",
)


@dataclass(frozen=True)
class Mutant:
    """A one-place edit of a product file: `old` (which must occur exactly once) -> `new`,
    with any further edits (`also`: (path, old, new)) of the same bug."""

    name: str
    path: str
    old: str
    new: str
    also: tuple[tuple[str, str, str], ...] = ()
    #: the race scenarios it is aimed at (`--races`)
    races: tuple[str, ...] = ()

    @property
    def edits(self) -> tuple[tuple[str, str, str], ...]:
        return ((self.path, self.old, self.new), *self.also)


#: the local commit: link the staged file to the commit's name, refused when it exists
LOCAL_COMMIT = (
    "            try:\n"
    "                os.link(tmp, path)\n"
    "            except FileExistsError:\n"
    "                return False\n"
    "        _drop_hadoop_checksum_of(path)\n"
)

MUTANTS = (
    # ---- written with the suite's widening (issue 27), which aimed at each of these
    Mutant(
        "vacuum-retention-a-day-short",
        "delta_ops/ops/vacuum.py",
        "    delete_before = now_ms - retention\n",
        "    delete_before = now_ms - retention + 86_400_000\n",
    ),
    Mutant(
        "vacuum-forgets-window-removes",
        "delta_ops/ops/vacuum.py",
        "[protected_array(snapshot, delete_before), window_removes(snapshot, latest_outside)]",
        "[protected_array(snapshot, delete_before)]",
    ),
    Mutant(
        "vacuum-unexpired-tombstones-unprotected",
        "delta_ops/ops/vacuum.py",
        '            pc.fill_null(tombstones.column("deletionTimestamp"), 0), delete_before_ms\n',
        '            pc.fill_null(tombstones.column("deletionTimestamp"), 0), 2**62\n',
    ),
    Mutant(
        "vacuum-dv-files-of-live-files-unprotected",
        "delta_ops/ops/vacuum.py",
        "        _dv_relative_paths(snapshot.file_index),\n",
        "",
    ),
    Mutant(
        "vacuum-no-in-flight-grace",
        "delta_ops/ops/vacuum.py",
        "    in_flight_cutoff = now_ms - max(0, in_flight_grace_ms)\n",
        "    in_flight_cutoff = now_ms + 10**12\n",
    ),
    Mutant(
        "vacuum-future-now-not-clamped",
        "delta_ops/ops/vacuum.py",
        "    now_ms = clamped.now_ms\n",
        "",
    ),
    Mutant(
        "cleanup-cutoff-not-truncated-to-the-day",
        "delta_ops/ops/log_cleanup.py",
        "    cutoff = (now_ms - retention) // truncate_to_ms * truncate_to_ms\n",
        "    cutoff = now_ms - retention + 86_400_000\n",
    ),
    Mutant(
        "cleanup-deletes-up-to-the-latest-checkpoint",
        "delta_ops/ops/log_cleanup.py",
        "_expiry(snapshot, cutoff), hint.info.version - 1)",
        "_expiry(snapshot, cutoff), hint.info.version)",
    ),
    Mutant(
        "cleanup-future-now-not-clamped",
        "delta_ops/ops/log_cleanup.py",
        "    plan = _plan_cleanup(snapshot, clamped.now_ms, retention_ms, truncate_to_ms, even_if_disabled)\n",
        "    plan = _plan_cleanup(snapshot, now_ms, retention_ms, truncate_to_ms, even_if_disabled)\n",
    ),
    Mutant(
        "rewrite-removes-dated-a-week-early",
        "delta_ops/ops/rewrite.py",
        "        self.now = clock.now_ms()\n",
        "        self.now = clock.now_ms() - 7 * 86_400_000\n",
    ),
    Mutant(
        "commit-timestamp-from-the-real-clock",
        "delta_ops/table/transaction.py",
        '"timestamp": in_commit_timestamp or clock.now_ms(),',
        '"timestamp": in_commit_timestamp or int(time.time() * 1000),',
    ),
    # ---- written after the suite was done, none of them aimed at by a step of it
    Mutant(
        "checkpoint-drops-every-tombstone",
        "delta_ops/log/checkpoint_content.py",
        "    return tombstones.filter(pc.greater(deleted_at, cutoff_ms))\n",
        "    return tombstones.filter(pc.greater(deleted_at, 2**62))\n",
    ),
    Mutant(
        "commit-times-not-monotonic",
        "delta_ops/table/commit_times.py",
        "        if previous is not None and stamp <= previous:\n            stamp = previous + 1\n",
        "",
    ),
    Mutant(
        "cleanup-expiry-one-day-late-is-early",
        "delta_ops/ops/log_cleanup.py",
        "            return adjusted_mtime <= cutoff_ms\n",
        "            return adjusted_mtime <= cutoff_ms + 86_400_000\n",
    ),
    Mutant(
        "version-at-one-too-new",
        "delta_ops/table/commit_times.py",
        "            if stamp > timestamp_ms:\n                break\n            best = version\n",
        "            best = version\n            if stamp > timestamp_ms:\n                break\n",
    ),
    Mutant(
        "vacuum-lite-ignores-protection",
        "delta_ops/ops/vacuum.py",
        "            snapshot, delete_before, latest_outside, protected_set, tombstone_paths\n",
        "            snapshot, delete_before, latest_outside, set(), tombstone_paths\n",
    ),
    # ---- written with the crash sweep's widening (issue 27.d): the local storage path (temp
    # file + link or replace), what a crash or an I/O error there leaves, and the cutoffs
    Mutant(
        "local-hint-written-in-place",
        "delta_ops/storage/local_backend.py",
        "        with _staged_local(path, lambda f: f.write(data)) as tmp:\n"
        "            os.replace(tmp, path)\n",
        '        with open(path, "wb") as f:\n            f.write(data)\n',
    ),
    Mutant(
        "local-commit-written-in-place",
        "delta_ops/storage/local_backend.py",
        LOCAL_COMMIT,
        "            try:\n"
        '                with open(path, "xb") as f:\n'
        "                    f.write(data)\n"
        "            except FileExistsError:\n"
        "                return False\n"
        "        _drop_hadoop_checksum_of(path)\n",
    ),
    Mutant(
        "local-checkpoint-and-data-written-in-place",
        "delta_ops/storage/local_backend.py",
        "        with _staged_local(path, write) as tmp:\n"
        "            size = os.path.getsize(tmp)\n",
        "        try:\n"
        '            with open(path, "xb") as f:\n'
        "                write(f)\n"
        "            return True, os.path.getsize(path)\n"
        "        except FileExistsError:\n"
        "            return False, 0\n"
        "        with _staged_local(path, write) as tmp:\n"
        "            size = os.path.getsize(tmp)\n",
    ),
    Mutant(
        "local-tree-listing-skips-unreadable-directories",
        "delta_ops/storage/local_backend.py",
        "os.walk(top, onerror=_raise_unless_gone)",
        "os.walk(top)",
    ),
    Mutant(
        "checkpoint-hint-before-the-parts",
        "delta_ops/ops/checkpoint_writer.py",
        "    files = checkpoint_files(plan)\n",
        "    files = checkpoint_files(plan)\n"
        '    _update_last_checkpoint(storage, plan.version, {"version": plan.version,'
        ' "size": plan.state.num_actions})\n',
    ),
    Mutant(
        "rewrite-deletes-the-files-it-replaced",
        "delta_ops/ops/rewrite.py",
        "            return txn.commit().version\n",
        "            version = txn.commit().version\n"
        "            self.storage.delete([self.storage.table_path(p) for p in removes.paths])\n"
        "            return version\n",
    ),
    Mutant(
        "cleanup-cutoff-a-day-late",
        "delta_ops/ops/log_cleanup.py",
        "    cutoff = (now_ms - retention) // truncate_to_ms * truncate_to_ms\n",
        "    cutoff = (now_ms - retention) // truncate_to_ms * truncate_to_ms + 86_400_000\n",
    ),
    # ---- written with restore (issue 30): the suite gained it in both the model and the sweep
    Mutant(
        "restore-compares-paths-alone",
        "delta_ops/ops/restore.py",
        '    return file_keys(paths, dv_unique_ids(files.column("deletionVector")).cast(pa.string()))\n',
        "    return paths\n",
    ),
    Mutant(
        "restore-keeps-files-written-since",
        "delta_ops/ops/restore.py",
        "    removes = encode_removes(removed, deletion_timestamp=clock.now_ms(), data_change=True)\n",
        "    removes = encode_removes(removed.slice(0, 0), deletion_timestamp=clock.now_ms(),"
        " data_change=True)\n",
    ),
    # ---- written with the feature drop (issue 30) and the segment rule's fix (session 2026-11-27)
    Mutant(
        "cleanup-segment-judged-by-its-newest-file",
        "delta_ops/ops/log_cleanup.py",
        "            and all(expired(b, t) for b, t in buffer if b.kind is LogFileKind.COMMIT)\n",
        "            and True\n",
    ),
    Mutant(
        "cleanup-ignores-checkpoint-protection",
        "delta_ops/ops/log_cleanup.py",
        "    protected = protection_version(snapshot)\n",
        "    protected = 0\n",
    ),
    Mutant(
        "drop-truncates-inside-its-retention",
        "delta_ops/ops/drop_feature.py",
        "        retention_ms=retention_ms,\n        truncate_to_ms=MINUTE_MS,\n",
        "        retention_ms=0,\n        truncate_to_ms=MINUTE_MS,\n",
    ),
    Mutant(
        "fast-drop-without-checkpoint-protection",
        "delta_ops/ops/drop_feature.py",
        "    protect = feature in PROTECTED\n",
        "    protect = False\n",
    ),
)

RACES = "tests/reference/test_races.py::test_race_with_delta_spark"

#: bugs of what a race with Delta Spark exercises, each aimed at some of its scenarios
RACE_MUTANTS = (
    Mutant(
        "commit-skips-the-path-clash-check",
        "delta_ops/table/transaction.py",
        "        clash = (winner.touched_paths & ours) - resolved\n",
        "        clash: set[str] = set()\n",
        races=("compact", "zorder", "liquid", "purge", "drop-feature"),
    ),
    Mutant(
        "restore-ignores-data-changed-meanwhile",
        "delta_ops/ops/restore.py",
        "        reads_whole_table=True,",
        "        reads_whole_table=False,",
        races=("restore",),
    ),
    Mutant(
        "checkpoint-named-one-version-ahead",
        "delta_ops/ops/checkpoint_writer.py",
        "    version = snapshot.version\n",
        "    version = snapshot.version + 1\n",
        races=("checkpoint",),
    ),
    Mutant(
        "cleanup-deletes-its-boundary-checkpoint",
        "delta_ops/ops/log_cleanup.py",
        "_expiry(snapshot, cutoff), hint.info.version - 1)",
        "_expiry(snapshot, cutoff), hint.info.version)",
        races=("cleanup",),
    ),
    Mutant(
        "vacuum-without-grace-or-recheck",
        "delta_ops/ops/vacuum.py",
        "    in_flight_cutoff = now_ms - max(0, in_flight_grace_ms)\n",
        "    in_flight_cutoff = now_ms + 10**12\n",
        also=(
            (
                "delta_ops/ops/vacuum.py",
                "    to_delete = [c for c in plan.candidates if c.path not in referenced]\n",
                "    to_delete = list(plan.candidates)\n",
            ),
        ),
        races=("vacuum-full", "vacuum-lite", "kill"),
    ),
    Mutant(
        "row-ids-from-a-stale-high-water-mark",
        "delta_ops/table/transaction.py",
        '                    hwm = int(json.loads(d["configuration"])["rowIdHighWaterMark"])\n',
        "                    pass\n",
        races=("row-tracking",),
    ),
    # plain bugs of each operation's result, for the scenarios whose concurrency mutant above
    # needs a commit to land in a window the race does not aim at (see the closing notes)
    Mutant(
        "vacuum-protects-no-live-file",
        "delta_ops/ops/vacuum.py",
        '        relative_paths(storage, snapshot.file_index.column("path"))\n'
        "        if snapshot.file_index.num_rows\n"
        "        else pa.array([], pa.string()),\n",
        "        pa.array([], pa.string()),\n",
        races=("vacuum-full", "vacuum-lite"),
    ),
    Mutant(
        "restore-keeps-the-files-written-since-n",
        "delta_ops/ops/restore.py",
        "    removes = encode_removes(removed, deletion_timestamp=clock.now_ms(), data_change=True)\n",
        "    removes = encode_removes(removed.slice(0, 0), deletion_timestamp=clock.now_ms(),"
        " data_change=True)\n",
        races=("restore",),
    ),
    Mutant(
        "row-ids-counted-one-short",
        "delta_ops/table/transaction.py",
        "            mark += count\n",
        "            mark += count - 1\n",
        races=("row-tracking",),
    ),
    Mutant(
        "writer-commits-without-its-last-file",
        "delta_ops/table/writer.py",
        "    for f in files:\n        full = storage.join(f.relative_path)\n",
        "    for f in files[:-1]:\n        full = storage.join(f.relative_path)\n",
        races=("mirror",),
    ),
    Mutant(
        "local-commit-overwrites",
        "delta_ops/storage/local_backend.py",
        LOCAL_COMMIT,
        "            os.replace(tmp, path)\n        _drop_hadoop_checksum_of(path)\n",
        races=("mirror",),
    ),
)


def _copy_repo(dest: Path) -> None:
    """The tracked files and the work tree's edits, without the virtualenv or caches."""
    linked = ("node_modules", ".venv-reference", "build")  # big, and never mutated: shared
    ignore = shutil.ignore_patterns(
        ".venv", ".git", "__pycache__", ".hypothesis", ".dagster", "warehouse", *linked
    )
    shutil.copytree(REPO, dest, ignore=ignore, symlinks=True)
    for name in linked:
        if (REPO / name).exists():
            (dest / name).symlink_to(REPO / name)


def _apply(mutant: Mutant, root: Path) -> None:
    for path, old, new in mutant.edits:
        target = root / path
        text = target.read_text()
        if text.count(old) != 1:
            raise SystemExit(f"{mutant.name}: the edit does not match {path} exactly once")
        target.write_text(text.replace(old, new))


def _races_of(mutant: Mutant) -> tuple[str, ...]:
    """The mutant's race scenarios, or those of them MUTATION_RACES names (comma-separated)."""
    only = {n for n in os.environ.get("MUTATION_RACES", "").split(",") if n}
    return tuple(n for n in mutant.races if not only or n in only)


def _suite(mutant: Mutant) -> list[str]:
    """What runs against the mutant: its race scenarios, else the reliability suite (or
    MUTATION_SUITE), stopping at the first failure."""
    if mutant.races:
        return ["-rA", *(f"{RACES}[{name}]" for name in _races_of(mutant))]
    chosen = os.environ.get("MUTATION_SUITE")
    return ["-x", *(chosen.split(",") if chosen else SUITE)]


def run(mutant: Mutant, python: str) -> tuple[bool, float, str]:
    """(killed, seconds, the suite's last line, or the race scenarios it turned red)."""
    with tempfile.TemporaryDirectory(prefix=f"mutant-{mutant.name}-") as scratch:
        root = Path(scratch) / "repo"
        _copy_repo(root)
        _apply(mutant, root)
        env = {
            **os.environ,
            "PYTHONPATH": str(root),
            "CI": "true",
            "HYPOTHESIS_PROFILE": "mutation",
        }
        start = time.monotonic()
        proc = subprocess.run(
            [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:logging"]
            + _suite(mutant),
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        lines = [line for line in proc.stdout.splitlines() if line.strip()]
        seconds = time.monotonic() - start
        if mutant.races:
            red = [
                n for n in _races_of(mutant) if any(f"FAILED {RACES}[{n}]" in ln for ln in lines)
            ]
            return (
                bool(red),
                seconds,
                f"red: {', '.join(red) or 'none'}; " + (lines[-1] if lines else ""),
            )
        return proc.returncode != 0, seconds, lines[-1] if lines else ""


def main(argv: list[str]) -> int:
    races = "--races" in argv
    pool = RACE_MUTANTS if races else MUTANTS
    wanted = set(argv) - {"--races"}
    chosen = [m for m in pool if not wanted or m.name in wanted]
    unknown = wanted - {m.name for m in pool}
    if unknown:
        print(f"unknown mutants: {sorted(unknown)}; known: {[m.name for m in pool]}")
        return 2
    killed = 0
    for mutant in chosen:
        dead, seconds, last = run(mutant, sys.executable)
        killed += dead
        verdict = "killed" if dead else "SURVIVED"
        print(f"{verdict:8} {mutant.name:45} {seconds:6.0f} s  {last}", flush=True)
    suite = "its race scenarios" if races else "the reliability suite alone"
    print(f"mutation score: {killed}/{len(chosen)} killed by {suite}")
    return 0 if killed == len(chosen) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
