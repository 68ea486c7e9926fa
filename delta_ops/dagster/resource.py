"""The only Dagster code that touches tables: a ConfigurableResource over delta-ops' operations.

Read-only probes are cheap enough for sensors; mutating calls return the operations' typed
results (frozen dataclasses), which the asset and op layers turn into metadata.
"""

import time
from collections.abc import Callable
from typing import Any

import dagster as dg
from pydantic import Field

from delta_ops.ops.checkpoint import (
    CheckpointPlan,
    CheckpointResult,
    execute_checkpoint,
    plan_checkpoint,
)
from delta_ops.ops.cleanup import CleanupPlan, CleanupResult, execute_cleanup, plan_cleanup
from delta_ops.ops.probe import (
    CommitProbe,
    MaintenanceWork,
    TableHealth,
    maintenance_work,
    probe_commits,
    table_health,
)
from delta_ops.ops.row_tracking import (
    RowTrackingPlan,
    RowTrackingResult,
    execute_enable_row_tracking,
    plan_enable_row_tracking,
)
from delta_ops.ops.vacuum import VacuumPlan, VacuumResult, execute_vacuum, plan_vacuum
from delta_ops.protocol.properties import parse_interval_ms
from delta_ops.storage import Storage
from delta_ops.table.snapshot import Snapshot, load_snapshot


def now_ms() -> int:
    return int(time.time() * 1000)


def retention_ms(text: str | None) -> int | None:
    """'7 days' / 'interval 2 hours' (Spark's interval syntax), or None for the table's own."""
    return None if text in (None, "") else parse_interval_ms(text)


class DeltaMaintenanceResource(dg.ConfigurableResource):  # type: ignore[type-arg]
    """Runs delta-ops maintenance on Delta tables.

    Attributes:
        storage_options: fsspec options for every table (credentials, endpoints).
        engine: "local" (pyarrow + threads). Spark-backed maintenance is not available yet.
    """

    storage_options: dict[str, str] = Field(
        default_factory=dict, description="fsspec storage options for every table"
    )
    engine: str = Field(default="local", description="execution engine for maintenance ('local')")

    def _storage(self, url: str, extra: dict[str, str] | None = None) -> Storage:
        if self.engine != "local":
            raise dg.Failure(
                f"engine {self.engine!r} is not available; use 'local'", allow_retries=False
            )
        options = {**self.storage_options, **(extra or {})}
        return Storage.open(url, options or None)

    # ------------------------------------------------------------------ read-only probes
    def snapshot(self, url: str, *, storage_options: dict[str, str] | None = None) -> Snapshot:
        return load_snapshot(self._storage(url, storage_options))

    def probe_commits(
        self,
        url: str,
        *,
        known_version: int | None = None,
        known_interval: int | None = None,
        storage_options: dict[str, str] | None = None,
    ) -> CommitProbe:
        return probe_commits(
            self._storage(url, storage_options),
            known_version=known_version,
            known_interval=known_interval,
        )

    def work(self, url: str, *, storage_options: dict[str, str] | None = None) -> MaintenanceWork:
        return maintenance_work(self.snapshot(url, storage_options=storage_options), now_ms())

    def health(self, url: str, *, storage_options: dict[str, str] | None = None) -> TableHealth:
        return table_health(self.snapshot(url, storage_options=storage_options), now_ms())

    # ------------------------------------------------------------------ operations: plan
    def plan_checkpoint(
        self, url: str, *, parts: int | None = None, storage_options: dict[str, str] | None = None
    ) -> CheckpointPlan:
        return plan_checkpoint(
            self.snapshot(url, storage_options=storage_options), now_ms(), parts=parts
        )

    def plan_cleanup(
        self,
        url: str,
        *,
        retention: str | None = None,
        storage_options: dict[str, str] | None = None,
    ) -> CleanupPlan:
        return plan_cleanup(
            self.snapshot(url, storage_options=storage_options),
            now_ms(),
            retention_ms=retention_ms(retention),
        )

    def plan_vacuum(
        self,
        url: str,
        *,
        retention: str | None = None,
        mode: str = "full",
        force: bool = False,
        storage_options: dict[str, str] | None = None,
    ) -> VacuumPlan:
        return plan_vacuum(
            self.snapshot(url, storage_options=storage_options),
            now_ms(),
            retention_ms=retention_ms(retention),
            mode=mode,
            force=force,
        )

    def plan_row_tracking(
        self, url: str, *, batch_files: int = 22_000, storage_options: dict[str, str] | None = None
    ) -> RowTrackingPlan:
        return plan_enable_row_tracking(
            self.snapshot(url, storage_options=storage_options), batch_files=batch_files
        )

    # ------------------------------------------------------------------ operations: execute
    def execute_checkpoint(self, plan: CheckpointPlan) -> CheckpointResult:
        return execute_checkpoint(plan)

    def execute_cleanup(self, plan: CleanupPlan) -> CleanupResult:
        return execute_cleanup(plan)

    def execute_vacuum(self, plan: VacuumPlan) -> VacuumResult:
        return execute_vacuum(plan)

    def execute_row_tracking(
        self, plan: RowTrackingPlan, *, progress: Callable[[str], None] | None = None
    ) -> RowTrackingResult:
        return execute_enable_row_tracking(plan, progress=progress)


def result_metadata(result: Any) -> dict[str, Any]:
    """A result or plan as flat Dagster metadata (numbers stay numbers so the UI plots them)."""
    data = result.to_dict()
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out[key] = value
        elif isinstance(value, (bool, str)) or value is None:
            out[key] = dg.MetadataValue.text(str(value))
        elif isinstance(value, (list, tuple)):
            out[f"num_{key}" if not key.startswith("num_") else key] = len(value)
            if value and len(value) <= 50:
                out[key] = dg.MetadataValue.json(list(value))
        else:
            out[key] = dg.MetadataValue.json(value)
    return out
