"""delta-ops for Dagster: table maintenance as assets, checks, jobs, schedules and sensors.

For example:

    import dagster as dg
    from delta_ops.dagster import build_delta_maintenance_defs

    defs = build_delta_maintenance_defs("/data/warehouse", name="lake")
"""

from importlib.util import find_spec

from delta_ops.errors import MissingExtra

if find_spec("dagster") is None:
    raise MissingExtra("dagster", "delta_ops.dagster")

from delta_ops.dagster.component import DeltaMaintenanceComponent
from delta_ops.dagster.factory import build_delta_maintenance_defs
from delta_ops.dagster.planned_schedule import PlannerBudget
from delta_ops.dagster.resource import DeltaMaintenanceResource
from delta_ops.dagster.settings import MaintenanceSettings
from delta_ops.dagster.state_component import StateBackedDeltaMaintenanceComponent
from delta_ops.dagster.targets import DeltaTableTarget, discover_tables
from delta_ops.dagster.translator import ACTIONS, DeltaMaintenanceTranslator

__all__ = [
    "ACTIONS",
    "DeltaMaintenanceComponent",
    "DeltaMaintenanceResource",
    "DeltaMaintenanceTranslator",
    "DeltaTableTarget",
    "MaintenanceSettings",
    "PlannerBudget",
    "StateBackedDeltaMaintenanceComponent",
    "build_delta_maintenance_defs",
    "discover_tables",
]
