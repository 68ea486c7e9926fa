"""`DeltaMaintenanceComponent`: a lake's maintenance declared in a Dagster project's
``defs.yaml`` (``dg scaffold defs delta_ops.dagster.DeltaMaintenanceComponent lake``).

The component builds what :func:`~delta_ops.dagster.build_delta_maintenance_defs` builds
(maintenance assets, checks, jobs, the schedule and sensors, the operation history), for the
tables it lists or the tables found under a warehouse root. Secrets stay out of the file:
Dagster's templating reads them from the environment (``"{{ env.AWS_SECRET_ACCESS_KEY }}"``).

.. code-block:: yaml

    type: delta_ops.dagster.DeltaMaintenanceComponent
    attributes:
      name: lake
      warehouse: /data/warehouse            # or tables:
      tables:
        - {name: events, url: s3://lake/events, enable_row_tracking: true}
      storage_options: {key: "{{ env.AWS_ACCESS_KEY_ID }}", secret: "{{ env.AWS_SECRET_ACCESS_KEY }}"}
      maintenance_cron: "0 3 * * *"
      history: true                         # or a location, or false
"""

from collections.abc import Sequence

import dagster as dg
from pydantic import BaseModel, Field

from delta_ops.dagster.factory import build_delta_maintenance_defs
from delta_ops.dagster.resource import DeltaMaintenanceResource
from delta_ops.dagster.targets import DeltaTableTarget, discover_tables
from delta_ops.ops.history import fleet_history


class DeltaTableModel(BaseModel):
    """One table of the component's lake (a `DeltaTableTarget` in YAML)."""

    name: str = Field(description="short unique name: asset keys, pools, run keys")
    url: str = Field(description="path or URL of the table root")
    storage_options: dict[str, str] = Field(default_factory=dict)
    enable_row_tracking: bool = False


class DeltaMaintenanceComponent(dg.Component, dg.Model, dg.Resolvable):
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
        )


__all__ = ["DeltaMaintenanceComponent", "DeltaTableModel"]
