"""DROP FEATURE: take a table feature out of the protocol, so readers and writers that lack it
can use the table again (Delta Spark 4's `ALTER TABLE ... DROP FEATURE f [TRUNCATE HISTORY]`).

    plan = plan_drop_feature(load_snapshot(path), feature="deletionVectors")   # pure
    print(describe_plan(plan))                                                 # a dry run
    result = execute_drop_feature(plan)

Each feature is dropped in Delta Spark's two stages. The *pre-downgrade* removes its traces
from the latest version and stops new ones; the *downgrade* commit then writes the protocol
without it, as low as the remaining features allow (Spark's `removeFeature`: (3, 7,
[deletionVectors], [deletionVectors]) becomes (1, 1), or (1, 7, [checkpointProtection]) with
the fast drop below):

* `deletionVectors`: `delta.enableDeletionVectors` unset, every file with a deletion vector
  rewritten without its deleted rows (the `purge` operation, `REORG ... APPLY (PURGE)`), and a
  tombstone committed for each deletion-vector file a version inside the file retention still
  reads (`remove` with the DV file's path, `dataChange=false`), so a vacuum by a client without
  deletion vectors keeps them for time travel.
* `v2Checkpoint`: `delta.checkpointPolicy=classic`; the checkpoints written afterwards are
  classic, and the downgrade requires that the latest version's state come from one (no V2
  checkpoint or sidecar is needed by a version a reader without the feature reads).
* `inCommitTimestamp`: `delta.enableInCommitTimestamps=false`, and its enablement version and
  timestamp unset; a writer feature, so no history protection.
* `vacuumProtocolCheck`: nothing to remove but the name.
* `checkpointProtection`: only with `truncate_history` (as in Spark): the log before
  `delta.requireCheckpointProtectionBeforeVersion` is deleted in one go (log cleanup with
  `delta.dropFeatureTruncateHistory.retentionDuration`, 24 hours), then that property.

How a reader-writer feature's history is protected:

* the fast drop (default): three empty commits, each checkpointed (readers without the
  feature never replay the commits behind them), then the downgrade commit, which also adds the
  `checkpointProtection` writer feature with `delta.requireCheckpointProtectionBeforeVersion`
  set to its own version (writers then keep those checkpoints until all history before it is
  deleted at once; delta-ops' log cleanup honours it), then a checkpoint of the new latest
  version. Time travel to the versions before stays as it was, for readers that have the
  feature.
* `truncate_history`: the first run does the pre-downgrade and checkpoints it, then says to
  wait `delta.dropFeatureTruncateHistory.retentionDuration` (24 hours); a run after that deletes
  the log older than it (minute cutoff) and, when no version left holds a trace of the feature,
  commits the downgrade (no `checkpointProtection`). The history before is gone.

Every step is a commit, a checkpoint or log files deleted, each re-derived from the table as
it is when the step runs: a crash leaves a table every reader reads, and running the drop
again finishes it (a drop that committed its downgrade but not the checkpoint after it writes
that checkpoint). A feature the protocol does not have is refused, as Delta Spark refuses it
(`DELTA_FEATURE_DROP_FEATURE_NOT_PRESENT`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from delta_ops import clock
from delta_ops.errors import ConcurrentModification, InvalidValue, OperationRefused
from delta_ops.log.actions import ADD_FIELDS, file_rows_as_actions
from delta_ops.log.file_names import LogFile, LogFileKind
from delta_ops.log.reader import read_commit_actions, sidecar_names
from delta_ops.log.segment import complete_checkpoints, list_log_files
from delta_ops.ops.checkpoint_writer import checkpoint
from delta_ops.ops.dv_purge import execute_purge, plan_purge
from delta_ops.ops.engines import LOCAL
from delta_ops.ops.log_cleanup import execute_cleanup, plan_cleanup
from delta_ops.ops.operation import Operation, Option, OptionKind, Timed, timed
from delta_ops.ops.results import fields_data
from delta_ops.ops.rewrite import Rewriter, RewriteUnit, live_file_rows, rewrite_with_removes
from delta_ops.protocol.deletion_vectors import dv_relative_paths
from delta_ops.protocol.features import FEATURES, Access, Protocol, canonical_feature_name
from delta_ops.protocol.properties import (
    CHECKPOINT_POLICY,
    COLUMN_MAPPING_MAX_COLUMN_ID,
    COLUMN_MAPPING_MODE,
    CONSTRAINTS_PREFIX,
    ENABLE_DELETION_VECTORS,
    ENABLE_IN_COMMIT_TIMESTAMPS,
    ENABLE_MATERIALIZE_PARTITION_COLUMNS,
    ENABLE_ROW_TRACKING,
    ENABLE_TYPE_WIDENING,
    IN_COMMIT_TIMESTAMP_ENABLEMENT_TIMESTAMP,
    IN_COMMIT_TIMESTAMP_ENABLEMENT_VERSION,
    MATERIALIZED_ROW_COMMIT_VERSION_COLUMN_NAME,
    MATERIALIZED_ROW_ID_COLUMN_NAME,
    REQUIRE_CHECKPOINT_PROTECTION_BEFORE_VERSION,
    ROW_TRACKING_SUSPENDED,
)
from delta_ops.protocol.schema import (
    ArrayType,
    MapType,
    StructType,
    fields_with_metadata,
    physical_name,
    without_field_metadata,
)
from delta_ops.protocol.units import format_duration, format_time_ms
from delta_ops.storage import Storage
from delta_ops.table.snapshot import Snapshot, load_snapshot
from delta_ops.table.transaction import Transaction

DELETION_VECTORS = "deletionVectors"
V2_CHECKPOINT = "v2Checkpoint"
IN_COMMIT_TIMESTAMP = "inCommitTimestamp"
VACUUM_PROTOCOL_CHECK = "vacuumProtocolCheck"
CHECKPOINT_PROTECTION = "checkpointProtection"
TYPE_WIDENING = "typeWidening"
TYPE_WIDENING_PREVIEW = "typeWidening-preview"
COLUMN_MAPPING = "columnMapping"
ROW_TRACKING = "rowTracking"
CHECK_CONSTRAINTS = "checkConstraints"
DOMAIN_METADATA = "domainMetadata"
MATERIALIZE_PARTITION_COLUMNS = "materializePartitionColumns"
#: the features delta-ops drops: every one Delta Spark 4.4 drops, but those in NOT_DROPPABLE
DROPPABLE = (
    DELETION_VECTORS,
    V2_CHECKPOINT,
    IN_COMMIT_TIMESTAMP,
    VACUUM_PROTOCOL_CHECK,
    CHECKPOINT_PROTECTION,
    TYPE_WIDENING,
    TYPE_WIDENING_PREVIEW,
    COLUMN_MAPPING,
    ROW_TRACKING,
    CHECK_CONSTRAINTS,
    DOMAIN_METADATA,
    MATERIALIZE_PARTITION_COLUMNS,
)
#: features delta-ops does not drop, and why (a name not here nor in DROPPABLE is a feature
#: Delta Spark 4.4 cannot drop either: it is not a RemovableFeature there)
NOT_DROPPABLE: Mapping[str, str] = {
    "allowColumnDefaults": "Delta Spark 4.4 cannot drop it either (not a removable feature:"
    " DELTA_FEATURE_DROP_NONREMOVABLE_FEATURE)",
    "identityColumns": "Delta Spark 4.4 cannot drop it either (not a removable feature:"
    " DELTA_FEATURE_DROP_NONREMOVABLE_FEATURE); an identity column stays an identity column",
    "catalogManaged": "Delta Spark 4.4 refuses it too (its downgrade is not implemented:"
    " DELTA_FEATURE_DROP_FEATURE_NOT_SUPPORTED_BY_CLIENT); commits go through the catalog",
    "coordinatedCommits-preview": "its drop unsets the commit coordinator and backfills the"
    " commits only the coordinator holds: that takes a client of the coordinator (Delta Spark"
    " with it configured), which delta-ops is not",
    "redirectReaderWriter-preview": "the table is redirected elsewhere; delta-ops neither"
    " follows nor writes redirects (drop it with Delta Spark, which unsets the redirect)",
    **{
        name: "delta-ops does not commit to tables with geometry or geography support (their"
        " bounding-box statistics are not implemented); Delta Spark drops it once no column is"
        " geometry or geography (DELTA_CANNOT_DROP_GEOSPATIAL_FEATURE while one is)"
        for name in ("geospatial", "geospatial-dev")
    },
    "redirectWriterOnly-preview": "writes are redirected elsewhere; delta-ops neither follows"
    " nor writes redirects (drop it with Delta Spark, which unsets the redirect)",
}
#: reader-writer features: their drop protects (or truncates) the history before it
PROTECTED = frozenset(
    {
        DELETION_VECTORS,
        V2_CHECKPOINT,
        VACUUM_PROTOCOL_CHECK,
        TYPE_WIDENING,
        TYPE_WIDENING_PREVIEW,
        COLUMN_MAPPING,
    }
)
#: table properties the downgrade commit itself removes (Spark's
#: `tablePropertiesToRemoveAtDowngradeCommit`: concurrent writers may use them until then)
REMOVED_AT_DOWNGRADE: Mapping[str, tuple[str, ...]] = {
    ROW_TRACKING: (
        ENABLE_ROW_TRACKING,
        ROW_TRACKING_SUSPENDED,
        MATERIALIZED_ROW_ID_COLUMN_NAME,
        MATERIALIZED_ROW_COMMIT_VERSION_COLUMN_NAME,
    ),
    MATERIALIZE_PARTITION_COLUMNS: (ENABLE_MATERIALIZE_PARTITION_COLUMNS,),
}
#: field metadata keys of type widening and of column mapping
TYPE_CHANGES_KEY = "delta.typeChanges"
COLUMN_MAPPING_KEYS = frozenset(
    {"delta.columnMapping.id", "delta.columnMapping.physicalName", "delta.columnMapping.nested.ids"}
)
#: Delta Spark's DropTableFeatureUtils.NUMBER_OF_BARRIER_CHECKPOINTS
BARRIER_CHECKPOINTS = 3
#: commit attempts of the downgrade when other writers commit meanwhile (each re-validates)
DOWNGRADE_ATTEMPTS = 5
MINUTE_MS = 60_000
#: Delta Spark's operation names for the commits of a drop
OP_DROP = "DROP FEATURE"
OP_EMPTY = "Empty Commit"
OP_SET = "SET TBLPROPERTIES"
OP_UNSET = "UNSET TBLPROPERTIES"
OP_DV_TOMBSTONES = "Deletion Vector Tombstones"
OP_UNBACKFILL = "ROW TRACKING UNBACKFILL"
ROW_TRACKING_DOMAIN = "delta.rowTracking"
OP_DOMAIN_CLEANUP = "DOMAIN METADATA CLEANUP"
OP_REMOVE_COLUMN_MAPPING = "REMOVE COLUMN MAPPING"
OP_COLUMN_METADATA = "DROP FEATURE"  # Spark's UpdateColumnMetadata("DROP FEATURE", ...)
#: files re-added per unbackfill commit (Spark's backfill batches)
UNBACKFILL_BATCH = 100_000


@dataclass(frozen=True)
class Step:
    """One thing a drop does, in order: a commit, checkpoints, a rewrite, a truncation."""

    action: str
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return fields_data(self)


@dataclass(frozen=True)
class DropFeaturePlan:
    """What dropping `feature` will do to the table as it is now."""

    table: str
    version: int
    feature: str
    truncate_history: bool
    #: "fast" (checkpoint barrier and checkpointProtection), "direct" (a writer feature: no
    #: history protection), "truncate" (the history is truncated), "finish" (a drop already
    #: committed: only its checkpoint is left to write)
    mode: str
    protocol_before: dict[str, Any]
    protocol_after: dict[str, Any]
    steps: tuple[Step, ...]
    #: truncate-history only: this run prepares the table and the drop needs a later run
    prepares_only: bool
    truncate_retention_ms: int | None
    snapshot: Snapshot = field(repr=False, compare=False)

    @property
    def nothing_to_do(self) -> bool:
        return not self.steps

    @property
    def idle_reason(self) -> str:
        """Why the plan has nothing to do (when it has nothing to do)."""
        return f"{self.feature} is not in the table's protocol"

    def to_dict(self) -> dict[str, Any]:
        return fields_data(self)


@dataclass(frozen=True)
class DropFeatureResult(Timed):
    """What a drop did; `dropped` False when a truncating drop must wait for the retention."""

    table: str
    feature: str
    dropped: bool
    version: int | None  # the DROP FEATURE commit
    protocol: dict[str, Any]  # the table's protocol after this run
    commits: tuple[int, ...]  # every version this run committed
    checkpoints: tuple[int, ...]  # every version this run checkpointed
    files_purged: int
    files_rewritten: int  # type widening, column mapping: files rewritten in the table's form
    dv_tombstones: int
    log_files_deleted: int
    #: when not dropped: why, and the time from which running again can drop it
    waiting_for: str | None
    run_again_after_ms: int | None
    #: what known readers get wrong on the table as the drop leaves it (reader_warnings)
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return fields_data(self)


# ------------------------------------------------------------------------------ features
def _configuration(snapshot: Snapshot) -> dict[str, str]:
    return dict(snapshot.metadata.configuration)


def _dv_enabled(snapshot: Snapshot) -> bool:
    return snapshot.properties.enable_deletion_vectors


def _num_dvs(snapshot: Snapshot) -> int:
    files = snapshot.file_index
    return files.num_rows - files.column("deletionVector").null_count if files.num_rows else 0


def _v2_in_use(snapshot: Snapshot) -> bool:
    """Whether the snapshot's state comes from a V2 checkpoint (a UUID-named one, or a
    classic-named copy referencing sidecars)."""
    ref = snapshot.segment.checkpoint
    if ref is None:
        return False
    if ref.kind is LogFileKind.V2_CHECKPOINT:
        return True
    return bool(sidecar_names(snapshot.storage, list(ref.files)))


def _ict_properties(snapshot: Snapshot) -> list[str]:
    config = snapshot.metadata.configuration
    provenance = (IN_COMMIT_TIMESTAMP_ENABLEMENT_VERSION, IN_COMMIT_TIMESTAMP_ENABLEMENT_TIMESTAMP)
    return [k for k in provenance if k in config]


def _constraints(snapshot: Snapshot) -> list[str]:
    """The table's CHECK constraints by name (`delta.constraints.<name>` properties)."""
    config = snapshot.metadata.configuration
    return sorted(k[len(CONSTRAINTS_PREFIX) :] for k in config if k.startswith(CONSTRAINTS_PREFIX))


def _row_tracked(files: pa.Table) -> pa.Array:
    """Which of `files` carry a `baseRowId` or a `defaultRowCommitVersion`."""
    tracked = pa.array([False] * files.num_rows, pa.bool_())
    for column in ("baseRowId", "defaultRowCommitVersion"):
        if column in files.column_names:
            tracked = pc.or_(tracked, pc.is_valid(files.column(column)))
    return tracked


def _row_tracked_files(snapshot: Snapshot) -> int:
    """Live files that carry a `baseRowId` or `defaultRowCommitVersion`."""
    files = snapshot.file_index
    return int(pc.sum(_row_tracked(files)).as_py() or 0) if files.num_rows else 0


def _type_widening_enabled(snapshot: Snapshot) -> bool:
    value = snapshot.metadata.configuration.get(ENABLE_TYPE_WIDENING, "false")
    return str(value).strip().lower() == "true"


def traces(feature: str, snapshot: Snapshot) -> list[str]:
    """What of `feature` the latest version still holds (empty: its drop invariants hold,
    as Delta Spark's `validateDropInvariants` checks them)."""
    found: list[str] = []
    config = snapshot.metadata.configuration
    if feature == DELETION_VECTORS:
        if _dv_enabled(snapshot):
            found.append(f"{ENABLE_DELETION_VECTORS}=true")
        if n := _num_dvs(snapshot):
            found.append(f"{n} live files with deletion vectors")
    elif feature == V2_CHECKPOINT:
        if snapshot.properties.checkpoint_policy == "v2":
            found.append(f"{CHECKPOINT_POLICY}=v2")
        if _v2_in_use(snapshot):
            found.append("the latest state is read from a V2 checkpoint")
    elif feature == IN_COMMIT_TIMESTAMP:
        if snapshot.properties.enable_in_commit_timestamps:
            found.append(f"{ENABLE_IN_COMMIT_TIMESTAMPS}=true")
        found += [f"{k} set" for k in _ict_properties(snapshot)]
    elif feature == CHECKPOINT_PROTECTION:
        if REQUIRE_CHECKPOINT_PROTECTION_BEFORE_VERSION in config:
            found.append(f"{REQUIRE_CHECKPOINT_PROTECTION_BEFORE_VERSION} set")
    elif feature in (TYPE_WIDENING, TYPE_WIDENING_PREVIEW):
        if _type_widening_enabled(snapshot):
            found.append(f"{ENABLE_TYPE_WIDENING}=true")
        if changed := fields_with_metadata(snapshot.schema, frozenset({TYPE_CHANGES_KEY})):
            found.append(f"{TYPE_CHANGES_KEY} on {', '.join(changed)}")
    elif feature == COLUMN_MAPPING:
        if snapshot.properties.column_mapping_mode != "none":
            found.append(f"{COLUMN_MAPPING_MODE}={snapshot.properties.column_mapping_mode}")
        if mapped := fields_with_metadata(snapshot.schema, COLUMN_MAPPING_KEYS):
            found.append(f"column mapping metadata on {len(mapped)} fields")
    elif feature == ROW_TRACKING:
        if snapshot.properties.enable_row_tracking:
            found.append(f"{ENABLE_ROW_TRACKING}=true")
        if not snapshot.properties.row_tracking_suspended:
            found.append(f"{ROW_TRACKING_SUSPENDED} is not true")
        if n := _row_tracked_files(snapshot):
            found.append(f"{n} live files with row ids")
    elif feature == CHECK_CONSTRAINTS:
        if names := _constraints(snapshot):
            found.append(f"CHECK constraints {', '.join(names)}")
    elif feature == DOMAIN_METADATA and snapshot.domains:
        found.append(f"domain metadata {', '.join(sorted(snapshot.domains))}")
    return found


#: features whose traces a drop does not remove: Delta Spark refuses while they exist (a drop
#: never changes the table's logical content), and the user removes them first
_REFUSED_WHILE_USED = {
    CHECK_CONSTRAINTS: "drop the constraints first (ALTER TABLE ... DROP CONSTRAINT name;"
    " DELTA_CANNOT_DROP_CHECK_CONSTRAINT_FEATURE)",
}


def _lookup(name: str | None) -> str:
    accepted = ", ".join(DROPPABLE)
    if not name or not name.strip():
        raise InvalidValue(f"drop-feature: name the feature to drop (one of {accepted})")
    canonical = canonical_feature_name(name.strip())
    for feature in DROPPABLE:
        if feature.lower() == canonical.lower():
            return feature
    for feature, why in NOT_DROPPABLE.items():
        if feature.lower() == canonical.lower():
            raise InvalidValue(f"drop-feature: delta-ops does not drop {feature}: {why}")
    known = (
        "a table feature Delta Spark 4.4 cannot drop either"
        if canonical in FEATURES
        else "not a feature"
    )
    raise InvalidValue(f"drop-feature: {name!r} is {known}; delta-ops drops {accepted}")


# ------------------------------------------------------------------------------ the plan
def plan_drop_feature(
    snapshot: Snapshot, *, feature: str | None, truncate_history: bool = False
) -> DropFeaturePlan:
    """Plan dropping `feature` (any letter case; one of `DROPPABLE`) from `snapshot`'s
    table: the fast drop, or with `truncate_history` the drop that truncates the history.

    Raises:
        InvalidValue: the name is not one delta-ops drops, the protocol does not have it,
            `truncate_history` is asked for a feature whose drop does not use it, or
            checkpointProtection is dropped without it (Delta Spark's rules).
        OperationRefused: another feature of the table requires this one.
    """
    name = _lookup(feature)
    storage = snapshot.storage
    protocol = snapshot.protocol
    if not protocol.supports(name):
        unfinished = _unfinished_drop(snapshot, name)
        if unfinished is None:
            raise InvalidValue(
                f"drop-feature: {name} is not in the protocol of {storage.url} ({protocol}):"
                " there is nothing to drop"
            )
        return _plan(snapshot, name, truncate_history, "finish", protocol, unfinished, False)
    if truncate_history and name not in PROTECTED | {CHECKPOINT_PROTECTION}:
        raise InvalidValue(
            f"drop-feature: --truncate-history is for features whose drop protects history"
            f" ({', '.join(sorted(PROTECTED | {CHECKPOINT_PROTECTION}))}); {name} is a writer"
            " feature dropped without it"
        )
    if name == CHECKPOINT_PROTECTION and not truncate_history:
        raise InvalidValue(
            "drop-feature: checkpointProtection can only be dropped with --truncate-history"
            " (the history before the version it protects is deleted first)"
        )
    dependents = sorted(
        n for n in protocol.effective_features if n in FEATURES and name in FEATURES[n].requires
    )
    if dependents:
        raise OperationRefused(
            f"cannot drop {name}: {', '.join(dependents)} require(s) it; drop those first"
        )
    if name in _REFUSED_WHILE_USED and (used := traces(name, snapshot)):
        raise OperationRefused(
            f"cannot drop {name} from {storage.url}: the table has {'; '.join(used)};"
            f" {_REFUSED_WHILE_USED[name]}"
        )
    protocol.check_allows(Access.WRITE)
    if name == COLUMN_MAPPING:
        _check_logical_names(snapshot)
    props = snapshot.properties
    steps = _pre_downgrade_steps(name, snapshot)
    if truncate_history:
        retention = props.drop_feature_truncate_history_retention_ms
        kept = format_duration(retention)
        after = protocol.without_feature(name)
        drop = Step("drop", f"{OP_DROP} commit: {protocol} -> {after}")
        if name == CHECKPOINT_PROTECTION:
            if steps:  # the history before the protected version is still there
                protected = props.require_checkpoint_protection_before_version
                steps.append(
                    Step(
                        "truncate",
                        f"delete the log before version {protected} in one go, where all of it is"
                        f" older than {kept} (minute cutoff); else stop and wait",
                    )
                )
            if traces(name, snapshot):
                steps.append(
                    Step("unset", f"{OP_UNSET} {REQUIRE_CHECKPOINT_PROTECTION_BEFORE_VERSION}")
                )
            steps.append(drop)
            return _plan(snapshot, name, True, "truncate", after, steps, False, retention)
        prepares = bool(traces(name, snapshot))
        steps.append(Step("checkpoint", "an empty commit, checkpointed (classic)"))
        if prepares:
            steps.append(
                Step(
                    "wait",
                    f"stop: run again once these commits are older than {kept}"
                    " (delta.dropFeatureTruncateHistory.retentionDuration)",
                )
            )
        else:
            steps.append(
                Step(
                    "truncate",
                    f"delete the log older than {kept} (minute cutoff); stop and wait while a"
                    f" version left holds a trace of {name}",
                )
            )
            steps.append(drop)
        return _plan(snapshot, name, True, "truncate", after, steps, prepares, retention)
    if name in PROTECTED:
        after = protocol.with_features(CHECKPOINT_PROTECTION).without_feature(name)
        steps.append(
            Step(
                "barrier",
                f"{BARRIER_CHECKPOINTS} empty commits, each checkpointed (classic): readers"
                f" without {name} never replay the commits behind them",
            )
        )
        steps.append(
            Step(
                "drop",
                f"{OP_DROP} commit: {protocol} -> {after};"
                f" {REQUIRE_CHECKPOINT_PROTECTION_BEFORE_VERSION} = its version",
            )
        )
        steps.append(Step("checkpoint", "a checkpoint of the new latest version"))
        return _plan(snapshot, name, False, "fast", after, steps, False)
    after = protocol.without_feature(name)
    steps.append(Step("drop", f"{OP_DROP} commit: {protocol} -> {after}"))
    return _plan(snapshot, name, False, "direct", after, steps, False)


#: characters a column name cannot hold without column mapping (Spark's
#: `SchemaUtils.findInvalidColumnNamesInSchema`)
_INVALID_NAME_CHARACTERS = frozenset(" ,;{}()\n\t=")


def _check_logical_names(snapshot: Snapshot) -> None:
    """Refuse what Delta Spark's column-mapping removal refuses (or what it would leave
    wrong): names parquet files cannot hold without column mapping
    (DELTA_INVALID_COLUMN_NAMES_WHEN_REMOVING_COLUMN_MAPPING), and layouts that name columns
    by their physical names outside the schema (clustering columns in the `delta.clustering`
    domain), which this drop does not rename."""
    bad: list[str] = []

    def walk(t: Any, path: str) -> None:
        if isinstance(t, StructType):
            for f in t.fields:
                name = f"{path}.{f.name}" if path else f.name
                if _INVALID_NAME_CHARACTERS & set(f.name):
                    bad.append(repr(name))
                walk(f.type, name)
        elif isinstance(t, ArrayType):
            walk(t.element_type, path)
        elif isinstance(t, MapType):
            walk(t.key_type, path)
            walk(t.value_type, path)

    walk(snapshot.schema, "")
    url = snapshot.storage.url
    if bad:
        raise OperationRefused(
            f"cannot drop columnMapping from {url}: the columns {', '.join(bad)} have names"
            " a table without column mapping cannot hold (space or one of ,;{}()=, newline,"
            " tab); rename them first (DELTA_INVALID_COLUMN_NAMES_WHEN_REMOVING_COLUMN_MAPPING)"
        )
    if "delta.clustering" in snapshot.domains:
        raise OperationRefused(
            f"cannot drop columnMapping from {url}: the table is clustered and its clustering"
            " columns are recorded by physical name; delta-ops does not rename them (drop the"
            " feature with Delta Spark, or ALTER TABLE ... CLUSTER BY NONE first)"
        )


def _plan(
    snapshot: Snapshot,
    feature: str,
    truncate_history: bool,
    mode: str,
    after: Protocol,
    steps: list[Step],
    prepares: bool,
    retention_ms: int | None = None,
) -> DropFeaturePlan:
    return DropFeaturePlan(
        table=snapshot.storage.url,
        version=snapshot.version,
        feature=feature,
        truncate_history=truncate_history,
        mode=mode,
        protocol_before=snapshot.protocol.to_action(),
        protocol_after=after.to_action(),
        steps=tuple(steps),
        prepares_only=prepares,
        truncate_retention_ms=retention_ms,
        snapshot=snapshot,
    )


def _pre_downgrade_steps(feature: str, snapshot: Snapshot) -> list[Step]:
    """The pre-downgrade of `feature`, as the table is now (Spark's PreDowngrade commands)."""
    steps: list[Step] = []
    if feature == DELETION_VECTORS:
        if ENABLE_DELETION_VECTORS in snapshot.metadata.configuration and _dv_enabled(snapshot):
            steps.append(Step("unset", f"{OP_UNSET} {ENABLE_DELETION_VECTORS}"))
        purge = plan_purge(snapshot)
        if not purge.nothing_to_do:
            steps.append(
                Step(
                    "purge",
                    f"rewrite {len(purge.files):,} files without their {purge.rows_to_drop:,}"
                    " deleted rows (REORG ... APPLY (PURGE))",
                )
            )
        tombstones = len(_missing_dv_tombstones(snapshot, purging=True))
        if tombstones:
            steps.append(
                Step(
                    "dv-tombstones",
                    f"tombstones for {tombstones:,} deletion-vector files versions inside the file"
                    " retention read (a vacuum without deletion vectors keeps them)",
                )
            )
    elif feature == V2_CHECKPOINT and snapshot.properties.checkpoint_policy == "v2":
        steps.append(Step("set", f"{OP_SET} {CHECKPOINT_POLICY}=classic"))
    elif feature == IN_COMMIT_TIMESTAMP and traces(feature, snapshot):
        steps.append(Step("unset", f"{OP_UNSET} {', '.join(_ict_unset(snapshot))}"))
    elif feature == CHECKPOINT_PROTECTION and traces(feature, snapshot):
        protected = snapshot.properties.require_checkpoint_protection_before_version
        if not _history_truncated_before(snapshot.storage, protected):
            steps.append(Step("checkpoint", "an empty commit, checkpointed (classic)"))
    elif feature in (TYPE_WIDENING, TYPE_WIDENING_PREVIEW):
        if _type_widening_enabled(snapshot):
            steps.append(Step("unset", f"{OP_UNSET} {ENABLE_TYPE_WIDENING}"))
        changed = fields_with_metadata(snapshot.schema, frozenset({TYPE_CHANGES_KEY}))
        if changed:
            steps.append(
                Step(
                    "rewrite",
                    f"read the footers of the {snapshot.num_files:,} live files and rewrite those"
                    " whose Parquet types differ from the table's (REORG, as Delta Spark's"
                    " REWRITE_TYPE_WIDENING), so readers without type widening read them",
                )
            )
            steps.append(Step("schema", f"remove {TYPE_CHANGES_KEY} from {', '.join(changed)}"))
    elif feature == COLUMN_MAPPING and traces(feature, snapshot):
        steps.append(
            Step(
                "rewrite",
                f"rewrite all {snapshot.num_files:,} live files with the columns' logical names,"
                " in one commit that takes the column-mapping metadata out of the schema and"
                f" unsets {COLUMN_MAPPING_MODE} and {COLUMN_MAPPING_MAX_COLUMN_ID}"
                f" ({OP_REMOVE_COLUMN_MAPPING})",
            )
        )
    elif feature == ROW_TRACKING and traces(feature, snapshot):
        steps.append(
            Step("set", f"{OP_SET} {ENABLE_ROW_TRACKING}=false, {ROW_TRACKING_SUSPENDED}=true")
        )
        if n := _row_tracked_files(snapshot):
            steps.append(
                Step(
                    "unbackfill",
                    f"re-add {n:,} files without baseRowId and defaultRowCommitVersion"
                    f" ({OP_UNBACKFILL}, dataChange=false)",
                )
            )
    elif feature == DOMAIN_METADATA and snapshot.domains:
        steps.append(
            Step(
                "domains",
                f"remove the domain metadata {', '.join(sorted(snapshot.domains))}"
                f" ({OP_DOMAIN_CLEANUP})",
            )
        )
    return steps


def _ict_unset(snapshot: Snapshot) -> list[str]:
    changed = _ict_properties(snapshot)
    if snapshot.properties.enable_in_commit_timestamps:
        changed.append(f"{ENABLE_IN_COMMIT_TIMESTAMPS}=false")
    return changed


def _unfinished_drop(snapshot: Snapshot, feature: str) -> list[Step] | None:
    """The steps left of a fast drop of `feature` that committed its downgrade but not the
    checkpoint after it (a crash between the two); None when there is none."""
    protected = snapshot.properties.require_checkpoint_protection_before_version
    if feature not in PROTECTED or not snapshot.protocol.supports(CHECKPOINT_PROTECTION):
        return None
    if not 0 < protected <= snapshot.version:
        return None
    listing = snapshot.segment.listing
    if any(ref.version >= protected for ref in complete_checkpoints(listing)):
        hint = snapshot.segment.last_checkpoint.info
        if hint is not None and hint.version >= protected:
            return None
    if not any(f.kind is LogFileKind.COMMIT and f.version == protected for f in listing):
        return None
    infos = [
        a["commitInfo"]
        for a in read_commit_actions(snapshot.storage, protected)
        if "commitInfo" in a
    ]
    info: dict[str, Any] = infos[0] if infos and isinstance(infos[0], dict) else {}
    params = info.get("operationParameters") or {}
    if info.get("operation") != OP_DROP or params.get("featureName") != feature:
        return None
    return [Step("checkpoint", f"a checkpoint of the latest version (the drop at {protected})")]


# ------------------------------------------------------------------------------ execution
@dataclass
class _Run:
    """What a drop has done so far (for its result)."""

    storage: Storage
    commits: list[int] = field(default_factory=list)
    checkpoints: list[int] = field(default_factory=list)
    files_purged: int = 0
    files_rewritten: int = 0
    dv_tombstones: int = 0
    log_files_deleted: int = 0

    def latest(self) -> Snapshot:
        return load_snapshot(self.storage)

    def commit(self, txn: Transaction) -> int:
        version = txn.commit().version
        self.commits.append(version)
        return version

    def checkpoint(self, version: int | None = None) -> int:
        result = checkpoint(self.storage, version=version)
        self.checkpoints.append(result.version)
        return result.version

    def empty_commit_and_checkpoint(self) -> int:
        version = self.commit(Transaction(self.latest(), OP_EMPTY, purpose=Access.WRITE))
        return self.checkpoint(version)


@timed
def execute_drop_feature(
    plan: DropFeaturePlan, progress: Callable[[str], None] | None = None
) -> DropFeatureResult:
    """Run the drop the plan describes; each step re-reads the table (see the module doc)."""
    say = progress or (lambda message: None)
    run = _Run(plan.snapshot.storage)
    feature = plan.feature
    if plan.mode == "finish":
        say(f"drop-feature: checkpointing after the drop of {feature}")
        run.checkpoint()
        return _result(plan, run, dropped=True, version=None)
    if feature == CHECKPOINT_PROTECTION:
        return _drop_checkpoint_protection(plan, run, say)
    say(f"drop-feature: removing the traces of {feature}")
    prepared = _pre_downgrade(feature, run)
    if plan.truncate_history:
        run.empty_commit_and_checkpoint()
        retention = plan.truncate_retention_ms or 0
        if prepared:
            return _wait(
                plan,
                run,
                f"the commits that removed the traces of {feature} must be older than"
                f" {format_duration(retention)} before the history is truncated",
                clock.now_ms() + retention + MINUTE_MS,
            )
        waiting = _truncate(run, retention, feature)
        if waiting is not None:
            return _wait(plan, run, *waiting)
        version = _downgrade(run, feature, truncate_history=True, protect=False)
        return _result(plan, run, dropped=True, version=version)
    protect = feature in PROTECTED
    if protect:
        say(f"drop-feature: {BARRIER_CHECKPOINTS} barrier checkpoints")
        for _ in range(BARRIER_CHECKPOINTS):
            run.empty_commit_and_checkpoint()
    version = _downgrade(run, feature, truncate_history=False, protect=protect)
    if protect:
        run.checkpoint()
    return _result(plan, run, dropped=True, version=version)


def _pre_downgrade(feature: str, run: _Run) -> bool:
    """Remove `feature`'s traces from the latest version; whether there were any (Spark's
    `performedChanges`, which makes a history-truncating drop wait)."""
    snapshot = run.latest()
    found = bool(traces(feature, snapshot))
    if feature == DELETION_VECTORS:
        if _dv_enabled(snapshot):
            _set_properties(run, snapshot, unset=(ENABLE_DELETION_VECTORS,))
            snapshot = run.latest()
        purge = plan_purge(snapshot)
        if not purge.nothing_to_do:
            purged = execute_purge(purge)
            if purged.version is not None:
                run.commits.append(purged.version)
            run.files_purged += purged.files_rewritten
            snapshot = run.latest()
        paths = _missing_dv_tombstones(snapshot, purging=False)
        if paths:
            now = clock.now_ms()
            txn = Transaction(snapshot, OP_DV_TOMBSTONES, purpose=Access.WRITE)
            txn.add_actions(
                {"remove": {"path": p, "deletionTimestamp": now, "dataChange": False}}
                for p in paths
            )
            txn.metrics = {"dvTombstonesWithinRetentionPeriod": len(paths)}
            run.commit(txn)
            run.dv_tombstones += len(paths)
    elif feature == V2_CHECKPOINT:
        if snapshot.properties.checkpoint_policy == "v2":
            _set_properties(run, snapshot, set_={CHECKPOINT_POLICY: "classic"})
    elif feature == IN_COMMIT_TIMESTAMP and found:
        changes = (
            {ENABLE_IN_COMMIT_TIMESTAMPS: "false"}
            if snapshot.properties.enable_in_commit_timestamps
            else {}
        )
        _set_properties(run, snapshot, set_=changes, unset=tuple(_ict_properties(snapshot)))
    elif feature in (TYPE_WIDENING, TYPE_WIDENING_PREVIEW) and found:
        if _type_widening_enabled(snapshot):
            _set_properties(run, snapshot, unset=(ENABLE_TYPE_WIDENING,))
        if fields_with_metadata(run.latest().schema, frozenset({TYPE_CHANGES_KEY})):
            _rewrite_narrower_files(run)
            _remove_type_changes(run)
    elif feature == COLUMN_MAPPING and found:
        _remove_column_mapping(run)
    elif feature == ROW_TRACKING and found:
        _set_properties(
            run,
            snapshot,
            set_={ENABLE_ROW_TRACKING: "false", ROW_TRACKING_SUSPENDED: "true"},
        )
        _unbackfill(run)
    elif feature == DOMAIN_METADATA and snapshot.domains:
        txn = Transaction(
            snapshot,
            OP_DOMAIN_CLEANUP,
            parameters={"domainMetadataRemovedCount": len(snapshot.domains)},
            purpose=Access.WRITE,
        )
        txn.add_actions(
            {"domainMetadata": {"domain": d, "configuration": m.configuration, "removed": True}}
            for d, m in sorted(snapshot.domains.items())
        )
        run.commit(txn)
    return found


# ------------------------------------------------------------------- rewrites of the drops
def _rewrite_narrower_files(run: _Run) -> None:
    """Rewrite the live files whose Parquet types differ from the table's (read from their
    footers, as Delta Spark's REWRITE_TYPE_WIDENING does), cast to the table's types."""
    snapshot = run.latest()

    probe = Rewriter(snapshot, [])
    expected = probe.output_schema()
    paths = snapshot.file_index.column("path").to_pylist()
    with ThreadPoolExecutor(4) as pool:
        differs = list(pool.map(lambda p: _differs(snapshot.storage, p, expected), paths))
    chosen = {p for p, d in zip(paths, differs, strict=True) if d}
    if chosen:
        _rewrite(run, snapshot, live_file_rows(snapshot, chosen), "REORG", {"predicate": "[]"})


def _rewrite(
    run: _Run,
    snapshot: Snapshot,
    rows: list[dict[str, Any]],
    operation: str,
    parameters: Mapping[str, Any],
    unmapped: StructType | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> None:
    """Rewrite `rows` one new file each (as purge does) and commit them as one version,
    with `metadata` (a new metaData action) in the same commit."""

    rewriter = Rewriter(snapshot, rows, unmapped=unmapped)
    if metadata is not None:
        base = rewriter.new_metadata or snapshot.metadata.to_action()
        rewriter.new_metadata = {**base, **metadata}
    names = _logical_partition_names(snapshot) if unmapped is not None else {}
    units = [
        RewriteUnit(
            (row,),
            rewriter.directory_of(row),
            {names.get(k, k): v for k, v in (row["partitionValues"] or {}).items()},
            keep={k: row.get(k) for k in ("tags", "clusteringProvider")},
        )
        for row in rows
    ]
    written, removes = rewrite_with_removes(rewriter, units, LOCAL, f"drop-feature: {operation}")
    version = rewriter.commit(
        operation,
        parameters,
        removes,
        [new.add for new in written],
        {"numRemovedFiles": len(rows), "numAddedFiles": len(written)},
    )
    run.commits.append(version)
    run.files_rewritten += len(rows)


def _differs(storage: Storage, path: str, expected: pa.Schema) -> bool:
    """Whether a data file's Parquet schema types a column differently from `expected` (the
    columns both have; Delta Spark's `fileHasDifferentTypes`)."""
    with storage.open_input(storage.table_path(path)) as handle:
        stored = pq.read_schema(handle)
    for f in expected:
        index = stored.get_field_index(f.name)
        if index >= 0 and _type_differs(stored.field(index).type, f.type):
            return True
    return False


def _type_differs(stored: pa.DataType, expected: pa.DataType) -> bool:
    if stored.equals(expected):
        return False
    if pa.types.is_struct(stored) and pa.types.is_struct(expected):
        names = {stored.field(i).name: stored.field(i).type for i in range(stored.num_fields)}
        return any(
            _type_differs(names[f.name], f.type)
            for f in (expected.field(i) for i in range(expected.num_fields))
            if f.name in names
        )
    if pa.types.is_map(stored) and pa.types.is_map(expected):
        return _type_differs(stored.key_type, expected.key_type) or _type_differs(
            stored.item_type, expected.item_type
        )
    lists = (pa.types.is_list, pa.types.is_large_list)
    if any(f(stored) for f in lists) and any(f(expected) for f in lists):
        return _type_differs(stored.value_type, expected.value_type)
    # the same logical type in another Arrow form (a unit, a string's offsets) is no widening
    for same in (pa.types.is_timestamp, pa.types.is_string, pa.types.is_large_string):
        if same(stored) and same(expected):
            return False
    strings = (pa.types.is_string, pa.types.is_large_string)
    binaries = (pa.types.is_binary, pa.types.is_large_binary)
    for family in (strings, binaries):
        if any(f(stored) for f in family) and any(f(expected) for f in family):
            return False
    return True


def _remove_type_changes(run: _Run) -> None:
    """Take `delta.typeChanges` out of the schema (Spark's UpdateColumnMetadata commit)."""
    snapshot = run.latest()
    changed = fields_with_metadata(snapshot.schema, frozenset({TYPE_CHANGES_KEY}))
    if not changed:
        return
    schema = without_field_metadata(snapshot.schema, frozenset({TYPE_CHANGES_KEY}))
    txn = Transaction(
        snapshot, OP_COLUMN_METADATA, parameters={"columns": changed}, purpose=Access.WRITE
    )
    txn.add_action(
        {"metaData": {**snapshot.metadata.to_action(), "schemaString": schema.to_json()}}
    )
    run.commit(txn)


def _logical_partition_names(snapshot: Snapshot) -> dict[str, str]:
    """Partition values' keys (physical names under column mapping) to the logical names."""
    names = {}
    for column in snapshot.partition_columns:
        f = snapshot.schema.field(column)
        names[physical_name(f)] = f.name
    return names


def _remove_column_mapping(run: _Run) -> None:
    """Rewrite every live file with logical column names and take column mapping out of the
    schema and the properties, in one commit (Spark's RemoveColumnMappingCommand)."""

    snapshot = run.latest()
    unmapped = without_field_metadata(snapshot.schema, COLUMN_MAPPING_KEYS)
    config = {
        k: v
        for k, v in _configuration(snapshot).items()
        if k not in (COLUMN_MAPPING_MODE, COLUMN_MAPPING_MAX_COLUMN_ID)
    }
    paths = set(snapshot.file_index.column("path").to_pylist())
    _rewrite(
        run,
        snapshot,
        live_file_rows(snapshot, paths),
        OP_REMOVE_COLUMN_MAPPING,
        {},
        unmapped=unmapped,
        metadata={"schemaString": unmapped.to_json(), "configuration": config},
    )


def _unbackfill(run: _Run) -> None:
    """Re-add the files that carry row ids without them, in batches (Spark's
    RowTrackingUnBackfillCommand; our transactions leave them out while row tracking is
    suspended)."""
    while True:
        snapshot = run.latest()
        files = snapshot.files
        if not files.num_rows:
            return
        batch = files.filter(_row_tracked(files)).slice(0, UNBACKFILL_BATCH)
        if not batch.num_rows:
            return
        txn = Transaction(
            snapshot, OP_UNBACKFILL, parameters={"batchId": len(run.commits)}, purpose=Access.WRITE
        )
        bodies = file_rows_as_actions(batch, columns=ADD_FIELDS)
        for body in bodies:
            body.pop("baseRowId", None)
            body.pop("defaultRowCommitVersion", None)
            body["dataChange"] = False
        txn.read_files(body["path"] for body in bodies)
        txn.add_actions({"add": body} for body in bodies)
        run.commit(txn)


def _set_properties(
    run: _Run,
    snapshot: Snapshot,
    *,
    set_: Mapping[str, str] | None = None,
    unset: tuple[str, ...] = (),
) -> int:
    """One metadata commit setting and unsetting table properties (Spark's SET / UNSET
    TBLPROPERTIES: an unset key that is also set is written as set)."""
    config = {k: v for k, v in _configuration(snapshot).items() if k not in unset}
    config.update(set_ or {})
    metadata = {**snapshot.metadata.to_action(), "configuration": config}
    operation: str
    parameters: dict[str, Any]
    if unset:
        keys = [*unset, *(k for k in (set_ or {}) if k not in unset)]
        operation, parameters = OP_UNSET, {"properties": keys, "ifExists": True}
    else:
        operation, parameters = OP_SET, {"properties": dict(set_ or {})}
    txn = Transaction(snapshot, operation, parameters=parameters, purpose=Access.WRITE)
    txn.add_action({"metaData": metadata})
    return run.commit(txn)


def _missing_dv_tombstones(snapshot: Snapshot, *, purging: bool) -> list[str]:
    """The deletion-vector files that tombstones inside the file retention reference and that
    no tombstone names yet (Delta Spark's `generateDVTombstones`); with `purging`, also those
    of the live files a purge is about to remove (what the plan will find after it)."""
    tombstones = snapshot.tombstones
    retention = snapshot.properties.deleted_file_retention_ms
    horizon = clock.now_ms() - retention
    sources: list[pa.Array] = []
    plain: set[str] = set()
    if tombstones.num_rows:
        stamps = pc.fill_null(tombstones.column("deletionTimestamp"), 0)
        young = tombstones.filter(pc.greater(stamps, horizon))
        if young.num_rows:
            sources.append(dv_relative_paths(young.column("deletionVector")).drop_null())
        without = tombstones.filter(pc.is_null(tombstones.column("deletionVector")))
        plain = set(without.column("path").to_pylist())
    if purging and snapshot.file_index.num_rows:
        sources.append(dv_relative_paths(snapshot.file_index.column("deletionVector")).drop_null())
    found = {p for array in sources for p in array.to_pylist()}
    return sorted(found - plain)


def _downgrade(run: _Run, feature: str, *, truncate_history: bool, protect: bool) -> int:
    """The DROP FEATURE commit, after checking the latest version holds no trace of the
    feature; with `protect`, checkpointProtection is added and
    `delta.requireCheckpointProtectionBeforeVersion` set to the commit's own version (a writer
    that commits first makes the attempt start again from its version)."""
    for _ in range(DOWNGRADE_ATTEMPTS):
        snapshot = run.latest()
        left = traces(feature, snapshot)
        if left:
            raise ConcurrentModification(
                f"{snapshot.storage.url}: cannot drop {feature}: the table still has"
                f" {', '.join(left)} (a concurrent writer?); run the drop again"
            )
        protocol = snapshot.protocol
        if protect:
            protocol = protocol.with_features(CHECKPOINT_PROTECTION)
        protocol = protocol.without_feature(feature)
        removed = REMOVED_AT_DOWNGRADE.get(feature, ())
        config = {k: v for k, v in _configuration(snapshot).items() if k not in removed}
        if protect:
            config[REQUIRE_CHECKPOINT_PROTECTION_BEFORE_VERSION] = str(snapshot.version + 1)
        txn = Transaction(
            snapshot,
            OP_DROP,
            parameters={"featureName": feature, "truncateHistory": truncate_history},
            purpose=Access.WRITE,
            max_attempts=1,
        )
        txn.add_action({"protocol": protocol.to_action()})
        txn.add_action({"metaData": {**snapshot.metadata.to_action(), "configuration": config}})
        if feature == ROW_TRACKING and ROW_TRACKING_DOMAIN in snapshot.domains:
            domain = snapshot.domains[ROW_TRACKING_DOMAIN]
            txn.add_action(
                {
                    "domainMetadata": {
                        "domain": ROW_TRACKING_DOMAIN,
                        "configuration": domain.configuration,
                        "removed": True,
                    }
                }
            )
        try:
            return run.commit(txn)
        except ConcurrentModification:
            continue
    raise ConcurrentModification(
        f"{run.storage.url}: other writers kept committing; the drop of {feature} did not land"
        f" after {DOWNGRADE_ATTEMPTS} attempts; run it again"
    )


# --------------------------------------------------------------------- history truncation
def _truncate(run: _Run, retention_ms: int, feature: str) -> tuple[str, int | None] | None:
    """Delete the log older than `retention_ms` (minute cutoff, even where expired-log
    cleanup is disabled, as Delta Spark's drop does); then (why, when to run again) if a
    version left still holds a trace of `feature`, else None."""
    snapshot = run.latest()
    cleanup = plan_cleanup(
        snapshot,
        clock.now_ms(),
        retention_ms=retention_ms,
        truncate_to_ms=MINUTE_MS,
        even_if_disabled=True,
    )
    if not cleanup.nothing_to_do:
        run.log_files_deleted += execute_cleanup(cleanup).num_deleted
    traced = _newest_trace(run.storage, feature, snapshot.version)
    if traced is None:
        return None
    version, when = traced
    why = (
        f"version {version} (and maybe others) still holds traces of {feature} and is not older"
        f" than {format_duration(retention_ms)}: the history cannot be truncated yet"
    )
    return why, when + retention_ms + MINUTE_MS if when else None


def _newest_trace(storage: Storage, feature: str, upto: int) -> tuple[int, int] | None:
    """The newest version up to `upto` whose commit, or whose state at the earliest
    checkpoint (tombstones aside), uses `feature` (Spark's `historyContainsFeature`): its
    version and file time; None when the history is clean."""
    listing = list_log_files(storage)
    newest: tuple[int, int] | None = None
    checkpoints = [ref for ref in complete_checkpoints(listing) if ref.version <= upto]
    if checkpoints:
        earliest = min(ref.version for ref in checkpoints)
        state = load_snapshot(storage, earliest)
        if _state_uses(feature, state):
            newest = (earliest, _file_time(listing, earliest))
    for f in listing:
        if f.kind is not LogFileKind.COMMIT or f.version > upto:
            continue
        newer = newest is None or f.version > newest[0]
        if newer and any(_action_uses(feature, a) for a in read_commit_actions(storage, f.version)):
            newest = (f.version, f.modification_time)
    return newest


def _file_time(listing: list[LogFile], version: int) -> int:
    return max((f.modification_time for f in listing if f.version == version), default=0)


def _state_uses(feature: str, snapshot: Snapshot) -> bool:
    if feature == DELETION_VECTORS:
        return _dv_enabled(snapshot) or _num_dvs(snapshot) > 0
    if feature == V2_CHECKPOINT:
        return snapshot.properties.checkpoint_policy == "v2" or _v2_in_use(snapshot)
    if feature in (TYPE_WIDENING, TYPE_WIDENING_PREVIEW):
        return bool(fields_with_metadata(snapshot.schema, frozenset({TYPE_CHANGES_KEY})))
    if feature == COLUMN_MAPPING:
        return snapshot.properties.column_mapping_mode != "none"
    return False


def _action_uses(feature: str, action: Mapping[str, Any]) -> bool:
    """Spark's `actionUsesFeature`: which actions of a commit carry `feature`."""
    if feature == DELETION_VECTORS:
        if "metaData" in action:
            value = (action["metaData"].get("configuration") or {}).get(ENABLE_DELETION_VECTORS)
            return str(value).lower() == "true"
        return any(
            bool((action.get(kind) or {}).get("deletionVector"))
            for kind in ("add", "remove", "cdc")
        )
    if feature == V2_CHECKPOINT:
        if "metaData" in action:
            config = action["metaData"].get("configuration") or {}
            return config.get(CHECKPOINT_POLICY) == "v2"
        return "checkpointMetadata" in action or "sidecar" in action
    if "metaData" not in action:
        return False
    metadata = action["metaData"]
    if feature in (TYPE_WIDENING, TYPE_WIDENING_PREVIEW):
        return TYPE_CHANGES_KEY in str(metadata.get("schemaString") or "")
    if feature == COLUMN_MAPPING:
        mode = (metadata.get("configuration") or {}).get(COLUMN_MAPPING_MODE, "none")
        return str(mode).lower() != "none"
    return False


def _history_truncated_before(storage: Storage, version: int) -> bool:
    """Whether no commit before `version` is left and the earliest checkpoint is at or after
    it (Spark's `historyPriorToCheckpointProtectionVersionIsTruncated`)."""
    if version <= 0:
        return True
    listing = list_log_files(storage)
    if any(f.kind is LogFileKind.COMMIT and f.version < version for f in listing):
        return False
    checkpoints = complete_checkpoints(listing)
    return bool(checkpoints) and min(ref.version for ref in checkpoints) >= version


def _drop_checkpoint_protection(
    plan: DropFeaturePlan, run: _Run, say: Callable[[str], None]
) -> DropFeatureResult:
    """Truncate the history before the protected version in one go, unset the property,
    then drop the feature (Spark's CheckpointProtectionPreDowngradeCommand)."""
    snapshot = run.latest()
    protected = snapshot.properties.require_checkpoint_protection_before_version
    retention = plan.truncate_retention_ms or 0
    if not _history_truncated_before(run.storage, protected):
        say(f"drop-feature: truncating the history before version {protected}")
        run.empty_commit_and_checkpoint()
        cleanup = plan_cleanup(
            run.latest(),
            clock.now_ms(),
            retention_ms=retention,
            truncate_to_ms=MINUTE_MS,
            even_if_disabled=True,
        )
        if not cleanup.nothing_to_do:
            run.log_files_deleted += execute_cleanup(cleanup).num_deleted
        if not _history_truncated_before(run.storage, protected):
            listing = list_log_files(run.storage)
            newest = max((f.modification_time for f in listing if f.version < protected), default=0)
            return _wait(
                plan,
                run,
                f"the log before version {protected} (which checkpointProtection keeps until it"
                f" all goes at once) is not yet older than {format_duration(retention)}",
                newest + retention + MINUTE_MS if newest else None,
            )
    snapshot = run.latest()
    if REQUIRE_CHECKPOINT_PROTECTION_BEFORE_VERSION in snapshot.metadata.configuration:
        _set_properties(run, snapshot, unset=(REQUIRE_CHECKPOINT_PROTECTION_BEFORE_VERSION,))
    version = _downgrade(run, CHECKPOINT_PROTECTION, truncate_history=True, protect=False)
    return _result(plan, run, dropped=True, version=version)


# ------------------------------------------------------------------------------ results
def _result(
    plan: DropFeaturePlan,
    run: _Run,
    *,
    dropped: bool,
    version: int | None,
    waiting_for: str | None = None,
    run_again_after_ms: int | None = None,
) -> DropFeatureResult:
    latest = run.latest()
    return DropFeatureResult(
        table=plan.table,
        feature=plan.feature,
        dropped=dropped,
        version=version,
        protocol=latest.protocol.to_action(),
        commits=tuple(run.commits),
        checkpoints=tuple(run.checkpoints),
        files_purged=run.files_purged,
        files_rewritten=run.files_rewritten,
        dv_tombstones=run.dv_tombstones,
        log_files_deleted=run.log_files_deleted,
        waiting_for=waiting_for,
        run_again_after_ms=run_again_after_ms,
        warnings=reader_warnings(latest) if dropped else (),
    )


def _wait(plan: DropFeaturePlan, run: _Run, why: str, after_ms: int | None) -> DropFeatureResult:
    return _result(
        plan,
        run,
        dropped=False,
        version=None,
        waiting_for=why,
        run_again_after_ms=after_ms,
    )


# ------------------------------------------------------------------------------ readers
def reader_warnings(snapshot: Snapshot) -> tuple[str, ...]:
    """What known readers get wrong on `snapshot`'s table (docs/operations.md, "Who reads a
    table after a drop"): the pyarrow reader of deltalake (delta-rs) 1.6
    (`DeltaTable.to_pyarrow_table` / `to_pyarrow_dataset`) opens a column-mapped table at
    reader version 2 (no reader features listed) and reads every mapped column as NULL, where
    Delta Spark, DuckDB and deltalake's own `scan()` read the values; at reader version 3 it
    refuses the table instead."""
    protocol = snapshot.protocol
    mode = snapshot.properties.column_mapping_mode
    if mode != "none" and protocol.min_reader_version == 2:
        return (
            (
                "deltalake (delta-rs) 1.6's pyarrow reader (to_pyarrow_table, to_pyarrow_dataset)"
                f" reads the columns of this {mode}-mapped table at reader version 2 as NULL (its"
                " bug; Delta Spark, DuckDB and deltalake's scan() read the values): drop"
                " columnMapping as well (delta-ops drop-feature TABLE columnMapping) before"
                " reading it that way"
            ),
        )
    return ()


# ------------------------------------------------------------------------------ the operation
def describe_plan(plan: DropFeaturePlan) -> str:
    how = {
        "fast": "fast drop (history kept, protected by checkpoints)",
        "direct": "a writer feature: dropped without history protection",
        "truncate": "the history is truncated",
        "finish": "the drop committed earlier; finishing it",
    }[plan.mode]
    before = Protocol.from_action(plan.protocol_before)
    after = Protocol.from_action(plan.protocol_after)
    lines = [f"drop {plan.feature} from version {plan.version} ({how}): {before} -> {after}"]
    lines += [f"  {i}. {step.action}: {step.detail}" for i, step in enumerate(plan.steps, 1)]
    return "\n".join(lines)


def describe_result(result: DropFeatureResult) -> str:
    protocol = Protocol.from_action(result.protocol)
    done = []
    if result.files_purged:
        done.append(f"{result.files_purged:,} files purged")
    if result.files_rewritten:
        done.append(f"{result.files_rewritten:,} files rewritten")
    if result.dv_tombstones:
        done.append(f"{result.dv_tombstones:,} deletion-vector tombstones")
    if result.log_files_deleted:
        done.append(f"{result.log_files_deleted:,} log files deleted")
    if result.checkpoints:
        done.append(f"checkpoints of {', '.join(map(str, result.checkpoints))}")
    extra = f" ({'; '.join(done)})" if done else ""
    if not result.dropped:
        when = (
            f"; run again after {format_time_ms(result.run_again_after_ms)}"
            if result.run_again_after_ms
            else ""
        )
        return f"{result.feature} not dropped yet: {result.waiting_for}{when}{extra}"
    at = f" at version {result.version}" if result.version is not None else ""
    warned = "".join(f"\nwarning: {w}" for w in result.warnings)
    return f"dropped {result.feature}{at}: protocol {protocol}{extra}{warned}"


@dataclass(frozen=True)
class DropFeatureOptions:
    """The drop_feature operation's options (see its `OPERATION`)."""

    feature: str | None = None
    truncate_history: bool = False


OPERATION: Operation[DropFeatureOptions, DropFeaturePlan, DropFeatureResult] = Operation(
    name="drop_feature",
    needs=Access.WRITE,
    help="take a table feature out of the protocol (ALTER TABLE ... DROP FEATURE)",
    options=(
        Option(
            "feature",
            OptionKind.TEXT,
            f"the table feature to drop: {', '.join(DROPPABLE)}",
            positional=True,
        ),
        Option(
            "truncate_history",
            OptionKind.FLAG,
            "truncate the history instead of protecting it with checkpoints: the first run"
            " prepares, a run after delta.dropFeatureTruncateHistory.retentionDuration drops",
            False,
        ),
    ),
    options_type=DropFeatureOptions,
    plan_with=lambda snapshot, options, engine: plan_drop_feature(
        snapshot, feature=options.feature, truncate_history=options.truncate_history
    ),
    execute_with=execute_drop_feature,
    describe_plan=describe_plan,
    describe_result=describe_result,
    touched=lambda result: (
        result.files_purged + result.files_rewritten + result.log_files_deleted,
        None,
    ),
)


__all__ = [
    "DROPPABLE",
    "OPERATION",
    "DropFeaturePlan",
    "DropFeatureResult",
    "Step",
    "describe_plan",
    "describe_result",
    "execute_drop_feature",
    "plan_drop_feature",
    "reader_warnings",
    "traces",
]
