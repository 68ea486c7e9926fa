"""`StateBackedDeltaMaintenanceComponent`: `DeltaMaintenanceComponent` whose warehouse tables
are found once and kept as Dagster component state, so a code location loads without walking
the warehouse, and picks up new tables when the state is refreshed on request.

Dagster keeps the state (``dg.StateBackedComponent``): by default in the project's local
state folder (``defs_state: {management_type: LOCAL_FILESYSTEM}``), written by
``dg utils refresh-defs-state`` (run it when tables were added or dropped, or while building a
deployment image) and refreshed by itself under ``dg dev``; ``VERSIONED_STATE_STORAGE`` keeps
it in the deployment's state storage instead. The state is the list of tables found under
``warehouse`` (name and URL, as JSON); tables listed in ``tables:`` stay in the YAML. Without
state (never refreshed), or with state found under another warehouse than the YAML names now,
the tables are found at load, as the plain component does.

.. code-block:: yaml

    type: delta_ops.dagster.StateBackedDeltaMaintenanceComponent
    attributes:
      name: lake
      warehouse: /data/warehouse
      defs_state:
        management_type: LOCAL_FILESYSTEM
"""

import json
from pathlib import Path

import dagster as dg
from dagster.components.utils.defs_state import (
    DefsStateConfig,
    DefsStateConfigArgs,
    ResolvedDefsStateConfig,
)
from pydantic import Field

from delta_ops.dagster.component import DeltaMaintenanceComponent
from delta_ops.dagster.targets import DeltaTableTarget, discover_tables

#: bumped when the state's shape changes: older state is ignored (the tables are found anew)
STATE_FORMAT = 1


class StateBackedDeltaMaintenanceComponent(dg.StateBackedComponent, DeltaMaintenanceComponent):
    """`DeltaMaintenanceComponent` with the warehouse's tables kept as component state.

    Attributes:
        defs_state: where Dagster keeps the state (default: the project's local state folder;
            the key defaults to ``DeltaMaintenanceComponent[<name>]``).
    """

    defs_state: ResolvedDefsStateConfig = Field(
        default_factory=DefsStateConfigArgs.local_filesystem
    )

    @property
    def defs_state_config(self) -> DefsStateConfig:
        return DefsStateConfig.from_args(
            self.defs_state, default_key=f"DeltaMaintenanceComponent[{self.name}]"
        )

    def write_state_to_path(self, state_path: Path) -> None:
        """Find the warehouse's tables now and write them as the state."""
        found = discover_tables(self.warehouse) if self.warehouse is not None else []
        state = {
            "format": STATE_FORMAT,
            "warehouse": self.warehouse,
            "tables": [{"name": t.name, "url": t.url} for t in found],
        }
        state_path.parent.mkdir(parents=True, exist_ok=True)
        state_path.write_text(json.dumps(state, indent=1))

    def tables_in_state(self, state_path: Path | None) -> list[DeltaTableTarget] | None:
        """The warehouse's tables the state lists, or None when there is no state for the
        warehouse the YAML names (never refreshed, another root, an older format)."""
        if state_path is None or self.warehouse is None:
            return None
        try:
            state = json.loads(state_path.read_text())
        except (OSError, ValueError):
            return None
        if state.get("format") != STATE_FORMAT or state.get("warehouse") != self.warehouse:
            return None
        return [DeltaTableTarget(name=t["name"], url=t["url"]) for t in state["tables"]]

    def build_defs_from_state(
        self, context: dg.ComponentLoadContext, state_path: Path | None
    ) -> dg.Definitions:
        return self.build_for(self.targets(self.tables_in_state(state_path)))


__all__ = ["StateBackedDeltaMaintenanceComponent"]
