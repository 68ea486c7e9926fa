"""Optimistic transactions: the only way delta-ops writes a commit.

A `Transaction` starts from a snapshot (its read version), collects actions, and commits
them as `N.json` with put-if-absent. If another writer took version N first, the transaction
jumps to the newest version in the log, checks only the winning commits in between for
conflicts with what it read and writes, backs off briefly (jittered), checks the commits that
landed meanwhile the same way and tries again at once, for as long as its time budget allows
(blind appends never conflict, so under contention they all land, even beside a writer that
commits without pause; the actions are serialized once unless row ids must be re-assigned).
A real conflict, or an exhausted budget, fails with a retryable `ConcurrentModification`
naming the commit.

A winner that is a ``VACUUM START`` may have deleted files this transaction is about to add (a
slow writer whose staged files look older than vacuum's in-flight grace): the transaction waits
for that vacuum's ``VACUUM END`` and checks that every file and deletion vector it adds still
exists; if one is gone it fails (retryably) instead of committing a dangling reference.

Conflicts (after Delta Spark's `ConflictChecker`, reduced to what delta-ops' operations do):

* a winner changed the protocol or the metadata;
* a winner removed, or re-added, a file this transaction read or removes;
* a winner changed data (an add or remove with `dataChange` true) while this transaction read
  the whole table (`reads_whole_table`: RESTORE, whose result must be the version it names;
  Delta Spark's RESTORE commits only right after the version it read);
* a winner set a `txn` for an appId this transaction also sets;
* a winner changed a domain this transaction also changes (except `delta.rowTracking`, whose
  high-water mark is re-read instead: row ids are re-assigned above the winner's mark).

Version checksums: every commit is followed by its `N.crc` (`delta_ops.table.checksum`),
derived from N-1's and the commit's actions, best-effort: a failure to write it is logged and
never fails or undoes the commit (a table without that checksum is valid). N-1's is checked
first; one that disagrees with the log is a corruption alarm: N gets none, and the alarm is
logged as a warning and returned in the result (`CommitResult.checksum_alarm`).

Row tracking: when the table supports `rowTracking`, adds without `baseRowId` get fresh ids from
the high-water mark and `defaultRowCommitVersion` = the committed version, and the
`delta.rowTracking` domain moves, in every attempt (the protocol's "Row Tracking", writer
requirements).

For example:

    txn = Transaction(snapshot, operation="VACUUM START", parameters={...})
    txn.add_action({"add": {...}})
    result = txn.commit()
"""

from __future__ import annotations

import json
import logging
import random
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from delta_ops import clock
from delta_ops.errors import ConcurrentModification, CorruptChecksum, OperationRefused, UnsafePath
from delta_ops.log.file_names import commit_file_name
from delta_ops.log.reader import read_commit_actions
from delta_ops.log.replay import ROW_TRACKING_DOMAIN
from delta_ops.protocol.deletion_vectors import DeletionVectorDescriptor
from delta_ops.protocol.features import Access, Protocol
from delta_ops.protocol.num_records import num_records_in_stats
from delta_ops.protocol.properties import ENABLE_IN_COMMIT_TIMESTAMPS
from delta_ops.storage import Storage
from delta_ops.table.checksum import KnownRemoves, write_checksum_after_commit
from delta_ops.table.remove_lines import EncodedRemoves
from delta_ops.table.snapshot import Snapshot
from delta_ops.version import __version__

logger = logging.getLogger(__name__)

ENGINE_INFO = f"delta-ops/{__version__}"
DEFAULT_TIME_BUDGET_S = 120.0
VACUUM_POLL_S = 0.2


class CommitRefused(OperationRefused):
    """The storage cannot guarantee put-if-absent, and no single writer was declared."""


@dataclass(frozen=True, kw_only=True)
class CommitResult:
    """What a commit produced."""

    version: int
    attempts: int
    num_actions: int
    row_id_high_water_mark: int | None = None
    #: the previous version's checksum disagreed with the log (or did not parse): what is
    #: wrong, and no checksum was written for this version ("" when none of that)
    checksum_alarm: str = ""


@dataclass(frozen=True)
class WinningCommit:
    """The actions of a commit that another writer made while this transaction was open."""

    version: int
    actions: tuple[dict[str, Any], ...]

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [a[kind] for a in self.actions if kind in a]

    @property
    def operation(self) -> str | None:
        infos = self.of_kind("commitInfo")
        return infos[0].get("operation") if infos else None

    @property
    def touched_paths(self) -> set[str]:
        return {a["path"] for a in self.of_kind("add")} | {
            a["path"] for a in self.of_kind("remove")
        }


def _latest_commit_version(storage: Storage, at_least: int) -> int:
    """The newest commit version (at least `at_least`, which is known to exist), found by
    checking the next names: the cost grows with the winners, not with the log's length."""
    latest = at_least
    while storage.exists(storage.log_file(commit_file_name(latest + 1))):
        latest += 1
    return latest


def _vacuum_ended(storage: Storage, start_version: int) -> bool:
    """Whether a commit after `start_version` is a VACUUM END (the vacuum finished deleting)."""
    version = start_version + 1
    while True:
        try:
            actions = read_commit_actions(storage, version)
        except FileNotFoundError:
            return False
        if WinningCommit(version, actions).operation == "VACUUM END":
            return True
        version += 1


def encode_operation_values(values: Mapping[str, Any] | None) -> dict[str, str | None]:
    """commitInfo parameters/metrics are string maps: non-strings are JSON-encoded (as Spark),
    None stays a JSON null (Delta Spark's absent option, e.g. RESTORE's `timestamp` when it
    restores a version: `DESCRIBE HISTORY` shows it as null, not as the text "null")."""
    return {
        k: v if v is None or isinstance(v, str) else json.dumps(v, separators=(",", ":"))
        for k, v in (values or {}).items()
    }


@dataclass
class Transaction:
    """An optimistic transaction on one table.

    Args:
        snapshot: the state this transaction read (None to create a table at version 0).
        operation: the commitInfo operation, e.g. "VACUUM START".
        parameters: commitInfo operationParameters (non-strings are JSON-encoded).
        storage: the table's storage when creating a table (else the snapshot's).
        single_writer: declare that no other process writes this table, which allows commits
            on filesystems without a conditional create.
        time_budget_s: how long to keep retrying after conflicts that are not real ones.
        max_attempts: an optional cap on put attempts (None: only the time budget).
        known_version: commit after this version, newer than the snapshot's, when the caller
            has examined the commits in between itself (they are not checked again).
        known_row_id_high_water_mark: the row-id high-water mark as of `known_version` (from
            that commit's result); new row ids start above it.
        on_conflict: optional hook called with each winning commit before the default checks;
            it may drop actions from the transaction (e.g. a backfill batch) and return the
            set of paths it has resolved, which the file-level check then ignores.
        purpose: the operation the commit belongs to (data write by default), which every
            feature of the table must allow.
        reads_whole_table: every row of the snapshot decides what this commit writes, so any
            winner that changed data (an append included) is a conflict.
    """

    snapshot: Snapshot | None
    operation: str
    parameters: Mapping[str, Any] | None = None
    storage: Storage | None = None
    single_writer: bool = False
    time_budget_s: float = DEFAULT_TIME_BUDGET_S
    max_attempts: int | None = None
    on_conflict: Callable[[Transaction, WinningCommit], set[str]] | None = None
    #: what the commit is for, checked against the table's features (a VACUUM bracket commit
    #: is allowed on tables whose features refuse data writes)
    purpose: Access = Access.WRITE
    actions: list[dict[str, Any]] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    files_read: set[str] = field(default_factory=set)
    reads_whole_table: bool = False
    known_version: int | None = None  # a newer version already checked for conflicts
    #: the row-id high-water mark at `known_version` (its commit's result), for new row ids
    known_row_id_high_water_mark: int | None = None
    #: removes already encoded as commit lines (a rewrite's many files), besides `actions`
    encoded_removes: list[EncodedRemoves] = field(default_factory=list)
    #: follow the commit with its version checksum `N.crc` (best-effort, `table.checksum`)
    write_checksum: bool = True
    _serialized_actions: tuple[bytes, bytes] | None = field(default=None, init=False, repr=False)
    #: where the encoded removes are in the bytes `_serialize` gave last (start, end)
    _encoded_span: tuple[int, int] = field(default=(0, 0), init=False, repr=False)

    def __post_init__(self) -> None:
        if self.storage is None:
            if self.snapshot is None:
                raise ValueError("a transaction needs a snapshot or, to create a table, a storage")
            self.storage = self.snapshot.storage

    @property
    def read_version(self) -> int:
        """The version this transaction commits after: its snapshot's, or a newer one the
        caller has already examined (`known_version`)."""
        if self.known_version is not None:
            return self.known_version
        return self.snapshot.version if self.snapshot is not None else -1

    # ------------------------------------------------------------------------ building
    def add_action(self, action: Mapping[str, Any]) -> None:
        self.actions.append(dict(action))

    def add_actions(self, actions: Iterable[Mapping[str, Any]]) -> None:
        for a in actions:
            self.add_action(a)

    def add_encoded_removes(self, removes: EncodedRemoves) -> None:
        """Removes encoded by `delta_ops.table.remove_lines.encode_removes`: committed
        with the other removes, and checked for conflicts as they are."""
        self.encoded_removes.append(removes)
        self._serialized_actions = None

    def read_files(self, paths: Iterable[str]) -> None:
        """Record files whose presence this transaction depends on (conflict detection)."""
        self.files_read.update(paths)

    def _of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [a[kind] for a in self.actions if kind in a]

    def _removed_paths(self) -> set[str]:
        removed = {a["path"] for a in self._of_kind("remove")}
        return removed.union(*(r.paths for r in self.encoded_removes))

    def _num_actions(self) -> int:
        return len(self.actions) + sum(len(r) for r in self.encoded_removes)

    def _effective_protocol(self) -> Protocol | None:
        new = self._of_kind("protocol")
        if new:
            return Protocol.from_action(new[-1])
        return self.snapshot.protocol if self.snapshot is not None else None

    # ------------------------------------------------------------------------ commit
    def commit(self) -> CommitResult:
        """Commit at the next free version; raises ConcurrentModification on a real conflict."""
        protocol = self._effective_protocol()
        if protocol is None:
            raise OperationRefused("a new table's first commit needs a protocol action")
        protocol.check_allows(self.purpose)
        if self.snapshot is not None:
            self.snapshot.protocol.check_allows(self.purpose)
        storage = self.storage
        assert storage is not None
        txn_id = str(uuid.uuid4())
        hwm = self.snapshot.row_id_high_water_mark if self.snapshot is not None else None
        if self.known_version is not None and self.known_row_id_high_water_mark is not None:
            hwm = self.known_row_id_high_water_mark
        deadline = time.monotonic() + self.time_budget_s
        version = self.read_version + 1
        attempt = 0
        while True:
            attempt += 1
            body, new_hwm = self._serialize(version, txn_id, protocol, hwm)
            if self._put(storage, version, body):
                logger.info(
                    "%s: committed %s as version %d (attempt %d)",
                    storage.url,
                    self.operation,
                    version,
                    attempt,
                )
                alarm = self._write_checksum(storage, version, txn_id, body)
                return CommitResult(
                    version=version,
                    attempts=attempt,
                    num_actions=self._num_actions(),
                    row_id_high_water_mark=new_hwm,
                    checksum_alarm=alarm,
                )
            latest = _latest_commit_version(storage, version)
            hwm = self._check_winners(storage, version, latest, hwm, deadline)
            out_of_attempts = self.max_attempts is not None and attempt >= self.max_attempts
            if out_of_attempts or time.monotonic() >= deadline:
                raise ConcurrentModification(
                    f"{storage.url}: gave up committing {self.operation} after {attempt} attempts"
                    f" in {self.time_budget_s:g} s; the table is changing too fast (newest version"
                    f" {latest}); run it again"
                )
            time.sleep(random.uniform(0, min(1.0, 0.005 * 2**attempt)))
            # catch up with what landed during the back-off, so the next attempt comes right
            # after looking: a writer that commits steadily (another engine, with no back-off)
            # would otherwise take every version a sleeping transaction aims at
            newest = _latest_commit_version(storage, latest)
            hwm = self._check_winners(storage, latest + 1, newest, hwm, deadline)
            version = newest + 1

    def _write_checksum(self, storage: Storage, version: int, txn_id: str, body: bytes) -> str:
        """Write the commit's `N.crc`, best-effort: the commit stands whatever happens here (a
        table without that checksum is valid; `delta-ops checksum` writes it later). Returns
        the corruption alarm raised by N-1's checksum ("" when none was)."""
        if not self.write_checksum:
            return ""
        known = None
        keys = [r.keys for r in self.encoded_removes]
        if keys and all(k is not None for k in keys):
            known = KnownRemoves(*self._encoded_span, keys=tuple(k for k in keys if k is not None))
        try:
            write_checksum_after_commit(
                storage,
                version,
                self.snapshot,
                txn_id=txn_id,
                commit_bytes=body,
                known_removes=known,
            )
        except CorruptChecksum as alarm:
            logger.warning(
                "%s: committed version %d without its checksum: %s", storage.url, version, alarm
            )
            return str(alarm)
        except Exception as exc:  # noqa: BLE001 - never fails or undoes the commit
            logger.warning(
                "%s: committed version %d, but not its checksum: %r", storage.url, version, exc
            )
        return ""

    def _check_winners(
        self, storage: Storage, first: int, last: int, hwm: int | None, deadline: float
    ) -> int | None:
        """Check the winning commits `first`..`last` for conflicts; the high-water mark after."""
        for winner_version in range(first, last + 1):
            winner = WinningCommit(winner_version, read_commit_actions(storage, winner_version))
            hwm = self._check_conflicts(winner, hwm, deadline)
        return hwm

    def _put(self, storage: Storage, version: int, body: bytes) -> bool:
        path = storage.log_file(commit_file_name(version))
        try:
            return storage.put_if_absent(path, body)
        except (NotImplementedError, ValueError) as exc:
            if not (self.single_writer or storage.single_writer):
                raise CommitRefused(
                    f"{storage.url}: this store cannot create {commit_file_name(version)} only if"
                    f" absent ({exc}), so concurrent writers could overwrite each other's commits."
                    " If no other process writes this table, say so: --storage-option"
                    " single_writer=true (CLI), storage_options={'single_writer': 'true'}"
                    " (Python, Dagster)"
                ) from exc
            if storage.exists(path):
                return False
            storage.write_atomic(path, body)  # the caller declared that no one else writes
            return True

    def _check_conflicts(
        self, winner: WinningCommit, hwm: int | None, deadline: float | None = None
    ) -> int | None:
        """Raise on a conflict with `winner`; return the high-water mark after it."""
        where = f"{self.storage.url if self.storage else ''}: version {winner.version} ({commit_file_name(winner.version)})"
        if winner.operation == "VACUUM START":
            self._check_survived_vacuum(winner, deadline)
        resolved: set[str] = set()
        if self.on_conflict is not None:
            resolved = self.on_conflict(self, winner)
            self._serialized_actions = None  # the hook may have dropped actions
        if winner.version == 0 and self.snapshot is None:
            raise ConcurrentModification(f"{where}: the table was created concurrently")
        if winner.of_kind("protocol"):
            raise ConcurrentModification(f"{where}: a concurrent commit changed the protocol")
        if winner.of_kind("metaData") and not self._can_absorb_enablement(winner):
            raise ConcurrentModification(f"{where}: a concurrent commit changed the table metadata")
        if self.reads_whole_table:
            changed = [
                a["path"]
                for kind in ("add", "remove")
                for a in winner.of_kind(kind)
                if a.get("dataChange", True) is not False
            ]
            if changed:
                raise ConcurrentModification(
                    f"{where}: a concurrent commit changed the table's data ({len(changed)} files,"
                    f" e.g. {changed[0]}) while {self.operation} read the whole table"
                )
        ours = self._removed_paths() | self.files_read
        ours |= {a["path"] for a in self._of_kind("add") if a.get("dataChange") is False}
        clash = (winner.touched_paths & ours) - resolved
        if clash:
            raise ConcurrentModification(
                f"{where}: a concurrent commit removed or rewrote files this transaction depends on: "
                f"{', '.join(sorted(clash)[:5])}"
            )
        our_apps = {t["appId"] for t in self._of_kind("txn")}
        app_clash = our_apps & {t["appId"] for t in winner.of_kind("txn")}
        if app_clash:
            raise ConcurrentModification(
                f"{where}: a concurrent commit set transaction ids for {sorted(app_clash)}"
            )
        our_domains = {d["domain"] for d in self._of_kind("domainMetadata")} - {ROW_TRACKING_DOMAIN}
        domain_clash = our_domains & {d["domain"] for d in winner.of_kind("domainMetadata")}
        if domain_clash:
            raise ConcurrentModification(
                f"{where}: a concurrent commit changed domain metadata {sorted(domain_clash)}"
            )
        for d in winner.of_kind("domainMetadata"):
            if d.get("domain") == ROW_TRACKING_DOMAIN and not d.get("removed"):
                try:
                    hwm = int(json.loads(d["configuration"])["rowIdHighWaterMark"])
                except (KeyError, ValueError, TypeError):
                    pass
        return hwm

    def _check_survived_vacuum(self, start: WinningCommit, deadline: float | None) -> None:
        """Wait for the vacuum that `start` began to end, then make sure it left every file
        this transaction adds; raise a retryable conflict naming a file it deleted."""
        storage = self.storage
        assert storage is not None
        added = self._referenced_files()
        if not added:
            return
        limit = deadline if deadline is not None else time.monotonic() + self.time_budget_s
        while not _vacuum_ended(storage, start.version):
            if time.monotonic() >= limit:
                raise ConcurrentModification(
                    f"{storage.url}: a VACUUM started at version {start.version} is still"
                    " running; this commit's files may be among its deletes; run it again"
                )
            time.sleep(VACUUM_POLL_S)
        missing = [rel for rel in added if storage.stat(storage.join(rel)) is None]
        if missing:
            raise ConcurrentModification(
                f"{storage.url}: the VACUUM at version {start.version} deleted"
                f" {', '.join(sorted(missing)[:3])}, which this commit adds (a write staged"
                " longer ago than vacuum's in-flight grace); write the data again"
            )

    def _referenced_files(self) -> list[str]:
        """Table-relative paths of the data files and deletion vectors this commit adds."""
        storage = self.storage
        assert storage is not None
        out: list[str] = []
        for add in self._of_kind("add"):
            try:
                out.append(storage.relative_inside_root(add["path"]))
            except UnsafePath:
                continue  # an absolute path elsewhere: not this table's vacuum's to delete
            if add.get("deletionVector"):
                dv = DeletionVectorDescriptor.from_dict(add["deletionVector"]).relative_path()
                if dv:
                    out.append(dv)
        return out

    def _can_absorb_enablement(self, winner: WinningCommit) -> bool:
        """A winner that only turned row tracking on (`rowTrackingEnablementOnly`) does not
        invalidate a transaction that changes neither metadata nor protocol: the table already
        supported row tracking, so our row ids are assigned either way (Delta Spark's
        `RowTracking` enablement backfill commits are tagged so)."""
        infos = winner.of_kind("commitInfo")
        tags = (infos[0].get("tags") or {}) if infos else {}
        if str(tags.get("rowTrackingEnablementOnly", "")).lower() != "true":
            return False
        if self._of_kind("metaData") or self._of_kind("protocol"):
            return False
        protocol = self._effective_protocol()
        if protocol is None or not protocol.supports("rowTracking"):
            return False
        # Spark marks such a transaction as not preserving row tracking
        self.tags = {**self.tags, "delta.rowTracking.preserved": "false"}
        return True

    # ------------------------------------------------------------------------ serialization
    def _serialize(
        self, version: int, txn_id: str, protocol: Protocol, hwm: int | None
    ) -> tuple[bytes, int | None]:
        """The commit's bytes at `version`: a fresh commitInfo line, then the actions, which
        are serialized once unless row ids must be assigned anew for this version."""
        if protocol.supports("rowTracking"):
            # fresh copies of the action bodies: row ids are assigned anew in every attempt
            actions = [
                {kind: dict(body) if isinstance(body, dict) else body for kind, body in a.items()}
                for a in self.actions
            ]
            actions, new_hwm = assign_row_ids(
                actions, version, hwm, suspended=self._row_tracking_suspended()
            )
            info = self._commit_info_line(txn_id, self._in_commit_timestamp(protocol, version))
            return self._joined(info, *_actions_parts(actions)), new_hwm
        if self._serialized_actions is None:
            self._serialized_actions = _actions_parts(self.actions)
        info = self._commit_info_line(txn_id, self._in_commit_timestamp(protocol, version))
        return self._joined(info, *self._serialized_actions), hwm

    def _joined(self, info: bytes, head: bytes, tail: bytes) -> bytes:
        """The commit's bytes: the commitInfo line, the actions up to the removes, the
        encoded removes, the rest (`_actions_parts`); notes where the encoded removes are,
        which the checksum does not parse back."""
        start = len(info) + len(head)
        removes = [r.lines for r in self.encoded_removes]
        self._encoded_span = (start, start + sum(len(lines) for lines in removes))
        return b"".join([info, head, *removes, tail])

    def _commit_info_line(self, txn_id: str, in_commit_timestamp: int | None = None) -> bytes:
        commit_info: dict[str, Any] = {}
        if in_commit_timestamp is not None:
            commit_info["inCommitTimestamp"] = in_commit_timestamp
        commit_info |= {
            "timestamp": in_commit_timestamp or clock.now_ms(),
            "operation": self.operation,
            "operationParameters": encode_operation_values(self.parameters),
        }
        if self.read_version >= 0:
            commit_info["readVersion"] = self.read_version
        commit_info["isolationLevel"] = "Serializable"
        commit_info["isBlindAppend"] = (
            not self._removed_paths() and not self.files_read and bool(self._of_kind("add"))
        )
        if self.metrics:
            commit_info["operationMetrics"] = encode_operation_values(self.metrics)
        if self.tags:
            commit_info["tags"] = dict(self.tags)
        commit_info["engineInfo"] = ENGINE_INFO
        commit_info["txnId"] = txn_id
        return (json.dumps({"commitInfo": commit_info}, separators=(",", ":")) + "\n").encode()

    def _configuration(self) -> Mapping[str, str]:
        """The table properties this commit leaves: its own metaData's, else the snapshot's."""
        metadata = self._of_kind("metaData")
        if metadata:
            configuration: Mapping[str, str] = metadata[-1].get("configuration") or {}
            return configuration
        return self.snapshot.metadata.configuration if self.snapshot is not None else {}

    def _row_tracking_suspended(self) -> bool:
        config = self._configuration()
        return str(config.get("delta.rowTrackingSuspended", "false")).lower() == "true"

    def _in_commit_timestamp(self, protocol: Protocol, version: int) -> int | None:
        """The commit's in-commit timestamp when the table keeps them: the wall clock, but
        always after the previous commit's (protocol: monotonic, `max(now, previous + 1)`)."""
        if not protocol.supports("inCommitTimestamp"):
            return None
        enabled = str(self._configuration().get(ENABLE_IN_COMMIT_TIMESTAMPS, "false")).lower()
        if enabled != "true":
            return None
        now = clock.now_ms()
        if version == 0:
            return now
        storage = self.storage
        assert storage is not None
        previous = read_commit_actions(storage, version - 1)
        info = previous[0].get("commitInfo") if previous else None
        before = info.get("inCommitTimestamp") if isinstance(info, dict) else None
        return max(now, before + 1) if isinstance(before, int) else now


_ACTION_ORDER = ("protocol", "metaData", "domainMetadata", "txn", "remove", "add", "cdc")
_REMOVE_RANK = _ACTION_ORDER.index("remove")


def _actions_parts(actions: list[dict[str, Any]]) -> tuple[bytes, bytes]:
    """Actions as commit lines, in the order Delta Spark writes them, in two parts: the lines
    up to the removes, and the rest (the encoded removes go between them)."""

    def rank(action: Mapping[str, Any]) -> int:
        kind = next(iter(action))
        return _ACTION_ORDER.index(kind) if kind in _ACTION_ORDER else len(_ACTION_ORDER)

    ordered = sorted(actions, key=rank)
    encode = _COMPACT_JSON.encode  # one encoder: json.dumps with options builds one per call
    cut = sum(1 for a in ordered if rank(a) <= _REMOVE_RANK)
    head = "".join(encode(a) + "\n" for a in ordered[:cut]).encode()
    tail = "".join(encode(a) + "\n" for a in ordered[cut:]).encode()
    return head, tail


_COMPACT_JSON = json.JSONEncoder(separators=(",", ":"))


def assign_row_ids(
    actions: list[dict[str, Any]], version: int, hwm: int | None, *, suspended: bool = False
) -> tuple[list[dict[str, Any]], int | None]:
    """Give adds without `baseRowId` fresh row ids above `hwm` and a default commit version.

    Returns the new actions (with a `delta.rowTracking` domain action when the mark moved) and
    the new high-water mark. A file without `numRecords` cannot get ids: that is an error.
    """
    if suspended:
        for a in actions:
            if "add" in a:
                a["add"].pop("baseRowId", None)
                a["add"].pop("defaultRowCommitVersion", None)
        return actions, hwm
    mark = -1 if hwm is None else hwm
    start = mark
    out = [
        a
        for a in actions
        if not ("domainMetadata" in a and a["domainMetadata"].get("domain") == ROW_TRACKING_DOMAIN)
    ]
    for a in out:
        add = a.get("add")
        if add is None:
            continue
        if add.get("baseRowId") is None:
            count = _num_records(add)
            add["baseRowId"] = mark + 1
            mark += count
        if add.get("defaultRowCommitVersion") is None:
            add["defaultRowCommitVersion"] = version
    if mark != start:
        out.append(
            {
                "domainMetadata": {
                    "domain": ROW_TRACKING_DOMAIN,
                    "configuration": json.dumps(
                        {"rowIdHighWaterMark": mark}, separators=(",", ":")
                    ),
                    "removed": False,
                }
            }
        )
    return out, (mark if mark != start else hwm)


def _num_records(add: Mapping[str, Any]) -> int:
    count = num_records_in_stats(add.get("stats"))
    if count is None:
        raise OperationRefused(
            f"cannot assign row ids to {add.get('path')}: its stats lack numRecords"
        )
    return count


__all__ = [
    "CommitRefused",
    "CommitResult",
    "Transaction",
    "WinningCommit",
    "assign_row_ids",
    "encode_operation_values",
]
