"""RECOMPUTE STATS: give live files the statistics the table asks for (Delta Spark's
`StatisticsCollection.recompute`, the `COMPUTE STATS` operation).

A file committed without stats (old writers, `CONVERT TO DELTA`, hand-made commits), or with
stats for fewer columns than `delta.dataSkippingNumIndexedCols` (default 32) or
`delta.dataSkippingStatsColumns` now ask for (a column added later, a property changed), can
be neither skipped by readers nor counted without opening it. `recompute-stats` computes each
such file's stats from the file itself and re-adds it, in one ``dataChange=false`` commit per
batch: the same path, partition values, size, modification time, deletion vector, tags and row
ids, only `stats` new.

    plan = plan_recompute_stats(load_snapshot(path))             # or columns=[("city",)]
    for f in plan.files: print(f.path, f.reason)                 # a dry run
    result = execute_recompute_stats(plan)

How the stats are computed (`delta_ops.protocol.stats`, the code delta-ops' writer uses):
from the parquet footer where its row-group statistics give a column's min, max and null count
(a few KB per file), else from the column's data, read one row group at a time (INT96
timestamps, files written without statistics, the null count of an array or map). Delta
Spark's rules: which columns, physical names under column mapping, nested fields, strings cut
to 32 characters (the max closed with ``U+FFFD``), timestamps in milliseconds (``...Z`` for
`timestamp`, no zone for `timestamp_ntz`).

Deletion vectors: the stats describe every row of the data file (`numRecords` is the physical
count, as the protocol requires), so a file carrying a deletion vector gets
``"tightBounds": false``: its min/max are wide bounds (still below and above every row
left), its null count means something only at 0 or at `numRecords`, which is what the protocol
asks of wide bounds. Files without a deletion vector on a table that supports them get
``"tightBounds": true``. (Delta Spark's recompute refuses tables with deletion vectors.)

Which files: those whose stats lack `numRecords`, cannot be parsed, or lack a column that the
table's stats columns include (in `nullCount`, or in `minValues` for a column with min/max);
arrays, maps and variants are not required (delta-rs writes none for them),
but a file recomputed gets theirs too. ``columns`` narrows the check to those columns (and
their fields); a file recomputed always gets stats for every column the table asks for.

Safety: each batch (`batch_files`, default 22,000) is one commit that only re-adds files, so a
crash at any write leaves the table as it was or with some batches done; a re-run finishes
(the files done no longer lack stats). A concurrent commit that removed or re-added a file of
the batch (say, a delete that gave it a deletion vector) drops that file from the batch: its
new state is kept, and a later run looks at it again.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from delta_ops.errors import ConcurrentModification, DataFileError, InvalidValue
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
from delta_ops.ops.progress import task as progress_task
from delta_ops.ops.results import fields_data
from delta_ops.protocol.features import Access
from delta_ops.protocol.properties import uniform_iceberg_note
from delta_ops.protocol.schema import (
    MIN_VALUES,
    NULL_COUNT,
    NUM_RECORDS,
    StatsColumn,
    StructType,
    parse_column_names,
    stats_columns_of,
)
from delta_ops.protocol.stats import stats_json_from_parquet_file
from delta_ops.protocol.units import format_bytes
from delta_ops.table.snapshot import Snapshot
from delta_ops.table.transaction import Transaction, WinningCommit

logger = logging.getLogger(__name__)

DEFAULT_BATCH_FILES = 22_000
FILES_PER_TASK = 200  # files whose stats one task computes, where tasks are scheduled (Spark)
NO_STATS = "no stats"
NO_NUM_RECORDS = "no numRecords"
UNREADABLE = "stats do not parse"
#: array, map and variant columns: stats only the data can give (see the module doc)
_NOT_REQUIRED_PRIMITIVES = frozenset({"variant"})


@dataclass(frozen=True)
class FileToRecompute:
    """A live file whose stats are missing or short, and why."""

    path: str  # as the log writes it
    reason: str  # "no stats", "no numRecords", "stats do not parse", or "lacks a, b.c"
    size: int
    deletion_vector: bool  # its stats will be wide bounds (tightBounds=false)


@dataclass(frozen=True)
class RecomputeStatsPlan(EnginePlan):
    table: str
    version: int
    num_files: int  # live files checked
    columns: tuple[str, ...]  # the columns the table's stats cover (logical, dotted)
    checked: tuple[str, ...]  # the columns a file must have stats for (`columns` option)
    files: tuple[FileToRecompute, ...]
    batch_files: int
    snapshot: Snapshot = field(repr=False, compare=False)

    @property
    def nothing_to_do(self) -> bool:
        return not self.files

    @property
    def idle_reason(self) -> str:
        """Why the plan has nothing to do (when it has nothing to do)."""
        what = ", ".join(self.checked) if self.checked else "numRecords"
        return f"all {self.num_files:,} live files have stats for {what}"

    @property
    def num_batches(self) -> int:
        return -(-len(self.files) // self.batch_files)

    def to_dict(self) -> dict[str, Any]:
        return fields_data(
            self,
            num_files_to_recompute=len(self.files),
            bytes_to_read=sum(f.size for f in self.files),
            num_batches=self.num_batches,
            engine=self.engine.name,
        )


@dataclass(frozen=True)
class RecomputeStatsResult(Timed):
    table: str
    versions: tuple[int, ...]  # one commit per batch
    files_recomputed: int
    files_skipped: int  # changed by a concurrent commit meanwhile: left for a later run

    def to_dict(self) -> dict[str, Any]:
        return fields_data(self)


# ------------------------------------------------------------------------------------ plan
def plan_recompute_stats(
    snapshot: Snapshot,
    *,
    columns: Sequence[Sequence[str]] | str | None = None,
    batch_files: int = DEFAULT_BATCH_FILES,
    engine: Engine = LOCAL,
) -> RecomputeStatsPlan:
    """The live files of `snapshot` whose stats lack `numRecords` or a column the table's
    stats columns include (only `columns`, name paths or ``"a, b.c"``, when given)."""
    if batch_files < 1:
        raise InvalidValue(f"--batch-files must be at least 1, got {batch_files}")
    snapshot.protocol.check_allows(Access.RECOMMIT)
    leaves = table_stats_columns(snapshot)
    wanted = _checked(snapshot, leaves, columns)
    required = [c for c in wanted if _required(c)]
    files = snapshot.files
    found: list[FileToRecompute] = []
    if files.num_rows:
        stats = files.column("stats").to_pylist()
        paths = files.column("path").to_pylist()
        sizes = files.column("size").to_pylist()
        dvs = pc.is_valid(files.column("deletionVector")).to_pylist()
        for path, text, size, dv in zip(paths, stats, sizes, dvs, strict=True):
            reason = _lacking(text, required)
            if reason is not None:
                found.append(FileToRecompute(path, reason, int(size or 0), bool(dv)))
    return RecomputeStatsPlan(
        table=snapshot.storage.url,
        version=snapshot.version,
        num_files=files.num_rows,
        columns=tuple(c.name for c in leaves),
        checked=tuple(c.name for c in wanted),
        files=tuple(sorted(found, key=lambda f: f.path)),
        batch_files=batch_files,
        snapshot=snapshot,
        engine=engine,
    )


def table_stats_columns(snapshot: Snapshot) -> list[StatsColumn]:
    """The leaf columns the table's stats cover (its data-skipping properties)."""
    props = snapshot.properties
    return stats_columns_of(
        snapshot.schema,
        snapshot.partition_columns,
        num_indexed_cols=props.data_skipping_num_indexed_cols,
        stats_columns=props.data_skipping_stats_columns,
    )


def _checked(
    snapshot: Snapshot,
    leaves: list[StatsColumn],
    columns: Sequence[Sequence[str]] | str | None,
) -> list[StatsColumn]:
    """The stats columns the plan checks: all of them, or those `columns` names (a struct
    names its fields); a name that gets no stats is refused, saying why."""
    if columns is None:
        return leaves
    paths = parse_column_names(columns) if isinstance(columns, str) else [tuple(c) for c in columns]
    if not paths:
        raise InvalidValue("--columns: name at least one column, e.g. --columns a,b.c")
    chosen: list[StatsColumn] = []
    for path in paths:
        lowered = tuple(p.lower() for p in path)
        matches = [
            c for c in leaves if tuple(p.lower() for p in c.logical[: len(lowered)]) == lowered
        ]
        if not matches:
            raise InvalidValue(f"--columns: {_why_no_stats(snapshot, path)}")
        chosen.extend(c for c in matches if c not in chosen)
    return chosen


def _why_no_stats(snapshot: Snapshot, path: tuple[str, ...]) -> str:
    name = ".".join(path)
    top = path[0].lower()
    if top in {c.lower() for c in snapshot.partition_columns}:
        return (
            f"{name} is a partition column: its values are in the log, files have no stats for it"
        )
    fields: StructType | None = snapshot.schema
    for part in path:
        by_name = {f.name.lower(): f for f in fields.fields} if fields is not None else {}
        f = by_name.get(part.lower())
        if f is None:
            return f"{snapshot.storage.url} has no column {name}"
        fields = f.type if isinstance(f.type, StructType) else None
    props = snapshot.properties
    rule = (
        "delta.dataSkippingStatsColumns does not name it"
        if props.data_skipping_stats_columns is not None
        else f"it is past the first {props.data_skipping_num_indexed_cols} columns"
        " (delta.dataSkippingNumIndexedCols)"
    )
    return f"{name} gets no stats: {rule}; change that table property first"


def _required(column: StatsColumn) -> bool:
    """Whether a file's stats must name `column` (arrays, maps, variants need not)."""
    return isinstance(column.type, str) and column.type not in _NOT_REQUIRED_PRIMITIVES


def _lacking(text: str | None, required: list[StatsColumn]) -> str | None:
    """Why stats text `text` is short of `required`, None when it is not."""
    if not text:
        return NO_STATS
    try:
        stats = json.loads(text)
    except ValueError:
        return UNREADABLE
    if not isinstance(stats, dict):
        return UNREADABLE
    if not isinstance(stats.get(NUM_RECORDS), int):
        return NO_NUM_RECORDS
    nulls, mins = stats.get(NULL_COUNT), stats.get(MIN_VALUES)
    missing = [
        c.name
        for c in required
        if not _has(nulls, c.physical) and not (c.has_min_max and _has(mins, c.physical))
    ]
    return f"lacks {', '.join(missing)}" if missing else None


def _has(values: Any, path: tuple[str, ...]) -> bool:
    for name in path:
        if not isinstance(values, dict) or name not in values:
            return False
        values = values[name]
    return values is not None


# ------------------------------------------------------------------------------- execute
@dataclass(frozen=True)
class StatsRules:
    """What a file's stats are computed by: the table's schema and data-skipping properties
    (a small value shipped to a Spark task, never the table's file state)."""

    schema: StructType
    partition_columns: tuple[str, ...]
    num_indexed_cols: int
    stats_columns: tuple[tuple[str, ...], ...] | None
    column_mapping: bool
    deletion_vectors: bool  # the table supports them: stats carry tightBounds

    @classmethod
    def of(cls, snapshot: Snapshot) -> StatsRules:
        props = snapshot.properties
        return cls(
            schema=snapshot.schema,
            partition_columns=tuple(snapshot.partition_columns),
            num_indexed_cols=props.data_skipping_num_indexed_cols,
            stats_columns=props.data_skipping_stats_columns,
            column_mapping=props.column_mapping_mode != "none",
            deletion_vectors=snapshot.protocol.supports("deletionVectors"),
        )


def file_stats(reader: Any, rules: StatsRules, item: tuple[str, bool]) -> str:
    """The stats JSON of one data file (`item`: its full path, whether it has a deletion
    vector), from its footer and, where that lacks a value, its columns; `reader` opens files
    (`Storage.reader`)."""
    path, has_dv = item
    try:
        return stats_json_from_parquet_file(
            reader,
            path,
            rules.schema,
            rules.partition_columns,
            read_data=True,
            num_indexed_cols=rules.num_indexed_cols,
            stats_columns=rules.stats_columns,
            column_mapping=rules.column_mapping,
            tight_bounds=(not has_dv) if rules.deletion_vectors else None,
        )
    except FileNotFoundError:
        raise DataFileError(
            f"{path}: data file missing from storage, though the table's log still lists it:"
            " restore it from a backup, or remove it from the table with `delta-ops repair`"
        ) from None


@timed
def execute_recompute_stats(
    plan: RecomputeStatsPlan, progress: Callable[[str], None] | None = None
) -> RecomputeStatsResult:
    """Compute the planned files' stats (by the plan's engine) and commit them, one
    ``COMPUTE STATS`` commit per batch."""
    if plan.nothing_to_do:
        return RecomputeStatsResult(plan.table, (), 0, 0)
    say = progress or (lambda message: logger.info("%s: %s", plan.table, message))
    snapshot = plan.snapshot
    storage = snapshot.storage
    compute = partial(file_stats, storage.reader, StatsRules.of(snapshot))
    versions: list[int] = []
    done = skipped = 0
    known_version: int | None = None
    known_mark: int | None = None
    changed: set[str] = set()  # files concurrent commits touched: left for a later run
    with progress_task("recompute-stats: reading files", files=len(plan.files)) as task:
        for start in range(0, len(plan.files), plan.batch_files):
            chunk = plan.files[start : start + plan.batch_files]
            batch = [f for f in chunk if f.path not in changed]
            skipped += len(chunk) - len(batch)
            if not batch:
                continue
            stats = plan.engine.map_ordered(
                compute,
                [(storage.table_path(f.path), f.deletion_vector) for f in batch],
                spread=Spread.THREADS,  # footers and column reads wait on storage
                batch=FILES_PER_TASK,
                on_done=lambda _index, _stats: task.advance(files=1),
            )
            bodies = _readds(snapshot, {f.path: s for f, s in zip(batch, stats, strict=True)})
            txn = Transaction(
                snapshot,
                operation="COMPUTE STATS",
                parameters={"predicate": "[]"},
                purpose=Access.RECOMMIT,
                on_conflict=partial(_drop_changed, changed),
                known_version=known_version,
                known_row_id_high_water_mark=known_mark,
            )
            txn.read_files(b["path"] for b in bodies)
            txn.add_actions({"add": b} for b in bodies)
            txn.metrics = {"numFiles": len(bodies)}
            result = txn.commit()
            committed = sum(1 for a in txn.actions if "add" in a)
            skipped += len(bodies) - committed
            done += committed
            versions.append(result.version)
            known_version, known_mark = result.version, result.row_id_high_water_mark
            say(f"stats of {committed:,} files committed at version {result.version}")
    return RecomputeStatsResult(
        table=plan.table,
        versions=tuple(versions),
        files_recomputed=done,
        files_skipped=skipped,
    )


def _readds(snapshot: Snapshot, stats: dict[str, str]) -> list[dict[str, Any]]:
    """The live files' add bodies with their new stats and ``dataChange=false``: path,
    partition values, size, modification time, deletion vector, tags and row ids kept."""
    files = snapshot.files
    rows = files.filter(pc.is_in(files.column("path"), value_set=pa.array(sorted(stats))))
    return [
        {**body, "dataChange": False, "stats": stats[body["path"]]}
        for body in file_rows_as_actions(rows, columns=ADD_FIELDS)
    ]


def _drop_changed(changed: set[str], txn: Transaction, winner: WinningCommit) -> set[str]:
    """Conflict hook: files a concurrent commit removed or re-added leave the batch (their new
    state stays; a later run looks at them again)."""
    touched = winner.touched_paths
    changed.update(touched)
    ours = {a["add"]["path"] for a in txn.actions if "add" in a}
    lost = ours & touched
    if lost:
        txn.actions = [a for a in txn.actions if not ("add" in a and a["add"]["path"] in lost)]
        txn.files_read -= lost
        if not any("add" in a for a in txn.actions):
            raise ConcurrentModification(
                f"version {winner.version} changed every file of this batch; run again"
            )
    return lost


# ------------------------------------------------------------------------------ the operation
def describe_plan(plan: RecomputeStatsPlan) -> str:
    if plan.nothing_to_do:
        return f"nothing to recompute: {plan.idle_reason}"
    columns = ", ".join(plan.columns) or "none (numRecords only)"
    head = (
        f"would compute the stats of {len(plan.files):,} of {plan.num_files:,} live files"
        f" ({format_bytes(sum(f.size for f in plan.files))} to read at most) in"
        f" {plan.num_batches:,} commit(s); stats columns: {columns}"
    )
    lines = [head]
    lines += [
        f"{f.path}\t{f.reason}{' (deletion vector: wide bounds)' if f.deletion_vector else ''}"
        f"\t{format_bytes(f.size)}"
        for f in plan.files
    ]
    note = uniform_iceberg_note(plan.snapshot.metadata.configuration)
    lines += [f"note: {note}"] if note else []
    return "\n".join(lines)


def describe_result(result: RecomputeStatsResult) -> str:
    if not result.versions:
        return "nothing to recompute" + (
            f" ({result.files_skipped:,} files changed meanwhile)" if result.files_skipped else ""
        )
    skipped = (
        f"; {result.files_skipped:,} changed meanwhile, left for a later run"
        if result.files_skipped
        else ""
    )
    return (
        f"stats of {result.files_recomputed:,} files committed in version(s)"
        f" {', '.join(str(v) for v in result.versions)}{skipped}"
    )


@dataclass(frozen=True)
class RecomputeStatsOptions:
    """The recompute_stats operation's options (see its `OPERATION`)."""

    columns: str | None = None
    batch_files: int = DEFAULT_BATCH_FILES
    engine: str = "local"


OPERATION: Operation[RecomputeStatsOptions, RecomputeStatsPlan, RecomputeStatsResult] = Operation(
    name="recompute_stats",
    needs=Access.RECOMMIT,
    help="compute missing or short file statistics from the data (COMPUTE STATS)",
    options=(
        Option(
            "columns",
            OptionKind.TEXT,
            "only files lacking stats for these columns (default: every column the table's"
            " stats cover)",
            example="e.g. a,b.c or `name.with.dots`",
        ),
        Option(
            "batch_files",
            OptionKind.COUNT,
            "files per commit",
            DEFAULT_BATCH_FILES,
        ),
        ENGINE_OPTION,
    ),
    options_type=RecomputeStatsOptions,
    plan_with=lambda snapshot, options, engine: plan_recompute_stats(
        snapshot,
        columns=options.columns,
        batch_files=options.batch_files,
        engine=engine,
    ),
    execute_with=execute_recompute_stats,
    describe_plan=describe_plan,
    describe_result=describe_result,
    # the files re-added with new stats (no data file is written: bytes not counted)
    touched=lambda result: (result.files_recomputed, None),
)

__all__ = [
    "OPERATION",
    "FileToRecompute",
    "RecomputeStatsPlan",
    "RecomputeStatsResult",
    "StatsRules",
    "execute_recompute_stats",
    "file_stats",
    "plan_recompute_stats",
    "table_stats_columns",
]
