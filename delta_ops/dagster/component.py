"""`DeltaMaintenanceComponent`: a lake's maintenance declared in a Dagster project's
``defs.yaml`` (``dg scaffold defs delta_ops.dagster.DeltaMaintenanceComponent lake``).

The component builds what `delta_ops.dagster.build_delta_maintenance_defs` builds
(maintenance assets, checks, jobs, the schedule and sensors, the operation history), for the
tables it lists or the tables found under a warehouse root. Secrets stay out of the file:
Dagster's templating reads them from the environment (``"{{ env.AWS_SECRET_ACCESS_KEY }}"``).

Retention, actions and engine are set fleet-wide and per table (a table's own value wins);
the runs the schedule, the commit sensor and the UI launch use them
(`delta_ops.dagster.settings`). A ``planner`` budget makes the schedule run only what the fleet
planner chooses (`delta_ops.dagster.planned_schedule`). A bad value stops the load with one
line naming it and what is accepted.

.. code-block:: yaml

    type: delta_ops.dagster.DeltaMaintenanceComponent
    attributes:
      name: lake
      warehouse: /data/warehouse            # or tables:
      tables:
        - {name: events, url: s3://lake/events, enable_row_tracking: true}
        - {name: scratch, url: s3://lake/scratch, actions: [checkpoint, vacuum],
           file_retention: "1 day", vacuum_force: true}
      storage_options: {key: "{{ env.AWS_ACCESS_KEY_ID }}", secret: "{{ env.AWS_SECRET_ACCESS_KEY }}"}
      maintenance_cron: "0 3 * * *"
      actions: [checkpoint, log_cleanup, vacuum, compact]   # every table's, unless its own
      log_retention: "30 days"              # default: each table's delta.logRetentionDuration
      file_retention: "7 days"              # default: delta.deletedFileRetentionDuration
      engine: local                         # or spark
      planner: {max_tables: 20, max_per_action: {vacuum: 10}}
      history: true                         # or a location, or false
"""

from collections.abc import Sequence
from typing import Self

import dagster as dg
from pydantic import BaseModel, Field, model_validator

from delta_ops.dagster.factory import build_delta_maintenance_defs
from delta_ops.dagster.planned_schedule import PlannerBudget
from delta_ops.dagster.resource import DeltaMaintenanceResource
from delta_ops.dagster.settings import MaintenanceSettings
from delta_ops.dagster.targets import DeltaTableTarget, discover_tables
from delta_ops.errors import InvalidValue
from delta_ops.service.history import fleet_history


class SettingsModel(BaseModel):
    """Retention, actions and engine (`MaintenanceSettings`) as YAML sets them; a value left
    out is inherited (a table's from the fleet's, the fleet's from each table's properties)."""

    actions: list[str] | None = Field(
        default=None,
        description="the routine actions maintenance runs: checkpoint, log_cleanup, vacuum,"
        " compact, purge, recompute_stats, checksum (default: checkpoint, log_cleanup, vacuum)",
    )
    log_retention: str | int | None = Field(
        default=None,
        description="how long log cleanup keeps commits, e.g. '30 days' (default: the"
        " table's delta.logRetentionDuration)",
    )
    file_retention: str | int | None = Field(
        default=None,
        description="how long vacuum keeps files no version needs, e.g. '7 days' (default:"
        " the table's delta.deletedFileRetentionDuration)",
    )
    vacuum_force: bool | None = Field(
        default=None,
        description="let vacuum use a file_retention shorter than the table's own",
    )
    engine: str | None = Field(default=None, description="where heavy I/O runs: local or spark")

    def settings(self, where: str = "") -> MaintenanceSettings:
        """The values, checked (InvalidValue: one line naming the value)."""
        return MaintenanceSettings.parse(
            where,
            actions=self.actions,
            log_retention=self.log_retention,
            file_retention=self.file_retention,
            vacuum_force=self.vacuum_force,
            engine=self.engine,
        )


class PlannerModel(BaseModel):
    """A budget for the planner-driven schedule (`PlannerBudget`)."""

    max_tables: int | None = Field(default=None, description="at most this many tables a tick")
    max_per_action: dict[str, int] = Field(
        default_factory=dict,
        description="at most this many tables per action (checkpoint, log_cleanup, vacuum,"
        " compact, purge)",
    )

    def budget(self) -> PlannerBudget:
        return PlannerBudget.parse(self.model_dump())


class DeltaTableModel(SettingsModel):
    """One table of the component's lake (a `DeltaTableTarget` in YAML), with settings of
    its own."""

    name: str = Field(description="short unique name: asset keys, pools, run keys")
    url: str = Field(description="path or URL of the table root")
    storage_options: dict[str, str] = Field(default_factory=dict)
    enable_row_tracking: bool = False

    def table_settings(self) -> MaintenanceSettings:
        return self.settings(f"tables[{self.name}]")


class DeltaMaintenanceComponent(dg.Component, SettingsModel, dg.Model, dg.Resolvable):
    """Maintenance of the Delta tables of a lake, declared in ``defs.yaml``.

    Attributes:
        name: the fleet's name: prefix of its jobs, schedules, sensors, pools and asset keys.
        warehouse: a warehouse root whose tables are found (folders holding ``_delta_log``).
        tables: tables listed one by one (with ``warehouse``, both are maintained).
        storage_options: options for every table (templated from the environment).
        maintenance_cron: the daily checkpoint -> cleanup -> vacuum schedule.
        row_tracking_cron: a schedule for row-tracking backfills (none when empty).
        commit_sensor: checkpoint a table once ``delta.checkpointInterval`` commits piled up.
        sensor_interval_seconds: how often the commit sensor ticks.
        start_automation: the schedule and sensors start running when the location loads.
        history: the operation history: true (``_delta_ops_history`` beside the tables), a
            location, or false.
        actions: the routine actions maintenance runs on every table (checkpoint,
            log_cleanup, vacuum, compact, purge, recompute_stats, checksum; default
            checkpoint, log_cleanup, vacuum); the schedule, the sensor and the assets run no
            other (row tracking stays with ``enable_row_tracking``).
        log_retention: how long log cleanup keeps commits ("30 days"; default: each table's
            ``delta.logRetentionDuration``).
        file_retention: how long vacuum keeps files no version needs ("7 days"; default:
            each table's ``delta.deletedFileRetentionDuration``).
        vacuum_force: let vacuum use a ``file_retention`` shorter than a table's own.
        engine: where the actions' heavy I/O runs: local (the run's process) or spark.
        planner: a budget (``max_tables``, ``max_per_action``) makes each tick of the
            maintenance schedule run only the tables and actions the fleet planner chooses
            within it, each run tagged with the planner's reason; without it every table with
            work gets a run.

    A table under ``tables`` takes ``actions``, ``log_retention``, ``file_retention``,
    ``vacuum_force`` and ``engine`` of its own, over the fleet's.
    """

    name: str = "delta"
    warehouse: str | None = None
    tables: list[DeltaTableModel] = Field(default_factory=list)
    storage_options: dict[str, str] = Field(default_factory=dict)
    maintenance_cron: str = "0 3 * * *"
    row_tracking_cron: str | None = None
    commit_sensor: bool = True
    sensor_interval_seconds: int = 30
    start_automation: bool = False
    history: bool | str = True
    planner: PlannerModel | None = None

    @model_validator(mode="after")
    def _valid_settings(self) -> Self:
        """Every setting checked once the YAML is resolved (here rather than in the nested
        models, so a bad value is one error: Dagster's own model of the YAML also accepts a
        template string for each of them)."""
        try:
            self.settings()
            for table in self.tables:
                table.table_settings()
            if self.planner is not None:
                self.planner.budget()
        except InvalidValue as exc:  # pydantic shows a ValueError's text as it is
            raise ValueError(str(exc)) from None
        return self

    def targets(
        self, found: Sequence[DeltaTableTarget] | None = None
    ) -> list[DeltaTableTarget] | str:
        """What the factory maintains: the warehouse root alone, or the listed tables (and
        those found under the root). `found`: the root's tables as found earlier (the
        state-backed variant's state); None finds them now, or leaves the root to the
        factory."""
        listed = [
            DeltaTableTarget(
                name=t.name,
                url=t.url,
                storage_options=t.storage_options,
                enable_row_tracking=t.enable_row_tracking,
                settings=t.table_settings(),
            )
            for t in self.tables
        ]
        if self.warehouse is None:
            if not listed:
                raise ValueError("DeltaMaintenanceComponent: give a warehouse or tables")
            return listed
        if not listed and found is None:
            return self.warehouse
        if found is None:
            found = discover_tables(self.warehouse)
        names = {t.name for t in listed}
        return [*listed, *(t for t in found if t.name not in names)]

    def build_defs(self, context: dg.ComponentLoadContext) -> dg.Definitions:
        return self.build_for(self.targets())

    def build_for(self, targets: list[DeltaTableTarget] | str) -> dg.Definitions:
        """The factory's definitions for `targets` with the component's settings."""
        history = self.history
        if history is True and self.warehouse is not None and not self.tables:
            # the warehouse's history, as the factory puts it when given the root itself
            history = fleet_history(True, self.warehouse) or False
        return build_delta_maintenance_defs(
            targets,
            name=self.name,
            resource=DeltaMaintenanceResource(storage_options=self.storage_options),
            maintenance_cron=self.maintenance_cron,
            row_tracking_cron=self.row_tracking_cron,
            commit_sensor=self.commit_sensor,
            sensor_interval_seconds=self.sensor_interval_seconds,
            start_automation=self.start_automation,
            history=history,
            settings=self.settings(),
            planner=None if self.planner is None else self.planner.budget(),
        )


__all__ = ["DeltaMaintenanceComponent", "DeltaTableModel", "PlannerModel", "SettingsModel"]
