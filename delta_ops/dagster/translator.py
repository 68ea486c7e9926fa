"""Mapping tables to asset specs, overridable so maintenance fits an existing asset graph."""

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field

import dagster as dg

from delta_ops.dagster.targets import DeltaTableTarget
from delta_ops.ops.registry import OPERATIONS
from delta_ops.ops.row_tracking import OPERATION as ROW_TRACKING
from delta_ops.service.due import Action
from delta_ops.service.table_names import safe_identifier

#: the actions every table's maintenance asset has an output for
ACTIONS = (Action.CHECKPOINT.value, Action.CLEANUP.value, Action.VACUUM.value, ROW_TRACKING.name)


def asset_actions(table: DeltaTableTarget) -> tuple[str, ...]:
    """The outputs of `table`'s maintenance asset: `ACTIONS` (row tracking only on a
    table with ``enable_row_tracking=True``: elsewhere it would be a node that never runs, a
    thousand of them on a thousand-table lake), then the other routine actions its settings
    choose (compact, purge, ...)."""
    base = tuple(a for a in ACTIONS if a != ROW_TRACKING.name or table.enable_row_tracking)
    extra = tuple(a for a in table.settings.chosen_actions if a not in ACTIONS)
    return base + extra


_DESCRIPTIONS = {
    Action.CHECKPOINT.value: "Checkpoint of the table's latest version (classic, or V2 by table policy).",
    Action.CLEANUP.value: "Expired _delta_log files deleted with Delta Spark's truncated-day, whole-segment rule.",
    Action.VACUUM.value: "Data files no retained version needs, deleted (VACUUM FULL, START/END commits).",
    ROW_TRACKING.name: "Row tracking enabled: protocol upgrade, row-id backfill, property commit.",
}


@dataclass
class DeltaMaintenanceTranslator:
    """Decides asset keys, groups and owners; subclass and override to match your pipeline.

    Attributes:
        key_prefix: first parts of every maintenance asset key (the factory's default adds the
            fleet name, so two fleets with a table of the same name do not clash).
        table_key_prefix: first parts of the key of a table that has no asset of its own.
        group_name: group of the maintenance assets (None: the table asset's group).
        owners: owners of the maintenance assets (a table's own `owners` are added).
        group_by_folder: a table found in a folder of the warehouse (`DeltaTableTarget.folder`)
            gets its own group per folder, ``<group_name>__<folder>``, so a lake of thousands of
            tables shows as one group per folder in the UI, not one group of thousands.
    """

    key_prefix: Sequence[str] = ("delta_maintenance",)
    table_key_prefix: Sequence[str] = ()
    group_name: str | None = "delta_maintenance"
    owners: Sequence[str] = field(default_factory=tuple)
    group_by_folder: bool = True

    def group_for(self, table: DeltaTableTarget, group: str | None) -> str | None:
        """`group` (the translator's, or the table asset's), per folder when it has one."""
        if group is None or not self.group_by_folder or not table.folder:
            return group
        return f"{group}__{safe_identifier(table.folder)}"

    def get_asset_spec(self, table: DeltaTableTarget) -> dg.AssetSpec:
        """The spec of the table itself (the asset your pipeline writes)."""
        key = table.asset_key or dg.AssetKey([*self.table_key_prefix, table.safe_name])
        return dg.AssetSpec(
            key=key,
            description=f"Delta table at {table.url}",
            kinds={"deltalake"},
            group_name=self.group_for(table, self.group_name),
            owners=[*self.owners, *table.owners],
        )

    def get_action_spec(self, table: DeltaTableTarget, action: str) -> dg.AssetSpec:
        """The spec of one maintenance action's output for `table`."""
        table_spec = self.get_asset_spec(table)
        return dg.AssetSpec(
            key=dg.AssetKey([*self.key_prefix, table.safe_name, action]),
            deps=[table_spec.key],
            description=_DESCRIPTIONS.get(action) or OPERATIONS[action].help,
            group_name=self.group_for(table, self.group_name) or table_spec.group_name,
            owners=[*self.owners, *table.owners],
            kinds={"deltalake"},
            skippable=True,
            tags={"delta_ops/table": table.safe_name, "delta_ops/action": action},
        )


def remembering(translator: DeltaMaintenanceTranslator) -> DeltaMaintenanceTranslator:
    """A copy of `translator` that makes each spec once per table (and action) and then hands
    back the one it made.

    One build asks for the same spec from several places (the table's maintenance asset, its
    checks, the asset job's selection, the automation), and Dagster's `AssetSpec` is costly to
    make: a 1,000-table lake made 21,000 specs where 5,000 differ, a sixth of the code
    location's build. The copy belongs to one build: it keeps the tables it was asked about,
    so the ids it remembers them by stay theirs. A subclass's overrides are what it calls."""
    clone = copy.copy(translator)
    make_asset_spec = type(translator).get_asset_spec.__get__(clone)
    make_action_spec = type(translator).get_action_spec.__get__(clone)
    asset_specs: dict[int, tuple[DeltaTableTarget, dg.AssetSpec]] = {}
    action_specs: dict[tuple[int, str], tuple[DeltaTableTarget, dg.AssetSpec]] = {}

    def get_asset_spec(table: DeltaTableTarget) -> dg.AssetSpec:
        made = asset_specs.get(id(table))
        if made is None:
            made = asset_specs[id(table)] = (table, make_asset_spec(table))
        return made[1]

    def get_action_spec(table: DeltaTableTarget, action: str) -> dg.AssetSpec:
        made = action_specs.get((id(table), action))
        if made is None:
            made = action_specs[(id(table), action)] = (table, make_action_spec(table, action))
        return made[1]

    clone.get_asset_spec = get_asset_spec  # type: ignore[method-assign]
    clone.get_action_spec = get_action_spec  # type: ignore[method-assign]
    return clone
