"""Enable row tracking on an existing table, with a resumable backfill (and read row ids).

Plan: what the table lacks — the `rowTracking` feature (protocol upgrade), row ids on live
files (backfill batches), the `delta.enableRowTracking` property — and how many files lack
`numRecords` (counted from their parquet footers instead of failing as Delta Spark does).

Execute, each step one commit through `Transaction`, so a crash after any commit leaves
a valid table and a re-run continues where it stopped:

1. ``UPGRADE PROTOCOL`` when `rowTracking` is not supported: writer 7 with `rowTracking`,
   `domainMetadata` and every feature the old versions implied, reader version unchanged. From
   then on every writer (ours included) assigns row ids to new files, so the backfill is bounded.
2. ``ROW TRACKING BACKFILL`` batches (22,000 files by default): the live files without
   `baseRowId`, re-added unchanged with `dataChange=false`; the transaction assigns `baseRowId`
   from the high-water mark upward, `defaultRowCommitVersion` = the commit's version, and moves
   the `delta.rowTracking` domain. A concurrent commit that removed or re-added a file of the
   batch drops that file from the batch (it is gone, or picked up again by the next batch).
3. ``SET TBLPROPERTIES``: only after checking that every live file has a `baseRowId`, set
   `delta.enableRowTracking=true` and the materialized column names (kept when already set).

For example:

    plan = plan_enable_row_tracking(load_snapshot(path))
    result = execute_enable_row_tracking(plan)
    ids = row_ids(load_snapshot(path))      # path, row_index, row_id of every live row
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from delta_ops.errors import (
    ConcurrentModification,
    DataFileError,
    InvalidTableProperty,
    InvalidValue,
    OperationRefused,
)
from delta_ops.log.actions import ADD_FIELDS, file_rows_as_actions
from delta_ops.ops.engines import LOCAL, Engine, Spread
from delta_ops.ops.operation import (
    ENGINE_OPTION,
    EnginePlan,
    Operation,
    Option,
    OptionKind,
    Timed,
    timed,
)
from delta_ops.ops.progress import Task
from delta_ops.ops.progress import task as progress_task
from delta_ops.ops.results import fields_data
from delta_ops.protocol.deletion_vectors import DeletionVectorDescriptor, load_deletion_vector
from delta_ops.protocol.features import Access, Protocol
from delta_ops.protocol.num_records import num_records_in_stats
from delta_ops.protocol.row_tracking import (
    COMMIT_VERSION_COLUMN,
    ENABLE,
    ROW_ID_COLUMN,
    materialized_column_names,
)
from delta_ops.protocol.schema import physical_name
from delta_ops.protocol.stats import num_records_from_parquet_file
from delta_ops.storage import Storage
from delta_ops.table.snapshot import Snapshot, file_num_records, load_snapshot
from delta_ops.table.transaction import Transaction, WinningCommit

logger = logging.getLogger(__name__)

DEFAULT_BATCH_FILES = 22_000
FOOTER_BATCH = 200  # parquet footers read by one task, where tasks are scheduled (Spark)


@dataclass(frozen=True)
class RowTrackingPlan(EnginePlan):
    table: str
    already_enabled: bool
    upgrade_protocol: bool
    new_protocol: dict[str, Any] | None
    files_to_backfill: int
    files_without_num_records: int
    batch_files: int
    num_batches: int
    set_property: bool
    snapshot: Snapshot = field(repr=False, compare=False)

    @property
    def nothing_to_do(self) -> bool:
        return not (self.upgrade_protocol or self.files_to_backfill or self.set_property)

    @property
    def idle_reason(self) -> str:
        """Why the plan has nothing to do (when it has nothing to do)."""
        return "row tracking is already enabled"

    def to_dict(self) -> dict[str, Any]:
        return fields_data(self, engine=self.engine.name)


@dataclass(frozen=True)
class RowTrackingResult(Timed):
    table: str
    already_enabled: bool
    protocol_upgrade_version: int | None
    backfill_commits: tuple[int, ...]
    files_backfilled: int
    files_counted_from_footer: int
    property_commit_version: int | None
    row_id_high_water_mark: int | None

    def to_dict(self) -> dict[str, Any]:
        return fields_data(self)


def _missing_row_ids(snapshot: Snapshot) -> pa.Table:
    files = snapshot.files
    return files.filter(pc.is_null(files.column("baseRowId"))) if files.num_rows else files


def plan_enable_row_tracking(
    snapshot: Snapshot, *, batch_files: int = DEFAULT_BATCH_FILES, engine: Engine = LOCAL
) -> RowTrackingPlan:
    """What enabling row tracking on `snapshot`'s table takes; `engine` reads the footers of
    files whose stats lack `numRecords` (local threads, or Spark tasks)."""
    if batch_files < 1:
        raise InvalidValue(f"--batch-files must be at least 1, got {batch_files}")
    snapshot.protocol.check_allows(Access.ENABLE_ROW_TRACKING)
    props = snapshot.properties
    if props.row_tracking_suspended:
        raise OperationRefused(
            f"{snapshot.storage.url}: row tracking is suspended (delta.rowTrackingSuspended=true)"
        )
    supported = snapshot.protocol.supports("rowTracking")
    new_protocol = None if supported else snapshot.protocol.with_features("rowTracking").to_action()
    missing = _missing_row_ids(snapshot)
    without_counts = 0
    if missing.num_rows:
        lacking = missing.filter(pc.is_null(file_num_records(missing)))
        without_counts = lacking.num_rows
        for path in lacking.column("path").to_pylist():
            if not snapshot.storage.exists(snapshot.storage.table_path(path)):
                raise DataFileError(
                    f"{snapshot.storage.url}: {path} has no numRecords in its stats and the data file is "
                    "missing, so its rows cannot be counted for row ids; nothing was changed"
                )
    enabled = (
        supported and props.enable_row_tracking and missing.num_rows == 0 and _names_set(snapshot)
    )
    return RowTrackingPlan(
        table=snapshot.storage.url,
        already_enabled=enabled,
        upgrade_protocol=not supported,
        new_protocol=new_protocol,
        files_to_backfill=missing.num_rows,
        files_without_num_records=without_counts,
        batch_files=batch_files,
        num_batches=-(-missing.num_rows // batch_files),
        set_property=not enabled,
        snapshot=snapshot,
        engine=engine,
    )


def _names_set(snapshot: Snapshot) -> bool:
    config = snapshot.metadata.configuration
    return bool(config.get(ROW_ID_COLUMN)) and bool(config.get(COMMIT_VERSION_COLUMN))


@timed
def execute_enable_row_tracking(
    plan: RowTrackingPlan, *, progress: Callable[[str], None] | None = None
) -> RowTrackingResult:
    """Run the plan: protocol upgrade, backfill batches, then the property commit.

    The table state is the plan's: every commit since it was loaded is read once, by the
    commit it raced (conflict detection), and the files such commits removed or re-added leave
    the backfill. Before the property commit a fresh load proves every live file has row ids;
    files added meanwhile by writers that did not know row tracking are backfilled then.
    """
    storage = plan.snapshot.storage
    say = progress or (lambda message: logger.info("%s: %s", storage.url, message))
    if plan.nothing_to_do:
        return RowTrackingResult(
            plan.table, True, None, (), 0, 0, None, plan.snapshot.row_id_high_water_mark
        )
    backfill = _Backfill(storage, plan.batch_files, say, plan.engine)
    snapshot = plan.snapshot
    base = _Base(snapshot.version, snapshot.row_id_high_water_mark)
    upgrade_version = None
    if plan.upgrade_protocol:
        upgrade_version, snapshot, base = _upgrade_protocol(snapshot, backfill)
        if upgrade_version is not None:
            say(f"protocol upgraded for row tracking at version {upgrade_version}")
    with progress_task("row tracking: backfilling", files=plan.files_to_backfill) as task:
        backfill.task = task
        base = backfill.run(snapshot, base)
        property_version, high_water_mark = _enable_property(storage, backfill)
    return RowTrackingResult(
        table=plan.table,
        already_enabled=False,
        protocol_upgrade_version=upgrade_version,
        backfill_commits=tuple(backfill.commits),
        files_backfilled=backfill.backfilled,
        files_counted_from_footer=backfill.counted,
        property_commit_version=property_version,
        row_id_high_water_mark=high_water_mark,
    )


@dataclass(frozen=True)
class _Base:
    """The version the next commit follows (every commit up to it examined) and the row-id
    high-water mark as of it."""

    version: int
    high_water_mark: int | None


def _upgrade_protocol(
    snapshot: Snapshot, backfill: _Backfill
) -> tuple[int | None, Snapshot, _Base]:
    """Commit the protocol upgrade on top of the plan's state; commits raced on the way are
    remembered for the backfill. A concurrent run that upgraded first: load and go on."""
    protocol = snapshot.protocol.with_features("rowTracking").to_action()
    txn = Transaction(
        snapshot,
        operation="UPGRADE PROTOCOL",
        parameters={"newProtocol": protocol},
        purpose=Access.ENABLE_ROW_TRACKING,
        on_conflict=backfill.remember,
    )
    txn.add_action({"protocol": protocol})
    try:
        result = txn.commit()
    except ConcurrentModification:
        fresh = load_snapshot(snapshot.storage)
        if not fresh.protocol.supports("rowTracking"):
            raise
        backfill.forget_raced()  # the fresh state already shows them
        return None, fresh, _Base(fresh.version, fresh.row_id_high_water_mark)
    upgraded = copy.copy(snapshot)  # the plan's state under the protocol just committed, so
    upgraded.protocol = Protocol.from_action(protocol)  # backfill commits assign row ids
    return result.version, upgraded, _Base(result.version, result.row_id_high_water_mark)


def _with_num_records(
    storage: Storage, bodies: list[dict[str, Any]], engine: Engine
) -> tuple[list[dict[str, Any]], int]:
    """The add bodies with `numRecords` in their stats: counted from the parquet footers
    (by the engine, in parallel) for the files whose stats lack it; and how many were."""
    lacking = [i for i, b in enumerate(bodies) if num_records_in_stats(b.get("stats")) is None]
    if not lacking:
        return bodies, 0
    counts = engine.map_ordered(
        partial(num_records_from_parquet_file, storage.reader),
        [storage.table_path(bodies[i]["path"]) for i in lacking],
        spread=Spread.THREADS,  # footer reads wait on storage
        batch=FOOTER_BATCH,
    )
    out = list(bodies)
    for i, count in zip(lacking, counts, strict=True):
        stats = json.loads(out[i]["stats"]) if out[i].get("stats") else {}
        stats = stats if isinstance(stats, dict) else {}
        stats["numRecords"] = count
        out[i] = {**out[i], "stats": json.dumps(stats, separators=(",", ":"))}
    return out, len(lacking)


class _Backfill:
    """Row-id backfill commits, `batch_files` files each, on top of a known base.

    Each batch commits right after the previous one (`known_version`, with its row-id mark),
    and every commit another writer lands meanwhile is seen exactly once, by the commit it
    raced: the files it removed or re-added (say, with a new deletion vector) leave that batch
    and every later one, so no batch re-adds a file that is gone or out of date. Files others
    add after the protocol upgrade get row ids from their own writers."""

    def __init__(
        self,
        storage: Storage,
        batch_files: int,
        say: Callable[[str], None],
        engine: Engine = LOCAL,
    ) -> None:
        self.storage = storage
        self.engine = engine
        self.batch_files = batch_files
        self.say = say
        self.task: Task | None = None
        self.changed_by_others: set[str] = set()
        self.commits: list[int] = []
        self.backfilled = 0
        self.counted = 0
        self._batch_id = 0

    def remember(self, txn: Transaction, winner: WinningCommit) -> set[str]:
        """Conflict hook: note what `winner` touched; files of this batch it touched leave
        the batch (the set returned, which the default checks then ignore)."""
        self.changed_by_others.update(winner.touched_paths)
        ours = {a["add"]["path"] for a in txn.actions if "add" in a}
        lost = ours & winner.touched_paths
        if lost:
            txn.actions = [a for a in txn.actions if not ("add" in a and a["add"]["path"] in lost)]
            txn.files_read -= lost
            logger.info(
                "%s: backfill batch: %d file(s) changed concurrently, dropped from this batch",
                self.storage.url,
                len(lost),
            )
        return lost

    def forget_raced(self) -> None:
        self.changed_by_others.clear()

    def run(self, snapshot: Snapshot, base: _Base) -> _Base:
        """Backfill every file of `snapshot` without row ids; the base after the last batch."""
        missing = _missing_row_ids(snapshot).sort_by("path")
        for start in range(0, missing.num_rows, self.batch_files):
            batch = missing.slice(start, self.batch_files)
            bodies = [
                {**body, "dataChange": False}
                for body in file_rows_as_actions(batch, columns=ADD_FIELDS)
                if body["path"] not in self.changed_by_others
            ]
            bodies, counted = _with_num_records(self.storage, bodies, self.engine)
            self.counted += counted
            if not bodies:
                continue
            txn = Transaction(
                snapshot,
                operation="ROW TRACKING BACKFILL",
                parameters={"batchId": str(self._batch_id)},
                on_conflict=self.remember,
                purpose=Access.ENABLE_ROW_TRACKING,
                known_version=base.version,
                known_row_id_high_water_mark=base.high_water_mark,
            )
            txn.read_files(b["path"] for b in bodies)
            txn.add_actions({"add": b} for b in bodies)
            result = txn.commit()
            base = _Base(result.version, result.row_id_high_water_mark)
            done = sum(1 for a in txn.actions if "add" in a)
            self.commits.append(result.version)
            self.backfilled += done
            if self.task is not None:
                self.task.advance(files=done)
            self._batch_id += 1
            left = missing.num_rows - start - batch.num_rows
            self.say(
                f"backfill batch {self._batch_id}: {done} files at version {result.version} "
                f"({left} left)"
            )
        return base


def _column_names(snapshot: Snapshot) -> set[str]:
    names = set()
    for f in snapshot.schema.fields:
        names.add(f.name.lower())
        names.add(physical_name(f).lower())
    return names


def _enable_property(
    storage: Storage, backfill: _Backfill, attempts: int = 5
) -> tuple[int | None, int | None]:
    """Set delta.enableRowTracking once every live file has row ids (checked on a fresh load;
    files a writer unaware of row tracking added meanwhile are backfilled first); the property
    commit's version (None when already set) and the row-id high-water mark."""
    for _ in range(attempts):
        snapshot = load_snapshot(storage)
        missing = _missing_row_ids(snapshot)
        if missing.num_rows:
            backfill.forget_raced()  # this load shows every commit so far
            backfill.run(snapshot, _Base(snapshot.version, snapshot.row_id_high_water_mark))
            continue
        config = dict(snapshot.metadata.configuration)
        if config.get(ENABLE, "").lower() == "true" and _names_set(snapshot):
            return None, snapshot.row_id_high_water_mark
        config[ENABLE] = "true"
        try:
            config.update(materialized_column_names(config, _column_names(snapshot)))
        except InvalidTableProperty as exc:
            raise InvalidTableProperty(
                exc.name, exc.value, f"{exc.reason} in {storage.url}"
            ) from exc
        metadata = {**snapshot.metadata.to_action(), "configuration": config}
        txn = Transaction(
            snapshot,
            operation="SET TBLPROPERTIES",
            parameters={"properties": {ENABLE: "true"}},
            purpose=Access.ENABLE_ROW_TRACKING,
        )
        txn.tags = {"rowTrackingEnablementOnly": "true"}
        txn.add_action({"metaData": metadata})
        try:
            committed = txn.commit()
            return committed.version, committed.row_id_high_water_mark
        except ConcurrentModification as exc:
            logger.info("%s: property commit lost a race (%s); checking again", storage.url, exc)
    raise ConcurrentModification(f"{storage.url}: could not set {ENABLE} after {attempts} attempts")


# ----------------------------------------------------------------------------- reading row ids
def row_ids(snapshot: Snapshot) -> pa.Table:
    """Stable row ids of every live row: (path, row_index, row_id), DV-deleted rows skipped.

    The materialized row-id column wins where a data file has it (non-null); otherwise the id
    is `baseRowId + row index`. Raises when a live file has no `baseRowId`.
    """
    storage = snapshot.storage
    materialized = snapshot.metadata.configuration.get(ROW_ID_COLUMN)
    counts = file_num_records(snapshot.files).to_pylist()
    parts = []
    for row, count in zip(
        snapshot.files.select(["path", "baseRowId", "deletionVector"]).to_pylist(), counts
    ):
        if row["baseRowId"] is None:
            raise OperationRefused(
                f"{storage.url}: {row['path']} has no baseRowId: row tracking is not backfilled"
            )
        full = storage.table_path(row["path"])
        n = count if count is not None else num_records_from_parquet_file(storage.reader, full)
        index = np.arange(n, dtype=np.int64)
        ids = row["baseRowId"] + index
        if materialized:
            ids = _with_materialized(storage, full, materialized, ids)
        keep = np.ones(n, dtype=bool)
        if row["deletionVector"] is not None:
            dv = DeletionVectorDescriptor.from_dict(
                {k: v for k, v in row["deletionVector"].items() if v is not None}
            )
            deleted = np.fromiter(
                load_deletion_vector(dv, storage.root, storage.reader), dtype=np.int64
            )
            keep[deleted[deleted < n]] = False
        parts.append(
            pa.table(
                {
                    "path": pa.array([row["path"]] * int(keep.sum()), pa.string()),
                    "row_index": index[keep],
                    "row_id": ids[keep],
                }
            )
        )
    if not parts:
        return pa.table(
            {
                "path": pa.array([], pa.string()),
                "row_index": pa.array([], pa.int64()),
                "row_id": pa.array([], pa.int64()),
            }
        )
    return pa.concat_tables(parts)


def _with_materialized(storage: Storage, full: str, column: str, ids: np.ndarray) -> np.ndarray:
    with storage.open_input(full) as f:
        pf = pq.ParquetFile(f)
        if column not in pf.schema_arrow.names:
            return ids
        values = pf.read(columns=[column]).column(0)
    mask = np.asarray(values.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    out = ids.copy()
    out[mask] = values.to_numpy(zero_copy_only=False)[mask]
    return out


def enable_row_tracking(
    table: str | Storage,
    *,
    batch_files: int = DEFAULT_BATCH_FILES,
    storage_options: dict[str, Any] | None = None,
) -> RowTrackingResult:
    """Load, plan and execute (the API behind `delta-ops enable-row-tracking`)."""
    snapshot = load_snapshot(table, storage_options=storage_options)
    return execute_enable_row_tracking(plan_enable_row_tracking(snapshot, batch_files=batch_files))


# ------------------------------------------------------------------------------ the operation
def describe_plan(plan: RowTrackingPlan) -> str:
    if plan.nothing_to_do:
        return "row tracking is already enabled: nothing to do"
    upgrade = "upgrade the protocol, " if plan.upgrade_protocol else ""
    return (
        f"would {upgrade}backfill {plan.files_to_backfill:,} files in {plan.num_batches}"
        f" batch(es) ({plan.files_without_num_records:,} counted from footers),"
        " then set delta.enableRowTracking=true"
    )


def describe_result(result: RowTrackingResult) -> str:
    if result.already_enabled:
        return "row tracking is already enabled: nothing to do"
    return (
        f"row tracking enabled: protocol upgrade at {result.protocol_upgrade_version},"
        f" {result.files_backfilled:,} files backfilled in commits"
        f" {list(result.backfill_commits)}, property set at {result.property_commit_version};"
        f" high-water mark {result.row_id_high_water_mark}"
    )


@dataclass(frozen=True)
class RowTrackingOptions:
    """The enable_row_tracking operation's options (see its `OPERATION`)."""

    batch_files: int = DEFAULT_BATCH_FILES
    engine: str = "local"


OPERATION: Operation[RowTrackingOptions, RowTrackingPlan, RowTrackingResult] = Operation(
    name="enable_row_tracking",
    needs=Access.ENABLE_ROW_TRACKING,
    help="upgrade the protocol, backfill row ids, enable row tracking",
    options=(
        Option(
            "batch_files",
            OptionKind.COUNT,
            "files per backfill commit",
            DEFAULT_BATCH_FILES,
        ),
        ENGINE_OPTION,
    ),
    options_type=RowTrackingOptions,
    plan_with=lambda snapshot, options, engine: plan_enable_row_tracking(
        snapshot, batch_files=options.batch_files, engine=engine
    ),
    execute_with=lambda plan, progress: execute_enable_row_tracking(plan, progress=progress),
    describe_plan=describe_plan,
    describe_result=describe_result,
    touched=lambda result: (result.files_backfilled, None),
)
