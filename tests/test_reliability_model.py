"""Model-based reliability: random histories by an independent writer, every op of ours in
between, and the promise checked after every step (issue 11).

The promise (README, "Guarantees"): every version whose commit is younger than the retention an
op was asked for, and the version time travel to the start of that window reads, keeps reading
back with exactly the rows it had, as long as its log is present; log cleanup keeps the log of
every version younger than the log retention.

How time works here. `deltalake` writes at the real clock; our ops read the wall clock through
`delta_ops.clock`. The machine keeps a fake clock that only moves forward (`advance`), runs our
ops with the wall clock fixed at it, and after every step dates whatever the step created
(commit files, checkpoints, data and deletion-vector files) at the fake time: mtimes with
`os.utime`, and the timestamps inside a new commit's JSON (`commitInfo.timestamp`,
`remove.deletionTimestamp`, `add.modificationTime`). So ages are consistent: a file is as old as
the fake clock says, whoever wrote it.

The model is the rows `deltalake` read right after it wrote each version (its own view, before
any op of ours touched the table). `make check` runs a CI-sized profile; `make soak` runs
`HYPOTHESIS_PROFILE=soak` for as long as it is given.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable, PostCommitHookProperties, write_deltalake
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from delta_ops.clock import fixed_wall_clock
from delta_ops.errors import DeltaOpsError, RetentionTooShort
from delta_ops.ops.checkpoint import execute_checkpoint, plan_checkpoint
from delta_ops.ops.cleanup import execute_cleanup, plan_cleanup
from delta_ops.ops.compact import execute_compact, plan_compact
from delta_ops.ops.vacuum import execute_vacuum, plan_vacuum
from delta_ops.table.snapshot import load_snapshot

# deltalake is only the independent writer here: no checkpoints or log cleanup of its own
NO_HOOKS = PostCommitHookProperties(create_checkpoint=False, cleanup_expired_logs=False)
HOUR = 3_600_000
DAY = 24 * HOUR
SOAK = settings.default.max_examples > 100


def _rows(path: Path, version: int) -> list[tuple[Any, ...]]:
    table = DeltaTable(str(path), version=version).to_pyarrow_table()
    columns = sorted(table.column_names)
    return sorted(tuple(row[c] for c in columns) for row in table.to_pylist())


class ReliabilityMachine(RuleBasedStateMachine):
    """One table, one fake clock, the model of every version's rows and commit time."""

    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="delta-ops-reliability-"))
        self.path = self.root / "t"
        self.now = time.time_ns() // 1_000_000
        self.rows: dict[int, list[tuple[Any, ...]]] = {}
        self.committed_at: dict[int, int] = {}
        self.seen: set[Path] = set()
        # versions still promised readable: an op's promise ends where its retention ends
        self.promised: set[int] = set()
        self.next_id = 0
        self.log_retention_ms = 30 * DAY
        self.steps = 0

    def teardown(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    # ------------------------------------------------------------------ the harness
    def _batch(self, n: int) -> pa.Table:
        ids = list(range(self.next_id, self.next_id + n))
        self.next_id += n
        return pa.table({"id": pa.array(ids, pa.int64()), "part": pa.array([i % 3 for i in ids])})

    def _date_new_files(self) -> None:
        """Date every file the last step created at the fake clock (see the module doc)."""
        when = self.now / 1000
        for file in self.path.rglob("*"):
            if not file.is_file() or file in self.seen:
                continue
            self.seen.add(file)
            if file.parent.name == "_delta_log" and file.suffix == ".json" and file.stem.isdigit():
                self._date_commit(file)
            os.utime(file, (when, when))

    def _date_commit(self, file: Path) -> None:
        actions = [json.loads(line) for line in file.read_text().splitlines() if line.strip()]
        for action in actions:
            if "commitInfo" in action:
                action["commitInfo"]["timestamp"] = self.now
            if "remove" in action and "deletionTimestamp" in action["remove"]:
                action["remove"]["deletionTimestamp"] = self.now
            if "add" in action:
                action["add"]["modificationTime"] = self.now
        file.write_text("".join(json.dumps(a) + "\n" for a in actions))

    def _record_version(self) -> None:
        """After an independent write: remember the new version's rows and commit time."""
        self._date_new_files()
        version = DeltaTable(str(self.path)).version()
        if version in self.committed_at:
            return  # the writer committed nothing (a delete that matched no row)
        self.rows[version] = _rows(self.path, version)
        self.committed_at[version] = self.now
        self.promised.add(version)

    def _ours(self, op: Any) -> Any:
        """Run one of our ops with the wall clock at the fake time; date what it wrote."""
        with fixed_wall_clock(self.now, all_threads=True):
            result = op()
        self._date_new_files()
        latest = load_snapshot(self.path).version
        for version in range(max(self.committed_at, default=-1) + 1, latest + 1):
            self.committed_at[version] = self.now  # our commits (VACUUM START / END)
            self.rows[version] = self.rows[version - 1]  # they change no rows
            self.promised.add(version)
        return result

    def _window_versions(self, retention_ms: int) -> set[int]:
        """Versions a retention protects at the fake clock: younger ones, and the one time
        travel to the window's start reads."""
        start = self.now - retention_ms
        inside = {v for v, t in self.committed_at.items() if t > start}
        before = [v for v, t in self.committed_at.items() if t <= start]
        return inside | ({max(before)} if before else set())

    def _assert_readable(self, versions: set[int], why: str) -> None:
        for version in sorted(versions):
            assert _rows(self.path, version) == self.rows[version], (
                f"version {version} changed after {why}"
            )

    # ------------------------------------------------------------------ independent writer
    @initialize(n=st.integers(1, 4))
    def create(self, n: int) -> None:
        write_deltalake(
            str(self.path),
            self._batch(n),
            partition_by=["part"],
            post_commithook_properties=NO_HOOKS,
        )
        self._record_version()

    @rule(n=st.integers(1, 4))
    def append(self, n: int) -> None:
        write_deltalake(
            str(self.path),
            self._batch(n),
            mode="append",
            partition_by=["part"],
            post_commithook_properties=NO_HOOKS,
        )
        self._record_version()

    @rule(modulo=st.integers(2, 4))
    def delete_some(self, modulo: int) -> None:
        DeltaTable(str(self.path)).delete(f"id % {modulo} = 0", post_commithook_properties=NO_HOOKS)
        self._record_version()

    @rule(n=st.integers(1, 3))
    def overwrite(self, n: int) -> None:
        write_deltalake(
            str(self.path),
            self._batch(n),
            mode="overwrite",
            partition_by=["part"],
            post_commithook_properties=NO_HOOKS,
        )
        self._record_version()

    @rule(hours=st.sampled_from([1, 12, 24 * 3, 24 * 8, 24 * 31]))
    def advance(self, hours: int) -> None:
        self.now += hours * HOUR

    # ------------------------------------------------------------------ our ops
    @rule(parts=st.sampled_from([None, 2, 3]))
    def checkpoint(self, parts: int | None) -> None:
        self._ours(
            lambda: execute_checkpoint(
                plan_checkpoint(load_snapshot(self.path), self.now, parts=parts)
            )
        )
        self._assert_readable(self.promised, "a checkpoint")

    @rule(retention_days=st.sampled_from([None, 1, 10]))
    def cleanup(self, retention_days: int | None) -> None:
        retention = self.log_retention_ms if retention_days is None else retention_days * DAY
        keep = {v for v, t in self.committed_at.items() if t > self.now - retention}
        self._ours(
            lambda: execute_cleanup(
                plan_cleanup(load_snapshot(self.path), self.now, retention_ms=retention)
            )
        )
        self.promised &= keep | {max(self.rows)}
        self._assert_readable(self.promised, f"log cleanup with retention {retention} ms")

    @rule(
        retention_days=st.sampled_from([None, 0, 2, 7, 30]),
        force=st.booleans(),
        mode=st.sampled_from(["full", "lite"]),
    )
    def vacuum(self, retention_days: int | None, force: bool, mode: str) -> None:
        retention = None if retention_days is None else retention_days * DAY
        snapshot = load_snapshot(self.path)
        effective = (
            snapshot.properties.deleted_file_retention_ms if retention is None else retention
        )

        def run() -> Any:
            return execute_vacuum(
                plan_vacuum(snapshot, self.now, retention_ms=retention, force=force, mode=mode)
            )

        try:
            self._ours(run)
        except RetentionTooShort:
            assert not force and retention is not None and retention < 7 * DAY
            return
        except DeltaOpsError as exc:
            assert mode == "lite" and "LITE" in str(exc), exc  # history cleaned up: use FULL
            return
        self.promised &= self._window_versions(effective)
        self._assert_readable(self.promised, f"vacuum {mode} {retention} ms")

    @rule(target_bytes=st.sampled_from([2_000, 128 * 1024 * 1024]))
    def compact(self, target_bytes: int) -> None:
        """Compaction rewrites files (a small target splits a partition into several bins)
        and changes no version's rows; the files it replaces become tombstones that only a
        vacuum past their retention deletes."""
        self._ours(
            lambda: execute_compact(
                plan_compact(load_snapshot(self.path), target_size=target_bytes)
            )
        )
        self._assert_readable(self.promised, f"a compaction to {target_bytes} bytes")

    # ------------------------------------------------------------------ always
    @invariant()
    def latest_version_reads(self) -> None:
        if self.rows:
            latest = max(self.rows)
            assert _rows(self.path, latest) == self.rows[latest]
            assert load_snapshot(self.path).version == latest


ReliabilityMachine.TestCase.settings = settings(
    # RELIABILITY_HISTORIES overrides the count (e.g. for a bounded soak that reports numbers)
    max_examples=int(os.environ.get("RELIABILITY_HISTORIES") or (100_000 if SOAK else 15)),
    stateful_step_count=40 if SOAK else 20,
    deadline=None,
)
TestReliability = ReliabilityMachine.TestCase
