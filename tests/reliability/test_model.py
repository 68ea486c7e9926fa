"""Model-based reliability: random histories by an independent writer, every op of ours in
between, and the promise checked after every step (issue 11, widened by issue 27).

The promise (README, "Guarantees"): every version whose commit is younger than the retention an
op was asked for, and the version time travel to the start of that window reads, keeps reading
back with exactly the rows it had, as long as its log is present; log cleanup keeps the log of
every version younger than the log retention. And the other half (liveness): a FULL vacuum does
delete every data or deletion-vector file that no version inside its window references and that
is older than its retention and the in-flight grace; log cleanup does delete the commits before
a checkpoint when all of them are past the cutoff.

The histories. A table starts plain or with deletion vectors enabled (`flavor`), has columns of
several types (long, string, double, timestamp, a partition column), and is written by
`deltalake` (appends, deletes, overwrites, property changes) and by hand-written commits as
Delta Spark writes them (deletes by deletion vectors, inline or in a DV file). Untracked files
appear as a crashed writer leaves them (orphans, young and old), and restored backups make
files look younger than their commits (`touch`). Our ops run in between: checkpoints (classic,
multi-part, V2 when the policy says so), log cleanup, vacuum (full and lite, any retention,
`--force`, a past or future `now`), compaction, purge, the row-tracking backfill, restore,
repair (after a live data file is deleted behind the log's back: the versions that read it are
lost, the latest reads without its rows) and recompute-stats (after appends whose commits
carry no stats) and drop-feature (deletion vectors, V2 checkpoints, or the checkpointProtection
a fast drop adds; fast, or truncating the history), and `checksum` (the latest version's
`N.crc`, written or checked; every commit of ours is followed by one, which must equal the
replay of its version). Once row
tracking is on, or checkpointProtection, `deltalake` cannot write the table, and our own
writer appends instead.

How time works. `deltalake` writes at the real clock; our ops read the wall clock through
`delta_ops.clock`. The machine keeps a fake clock that only moves forward (`advance`) and runs
our ops with the wall clock fixed at it. What the *other* writers create (commit files, data and
DV files) is dated at the fake clock after each step: mtimes, and the timestamps inside their
commits. What *our* ops write is never rewritten: their commits must already carry the fake
clock (`commitInfo.timestamp`, every `remove.deletionTimestamp`), which is checked, because a
wrong deletion timestamp would make a later vacuum expire files early. The files our ops write
are dated by the fake clock as they are written (the local storage's staged writes, patched
while one of our ops runs), each a millisecond after the one before (and after the fake clock),
so their order is the order of writing: inside an op, a checkpoint it writes is younger than
the versions before it, as on a real file system, and a log cleanup the op runs itself (a
history-truncating feature drop) sees it as the end of a segment. Files written another way
are dated at the fake clock when the op returns.

The model is the rows `deltalake` read right after each version was written (its own view,
before any op of ours touched the table), checked against the rows the model computes itself
for the hand-written deletes. `make check` runs a CI-sized profile; `make soak` runs
`HYPOTHESIS_PROFILE=soak` for as long as it is given.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import shutil
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import fsspec
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import DeltaTable, PostCommitHookProperties, write_deltalake
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from delta_ops.clock import fixed_wall_clock
from delta_ops.errors import DataFileError, DeltaOpsError, RetentionTooShort, VersionNotFound
from delta_ops.ops.checkpoint import execute_checkpoint, plan_checkpoint
from delta_ops.ops.checksum import execute_checksum, plan_checksum
from delta_ops.ops.cleanup import execute_cleanup, plan_cleanup
from delta_ops.ops.compact import execute_compact, plan_compact
from delta_ops.ops.drop_feature import execute_drop_feature, plan_drop_feature
from delta_ops.ops.purge import execute_purge, plan_purge
from delta_ops.ops.recompute_stats import execute_recompute_stats, plan_recompute_stats
from delta_ops.ops.repair import execute_repair, plan_repair
from delta_ops.ops.restore import execute_restore, plan_restore
from delta_ops.ops.row_tracking import execute_enable_row_tracking, plan_enable_row_tracking
from delta_ops.ops.vacuum import DEFAULT_IN_FLIGHT_GRACE_MS, execute_vacuum, plan_vacuum
from delta_ops.protocol.deletion_vectors import (
    DeletionVectorDescriptor,
    encode_deletion_vector_file,
    inline_descriptor,
    load_deletion_vector,
    z85_encode,
)
from delta_ops.storage import local_backend
from delta_ops.table.checksum import ChecksumStatus, check_checksum
from delta_ops.table.snapshot import load_snapshot
from delta_ops.table.writer import write_arrow
from tests.support import read_each

# deltalake is only the independent writer here: no checkpoints or log cleanup of its own
NO_HOOKS = PostCommitHookProperties(create_checkpoint=False, cleanup_expired_logs=False)
HOUR = 3_600_000
DAY = 24 * HOUR
SOAK = settings.default.max_examples > 100
_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
COLUMNS = ("id", "part", "name", "amount", "at")


def _rows(path: Path, version: int) -> list[tuple[Any, ...]]:
    table = DeltaTable(str(path), version=version)
    data = pa.RecordBatchReader.from_stream(table.scan()).read_all()  # DVs applied
    return sorted(tuple(row[c] for c in COLUMNS) for row in data.to_pylist())


def _dv_file_name(storage_type: str | None, path_or_inline: str | None) -> str | None:
    """The table-relative file of a `u` deletion vector (protocol, "Deletion Vector
    Descriptor Schema"), decoded here without delta-ops' code."""
    if storage_type != "u" or not path_or_inline:
        return None
    prefix, encoded = path_or_inline[:-20], path_or_inline[-20:]
    raw = bytearray()
    for i in range(0, 20, 5):
        value = 0
        for ch in encoded[i : i + 5]:
            value = value * 85 + _Z85.index(ch)
        raw += (value & 0xFFFFFFFF).to_bytes(4, "big")
    name = f"deletion_vector_{uuid.UUID(bytes=bytes(raw))}.bin"
    return f"{prefix}/{name}" if prefix else name


def _referenced(path: Path, version: int) -> set[str]:
    """Data and deletion-vector files `version` reads: the data files as `deltalake` lists
    them; the DV files (which `deltalake` does not list) from the descriptors in the log."""
    adds = pa.table(DeltaTable(str(path), version=version).get_add_actions(flatten=True))
    files = set(adds.column("path").to_pylist())
    dvs = load_snapshot(path, version).file_index.column("deletionVector").to_pylist()
    files |= {
        name
        for dv in dvs
        if dv and (name := _dv_file_name(dv.get("storageType"), dv.get("pathOrInlineDv")))
    }
    return files


def _named_by_young_tombstones(snapshot: Any, removed_since_ms: int) -> set[str]:
    """Data and deletion-vector files named by the tombstones removed at or after the time."""
    tombstones = snapshot.tombstones
    names: set[str] = set()
    if tombstones.num_rows:
        young = tombstones.filter(
            pc.greater_equal(
                pc.fill_null(tombstones.column("deletionTimestamp"), 0), removed_since_ms
            )
        )
        names = {unquote(p) for p in young.column("path").to_pylist()}
        if "deletionVector" in young.column_names:
            names |= {
                name
                for dv in young.column("deletionVector").to_pylist()
                if dv and (name := _dv_file_name(dv.get("storageType"), dv.get("pathOrInlineDv")))
            }
    # and the removes of the commits still in the log: a checkpoint made under a shorter
    # deleted-file retention dropped tombstones that vacuum still honours from the commits
    for commit in (Path(snapshot.storage.root) / "_delta_log").glob("*.json"):
        for line in commit.read_text().splitlines():
            remove = json.loads(line).get("remove") if line.strip() else None
            if remove and (remove.get("deletionTimestamp") or 0) >= removed_since_ms:
                names.add(unquote(remove["path"]))
                dv = remove.get("deletionVector") or {}
                if name := _dv_file_name(dv.get("storageType"), dv.get("pathOrInlineDv")):
                    names.add(name)
    return names


def _untracked_candidates(path: Path) -> dict[str, float]:
    """Every file vacuum may consider: outside `_delta_log`, no hidden part. -> mtime (ms)."""
    out = {}
    for file in path.rglob("*"):
        rel = file.relative_to(path)
        if file.is_file() and not any(p.startswith(("_", ".")) for p in rel.parts):
            out[str(rel)] = file.stat().st_mtime * 1000
    return out


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
        self.dvs = False
        # the rows each file's deletion vector deletes, for the DVs this model wrote (no other
        # writer here writes DVs; rewrites drop them, the row-tracking backfill keeps them)
        self.deleted: dict[str, set[int]] = {}
        self.tracked = False  # row tracking on: deltalake can no longer write the table
        # checkpointProtection (a fast feature drop adds it): deltalake's writer refuses it too
        self.protected = False
        self.steps = 0
        # the mtime (ms) of the newest file our ops wrote: the next one is dated after it
        self.last_written_ms = 0

    @property
    def deltalake_writes(self) -> bool:
        """Whether `deltalake` writes the table: not with row tracking or checkpointProtection."""
        return not (self.tracked or self.protected)

    def teardown(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    # ------------------------------------------------------------------ the harness
    def _batch(self, n: int) -> pa.Table:
        ids = list(range(self.next_id, self.next_id + n))
        self.next_id += n
        base = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
        return pa.table(
            {
                "id": pa.array(ids, pa.int64()),
                "part": pa.array([i % 3 for i in ids], pa.int64()),
                "name": pa.array([None if i % 5 == 4 else f"n-{i}-é" for i in ids]),
                "amount": pa.array([i * 1.5 for i in ids], pa.float64()),
                "at": pa.array(
                    [base + datetime.timedelta(seconds=i) for i in ids], pa.timestamp("us", "UTC")
                ),
            }
        )

    def _date_new_files(self) -> None:
        """Date every file another writer created at the fake clock (see the module doc)."""
        when = self.now / 1000
        for file in self.path.rglob("*"):
            if not file.is_file() or file in self.seen:
                continue
            self.seen.add(file)
            if file.parent.name == "_delta_log" and file.suffix == ".json" and file.stem.isdigit():
                self._date_commit(file)
            os.utime(file, (when, when))

    def _date_commit(self, file: Path) -> None:
        # a checksum our writer left describes the commit as it was written, not as redated
        file.with_suffix(".crc").unlink(missing_ok=True)
        actions = [json.loads(line) for line in file.read_text().splitlines() if line.strip()]
        for action in actions:
            if "commitInfo" in action:
                action["commitInfo"]["timestamp"] = self.now
            if "remove" in action and "deletionTimestamp" in action["remove"]:
                action["remove"]["deletionTimestamp"] = self.now
            if "add" in action:
                action["add"]["modificationTime"] = self.now
        file.write_text("".join(json.dumps(a) + "\n" for a in actions))

    def _latest(self) -> int:
        return max(self.rows)

    def _record_version(self, expected: list[tuple[Any, ...]] | None = None) -> None:
        """After another writer's commit: remember the new version's rows and commit time."""
        self._date_new_files()
        version = DeltaTable(str(self.path)).version()
        if version in self.committed_at:
            return  # the writer committed nothing (a delete that matched no row)
        self.rows[version] = _rows(self.path, version)
        if expected is not None:
            assert self.rows[version] == sorted(expected), "the hand-written commit reads wrong"
        self.committed_at[version] = self.now
        self.promised.add(version)

    @contextlib.contextmanager
    def _files_dated_as_written(self) -> Any:
        """While the block runs, every file the local storage stages (commits, checkpoints,
        checksums, data files, the hints it replaces) is dated by the fake clock before it is
        linked or renamed into place: a millisecond after `now`, or after the newest file our
        ops wrote before if that is later (each later than the one before it, and than what the
        other writers wrote at `now`). Yields the paths so dated."""
        original = local_backend._staged_local
        dated: set[Path] = set()

        @contextlib.contextmanager
        def staged(path: str, write: Any) -> Any:
            with original(path, write) as tmp:
                stamp = max(self.now, self.last_written_ms) + 1
                self.last_written_ms = stamp
                os.utime(tmp, ns=(stamp * 1_000_000, stamp * 1_000_000))
                dated.add(Path(path))
                yield tmp

        local_backend._staged_local = staged
        try:
            yield dated
        finally:
            local_backend._staged_local = original

    def _ours(self, op: Any, *, truncates_log: bool = False) -> Any:
        """Run one of our ops with the wall clock at the fake time. Its commits must carry the
        fake clock; they are not redated. Its files are dated by the fake clock as they are
        written (see the module doc), so an op that truncates the log (a history-truncating
        feature drop) may take its own intermediate commits with it: `truncates_log` lets those
        be gone."""
        before = set(self.path.rglob("*"))
        with fixed_wall_clock(self.now, all_threads=True), self._files_dated_as_written() as dated:
            result = op()
        when = self.now / 1000
        for file in set(self.path.rglob("*")) - before:
            if file.is_file():  # the file system's clock is the fake one too
                if file not in dated:  # written other than through a staged write
                    os.utime(file, (when, when))
                self.seen.add(file)
        latest = load_snapshot(self.path).version
        for version in range(max(self.committed_at, default=-1) + 1, latest + 1):
            if truncates_log and not (self.path / "_delta_log" / f"{version:020d}.json").exists():
                continue  # written and truncated within the op (not promised after it)
            self._check_our_commit(version)
            self.committed_at[version] = self.now
            self.rows[version] = self.rows[self._latest()]  # our commits change no rows
            self.promised.add(version)
        return result

    def _check_our_commit(self, version: int) -> None:
        file = self.path / "_delta_log" / f"{version:020d}.json"
        actions = [json.loads(line) for line in file.read_text().splitlines() if line.strip()]
        info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
        assert info["timestamp"] == self.now, f"our commit {version} is dated {info['timestamp']}"
        for action in actions:
            if "remove" in action:
                stamp = action["remove"].get("deletionTimestamp")
                assert stamp == self.now, f"our commit {version} removes at {stamp}"
        # every commit of ours is followed by its checksum, and it is the replay's
        check = check_checksum(load_snapshot(self.path, version))
        assert check.status is ChecksumStatus.AGREES, f"our checksum of {version}: {check}"

    def _window_versions(self, retention_ms: int) -> set[int]:
        """Versions a retention protects at the fake clock: younger ones, and the one time
        travel to the window's start reads."""
        start = self.now - retention_ms
        inside = {v for v, t in self.committed_at.items() if t > start}
        before = [v for v, t in self.committed_at.items() if t <= start]
        return inside | ({max(before)} if before else set())

    def _assert_readable(self, versions: set[int], why: str) -> None:
        """Every version in `versions` read afresh by deltalake (each its own table, nothing
        reused) has its recorded rows. The reads run two at a time: deltalake reads outside
        the GIL, and a version's read does not depend on another's."""
        ordered = sorted(versions)
        read = read_each(lambda version: _rows(self.path, version), ordered)
        for version, rows in zip(ordered, read, strict=True):
            assert rows == self.rows[version], f"version {version} changed after {why}"

    def _window_by_file_times(self, retention_ms: int) -> set[int]:
        """The window by the commit files' own times, made monotonic as time travel makes them
        (a version no later than the one before it is dated a millisecond after it): a
        restored log's commits, all dated alike, then fall inside the window one by one."""
        start = self.now - retention_ms
        times: dict[int, int] = {}
        for p in sorted((self.path / "_delta_log").glob("*.json")):
            if p.stem.isdigit():
                mtime = p.stat().st_mtime_ns // 1_000_000
                times[int(p.stem)] = max(mtime, times[max(times)] + 1) if times else mtime
        before = [v for v, t in times.items() if t <= start]
        return {v for v, t in times.items() if t > start} | ({max(before)} if before else set())

    def _loads(self, version: int) -> bool:
        from deltalake.exceptions import DeltaError

        try:
            DeltaTable(str(self.path), version=version)
        except DeltaError:
            return False  # its log is gone (cleanup): nothing reads it any more
        return True

    # ------------------------------------------------------------------ independent writers
    @initialize(
        n=st.integers(1, 4),
        dvs=st.sampled_from([True, True, False]),
        v2=st.booleans(),
        file_days=st.sampled_from([None, 1]),
        steps=st.lists(
            st.sampled_from(["append", "delete", "dv", "checkpoint", "day", "week"]),
            min_size=2,
            max_size=6,
        ),
    )
    def create(self, n: int, dvs: bool, v2: bool, file_days: int | None, steps: list[str]) -> None:
        """A new table: deletion vectors on or off, a short file retention or the default
        (a checkpoint then drops tombstones a longer vacuum retention still protects)."""
        configuration = {"delta.enableDeletionVectors": "true"} if dvs else {}
        if file_days is not None:
            configuration["delta.deletedFileRetentionDuration"] = f"interval {file_days} days"
        write_deltalake(
            str(self.path),
            self._batch(n),
            partition_by=["part"],
            configuration=configuration or None,
            post_commithook_properties=NO_HOOKS,
        )
        self.dvs = dvs
        self._record_version()
        if v2:  # as Delta Spark upgrades a table to V2 checkpoints: protocol and policy
            self._upgrade_to_v2_checkpoints()
        self._start_with_a_history(steps)

    def _start_with_a_history(self, steps: list[str]) -> None:
        """Most tables come to maintenance with a past: files removed days ago, deletion
        vectors, a checkpoint. Every history starts with some of that."""
        for step in steps:
            if step == "append":
                self.append(2)
            elif step == "delete":
                self.delete_some(3)
            elif step == "dv" and self.dvs:
                self.delete_by_deletion_vector(self.steps, 1, in_file=bool(self.steps % 2))
            elif step == "checkpoint":
                self.checkpoint(None)
            else:
                self.advance(24 if step == "day" else 24 * 7)
            self.steps += 1

    def _upgrade_to_v2_checkpoints(self) -> None:
        log = self.path / "_delta_log"
        version = self._latest() + 1
        actions = [json.loads(x) for x in (log / f"{0:020d}.json").read_text().splitlines()]
        protocol = next(a["protocol"] for a in actions if "protocol" in a)
        metadata = next(a["metaData"] for a in actions if "metaData" in a)
        protocol = {
            "minReaderVersion": 3,
            "minWriterVersion": 7,
            "readerFeatures": sorted({*protocol.get("readerFeatures", []), "v2Checkpoint"}),
            "writerFeatures": sorted({*protocol.get("writerFeatures", []), "v2Checkpoint"}),
        }
        metadata["configuration"] = {**metadata["configuration"], "delta.checkpointPolicy": "v2"}
        commit = [
            {"commitInfo": {"timestamp": self.now, "operation": "SET TBLPROPERTIES"}},
            {"protocol": protocol},
            {"metaData": metadata},
        ]
        (log / f"{version:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in commit))
        self._record_version()

    @rule(n=st.integers(1, 4))
    def append(self, n: int) -> None:
        if self.tracked or self.protected:  # deltalake refuses them: our writer appends
            write_arrow(self.path, self._batch(n))
        else:
            write_deltalake(
                str(self.path),
                self._batch(n),
                mode="append",
                partition_by=["part"],
                post_commithook_properties=NO_HOOKS,
            )
        self._record_version()

    @precondition(lambda self: self.deltalake_writes)
    @rule(modulo=st.integers(2, 4))
    def delete_some(self, modulo: int) -> None:
        DeltaTable(str(self.path)).delete(f"id % {modulo} = 0", post_commithook_properties=NO_HOOKS)
        self._record_version()

    @precondition(lambda self: self.deltalake_writes)
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

    @precondition(lambda self: self.dvs)
    @rule(pick=st.integers(0, 1000), share=st.integers(1, 3), in_file=st.booleans())
    def delete_by_deletion_vector(self, pick: int, share: int, in_file: bool) -> None:
        """Delete some rows of one live file with a deletion vector, as Delta Spark does: the
        file is removed with its old descriptor and added back with one holding more rows."""
        snapshot = load_snapshot(self.path)
        files = snapshot.files.to_pylist()
        if not files:
            return
        add = _plain(files[pick % len(files)])
        data = pq.read_table(self.path / add["path"])
        old = self.deleted.get(add["path"], set()) if add.get("deletionVector") else set()
        alive = [i for i in range(data.num_rows) if i not in old]
        gone = set(alive[:: share + 1])
        if not gone:
            return
        deleted = sorted(old | gone)
        if in_file:
            dv_bytes, [(offset, size, cardinality)] = encode_deletion_vector_file([deleted])
            file_id = uuid.uuid4()
            (self.path / f"deletion_vector_{file_id}.bin").write_bytes(dv_bytes)
            descriptor = {
                "storageType": "u",
                "pathOrInlineDv": z85_encode(file_id.bytes),
                "offset": offset,
                "sizeInBytes": size,
                "cardinality": cardinality,
            }
        else:
            descriptor = inline_descriptor(deleted).to_dict()
        body = {k: v for k, v in add.items() if k not in ("version", "deletionTimestamp")}
        remove = {
            "path": add["path"],
            "deletionTimestamp": self.now,
            "dataChange": True,
            "extendedFileMetadata": True,
            "partitionValues": body["partitionValues"],
            "size": body["size"],
        }
        if add.get("deletionVector"):
            remove["deletionVector"] = body["deletionVector"]
        new_add = {**body, "deletionVector": descriptor, "dataChange": True}
        self.deleted[add["path"]] = set(deleted)
        gone_rows = {
            tuple(row[c] for c in COLUMNS)
            for i, row in enumerate(
                data.append_column(
                    "part", pa.array([int(add["partitionValues"]["part"])] * data.num_rows)
                ).to_pylist()
            )
            if i in gone
        }
        expected = list(self.rows[self._latest()])
        for row in gone_rows:
            expected.remove(row)
        version = self._latest() + 1
        commit = [
            {"commitInfo": {"timestamp": self.now, "operation": "DELETE"}},
            {"remove": remove},
            {"add": new_add},
        ]
        (self.path / "_delta_log" / f"{version:020d}.json").write_text(
            "".join(json.dumps(a, default=_json_default) + "\n" for a in commit)
        )
        self._record_version(expected)

    @precondition(lambda self: self.deltalake_writes)
    @rule(
        file_days=st.sampled_from([1, 7, 30]),
        log_days=st.sampled_from([2, 30]),
    )
    def set_retentions(self, file_days: int, log_days: int) -> None:
        DeltaTable(str(self.path)).alter.set_table_properties(
            {
                "delta.deletedFileRetentionDuration": f"interval {file_days} days",
                "delta.logRetentionDuration": f"interval {log_days} days",
            },
            post_commithook_properties=NO_HOOKS,
        )
        self.log_retention_ms = log_days * DAY
        self._record_version()

    @rule(young=st.booleans())
    def leave_an_orphan(self, young: bool) -> None:
        """A crashed writer's file: never committed. Dated now (a write in flight) or a month
        ago (long dead)."""
        name = self.path / f"part={self.steps % 3}" / f"orphan-{uuid.uuid4().hex[:8]}.parquet"
        name.parent.mkdir(exist_ok=True)
        name.write_bytes(b"PAR1 not committed")
        when = (self.now if young else self.now - 30 * DAY) / 1000
        os.utime(name, (when, when))
        self.seen.add(name)
        self.steps += 1

    @rule(log=st.booleans())
    def restore_from_backup(self, log: bool) -> None:
        """A restored backup or a copied table: files look as young as now, whatever their
        commits say (mtimes, commit times and deletion timestamps disagree)."""
        when = self.now / 1000
        for file in self.path.rglob("*"):
            in_log = "_delta_log" in file.relative_to(self.path).parts
            if file.is_file() and in_log == log:
                os.utime(file, (when, when))

    @rule(hours=st.sampled_from([1, 12, 24 * 3, 24 * 8, 24 * 31]))
    def advance(self, hours: int) -> None:
        self.now += hours * HOUR

    @rule(
        pick=st.integers(0, 1000),
        retention=st.sampled_from(["file", "log", 1, 2, 7, 10, 30]),
        offset_min=st.sampled_from([-23 * 60, -60, -1, 1, 60, 23 * 60]),
    )
    def advance_to_a_boundary(self, pick: int, retention: str | int, offset_min: int) -> None:
        """Move the clock to just before or after the moment a version leaves a retention:
        where an off-by-a-day or a wrong comparison loses data."""
        if not self.committed_at:
            return
        versions = sorted(self.committed_at)
        version = versions[pick % len(versions)]
        if retention == "file":
            days_ms = load_snapshot(self.path).properties.deleted_file_retention_ms
        elif retention == "log":
            days_ms = self.log_retention_ms
        else:
            days_ms = int(retention) * DAY
        self.now = max(self.now, self.committed_at[version] + days_ms + offset_min * 60_000)

    # ------------------------------------------------------------------ our ops
    @rule(parts=st.sampled_from([None, 2, 3]))
    def checkpoint(self, parts: int | None) -> None:
        snapshot = load_snapshot(self.path)
        if parts and snapshot.properties.checkpoint_policy == "v2":
            parts = None  # multi-part is refused under the V2 policy (tested elsewhere)
        self._ours(lambda: execute_checkpoint(plan_checkpoint(snapshot, self.now, parts=parts)))
        self._assert_readable(self.promised, "a checkpoint")

    @rule(retention_days=st.sampled_from([None, 1, 10]), now_shift=st.sampled_from([0, -2, 3]))
    def cleanup(self, retention_days: int | None, now_shift: int) -> None:
        """`now_shift` days: a past `now` keeps more, a future one is clamped to the clock."""
        retention = self.log_retention_ms if retention_days is None else retention_days * DAY
        keep = {v for v, t in self.committed_at.items() if t > self.now - retention}
        self._ours(
            lambda: execute_cleanup(
                plan_cleanup(
                    load_snapshot(self.path), self.now + now_shift * DAY, retention_ms=retention
                )
            )
        )
        self.promised &= keep | {self._latest()}
        self._assert_readable(self.promised, f"log cleanup with retention {retention} ms")
        if now_shift >= 0:
            self._check_cleanup_deleted(retention)

    def _check_cleanup_deleted(self, retention_ms: int) -> None:
        """Liveness, as Delta Spark decides it (protocol notes on metadata cleanup): the log
        before a checkpoint c older than the latest one (`_last_checkpoint`) goes once every
        file up to c is past the cutoff (the truncated day), c's files being strictly younger
        than everything before them (an older-looking checkpoint is not a boundary)."""
        cutoff = (self.now - retention_ms) // DAY * DAY - 60_000
        log = self.path / "_delta_log"
        hint = log / "_last_checkpoint"
        if not hint.exists():
            return  # no checkpoint yet: nothing may go
        latest = json.loads(hint.read_text())["version"]
        times: dict[int, list[float]] = {}
        checkpoints: dict[int, list[float]] = {}
        for p in log.iterdir():
            if not p.name[:20].isdigit():
                continue
            version, mtime = int(p.name[:20]), p.stat().st_mtime * 1000
            if ".checkpoint." in p.name:
                checkpoints.setdefault(version, []).append(mtime)
            elif p.name[20:] == ".json":
                times.setdefault(version, []).append(mtime)
        for c in sorted((v for v in checkpoints if v < latest), reverse=True):
            older = [t for v, ts in times.items() if v < c for t in ts]
            older += [t for v, ts in checkpoints.items() if v < c for t in ts]
            if (
                older
                and max(older) < cutoff
                and max(checkpoints[c]) < cutoff
                and min(checkpoints[c]) > max(older)
            ):
                left = sorted(v for v in times if v < c)
                assert not left, f"cleanup left commits {left} before old checkpoint {c}"
                return

    @rule(
        retention_days=st.sampled_from([None, 0, 2, 7, 30]),
        force=st.booleans(),
        mode=st.sampled_from(["full", "lite"]),
        now_shift=st.sampled_from([0, 0, -1, 2]),
    )
    def vacuum(self, retention_days: int | None, force: bool, mode: str, now_shift: int) -> None:
        retention = None if retention_days is None else retention_days * DAY
        snapshot = load_snapshot(self.path)
        effective = (
            snapshot.properties.deleted_file_retention_ms if retention is None else retention
        )
        window = self._window_versions(effective)
        before = _untracked_candidates(self.path)
        # the files of every version inside the window, by the model's commit times and by
        # the commit files' own (a restored log looks younger): what vacuum must keep
        # what the versions still promised read (an earlier, shorter vacuum ended the others)
        promised = window & self.promised
        needed = set().union(*(_referenced(self.path, v) for v in promised if self._loads(v)))
        # vacuum may keep more (never less): a removal at the window's very start, or versions
        # whose commit files look young (a restored log) are not liveness failures
        loose = self._window_versions(effective + 1000) | self._window_by_file_times(effective)
        excused = set().union(*(_referenced(self.path, v) for v in loose if self._loads(v)))
        # vacuum keeps what an unexpired tombstone names, whichever versions read it (the
        # protocol's rule: a purge or a feature drop removes files, and DV files, read only by
        # versions an earlier cleanup or vacuum already ended)
        excused |= _named_by_young_tombstones(snapshot, self.now + now_shift * DAY - effective)

        def run() -> Any:
            plan = plan_vacuum(
                snapshot, self.now + now_shift * DAY, retention_ms=retention, force=force, mode=mode
            )
            return execute_vacuum(plan)

        try:
            self._ours(run)
        except RetentionTooShort:
            assert not force and retention is not None and retention < effective_default(snapshot)
            return
        except DeltaOpsError as exc:
            assert mode == "lite" and "LITE" in str(exc), exc  # history cleaned up: use FULL
            return
        self.promised &= window
        self._assert_readable(self.promised, f"vacuum {mode} {retention} ms")
        for path in needed:
            assert (self.path / path).exists(), f"vacuum deleted {path}, read inside its window"
        if mode == "full" and now_shift >= 0:
            oldest_kept = self.now - max(effective, DEFAULT_IN_FLIGHT_GRACE_MS)
            stale = {p for p, t in before.items() if t < oldest_kept - 1000} - needed - excused
            left = sorted(p for p in stale if (self.path / p).exists())
            assert not left, f"vacuum full kept {left}, past its retention and unreferenced"

    @rule(target_bytes=st.sampled_from([2_000, 128 * 1024 * 1024]))
    def compact(self, target_bytes: int) -> None:
        """Compaction rewrites files (a small target splits a partition into several bins),
        applies deletion vectors and changes no version's rows; the files it replaces become
        tombstones that only a vacuum past their retention deletes."""
        self._ours(
            lambda: execute_compact(
                plan_compact(load_snapshot(self.path), target_size=target_bytes)
            )
        )
        self._assert_readable(self.promised, f"a compaction to {target_bytes} bytes")

    @precondition(lambda self: self.dvs)
    @rule()
    def purge(self) -> None:
        self._ours(lambda: execute_purge(plan_purge(load_snapshot(self.path))))
        self._assert_readable(self.promised, "a purge")
        files = load_snapshot(self.path).files
        assert files.column("deletionVector").null_count == files.num_rows

    @rule(batch_files=st.sampled_from([1, 3, 1000]))
    def enable_row_tracking(self, batch_files: int) -> None:
        self._ours(
            lambda: execute_enable_row_tracking(
                plan_enable_row_tracking(load_snapshot(self.path), batch_files=batch_files)
            )
        )
        self.tracked = True
        self._assert_readable(self.promised, "the row-tracking backfill")
        files = load_snapshot(self.path).files
        assert files.column("baseRowId").null_count == 0

    @rule()
    def checksum(self) -> None:
        """The latest version's checksum: written where another writer left none, else checked;
        either way it then agrees with the log."""
        plan = plan_checksum(load_snapshot(self.path))
        self._ours(lambda: execute_checksum(plan))
        check = check_checksum(load_snapshot(self.path))
        assert check.status is ChecksumStatus.AGREES, check

    @rule(pick=st.integers(0, 1000))
    def restore(self, pick: int) -> None:
        """Restore an older version: the new latest reads exactly as that version did and every
        promised version still reads. A version whose files a vacuum took, or whose log a
        cleanup took, is refused with nothing written."""
        target = sorted(self.rows)[pick % len(self.rows)]
        before = load_snapshot(self.path).version
        try:
            self._ours(
                lambda: execute_restore(plan_restore(load_snapshot(self.path), version=target))
            )
        except (DataFileError, VersionNotFound) as exc:
            assert load_snapshot(self.path).version == before, f"a refused restore wrote: {exc}"
            return
        latest = self._latest()
        if latest != before:
            self.rows[latest] = self.rows[target]  # _ours assumed our commit changes no rows
            self._deleted_rows_now()
        assert _rows(self.path, latest) == self.rows[target], f"restore of {target}"
        self._assert_readable(self.promised, f"a restore of version {target}")

    @rule(pick=st.integers(0, 1000))
    def lose_a_file_then_repair(self, pick: int) -> None:
        """A live data file deleted behind the log's back (by hand, a bad copy), then
        repaired: the versions that read it are lost for good, every other promised version
        still reads, and the latest reads without that file's rows."""
        snapshot = load_snapshot(self.path)
        files = snapshot.files.to_pylist()
        if not files:
            return
        add = _plain(files[pick % len(files)])
        data = pq.read_table(self.path / add["path"])
        deleted = self.deleted.get(add["path"], set()) if add.get("deletionVector") else set()
        part = int(add["partitionValues"]["part"])
        lost = [
            tuple({**row, "part": part}[c] for c in COLUMNS)
            for i, row in enumerate(data.to_pylist())
            if i not in deleted
        ]
        (self.path / add["path"]).unlink()
        self.promised -= {v for v in self.promised if add["path"] in _referenced(self.path, v)}
        expected = list(self.rows[self._latest()])
        for row in lost:
            expected.remove(row)
        before = self._latest()
        result = self._ours(
            lambda: execute_repair(plan_repair(load_snapshot(self.path), force=True))
        )
        assert result.removed == (add["path"],), result
        latest = self._latest()
        assert latest == before + 1
        self.rows[latest] = sorted(expected)  # _ours assumed our commit changes no rows
        self.deleted.pop(add["path"], None)
        assert _rows(self.path, latest) == self.rows[latest], "repair"
        self._assert_readable(self.promised, f"a repair of {add['path']}")

    @rule()
    def recompute_stats(self) -> None:
        """Files short of stats (an old writer's, a hand-written commit's) get them; no
        version's rows change, and nothing is left to do."""
        self._ours(lambda: execute_recompute_stats(plan_recompute_stats(load_snapshot(self.path))))
        self._assert_readable(self.promised, "a recompute of stats")
        snapshot = load_snapshot(self.path)
        assert snapshot.record_counts.null_count == 0
        assert plan_recompute_stats(snapshot).nothing_to_do

    @precondition(lambda self: not self.tracked)
    @rule(n=st.integers(1, 3))
    def append_without_stats(self, n: int) -> None:
        """An old writer's append: a data file committed with no stats at all."""
        batch = self._batch(n)
        part = batch.column("part")[0].as_py()
        batch = batch.filter(pc.equal(batch.column("part"), part))
        name = f"part={part}/part-00000-{uuid.uuid4()}-c000.snappy.parquet"
        (self.path / f"part={part}").mkdir(exist_ok=True)
        pq.write_table(batch.drop_columns(["part"]), self.path / name)
        add = {
            "path": name,
            "partitionValues": {"part": str(part)},
            "size": (self.path / name).stat().st_size,
            "modificationTime": self.now,
            "dataChange": True,
        }
        version = self._latest() + 1
        commit = [{"commitInfo": {"timestamp": self.now, "operation": "WRITE"}}, {"add": add}]
        (self.path / "_delta_log" / f"{version:020d}.json").write_text(
            "".join(json.dumps(a) + "\n" for a in commit)
        )
        expected = [*self.rows[self._latest()]]
        expected += [tuple(row[c] for c in COLUMNS) for row in batch.to_pylist()]
        self._record_version(expected)

    @rule(pick=st.integers(0, 1000), truncate=st.booleans())
    def drop_feature(self, pick: int, truncate: bool) -> None:
        """Drop a feature the table has (deletion vectors, V2 checkpoints, or the
        checkpointProtection a fast drop added), fast or truncating the history. No version's
        rows change; the fast drop keeps every promised version readable, a truncating one
        those younger than its retention (24 hours); a truncating drop that must wait for it
        leaves the feature. Once dropped, deltalake's pyarrow reader reads the latest."""
        snapshot = load_snapshot(self.path)
        names = ("deletionVectors", "v2Checkpoint", "checkpointProtection")
        present = [f for f in names if snapshot.protocol.supports(f)]
        if not present:
            return
        feature = present[pick % len(present)]
        truncate = truncate or feature == "checkpointProtection"
        retention = snapshot.properties.drop_feature_truncate_history_retention_ms
        keep = {v for v, t in self.committed_at.items() if t > self.now - retention}
        result = self._ours(
            lambda: execute_drop_feature(
                plan_drop_feature(
                    load_snapshot(self.path), feature=feature, truncate_history=truncate
                )
            ),
            truncates_log=truncate,
        )
        if truncate:
            self.promised &= keep | {self._latest()}
        self._assert_readable(self.promised, f"a drop of {feature}")
        after = load_snapshot(self.path)
        assert after.protocol.supports(feature) != result.dropped, result
        self.protected = after.protocol.supports("checkpointProtection")
        if not result.dropped:
            return
        if feature == "deletionVectors":
            self.dvs = False  # no writer of this model makes deletion vectors any more
            assert after.file_index.column("deletionVector").null_count == after.num_files
        if after.protocol.min_reader_version < 3:
            data = DeltaTable(str(self.path)).to_pyarrow_table()
            rows = sorted(tuple(row[c] for c in COLUMNS) for row in data.to_pylist())
            assert rows == self.rows[self._latest()], f"deltalake after the drop of {feature}"

    @rule(pick=st.integers(0, 1000))
    def drop_feature_across_its_retention(self, pick: int) -> None:
        """The two runs of a history-truncating drop, a day and an hour apart."""
        self.drop_feature(pick, True)
        self.advance(25)
        self.drop_feature(pick, True)

    @rule(
        pick=st.integers(0, 1000),
        n=st.integers(1, 2),
        hours=st.sampled_from([1, 12, 23]),
    )
    def young_versions_then_a_truncating_drop(self, pick: int, n: int, hours: int) -> None:
        """A truncating drop prepared, a day passes, then versions younger than its retention
        (24 hours) and older than the minute it next runs in: the run that truncates the
        history must keep them readable (its log cleanup keeps the retention it was asked)."""
        self.drop_feature(pick, True)
        self.advance(25)
        self.append(n)
        self.advance(hours)
        self.drop_feature(pick, True)

    def _deleted_rows_now(self) -> None:
        """The rows each live file's deletion vector deletes, as the log says now (a restore
        put back older vectors)."""
        files = load_snapshot(self.path).files.select(["path", "deletionVector"]).to_pylist()
        fs = fsspec.filesystem("file")
        self.deleted = {
            f["path"]: set(
                load_deletion_vector(
                    DeletionVectorDescriptor.from_dict(
                        {k: v for k, v in f["deletionVector"].items() if v is not None}
                    ),
                    str(self.path),
                    fs,
                )
            )
            for f in files
            if f["deletionVector"] is not None
        }

    # ------------------------------------------------------------------ compound steps
    # What loses data takes several steps in one order; these make such orders common.
    @rule(
        days=st.sampled_from([2, 8, 31]),
        retention_days=st.sampled_from([None, 0, 2, 30]),
    )
    def time_passes_then_vacuum(self, days: int, retention_days: int | None) -> None:
        self.advance(days * 24)
        self.vacuum(retention_days, True, "full", 0)

    @rule(
        days=st.sampled_from([1, 3, 31]),
        offset_min=st.sampled_from([-23 * 60, -60, 60]),
    )
    def checkpoints_then_cleanup_at_the_boundary(self, days: int, offset_min: int) -> None:
        """Two checkpoints apart in time, then a cleanup just before or after the first one
        leaves the log retention: the cutoff decides alone what goes."""
        self.checkpoint(None)
        first = self._latest()
        self.advance(days * 24)
        self.append(1)
        self.checkpoint(None)
        self.append(1)
        self.now = max(
            self.now, self.committed_at[first] + self.log_retention_ms + offset_min * 60_000
        )
        self.cleanup(None, 0)

    @precondition(lambda self: self.dvs)
    @rule(days=st.sampled_from([2, 8, 31]), retention_days=st.sampled_from([None, 2]))
    def deletion_vector_then_time_passes_then_vacuum(
        self, days: int, retention_days: int | None
    ) -> None:
        """A DV file only a live file references, old by the time vacuum lists the table."""
        self.delete_by_deletion_vector(self.steps, 1, in_file=True)
        self.steps += 1
        self.time_passes_then_vacuum(days, retention_days)

    @precondition(lambda self: self.deltalake_writes)
    @rule(
        offset_min=st.sampled_from([-23 * 60, -60, 60]),
        modulo=st.integers(2, 3),
        future=st.booleans(),
    )
    def delete_then_vacuum_at_the_boundary(
        self, offset_min: int, modulo: int, future: bool
    ) -> None:
        """Files removed just inside or just outside the file retention when vacuum runs, as
        of now or of a `now` two days ahead (which the clock must clamp)."""
        self.delete_some(modulo)
        removed_at = self.committed_at[self._latest()]
        retention = load_snapshot(self.path).properties.deleted_file_retention_ms
        self.now = max(self.now, removed_at + retention + offset_min * 60_000)
        self.vacuum(None, False, "full", 2 if future else 0)

    @precondition(lambda self: self.deltalake_writes)
    @rule(days=st.sampled_from([2, 3]), vacuum_days=st.sampled_from([7, 30]))
    def checkpoint_drops_tombstones_a_longer_vacuum_needs(
        self, days: int, vacuum_days: int
    ) -> None:
        """A table keeping removed files 1 day, checkpointed after that day (the checkpoint
        drops the tombstones), then vacuumed with a longer retention: only the commits' own
        removes say which files the versions inside that retention still read. The files
        removed were written long before, so their own age does not protect them."""
        self.advance(24 * 10)
        self.set_retentions(1, 30)
        self.delete_some(2)
        self.advance(days * 24)
        self.checkpoint(None)
        self.vacuum(vacuum_days, False, "full", 0)

    @rule()
    def a_writer_with_a_slow_clock_then_cleanup(self) -> None:
        """A young version, then another writer whose clock runs behind by more than the log
        retention commits twice (each with its checksum) and checkpoints the second commit;
        its files carry its clock's times, each later than the one it wrote before. Made
        monotonic across versions, the first commit's checksum moves after the young version
        but its JSON keeps its own old time, so the checkpoint looks like the end of an
        expired segment (Delta Spark judges a segment by its newest file). Time travel dates
        the slow writer's versions after the young one (monotonic commit times): a cleanup
        must keep them all readable."""
        self.append(1)
        slow = self.now - self.log_retention_ms - 2 * DAY
        before = set(self.path.rglob("*"))
        first = self._latest() + 1
        with fixed_wall_clock(slow, all_threads=True):
            for _ in range(2):
                write_arrow(self.path, self._batch(1))
            execute_checkpoint(plan_checkpoint(load_snapshot(self.path), slow))
        written = sorted(set(self.path.rglob("*")) - before, key=lambda p: p.stat().st_mtime_ns)
        for i, file in enumerate(f for f in written if f.is_file()):
            os.utime(file, ns=((slow + i) * 1_000_000, (slow + i) * 1_000_000))
            self.seen.add(file)
        for version in range(first, load_snapshot(self.path).version + 1):
            self.rows[version] = _rows(self.path, version)
            self.committed_at[version] = self.now  # as time travel dates it (monotonic)
            self.promised.add(version)
        self.cleanup(None, 0)

    @precondition(lambda self: not self.tracked)
    @rule(retention_seconds=st.sampled_from([0, 30]))
    def slow_writer_races_a_vacuum(self, retention_seconds: int) -> None:
        """Another engine (no VACUUM START check) writes its data file, a vacuum with
        retention 0 lists the table meanwhile, then the writer commits the file: only the
        in-flight grace keeps the file alive."""
        batch = self._batch(2)
        part = batch.column("part")[0].as_py()
        batch = batch.filter(pc.equal(batch.column("part"), part))
        name = f"part={part}/part-00000-{uuid.uuid4()}-c000.snappy.parquet"
        (self.path / f"part={part}").mkdir(exist_ok=True)
        pq.write_table(batch.drop_columns(["part"]), self.path / name)
        when = self.now / 1000
        os.utime(self.path / name, (when, when))
        self.seen.add(self.path / name)
        self.now += retention_seconds * 1000
        self.vacuum(0, True, "full", 0)
        add = {
            "path": name,
            "partitionValues": {"part": str(part)},
            "size": (self.path / name).stat().st_size if (self.path / name).exists() else 1,
            "modificationTime": self.now,
            "dataChange": True,
            "stats": json.dumps({"numRecords": batch.num_rows}),
        }
        version = self._latest() + 1
        commit = [{"commitInfo": {"timestamp": self.now, "operation": "WRITE"}}, {"add": add}]
        (self.path / "_delta_log" / f"{version:020d}.json").write_text(
            "".join(json.dumps(a) + "\n" for a in commit)
        )
        expected = [*self.rows[self._latest()]]
        expected += [tuple(row[c] for c in COLUMNS) for row in batch.to_pylist()]
        self._record_version(expected)

    # ------------------------------------------------------------------ always
    @invariant()
    def latest_version_reads(self) -> None:
        if self.rows:
            latest = self._latest()
            assert _rows(self.path, latest) == self.rows[latest]
            assert load_snapshot(self.path).version == latest


def effective_default(snapshot: Any) -> int:
    """The table's file retention: a shorter one needs `force`."""
    retention: int = snapshot.properties.deleted_file_retention_ms
    return retention


def _plain(value: Any) -> Any:
    """A file row of a snapshot as a commit's JSON body: maps as objects, no null fields."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if v is not None}
    if isinstance(value, list) and all(isinstance(x, tuple) and len(x) == 2 for x in value):
        return {k: v for k, v in value}  # an Arrow map: [(key, value), ...]
    return value


def _json_default(value: Any) -> Any:
    raise TypeError(f"not JSON: {value!r}")


ReliabilityMachine.TestCase.settings = settings(
    # RELIABILITY_HISTORIES overrides the count (e.g. for a bounded soak that reports numbers)
    # (CI: 20 histories, ~2 minutes of a 2-core machine; the soak profile runs on)
    max_examples=int(os.environ.get("RELIABILITY_HISTORIES") or (100_000 if SOAK else 20)),
    stateful_step_count=40 if SOAK else 25,
    deadline=None,
)
TestReliability = ReliabilityMachine.TestCase
