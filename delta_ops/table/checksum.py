"""Version checksums (`N.crc`): a version's state in one small JSON file, as Delta Spark writes it.

A checksum records what replaying the log up to version N gives (protocol: "Version Checksum
File"; Delta Spark's `VersionChecksum`): the live files' count and bytes, their size histogram
on Delta Spark's default bins, the deletion-vector counts and deleted-record histogram, the
protocol and the metadata, the set transactions (up to 100) and live domain metadata (up to
10), the commit's in-commit timestamp and transaction id, and for small tables (up to 50 live
files) the live `add` actions themselves. A reader may compare it with the state it rebuilds:
a checksum that disagrees with the replay means that the log, or the checksum, was changed
after the commit (a corruption alarm). Older writers' checksums hold only the counts (no
metadata, no protocol): they are compared on what they hold, the rest reported as absent.

How a checksum is computed:

1. From a snapshot (`checksum_of_snapshot`): columnar sums and `numpy` histograms over the
   snapshot's file index; no Python object per file (the `add` actions only for small tables).
2. After a commit (`checksum_after_commit`): from version N-1's checksum (its `.crc` when
   it is there and complete; else the transaction's snapshot when that is N-1) plus
   the commit's reconciled adds and removes. The rows a commit removes or re-adds (a
   row-tracking backfill re-adds live files) are looked up by their reconciliation key,
   `(path, deletion vector)`, among N-1's live files: in N-1's `allFiles`, else in the
   transaction's snapshot (the conflict checks guarantee that what a commit removes or re-adds
   was not touched by the commits between its snapshot and N-1), and subtracted, so a re-add
   is never counted twice. When no base exists the checksum is computed from a fresh load of N.
   N-1's `.crc` is checked before it is built on (as Delta Spark's incremental checksum
   validates the previous one): where the transaction's snapshot is N-1, on every field it
   has, else on whether it parses. One that fails is a corruption alarm
   (`delta_ops.errors.CorruptChecksum`): N gets no checksum, neither built on the
   suspect one nor computed from the log (which would certify the log's state over the
   checksum that contradicts it, and make the latest version look sound); the transaction
   reports the alarm and its commit stands.

Writing (`write_checksum`) never overwrites (put-if-absent; protocol: writers MUST NOT
overwrite a checksum) and happens only after the commit is written; the transaction does it
best-effort (a failure leaves a valid table without that `.crc`; `delta-ops checksum` writes it
later).

Loads do not read checksums. Delta Spark takes a version's protocol and metadata from its
checksum instead of reading them from the checkpoint; here a table's head costs the
checkpoint's two columns and the commits after it, little more than the checksum's one read,
and a checksum that disagrees with the log (the case this module exists to catch) would then
decide what log cleanup and vacuum may delete.

For example:

    snapshot = load_snapshot(path)
    checksum = checksum_of_snapshot(snapshot)
    write_checksum(snapshot.storage, checksum)     # False when N.crc is there already
    check = check_checksum(load_snapshot(path))    # the recorded checksum against the replay
    check.status, check.mismatches                 # ChecksumStatus.AGREES, ()
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from delta_ops.errors import CorruptChecksum, CorruptLog, DeltaOpsError
from delta_ops.log.actions import (
    ADD_FIELDS,
    DELETION_VECTOR_TYPE,
    deletion_vector_in_log,
    file_rows_as_actions,
    restrict_partition_values,
)
from delta_ops.log.file_names import LogFile, LogFileKind, checksum_file_name, commit_file_name
from delta_ops.log.reader import CommitsRead, parse_commit, read_commits
from delta_ops.log.replay import DomainMetadata, ReconciledState, Txn, reconcile
from delta_ops.log.state_stream import file_keys
from delta_ops.protocol.deletion_vectors import dv_unique_ids
from delta_ops.protocol.features import Access, Protocol
from delta_ops.protocol.properties import SET_TRANSACTION_RETENTION_DURATION, TableProperties
from delta_ops.protocol.schema import StructType, parse_schema
from delta_ops.storage import Storage
from delta_ops.table.snapshot import Metadata, Snapshot, load_snapshot, partition_value_keys

logger = logging.getLogger(__name__)

_KB, _MB, _GB = 1 << 10, 1 << 20, 1 << 30
#: Delta Spark's `FileSizeHistogramUtils.DEFAULT_BINS`: each value starts a bin (inclusive)
DEFAULT_FILE_SIZE_BINS: tuple[int, ...] = (
    0,
    *(n * _KB for n in (8, 16, 32, 64, 128, 256, 512)),
    *(n * _MB for n in (1, 2, 4)),
    *(n * _MB for n in range(8, 41, 4)),  # 4 MB steps to 40 MB
    *(n * _MB for n in range(48, 121, 8)),  # 8 MB steps to 120 MB
    *(n * _MB for n in range(124, 145, 4)),  # 4 MB steps to 144 MB (detail around 128 MB)
    *(n * _MB for n in range(160, 577, 16)),  # 16 MB steps to 576 MB
    *(n * _MB for n in range(640, 1409, 64)),  # 64 MB steps to 1408 MB
    *(n * _MB for n in range(1536, 2049, 128)),  # 128 MB steps to 2 GB
    *(n * _MB for n in range(2304, 4097, 256)),  # 256 MB steps to 4 GB
    *(n * _GB for n in (8, 16, 32, 64, 128, 256)),
)
#: where each of the 10 bins of Delta Spark's `DeletedRecordCountsHistogram` starts
DELETED_RECORD_COUNT_BINS: tuple[int, ...] = (
    0,
    1,
    10,
    100,
    1_000,
    10_000,
    100_000,
    1_000_000,
    10_000_000,
    2**31 - 1,
)
#: Delta Spark's defaults: `allFiles` up to this many live files ...
ALL_FILES_MAX_FILES = 50
#: ... unless the table collects stats on more columns than this
ALL_FILES_MAX_INDEXED_COLUMNS = 32
#: `setTransactions` up to this many appIds, `domainMetadata` up to this many domains
SET_TRANSACTIONS_MAX = 100
DOMAIN_METADATA_MAX = 10


def _bin_index(values: np.ndarray, starts: Sequence[int]) -> np.ndarray:
    """The bin of each value (-1 below the first bin): Delta Spark's `getBinIndex`."""
    index: np.ndarray = np.searchsorted(np.asarray(starts, np.int64), values, side="right") - 1
    return index


# ------------------------------------------------------------------------------ histograms
@dataclass(frozen=True)
class FileSizeHistogram:
    """Live files and their bytes per size bin (protocol: "File Size Histogram Schema")."""

    boundaries: tuple[int, ...]
    file_counts: tuple[int, ...]
    total_bytes: tuple[int, ...]

    @classmethod
    def of(
        cls, sizes: np.ndarray, boundaries: Sequence[int] = DEFAULT_FILE_SIZE_BINS
    ) -> FileSizeHistogram:
        """The histogram of file sizes (int64; a negative size is in no bin, as in Spark)."""
        sizes = np.asarray(sizes, np.int64)
        index = _bin_index(sizes, boundaries)
        kept = index >= 0
        counts = np.bincount(index[kept], minlength=len(boundaries))
        totals = np.zeros(len(boundaries), np.int64)
        np.add.at(totals, index[kept], sizes[kept])  # exact: int64, not bincount's float weights
        return cls(tuple(boundaries), tuple(counts.tolist()), tuple(totals.tolist()))

    def combined(self, other: FileSizeHistogram, sign: int = 1) -> FileSizeHistogram:
        """This histogram plus (or, with `sign=-1`, minus) another on the same bins."""
        if other.boundaries != self.boundaries:
            raise ValueError("histograms on different bins")
        return FileSizeHistogram(
            self.boundaries,
            tuple(a + sign * b for a, b in zip(self.file_counts, other.file_counts)),
            tuple(a + sign * b for a, b in zip(self.total_bytes, other.total_bytes)),
        )

    def to_data(self) -> dict[str, list[int]]:
        return {
            "sortedBinBoundaries": list(self.boundaries),
            "fileCounts": list(self.file_counts),
            "totalBytes": list(self.total_bytes),
        }

    @classmethod
    def from_data(cls, data: Any) -> FileSizeHistogram:
        """Read the JSON form; ValueError when it breaks the schema's rules."""
        if not isinstance(data, Mapping):
            raise TypeError("not an object")
        parts = [data.get(k) for k in ("sortedBinBoundaries", "fileCounts", "totalBytes")]
        if not all(isinstance(p, list) and all(_is_int(v) for v in p) for p in parts):
            raise ValueError(
                "sortedBinBoundaries, fileCounts and totalBytes must be integer arrays"
            )
        boundaries, counts, totals = (tuple(int(v) for v in p) for p in parts)  # type: ignore[union-attr]
        if not boundaries or boundaries[0] != 0 or list(boundaries) != sorted(set(boundaries)):
            raise ValueError("sortedBinBoundaries must start at 0 and increase")
        if not len(boundaries) == len(counts) == len(totals):
            raise ValueError("fileCounts and totalBytes must be as long as sortedBinBoundaries")
        return cls(boundaries, counts, totals)


def deleted_record_counts(cardinalities: np.ndarray) -> tuple[int, ...]:
    """Files per deleted-record bin (a file without a deletion vector has 0 deleted rows)."""
    index = _bin_index(np.asarray(cardinalities, np.int64), DELETED_RECORD_COUNT_BINS)
    counts = np.bincount(index[index >= 0], minlength=len(DELETED_RECORD_COUNT_BINS))
    return tuple(counts.tolist())


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# ------------------------------------------------------------------------------ the checksum
@dataclass(frozen=True)
class VersionChecksum:
    """The content of `N.crc`. Optional fields are None where they are not recorded; so are
    `metadata` and `protocol`, which the protocol requires, in an older writer's checksum
    (Delta Spark's and Databricks' first ones held only the counts)."""

    version: int
    table_size_bytes: int
    num_files: int
    metadata: Mapping[str, Any] | None  # the metaData action (None: an older writer's)
    protocol: Mapping[str, Any] | None  # the protocol action (None: an older writer's)
    num_metadata: int = 1
    num_protocol: int = 1
    txn_id: str | None = None
    in_commit_timestamp: int | None = None
    set_transactions: tuple[Mapping[str, Any], ...] | None = None
    domain_metadata: tuple[Mapping[str, Any], ...] | None = None
    file_size_histogram: FileSizeHistogram | None = None
    num_deleted_records: int | None = None
    num_deletion_vectors: int | None = None
    deleted_record_counts: tuple[int, ...] | None = None
    all_files: tuple[Mapping[str, Any], ...] | None = field(default=None, repr=False)

    @property
    def file_name(self) -> str:
        return checksum_file_name(self.version)

    @property
    def absent(self) -> tuple[str, ...]:
        """The fields the protocol requires that this checksum lacks (an older writer's)."""
        return tuple(
            name
            for name, value in (("metadata", self.metadata), ("protocol", self.protocol))
            if value is None
        )

    def to_data(self) -> dict[str, Any]:
        """The JSON object, fields in Delta Spark's order, absent optional fields left out; the
        histogram under the protocol's `fileSizeHistogram`, as Delta Spark writes it since 4.2
        (before, `histogramOpt`: `from_json` reads both)."""
        out: dict[str, Any] = {}
        if self.txn_id is not None:
            out["txnId"] = self.txn_id
        out["tableSizeBytes"] = self.table_size_bytes
        out["numFiles"] = self.num_files
        if self.num_deleted_records is not None:
            out["numDeletedRecordsOpt"] = self.num_deleted_records
        if self.num_deletion_vectors is not None:
            out["numDeletionVectorsOpt"] = self.num_deletion_vectors
        out["numMetadata"] = self.num_metadata
        out["numProtocol"] = self.num_protocol
        if self.in_commit_timestamp is not None:
            out["inCommitTimestampOpt"] = self.in_commit_timestamp
        if self.set_transactions is not None:
            out["setTransactions"] = [dict(t) for t in self.set_transactions]
        if self.domain_metadata is not None:
            out["domainMetadata"] = [dict(d) for d in self.domain_metadata]
        if self.metadata is not None:
            out["metadata"] = dict(self.metadata)
        if self.protocol is not None:
            out["protocol"] = dict(self.protocol)
        if self.file_size_histogram is not None:
            out["fileSizeHistogram"] = self.file_size_histogram.to_data()
        if self.deleted_record_counts is not None:
            out["deletedRecordCountsHistogramOpt"] = {
                "deletedRecordCounts": list(self.deleted_record_counts)
            }
        if self.all_files is not None:
            out["allFiles"] = [dict(f) for f in self.all_files]
        return out

    def to_json(self) -> bytes:
        return (json.dumps(self.to_data(), separators=(",", ":")) + "\n").encode()

    @classmethod
    def from_json(cls, data: bytes, version: int) -> VersionChecksum:
        """Parse `N.crc`; CorruptLog names the file and what is wrong. Readers are lenient as
        Delta Spark's are: its older `histogramOpt` name is read as `fileSizeHistogram`, an older
        writer's checksum without `metadata` and `protocol` reads with them None, and fields
        outside the protocol (their `numTransactions`) are ignored."""
        name = checksum_file_name(version)
        try:
            obj = json.loads(data)
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:
            what = "nested too deeply" if isinstance(exc, RecursionError) else exc
            raise CorruptLog(name, f"not a JSON object: {what}") from None
        if not isinstance(obj, dict):
            raise CorruptLog(name, "not a JSON object")
        try:
            return cls._from_object(obj, version)
        except (ValueError, TypeError, KeyError, DeltaOpsError) as exc:
            raise CorruptLog(name, f"not a version checksum: {exc}") from None

    @classmethod
    def _from_object(cls, obj: Mapping[str, Any], version: int) -> VersionChecksum:
        for key in ("tableSizeBytes", "numFiles", "numMetadata", "numProtocol"):
            if not _is_int(obj.get(key)):
                raise ValueError(f"{key} must be an integer")
        metadata, protocol = obj.get("metadata"), obj.get("protocol")
        for key, value in (("metadata", metadata), ("protocol", protocol)):
            if value is not None and not isinstance(value, dict):
                raise TypeError(f"{key} must be an object")
        if protocol is not None:
            Protocol.from_action(protocol)  # raises on a protocol no table could have
        # the protocol's name, else Delta Spark's before 4.2 (it reads both, as one field)
        histogram = obj.get("fileSizeHistogram")
        if histogram is None:
            histogram = obj.get("histogramOpt")
        deleted = obj.get("deletedRecordCountsHistogramOpt")
        counts = deleted.get("deletedRecordCounts") if isinstance(deleted, dict) else None
        return cls(
            version=version,
            table_size_bytes=obj["tableSizeBytes"],
            num_files=obj["numFiles"],
            metadata=metadata,
            protocol=protocol,
            num_metadata=obj["numMetadata"],
            num_protocol=obj["numProtocol"],
            txn_id=obj.get("txnId") if isinstance(obj.get("txnId"), str) else None,
            in_commit_timestamp=_optional_int(obj, "inCommitTimestampOpt"),
            set_transactions=_optional_objects(obj, "setTransactions"),
            domain_metadata=_optional_objects(obj, "domainMetadata"),
            file_size_histogram=None
            if histogram is None
            else FileSizeHistogram.from_data(histogram),
            num_deleted_records=_optional_int(obj, "numDeletedRecordsOpt"),
            num_deletion_vectors=_optional_int(obj, "numDeletionVectorsOpt"),
            deleted_record_counts=tuple(counts)
            if isinstance(counts, list) and all(_is_int(c) for c in counts)
            else None,
            all_files=_optional_objects(obj, "allFiles"),
        )


def _optional_int(obj: Mapping[str, Any], key: str) -> int | None:
    value = obj.get(key)
    if value is None:
        return None
    if not _is_int(value):
        raise ValueError(f"{key} must be an integer")
    return int(value)


def _optional_objects(obj: Mapping[str, Any], key: str) -> tuple[Mapping[str, Any], ...] | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise ValueError(f"{key} must be an array of objects")
    return tuple(value)


# ------------------------------------------------------------------------------ reading, writing
def read_checksum(storage: Storage, version: int) -> VersionChecksum | None:
    """Version `version`'s checksum; None when the table has none. CorruptLog when it is there
    but unreadable."""
    try:
        data = storage.read_bytes(storage.log_file(checksum_file_name(version)))
    except FileNotFoundError:
        return None
    return VersionChecksum.from_json(data, version)


def write_checksum(storage: Storage, checksum: VersionChecksum) -> bool:
    """Write `N.crc` only if it is absent (False when it was there already). On a store without
    a conditional create, a check then an atomic write: two writers of one version's checksum
    write the same state, so the race that remains is harmless."""
    path = storage.log_file(checksum.file_name)
    data = checksum.to_json()
    try:
        return storage.put_if_absent(path, data)
    except (NotImplementedError, ValueError):
        if storage.exists(path):
            return False
        storage.write_atomic(path, data)
        return True


def commit_info(storage: Storage, version: int) -> Mapping[str, Any]:
    """The `commitInfo` on the first line of commit `version` ({} when it has none there or the
    commit is gone): where its transaction id and in-commit timestamp are."""
    try:
        with storage.open_input(storage.log_file(commit_file_name(version))) as handle:
            line = handle.readline()
    except FileNotFoundError:
        return {}
    try:
        info = json.loads(line).get("commitInfo")
    except (ValueError, AttributeError, UnicodeDecodeError, RecursionError):
        return {}
    return info if isinstance(info, dict) else {}


# ------------------------------------------------------------------------------ from a snapshot
@dataclass(frozen=True)
class _FileFacts:
    """What a checksum counts of some files: sizes and deletion-vector cardinalities."""

    sizes: np.ndarray  # int64; -1 where a size is missing
    has_dv: np.ndarray  # bool
    cardinalities: np.ndarray  # int64; 0 without a deletion vector

    @classmethod
    def of(cls, files: pa.Table) -> _FileFacts:
        n = files.num_rows
        if n == 0:
            return cls(np.zeros(0, np.int64), np.zeros(0, bool), np.zeros(0, np.int64))
        sizes = pc.fill_null(files.column("size"), -1).to_numpy().astype(np.int64, copy=False)
        if "deletionVector" not in files.column_names:
            return cls(sizes, np.zeros(n, bool), np.zeros(n, np.int64))
        dv = files.column("deletionVector")
        has_dv = pc.is_valid(dv).to_numpy(zero_copy_only=False).astype(bool, copy=False)
        if not has_dv.any():
            return cls(sizes, has_dv, np.zeros(n, np.int64))
        card = pc.fill_null(pc.struct_field(dv, "cardinality"), 0)
        cards = pc.if_else(pc.is_valid(dv), card, 0).to_numpy().astype(np.int64, copy=False)
        return cls(sizes, has_dv, cards)

    @property
    def count(self) -> int:
        return len(self.sizes)

    @property
    def bytes(self) -> int:
        return int(self.sizes[self.sizes > 0].sum())

    @property
    def num_deletion_vectors(self) -> int:
        return int(self.has_dv.sum())

    @property
    def num_deleted_records(self) -> int:
        return int(self.cardinalities.sum())


def tracks_deletion_vectors(protocol: Protocol, metadata: Metadata) -> bool:
    """Whether a checksum carries deletion-vector counts: the table may have deletion vectors
    (Delta Spark's `deletionVectorsReadable`: the feature, on a parquet table)."""
    return protocol.supports("deletionVectors") and metadata.format_provider == "parquet"


def _keeps_all_files(metadata: Metadata, num_files: int) -> bool:
    """Delta Spark's rule for `allFiles`: a small table whose checkpoints keep stats and that
    collects stats on at most the default number of columns."""
    if num_files > ALL_FILES_MAX_FILES:
        return False
    try:
        props = TableProperties.from_configuration(metadata.configuration)
    except DeltaOpsError:
        return False
    stats_kept = props.checkpoint_write_stats_as_json or props.checkpoint_write_stats_as_struct
    return stats_kept and props.data_skipping_num_indexed_cols <= ALL_FILES_MAX_INDEXED_COLUMNS


def _set_transactions(
    txns: Iterable[Txn], metadata: Metadata
) -> tuple[Mapping[str, Any], ...] | None:
    """The set transactions as a checksum lists them; None past the limit or when the table
    expires them (`delta.setTransactionRetentionDuration`: which are live depends on when
    one looks, so Delta Spark leaves them out)."""
    listed = sorted(txns, key=lambda t: t.app_id)
    if len(listed) > SET_TRANSACTIONS_MAX:
        return None
    if SET_TRANSACTION_RETENTION_DURATION in metadata.configuration:
        return None
    return tuple(_txn_data(t) for t in listed)


def _txn_data(txn: Txn) -> dict[str, Any]:
    out: dict[str, Any] = {"appId": txn.app_id, "version": txn.version}
    if txn.last_updated is not None:
        out["lastUpdated"] = txn.last_updated
    return out


def _domain_metadata(domains: Iterable[DomainMetadata]) -> tuple[Mapping[str, Any], ...] | None:
    """The live domains as a checksum lists them (all of them, or None past the limit)."""
    listed = sorted((d for d in domains if not d.removed), key=lambda d: d.domain)
    if len(listed) > DOMAIN_METADATA_MAX:
        return None
    return tuple(
        {"domain": d.domain, "configuration": d.configuration, "removed": False} for d in listed
    )


def _all_files(files: pa.Table) -> tuple[Mapping[str, Any], ...]:
    """Live `add` actions as a checksum lists them (Delta Spark: `dataChange` false)."""
    actions = file_rows_as_actions(files, columns=ADD_FIELDS)
    return tuple({**a, "dataChange": False} for a in actions)


def checksum_of_snapshot(
    snapshot: Snapshot,
    *,
    boundaries: Sequence[int] = DEFAULT_FILE_SIZE_BINS,
    info: Mapping[str, Any] | None = None,
    with_all_files: bool = True,
) -> VersionChecksum:
    """The checksum of a loaded snapshot, computed from its columnar file index.

    Args:
        snapshot: the version to describe.
        boundaries: the file-size histogram's bins (Delta Spark's by default).
        info: the version's `commitInfo` (transaction id, in-commit timestamp); read from its
            commit when None.
        with_all_files: list the live files of a small table (Delta Spark's rule).
    """
    facts = _FileFacts.of(snapshot.file_index)
    info = commit_info(snapshot.storage, snapshot.version) if info is None else info
    tracks_dvs = tracks_deletion_vectors(snapshot.protocol, snapshot.metadata)
    keep_files = with_all_files and _keeps_all_files(snapshot.metadata, facts.count)
    ict = info.get("inCommitTimestamp")
    return VersionChecksum(
        version=snapshot.version,
        table_size_bytes=facts.bytes,
        num_files=facts.count,
        metadata=snapshot.metadata.to_action(),
        protocol=snapshot.protocol.to_action(),
        txn_id=info.get("txnId") if isinstance(info.get("txnId"), str) else None,
        in_commit_timestamp=ict if _is_int(ict) else None,
        set_transactions=_set_transactions(snapshot.txns.values(), snapshot.metadata),
        domain_metadata=_domain_metadata(snapshot.domains.values()),
        file_size_histogram=FileSizeHistogram.of(facts.sizes, boundaries),
        num_deleted_records=facts.num_deleted_records if tracks_dvs else None,
        num_deletion_vectors=facts.num_deletion_vectors if tracks_dvs else None,
        deleted_record_counts=deleted_record_counts(facts.cardinalities) if tracks_dvs else None,
        all_files=_all_files(snapshot.files) if keep_files else None,
    )


# ------------------------------------------------------------------------------ after a commit
@dataclass(frozen=True)
class _Change:
    """What one commit did, reconciled within itself."""

    adds: pa.Table
    removes: pa.Table
    protocol: Mapping[str, Any] | None
    metadata: Mapping[str, Any] | None
    txns: dict[str, Txn]
    domains: dict[str, DomainMetadata]
    removed_domains: dict[str, DomainMetadata]
    in_commit_timestamp: int | None


@dataclass(frozen=True)
class KnownRemoves:
    """Remove lines of a commit whose files the committer knows (`EncodedRemoves`): the
    span of the commit's bytes they take, and the removed files' keys (`path` and
    `deletionVector` columns). A rewrite's commit is mostly such lines (10,000 removes with
    their stats: 3 MB); the checksum takes their keys instead of parsing them back."""

    start: int
    end: int
    keys: tuple[pa.Table, ...]


def _read_change(
    storage: Storage, version: int, content: bytes | None, known: KnownRemoves | None = None
) -> _Change:
    """The commit's actions, parsed from `content` (its bytes, when the committer has them)
    or read; `known` removes in `content` are taken from their keys, not parsed."""
    if content is not None and known is not None:
        change = _change_with_known_removes(version, content, known)
        if change is not None:
            return change
    if content is not None:
        read = parse_commit(version, content)
    else:
        name = commit_file_name(version)
        entry = storage.stat(storage.log_file(name))
        if entry is None:
            raise FileNotFoundError(storage.log_file(name))
        commit = LogFile(name, LogFileKind.COMMIT, version, entry.size)
        read = read_commits(storage, [commit], seq_start=0)
    state = reconcile(read.batch)
    return _change_of(read, state, state.tombstones)


def _change_of(read: CommitsRead, state: ReconciledState, removes: pa.Table) -> _Change:
    """The change a commit made: its reconciled `state`, with `removes` as its removes."""
    return _Change(
        adds=state.files,
        removes=removes,
        protocol=state.protocol,
        metadata=state.metadata,
        txns=state.txns,
        domains=state.domains,
        removed_domains=state.removed_domains,
        in_commit_timestamp=read.in_commit_timestamps[0] if read.in_commit_timestamps else None,
    )


def _change_with_known_removes(version: int, content: bytes, known: KnownRemoves) -> _Change | None:
    """`_read_change` of a commit whose `known` removes are not parsed: the other lines
    are, reconciled, and the known removes join their removes. None when another action of
    the commit names one of their files (the commit's own reconciliation then decides)."""
    read = parse_commit(version, content[: known.start] + content[known.end :])
    state = reconcile(read.batch)
    parts = [_key_columns(t) for t in known.keys]
    removed = pa.concat_arrays([paths for paths, _ in parts]) if parts else None
    if removed is not None and len(removed):
        named = pa.concat_arrays(
            [
                state.files.column("path").combine_chunks().cast(pa.string()),
                state.tombstones.column("path").combine_chunks().cast(pa.string()),
            ]
        )
        if len(named) and pc.any(pc.is_in(removed, value_set=named)).as_py():
            return None
    parts.append(_key_columns(state.tombstones))
    removes = pa.table(
        {
            "path": pa.concat_arrays([paths for paths, _ in parts]),
            _DV_ID: pa.concat_arrays([ids for _, ids in parts]),
        }
    )
    return _change_of(read, state, removes)


#: a column of deletion-vector ids standing in for `deletionVector` (see `_key_columns`)
_DV_ID = "_dvId"


def _key_columns(files: pa.Table) -> tuple[pa.Array, pa.Array]:
    """Each row's path and deletion-vector id (null where it has none)."""
    paths = files.column("path").combine_chunks().cast(pa.string())
    if _DV_ID in files.column_names:
        return paths, files.column(_DV_ID).combine_chunks()
    if "deletionVector" not in files.column_names or not files.num_rows:
        return paths, pa.nulls(files.num_rows, pa.string())
    dv = files.column("deletionVector").combine_chunks()
    ids = dv_unique_ids(dv) if dv.null_count < len(dv) else pa.nulls(len(dv), pa.string())
    return paths, ids.cast(pa.string())


def _keys(files: pa.Table) -> pa.Array:
    """The reconciliation key of each row: path and deletion-vector id."""
    return file_keys(*_key_columns(files))


def _files_table(actions: Sequence[Mapping[str, Any]]) -> pa.Table:
    """The key and counted fields of some `add` actions (a checksum's `allFiles`) as Arrow."""
    return pa.table(
        {
            "path": pa.array([a.get("path") for a in actions], pa.string()),
            "size": pa.array([a.get("size") for a in actions], pa.int64()),
            "deletionVector": pa.array(
                [a.get("deletionVector") for a in actions], DELETION_VECTOR_TYPE
            ),
        }
    )


def _rows_at_paths(live: pa.Table, paths: pa.Array) -> pa.Table:
    """The rows of `live` at `paths` (what narrows a lookup by key: cheap on a big file
    index)."""
    return live.filter(pc.is_in(live.column("path"), value_set=paths))


def _no_deletion_vectors(*parts: pa.Array | pa.Table) -> bool:
    """Whether no row of these deletion-vector id columns, or files tables, has a deletion
    vector."""
    for part in parts:
        if isinstance(part, pa.Table):
            if "deletionVector" not in part.column_names:
                continue
            part = part.column("deletionVector")
        if part.null_count < len(part):
            return False
    return True


class _NoBase(Exception):
    """The checksum cannot be derived from the previous version's: compute it from a load."""


def checksum_after_commit(
    storage: Storage,
    version: int,
    read_snapshot: Snapshot | None,
    *,
    txn_id: str | None = None,
    commit_bytes: bytes | None = None,
    known_removes: KnownRemoves | None = None,
) -> VersionChecksum:
    """The checksum of `version`, just committed by a transaction that read `read_snapshot`
    (None: it created the table): version N-1's checksum plus this commit's reconciled adds and
    removes; a fresh load of `version` when N-1 has no usable checksum.

    Args:
        storage: the table.
        version: the commit's version.
        read_snapshot: the snapshot the transaction started from (any version below `version`).
        txn_id: the commit's transaction id (else read from its commitInfo).
        commit_bytes: the commit as written (else read).
        known_removes: remove lines in `commit_bytes` whose keys the committer has.
    """
    change = _read_change(storage, version, commit_bytes, known_removes)
    try:
        return _derived(storage, version, read_snapshot, change, txn_id)
    except _NoBase as why:
        logger.info("%s: checksum of version %d from a full load: %s", storage.url, version, why)
    info: dict[str, Any] = {"txnId": txn_id} if txn_id else {}
    if change.in_commit_timestamp is not None:
        info["inCommitTimestamp"] = change.in_commit_timestamp
    return checksum_of_snapshot(
        load_snapshot(storage, version), info=info or commit_info(storage, version)
    )


def _empty_base(change: _Change) -> VersionChecksum:
    """The state before a table's first commit."""
    if change.protocol is None or change.metadata is None:
        raise _NoBase("the first commit lacks a protocol or metadata")
    return VersionChecksum(
        version=-1,
        table_size_bytes=0,
        num_files=0,
        metadata=change.metadata,
        protocol=change.protocol,
        set_transactions=(),
        domain_metadata=(),
        file_size_histogram=FileSizeHistogram.of(np.zeros(0, np.int64)),
        num_deleted_records=0,
        num_deletion_vectors=0,
        deleted_record_counts=deleted_record_counts(np.zeros(0, np.int64)),
        all_files=(),
    )


def _usable_checksum(
    storage: Storage, version: int, fresh: Snapshot | None
) -> VersionChecksum | None:
    """Version `version`'s recorded checksum when it can be built on: complete (a file size
    histogram, as Delta Spark requires, metadata and protocol). It is checked first (Delta
    Spark's incremental checksum validates the previous one too): against `fresh`, that
    version's snapshot when the transaction has it, on every field it has; else only whether
    it parses (a snapshot older than N-1 says nothing of N-1's state: built on as Delta Spark
    builds on it).

    Raises:
        CorruptChecksum: it does not parse, or disagrees with `fresh` (a corruption alarm:
            nothing is built on it).
    """
    try:
        check, recorded = _read_and_check(storage, version, fresh)
    except OSError as exc:
        logger.warning(
            "%s: not building on the checksum of version %d: %s", storage.url, version, exc
        )
        return None
    if check.corrupt:
        raise check.alarm()
    if recorded is None or recorded.file_size_histogram is None or recorded.absent:
        return None  # none, or an older writer's: no histogram, metadata or protocol to carry on
    if recorded.num_metadata != 1 or recorded.num_protocol != 1:
        return None
    return recorded


def _derived(
    storage: Storage,
    version: int,
    read_snapshot: Snapshot | None,
    change: _Change,
    txn_id: str | None,
) -> VersionChecksum:
    fresh = (
        read_snapshot
        if read_snapshot is not None and read_snapshot.version == version - 1
        else None
    )
    if version == 0:
        base = _empty_base(change)
    else:
        recorded = _usable_checksum(storage, version - 1, fresh)
        if recorded is not None:
            base = recorded
        elif fresh is not None:
            base = checksum_of_snapshot(fresh, info={})
        else:
            raise _NoBase(f"version {version - 1} has no usable checksum")
    # where the rows this commit removes or re-adds are looked up: N-1's listed files, else
    # the transaction's snapshot (what the commit touches, no commit since has touched)
    if base.all_files is not None:
        live = _files_table(base.all_files)
    elif read_snapshot is not None:
        live = read_snapshot.file_index
    else:
        raise _NoBase(f"no list of version {version - 1}'s files to look removed files up in")
    (add_paths, add_ids), (remove_paths, remove_ids) = map(
        _key_columns, (change.adds, change.removes)
    )
    touched_paths = pa.concat_arrays(
        [
            change.adds.column("path").combine_chunks(),
            change.removes.column("path").combine_chunks(),
        ]
    ).unique()
    near = _rows_at_paths(live, touched_paths)
    if _no_deletion_vectors(add_ids, remove_ids, near):
        # every key is a path without a deletion vector: the rows at those paths are the
        # rows of those keys (a compaction's 10,000 removes: ~3 ms of keys not built)
        old = near
    else:
        touched = pa.concat_arrays(
            [file_keys(add_paths, add_ids), file_keys(remove_paths, remove_ids)]
        )
        old = (
            near.filter(pc.is_in(_keys(near), value_set=touched.unique()))
            if near.num_rows
            else near
        )
    if base.all_files is None and fresh is None and read_snapshot is not None:
        _check_stale_snapshot(change, file_keys(add_paths, add_ids), old)
    return _applied(base, version, change, old, fresh, txn_id)


def _check_stale_snapshot(change: _Change, add_keys: pa.Array, old: pa.Table) -> None:
    """With a snapshot older than N-1, a file the commit adds as new data (dataChange=true)
    that the snapshot already had live may have been removed by a commit in between (the
    conflict checks cover removes and dataChange=false re-adds only): derive nothing then."""
    if not old.num_rows or not change.adds.num_rows:
        return
    new_data = pc.fill_null(change.adds.column("dataChange"), True)
    readded = pc.and_(new_data, pc.is_in(add_keys, value_set=_keys(old)))
    if pc.any(readded).as_py():
        raise _NoBase("the commit re-adds live files as new data over an older snapshot")


def _applied(
    base: VersionChecksum,
    version: int,
    change: _Change,
    old: pa.Table,
    fresh: Snapshot | None,
    txn_id: str | None,
) -> VersionChecksum:
    """`base` with the commit applied: `old` (N-1's rows of the keys it touches) out, its adds in."""
    metadata_action = change.metadata if change.metadata is not None else base.metadata
    protocol_action = change.protocol if change.protocol is not None else base.protocol
    if metadata_action is None or protocol_action is None or base.protocol is None:
        raise _NoBase(f"version {version - 1}'s checksum lacks {' and '.join(base.absent)}")
    metadata = Metadata.from_action(metadata_action)
    protocol = Protocol.from_action(protocol_action)
    gone, new = _FileFacts.of(old), _FileFacts.of(change.adds)
    num_files = base.num_files - gone.count + new.count
    size = base.table_size_bytes - gone.bytes + new.bytes
    histogram = None
    if base.file_size_histogram is not None:
        bins = base.file_size_histogram.boundaries
        histogram = base.file_size_histogram.combined(
            FileSizeHistogram.of(new.sizes, bins)
        ).combined(FileSizeHistogram.of(gone.sizes, bins), -1)
    dv_counts, dv_histogram = _deletion_vector_counts(
        base, Protocol.from_action(base.protocol), protocol, metadata, gone, new
    )
    all_files = _all_files_after(base, change, fresh, metadata, num_files, size)
    return VersionChecksum(
        version=version,
        table_size_bytes=size,
        num_files=num_files,
        metadata=metadata.to_action(),
        protocol=protocol.to_action(),
        txn_id=txn_id,
        in_commit_timestamp=change.in_commit_timestamp,
        set_transactions=_merged_txns(base, change, metadata),
        domain_metadata=_merged_domains(base, change),
        file_size_histogram=histogram,
        num_deleted_records=dv_counts[0] if dv_counts else None,
        num_deletion_vectors=dv_counts[1] if dv_counts else None,
        deleted_record_counts=dv_histogram,
        all_files=all_files,
    )


def _deletion_vector_counts(
    base: VersionChecksum,
    base_protocol: Protocol,
    protocol: Protocol,
    metadata: Metadata,
    gone: _FileFacts,
    new: _FileFacts,
) -> tuple[tuple[int, int] | None, tuple[int, ...] | None]:
    """((deleted records, deletion vectors), deleted-record histogram) after the commit; None
    where the table has no deletion vectors or version N-1's are not known."""
    if not tracks_deletion_vectors(protocol, metadata):
        return None, None
    had_none = not base_protocol.supports("deletionVectors")  # no file could have one
    records = base.num_deleted_records if not had_none else 0
    vectors = base.num_deletion_vectors if not had_none else 0
    histogram = base.deleted_record_counts
    if had_none:
        histogram = (base.num_files, *([0] * (len(DELETED_RECORD_COUNT_BINS) - 1)))
    counts = None
    if records is not None and vectors is not None:
        counts = (
            records - gone.num_deleted_records + new.num_deleted_records,
            vectors - gone.num_deletion_vectors + new.num_deletion_vectors,
        )
    if histogram is not None:
        added = deleted_record_counts(new.cardinalities)
        removed = deleted_record_counts(gone.cardinalities)
        histogram = tuple(h + a - r for h, a, r in zip(histogram, added, removed))
    return counts, histogram


def _merged_txns(
    base: VersionChecksum, change: _Change, metadata: Metadata
) -> tuple[Mapping[str, Any], ...] | None:
    if base.set_transactions is None:
        return None
    by_app = {str(t.get("appId")): t for t in base.set_transactions}
    by_app.update({app: _txn_data(t) for app, t in change.txns.items()})
    listed = tuple(by_app[app] for app in sorted(by_app))
    if len(listed) > SET_TRANSACTIONS_MAX:
        return None
    if SET_TRANSACTION_RETENTION_DURATION in metadata.configuration:
        return None
    return listed


def _merged_domains(base: VersionChecksum, change: _Change) -> tuple[Mapping[str, Any], ...] | None:
    if base.domain_metadata is None:
        return None
    by_domain = {str(d.get("domain")): d for d in base.domain_metadata if not d.get("removed")}
    for name, d in change.domains.items():
        by_domain[name] = {"domain": name, "configuration": d.configuration, "removed": False}
    for name in change.removed_domains:
        by_domain.pop(name, None)
    if len(by_domain) > DOMAIN_METADATA_MAX:
        return None
    return tuple(by_domain[name] for name in sorted(by_domain))


def _all_files_after(
    base: VersionChecksum,
    change: _Change,
    fresh: Snapshot | None,
    metadata: Metadata,
    num_files: int,
    size: int,
) -> tuple[Mapping[str, Any], ...] | None:
    """N's live `add` actions for a small table: N-1's (from its checksum, or the fresh
    snapshot) less the keys the commit touched, plus its adds. None where Delta Spark leaves
    them out, the schema changed (the stats may follow another schema), or the list does not
    add up to the counts."""
    if not _keeps_all_files(metadata, num_files):
        return None
    base_schema = base.metadata.get("schemaString") if base.metadata is not None else None
    if change.metadata is not None and change.metadata.get("schemaString") != base_schema:
        return None
    if base.all_files is not None:
        before = list(base.all_files)
    elif fresh is not None and fresh.num_files <= ALL_FILES_MAX_FILES:
        before = list(_all_files(fresh.files))
    else:
        return None
    touched = set(_keys(change.adds).to_pylist()) | set(_keys(change.removes).to_pylist())
    kept = [
        f for f, key in zip(before, _keys(_files_table(before)).to_pylist()) if key not in touched
    ]
    adds = restrict_partition_values(change.adds, partition_value_keys(metadata, _schema(metadata)))
    after = kept + list(_all_files(adds))
    if len(after) != num_files or sum(int(f.get("size") or 0) for f in after) != size:
        logger.warning("the listed files of the checksum do not add up; leaving them out")
        return None
    return tuple(after)


def _schema(metadata: Metadata) -> StructType | None:
    try:
        return parse_schema(metadata.schema_string) if metadata.schema_string else None
    except DeltaOpsError:
        return None


def write_checksum_after_commit(
    storage: Storage,
    version: int,
    read_snapshot: Snapshot | None,
    *,
    txn_id: str | None = None,
    commit_bytes: bytes | None = None,
    known_removes: KnownRemoves | None = None,
) -> VersionChecksum | None:
    """Compute and write the checksum of a commit just made (None when the table's features
    keep delta-ops from describing its state, as they keep it from checkpointing it).

    Raises:
        CorruptChecksum: version N-1's checksum does not parse or disagrees with the log;
            nothing is written.
    """
    checksum = checksum_after_commit(
        storage,
        version,
        read_snapshot,
        txn_id=txn_id,
        commit_bytes=commit_bytes,
        known_removes=known_removes,
    )
    if (
        checksum.protocol is None  # never: a computed checksum has the protocol
        or Protocol.from_action(checksum.protocol).refusal(Access.CHECKPOINT) is not None
    ):
        return None
    write_checksum(storage, checksum)
    return checksum


# ------------------------------------------------------------------------------ validation
class ChecksumStatus(StrEnum):
    """How a version's recorded checksum compares with the replayed state."""

    MISSING = "missing"
    AGREES = "agrees"
    DISAGREES = "disagrees"
    UNREADABLE = "unreadable"


@dataclass(frozen=True)
class ChecksumCheck:
    """A version's recorded checksum checked against the replay: what disagrees, field by field
    ("numFiles: the checksum says 10, the replay 0"), and the required fields it lacks, which
    were not checked (an older writer's checksum: `("metadata", "protocol")`)."""

    version: int
    status: ChecksumStatus
    mismatches: tuple[str, ...] = ()
    absent: tuple[str, ...] = ()

    @property
    def file_name(self) -> str:
        return checksum_file_name(self.version)

    @property
    def corrupt(self) -> bool:
        return self.status in (ChecksumStatus.DISAGREES, ChecksumStatus.UNREADABLE)

    @property
    def problem(self) -> str:
        """What is wrong with the checksum ("" when nothing is)."""
        if not self.corrupt:
            return ""
        unreadable = self.status is ChecksumStatus.UNREADABLE
        what = "does not parse" if unreadable else "disagrees with the log"
        return f"{what}: {'; '.join(self.mismatches)}"

    def alarm(self) -> CorruptChecksum:
        """The corruption alarm of a checksum that is `corrupt`, naming what is wrong."""
        return CorruptChecksum(
            self.file_name,
            f"this checksum {self.problem} (a corruption alarm: the log or the checksum changed"
            " after the commit; a checksum is never overwritten: once the cause is known, delete"
            " it and run checksum again to write one from the log)",
        )

    @property
    def absent_note(self) -> str:
        """What the checksum lacks, not checked ("" when it has every required field)."""
        return f"it lacks {' and '.join(self.absent)}" if self.absent else ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "file": self.file_name,
            "status": self.status.value,
            "mismatches": list(self.mismatches),
            "absent": list(self.absent),
        }


def check_checksum(snapshot: Snapshot) -> ChecksumCheck:
    """The snapshot's version's `.crc` against the snapshot's replayed state."""
    return _read_and_check(snapshot.storage, snapshot.version, snapshot)[0]


def _read_and_check(
    storage: Storage, version: int, snapshot: Snapshot | None
) -> tuple[ChecksumCheck, VersionChecksum | None]:
    """Version `version`'s checksum and how it compares with `snapshot` (that version's
    replay; without one only whether it parses is checked)."""
    try:
        recorded = read_checksum(storage, version)
    except CorruptLog as exc:
        return ChecksumCheck(version, ChecksumStatus.UNREADABLE, (exc.problem,)), None
    if recorded is None:
        return ChecksumCheck(version, ChecksumStatus.MISSING), None
    mismatches = checksum_mismatches(recorded, snapshot) if snapshot is not None else ()
    status = ChecksumStatus.DISAGREES if mismatches else ChecksumStatus.AGREES
    return ChecksumCheck(version, status, mismatches, recorded.absent), recorded


def checksum_mismatches(recorded: VersionChecksum, snapshot: Snapshot) -> tuple[str, ...]:
    """Each field `recorded` holds that the replayed `snapshot` contradicts (protocol: "State
    Validation"; Delta Spark's `ValidateChecksum.checkMismatch`, which also skips fields a
    checksum leaves out, the metadata and protocol of an older writer's included). The counts
    of deletion vectors are compared whenever recorded."""
    bins = (
        recorded.file_size_histogram.boundaries
        if recorded.file_size_histogram is not None
        else DEFAULT_FILE_SIZE_BINS
    )
    facts = _FileFacts.of(snapshot.file_index)
    out: list[str] = []

    def differ(name: str, says: Any, replay: Any) -> None:
        if says != replay:
            out.append(f"{name}: the checksum says {says}, the replay {replay}")

    differ("tableSizeBytes", recorded.table_size_bytes, facts.bytes)
    differ("numFiles", recorded.num_files, facts.count)
    differ("numMetadata", recorded.num_metadata, 1)
    differ("numProtocol", recorded.num_protocol, 1)
    if (
        recorded.metadata is not None
        and Metadata.from_action(recorded.metadata) != snapshot.metadata
    ):
        out.append(
            f"metadata: the checksum's {_short(recorded.metadata)} is not the log's"
            f" {_short(snapshot.metadata.to_action())}"
        )
    if recorded.protocol is not None and _protocol_or_none(recorded.protocol) != snapshot.protocol:
        out.append(
            f"protocol: the checksum says {_short(recorded.protocol)},"
            f" the replay {_short(snapshot.protocol.to_action())}"
        )
    if recorded.in_commit_timestamp is not None:
        ict = _in_commit_timestamp(snapshot)
        if ict is not None:
            differ("inCommitTimestampOpt", recorded.in_commit_timestamp, ict)
    if recorded.set_transactions is not None:
        differ(
            "setTransactions",
            _listed(f"{t.get('appId')}@{t.get('version')}" for t in recorded.set_transactions),
            _listed(f"{t.app_id}@{t.version}" for t in snapshot.txns.values()),
        )
        if not out or not out[-1].startswith("setTransactions"):
            recorded_times = sorted(_txn_identity(t) for t in recorded.set_transactions)
            replayed_times = sorted(_txn_identity(_txn_data(t)) for t in snapshot.txns.values())
            if recorded_times != replayed_times:
                out.append("setTransactions: the lastUpdated times differ from the replay's")
    if recorded.domain_metadata is not None:
        says = {
            str(d.get("domain")): str(d.get("configuration"))
            for d in recorded.domain_metadata
            if not d.get("removed")
        }
        replay = {d.domain: d.configuration for d in snapshot.domains.values()}
        differing = sorted(k for k in says.keys() | replay.keys() if says.get(k) != replay.get(k))
        if differing:
            out.append(
                f"domainMetadata: {_listed(differing)} differ (the checksum lists"
                f" {_listed(says)}, the replay {_listed(replay)})"
            )
    if recorded.file_size_histogram is not None:
        replayed = FileSizeHistogram.of(facts.sizes, bins)
        labels = [_size_label(b) for b in bins]
        out.extend(
            _bins_differ(
                "fileSizeHistogram.fileCounts",
                labels,
                recorded.file_size_histogram.file_counts,
                replayed.file_counts,
            )
        )
        out.extend(
            _bins_differ(
                "fileSizeHistogram.totalBytes",
                labels,
                recorded.file_size_histogram.total_bytes,
                replayed.total_bytes,
            )
        )
    if recorded.num_deleted_records is not None:
        differ("numDeletedRecordsOpt", recorded.num_deleted_records, facts.num_deleted_records)
    if recorded.num_deletion_vectors is not None:
        differ("numDeletionVectorsOpt", recorded.num_deletion_vectors, facts.num_deletion_vectors)
    if recorded.deleted_record_counts is not None:
        out.extend(
            _bins_differ(
                "deletedRecordCountsHistogramOpt",
                [f"{b:,} deleted" for b in DELETED_RECORD_COUNT_BINS],
                recorded.deleted_record_counts,
                deleted_record_counts(facts.cardinalities),
            )
        )
    if recorded.all_files is not None:
        out.extend(_all_files_mismatches(recorded.all_files, snapshot))
    return tuple(out)


def _listed(names: Iterable[str], limit: int = 5) -> str:
    ordered = sorted(names)
    shown = ", ".join(ordered[:limit]) + (
        f" and {len(ordered) - limit} more" if len(ordered) > limit else ""
    )
    return f"[{shown}]"


def _size_label(start: int) -> str:
    for unit, size in (("GB", _GB), ("MB", _MB), ("KB", _KB)):
        if start >= size and start % size == 0:
            return f"{start // size} {unit}"
    return f"{start} B"


def _bins_differ(
    name: str, labels: Sequence[str], says: Sequence[int], replay: Sequence[int], limit: int = 3
) -> list[str]:
    """One line naming the bins of a histogram where the checksum and the replay differ."""
    if len(says) != len(replay):
        return [f"{name}: the checksum has {len(says)} bins, the replay {len(replay)}"]
    differing = [i for i, (a, b) in enumerate(zip(says, replay)) if a != b]
    if not differing:
        return []
    shown = "; ".join(
        f"from {labels[i]}: the checksum says {says[i]:,}, the replay {replay[i]:,}"
        for i in differing[:limit]
    )
    more = f"; and {len(differing) - limit} more bins" if len(differing) > limit else ""
    return [f"{name}: {shown}{more}"]


def _protocol_or_none(action: Mapping[str, Any]) -> Protocol | None:
    try:
        return Protocol.from_action(action)
    except DeltaOpsError:
        return None


def _in_commit_timestamp(snapshot: Snapshot) -> int | None:
    """The in-commit timestamp of the snapshot's version (its commit's, also when the segment
    starts with that version's checkpoint and so holds no commit of it)."""
    times = snapshot.commit_times
    hits = np.flatnonzero(times.column("version").to_numpy() == snapshot.version)
    if len(hits):
        value: int | None = times.column("in_commit_timestamp")[int(hits[0])].as_py()
        return value
    ict = commit_info(snapshot.storage, snapshot.version).get("inCommitTimestamp")
    return ict if _is_int(ict) else None


def _txn_identity(txn: Mapping[str, Any]) -> tuple[str, int, int | None]:
    return (str(txn.get("appId")), int(txn.get("version") or 0), txn.get("lastUpdated"))


def _short(action: Mapping[str, Any], limit: int = 160) -> str:
    text = json.dumps(action, separators=(",", ":"), sort_keys=True)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _file_identity(add: Mapping[str, Any]) -> tuple[Any, ...]:
    """What must match between a listed file and the replay's: every field but `dataChange`
    (stats compared as JSON values, not text)."""
    dv = add.get("deletionVector")
    stats = add.get("stats")
    try:
        parsed_stats = json.dumps(json.loads(stats), sort_keys=True) if stats else None
    except ValueError:
        parsed_stats = stats
    return (
        add.get("path"),
        tuple(sorted((add.get("partitionValues") or {}).items())),
        add.get("size"),
        add.get("modificationTime"),
        tuple(sorted(deletion_vector_in_log(dv).items())) if dv else None,
        add.get("baseRowId"),
        add.get("defaultRowCommitVersion"),
        tuple(sorted((add.get("tags") or {}).items())),
        add.get("clusteringProvider"),
        parsed_stats,
    )


def _all_files_mismatches(listed: Sequence[Mapping[str, Any]], snapshot: Snapshot) -> list[str]:
    recorded = {_file_identity(f) for f in listed}
    replayed = {_file_identity(f) for f in _all_files(snapshot.files)}
    if recorded == replayed:
        return []
    only_listed = sorted(str(f[0]) for f in recorded - replayed)
    only_replayed = sorted(str(f[0]) for f in replayed - recorded)
    return [
        (
            f"allFiles: {len(only_listed)} listed files differ from the replay's"
            f" ({', '.join(only_listed[:3])}); the replay has {len(only_replayed)} not listed"
            f" ({', '.join(only_replayed[:3])})"
        )
    ]


__all__ = [
    "ALL_FILES_MAX_FILES",
    "DEFAULT_FILE_SIZE_BINS",
    "DELETED_RECORD_COUNT_BINS",
    "ChecksumCheck",
    "ChecksumStatus",
    "FileSizeHistogram",
    "KnownRemoves",
    "VersionChecksum",
    "check_checksum",
    "checksum_after_commit",
    "checksum_mismatches",
    "checksum_of_snapshot",
    "commit_info",
    "deleted_record_counts",
    "read_checksum",
    "tracks_deletion_vectors",
    "write_checksum",
    "write_checksum_after_commit",
]
