"""RESTORE: make the latest version read exactly as an older one did (Delta's RESTORE TABLE).

    plan = plan_restore(load_snapshot(path), version=12)         # or timestamp_ms=...
    print(plan.files_to_restore, plan.files_to_remove)           # a dry run
    result = execute_restore(plan)

Delta Spark's semantics, file by file: a file is the pair (path, deletion vector). The restore
commit re-adds the files of version N that are not live now (with N's deletion vectors) and
removes the live files N does not have, including a live file whose deletion vector differs
from N's (the pair is removed, and N's pair added): rows deleted since N come back and rows
written since leave (delta-rs 0.31 to 0.32 compared paths alone and left such rows deleted:
delta-rs#4613). N's schema and table properties come back with it; the
protocol never goes down: features the table gained since N stay.

A restore needs N's files on storage: a vacuum after N may have deleted them. The plan checks
every file it re-adds, and their deletion-vector files, and refuses (naming them) when one is
gone; nothing is written. With `ignore_missing_files` (delta-rs' option of that name, Spark's
`spark.sql.files.ignoreMissingFiles`) it restores anyway, leaving out the files that are gone
(and those whose deletion-vector file is gone): the table then reads as N did with those files
skipped, as Spark reads with that setting, and every reader can still read it (delta-rs and
Delta Spark re-add missing files, which readers without the setting then fail on). The plan
lists them and says what is lost.

The protocol never goes down unless `protocol_downgrade_allowed` (delta-rs' option) asks for
N's protocol: the features the table gained since N go without their traces being removed
(`drop-feature` removes them first), which the plan lists as risks; `checkpointProtection`
stays (only a history truncation takes it away). The commit (`RESTORE`, with Delta Spark's metrics) reads the files
it removes, so a concurrent change to one of them is a conflict; a crash before the commit
changes nothing, and running again finishes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from delta_ops import clock
from delta_ops.errors import DataFileError, InvalidValue, OperationRefused
from delta_ops.log.actions import ADD_FIELDS, file_rows_as_actions
from delta_ops.log.state_stream import file_keys
from delta_ops.ops.engines import LOCAL, Spread
from delta_ops.ops.operation import Operation, Option, OptionKind, Timed, timed
from delta_ops.ops.results import fields_data
from delta_ops.protocol.deletion_vectors import dv_relative_paths, dv_unique_ids
from delta_ops.protocol.features import Access, Protocol
from delta_ops.protocol.properties import uniform_iceberg_note
from delta_ops.protocol.units import format_bytes, format_time_ms
from delta_ops.storage import Storage
from delta_ops.table.commit_times import version_at
from delta_ops.table.remove_lines import encode_removes
from delta_ops.table.snapshot import Snapshot, load_snapshot
from delta_ops.table.transaction import Transaction

#: files named in a refusal for missing files (the rest are counted)
NAMED_MISSING = 10


@dataclass(frozen=True)
class RestorePlan:
    table: str
    version: int  # the latest version, restored from
    restore_to: int  # version N
    timestamp_ms: int | None  # the time asked for, when N was chosen by time
    files_to_restore: int
    bytes_to_restore: int
    files_to_remove: int
    bytes_to_remove: int
    restores_metadata: bool  # N's schema or properties differ from the latest's
    new_protocol: dict[str, Any] | None  # the protocol after, where it changes
    #: ignore_missing_files: N's files (and deletion-vector files) gone from storage, left out
    missing_files: tuple[str, ...]
    #: what the options asked for put at risk, and what the restore leaves stale (UniForm)
    risks: tuple[str, ...]
    snapshot: Snapshot = field(repr=False, compare=False)
    target: Snapshot = field(repr=False, compare=False)
    restored: pa.Table = field(repr=False, compare=False)  # N's files not live now
    removed: pa.Table = field(repr=False, compare=False)  # live files N does not have

    @property
    def nothing_to_do(self) -> bool:
        return not (
            self.files_to_restore
            or self.files_to_remove
            or self.restores_metadata
            or self.new_protocol
        )

    @property
    def idle_reason(self) -> str:
        """Why the plan has nothing to do (when it has nothing to do)."""
        return f"version {self.version} already reads as version {self.restore_to}"

    def to_dict(self) -> dict[str, Any]:
        return fields_data(self)


@dataclass(frozen=True)
class RestoreResult(Timed):
    table: str
    version: int | None  # the restore's commit (None: nothing to do)
    restored_version: int
    metrics: dict[str, int]  # Delta Spark's RESTORE metrics

    def to_dict(self) -> dict[str, Any]:
        return fields_data(self)


def plan_restore(
    snapshot: Snapshot,
    *,
    version: int | None = None,
    timestamp_ms: int | None = None,
    ignore_missing_files: bool = False,
    protocol_downgrade_allowed: bool = False,
) -> RestorePlan:
    """Plan restoring `snapshot`'s table to `version`, or to the version current at
    `timestamp_ms` (exactly one of them); `ignore_missing_files` restores without N's files
    that are gone, `protocol_downgrade_allowed` restores N's protocol (see the module doc)."""
    if (version is None) == (timestamp_ms is None):
        raise InvalidValue("restore: give exactly one of --version N and --timestamp T")
    snapshot.protocol.check_allows(Access.RECOMMIT)
    storage = snapshot.storage
    if timestamp_ms is not None:
        version = version_at(snapshot, timestamp_ms)
        if version is None:
            raise InvalidValue(
                f"--timestamp: {storage.url} has no version committed at or before"
                f" {format_time_ms(timestamp_ms)}"
            )
    assert version is not None
    if not 0 <= version <= snapshot.version:
        raise InvalidValue(
            f"--version {version}: {storage.url} has versions 0 to {snapshot.version}"
        )
    target = load_snapshot(storage, version)
    target.protocol.check_readable()
    now_files, then_files = snapshot.file_index, target.file_index
    now_keys, then_keys = _keys(now_files), _keys(then_files)
    restored = then_files.filter(pc.invert(pc.is_in(then_keys, value_set=now_keys)))
    removed = now_files.filter(pc.invert(pc.is_in(now_keys, value_set=then_keys)))
    missing = _missing_from_storage(storage, restored)
    risks: list[str] = []
    if missing and not ignore_missing_files:
        names = ", ".join(missing[:NAMED_MISSING])
        more = f" and {len(missing) - NAMED_MISSING} more" if len(missing) > NAMED_MISSING else ""
        raise DataFileError(
            f"{storage.url}: cannot restore version {version}: {len(missing)} of its files are"
            f" gone from storage (a vacuum deleted them): {names}{more}; --ignore-missing-files"
            " restores without them"
        )
    if missing:
        restored, lost = _without_missing(storage, restored, set(missing))
        lost_paths = pa.array(lost.column("path").to_pylist(), pa.string())
        with_stats = target.files.filter(pc.is_in(target.files.column("path"), lost_paths))
        risks.append(
            f"{lost.num_rows:,} of version {version}'s files ({format_bytes(_bytes(lost))},"
            f" {_records(with_stats)} rows) are gone from storage and left out: the restored table"
            f" lacks their rows, a state no version had"
        )
    new_protocol = _protocol_after(snapshot.protocol, target.protocol)
    if protocol_downgrade_allowed:
        new_protocol, dropped = _downgraded(snapshot.protocol, target.protocol)
        if dropped:
            risks.append(
                f"the protocol goes down to version {version}'s, without {', '.join(dropped)}:"
                " their traces in the versions before stay (time travel to them needs a reader"
                " with the features; a vacuum by a writer without them may delete files those"
                " versions read, such as deletion-vector files); drop-feature removes traces"
                " first"
            )
    metadata = _metadata_after(
        snapshot, target, keep_row_tracking=_keeps_row_tracking(new_protocol, snapshot.protocol)
    )
    _check_iceberg_compat(snapshot, target, restored, metadata, new_protocol)
    if note := uniform_iceberg_note(snapshot.metadata.configuration):
        risks.append(note)
    return RestorePlan(
        table=storage.url,
        version=snapshot.version,
        restore_to=version,
        timestamp_ms=timestamp_ms,
        files_to_restore=restored.num_rows,
        bytes_to_restore=_bytes(restored),
        files_to_remove=removed.num_rows,
        bytes_to_remove=_bytes(removed),
        restores_metadata=metadata is not None,
        new_protocol=new_protocol,
        missing_files=tuple(missing),
        risks=tuple(risks),
        snapshot=snapshot,
        target=target,
        restored=restored,
        removed=removed,
    )


def _keys(files: pa.Table) -> pa.Array:
    """A file's identity in log replay: its path and its deletion vector's unique id."""
    if files.num_rows == 0:
        return pa.array([], pa.string())
    paths = files.column("path").combine_chunks().cast(pa.string())
    return file_keys(paths, dv_unique_ids(files.column("deletionVector")).cast(pa.string()))


def _bytes(files: pa.Table) -> int:
    if files.num_rows == 0:
        return 0
    return int(pc.sum(pc.fill_null(files.column("size"), 0)).as_py() or 0)


def _missing_from_storage(storage: Storage, files: pa.Table) -> list[str]:
    """The files (and deletion-vector files) to re-add that are gone from storage."""
    if files.num_rows == 0:
        return []
    paths = [storage.table_path(p) for p in files.column("path").to_pylist()]
    relative_dvs = dv_relative_paths(files.column("deletionVector")).drop_null()
    paths += [storage.table_path(p) for p in pc.unique(relative_dvs).to_pylist()]
    present = LOCAL.map_ordered(storage.exists, paths, spread=Spread.THREADS)
    return [p for p, found in zip(paths, present, strict=True) if not found]


def _without_missing(
    storage: Storage, files: pa.Table, missing: set[str]
) -> tuple[pa.Table, pa.Table]:
    """`files` split into those readable (kept) and those whose data or deletion-vector file
    is gone (left out)."""
    dvs = dv_relative_paths(files.column("deletionVector")).to_pylist()
    gone = [
        storage.table_path(path) in missing
        or (dv is not None and storage.table_path(dv) in missing)
        for path, dv in zip(files.column("path").to_pylist(), dvs, strict=True)
    ]
    mask = pa.array(gone, pa.bool_())
    return files.filter(pc.invert(mask)), files.filter(mask)


def _records(files: pa.Table) -> str:
    """How many rows `files` hold, from their stats' numRecords (unknown where absent)."""
    if "stats" not in files.column_names:
        return "an unknown number of"
    total = 0
    for stats in files.column("stats").to_pylist():
        count = json.loads(stats).get("numRecords") if stats else None
        if count is None:
            return "an unknown number of"
        total += int(count)
    return f"{total:,}"


def _downgraded(now: Protocol, then: Protocol) -> tuple[dict[str, Any] | None, list[str]]:
    """N's protocol with checkpointProtection kept where the table has it (only a history
    truncation takes it away); None when that is the latest's own; and the features it
    drops."""
    after = then
    if now.supports("checkpointProtection") and not then.supports("checkpointProtection"):
        after = then.with_features("checkpointProtection")
    dropped = sorted(now.effective_features - after.effective_features)
    if not dropped:
        return _protocol_after(now, then), []
    return after.to_action(), dropped


def _keeps_row_tracking(new_protocol: dict[str, Any] | None, now: Protocol) -> bool:
    after = Protocol.from_action(new_protocol) if new_protocol is not None else now
    return after.supports("rowTracking")


def _check_iceberg_compat(
    snapshot: Snapshot,
    target: Snapshot,
    restored: pa.Table,
    metadata: dict[str, Any] | None,
    new_protocol: dict[str, Any] | None,
) -> None:
    """On a table with Iceberg compatibility (icebergCompatV1/V2/V3), refuse what breaks its
    writer rules (the protocol's "Writer Requirements for IcebergCompatV2"): a re-added file
    without `numRecords` or with a deletion vector, and a change of schema, properties or
    protocol, whose checks (allowed types, partition spec, nested field ids) belong to Delta
    Spark's IcebergCompat, which delta-ops does not run."""
    compat = sorted(
        n for n in snapshot.protocol.effective_features if n.lower().startswith("icebergcompat")
    )
    if not compat:
        return
    url = snapshot.storage.url
    why = f"{url}: cannot restore version {target.version} of a table with {', '.join(compat)}"
    if metadata is not None or new_protocol is not None:
        raise OperationRefused(
            f"{why}: it would change the table's schema, properties or protocol, which needs"
            " Delta Spark's IcebergCompat checks (allowed types, partition spec, nested field"
            " ids) and its Iceberg conversion: restore with Delta Spark (RESTORE TABLE)"
        )
    if restored.num_rows:
        keys = _keys(target.file_index)
        counts = target.record_counts.filter(pc.is_in(keys, value_set=_keys(restored)))
        if counts.null_count:
            raise OperationRefused(
                f"{why}: {counts.null_count} of the files it re-adds have no numRecords in their"
                " stats, which IcebergCompat requires of every new add (Delta Spark's"
                " CheckAddFileHasStats refuses such a commit too)"
            )
        if restored.column("deletionVector").null_count < restored.num_rows:
            raise OperationRefused(
                f"{why}: files it re-adds have deletion vectors, which IcebergCompat forbids"
            )


#: properties that stay as they are now: row tracking, once on, stays on with the same
#: materialized columns (a restored file's row ids live in them), as the protocol stays; so
#: does the version checkpointProtection protects (a feature dropped before it keeps its
#: barrier checkpoints when a restore goes back past the drop)
KEPT_PROPERTIES = (
    "delta.enableRowTracking",
    "delta.rowTracking",
    "delta.requireCheckpointProtectionBeforeVersion",
)


def _metadata_after(
    snapshot: Snapshot, target: Snapshot, *, keep_row_tracking: bool = True
) -> dict[str, Any] | None:
    """N's metaData (schema, partitioning, properties) with the table's id and the kept
    properties of now (row tracking's only while the protocol keeps it); None when that is
    the latest's own."""
    now = snapshot.metadata.to_action()
    then = target.metadata.to_action()
    keep = KEPT_PROPERTIES if keep_row_tracking else KEPT_PROPERTIES[2:]
    kept = {k: v for k, v in now.get("configuration", {}).items() if k.startswith(keep)}
    restored = then.get("configuration", {}).items()
    configuration = {k: v for k, v in restored if not k.startswith(KEPT_PROPERTIES)} | kept
    after = {**then, "id": now["id"], "configuration": configuration}
    return None if after == now else after


def _protocol_after(now: Protocol, then: Protocol) -> dict[str, Any] | None:
    """The protocol after the restore: the latest's, with any feature N had that it lacks
    (a feature dropped since N); None when that is the latest's own."""
    lacking = sorted(then.effective_features - now.effective_features)
    if not lacking:
        return None
    return now.with_features(*lacking).to_action()


@timed
def execute_restore(plan: RestorePlan) -> RestoreResult:
    """Commit the restore: N's metadata where it differs, the removes, the re-adds."""
    metrics = {
        "tableSizeAfterRestore": _bytes(plan.target.file_index),
        "numOfFilesAfterRestore": plan.target.num_files,
        "numRemovedFiles": plan.files_to_remove,
        "numRestoredFiles": plan.files_to_restore,
        "removedFilesSize": plan.bytes_to_remove,
        "restoredFilesSize": plan.bytes_to_restore,
    }
    if plan.nothing_to_do:
        return RestoreResult(plan.table, None, plan.restore_to, metrics)
    snapshot = plan.snapshot
    # Delta Spark's parameters: the one the user gave, the other null
    parameters: dict[str, Any] = (
        {"version": plan.restore_to, "timestamp": None}
        if plan.timestamp_ms is None
        else {"version": None, "timestamp": format_time_ms(plan.timestamp_ms)}
    )
    txn = Transaction(
        snapshot,
        operation="RESTORE",
        parameters=parameters,
        purpose=Access.RECOMMIT,
        reads_whole_table=True,  # the result must be version N's rows, whatever landed meanwhile
    )
    if plan.new_protocol is not None:
        txn.add_action({"protocol": plan.new_protocol})
    keep = _keeps_row_tracking(plan.new_protocol, snapshot.protocol)
    metadata = _metadata_after(snapshot, plan.target, keep_row_tracking=keep)
    if metadata is not None:
        txn.add_action({"metaData": metadata})
    removed_paths = plan.removed.column("path").to_pylist()
    with_stats = snapshot.files.filter(
        pc.is_in(snapshot.files.column("path"), value_set=pa.array(removed_paths, pa.string()))
    )
    removed = with_stats.filter(pc.is_in(_keys(with_stats), value_set=_keys(plan.removed)))
    removes = encode_removes(removed, deletion_timestamp=clock.now_ms(), data_change=True)
    txn.read_files(removes.paths)
    txn.add_encoded_removes(removes)
    target_files = plan.target.files
    restored = target_files.filter(pc.is_in(_keys(target_files), value_set=_keys(plan.restored)))
    adds = file_rows_as_actions(restored, columns=ADD_FIELDS)
    txn.add_actions({"add": {**add, "dataChange": True}} for add in adds)
    txn.metrics = dict(metrics)
    version = txn.commit().version
    return RestoreResult(
        table=plan.table,
        version=version,
        restored_version=plan.restore_to,
        metrics=metrics,
    )


# ------------------------------------------------------------------------------ the operation
def describe_plan(plan: RestorePlan) -> str:
    changes = []
    if plan.restores_metadata:
        changes.append("its schema and properties")
    if plan.new_protocol is not None:
        changes.append("the features it had (the protocol never goes down)")
    extra = f", and {' and '.join(changes)}" if changes else ""
    lines = [
        (
            f"restore version {plan.version} to version {plan.restore_to}: would re-add"
            f" {plan.files_to_restore:,} files ({format_bytes(plan.bytes_to_restore)}) and remove"
            f" {plan.files_to_remove:,} ({format_bytes(plan.bytes_to_remove)}){extra}"
        )
    ]
    if plan.missing_files:
        lines.append(f"  gone from storage, left out: {', '.join(plan.missing_files)}")
    lines += [f"  risk: {risk}" for risk in plan.risks]
    return "\n".join(lines)


def describe_result(result: RestoreResult) -> str:
    if result.version is None:
        return f"nothing to do: the table already reads as version {result.restored_version}"
    m = result.metrics
    return (
        f"restored version {result.restored_version} as version {result.version}:"
        f" {m['numRestoredFiles']:,} files re-added ({format_bytes(m['restoredFilesSize'])}),"
        f" {m['numRemovedFiles']:,} removed ({format_bytes(m['removedFilesSize'])});"
        f" {m['numOfFilesAfterRestore']:,} files ({format_bytes(m['tableSizeAfterRestore'])})"
    )


def _touched(result: RestoreResult) -> tuple[int, int]:
    """Files removed and restored, and their bytes (Delta Spark's RESTORE metrics)."""
    m = result.metrics
    files = m["numRemovedFiles"] + m["numRestoredFiles"]
    return files, m["removedFilesSize"] + m["restoredFilesSize"]


@dataclass(frozen=True)
class RestoreOptions:
    """The restore operation's options (see its `OPERATION`)."""

    version: int | None = None
    timestamp: int | None = None
    ignore_missing_files: bool = False
    protocol_downgrade_allowed: bool = False


OPERATION: Operation[RestoreOptions, RestorePlan, RestoreResult] = Operation(
    name="restore",
    needs=Access.RECOMMIT,
    help="make the latest version read as an older one (RESTORE TABLE ... TO VERSION AS OF)",
    options=(
        Option("version", OptionKind.VERSION, "the version to restore"),
        Option("timestamp", OptionKind.TIME, "restore the version current at this time"),
        Option(
            "ignore_missing_files",
            OptionKind.FLAG,
            "restore although some of the version's files are gone from storage, leaving them"
            " out (the plan lists them and the rows lost)",
            False,
        ),
        Option(
            "protocol_downgrade_allowed",
            OptionKind.FLAG,
            "restore the version's protocol too, dropping the features added since without"
            " removing their traces (the plan lists the risks)",
            False,
        ),
    ),
    options_type=RestoreOptions,
    plan_with=lambda snapshot, options, engine: plan_restore(
        snapshot,
        version=options.version,
        timestamp_ms=options.timestamp,
        ignore_missing_files=options.ignore_missing_files,
        protocol_downgrade_allowed=options.protocol_downgrade_allowed,
    ),
    execute_with=lambda plan, progress: execute_restore(plan),
    describe_plan=describe_plan,
    describe_result=describe_result,
    touched=_touched,
)


__all__ = ["OPERATION", "RestorePlan", "RestoreResult", "execute_restore", "plan_restore"]
