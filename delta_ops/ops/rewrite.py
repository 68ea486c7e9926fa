"""Rewriting live data files without changing the table's rows: what purge and compaction share.

    rewriter = Rewriter(snapshot, rows)            # rows: the live files' add bodies to rewrite
    data = rewriter.read(row)                      # as stored, deletion vector applied
    add = rewriter.write([data], rewriter.output_schema(), directory, partition_values)
    removes = rewriter.removes(paths)              # while the new files are written
    version = rewriter.commit("OPTIMIZE", {...}, removes, [add], metrics)

Files are read as stored (physical column names, field ids), so column mapping carries over
untouched. On a table with row tracking, every row keeps its row id and row commit version:
they are written into the materialized columns the table properties name (named in the same
commit where the table has no names yet), taking a value already materialized in the file over
`baseRowId + row index` / `defaultRowCommitVersion`. New files get fresh statistics and no
deletion vector; adds and removes carry ``dataChange=false``. The commit checks that no
concurrent commit removed or changed a rewritten file; if the commit fails, every file written
is deleted again.

Locally, small files are read whole and decoded in memory; a rewrite of many files
(`PROCESS_MIN_FILES`) on local storage asks the engine to spread its units over forked worker
processes, one per core, and the parent commits what they wrote. The Spark engine writes units
in Spark tasks;
every new file's name starts with the rewrite's own prefix, so when a task fails the files the
finished tasks wrote are found in the units' directories and deleted too.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any, BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from delta_ops import clock
from delta_ops.errors import (
    ConcurrentModification,
    DataFileError,
    InvalidDeletionVector,
    UnsafePath,
    note_reading,
    reading,
)
from delta_ops.log.actions import file_rows_as_actions
from delta_ops.ops import progress
from delta_ops.ops.engines import Engine, Spread
from delta_ops.protocol.deletion_vectors import DeletionVectorDescriptor, load_deletion_vector
from delta_ops.protocol.features import Access, Protocol
from delta_ops.protocol.properties import (
    MATERIALIZED_ROW_COMMIT_VERSION_COLUMN_NAME,
    MATERIALIZED_ROW_ID_COLUMN_NAME,
    TableProperties,
)
from delta_ops.protocol.row_tracking import materialized_column_names
from delta_ops.protocol.schema import StructType
from delta_ops.protocol.stats import stats_json_from_parquet_file
from delta_ops.storage import Storage
from delta_ops.table.parquet_bytes import decode_parquet_bytes
from delta_ops.table.parquet_format import DEFAULT_FORMAT, ParquetFormat
from delta_ops.table.remove_lines import EncodedRemoves, encode_removes
from delta_ops.table.snapshot import Snapshot
from delta_ops.table.transaction import Transaction
from delta_ops.table.write_target import conform, data_file_schema
from delta_ops.table.writer import discard_uncommitted, log_path

READ_THREADS = 4  # files read at once (parquet decoding releases the GIL)
READ_AHEAD = 2048  # files read ahead of the writer, at most ...
READ_AHEAD_BYTES = 64 * 1024 * 1024  # ... and this much of them: memory besides a row group
WHOLE_READ_BYTES = 8 * 1024 * 1024  # files up to this size are read whole, then decoded
THREADED_READ_BYTES = 1024 * 1024  # chunks of files all below this are read by one thread
DECODE_BATCH = 256  # small files decoded together, then made one table ...
COMBINE_BYTES = 8 * 1024 * 1024  # ... when their rows take at most this much memory

logger = logging.getLogger(__name__)

#: what a rewrite needs of each file it rewrites (not its stats: the new files get fresh
#: ones, and the removes are encoded from the snapshot's files table)
FILE_FIELDS = (
    "path",
    "partitionValues",
    "size",
    "tags",
    "deletionVector",
    "baseRowId",
    "defaultRowCommitVersion",
    "clusteringProvider",
)


def _past_the_end(path: str, row: int, count: int) -> InvalidDeletionVector:
    """The refusal to rewrite a file whose deletion vector names a row it does not have: a
    reader skips such a row, but a rewrite would drop the deletion vector and make the rows
    its writer meant to delete live for good (the corruption alarm of
    `delta_ops.table.deletion_vector_check`)."""
    return InvalidDeletionVector(
        f"{path}: its deletion vector names row {row:,}, but the file has {count:,} rows:"
        " a corrupt or misread deletion vector (`delta-ops inspect` reports it); the file is"
        " not rewritten, which would keep for good the rows its writer deleted"
    )


def _unreadable_data_file(path: str, exc: BaseException) -> DataFileError:
    """The error for a live data file that cannot be read, naming it; a file missing from
    storage (the log still lists it) also says what to do, as delta-ops cannot repair that."""
    if isinstance(exc, FileNotFoundError):
        return DataFileError(
            f"{path}: data file missing from storage, though the table's log still lists it:"
            " restore it from a backup, or remove it from the table with `delta-ops repair`"
        )
    return DataFileError(f"{path}: unreadable data file: {exc}")


def live_file_rows(snapshot: Snapshot, paths: set[str]) -> list[dict[str, Any]]:
    """The add fields (FILE_FIELDS) of the live files named by `paths`, in path order (only
    those rows become dicts: a rewrite of one partition of a big table converts that one).
    Read from the file index: a checkpoint's stats are not needed for this."""
    files = _selected(snapshot.file_index, paths)
    rows = file_rows_as_actions(files, columns=FILE_FIELDS)
    return sorted(rows, key=lambda r: r["path"])


#: what reading a file for a rewrite needs of it (`Rewriter.read_all`, and the
#: row-tracking check of `Rewriter`): not its partition values, tags or clustering provider,
#: which a caller that carries them over takes from FILE_FIELDS
READ_FIELDS = ("path", "size", "deletionVector", "baseRowId", "defaultRowCommitVersion")


def file_rows_in_order(
    snapshot: Snapshot, paths: Sequence[str], columns: tuple[str, ...] = READ_FIELDS
) -> list[dict[str, Any]]:
    """The `columns` fields (as `live_file_rows` gives them) of the live files named by
    `paths`, in that order, one row per path: a compaction's bins in bin order, without the
    lookup by path of every file. Looked up columnar and converted for those rows and fields
    only (10,000 files: ~9 ms, where live_file_rows' every field and a lookup dict took ~30 ms,
    all before the workers start). Raises KeyError naming a path that is not live."""
    files = snapshot.file_index
    wanted = pa.array(paths, pa.string())
    at = pc.index_in(wanted, value_set=files.column("path"))
    if at.null_count:
        missing = wanted.filter(pc.is_null(at))[0].as_py()
        raise KeyError(f"{missing}: not a live file of version {snapshot.version}")
    picked = files.select([c for c in columns if c in files.column_names]).take(at)
    return file_rows_as_actions(picked, columns=columns)


def _selected(files: pa.Table, paths: Iterable[str]) -> pa.Table:
    """The rows of a files table whose path is in `paths`."""
    wanted = pa.array(list(set(paths)), pa.string())
    return files.filter(pc.is_in(files.column("path"), value_set=wanted))


def _plain_type(typ: pa.DataType) -> pa.DataType:
    """`typ` with string and binary views as plain strings and binaries, at any depth: files
    written by Arrow-based writers (delta-rs) record view types in their Arrow schema, which
    Arrow then reads back as views, and Arrow's `take` (a deletion vector's filter) and
    concatenation with plain columns do not take them."""
    if pa.types.is_string_view(typ):
        return pa.string()
    if pa.types.is_binary_view(typ):
        return pa.binary()
    if pa.types.is_struct(typ):
        return pa.struct([f.with_type(_plain_type(f.type)) for f in typ])
    if pa.types.is_large_list(typ):
        return pa.large_list(typ.value_field.with_type(_plain_type(typ.value_type)))
    if pa.types.is_list(typ):
        return pa.list_(typ.value_field.with_type(_plain_type(typ.value_type)))
    if pa.types.is_map(typ):
        return pa.map_(
            typ.key_field.with_type(_plain_type(typ.key_type)),
            typ.item_field.with_type(_plain_type(typ.item_type)),
            keys_sorted=typ.keys_sorted,
        )
    return typ


#: the schema `_holds_views` was last asked about, and its answer
_LAST_VIEWS_ANSWER: tuple[pa.Schema, bool] | None = None


def _holds_views(schema: pa.Schema) -> bool:
    """Whether a column of `schema` holds a view type at any depth. The answer for the schema
    asked about last is kept: the many small files a rewrite reads mostly share one schema
    (comparing with it costs a few percent of working it out again)."""
    global _LAST_VIEWS_ANSWER
    last = _LAST_VIEWS_ANSWER
    if last is not None and last[0].equals(schema):
        return last[1]
    answer = any(not _plain_type(f.type).equals(f.type) for f in schema)
    _LAST_VIEWS_ANSWER = (schema, answer)
    return answer


def without_view_types(data: pa.Table) -> pa.Table:
    """`data` cast to plain string/binary types where it holds views (see `_plain_type`)."""
    if not _holds_views(data.schema):
        return data
    schema = pa.schema(
        [f.with_type(_plain_type(f.type)) for f in data.schema], metadata=data.schema.metadata
    )
    return data if schema.equals(data.schema) else data.cast(schema)


class Rewriter:
    """One rewrite of some of a snapshot's live files into new ones, committed as one version."""

    def __init__(
        self,
        snapshot: Snapshot,
        rows: Sequence[Mapping[str, Any]],
        purpose: Access = Access.REWRITE,
        unmapped: StructType | None = None,
        parquet: ParquetFormat = DEFAULT_FORMAT,
    ) -> None:
        self.snapshot = snapshot
        self.purpose = purpose  # what the table's features must allow at commit time too
        # the schema without column mapping the new files take (logical names, no field
        # ids), when the rewrite takes column mapping away; None: files as the table has them
        self.unmapped = unmapped
        self.parquet = parquet  # codec and row-group size of every file written
        self.storage = snapshot.storage
        self.now = clock.now_ms()
        self.written: list[str] = []  # table-relative paths of new files
        # every file this rewrite writes, in any process, is named with this prefix: after a
        # failure elsewhere (a Spark task), the files of the units that did finish are found
        self.file_prefix = f"part-00000-{uuid.uuid4().hex[:16]}-"
        config = dict(snapshot.metadata.configuration)
        self.new_metadata: dict[str, Any] | None = None
        tracked = snapshot.protocol.supports("rowTracking") and any(
            r.get("baseRowId") is not None for r in rows
        )
        if tracked:
            names = materialized_column_names(config, _column_names(snapshot))
            if any(config.get(k) != v for k, v in names.items()):
                config.update(names)
                self.new_metadata = {**snapshot.metadata.to_action(), "configuration": config}
        self.row_id_column = config.get(MATERIALIZED_ROW_ID_COLUMN_NAME) if tracked else None
        self.commit_version_column = (
            config.get(MATERIALIZED_ROW_COMMIT_VERSION_COLUMN_NAME) if tracked else None
        )

    # ------------------------------------------------------------------------------ reading
    def read(self, row: Mapping[str, Any]) -> pa.Table:
        """A file's rows as stored, its deletion vector applied, row tracking materialized."""
        try:
            with self.storage.open_input(self.storage.table_path(row["path"])) as handle:
                small = (row.get("size") or 0) <= WHOLE_READ_BYTES
                # a small file in one read and decoded from memory: Arrow's file reader
                # spends ~4x the decoding on the reads of footer and pages from a handle
                return self.decode(row, handle.read() if small else handle)
        except OSError as exc:
            raise _unreadable_data_file(row["path"], exc) from exc

    def decode(self, row: Mapping[str, Any], content: bytes | BinaryIO) -> pa.Table:
        """`row`'s file from its bytes (decoded by this thread) or an open handle (by Arrow's
        threads): its rows as stored, its deletion vector applied, row tracking materialized."""
        return self.prepare(row, self.parse(row, content))

    def parse(self, row: Mapping[str, Any], content: bytes | BinaryIO) -> pa.Table:
        """`row`'s file from its bytes or an open handle, as stored."""
        try:
            if isinstance(content, bytes):
                return decode_parquet_bytes(content)
            return pq.ParquetFile(content, coerce_int96_timestamp_unit="us").read()
        except (OSError, pa.ArrowException) as exc:
            raise _unreadable_data_file(row["path"], exc) from exc

    def prepare(self, row: Mapping[str, Any], data: pa.Table) -> pa.Table:
        """The rows of `row`'s file as `parse` gave them, in plain types, row tracking
        materialized and its deletion vector applied."""
        data = without_view_types(data)
        if self.unmapped is not None:
            data = self._logical(data)
        n = data.num_rows
        if self.row_id_column and row.get("baseRowId") is not None:
            ids = pa.array(int(row["baseRowId"]) + np.arange(n, dtype=np.int64))
            data = _with_materialized(data, self.row_id_column, ids)
        if self.commit_version_column and row.get("defaultRowCommitVersion") is not None:
            version = int(row["defaultRowCommitVersion"])
            data = _with_materialized(
                data, self.commit_version_column, pa.array(np.full(n, version, dtype=np.int64))
            )
        if row.get("deletionVector") is not None:
            descriptor = DeletionVectorDescriptor.from_dict(
                {k: v for k, v in row["deletionVector"].items() if v is not None}
            )
            deleted = np.fromiter(
                load_deletion_vector(descriptor, self.storage.root, self.storage.reader),
                dtype=np.int64,
            )
            last = int(deleted.max()) if deleted.size else -1
            if last >= n:
                raise _past_the_end(row["path"], last, n)
            keep = np.ones(n, dtype=bool)
            keep[deleted] = False
            data = data.filter(pa.array(keep))
        return data

    def _logical(self, data: pa.Table) -> pa.Table:
        """A file's columns (physical names) under their logical names: the same layout,
        renamed at every nesting level (Arrow views; no data is copied)."""
        physical = self._file_schema(mapped=True)
        logical = self._file_schema(mapped=False)
        stored = conform(data, physical)
        columns = [
            pa.chunked_array([chunk.view(f.type) for chunk in column.chunks], type=f.type)
            for column, f in zip(stored.columns, logical, strict=True)
        ]
        extra = [c for c in data.column_names if c not in physical.names]
        return pa.Table.from_arrays(
            [*columns, *(data.column(c) for c in extra)],
            names=[*logical.names, *extra],
        )

    def read_all(
        self, rows: Sequence[Mapping[str, Any]]
    ) -> Iterator[tuple[Sequence[Mapping[str, Any]], pa.Table]]:
        """(files, their rows in the output schema) in order, in chunks of at most READ_AHEAD
        files and READ_AHEAD_BYTES of file. A chunk of small files is read by this thread
        (tens of us a file: handing them to threads costs more in GIL switches than it saves);
        a chunk with bigger files READ_THREADS files at once (their decoding releases the GIL)."""
        schema = self.output_schema()

        def read(row: Mapping[str, Any]) -> pa.Table:
            with reading(row["path"]):  # a bug's report names the file
                return conform(self.read(row), schema)

        with ThreadPoolExecutor(READ_THREADS) as pool:
            for chunk in _chunks(rows):
                if all((row.get("size") or 0) <= THREADED_READ_BYTES for row in chunk):
                    tables = self._decode_small(chunk, schema)
                else:
                    tables = list(pool.map(read, chunk))
                yield chunk, pa.concat_tables(tables) if tables else schema.empty_table()

    def _decode_small(self, rows: Sequence[Mapping[str, Any]], schema: pa.Schema) -> list[pa.Table]:
        """Small files' rows in `schema`, in order, as a few tables: the files are read at
        once, then parsed and prepared DECODE_BATCH at a time, each batch in phases (parse
        every file, then prepare each: a file of a few hundred bytes parses in ~25 us, and
        alternating reading, parsing and the Python around them file by file made each parse
        run with colder caches, ~40% more CPU a file). A batch of tiny files becomes one
        table, so their many small tables do not all stay in memory until the writer takes
        them (fresh memory for them costs a forked worker a page fault every ~4 KB)."""
        contents = self._contents(rows)
        out = []
        for start in range(0, len(rows), DECODE_BATCH):
            stop = start + DECODE_BATCH
            tables = self._decode_batch(rows[start:stop], contents[start:stop], schema)
            # their buffers' bytes, not `nbytes` (which walks every column's chunks and
            # offsets: ~2 us a file, 5% of a small file's whole read)
            if len(tables) > 1 and sum(t.get_total_buffer_size() for t in tables) <= COMBINE_BYTES:
                tables = [pa.concat_tables(tables).combine_chunks()]
            out.extend(tables)
        return out

    def _decode_batch(
        self, rows: Sequence[Mapping[str, Any]], contents: Sequence[bytes], schema: pa.Schema
    ) -> list[pa.Table]:
        """`_decode_small` of one batch: a table per file."""
        path = ""
        try:
            stored = []
            for row, content in zip(rows, contents, strict=True):
                path = row["path"]
                stored.append(self.parse(row, content))
            # the common file needs nothing done: no deletion vector, no row ids to
            # materialize, already in the output schema (what prepare and conform check)
            as_stored = self.row_id_column is None and self.commit_version_column is None
            tables = []
            for row, data in zip(rows, stored, strict=True):
                path = row["path"]
                if as_stored and row.get("deletionVector") is None and data.schema.equals(schema):
                    tables.append(data)
                else:
                    tables.append(conform(self.prepare(row, data), schema))
        except Exception as exc:
            note_reading(exc, path)  # a bug's report names the file, as `reading(path)` does
            raise
        return tables

    def _contents(self, rows: Sequence[Mapping[str, Any]]) -> list[bytes]:
        """The whole bytes of small files, in order: one concurrent request per file on an
        object store, where reading one after another would wait out each round trip."""
        paths = [self.storage.table_path(row["path"]) for row in rows]
        try:
            return self.storage.read_many(paths, [row.get("size") for row in rows])
        except OSError as exc:
            for row in rows:  # name the file that cannot be read
                self.read(row)
            raise DataFileError(f"unreadable data files: {exc}") from exc

    def output_schema(self) -> pa.Schema:
        """What rewritten files hold: the table's columns as data files name them (physical
        names and field ids under column mapping), typed by the table schema (so files written
        before a type widening come out widened), plus the materialized row-tracking columns.
        Partition columns only where the table materializes them in data files."""
        fields = list(self._file_schema(mapped=self.unmapped is None and self._mapped))
        fields += [
            pa.field(c, pa.int64()) for c in (self.row_id_column, self.commit_version_column) if c
        ]
        return pa.schema(fields)

    @property
    def _mapped(self) -> bool:
        return self.snapshot.properties.column_mapping_mode != "none"

    def _file_schema(self, *, mapped: bool) -> pa.Schema:
        """The table's data-file columns, by physical names (`mapped`) or logical ones; typed
        by the table schema."""
        snapshot = self.snapshot
        return data_file_schema(
            snapshot.schema if self.unmapped is None or mapped else self.unmapped,
            snapshot.partition_columns,
            mapped=mapped,
            partitions_in_files=snapshot.protocol.supports("materializePartitionColumns"),
        )

    # ------------------------------------------------------------------------------ writing
    def write(
        self,
        tables: Iterable[pa.Table],
        schema: pa.Schema,
        directory: str,
        partition_values: Mapping[str, str | None],
        keep: Mapping[str, Any] | None = None,
        gather: bool = True,
    ) -> dict[str, Any]:
        """Stream `tables` (one at a time: memory holds one) into one new parquet file in
        `directory`, in the rewrite's format (`self.parquet`); its `add` body (fresh stats,
        `keep` fields such as tags copied). Small tables are gathered into row groups of about
        the format's row-group size unless `gather` is False (each table then starts a row
        group of its own); a bigger table is cut into row groups of about that size."""
        fmt = self.parquet
        name = f"{self.file_prefix}{uuid.uuid4().hex[:16]}{fmt.file_suffix}"
        relative = f"{directory.strip('/')}/{name}" if directory.strip("/") else name
        full = self.storage.join(relative)

        def write(sink: Any) -> None:
            with pq.ParquetWriter(sink, schema, **fmt.writer_options()) as out:

                def flush(data: pa.Table) -> None:
                    out.write_table(data, row_group_size=fmt.rows_per_group(data))

                pending: list[pa.Table] = []
                size = 0
                for table in tables:
                    pending.append(conform(table, schema))
                    size += pending[-1].nbytes
                    if not gather or size >= fmt.row_group_bytes:
                        flush(pa.concat_tables(pending))
                        pending, size = [], 0
                if pending:
                    flush(pa.concat_tables(pending))

        created, size = self.storage.create_new(full, write, unique_name=True)
        if not created:
            raise ConcurrentModification(
                f"{relative}: a file of that name appeared while rewriting"
            )
        self.written.append(relative)
        props = self.snapshot.properties
        stats = stats_json_from_parquet_file(
            self.storage.reader,
            full,
            self.snapshot.schema if self.unmapped is None else self.unmapped,
            self.snapshot.partition_columns,
            num_indexed_cols=props.data_skipping_num_indexed_cols,
            stats_columns=props.data_skipping_stats_columns,
            column_mapping=self.unmapped is None and self._mapped,
            tight_bounds=True if self.snapshot.protocol.supports("deletionVectors") else None,
        )
        add = {
            "path": log_path(relative),
            "partitionValues": dict(partition_values),
            "size": size,
            "modificationTime": self.now,
            "dataChange": False,
            "stats": stats,
        }
        add.update({k: v for k, v in (keep or {}).items() if v})
        return add

    def directory_of(self, row: Mapping[str, Any]) -> str:
        """The table-relative directory a file lives in (its partition directory); the root
        for a file outside the table (an absolute path, as a shallow clone's adds name: it is
        read where it is, its rewrite is written inside the table, and it is never deleted).
        A directory that leads out of the table through a local symlink is not written
        into either: the rewrite goes to the root."""
        try:
            relative = self.storage.relative_inside_root(row["path"])
        except UnsafePath:
            self.storage.table_path(row["path"])  # refuses `..` and other stores: never read
            return ""
        directory = relative.rsplit("/", 1)[0] if "/" in relative else ""
        return directory if self.storage.stays_inside(directory) else ""

    def removes(self, paths: Iterable[str]) -> EncodedRemoves:
        """The `remove` lines of the rewritten files `paths` (each file's deletion vector
        included: the pair is removed), with `dataChange=false` and the stats, tags and row ids
        of their adds. Reads the snapshot's stats (a checkpoint's, on first use): call it
        while the new files are written."""
        files = _selected(self.snapshot.files, paths)
        return encode_removes(files, deletion_timestamp=self.now, data_change=False)

    def portable(self) -> Rewriter:
        """A copy that another process can use to write units: the table's facts without its
        file state (which a Spark task must not receive), and nothing written yet."""
        copy = object.__new__(Rewriter)
        copy.__dict__.update(self.__dict__)
        copy.snapshot = _TableFacts.of(self.snapshot)  # type: ignore[assignment]
        copy.written = []
        return copy

    # ------------------------------------------------------------------------------ commit
    def commit(
        self,
        operation: str,
        parameters: Mapping[str, Any],
        removes: EncodedRemoves,
        adds: Sequence[Mapping[str, Any]],
        metrics: Mapping[str, Any],
    ) -> int:
        """Commit the removes and the new files' `add` bodies as one version (the removed
        files are what the rewrite read: a concurrent change to one is a conflict); on any
        failure the new files go."""
        try:
            txn = Transaction(
                self.snapshot,
                operation=operation,
                parameters=dict(parameters),
                purpose=self.purpose,
            )
            if self.new_metadata is not None:
                txn.add_action({"metaData": self.new_metadata})
            txn.read_files(removes.paths)
            txn.add_encoded_removes(removes)
            txn.add_actions({"add": add} for add in adds)
            txn.metrics = dict(metrics)
            return txn.commit().version
        except BaseException:
            self.discard()
            raise

    def files_written_in(self, directories: Iterable[str]) -> list[str]:
        """Table-relative paths of this rewrite's files in `directories` that `written` does
        not list yet: what tasks elsewhere wrote before the rewrite failed."""
        known = set(self.written)
        found = []
        for directory in sorted(set(directories)):
            base = directory.strip("/")
            for name in self.storage.file_names_in(base, self.file_prefix):
                relative = f"{base}/{name}" if base else name
                if relative not in known:
                    found.append(relative)
        return found

    def record_files_written_elsewhere(self, directories: Iterable[str]) -> None:
        """After a map whose workers (forked processes, Spark tasks) failed: record the files
        they wrote that this process never heard of (a worker killed, a job aborted), found by
        the rewrite's file prefix, so `discard` removes them too. A listing that fails
        is only logged: the map's failure matters more, and vacuum removes what is left."""
        try:
            self.written.extend(self.files_written_in(directories))
        except Exception:  # noqa: BLE001 - the first failure matters more; vacuum removes the rest
            logger.warning(
                "%s: could not list the files of a failed rewrite; vacuum removes them",
                self.storage.url,
            )

    def discard(self) -> None:
        """Delete the files this rewrite wrote, unless the log references them after all (a
        commit whose response was lost did land: its files must stay)."""
        discard_uncommitted(self.storage, self.written)
        self.written = []


@dataclass(frozen=True)
class _TableFacts:
    """What writing a rewritten file needs of a snapshot: schema, partitioning, properties,
    protocol and storage; not the file state (portable to Spark tasks)."""

    storage: Storage
    schema: StructType
    partition_columns: tuple[str, ...]
    properties: TableProperties
    protocol: Protocol
    metadata: Any

    @classmethod
    def of(cls, snapshot: Snapshot) -> _TableFacts:
        return cls(
            snapshot.storage,
            snapshot.schema,
            snapshot.partition_columns,
            snapshot.properties,
            snapshot.protocol,
            snapshot.metadata,
        )


@dataclass(frozen=True)
class RewriteUnit:
    """Files rewritten into one new file: a compaction bin, or one file purge rewrites.

    Attributes:
        members: the files' add bodies (FILE_FIELDS), read in this order.
        directory: where the new file goes (the members' partition directory).
        partition_values: the new file's `partitionValues`.
        keep: add fields carried over to the new file (tags, clusteringProvider).
    """

    members: tuple[Mapping[str, Any], ...]
    directory: str
    partition_values: Mapping[str, str | None]
    keep: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Rewritten:
    """One unit's new file: its `add` body, table-relative path and row count."""

    add: dict[str, Any]
    relative_path: str
    rows: int


def write_unit(
    rewriter: Rewriter, unit: RewriteUnit, advance: Callable[[int, int], object] | None = None
) -> Rewritten:
    """Read a unit's files (deletion vectors applied, row ids materialized) and write them as
    one new file; `advance(files, bytes)` hears about each chunk read."""
    rows = 0

    def tables() -> Iterator[pa.Table]:
        nonlocal rows
        for files, table in rewriter.read_all(list(unit.members)):
            rows += table.num_rows
            yield table
            if advance is not None:
                advance(len(files), sum(int(f["size"] or 0) for f in files))

    add = rewriter.write(
        tables(),
        rewriter.output_schema(),
        unit.directory,
        dict(unit.partition_values),
        keep=unit.keep,
    )
    return Rewritten(add, rewriter.written[-1], rows)


def rewrite_units(
    rewriter: Rewriter,
    units: Sequence[RewriteUnit],
    engine: Engine,
    label: str,
    meanwhile: Callable[[], object] | None = None,
) -> list[Rewritten]:
    """Every unit rewritten, by this process (with progress) or by the engine's workers;
    the files written are recorded on `rewriter`, so `discard()` removes them on failure.
    `meanwhile` (the commit's other actions, say) runs while workers write, or before the
    writing where this process writes."""
    spread = _spread(rewriter, units)
    here = engine.runs_here(spread)
    unit_bytes = [sum(int(m["size"] or 0) for m in u.members) for u in units]
    with progress.task(
        label, files=sum(len(u.members) for u in units), bytes=sum(unit_bytes)
    ) as task:

        def advance(files: int, size: int) -> None:
            task.advance(files=files, bytes=size)

        def finished(index: int, done: Rewritten) -> None:
            if not here:  # this process wrote nothing: record each worker's file as it arrives
                rewriter.written.append(done.relative_path)
                advance(len(units[index].members), unit_bytes[index])

        write = partial(write_unit, rewriter, advance=advance) if here else None
        try:
            return engine.map_ordered(
                write or partial(write_unit, rewriter.portable()),
                units,
                spread=spread,
                on_done=finished,
                meanwhile=meanwhile,
            )
        except BaseException:
            # other processes (forked workers, Spark tasks) may have written files this
            # process never heard of (a worker killed, a job aborted): they carry the
            # rewrite's file prefix, so they are found and `discard()` removes them too
            if here:
                raise  # this process wrote every file, and recorded each as it wrote it
            rewriter.record_files_written_elsewhere(u.directory for u in units)
            raise


def rewrite_with_removes(
    rewriter: Rewriter, units: Sequence[RewriteUnit], engine: Engine, label: str
) -> tuple[list[Rewritten], EncodedRemoves]:
    """Every unit rewritten (`rewrite_units`), and the removes of all their files,
    encoded while the new files are written; if anything fails, the new files are discarded."""
    removes: list[EncodedRemoves] = []

    def build_removes() -> None:
        removes.append(rewriter.removes(m["path"] for u in units for m in u.members))

    try:
        written = rewrite_units(rewriter, units, engine, label, build_removes)
    except BaseException:
        rewriter.discard()
        raise
    return written, removes[0]


#: a local rewrite of at least this many files spreads its units over worker processes (one
#: per core): reading many small files is bound by per-file CPU work that threads cannot
#: share under the GIL, and forking a worker costs a few milliseconds
PROCESS_MIN_FILES = 2_000


def _spread(rewriter: Rewriter, units: Sequence[RewriteUnit]) -> Spread:
    """How a local engine runs the units: in worker processes only when many files are read
    from local storage (object stores keep their event loop threads: no fork there)."""
    files = sum(len(u.members) for u in units)
    if files < PROCESS_MIN_FILES or len(units) < 2 or not rewriter.storage.is_local:
        return Spread.SERIAL
    return Spread.PROCESSES


def _chunks(rows: Sequence[Mapping[str, Any]]) -> Iterator[Sequence[Mapping[str, Any]]]:
    """Consecutive runs of files of at most READ_AHEAD files and READ_AHEAD_BYTES (a bigger
    file is a run of its own)."""
    start = size = 0
    for i, row in enumerate(rows):
        grown = size + int(row["size"] or 0)
        if i > start and (i - start >= READ_AHEAD or grown > READ_AHEAD_BYTES):
            yield rows[start:i]
            start, grown = i, int(row["size"] or 0)
        size = grown
    if start < len(rows):
        yield rows[start:]


def _column_names(snapshot: Snapshot) -> set[str]:
    """Every top-level column name, logical and physical, lower-cased (names to avoid)."""
    fields = snapshot.schema.fields
    return {f.physical_name.lower() for f in fields} | {f.name.lower() for f in fields}


def _with_materialized(data: pa.Table, column: str, fallback: pa.Array) -> pa.Table:
    """`data` with `column` holding its stored values where present, else `fallback`."""
    if column in data.column_names:
        stored = data.column(column).combine_chunks().cast(pa.int64())
        values = pc.if_else(pc.is_valid(stored), stored, fallback)
        return data.set_column(data.column_names.index(column), column, values)
    return data.append_column(pa.field(column, pa.int64(), nullable=True), fallback)


__all__ = [
    "FILE_FIELDS",
    "READ_FIELDS",
    "RewriteUnit",
    "Rewriter",
    "Rewritten",
    "file_rows_in_order",
    "live_file_rows",
    "rewrite_units",
    "rewrite_with_removes",
    "write_unit",
]
