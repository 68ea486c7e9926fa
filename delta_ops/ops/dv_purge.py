"""Purging: rewrite data files that carry deletion vectors without their deleted rows (Delta's
`REORG TABLE ... APPLY (PURGE)`), so a delete asked for privacy really leaves the data files.
The purge operation (`delta_ops.ops.purge`) runs it, and drop-feature to take deletion vectors
out of a table.

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

from dataclasses import dataclass, field
from typing import Any

import pyarrow.compute as pc

from delta_ops import clock
from delta_ops.errors import InvalidValue
from delta_ops.ops.engines import LOCAL, Engine
from delta_ops.ops.operation import (
    EnginePlan,
    Timed,
    timed,
)
from delta_ops.ops.results import fields_data
from delta_ops.protocol.features import Access
from delta_ops.table.parquet_format import DEFAULT_FORMAT, ParquetFormat
from delta_ops.table.snapshot import Snapshot


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
class PurgePlan(EnginePlan):
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
    #: the codec and row-group size of the files written
    parquet: ParquetFormat = field(default=DEFAULT_FORMAT, repr=False, compare=False)

    @property
    def nothing_to_do(self) -> bool:
        return not self.files

    @property
    def idle_reason(self) -> str:
        """Why the plan has nothing to do (when it has nothing to do)."""
        return "no file has a deletion vector to purge"

    def to_dict(self) -> dict[str, Any]:
        return fields_data(
            self,
            num_files=len(self.files),
            engine=self.engine.name,
            parquet=self.parquet.to_dict(),
        )


@dataclass(frozen=True)
class PurgeResult(Timed):
    """What a purge did."""

    table: str
    version: int | None  # the commit, None when nothing was rewritten
    files_rewritten: int
    files_written: tuple[str, ...]
    rows_dropped: int
    rows_kept: int
    bytes_written: int
    erased_by_vacuum_after_ms: int

    def to_dict(self) -> dict[str, Any]:
        return fields_data(self)


def plan_purge(
    snapshot: Snapshot,
    *,
    min_deleted_ratio: float = 0.0,
    engine: Engine = LOCAL,
    parquet: ParquetFormat = DEFAULT_FORMAT,
) -> PurgePlan:
    """Choose the files with deletion vectors whose deleted share is at least
    `min_deleted_ratio` (0: every file with a deletion vector); `engine` rewrites them
    (``local``, or ``spark``: one task per file) in the `parquet` format."""
    if not 0.0 <= min_deleted_ratio <= 1.0:
        raise InvalidValue(
            f"--min-deleted-ratio {min_deleted_ratio}: a share of rows, from 0 to 1 (0.1 = 10%)"
        )
    snapshot.protocol.check_allows(Access.REWRITE)
    files = snapshot.file_index  # the counts come from the stats, read for them alone
    chosen: list[FileToPurge] = []
    if files.num_rows:
        has_dv = pc.is_valid(files.column("deletionVector"))
        with_dv = files.filter(has_dv)
        counts = snapshot.record_counts.filter(has_dv).to_pylist()
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
        engine=engine,
        parquet=parquet,
    )


@timed
def execute_purge(plan: PurgePlan) -> PurgeResult:
    """Rewrite the plan's files and commit them as one version (see the module doc)."""
    snapshot = plan.snapshot
    if plan.nothing_to_do:
        return PurgeResult(plan.table, None, 0, (), 0, 0, 0, plan.erased_by_vacuum_after_ms)
    # start-up cost: the rewriting stack (parquet writer, transaction) is loaded by the
    # commands that write, not by every command that imports the registry or plans
    from delta_ops.ops.rewrite import Rewriter, RewriteUnit, live_file_rows, rewrite_with_removes

    rows = live_file_rows(snapshot, {f.path for f in plan.files})
    rewriter = Rewriter(snapshot, rows, parquet=plan.parquet)
    units = [
        RewriteUnit(
            (row,),
            rewriter.directory_of(row),
            row["partitionValues"] or {},
            keep={k: row.get(k) for k in ("tags", "clusteringProvider")},
        )
        for row in rows
    ]
    written, removes = rewrite_with_removes(rewriter, units, plan.engine, "purge: rewriting")
    kept_total = sum(new.rows for new in written)
    bytes_total = sum(int(new.add["size"]) for new in written)
    dropped_total = sum(int((row["deletionVector"] or {}).get("cardinality") or 0) for row in rows)
    version = rewriter.commit(
        "REORG",
        {"predicate": "[]", "applyPurge": True},
        removes,
        [new.add for new in written],
        {
            "numRemovedFiles": len(rows),
            "numAddedFiles": len(rows),
            "numDeletionVectorsRemoved": len(rows),
            "numRowsDropped": dropped_total,
        },
    )
    return PurgeResult(
        table=plan.table,
        version=version,
        files_rewritten=len(rows),
        files_written=tuple(new.add["path"] for new in written),
        rows_dropped=dropped_total,
        rows_kept=kept_total,
        bytes_written=bytes_total,
        erased_by_vacuum_after_ms=plan.erased_by_vacuum_after_ms,
    )
