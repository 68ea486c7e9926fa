"""Writing data into Delta tables: parquet files plus a commit with per-file statistics.

Two layers, so every engine shares the commit half:

* :func:`commit_data_files` takes parquet files already written inside the table (by pyarrow,
  or by Spark in :mod:`delta_ops.spark`), reads each footer for `numRecords` / min / max /
  nullCount, and commits them as `add` actions through a :class:`Transaction`, creating the
  table (protocol + metadata from the Arrow schema) when it does not exist yet, replacing the
  live files for ``mode="overwrite"``.
* :func:`write_arrow` writes an Arrow table as uniquely named parquet files (one per partition)
  and calls the former.

Example::

    write_arrow("/data/events", pa.table({"id": [1, 2], "day": ["a", "b"]}), partition_by=["day"])
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import posixpath
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO
from urllib.parse import quote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from delta_ops.errors import DeltaOpsError, NotADeltaTable
from delta_ops.protocol.features import Operation, Protocol
from delta_ops.protocol.properties import TableProperties
from delta_ops.protocol.schema import StructType, from_arrow_schema, parse_schema
from delta_ops.protocol.stats import stats_json_from_parquet_file
from delta_ops.storage import Location, Storage
from delta_ops.table.snapshot import Snapshot, load_snapshot
from delta_ops.table.transaction import CommitResult, Transaction

logger = logging.getLogger(__name__)

HIVE_DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"


@dataclass(frozen=True)
class DataFile:
    """A parquet file written inside the table, not yet committed."""

    relative_path: str  # decoded, relative to the table root
    partition_values: Mapping[str, str | None]


def protocol_for_configuration(configuration: Mapping[str, str], schema_json: str = "") -> Protocol:
    """The protocol a new table needs: (1, 2) plus what its properties and column types need."""
    protocol = Protocol(1, 2)
    props = TableProperties.from_configuration(configuration)
    wanted = []
    if '"timestamp_ntz"' in schema_json:
        wanted.append("timestampNtz")
    if props.enable_row_tracking:
        wanted.append("rowTracking")
    if props.enable_deletion_vectors:
        wanted.append("deletionVectors")
    if props.enable_change_data_feed:
        wanted.append("changeDataFeed")
    if props.checkpoint_policy == "v2":
        wanted.append("v2Checkpoint")
    if props.enable_in_commit_timestamps:
        wanted.append("inCommitTimestamp")
    return protocol.with_features(*wanted) if wanted else protocol


def new_table_actions(
    schema: pa.Schema, partition_by: Sequence[str], configuration: Mapping[str, str]
) -> list[dict[str, Any]]:
    """Protocol and metaData actions creating a table with this Arrow schema."""
    missing = [c for c in partition_by if c not in schema.names]
    if missing:
        raise DeltaOpsError(
            f"partition columns {missing} are not in the data's schema {schema.names}"
        )
    delta_schema = from_arrow_schema(schema)
    configuration = dict(configuration)
    if TableProperties.from_configuration(configuration).enable_row_tracking:
        from delta_ops.protocol.row_tracking import materialized_column_names

        configuration.update(
            materialized_column_names(configuration, {n.lower() for n in schema.names})
        )
    metadata = {
        "id": str(uuid.uuid4()),
        "format": {"provider": "parquet", "options": {}},
        "schemaString": delta_schema.to_json(),
        "partitionColumns": list(partition_by),
        "configuration": dict(configuration),
        "createdTime": int(time.time() * 1000),
    }
    protocol = protocol_for_configuration(configuration, delta_schema.to_json())
    return [{"protocol": protocol.to_action()}, {"metaData": metadata}]


def log_path(relative_path: str) -> str:
    """A table-relative file path as written in the log: URL-encoded (RFC 2396)."""
    return quote(relative_path, safe="/=-_.~")


def commit_data_files(
    table: Location | Storage,
    files: Sequence[DataFile],
    *,
    schema: pa.Schema,
    mode: str = "append",
    partition_by: Sequence[str] = (),
    configuration: Mapping[str, str] | None = None,
    storage_options: Mapping[str, Any] | None = None,
    operation_parameters: Mapping[str, Any] | None = None,
) -> CommitResult:
    """Commit parquet files that were written inside the table as one WRITE."""
    if mode not in ("append", "overwrite"):
        raise ValueError(f"mode must be 'append' or 'overwrite', got {mode!r}")
    storage = table if isinstance(table, Storage) else Storage.open(table, storage_options)
    snapshot: Snapshot | None
    try:
        snapshot = load_snapshot(storage)
    except NotADeltaTable:
        snapshot = None
    if snapshot is None:
        setup = new_table_actions(schema, partition_by, configuration or {})
        table_schema = parse_schema(setup[1]["metaData"]["schemaString"])
        partition_columns = list(partition_by)
        props = TableProperties.from_configuration(configuration or {})
    else:
        setup = []
        table_schema = snapshot.schema
        partition_columns = list(snapshot.partition_columns)
        if partition_by and list(partition_by) != partition_columns:
            raise DeltaOpsError(
                f"{storage.url} is partitioned by {partition_columns}, not {list(partition_by)}"
            )
        _check_schema_compatible(table_schema, schema, storage.url)
        props = snapshot.properties
    txn = Transaction(
        snapshot,
        storage=storage,
        operation="CREATE TABLE AS SELECT" if snapshot is None else "WRITE",
        parameters={
            "mode": mode.capitalize(),
            "partitionBy": list(partition_columns),
            **(operation_parameters or {}),
        },
    )
    txn.add_actions(setup)
    now = int(time.time() * 1000)
    if mode == "overwrite" and snapshot is not None:
        txn.add_actions(_removes_of_all_live_files(snapshot, now))
    num_records = 0
    for f in files:
        full = storage.join(f.relative_path)
        info = storage.stat(full)
        if info is None:
            raise DeltaOpsError(f"{storage.url}: staged file {f.relative_path} does not exist")
        stats = stats_json_from_parquet_file(
            storage.reader,
            full,
            table_schema,
            partition_columns,
            num_indexed_cols=props.data_skipping_num_indexed_cols,
            stats_columns=props.data_skipping_stats_columns,
        )
        num_records += int(json.loads(stats)["numRecords"])
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


def _removes_of_all_live_files(snapshot: Snapshot, now: int) -> list[dict[str, Any]]:
    from delta_ops.log.actions import file_rows_as_actions

    bodies = file_rows_as_actions(
        snapshot.files,
        columns=(
            "path",
            "partitionValues",
            "size",
            "deletionVector",
            "baseRowId",
            "defaultRowCommitVersion",
        ),
    )
    return [
        {
            "remove": {
                "path": b.pop("path"),
                "deletionTimestamp": now,
                "dataChange": True,
                "extendedFileMetadata": True,
                **b,
            }
        }
        for b in bodies
    ]


def _check_schema_compatible(table_schema: StructType, data_schema: pa.Schema, where: str) -> None:
    table_names = {f.name.lower() for f in table_schema.fields}
    extra = [n for n in data_schema.names if n.lower() not in table_names]
    if extra:
        raise DeltaOpsError(
            f"{where}: the data has columns the table does not: {extra} (schema evolution is not supported)"
        )


def partition_value_string(value: Any) -> str | None:
    """The protocol's string serialization of a partition value."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
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

    def write(sink: BinaryIO) -> None:
        pq.write_table(data, sink, compression="snappy")

    return write


def write_arrow(
    table: Location | Storage,
    data: pa.Table,
    *,
    mode: str = "append",
    partition_by: Sequence[str] = (),
    configuration: Mapping[str, str] | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> CommitResult:
    """Write an Arrow table into a Delta table (created if absent) and commit it. A table whose
    features refuse data writes is refused before any file is written; files of a commit that
    fails are deleted again."""
    storage = table if isinstance(table, Storage) else Storage.open(table, storage_options)
    check_writes_allowed(storage)
    files = write_data_files(storage, data, partition_by)
    try:
        return commit_data_files(
            storage,
            files,
            schema=data.schema,
            mode=mode,
            partition_by=partition_by,
            configuration=configuration,
        )
    except BaseException:
        discard_uncommitted(storage, [f.relative_path for f in files])
        raise


def check_writes_allowed(storage: Storage) -> None:
    """Refuse (UnsupportedFeature) before anything is written when the table exists and one of
    its features does not allow data writes."""
    try:
        snapshot = load_snapshot(storage)
    except NotADeltaTable:
        return
    snapshot.protocol.check_allows(Operation.WRITE)


def write_data_files(
    storage: Storage, data: pa.Table, partition_by: Sequence[str] = (), *, task: int = 0
) -> list[DataFile]:
    """Write `data` as parquet files inside the table, one per partition value set (not yet
    committed: pass the result to :func:`commit_data_files`). `task` numbers the file names
    of parallel writers (a Spark task's partition id)."""
    files: list[DataFile] = []
    data_columns = [c for c in data.column_names if c not in partition_by]
    for values, rows in _partition_groups(data, partition_by):
        directory = partition_directory(partition_by, values)
        name = f"part-{task:05d}-{uuid.uuid4()}.c000.snappy.parquet"
        relative = f"{directory}/{name}" if directory else name
        storage.create_new(storage.join(relative), _parquet_writer(rows.select(data_columns)))
        files.append(DataFile(relative, values))
    return files


def _partition_groups(
    data: pa.Table, partition_by: Sequence[str]
) -> list[tuple[dict[str, str | None], pa.Table]]:
    if not partition_by:
        return [({}, data)]
    keys = data.select(list(partition_by)).group_by(list(partition_by)).aggregate([]).to_pylist()
    groups = []
    for key in keys:
        mask = None
        for col in partition_by:
            value = key[col]
            cond = (
                pc.is_null(data.column(col))
                if value is None
                else pc.equal(data.column(col), pa.scalar(value, data.schema.field(col).type))
            )
            cond = pc.fill_null(cond, False)
            mask = cond if mask is None else pc.and_(mask, cond)
        groups.append(
            ({c: partition_value_string(key[c]) for c in partition_by}, data.filter(mask))
        )
    return groups


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
            referenced = set(snapshot.files.column("path").to_pylist()) | set(
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
