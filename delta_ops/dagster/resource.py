"""The only Dagster code that touches tables: a ConfigurableResource over delta-ops' operations.

Read-only probes are cheap enough for sensors; mutating calls return the operations' typed
results (frozen dataclasses), which the asset and op layers turn into metadata.
"""

from collections.abc import Callable, Mapping
from typing import Any

import dagster as dg
from pydantic import Field

from delta_ops import clock
from delta_ops.errors import InvalidValue
from delta_ops.ops.engines import LOCAL, Engine
from delta_ops.ops.operation import AnyOperation
from delta_ops.ops.progress import LogLines, reporting
from delta_ops.ops.registry import OPERATIONS
from delta_ops.ops.results import to_data
from delta_ops.protocol.units import format_duration
from delta_ops.service.due import Verdicts, judge
from delta_ops.service.health import TableHealth, due_facts, table_health
from delta_ops.service.history import OperationHistory
from delta_ops.service.probe import CommitProbe, probe_commits
from delta_ops.service.runs import Run, run_operation
from delta_ops.storage import Storage
from delta_ops.storage.warehouse import history_location
from delta_ops.table.snapshot import Snapshot, load_head, load_snapshot

#: `*_ms` values from here on are times (2001-09-09), below it durations
_EPOCH_MS_FROM = 1_000_000_000_000


def operation_named(name: str) -> AnyOperation:
    """A registered operation by its name (`cleanup`), its CLI spelling (`drop-feature`) or a
    name it had before (`log_cleanup`, with a deprecation warning)."""
    try:
        return OPERATIONS.lookup(name, "maintenance operation")
    except InvalidValue as exc:
        raise dg.Failure(str(exc)) from None


class DeltaMaintenanceResource(dg.ConfigurableResource):  # type: ignore[type-arg]
    """Runs delta-ops maintenance on Delta tables, every operation through the ops registry.

    Attributes:
        storage_options: fsspec options for every table (credentials, endpoints); a table's
            own options win.
    """

    storage_options: dict[str, str] = Field(
        default_factory=dict, description="fsspec storage options for every table"
    )
    history: bool = Field(
        default=True,
        description="record every operation run (failures and skips too) in the operation"
        " history, a Delta table DuckDB, Spark and deltalake read",
    )
    history_location: str | None = Field(
        default=None,
        description="the operation history's path or URL (default: _delta_ops_history in the"
        " folder holding the tables; build_delta_maintenance_defs sets the fleet's)",
    )
    progress_every_seconds: float = Field(
        default=10.0,
        gt=0,
        description="while a long step runs (deleting files, a backfill), log its progress "
        "(files and bytes done, rate, time left) to the run log this often",
    )

    def _storage(self, url: str, extra: Mapping[str, str] | None = None) -> Storage:
        options = {**self.storage_options, **(extra or {})}
        return Storage.open(url, options or None)

    # ------------------------------------------------------------------ read-only probes
    def snapshot(self, url: str, *, storage_options: Mapping[str, str] | None = None) -> Snapshot:
        return load_snapshot(self._storage(url, storage_options))

    def probe_commits(
        self,
        url: str,
        *,
        known_version: int | None = None,
        known_interval: int | None = None,
        storage_options: Mapping[str, str] | None = None,
    ) -> CommitProbe:
        return probe_commits(
            self._storage(url, storage_options),
            known_version=known_version,
            known_interval=known_interval,
        )

    def due(
        self,
        url: str,
        *,
        storage_options: Mapping[str, str] | None = None,
        log_retention_ms: int | None = None,
        file_retention_ms: int | None = None,
        rewrites: bool = True,
    ) -> Verdicts:
        """Which maintenance actions are due (`delta_ops.service.due`), judged with the retentions
        the runs will use (None: the table's own); `rewrites=False` leaves compaction and purge
        unjudged (their small-file count is the costly fact)."""
        facts = due_facts(
            self.snapshot(url, storage_options=storage_options),
            clock.now_ms(),
            log_retention_ms=log_retention_ms,
            file_retention_ms=file_retention_ms,
            rewrites=rewrites,
        )
        return judge(facts)

    def refusal(
        self, operation: str, url: str, *, storage_options: Mapping[str, str] | None = None
    ) -> str | None:
        """Why the table's protocol refuses a registered operation, or None when it allows it
        (reads only the latest protocol and metadata)."""
        head = load_head(self._storage(url, storage_options))
        return head.protocol.refusal(operation_named(operation).needs)

    def health(self, url: str, *, storage_options: Mapping[str, str] | None = None) -> TableHealth:
        return table_health(self.snapshot(url, storage_options=storage_options), clock.now_ms())

    # ------------------------------------------------------------------ operations
    def plan(
        self,
        operation: str,
        url: str,
        options: Mapping[str, Any] | None = None,
        *,
        storage_options: Mapping[str, str] | None = None,
    ) -> Any:
        """Plan a registered operation on the table at `url` (options as the run config has
        them: durations as text, e.g. ``{"retention": "7d"}``)."""
        op = operation_named(operation)
        values = op.parse(dict(options or {}))
        engine = _engine(op.engine_name(values))
        return op.plan(op.load(self._storage(url, storage_options)), values, engine)

    def run(
        self,
        operation: str,
        url: str,
        options: Mapping[str, Any] | None = None,
        *,
        storage_options: Mapping[str, str] | None = None,
        dry_run: bool = False,
        progress: Callable[[str], None] | None = None,
        table_name: str | None = None,
    ) -> Run[Any, Any]:
        """Plan a registered operation on the table at `url` and execute it unless its plan
        has nothing to do or this is a dry run (`delta_ops.service.runs.run_operation`), recording
        the run in the history (not a dry run). With `progress` (the step's
        `context.log.info`), messages and periodic progress lines of long work go there."""
        op = operation_named(operation)
        values = op.parse(dict(options or {}))
        lines = LogLines(progress, every_s=self.progress_every_seconds) if progress else None
        with reporting(lines):
            return run_operation(
                op,
                self._storage(url, storage_options),
                values,
                _engine(op.engine_name(values)),
                dry_run=dry_run,
                skip_idle=True,
                progress=progress,
                history=self.history_for(url, storage_options),
                table_name=table_name,
                front_end="dagster",
            )

    def history_for(
        self, url: str, storage_options: Mapping[str, str] | None = None
    ) -> OperationHistory | None:
        """Where runs on the table at `url` are recorded (None: not recorded)."""
        if not self.history:
            return None
        location = self.history_location or history_location([url])
        options = {**self.storage_options, **(storage_options or {})}
        return OperationHistory(location, options or None) if location else None

    def execute(
        self, operation: str, plan: Any, *, progress: Callable[[str], None] | None = None
    ) -> Any:
        """Execute a plan made by `plan`; returns the operation's result. With
        `progress` (the step's `context.log.info`), messages and periodic progress lines of
        long work go there."""
        if progress is None:
            return operation_named(operation).execute(plan, None)
        lines = LogLines(progress, every_s=self.progress_every_seconds)
        with reporting(lines):
            return operation_named(operation).execute(plan, progress)


def _engine(name: str) -> Engine:
    """The engine the ``engine`` config names (`delta_ops.ops.engines`)."""
    if name == "spark":
        # the spark extra (PySpark) is optional: imported only when asked for
        from delta_ops.spark.engine import SparkEngine

        return SparkEngine()
    return LOCAL


def result_metadata(result: Any) -> dict[str, Any]:
    """A result or plan as flat Dagster metadata, typed so the UI reads it: counts and sizes
    stay numbers (the UI plots them), a `*_ms` time becomes a timestamp and a `*_ms` duration
    one readable value under its name without the suffix (`retention`: "7 days", with no raw
    milliseconds beside it, except a run's own `duration_ms`, which the UI plots), lists
    become their count (and the list, when short), and fields with no value are left out."""
    data = to_data(result)
    out: dict[str, Any] = {}
    for key, value in data.items():
        if value is None:
            continue  # nothing to say: "skipped_existing None" is noise
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if key.endswith("_ms") and isinstance(value, int) and key != "duration_ms":
                name = key[:-3] if key[:-3] not in data else key
                if value >= _EPOCH_MS_FROM:
                    out[name] = dg.MetadataValue.timestamp(value / 1000)
                else:
                    out[name] = dg.MetadataValue.text(format_duration(value))
            else:
                out[key] = value
        elif isinstance(value, (bool, str)):
            out[key] = dg.MetadataValue.text(str(value))
        elif isinstance(value, (list, tuple)):
            out[f"num_{key}" if not key.startswith("num_") else key] = len(value)
            if value and len(value) <= 50:
                out[key] = dg.MetadataValue.json(list(value))
        else:
            out[key] = dg.MetadataValue.json(value)
    return out
