"""Setting or changing a table's clustering columns (Delta Spark's ``ALTER TABLE ... CLUSTER BY``).

    plan = plan_cluster_by(snapshot, "a,b")        # or "none" to stop clustering
    result = execute_cluster_by(plan)

One commit, ``CLUSTER BY`` with Spark's parameters (``oldClusteringColumns`` and
``newClusteringColumns``, logical names joined by commas), holding what Spark's holds:

* on a table without the `clustering` writer feature, the protocol upgraded to support it
  (writer version 7, with `domainMetadata`, which it requires; a table listing the old name
  `liquid` keeps it);
* the `delta.clustering` domain:
  ``{"clusteringColumns":[["a"],["b"]],"domainName":"delta.clustering"}``, one list of
  physical names per column (under column mapping the files' names, as Spark writes them),
  and the domain's name repeated, as Delta Spark serializes it.

Spark's rules hold: only an unpartitioned table is clustered; at most four columns; each one
must have min/max statistics; ``none`` on a table that is not clustered changes nothing (on a
clustered one it writes an empty list: new data is no longer clustered). The data is not
rewritten: the next `delta-ops compact` clusters it (files clustered by the old columns are
left as they are, as in Spark, unless `compact --full`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from delta_ops.errors import InvalidValue
from delta_ops.layout.clustering import (
    CLUSTERING_DOMAIN,
    ClusteringColumn,
    parse_column_list,
    table_clustering_columns,
)
from delta_ops.ops.operation import Operation, Option, OptionKind, Timed, timed
from delta_ops.ops.results import fields_data
from delta_ops.protocol.features import Access
from delta_ops.table.snapshot import Snapshot

#: Delta Spark's limit on clustering columns (spark.databricks.delta.clusteredTable.numClusteringColumnsLimit)
MAX_CLUSTERING_COLUMNS = 4


@dataclass(frozen=True)
class ClusterByPlan:
    """The columns before and after, and the protocol the commit sets (None: unchanged)."""

    table: str
    version: int
    old_columns: tuple[str, ...]
    new_columns: tuple[str, ...]
    #: the upgraded protocol action, where the table lacks the `clustering` feature
    protocol: dict[str, Any] | None
    #: the `delta.clustering` domain's configuration the commit writes (None: no commit)
    domain_configuration: str | None
    snapshot: Snapshot = field(repr=False, compare=False)

    @property
    def nothing_to_do(self) -> bool:
        return self.domain_configuration is None

    @property
    def idle_reason(self) -> str:
        if not self.new_columns:
            return "the table is not clustered"
        return f"the table is already clustered by {', '.join(self.new_columns)}"

    def to_dict(self) -> dict[str, Any]:
        return fields_data(self)


@dataclass(frozen=True)
class ClusterByResult(Timed):
    """What changed: the version committed (None when nothing was), the columns, whether the
    protocol was upgraded."""

    table: str
    version: int | None
    old_columns: tuple[str, ...]
    new_columns: tuple[str, ...]
    protocol_upgraded: bool

    def to_dict(self) -> dict[str, Any]:
        return fields_data(self)


def plan_cluster_by(snapshot: Snapshot, columns: str) -> ClusterByPlan:
    """The commit that makes `columns` (``a,b``, or ``none``) the table's clustering columns;
    refuses a partitioned table, more than four columns and columns clustering cannot use
    (see `delta_ops.layout.clustering.resolve_columns`)."""
    snapshot.protocol.check_allows(Access.WRITE)
    text = columns.strip()
    if not text:
        raise InvalidValue("cluster-by: name the columns, e.g. a,b (or none)")
    new: tuple[ClusteringColumn, ...] = ()
    if text.lower() != "none":
        if snapshot.partition_columns:
            # Spark refuses CLUSTER BY with PARTITIONED BY as the user's error, so do we (the
            # CLI's exit 2): the table cannot take the value, whatever state it is in
            raise InvalidValue(
                f"cluster-by {text}: {snapshot.storage.url} is partitioned by"
                f" {', '.join(snapshot.partition_columns)}; Delta clusters only unpartitioned"
                " tables (use compact --zorder-by instead)"
            )
        new = parse_column_list(text, snapshot, "cluster-by")
        if len(new) > MAX_CLUSTERING_COLUMNS:
            raise InvalidValue(
                f"cluster-by {text}: {len(new)} columns; Delta clusters by at most"
                f" {MAX_CLUSTERING_COLUMNS}"
            )
    old = table_clustering_columns(snapshot) or ()
    supported = snapshot.protocol.supports("clustering")
    domain = snapshot.domains.get(CLUSTERING_DOMAIN)
    unchanged = [c.physical for c in old] == [c.physical for c in new] and (
        domain is not None and not domain.removed or not new
    )
    if (not new and not supported) or (supported and unchanged):
        configuration = None  # Spark: CLUSTER BY NONE on an unclustered table does nothing
    else:
        # byte for byte as Delta Spark's ClusteringMetadataDomain serializes (its own tests
        # compare the whole text, the redundant domainName included)
        configuration = json.dumps(
            {"clusteringColumns": [list(c.physical) for c in new], "domainName": CLUSTERING_DOMAIN},
            separators=(",", ":"),
        )
    protocol = None
    if configuration is not None and not supported:
        protocol = snapshot.protocol.with_features("clustering").to_action()
    return ClusterByPlan(
        table=snapshot.storage.url,
        version=snapshot.version,
        old_columns=tuple(c.name for c in old),
        new_columns=tuple(c.name for c in new),
        protocol=protocol,
        domain_configuration=configuration,
        snapshot=snapshot,
    )


@timed
def execute_cluster_by(plan: ClusterByPlan) -> ClusterByResult:
    """Commit the protocol upgrade (where needed) and the `delta.clustering` domain."""
    if plan.nothing_to_do:
        return ClusterByResult(plan.table, None, plan.old_columns, plan.new_columns, False)
    # start-up cost: the committing stack is loaded by the commands that write
    from delta_ops.table.transaction import Transaction

    txn = Transaction(
        plan.snapshot,
        operation="CLUSTER BY",
        parameters={
            "oldClusteringColumns": ",".join(plan.old_columns),
            "newClusteringColumns": ",".join(plan.new_columns),
        },
        purpose=Access.WRITE,
    )
    if plan.protocol is not None:
        txn.add_action({"protocol": plan.protocol})
    txn.add_action(
        {
            "domainMetadata": {
                "domain": CLUSTERING_DOMAIN,
                "configuration": plan.domain_configuration,
                "removed": False,
            }
        }
    )
    version = txn.commit().version
    return ClusterByResult(
        table=plan.table,
        version=version,
        old_columns=plan.old_columns,
        new_columns=plan.new_columns,
        protocol_upgraded=plan.protocol is not None,
    )


#: who writes to a table once it has the clustering feature (said where a run adds it):
#: deltalake 1.6 (delta-rs) refuses to ("Unsupported table features required:
#: [DomainMetadata, ClusteredTable]"), as do engines without the feature
WRITERS_AFTER_UPGRADE = (
    "writers without the clustering feature stop writing to the table: deltalake (delta-rs,"
    " 1.6) refuses to append; Delta Spark 3.1+ and delta-ops (write_delta, the streaming sink)"
    " still write, and every reader still reads"
)


def describe_plan(plan: ClusterByPlan) -> str:
    if plan.nothing_to_do:
        return f"nothing to change: {plan.idle_reason}"
    old = ", ".join(plan.old_columns) or "none"
    new = ", ".join(plan.new_columns) or "none"
    upgrade = (
        f"; adds the clustering table feature to the protocol ({WRITERS_AFTER_UPGRADE})"
        if plan.protocol
        else ""
    )
    return f"would change the clustering columns from {old} to {new}{upgrade}"


def describe_result(result: ClusterByResult) -> str:
    if result.version is None:
        return "clustering columns unchanged"
    new = ", ".join(result.new_columns) or "none"
    upgrade = (
        f" (clustering feature added: {WRITERS_AFTER_UPGRADE})" if result.protocol_upgraded else ""
    )
    return f"clustering columns set to {new} at version {result.version}{upgrade}"


# ------------------------------------------------------------------------------ the operation
@dataclass(frozen=True)
class ClusterByOptions:
    """The cluster_by operation's options (see its `OPERATION`)."""

    columns: str | None = None


OPERATION: Operation[ClusterByOptions, ClusterByPlan, ClusterByResult] = Operation(
    name="cluster_by",
    needs=Access.WRITE,
    help="set or change the clustering columns (ALTER TABLE ... CLUSTER BY); compact then"
    " clusters the rows by them",
    options=(
        Option(
            "columns",
            OptionKind.TEXT,
            "the clustering columns, comma-separated, or none",
            positional=True,
            example="e.g. a,b or none",
        ),
    ),
    options_type=ClusterByOptions,
    plan_with=lambda snapshot, options, engine: plan_cluster_by(snapshot, options.columns or ""),
    execute_with=lambda plan, progress: execute_cluster_by(plan),
    describe_plan=describe_plan,
    describe_result=describe_result,
    touched=lambda result: (0, 0),
)


__all__ = [
    "MAX_CLUSTERING_COLUMNS",
    "OPERATION",
    "ClusterByPlan",
    "ClusterByResult",
    "describe_plan",
    "describe_result",
    "execute_cluster_by",
    "plan_cluster_by",
]
