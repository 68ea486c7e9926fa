"""Health checks per table: checkpoint lag, reconstructible log, writer features, backlog,
retention settings, row-tracking state, small files, rows hidden by deletion vectors and the
clustering layout, as one multi_asset_check on the table asset."""

from collections.abc import Callable, Iterator
from typing import Any

import dagster as dg

from delta_ops.dagster.resource import DeltaMaintenanceResource
from delta_ops.dagster.targets import DeltaTableTarget
from delta_ops.dagster.translator import DeltaMaintenanceTranslator, asset_actions
from delta_ops.errors import DeltaOpsError
from delta_ops.layout.clustering import ClusteringLayout
from delta_ops.service.due import COMPACT_MIN_FILES, PURGE_MIN_SHARE, checkpoint_due
from delta_ops.service.health import RowTracking
from delta_ops.table.checksum import ChecksumCheck

#: Each check and what it tells the reader of the asset's page.
CHECKS: dict[str, str] = {
    "checkpoint_lag": "Commits since the last checkpoint stay within delta.checkpointInterval, "
    "so readers replay few JSON commits. Fix: the checkpoint job (delta-ops checkpoint).",
    "log_reconstructible": "The latest version can be rebuilt from a checkpoint and contiguous "
    "commits (no gap, no unreadable checkpoint). Fix: delta-ops inspect names the gap or the "
    "broken file; a new checkpoint (delta-ops checkpoint) covers it while the log is whole.",
    "writer_features_supported": "Every writer feature of the table is one delta-ops honours, "
    "so its maintenance can commit. Fix: maintain the table with an engine that writes the "
    "features the failure lists.",
    "tombstone_backlog": "Removed files past the retention are few, so storage (and deleted "
    "data) does not pile up. Fix: the vacuum job (delta-ops vacuum).",
    "retention_properties_valid": "delta.logRetentionDuration and "
    "delta.deletedFileRetentionDuration parse and leave time travel a sane window. Fix: set "
    "them to durations such as 'interval 7 days' (ALTER TABLE ... SET TBLPROPERTIES).",
    "row_tracking_state": "Row tracking is in the state the target asks for (enabled and "
    "backfilled, or off). Fix: the row_tracking job (delta-ops enable-row-tracking).",
    "small_files": "Few small files, so readers open few files per query. Fix: the compact "
    "job (delta-ops compact).",
    "deleted_rows": "Few rows hidden by deletion vectors, so deleted data leaves the files and "
    "readers skip less. Fix: the purge job (delta-ops purge), then vacuum.",
    "clustering_layout": "On a table clustered by columns (liquid clustering), few files are "
    "not clustered yet, so readers skip files by the clustering columns' min/max statistics "
    "(the metadata gives the share of files a point on those columns cannot skip). Fix: the "
    "compact job (delta-ops compact clusters such a table).",
    "checksum_agrees": "The latest version's checksum (N.crc), where it has one, agrees with the "
    "state its log replays to; one that disagrees or does not parse means the log or the "
    "checksum changed after the commit (a corruption alarm). Fix: find out what changed "
    "(delta-ops checksum --dry-run names each field); a missing checksum is written by the "
    "checksum job.",
}
#: a compaction is due from this many small files (`delta_ops.service.due`, the rule every
#: front end asks: the check fails exactly when a schedule would compact)
SMALL_FILES_WARN = COMPACT_MIN_FILES
#: a clustering is worth it from this many files not clustered yet
UNCLUSTERED_FILES_WARN = 50
#: a purge is due from this share of rows hidden by deletion vectors (`delta_ops.service.due`)
DELETED_ROWS_WARN = PURGE_MIN_SHARE
HOUR_MS = 3_600_000


def check_keys(
    table: DeltaTableTarget, translator: DeltaMaintenanceTranslator
) -> list[dg.AssetCheckKey]:
    """The keys of `table`'s health checks: what a maintenance run of the table re-evaluates
    after its actions."""
    asset_key = translator.get_asset_spec(table).key
    return [dg.AssetCheckKey(asset_key, name) for name in CHECKS]


def build_table_checks(
    table: DeltaTableTarget,
    *,
    prefix: str,
    translator: DeltaMaintenanceTranslator,
    resource_key: str,
) -> dg.AssetChecksDefinition:
    asset_key = translator.get_asset_spec(table).key
    # after the table's maintenance in any run that has both: a maintenance run re-evaluates
    # the checks on what it left, so the UI never shows a fresh materialization beside the
    # state before it
    maintenance = [translator.get_action_spec(table, a).key for a in asset_actions(table)]
    specs = [
        dg.AssetCheckSpec(
            name=name, asset=asset_key, description=description, additional_deps=maintenance
        )
        for name, description in CHECKS.items()
    ]

    @dg.multi_asset_check(
        name=f"{prefix}__{table.safe_name}__health",
        specs=specs,
        can_subset=True,
        required_resource_keys={resource_key},
    )
    def _health(context: dg.AssetCheckExecutionContext) -> Iterator[dg.AssetCheckResult]:
        resource: DeltaMaintenanceResource = getattr(context.resources, resource_key)
        selected = {k.name for k in context.selected_asset_check_keys}

        def result(
            name: str,
            passed: bool,
            severity: dg.AssetCheckSeverity = dg.AssetCheckSeverity.WARN,
            **metadata: Any,
        ) -> dg.AssetCheckResult:
            return dg.AssetCheckResult(
                check_name=name,
                asset_key=asset_key,
                passed=passed,
                severity=severity,
                metadata=metadata,
            )

        try:
            health = resource.health(table.url, storage_options=dict(table.storage_options) or None)
        except DeltaOpsError as exc:
            for name in CHECKS:
                if name in selected:
                    yield result(name, False, dg.AssetCheckSeverity.ERROR, error=str(exc))
            return
        checks = {
            "checkpoint_lag": lambda: result(
                "checkpoint_lag",
                not checkpoint_due(health.commits_since_checkpoint, health.checkpoint_interval),
                dg.AssetCheckSeverity.ERROR
                if health.commits_since_checkpoint > 10 * health.checkpoint_interval
                else dg.AssetCheckSeverity.WARN,
                commits_since_checkpoint=health.commits_since_checkpoint,
                checkpoint_interval=health.checkpoint_interval,
                version=health.version,
            ),
            "log_reconstructible": lambda: result(
                "log_reconstructible", True, version=health.version
            ),
            "writer_features_supported": lambda: result(
                "writer_features_supported",
                not health.unsupported_writer_features,
                dg.AssetCheckSeverity.ERROR,
                unsupported=", ".join(health.unsupported_writer_features) or "none",
            ),
            "tombstone_backlog": lambda: result(
                "tombstone_backlog",
                health.expired_tombstones == 0,
                expired_tombstones=health.expired_tombstones,
                reclaimable_bytes=health.reclaimable_bytes,
            ),
            "retention_properties_valid": lambda: result(
                "retention_properties_valid",
                health.log_retention_ms >= health.deleted_file_retention_ms,
                dg.AssetCheckSeverity.ERROR,
                log_retention_hours=health.log_retention_ms / HOUR_MS,
                deleted_file_retention_hours=health.deleted_file_retention_ms / HOUR_MS,
            ),
            "row_tracking_state": lambda: result(
                "row_tracking_state",
                not (
                    health.row_tracking is not RowTracking.OFF and health.files_without_row_ids > 0
                ),
                row_tracking=health.row_tracking.value,
                files_without_row_ids=health.files_without_row_ids,
            ),
            "small_files": lambda: result(
                "small_files",
                health.small_files < SMALL_FILES_WARN,
                small_files=health.small_files,
                threshold=SMALL_FILES_WARN,
            ),
            "deleted_rows": lambda: result(
                "deleted_rows",
                _deleted_ratio(health.deleted_records, health.num_records) < DELETED_ROWS_WARN,
                deleted_records=health.deleted_records,
                deleted_ratio=round(_deleted_ratio(health.deleted_records, health.num_records), 4),
                threshold=DELETED_ROWS_WARN,
            ),
            "checksum_agrees": lambda: _checksum_result(result, health.checksum),
            "clustering_layout": lambda: _layout_result(result, health.layout),
        }
        for name in CHECKS:
            if name in selected:
                yield checks[name]()

    return _health


def _deleted_ratio(deleted: int, total: int | None) -> float:
    return deleted / total if total else 0.0


def _layout_result(
    result: Callable[..., dg.AssetCheckResult], layout: ClusteringLayout | None
) -> dg.AssetCheckResult:
    """Passes on a table not clustered by columns, and on one with fewer than
    UNCLUSTERED_FILES_WARN files left to cluster."""
    if layout is None:
        return result("clustering_layout", True, status="not clustered")
    return result(
        "clustering_layout",
        layout.unclustered_files < UNCLUSTERED_FILES_WARN,
        clustering_columns=", ".join(layout.columns),
        files=layout.files,
        unclustered_files=layout.unclustered_files,
        unskippable_share=layout.unskippable_share,
        threshold=UNCLUSTERED_FILES_WARN,
    )


def _checksum_result(
    result: Callable[..., dg.AssetCheckResult], check: ChecksumCheck | None
) -> dg.AssetCheckResult:
    """Passes unless the version's checksum is there and disagrees or does not parse (an
    error: a corruption alarm); a missing one passes, saying so."""
    if check is None:
        return result("checksum_agrees", True, status="not checked")
    return result(
        "checksum_agrees",
        not check.corrupt,
        dg.AssetCheckSeverity.ERROR,
        status=check.status.value,
        file=check.file_name,
        version=check.version,
        mismatches="; ".join(check.mismatches) or "none",
        absent=", ".join(check.absent) or "none",
    )
