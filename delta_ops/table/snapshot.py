"""A table's state at one version: the object every maintenance operation starts from.

Loading a snapshot lists `_delta_log` once, picks the log segment (checkpoint + commits), reads
it columnar and reconciles it. A checkpoint that cannot be read is reported with a warning and
the next older one (or plain JSON replay) is used instead, so one damaged file does not make a
table unreadable when its history can still rebuild the state. A checkpoint's `add.stats` (most
of its bytes) are read only when `Snapshot.files` is first used; `load_head` reads
a version's protocol and metadata without any file state.

For example:

    snap = load_snapshot("/data/events")
    snap.version, snap.num_files, snap.protocol.min_writer_version
    snap.files.column("path")          # live files, a pyarrow Table
    load_snapshot("/data/events", version=3).tombstones
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from delta_ops.errors import CorruptLog, DeltaOpsError, InvalidSchema
from delta_ops.log.actions import (
    ActionSource,
    concat_batches,
    file_action_keys,
    from_numpy,
    release_scratch_memory,
    restrict_partition_values,
    with_shared_null_columns,
)
from delta_ops.log.reader import (
    checkpoint_file_batches,
    checkpoint_file_names,
    read_checkpoint,
    read_checkpoint_head,
    read_commits,
)
from delta_ops.log.replay import DomainMetadata, ReconciledState, Txn, reconcile
from delta_ops.log.segment import CheckpointRef, LogSegment, build_log_segment, list_log_files
from delta_ops.log.state_stream import file_keys
from delta_ops.protocol.deletion_vectors import dv_unique_ids
from delta_ops.protocol.features import Protocol
from delta_ops.protocol.properties import TableProperties
from delta_ops.protocol.schema import StructType, parse_schema, physical_name, to_arrow_schema
from delta_ops.storage import Location, Storage

logger = logging.getLogger(__name__)
#: leave a checkpoint's `add.stats` on storage until `Snapshot.files` is first used
DEFER_CHECKPOINT_STATS = True
_Loaded = TypeVar("_Loaded", "Snapshot", "TableHead")


@dataclass(frozen=True)
class Metadata:
    """The table's metaData action."""

    id: str
    name: str | None
    description: str | None
    format_provider: str
    format_options: Mapping[str, str]
    schema_string: str | None
    partition_columns: tuple[str, ...]
    configuration: Mapping[str, str]
    created_time: int | None

    @classmethod
    def from_action(cls, d: Mapping[str, Any]) -> Metadata:
        fmt = d.get("format") or {}
        return cls(
            id=d.get("id") or "",
            name=d.get("name"),
            description=d.get("description"),
            format_provider=fmt.get("provider") or "parquet",
            format_options=dict(fmt.get("options") or {}),
            schema_string=d.get("schemaString"),
            partition_columns=tuple(d.get("partitionColumns") or ()),
            configuration=dict(d.get("configuration") or {}),
            created_time=d.get("createdTime"),
        )

    def to_action(self) -> dict[str, Any]:
        """The camelCase `metaData` action as written to the log."""
        out: dict[str, Any] = {"id": self.id}
        if self.name is not None:
            out["name"] = self.name
        if self.description is not None:
            out["description"] = self.description
        out["format"] = {"provider": self.format_provider, "options": dict(self.format_options)}
        out["schemaString"] = self.schema_string
        out["partitionColumns"] = list(self.partition_columns)
        out["configuration"] = dict(self.configuration)
        if self.created_time is not None:
            out["createdTime"] = self.created_time
        return out


class Snapshot:
    """The reconciled state of a table at `version`.

    Attributes:
        storage: where the table lives.
        version: the snapshot's version.
        segment: the checkpoint and commits it was built from.
        protocol: the effective Protocol.
        metadata: the effective Metadata.
        files: live `add` actions (pyarrow Table; `stats` kept as JSON text).
        tombstones: every `remove` still in the state, unexpired or not.
        txns: latest set-transaction per appId.
        domains: live domain metadata; `removed_domains` the tombstoned ones.
        row_id_high_water_mark: the highest assigned row id, or None.
    """

    def __init__(
        self,
        storage: Storage,
        segment: LogSegment,
        state: ReconciledState,
        commit_times: pa.Table,
        *,
        checkpoint_stats_deferred: bool = False,
        checkpoint_files_read: Sequence[str] = (),
    ):
        if state.protocol is None:
            raise CorruptLog(_first_file(segment), "no protocol action in the log segment")
        if state.metadata is None:
            raise CorruptLog(_first_file(segment), "no metaData action in the log segment")
        self.storage = storage
        self.segment = segment
        self.version = segment.version
        self.protocol = Protocol.from_action(state.protocol)
        self.metadata = Metadata.from_action(state.metadata)
        keys = partition_value_keys(self.metadata, self.schema_or_none())
        self._files_read = with_shared_null_columns(restrict_partition_values(state.files, keys))
        # the checkpoint's `add.stats` were not read: `files` reads them on first use
        self._stats_deferred = checkpoint_stats_deferred and segment.checkpoint is not None
        # the checkpoint's parts and sidecars, as the load found them (`_delta_log`-relative)
        self._checkpoint_files_read = tuple(checkpoint_files_read)
        self.tombstones: pa.Table = with_shared_null_columns(
            restrict_partition_values(state.tombstones, keys)
        )
        self.txns: dict[str, Txn] = state.txns
        self.domains: dict[str, DomainMetadata] = state.domains
        self.removed_domains: dict[str, DomainMetadata] = state.removed_domains
        self.row_id_high_water_mark: int | None = state.row_id_high_water_mark
        self.commit_times = commit_times

    # ----------------------------------------------------------------------- file state
    @cached_property
    def file_index(self) -> pa.Table:
        """The live files without their stats: path, partition values, size, times, deletion
        vector, row ids, ... Loading never reads a checkpoint's stats (most of its bytes), so
        this costs nothing more; use it wherever stats are not needed."""
        return self._files_read.drop_columns(["stats"])

    @cached_property
    def files(self) -> pa.Table:
        """The live `add` actions with every field, `stats` as JSON text. The stats of the
        files a checkpoint holds are read from it on first use."""
        if not self._stats_deferred:
            return self._files_read
        assert self.segment.checkpoint is not None
        try:
            return with_checkpoint_stats(
                self.storage, self.segment.checkpoint, self._files_read, self._checkpoint_files_read
            )
        except CorruptLog as exc:  # e.g. log cleanup removed that checkpoint since the load
            logger.warning(
                "%s: %s; reading the stats of version %d anew", self.storage.url, exc, self.version
            )
            try:
                fresh = _load_with_fallback(self.storage, self.version, _load_segment_eagerly)
            except DeltaOpsError:
                raise exc from None
            return _stats_from(fresh.files, self._files_read)

    # ----------------------------------------------------------------------- derived facts
    @cached_property
    def properties(self) -> TableProperties:
        """Typed table properties; raises InvalidTableProperty naming a bad value."""
        return TableProperties.from_configuration(self.metadata.configuration)

    @cached_property
    def schema(self) -> StructType:
        """The Delta schema; a missing schemaString reads as an empty schema, as in Spark."""
        return table_schema(self.metadata, self.segment)

    def schema_or_none(self) -> StructType | None:
        """The schema, or None when the schemaString does not parse."""
        try:
            return self.schema
        except DeltaOpsError:
            return None

    @cached_property
    def arrow_schema(self) -> pa.Schema:
        return to_arrow_schema(self.schema)

    @property
    def partition_columns(self) -> tuple[str, ...]:
        return self.metadata.partition_columns

    @property
    def num_files(self) -> int:
        return int(self.file_index.num_rows)

    @property
    def size_bytes(self) -> int:
        return int(pc.sum(self.file_index.column("size")).as_py() or 0)

    @property
    def table_root(self) -> str:
        return self.storage.root

    @cached_property
    def num_records(self) -> int | None:
        """Physical rows over all live files, or None when any file lacks `numRecords`."""
        counts = self.record_counts
        if counts.null_count:
            return None
        return int(pc.sum(counts).as_py() or 0)

    @cached_property
    def record_counts(self) -> pa.Array | pa.ChunkedArray:
        """`numRecords` of each live file, in `file_index` order (null where its stats lack
        it). A checkpoint's stats still on storage are read a row group at a time keeping only
        the counts: a row count of a million-file table does not hold its stats text."""
        if not self._stats_deferred or "files" in self.__dict__:
            return file_num_records(self.files)
        assert self.segment.checkpoint is not None
        try:
            return checkpoint_file_values(
                self.storage,
                self.segment.checkpoint,
                self._checkpoint_files_read,
                self._files_read,
                _num_records_of,
                _num_records_of(self._files_read.column("stats")),
            )
        except CorruptLog:  # Snapshot.files knows how to recover (and warns)
            return file_num_records(self.files)

    @property
    def num_deleted_records(self) -> int:
        """Rows hidden by deletion vectors (sum of DV cardinalities)."""
        card = pc.struct_field(self.file_index.column("deletionVector"), "cardinality")
        return int(pc.sum(card).as_py() or 0)

    def commit_timestamp(self, version: int) -> int:
        """Timestamp of a commit in ms: in-commit timestamp when present, else the file mtime."""
        versions = self.commit_times.column("version").to_numpy()
        hits = np.flatnonzero(versions == version)
        if not len(hits):
            raise KeyError(version)
        row = int(hits[0])
        ict = self.commit_times.column("in_commit_timestamp")[row].as_py()
        if ict is not None:
            return int(ict)
        return int(self.commit_times.column("modification_time")[row].as_py())

    def __repr__(self) -> str:
        return f"Snapshot({self.storage.url!r}, version={self.version}, files={self.num_files})"


def table_schema(metadata: Metadata, segment: LogSegment) -> StructType:
    """The Delta schema of `metadata`; a missing schemaString reads as an empty schema, as in
    Spark; one that does not parse is an InvalidSchema naming the segment's first file."""
    if not metadata.schema_string:
        return StructType(())
    try:
        return parse_schema(metadata.schema_string)
    except DeltaOpsError as exc:
        problem = exc.problem if isinstance(exc, InvalidSchema) else str(exc)
        raise InvalidSchema(_first_file(segment), f"invalid schemaString: {problem}") from exc


def partition_value_keys(metadata: Metadata, schema: StructType | None) -> set[str]:
    """Partition columns as `partitionValues` keys may name them: the logical names and, under
    column mapping, the physical ones."""
    columns = set(metadata.partition_columns)
    if not columns or schema is None:
        return columns
    by_name = {f.name: f for f in schema.fields}
    return {physical_name(by_name[c]) if c in by_name else c for c in columns} | columns


def with_checkpoint_stats(
    storage: Storage,
    checkpoint: CheckpointRef,
    files: pa.Table,
    checkpoint_files_read: Sequence[str] = (),
) -> pa.Table:
    """`files` with the stats of the rows that came from `checkpoint` (their `version` is its
    version; later commits' rows carry their own) read from its `add.stats` (or from
    `stats_parsed` where it wrote no JSON), matched by file key (path, deletion vector).
    `checkpoint_files_read`: its parts and sidecars as a load found them (else listed anew)."""
    own = files.column("stats")
    merged = checkpoint_file_values(
        storage, checkpoint, checkpoint_files_read, files, lambda stats: stats, own
    )
    if merged is own:
        return files
    return files.set_column(files.schema.get_field_index("stats"), "stats", merged)


def checkpoint_file_values(
    storage: Storage,
    checkpoint: CheckpointRef,
    checkpoint_files_read: Sequence[str],
    files: pa.Table,
    pick: Callable[[pa.Array | pa.ChunkedArray], pa.Array | pa.ChunkedArray],
    own: pa.Array | pa.ChunkedArray,
) -> pa.Array | pa.ChunkedArray:
    """A value per row of `files`: for the rows that came from `checkpoint`, `pick` of the
    stats it holds for that file (matched by path and deletion vector; read a row group at a
    time, so only what `pick` returns is kept); for the other rows, `own`. `own` itself when
    no row came from the checkpoint. `checkpoint_files_read`: the checkpoint's parts and
    sidecars (`_delta_log`-relative), or empty to find them (reading its parts' sidecar
    column)."""
    from_checkpoint = pc.equal(files.column("version"), checkpoint.version)
    if not files.num_rows or not pc.any(from_checkpoint).as_py():
        return own
    wanted = {"add": ("path", "deletionVector", "stats")}
    keys, values = [], []
    names = checkpoint_files_read or checkpoint_file_names(storage, checkpoint.files)
    for name in names:
        for table in checkpoint_file_batches(storage, name, wanted, 1 << 20):
            if "add" not in table.column_names:
                continue
            source = ActionSource(table, np.zeros(table.num_rows, dtype=np.int64))
            path, dv_id, is_add = file_action_keys(source)
            keys.append(file_keys(path, dv_id).filter(is_add))
            values.append(pick(pc.struct_field(table.column("add"), "stats").filter(is_add)))
    if not keys:
        return own
    checkpoint_keys = pa.concat_arrays([_array(k) for k in keys])
    checkpoint_values = pa.concat_arrays([_array(v) for v in values])
    found = checkpoint_values.take(pc.index_in(_row_keys(files), value_set=checkpoint_keys))
    merged: pa.Array | pa.ChunkedArray = pc.if_else(from_checkpoint, found, own)
    return merged


def _row_keys(files: pa.Table) -> pa.Array:
    dv = files.column("deletionVector").combine_chunks()
    return file_keys(
        files.column("path").combine_chunks(),
        dv_unique_ids(dv) if dv.null_count < len(dv) else pa.nulls(len(dv), pa.string()),
    )


def _stats_from(source: pa.Table, files: pa.Table) -> pa.Table:
    """`files` with the stats `source` (the same version's files, loaded again) has for them."""
    found = (
        source.column("stats")
        .combine_chunks()
        .take(pc.index_in(_row_keys(files), value_set=_row_keys(source)))
    )
    return files.set_column(files.schema.get_field_index("stats"), "stats", found)


def _array(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    return values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values


def file_num_records(files: pa.Table) -> pa.Array:
    """`numRecords` from each file's stats JSON (null where stats or the field is missing)."""
    counts: pa.Array = _num_records_of(files.column("stats"))
    return counts


def _num_records_of(stats: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """`numRecords` of each stats JSON text (null where absent)."""
    if len(stats) == 0:
        return pa.array([], pa.int64())
    extracted = pc.extract_regex(stats, r'"numRecords"\s*:\s*(?P<n>-?\d+)')
    return pc.cast(pc.struct_field(extracted, "n"), pa.int64())


def _first_file(segment: LogSegment) -> str:
    if segment.checkpoint is not None:
        return segment.checkpoint.name
    return segment.commits[0].name if segment.commits else "_delta_log"


def load_snapshot(
    table: Location | Storage,
    version: int | None = None,
    *,
    storage_options: Mapping[str, Any] | None = None,
    segment: LogSegment | None = None,
) -> Snapshot:
    """Load the snapshot of a table at `version` (the latest when None).

    Args:
        table: a URL or path, or an open Storage.
        version: the version to load; None for the latest.
        storage_options: fsspec options (credentials, endpoints) when `table` is a URL.
        segment: a segment of `version` the caller has just built from a fresh listing: its
            listing and `_last_checkpoint` are used instead of reading them again.

    Raises:
        DeltaOpsError: NotADeltaTable, VersionNotFound, VersionGap, CorruptLog or
            UnsupportedFeature.
    """
    storage = table if isinstance(table, Storage) else Storage.open(table, storage_options)
    snapshot = _load_with_fallback(storage, version, _load_segment, segment)
    snapshot.protocol.check_readable()
    return snapshot


@dataclass(frozen=True)
class TableHead:
    """A table at a version without its file state: what ops that touch no data files need
    (log cleanup, probes, commit sensors). Loading one reads the checkpoint's `protocol` and
    `metaData` columns and the commits after it, never the file actions of a checkpoint.
    `load_snapshot(head.storage, head.version)` gives the full state when it is needed."""

    storage: Storage
    segment: LogSegment
    protocol: Protocol
    metadata: Metadata

    @property
    def version(self) -> int:
        return self.segment.version

    @cached_property
    def properties(self) -> TableProperties:
        return TableProperties.from_configuration(self.metadata.configuration)

    @property
    def partition_columns(self) -> tuple[str, ...]:
        return self.metadata.partition_columns

    @cached_property
    def schema(self) -> StructType:
        return table_schema(self.metadata, self.segment)


def load_head(
    table: Location | Storage,
    version: int | None = None,
    *,
    storage_options: Mapping[str, Any] | None = None,
    segment: LogSegment | None = None,
) -> TableHead:
    """Load a table's version, protocol and metadata (the latest version when None), reading
    no file state; `segment` as for `load_snapshot`. Raises what `load_snapshot`
    raises."""
    storage = table if isinstance(table, Storage) else Storage.open(table, storage_options)
    head = _load_with_fallback(storage, version, _load_head, segment)
    head.protocol.check_readable()
    return head


def _load_with_fallback(
    storage: Storage,
    version: int | None,
    load: Callable[[Storage, LogSegment], _Loaded],
    built: LogSegment | None = None,
) -> _Loaded:
    """Load a segment (`built`, or one built from a new listing); a checkpoint that cannot be
    read is skipped with a warning in favour of the next older one (or plain JSON replay) while
    the history can still rebuild the state."""
    if built is not None and version is not None and built.version != version:
        raise ValueError(f"segment of version {built.version} given to load version {version}")
    listing = list(built.listing) if built is not None else list_log_files(storage)
    excluded: list[str] = []
    segment = built if built is not None else build_log_segment(storage, version, listing=listing)
    while True:
        try:
            return load(storage, segment)
        except CorruptLog as exc:
            if segment.checkpoint is None or not _is_checkpoint_failure(exc, segment):
                raise
            logger.warning(
                "%s: %s; reading version %s without this checkpoint",
                storage.url,
                exc,
                segment.version,
            )
            excluded.append(segment.checkpoint.name)
            try:
                segment = build_log_segment(
                    storage,
                    segment.version,
                    listing=listing,
                    exclude_checkpoints=excluded,
                    last_checkpoint=segment.last_checkpoint,
                )
            except DeltaOpsError as fallback_exc:
                raise exc from fallback_exc


def _load_head(storage: Storage, segment: LogSegment) -> TableHead:
    protocol: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    if segment.checkpoint is not None:
        protocol, metadata = read_checkpoint_head(
            storage, segment.checkpoint.files, segment.checkpoint.version
        )
    batch = read_commits(storage, segment.commits, seq_start=0).batch
    if batch.protocols:
        protocol = max(batch.protocols, key=lambda p: p[0])[1]
    if batch.metadatas:
        metadata = max(batch.metadatas, key=lambda m: m[0])[1]
    if protocol is None:
        raise CorruptLog(_first_file(segment), "no protocol action in the log segment")
    if metadata is None:
        raise CorruptLog(_first_file(segment), "no metaData action in the log segment")
    return TableHead(
        storage, segment, Protocol.from_action(protocol), Metadata.from_action(metadata)
    )


def _checkpoint_file_names(segment: LogSegment) -> set[str]:
    """Names a CorruptLog raised while reading the segment's checkpoint may carry."""
    return {f.name for f in segment.checkpoint.files} if segment.checkpoint else set()


def _is_checkpoint_failure(exc: CorruptLog, segment: LogSegment) -> bool:
    return exc.file in _checkpoint_file_names(segment) or exc.file.startswith("_sidecars/")


def _load_segment_eagerly(storage: Storage, segment: LogSegment) -> Snapshot:
    return _load_segment(storage, segment, defer_stats=False)


def _load_segment(
    storage: Storage, segment: LogSegment, *, defer_stats: bool | None = None
) -> Snapshot:
    defer = DEFER_CHECKPOINT_STATS if defer_stats is None else defer_stats
    batches = []
    seq = 0
    checkpoint_read: list[str] = []
    if segment.checkpoint is not None:
        cp = read_checkpoint(
            storage,
            segment.checkpoint.files,
            segment.checkpoint.version,
            seq_start=0,
            with_stats=not defer,
        )
        batches.append(cp.batch)
        checkpoint_read = cp.files_read
        seq = cp.batch.num_rows
        del cp  # its batch lives on in `batches` until reconciled (released below)
        release_scratch_memory()
    commits = read_commits(storage, segment.commits, seq_start=seq)
    batches.append(commits.batch)
    release_scratch_memory()
    batch = concat_batches(batches)
    # a checkpoint is reconciled already: only keys the commits after it touch need replaying
    batch.reconciled_rows = batches[0].num_rows if segment.checkpoint is not None else 0
    state = reconcile(batch)
    commit_times = pa.table(
        {
            "version": from_numpy(commits.versions, pa.int64()),
            "modification_time": pa.array(
                [c.modification_time for c in segment.commits], pa.int64()
            ),
            "in_commit_timestamp": pa.array(commits.in_commit_timestamps, pa.int64()),
        }
    )
    snapshot = Snapshot(
        storage,
        segment,
        state,
        commit_times,
        checkpoint_stats_deferred=defer,
        checkpoint_files_read=checkpoint_read,
    )
    # the parsed actions and the reconciled state's columns the snapshot rebuilt are garbage
    # now: hand their memory back, or the process keeps the load's peak for its life and
    # whatever follows the load (inspect's advice, a plan) stacks on it (resident after the
    # load: 300k files in JSON commits 196 -> 131 MB, 1M files in a checkpoint 295 -> 236 MB)
    del batch, batches, commits, state
    release_scratch_memory()
    return snapshot
