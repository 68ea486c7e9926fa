"""Writing data into Delta tables: parquet files plus a commit with per-file statistics.

Two layers, so every engine shares the commit half:

* `commit_data_files` takes parquet files already written inside the table (by pyarrow,
  or by Spark in `delta_ops.spark`), reads each footer for `numRecords` / min / max /
  nullCount, and commits them as `add` actions through a `Transaction`, creating the
  table (protocol + metadata from the Arrow schema) when it does not exist yet, replacing the
  live files (or those a ``replace_where`` predicate selects) for ``mode="overwrite"``.
* `write_data_files` writes Arrow rows as uniquely named parquet files, one per
  partition value set, laid out as `delta_ops.table.write_target` decides (a Spark task
  calls it on its share of the rows); `write_arrow` resolves the target, calls it and
  commits the files.

For example:

    write_arrow("/data/events", pa.table({"id": [1, 2], "day": ["a", "b"]}), partition_by=["day"])
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import math
import posixpath
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO
from urllib.parse import quote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from delta_ops import clock
from delta_ops.errors import (
    ConcurrentModification,
    DataFileError,
    NotADeltaTable,
    OperationRefused,
    SchemaMismatch,
)
from delta_ops.log.file_names import commit_file_name
from delta_ops.log.replay import Txn
from delta_ops.protocol.partition_predicate import PartitionPredicate
from delta_ops.protocol.properties import TableProperties
from delta_ops.protocol.schema import parse_schema
from delta_ops.protocol.stats import (
    read_parquet_metadata,
    stats_from_parquet_metadata,
    stats_to_json,
)
from delta_ops.storage import Location, Storage
from delta_ops.table.remove_lines import EncodedRemoves, encode_removes
from delta_ops.table.snapshot import Snapshot, load_snapshot
from delta_ops.table.transaction import CommitResult, Transaction, WinningCommit
from delta_ops.table.write_target import (
    WriteTarget,
    check_not_null,
    resolve_write_target,
    to_file_table,
)

logger = logging.getLogger(__name__)

HIVE_DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"


@dataclass(frozen=True)
class SetTransaction:
    """An application's progress recorded in the table (the protocol's `txn` action): a
    streaming query's id and batch id, or Delta's ``txnAppId``/``txnVersion`` write options.
    A writer that finds `version` (or a later one) recorded for `app_id` has nothing to do."""

    app_id: str
    version: int

    def already_in(self, snapshot: Snapshot) -> Txn | None:
        """The table's `txn` for this application when it records this version or a later one."""
        recorded = snapshot.txns.get(self.app_id)
        return recorded if recorded is not None and recorded.version >= self.version else None

    def to_action(self, now_ms: int) -> dict[str, Any]:
        return {"txn": {"appId": self.app_id, "version": self.version, "lastUpdated": now_ms}}


@dataclass(frozen=True)
class DataFile:
    """A parquet file written inside the table, not yet committed."""

    relative_path: str  # decoded, relative to the table root
    partition_values: Mapping[str, str | None]


def log_path(relative_path: str) -> str:
    """A table-relative file path as written in the log: URL-encoded (RFC 2396)."""
    return quote(relative_path, safe="/=-_.~")


def commit_data_files(
    table: Location | Storage,
    files: Sequence[DataFile],
    target: WriteTarget,
    *,
    storage_options: Mapping[str, Any] | None = None,
    operation_parameters: Mapping[str, Any] | None = None,
    known: Snapshot | None = None,
    operation: str | None = None,
    set_transaction: SetTransaction | None = None,
) -> CommitResult:
    """Commit parquet files written inside the table for `target` as one WRITE.

    The target is resolved again against the latest version: a table created, re-partitioned
    or re-mapped meanwhile (so the files no longer fit it) is refused, as is anything the
    table now refuses. Each file's footer gives its stats and proves that NOT NULL columns
    hold no nulls. `known` (the snapshot the target was resolved on) is used again when no
    commit has landed since, which saves loading the table a second time.

    `operation` names the commit (its parameters are then `operation_parameters` alone;
    default WRITE, or CREATE TABLE AS SELECT for a new table). With `set_transaction` the
    commit also records that application's version (a `txn` action), unless the table has
    already recorded that version or a later one: then nothing is committed and the result
    has ``attempts=0`` (the caller still owns `files`). A concurrent commit recording the
    same application is a conflict."""
    storage = table if isinstance(table, Storage) else Storage.open(table, storage_options)
    snapshot = latest_snapshot(storage, known)
    if set_transaction is not None and snapshot is not None:
        done = set_transaction.already_in(snapshot)
        if done is not None:
            logger.info(
                "%s: application %s is at version %d, so its version %d is committed already;"
                " not committing it again",
                storage.url,
                set_transaction.app_id,
                done.version,
                set_transaction.version,
            )
            return CommitResult(version=snapshot.version, attempts=0, num_actions=0)
    mode = target.mode
    update = target.schema_update
    if snapshot is not None:
        now_target = resolve_write_target(
            storage,
            target.data_schema or target.file_schema,
            partition_by=target.partition_columns,
            mode=mode,
            snapshot=snapshot,
            merge_schema=update is not None,
        )
        unchanged = (
            target.same_layout(now_target)
            if update is None  # a schema update applies only to the schema it was made from
            else snapshot.metadata.schema_string == target.base_schema
            and now_target.partition_columns == target.partition_columns
        )
        if not unchanged:
            if not target.exists:
                # another writer created the table first: a race, as two commits of one
                # version are (retryable: a new attempt appends, or is refused by its layout)
                raise ConcurrentModification(
                    f"{storage.url} changed while the data was written (another writer "
                    "created it); nothing was committed, write again"
                )
            raise OperationRefused(
                f"{storage.url} changed while the data was written (re-partitioned or its "
                "columns changed); nothing was committed, write again"
            )
        table_schema = parse_schema(update["schemaString"]) if update else snapshot.schema
        props = (
            TableProperties.from_configuration(update["configuration"])
            if update
            else snapshot.properties
        )
        tight_bounds = True if snapshot.protocol.supports("deletionVectors") else None
    else:
        if target.exists:
            raise OperationRefused(
                f"{storage.url} is no longer a Delta table; nothing was committed"
            )
        table_schema = parse_schema(target.new_table[1]["metaData"]["schemaString"])
        props = TableProperties.from_configuration(target.new_table[1]["metaData"]["configuration"])
        tight_bounds = None
    if snapshot is None:
        setup = [dict(a) for a in target.new_table]
    else:
        setup = [{"metaData": dict(update)}] if update else []
    partition_columns = list(target.partition_columns)
    replaced = target.replace_predicate()
    if replaced is not None:
        inside = replaced.selects([f.partition_values for f in files])
        outside = [f.relative_path for f, ok in zip(files, inside, strict=True) if not ok]
        if outside:
            raise SchemaMismatch(
                f"{storage.url}: {len(outside)} written file(s) hold rows outside replaceWhere "
                f"{replaced.text!r} (e.g. {outside[0]}); nothing was committed"
            )
    if operation is None:
        operation = "CREATE TABLE AS SELECT" if snapshot is None else "WRITE"
        parameters: dict[str, Any] = {
            "mode": mode.capitalize(),
            "partitionBy": list(partition_columns),
            **({"predicate": json.dumps([replaced.text])} if replaced is not None else {}),
            **(operation_parameters or {}),
        }
    else:
        parameters = dict(operation_parameters or {})
    txn = Transaction(
        snapshot,
        storage=storage,
        operation=operation,
        parameters=parameters,
        on_conflict=_appends_into(replaced) if replaced is not None else None,
    )
    txn.add_actions(setup)
    now = clock.now_ms()
    if set_transaction is not None:
        txn.add_action(set_transaction.to_action(now))
    if mode == "overwrite" and snapshot is not None:
        txn.add_encoded_removes(_removes_of_live_files(snapshot, now, replaced))
    num_records = 0
    for f in files:
        full = storage.join(f.relative_path)
        info = storage.stat(full)
        if info is None:
            raise DataFileError(f"{storage.url}: staged file {f.relative_path} does not exist")
        footer = read_parquet_metadata(storage.reader, full)
        _check_footer_not_null(footer, target, f.relative_path)
        stats = stats_to_json(
            stats_from_parquet_metadata(
                footer,
                table_schema,
                partition_columns,
                num_indexed_cols=props.data_skipping_num_indexed_cols,
                stats_columns=props.data_skipping_stats_columns,
                column_mapping=props.column_mapping_mode != "none",
                tight_bounds=tight_bounds,
            )
        )
        num_records += footer.num_rows
        txn.add_action(
            {
                "add": {
                    "path": log_path(f.relative_path),
                    "partitionValues": dict(f.partition_values),
                    "size": info.size,
                    "modificationTime": now,
                    "dataChange": True,
                    "stats": stats,
                }
            }
        )
    txn.metrics = {
        "numFiles": len(files),
        "numOutputRows": num_records,
        "numOutputBytes": sum(a["add"]["size"] for a in txn.actions if "add" in a),
    }
    return txn.commit()


def latest_snapshot(storage: Storage, known: Snapshot | None = None) -> Snapshot | None:
    """The table's latest snapshot (None when it is no table): `known` if no commit has
    landed after it (one existence check), else a fresh load."""
    if known is not None and not storage.exists(
        storage.log_file(commit_file_name(known.version + 1))
    ):
        return known
    try:
        return load_snapshot(storage)
    except NotADeltaTable:
        return None


def _check_footer_not_null(footer: pq.FileMetaData, target: WriteTarget, relative: str) -> None:
    """Refuse a file whose footer shows nulls (or cannot show their absence) in a NOT NULL
    column: the rows were written by an engine that did not check them."""
    if not target.not_null or not footer.num_rows:
        return
    wanted = {target.file_name(c): c for c in target.not_null}
    arrow_schema = footer.schema.to_arrow_schema()
    for index in range(footer.num_columns):
        top = footer.schema.column(index).path.split(".")[0]
        if top not in wanted or pa.types.is_nested(arrow_schema.field(top).type):
            continue
        nulls = 0
        for group in range(footer.num_row_groups):
            statistics = footer.row_group(group).column(index).statistics
            if statistics is None or not statistics.has_null_count:
                raise DataFileError(
                    f"{target.url}: {relative} has no null counts for NOT NULL column "
                    f"{wanted[top]!r}, so its rows cannot be checked"
                )
            nulls += statistics.null_count
        if nulls:
            raise SchemaMismatch(
                f"{target.url}: column {wanted[top]!r} is NOT NULL but {relative} has "
                f"{nulls} rows without a value"
            )


def _appends_into(
    predicate: PartitionPredicate,
) -> Callable[[Transaction, WinningCommit], set[str]]:
    """Conflict hook of a replaceWhere overwrite: a concurrent commit that added files to the
    partitions being replaced would survive the overwrite, so it is a conflict (retry)."""

    def check(txn: Transaction, winner: WinningCommit) -> set[str]:
        appended = [a for a in winner.of_kind("add") if a.get("dataChange", True)]
        values = [dict(a.get("partitionValues") or {}) for a in appended]
        for add, inside in zip(appended, predicate.selects(values), strict=True):
            if inside:
                raise ConcurrentModification(
                    f"version {winner.version} added {add.get('path')} to partitions that "
                    f"replaceWhere {predicate.text!r} replaces; write again"
                )
        return set()

    return check


def _removes_of_live_files(
    snapshot: Snapshot, now: int, only: PartitionPredicate | None = None
) -> EncodedRemoves:
    """`remove` actions for the live files (those `only` selects, when given)."""
    files = snapshot.file_index
    if only is not None:
        files = files.filter(only.mask(files))
    return encode_removes(
        files,
        deletion_timestamp=now,
        data_change=True,
        carried=("deletionVector", "baseRowId", "defaultRowCommitVersion"),
    )


def partition_value_string(value: Any) -> str | None:
    """The protocol's string serialization of a partition value. An empty string is null (the
    protocol reads ``""`` as null for every type, and Spark writes it as null); non-finite
    floats are spelled as Spark spells them (``NaN``, ``Infinity``, ``-Infinity``)."""
    if value is None:
        return None
    if isinstance(value, str | bytes) and not value:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        return str(value.strftime("%Y-%m-%d %H:%M:%S.%f"))
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


def _hive_escape(text: str) -> str:
    """Escape a partition value for a directory name, as Hive/Spark do."""
    specials = set("\"#%'*/:=?\\\x7f{[]^")
    return "".join(f"%{ord(c):02X}" if c in specials or ord(c) < 0x20 else c for c in text)


def partition_directory(partition_by: Sequence[str], values: Mapping[str, str | None]) -> str:
    return "/".join(f"{col}={_partition_directory_value(values[col])}" for col in partition_by)


def _partition_directory_value(value: str | None) -> str:
    return HIVE_DEFAULT_PARTITION if value is None else _hive_escape(value)


def _parquet_writer(data: pa.Table) -> Callable[[BinaryIO], None]:
    """Writes `data` as one snappy parquet file into a sink (for Storage.create_new)."""
    dictionary = dictionary_columns(data)

    def write(sink: BinaryIO) -> None:
        pq.write_table(data, sink, compression="snappy", use_dictionary=dictionary)

    return write


#: how many of a file's first rows decide which of its columns are dictionary-encoded
DICTIONARY_SAMPLE_ROWS = 2048


def dictionary_columns(data: pa.Table) -> bool | list[str]:
    """The columns of a data file worth dictionary-encoding: those whose first
    DICTIONARY_SAMPLE_ROWS values repeat (at most half of them distinct).

    pyarrow dictionary-encodes every column until its dictionary reaches 1 MB; for a column of
    mostly unique values (ids, timestamps, measurements) that takes more than twice as long as
    plain encoding and makes the file bigger. parquet-mr (Spark's writer) instead gives up a
    dictionary that does not pay after the first page; this decides alike, from a sample.
    Tables with nested columns keep pyarrow's default (every column)."""
    if data.num_rows == 0 or any(pa.types.is_nested(f.type) for f in data.schema):
        return True
    sample = data.slice(0, DICTIONARY_SAMPLE_ROWS)
    return [
        name
        for name, column in zip(sample.column_names, sample.columns, strict=True)
        if _distinct(column) * 2 <= sample.num_rows
    ]


def _distinct(column: pa.ChunkedArray) -> int:
    """How many distinct values `column` holds (0, so a dictionary, for a type Arrow cannot
    count)."""
    try:
        return int(pc.count_distinct(column).as_py())
    except pa.ArrowNotImplementedError:
        return 0


def write_arrow(
    table: Location | Storage,
    data: pa.Table,
    *,
    mode: str = "append",
    partition_by: Sequence[str] = (),
    configuration: Mapping[str, str] | None = None,
    storage_options: Mapping[str, Any] | None = None,
    merge_schema: bool = False,
    replace_where: str | None = None,
) -> CommitResult:
    """Write an Arrow table into a Delta table (created if absent) and commit it. An existing
    table keeps its own partitioning and column mapping (see
    `delta_ops.table.write_target`); `merge_schema` adds the data's new columns to it in
    the same commit; `replace_where` (with ``mode="overwrite"``) replaces only the partitions a
    predicate selects. A write the table refuses fails before any file is written, and files
    of a commit that fails are deleted again."""
    storage = table if isinstance(table, Storage) else Storage.open(table, storage_options)
    snapshot = latest_snapshot(storage)
    target = resolve_write_target(
        storage,
        data.schema,
        partition_by=partition_by,
        mode=mode,
        configuration=configuration,
        snapshot=snapshot,
        merge_schema=merge_schema,
        replace_where=replace_where,
    )
    files = write_data_files(storage, data, target)
    try:
        return commit_data_files(storage, files, target, known=snapshot)
    except BaseException:
        discard_uncommitted(storage, [f.relative_path for f in files])
        raise


def write_data_files(
    storage: Storage, data: pa.Table, target: WriteTarget, *, task: int = 0
) -> list[DataFile]:
    """Write `data` as parquet files inside the table, one per partition value set, laid out
    as `target` says (not yet committed: pass the result to `commit_data_files`).
    `task` numbers the file names of parallel writers (a Spark task's partition id).

    The rows are checked (NOT NULL columns) before any file is written; if writing fails
    part-way, the files this call wrote are deleted again before the error propagates."""
    check_not_null(data, target)
    by_lower = {c.lower(): c for c in data.column_names}
    partition_by = [by_lower[c.lower()] for c in target.partition_columns]
    file_keys = [target.file_name(c) for c in target.partition_columns]
    files: list[DataFile] = []
    try:
        for values, rows in _partition_groups(data, partition_by):
            in_log = {key: values[column] for key, column in zip(file_keys, partition_by)}
            directory = partition_directory(file_keys, in_log)
            name = f"part-{task:05d}-{uuid.uuid4()}.c000.snappy.parquet"
            relative = f"{directory}/{name}" if directory else name
            content = _parquet_writer(to_file_table(rows, target))
            storage.create_new(storage.join(relative), content)
            files.append(DataFile(relative, in_log))
    except BaseException:
        written = [f.relative_path for f in files]
        storage.delete([storage.join(p) for p in written])
        _remove_empty_partition_dirs(storage, written)
        raise
    return files


def _partition_groups(
    data: pa.Table, partition_by: Sequence[str]
) -> list[tuple[dict[str, str | None], pa.Table]]:
    """The rows of each partition value set, every row in exactly one group: grouped by the
    values themselves (a NaN key holds the NaN rows; 0.0 and -0.0 are two keys), not found
    again by comparing values, which drops NaN rows and copies -0.0 rows into 0.0's group."""
    if not partition_by:
        return [({}, data)]
    row = "row"
    while row in partition_by:
        row += "_"
    keyed = data.select(list(partition_by)).append_column(
        row, pa.array(range(data.num_rows), pa.int64())
    )
    grouped = keyed.group_by(list(partition_by), use_threads=False).aggregate([(row, "list")])
    keys = grouped.select(list(partition_by)).to_pylist()
    rows = grouped.column(f"{row}_list").to_pylist()
    return [
        ({c: partition_value_string(key[c]) for c in partition_by}, data.take(pa.array(indices)))
        for key, indices in zip(keys, rows, strict=True)
    ]


def discard_uncommitted(storage: Storage, relative_paths: Sequence[str]) -> None:
    """Delete moved files after a failed commit, unless the log references them after all.

    A commit can fail after its file landed (a lost response from an object store); deleting
    files a committed version references would corrupt the table, so the log is read first.
    When it cannot be read, the files stay as orphans for vacuum.
    """
    if not relative_paths:
        return
    try:
        try:
            snapshot = load_snapshot(storage)
            referenced = set(snapshot.file_index.column("path").to_pylist()) | set(
                snapshot.tombstones.column("path").to_pylist()
            )
        except NotADeltaTable:
            referenced = set()
        keep = [p for p in relative_paths if log_path(p) in referenced]
        if keep:
            logger.warning(
                "%s: the commit failed but the log references %d of its files; keeping them",
                storage.url,
                len(keep),
            )
        storage.delete([storage.join(p) for p in relative_paths if p not in keep])
        _remove_empty_partition_dirs(storage, relative_paths)
    except Exception:  # the original error matters more; these are only orphans now
        logger.warning(
            "%s: could not remove %d uncommitted files; vacuum will",
            storage.url,
            len(relative_paths),
            exc_info=True,
        )


def _remove_empty_partition_dirs(storage: Storage, relative_paths: Sequence[str]) -> None:
    directories = {posixpath.dirname(p) for p in relative_paths} - {""}
    parents = set()
    for d in directories:
        while d:
            parents.add(d)
            d = posixpath.dirname(d)
    # deepest first, only when empty: another writer's files stay
    storage.remove_empty_dirs(sorted(parents, key=lambda d: -d.count("/")))
