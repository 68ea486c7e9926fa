"""The planner-driven maintenance schedule: each tick asks the fleet planner
(`delta_ops.service.fleet.plan_fleet`) which tables and actions to run within a budget, and
requests runs for those only, each tagged with the planner's reason.

Turned on by a budget (`PlannerBudget`; the component's ``planner:`` setting, the factory's
``planner=``):

    planner: {max_tables: 20, max_per_action: {vacuum: 10}}

Without one the maintenance schedule runs every table with work (`delta_ops.dagster.automation`).
The planner judges checkpoint, log_cleanup, vacuum, compact and purge (each table's own
``actions``, with the retentions its runs will use), ranks the tables by what they would gain
for what they cost, and chooses within ``max_tables`` tables and ``max_per_action`` tables per
action; a table left out is logged with why (over budget, nothing to do, unreadable). A run's
tags name the table, and say why the planner chose it, its rank and its priority
(`REASON_TAG`, `RANK_TAG`, `PRIORITY_TAG`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import dagster as dg

from delta_ops import clock
from delta_ops.dagster.alerts import TABLE_TAG
from delta_ops.dagster.checks import check_keys
from delta_ops.dagster.resource import DeltaMaintenanceResource
from delta_ops.dagster.targets import DeltaTableTarget
from delta_ops.dagster.translator import DeltaMaintenanceTranslator
from delta_ops.errors import InvalidValue
from delta_ops.ops.engines import Spread
from delta_ops.ops.registry import OPERATIONS
from delta_ops.service.fleet import ACTIONS as PLANNED
from delta_ops.service.fleet import FleetPlan, FleetTable, plan_fleet

#: run tags of a planned run: why the planner chose the table, its rank and priority
REASON_TAG = "delta_ops/plan_reason"
RANK_TAG = "delta_ops/plan_rank"
PRIORITY_TAG = "delta_ops/plan_priority"


def _planned(given: Any, where: str) -> str:
    """The name of the action the planner judges that `given` names (a name it had before is
    accepted, with a deprecation warning)."""
    try:
        action = OPERATIONS.canonical(str(given), where)
    except InvalidValue:
        action = ""
    if action not in PLANNED:
        raise InvalidValue(
            f"{where}: {given!r} is not an action the planner judges;"
            f" accepted: {', '.join(PLANNED)}"
        )
    return action


@dataclass(frozen=True)
class PlannerBudget:
    """What one tick of the planned schedule may run.

    Attributes:
        max_tables: at most this many tables get a run (None: no limit).
        max_per_action: at most this many tables per action (Dagster action names:
            checkpoint, log_cleanup, vacuum, compact, purge).
    """

    max_tables: int | None = None
    max_per_action: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def parse(cls, raw: Mapping[str, Any], where: str = "planner") -> PlannerBudget:
        """A budget from raw YAML values; InvalidValue names a bad one in one line."""
        if not isinstance(raw, Mapping):
            raise InvalidValue(f"{where}: {raw!r} is not a mapping (max_tables, max_per_action)")
        unknown = sorted(set(raw) - {"max_tables", "max_per_action"})
        if unknown:
            raise InvalidValue(
                f"{where}: unknown keys {unknown}; accepted: max_tables, max_per_action"
            )
        max_tables = raw.get("max_tables")
        if max_tables is not None:
            max_tables = _count(max_tables, f"{where}.max_tables")
        per_action = raw.get("max_per_action") or {}
        if not isinstance(per_action, Mapping):
            raise InvalidValue(
                f"{where}.max_per_action: {per_action!r} is not a mapping of action to a number"
            )
        limits = {}
        for given, limit in per_action.items():
            action = _planned(given, f"{where}.max_per_action")
            limits[action] = _count(limit, f"{where}.max_per_action.{action}")
        return cls(max_tables, limits)


def _count(raw: Any, where: str) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 1:
        raise InvalidValue(f"{where}: {raw!r} is not a whole number of at least 1")
    return raw


def fleet_tables(
    targets: Sequence[DeltaTableTarget], resource: DeltaMaintenanceResource
) -> list[FleetTable]:
    """The targets as the planner sees them: their storage options over the resource's, the
    actions of their settings the planner judges, the retentions their runs will use."""
    return [
        FleetTable(
            name=t.name,
            url=t.url,
            storage_options={**resource.storage_options, **t.storage_options},
            actions=tuple(a for a in t.settings.chosen_actions if a in PLANNED),
            log_retention_ms=t.settings.log_retention_ms,
            file_retention_ms=t.settings.file_retention_ms,
        )
        for t in targets
    ]


def planned_requests(
    plan: FleetPlan,
    targets: Sequence[DeltaTableTarget],
    translator: DeltaMaintenanceTranslator,
    day: str,
) -> tuple[list[dg.RunRequest], list[str]]:
    """A run request per table the plan chose (its chosen actions, its reason in the tags),
    and a line per table it left out, with why."""
    by_name = {t.name: t for t in targets}
    requests = []
    left_out = []
    for choice in plan.choices:
        name = choice.assessment.name
        if not choice.chosen:
            left_out.append(f"{name}: {choice.why}")
            continue
        table = by_name[name]
        requests.append(
            dg.RunRequest(
                run_key=f"{name}:{day}",
                tags={
                    TABLE_TAG: name,
                    REASON_TAG: choice.why,
                    RANK_TAG: str(choice.rank),
                    PRIORITY_TAG: f"{choice.priority:.4f}",
                },
                asset_selection=[translator.get_action_spec(table, a).key for a in choice.actions],
                asset_check_keys=check_keys(table, translator),
            )
        )
    return requests, left_out


def plan_tick(
    targets: Sequence[DeltaTableTarget],
    resource: DeltaMaintenanceResource,
    budget: PlannerBudget,
) -> FleetPlan:
    """The fleet plan of one tick, as of now. Tables are assessed on threads: a schedule runs
    inside Dagster's threaded code server, where forking workers is not safe."""
    return plan_fleet(
        fleet_tables(targets, resource),
        clock.now_ms(),
        max_tables=budget.max_tables,
        max_per_action=dict(budget.max_per_action),
        spread=Spread.THREADS,
    )


__all__ = [
    "PRIORITY_TAG",
    "RANK_TAG",
    "REASON_TAG",
    "PlannerBudget",
    "fleet_tables",
    "plan_tick",
    "planned_requests",
]
