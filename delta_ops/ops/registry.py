"""The registry of operations: one description per op, from which every front end is built.

An :class:`Operation` names the op, its typed options (:class:`Option`: a duration, a time, a
count, a flag or a choice, parsed by one vocabulary, `delta_ops.protocol.units`), how to plan it
from a snapshot, how to execute the plan, and how to say both in a line of text. The CLI
generates its subcommands from :data:`OPERATIONS` and the Dagster plugin its run config, so
adding an operation is writing its module and one entry here::

    op = OPERATIONS["vacuum"]
    values = op.parse({"retention": "7d", "force": False})   # InvalidValue names a bad value
    plan = op.plan(load_snapshot(path), values)
    print(op.describe_plan(plan))
    result = op.execute(plan, None)
    print(to_data(result))  # delta_ops.ops.results
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any, Literal

from delta_ops import clock
from delta_ops.errors import InvalidValue, RetentionTooShort
from delta_ops.ops import row_tracking
from delta_ops.ops.engines import ENGINE_NAMES
from delta_ops.protocol.features import Access
from delta_ops.protocol.units import (
    format_bytes,
    format_duration,
    parse_duration_ms,
    parse_size_bytes,
    parse_time_ms,
)
from delta_ops.storage import Storage
from delta_ops.table.snapshot import Snapshot, TableHead, load_head, load_snapshot


class _OnFirstUse(ModuleType):
    """A module imported when one of its names is first used: the CLI starts without the
    operations it does not run (the rewrite and checkpoint writers import pyarrow.parquet,
    ...)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(importlib.import_module(self.__name__), name)


if TYPE_CHECKING:
    from delta_ops.ops import checkpoint, cleanup, compact, purge, vacuum
else:
    checkpoint = _OnFirstUse("delta_ops.ops.checkpoint")
    cleanup = _OnFirstUse("delta_ops.ops.cleanup")
    compact = _OnFirstUse("delta_ops.ops.compact")
    purge = _OnFirstUse("delta_ops.ops.purge")
    vacuum = _OnFirstUse("delta_ops.ops.vacuum")

OptionKind = Literal["duration", "time", "count", "flag", "choice", "ratio", "size", "text"]
Progress = Callable[[str], None] | None


@dataclass(frozen=True)
class Option:
    """One option of an operation: `name` is the CLI flag (``--name`` with ``-`` for ``_``) and
    the Dagster config field; the parsed value is passed to the plan under the same name."""

    name: str
    kind: OptionKind
    help: str
    default: Any = None
    choices: tuple[str, ...] = ()
    cli_only: bool = False  # a CLI convenience (``--now``), not offered in Dagster config

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def parse(self, raw: Any) -> Any:
        """The typed value of `raw` (text from the CLI, a value from Dagster config); a default
        written as text (``"128MB"``) is parsed like a value the user gave."""
        if raw is None:  # not given; an empty text is a value, and refused by its parser
            if not isinstance(self.default, str):
                return self.default
            raw = self.default
        try:
            return _PARSERS[self.kind](self, raw)
        except ValueError as exc:
            raise InvalidValue(f"{self.flag}: {exc}") from None


def _duration(option: Option, raw: Any) -> int:
    text = raw if isinstance(raw, str) else repr(raw)  # a number from config has no unit
    return parse_duration_ms(text)


def _time(option: Option, raw: Any) -> int:
    return parse_time_ms(str(raw), now_ms=clock.now_ms())


def _count(option: Option, raw: Any) -> int:
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise ValueError(f"{raw!r} is not a whole number (at least 1)") from None
    if value < 1:
        raise ValueError(f"must be at least 1, got {value}")
    return value


def _flag(option: Option, raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    raise ValueError(f"{raw!r} is not true or false")


def _ratio(option: Option, raw: Any) -> float:
    try:
        value = float(str(raw).strip().rstrip("%")) / (100 if str(raw).strip().endswith("%") else 1)
    except ValueError:
        raise ValueError(f"{raw!r} is not a share such as 0.1 or 10%") from None
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{raw!r} is not a share from 0 to 1 (or 0% to 100%)")
    return value


def _choice(option: Option, raw: Any) -> str:
    if raw not in option.choices:
        raise ValueError(f"{raw!r} is not one of {', '.join(option.choices)}")
    return str(raw)


_PARSERS: dict[OptionKind, Callable[[Option, Any], Any]] = {
    "duration": _duration,
    "time": _time,
    "count": _count,
    "flag": _flag,
    "choice": _choice,
    "ratio": _ratio,
    "size": lambda option, raw: parse_size_bytes(str(raw)),
    "text": lambda option, raw: str(raw),
}


#: where an operation's heavy I/O runs (`delta_ops.ops.engines`): vacuum's listing and
#: deletes, the row-tracking backfill's footer reads, rewrites, checkpoint parts and sidecars
ENGINE_OPTION = Option(
    "engine",
    "choice",
    "where the heavy I/O runs: local (this process), or spark (executors)",
    "local",
    ENGINE_NAMES,
)


@dataclass(frozen=True)
class Operation:
    """An operation as every front end sees it."""

    name: str  # the CLI subcommand
    needs: Access  # what the table's features must allow for it to run
    action: str  # the Dagster action (asset output and job name part)
    help: str
    options: tuple[Option, ...]
    plan_with: Callable[[Any, Mapping[str, Any]], Any]
    execute_with: Callable[[Any, Progress], Any]
    describe_plan: Callable[[Any], str]
    describe_result: Callable[[Any], str]
    idle_reason: Callable[[Any], str]  # why a plan with nothing to do has nothing to do
    at_version: bool = False  # plans a chosen version (``--version``) rather than the latest
    needs_files: bool = True  # False: plans from a TableHead (no file state is loaded)
    #: loads what the op plans from, when neither a snapshot nor a head always fits
    load_with: Callable[[str | Storage, int | None, Mapping[str, Any] | None], Any] | None = None

    def parse(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        """Typed option values from raw ones; unknown names are a programming error."""
        unknown = set(raw) - {o.name for o in self.options}
        if unknown:
            raise InvalidValue(f"{self.name}: unknown options {sorted(unknown)}")
        return {o.name: o.parse(raw.get(o.name)) for o in self.options}

    def load(
        self,
        table: str | Storage,
        version: int | None = None,
        storage_options: Mapping[str, Any] | None = None,
    ) -> Snapshot | TableHead:
        """What the op plans from: the full snapshot, or only the head when it needs no files."""
        if self.load_with is not None:
            loaded: Snapshot | TableHead = self.load_with(table, version, storage_options)
            return loaded
        load = load_snapshot if self.needs_files else load_head
        return load(table, version, storage_options=storage_options)

    def plan(self, snapshot: Snapshot | TableHead, values: Mapping[str, Any]) -> Any:
        return self.plan_with(snapshot, values)

    def preview(
        self, snapshot: Snapshot | TableHead, values: Mapping[str, Any]
    ) -> tuple[Any, list[str]]:
        """The plan a dry run shows, and warnings. A dry run never fails for a retention below
        the table's minimum: it shows what `--force` would do and says that it needs it."""
        try:
            return self.plan(snapshot, values), []
        except RetentionTooShort as exc:
            if "force" not in values:
                raise
            warning = f"{exc} (this dry run shows what --force would do)"
            return self.plan(snapshot, {**values, "force": True}), [warning]

    def execute(self, plan: Any, progress: Progress = None) -> Any:
        return self.execute_with(plan, progress)


def _requested_now(values: Mapping[str, Any]) -> int:
    """The `now` the user asked for (the wall clock by default); plans clamp it themselves,
    so they can also report what was asked."""
    now: int | None = values["now"]
    return clock.now_ms() if now is None else now


# ------------------------------------------------------------------------------ checkpoint
def _plan_checkpoint(snapshot: Snapshot | TableHead, values: Mapping[str, Any]) -> Any:
    now = _requested_now(values)
    return checkpoint.plan_checkpoint(snapshot, now, parts=values["parts"], engine=values["engine"])


def _describe_checkpoint_plan(plan: checkpoint.CheckpointPlan) -> str:
    if plan.existing is None:
        action = f"would write {', '.join(plan.files)}"
    elif plan.redundant:
        action = (
            f"{plan.existing} exists; would remove {', '.join(plan.redundant)}"
            " (other complete checkpoints of this version, which some readers pick instead)"
        )
    else:
        action = f"nothing to do: {plan.existing} exists"
    return (
        f"checkpoint of version {plan.version} ({plan.kind}): {action}; {plan.num_add_files:,}"
        f" files, {plan.num_tombstones:,} tombstones kept, {plan.expired_tombstones:,} expired"
    )


def _describe_checkpoint_result(result: checkpoint.CheckpointResult) -> str:
    if result.skipped_existing:
        removed = f"; removed {', '.join(result.removed)}" if result.removed else ""
        return (
            f"version {result.version} already has a checkpoint ({result.skipped_existing});"
            f" nothing written{removed}"
        )
    return (
        f"wrote {result.kind} checkpoint of version {result.version}: {', '.join(result.written)}"
        f" ({result.num_actions:,} actions, {format_bytes(result.size_in_bytes)},"
        f" {result.duration_ms} ms)"
    )


CHECKPOINT = Operation(
    name="checkpoint",
    needs=Access.CHECKPOINT,
    action="checkpoint",
    help="write a checkpoint (classic, V2 by table policy, or multi-part)",
    options=(
        Option("parts", "count", "write a multi-part checkpoint with this many parts"),
        ENGINE_OPTION,
        Option(
            "now",
            "time",
            "expire tombstones as of this time (never later than now)",
            None,
            cli_only=True,
        ),
    ),
    plan_with=_plan_checkpoint,
    execute_with=lambda plan, progress: checkpoint.execute_checkpoint(plan),
    describe_plan=_describe_checkpoint_plan,
    describe_result=_describe_checkpoint_result,
    idle_reason=lambda plan: f"version {plan.version} already has a checkpoint ({plan.existing})",
    at_version=True,
    # the head of a table whose checkpoint is big (streamed), else the snapshot
    load_with=lambda table, version, options: checkpoint.load_for_checkpoint(
        table, version, storage_options=options
    ),
)


# ------------------------------------------------------------------------------ cleanup
def _plan_cleanup(snapshot: Snapshot | TableHead, values: Mapping[str, Any]) -> Any:
    now = _requested_now(values)
    return cleanup.plan_cleanup(snapshot, now, retention_ms=values["retention"])


def _describe_cleanup_plan(plan: cleanup.CleanupPlan) -> str:
    head = (
        f"cutoff {cleanup.iso(plan.cutoff_ms)} (log retention {format_duration(plan.retention_ms)}),"
        f" boundary checkpoint {plan.boundary_checkpoint_version}:"
        f" would delete {len(plan.deleted)} log files"
    )
    lines = [head]
    lines += [f"  {name}" for name in plan.deleted]
    lines += [f"kept: {reason}" for reason in plan.kept_reasons]
    return "\n".join(lines)


def _describe_cleanup_result(result: cleanup.CleanupResult) -> str:
    head = (
        f"cutoff {result.cutoff}, boundary checkpoint {result.boundary_checkpoint_version}:"
        f" deleted {result.num_deleted} log files"
    )
    kept = [f"kept: {reason}" for reason in result.kept_reasons]
    return "\n".join([head] + [f"  {name}" for name in result.deleted] + kept)


CLEANUP = Operation(
    name="cleanup",
    needs=Access.CLEANUP,
    action="log_cleanup",
    help="delete expired log files (Spark's truncated-day cutoff, whole segments)",
    options=(
        Option("retention", "duration", "log retention (default: delta.logRetentionDuration)"),
        Option("now", "time", "judge expiry as of this time (never later than now)", cli_only=True),
    ),
    plan_with=_plan_cleanup,
    execute_with=lambda plan, progress: cleanup.execute_cleanup(plan),
    describe_plan=_describe_cleanup_plan,
    describe_result=_describe_cleanup_result,
    idle_reason=lambda plan: "; ".join(plan.kept_reasons) or "no expired log files",
    needs_files=False,
)


# ------------------------------------------------------------------------------ vacuum
def _plan_vacuum(snapshot: Snapshot, values: Mapping[str, Any]) -> Any:
    now = _requested_now(values)
    grace = values["in_flight_grace"]
    return vacuum.plan_vacuum(
        snapshot,
        now,
        retention_ms=values["retention"],
        mode=values["mode"],
        force=values["force"],
        engine=values["engine"],
        **({"in_flight_grace_ms": grace} if grace is not None else {}),
    )


def _describe_vacuum_plan(plan: vacuum.VacuumPlan) -> str:
    lines = [
        f"{c.path}\t{format_bytes(c.size)}\t"
        f"{format_duration((plan.now_ms - c.modification_time) // 3_600_000 * 3_600_000)} old"
        f"\t{c.reason}"
        for c in plan.candidates
    ]
    lines.append(
        f"would delete {len(plan.candidates)} files ({format_bytes(plan.bytes)}) and"
        f" {len(plan.directories)} empty directories at most ({plan.mode},"
        f" retention {format_duration(plan.retention_ms)})"
    )
    if plan.window_reaches_past_history:
        lines.append(
            "note: the retention window starts before version"
            f" {plan.oldest_reconstructable_version}, the oldest the log can still rebuild"
        )
    return "\n".join(lines)


def _describe_vacuum_result(result: vacuum.VacuumResult) -> str:
    return (
        f"deleted {result.num_deleted} files ({format_bytes(result.bytes)}),"
        f" {result.num_vacuumed_directories} directories; commits {list(result.commits) or 'none'}"
    )


VACUUM = Operation(
    name="vacuum",
    needs=Access.VACUUM,
    action="vacuum",
    help="delete data files no retained version needs",
    options=(
        Option(
            "retention",
            "duration",
            "delete files unneeded for this long (default: delta.deletedFileRetentionDuration)",
        ),
        Option(
            "mode",
            "choice",
            "full (list the table) or lite (the log's removes)",
            "full",
            ("full", "lite"),
        ),
        Option("force", "flag", "allow a retention shorter than the table's", False),
        ENGINE_OPTION,
        Option("now", "time", "judge ages as of this time (never later than now)", cli_only=True),
        Option(
            "in_flight_grace",
            "duration",
            "keep untracked files younger than this (default 1m; 0s = exactly Spark)",
            cli_only=True,
        ),
    ),
    plan_with=_plan_vacuum,
    execute_with=lambda plan, progress: vacuum.execute_vacuum(plan),
    describe_plan=_describe_vacuum_plan,
    describe_result=_describe_vacuum_result,
    idle_reason=lambda plan: (
        f"nothing to vacuum ({plan.mode}, retention {format_duration(plan.retention_ms)})"
    ),
)


# ------------------------------------------------------------------------------ row tracking
def _describe_row_tracking_plan(plan: row_tracking.RowTrackingPlan) -> str:
    if plan.nothing_to_do:
        return "row tracking is already enabled: nothing to do"
    upgrade = "upgrade the protocol, " if plan.upgrade_protocol else ""
    return (
        f"would {upgrade}backfill {plan.files_to_backfill:,} files in {plan.num_batches}"
        f" batch(es) ({plan.files_without_num_records:,} counted from footers),"
        " then set delta.enableRowTracking=true"
    )


def _describe_row_tracking_result(result: row_tracking.RowTrackingResult) -> str:
    if result.already_enabled:
        return "row tracking is already enabled: nothing to do"
    return (
        f"row tracking enabled: protocol upgrade at {result.protocol_upgrade_version},"
        f" {result.files_backfilled:,} files backfilled in commits"
        f" {list(result.backfill_commits)}, property set at {result.property_commit_version};"
        f" high-water mark {result.row_id_high_water_mark}"
    )


ROW_TRACKING = Operation(
    name="enable-row-tracking",
    needs=Access.ENABLE_ROW_TRACKING,
    action="row_tracking",
    help="upgrade the protocol, backfill row ids, enable row tracking",
    options=(
        Option(
            "batch_files",
            "count",
            "files per backfill commit",
            row_tracking.DEFAULT_BATCH_FILES,
        ),
        ENGINE_OPTION,
    ),
    plan_with=lambda snapshot, values: row_tracking.plan_enable_row_tracking(
        snapshot, batch_files=values["batch_files"], engine=values["engine"]
    ),
    execute_with=lambda plan, progress: row_tracking.execute_enable_row_tracking(
        plan, progress=progress
    ),
    describe_plan=_describe_row_tracking_plan,
    describe_result=_describe_row_tracking_result,
    idle_reason=lambda plan: "row tracking is already enabled",
)


# ------------------------------------------------------------------------------ purge
PURGE = Operation(
    name="purge",
    needs=Access.REWRITE,
    action="purge",
    help="rewrite files with deletion vectors without their deleted rows (REORG ... PURGE)",
    options=(
        Option(
            "min_deleted_ratio",
            "ratio",
            "only files with at least this share of rows deleted",
            0.0,
        ),
        ENGINE_OPTION,
    ),
    plan_with=lambda snapshot, values: purge.plan_purge(
        snapshot, min_deleted_ratio=values["min_deleted_ratio"], engine=values["engine"]
    ),
    execute_with=lambda plan, progress: purge.execute_purge(plan),
    describe_plan=lambda plan: purge.describe_plan(plan),
    describe_result=lambda result: purge.describe_result(result),
    idle_reason=lambda plan: "no file has a deletion vector to purge",
)


# ------------------------------------------------------------------------------ compaction
COMPACT = Operation(
    name="compact",
    needs=Access.COMPACT,
    action="compact",
    help="bin-pack small files of each partition into files near a target size (OPTIMIZE)",
    options=(
        Option("target_size", "size", "size of the files to write", "128MB"),
        Option(
            "where",
            "text",
            "only partitions this predicate on partition columns selects, e.g. "
            "\"day >= '2026-11-01'\" or day=2026-11-01,region=eu",
        ),
        ENGINE_OPTION,
    ),
    plan_with=lambda snapshot, values: compact.plan_compact(
        snapshot,
        target_size=values["target_size"],
        where=compact.parse_where(values["where"], snapshot),
        engine=values["engine"],
    ),
    execute_with=lambda plan, progress: compact.execute_compact(plan),
    describe_plan=lambda plan: compact.describe_plan(plan),
    describe_result=lambda result: compact.describe_result(result),
    idle_reason=lambda plan: "no partition has small files to pack",
)


OPERATIONS: dict[str, Operation] = {
    op.name: op for op in (CHECKPOINT, CLEANUP, VACUUM, ROW_TRACKING, PURGE, COMPACT)
}
BY_ACTION: dict[str, Operation] = {op.action: op for op in OPERATIONS.values()}
