"""Purge: rewrite data files that carry deletion vectors without their deleted rows (Delta's
`REORG TABLE ... APPLY (PURGE)`), so a delete asked for privacy really leaves the data files.

    plan = plan_purge(load_snapshot(path), min_deleted_ratio=0.0)   # pure: which files, why
    result = execute_purge(plan)

A deleted row stays in its parquet file, hidden by the file's deletion vector, until the file
is rewritten. Each chosen file is read as stored (physical columns, so column mapping and field
ids carry over), its deleted rows dropped, and written as a new file with fresh statistics and no
deletion vector. One commit removes the old files and adds the new ones with
``dataChange=false`` (readers see the same rows). On a table with row tracking every kept row
keeps its row id and row commit version: they are written into the materialized columns the
table properties name (named first, in the same commit, where the table has no names yet).
The old files are then ordinary tombstones: a vacuum once `delta.deletedFileRetentionDuration`
has passed erases the rows from storage (`plan.erased_by_vacuum_after_ms`).

A concurrent writer that removed a chosen file, or gave it a new deletion vector, makes the
commit conflict; the new files are deleted again and the purge can be re-run.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from delta_ops import clock
from delta_ops.errors import DeltaOpsError, InvalidValue
from delta_ops.log.actions import file_rows_as_actions
from delta_ops.ops import progress
from delta_ops.ops.cleanup import iso
from delta_ops.ops.results import fields_data
from delta_ops.protocol.deletion_vectors import DeletionVectorDescriptor, load_deletion_vector
from delta_ops.protocol.features import Operation
from delta_ops.protocol.properties import (
    MATERIALIZED_ROW_COMMIT_VERSION_COLUMN_NAME,
    MATERIALIZED_ROW_ID_COLUMN_NAME,
)
from delta_ops.protocol.row_tracking import materialized_column_names
from delta_ops.protocol.stats import stats_json_from_parquet_file
from delta_ops.storage import Storage
from delta_ops.table.snapshot import Snapshot, file_num_records
from delta_ops.table.transaction import Transaction
from delta_ops.table.writer import log_path

_FILE_FIELDS = (
    "path",
    "partitionValues",
    "size",
    "stats",
    "tags",
    "deletionVector",
    "baseRowId",
    "defaultRowCommitVersion",
    "clusteringProvider",
)


@dataclass(frozen=True)
class FileToPurge:
    """A live file with a deletion vector: its rows, how many are deleted."""

    path: str
    size: int
    num_records: int | None
    num_deleted: int

    @property
    def deleted_ratio(self) -> float | None:
        return self.num_deleted / self.num_records if self.num_records else None

    def to_dict(self) -> dict[str, Any]:
        return fields_data(self, deleted_ratio=self.deleted_ratio)


@dataclass(frozen=True)
class PurgePlan:
    """Which files to rewrite, and when a vacuum may erase the old ones."""

    table: str
    version: int
    min_deleted_ratio: float
    files: tuple[FileToPurge, ...]
    rows_to_drop: int
    bytes_to_rewrite: int
    erased_by_vacuum_after_ms: int  # the old files' earliest vacuum (now + file retention)
    row_tracking: bool
    snapshot: Snapshot = field(repr=False, compare=False)

    @property
    def nothing_to_do(self) -> bool:
        return not self.files

    def to_dict(self) -> dict[str, Any]:
        return fields_data(self, num_files=len(self.files))


@dataclass(frozen=True)
class PurgeResult:
    """What a purge did."""

    table: str
    version: int | None  # the commit, None when nothing was rewritten
    files_rewritten: int
    files_written: tuple[str, ...]
    rows_dropped: int
    rows_kept: int
    bytes_written: int
    erased_by_vacuum_after_ms: int
    duration_ms: int

    def to_dict(self) -> dict[str, Any]:
        return fields_data(self)


def plan_purge(snapshot: Snapshot, *, min_deleted_ratio: float = 0.0) -> PurgePlan:
    """Choose the files with deletion vectors whose deleted share is at least
    `min_deleted_ratio` (0: every file with a deletion vector)."""
    if not 0.0 <= min_deleted_ratio <= 1.0:
        raise InvalidValue(
            f"--min-deleted-ratio {min_deleted_ratio}: a share of rows, from 0 to 1 (0.1 = 10%)"
        )
    snapshot.protocol.check_allows(Operation.REWRITE)
    files = snapshot.files
    chosen: list[FileToPurge] = []
    if files.num_rows:
        with_dv = files.filter(pc.is_valid(files.column("deletionVector")))
        counts = file_num_records(with_dv).to_pylist()
        dvs = with_dv.column("deletionVector").to_pylist()
        for path, size, n, dv in zip(
            with_dv.column("path").to_pylist(),
            with_dv.column("size").to_pylist(),
            counts,
            dvs,
            strict=True,
        ):
            deleted = int(dv.get("cardinality") or 0)
            item = FileToPurge(path, int(size or 0), n, deleted)
            ratio = item.deleted_ratio
            if deleted and (ratio is None or ratio >= min_deleted_ratio):
                chosen.append(item)
    now = clock.now_ms()
    return PurgePlan(
        table=snapshot.storage.url,
        version=snapshot.version,
        min_deleted_ratio=min_deleted_ratio,
        files=tuple(sorted(chosen, key=lambda f: f.path)),
        rows_to_drop=sum(f.num_deleted for f in chosen),
        bytes_to_rewrite=sum(f.size for f in chosen),
        erased_by_vacuum_after_ms=now + snapshot.properties.deleted_file_retention_ms,
        row_tracking=snapshot.protocol.supports("rowTracking"),
        snapshot=snapshot,
    )


def execute_purge(plan: PurgePlan) -> PurgeResult:
    """Rewrite the plan's files and commit them as one version (see the module doc)."""
    started = time.monotonic()
    snapshot = plan.snapshot
    storage = snapshot.storage
    if plan.nothing_to_do:
        return PurgeResult(plan.table, None, 0, (), 0, 0, 0, plan.erased_by_vacuum_after_ms, 0)
    wanted = {f.path for f in plan.files}
    rows = [
        r for r in file_rows_as_actions(snapshot.files, columns=_FILE_FIELDS) if r["path"] in wanted
    ]
    config = dict(snapshot.metadata.configuration)
    new_metadata = None
    if plan.row_tracking and any(r.get("baseRowId") is not None for r in rows):
        names = materialized_column_names(config, _physical_column_names(snapshot))
        if any(config.get(k) != v for k, v in names.items()):
            # the table has no materialized column names yet: name them in this commit
            config.update(names)
            new_metadata = {**snapshot.metadata.to_action(), "configuration": config}
    row_id_column = config.get(MATERIALIZED_ROW_ID_COLUMN_NAME) if plan.row_tracking else None
    commit_version_column = (
        config.get(MATERIALIZED_ROW_COMMIT_VERSION_COLUMN_NAME) if plan.row_tracking else None
    )
    now = clock.now_ms()
    written: list[str] = []
    actions: list[dict[str, Any]] = []
    kept_total = dropped_total = bytes_total = 0
    try:
        with progress.task(
            "purge: rewriting", files=len(rows), bytes=sum(int(r["size"] or 0) for r in rows)
        ) as task:
            for row in rows:
                add, kept, dropped = _rewrite(
                    storage, snapshot, row, now, row_id_column, commit_version_column
                )
                written.append(add["path"])
                actions.append({"remove": _remove_of(row, now)})
                actions.append({"add": add})
                kept_total += kept
                dropped_total += dropped
                bytes_total += int(add["size"])
                task.advance(files=1, bytes=int(row["size"] or 0))
        txn = Transaction(
            snapshot,
            operation="REORG",
            parameters={"predicate": "[]", "applyPurge": True},
            purpose=Operation.REWRITE,
        )
        if new_metadata is not None:
            txn.add_action({"metaData": new_metadata})
        txn.read_files(wanted)
        txn.add_actions(actions)
        txn.metrics = {
            "numRemovedFiles": len(rows),
            "numAddedFiles": len(written),
            "numDeletionVectorsRemoved": len(rows),
            "numRowsDropped": dropped_total,
        }
        version = txn.commit().version
    except BaseException:
        storage.delete_many([storage.relative_inside_root(p) for p in written])
        raise
    return PurgeResult(
        table=plan.table,
        version=version,
        files_rewritten=len(rows),
        files_written=tuple(written),
        rows_dropped=dropped_total,
        rows_kept=kept_total,
        bytes_written=bytes_total,
        erased_by_vacuum_after_ms=plan.erased_by_vacuum_after_ms,
        duration_ms=int((time.monotonic() - started) * 1000),
    )


def _physical_column_names(snapshot: Snapshot) -> set[str]:
    """Every top-level column name, logical and physical, lower-cased (names to avoid)."""
    fields = snapshot.schema.fields
    return {f.physical_name.lower() for f in fields} | {f.name.lower() for f in fields}


def _rewrite(
    storage: Storage,
    snapshot: Snapshot,
    row: dict[str, Any],
    now: int,
    row_id_column: str | None,
    commit_version_column: str | None,
) -> tuple[dict[str, Any], int, int]:
    """Write `row`'s file without its deleted rows; the new add body, rows kept and dropped."""
    source = storage.table_path(row["path"])
    try:
        with storage.open_input(source) as handle:
            data = pq.read_table(handle)
    except (OSError, pa.ArrowException) as exc:
        raise DeltaOpsError(f"{row['path']}: unreadable data file: {exc}") from exc
    n = data.num_rows
    descriptor = DeletionVectorDescriptor.from_dict(
        {k: v for k, v in row["deletionVector"].items() if v is not None}
    )
    deleted = np.fromiter(
        load_deletion_vector(descriptor, storage.root, storage.reader), dtype=np.int64
    )
    keep = np.ones(n, dtype=bool)
    keep[deleted[deleted < n]] = False
    if row_id_column and row.get("baseRowId") is not None:
        ids = pa.array(int(row["baseRowId"]) + np.arange(n, dtype=np.int64))
        data = _with_materialized(data, row_id_column, ids)
    if commit_version_column and row.get("defaultRowCommitVersion") is not None:
        versions = pa.array(np.full(n, int(row["defaultRowCommitVersion"]), dtype=np.int64))
        data = _with_materialized(data, commit_version_column, versions)
    data = data.filter(pa.array(keep))
    directory = row["path"].rsplit("/", 1)[0] + "/" if "/" in row["path"] else ""
    relative_dir = storage.relative_inside_root(directory) if directory else ""
    name = f"part-00000-{uuid.uuid4()}.c000.snappy.parquet"
    relative = f"{relative_dir.rstrip('/')}/{name}" if relative_dir else name
    full = storage.join(relative)

    def write(sink: Any) -> None:
        pq.write_table(data, sink, compression="snappy")

    created, size = storage.create_new(full, write)
    if not created:
        raise DeltaOpsError(f"{relative}: a file of that name appeared while purging")
    props = snapshot.properties
    stats = stats_json_from_parquet_file(
        storage.reader,
        full,
        snapshot.schema,
        snapshot.partition_columns,
        num_indexed_cols=props.data_skipping_num_indexed_cols,
        stats_columns=props.data_skipping_stats_columns,
        column_mapping=props.column_mapping_mode != "none",
        tight_bounds=True if snapshot.protocol.supports("deletionVectors") else None,
    )
    add = {
        "path": log_path(relative),
        "partitionValues": dict(row["partitionValues"] or {}),
        "size": size,
        "modificationTime": now,
        "dataChange": False,
        "stats": stats,
    }
    for kept_field in ("tags", "clusteringProvider"):
        if row.get(kept_field):
            add[kept_field] = row[kept_field]
    return add, int(keep.sum()), n - int(keep.sum())


def _with_materialized(data: pa.Table, column: str, fallback: pa.Array) -> pa.Table:
    """`data` with `column` holding its stored values where present, else `fallback`."""
    if column in data.column_names:
        stored = data.column(column).combine_chunks().cast(pa.int64())
        values = pc.if_else(pc.is_valid(stored), stored, fallback)
        return data.set_column(data.column_names.index(column), column, values)
    return data.append_column(pa.field(column, pa.int64(), nullable=True), fallback)


def _remove_of(row: dict[str, Any], now: int) -> dict[str, Any]:
    remove = {
        "path": row["path"],
        "deletionTimestamp": now,
        "dataChange": False,
        "extendedFileMetadata": True,
        "partitionValues": dict(row["partitionValues"] or {}),
        "size": row["size"],
        "deletionVector": row["deletionVector"],
    }
    for kept_field in ("stats", "tags", "baseRowId", "defaultRowCommitVersion"):
        if row.get(kept_field) is not None:
            remove[kept_field] = row[kept_field]
    return remove


def describe_plan(plan: PurgePlan) -> str:
    if plan.nothing_to_do:
        return "nothing to purge: no file has a deletion vector" + (
            f" with at least {plan.min_deleted_ratio:.0%} of its rows deleted"
            if plan.min_deleted_ratio
            else ""
        )
    return (
        f"would rewrite {len(plan.files):,} files ({plan.bytes_to_rewrite:,} bytes) without"
        f" {plan.rows_to_drop:,} deleted rows; a vacuum after"
        f" {iso(plan.erased_by_vacuum_after_ms)} erases them from storage"
    )


def describe_result(result: PurgeResult) -> str:
    if result.version is None:
        return "nothing to purge"
    return (
        f"rewrote {result.files_rewritten:,} files at version {result.version}:"
        f" {result.rows_dropped:,} deleted rows dropped, {result.rows_kept:,} kept;"
        f" a vacuum after {iso(result.erased_by_vacuum_after_ms)} erases the old files"
    )


__all__ = [
    "FileToPurge",
    "PurgePlan",
    "PurgeResult",
    "describe_plan",
    "describe_result",
    "execute_purge",
    "plan_purge",
]
