"""Which tables a maintenance fleet covers: explicit targets or a discovered warehouse."""

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import dagster as dg

from delta_ops.dagster.settings import MaintenanceSettings
from delta_ops.service.table_names import check_unique, safe_identifier
from delta_ops.storage.warehouse import find_tables, name_for


@dataclass(frozen=True)
class DeltaTableTarget:
    """One table to maintain.

    Args:
        name: short unique name, used in asset keys, pools and run keys.
        url: path or fsspec URL of the table root.
        asset_key: the asset that writes the table in your pipeline (None: delta-ops declares
            an external asset named after the table so checks and observations have a target).
        storage_options: fsspec options for this table (merged over the resource's).
        enable_row_tracking: let the row_tracking asset enable row tracking (a table-semantics
            change, so it is opt-in; the row-tracking job can always be launched explicitly).
        settings: the table's retention, actions and engine (`MaintenanceSettings`); what it
            leaves out comes from the fleet's (`build_delta_maintenance_defs(settings=...)`).
        folder: the folder of the warehouse the table was found in (``sales/eu``; "" at the
            top), which groups its assets in the UI (`DeltaMaintenanceTranslator.group_by_folder`).
        owners: the table's owners (``team:sales``, an e-mail), on its maintenance assets.
    """

    name: str
    url: str
    asset_key: dg.AssetKey | None = None
    storage_options: Mapping[str, str] = field(default_factory=dict)
    enable_row_tracking: bool = False
    settings: MaintenanceSettings = field(default_factory=MaintenanceSettings)
    folder: str = ""
    owners: tuple[str, ...] = ()

    @property
    def safe_name(self) -> str:
        """The name as a Dagster identifier (letters, digits, underscores)."""
        return safe_identifier(self.name)


def discover_tables(warehouse: str, *, max_depth: int = 2) -> list[DeltaTableTarget]:
    """Local directories under `warehouse` (up to `max_depth` levels) that hold a `_delta_log`
    (`delta_ops.storage.warehouse`)."""
    root = os.path.abspath(warehouse)
    return [
        DeltaTableTarget(name=n, url=u, folder=_folder_of(root, u))
        for n, u in find_tables(warehouse, max_depth=max_depth)
    ]


def _folder_of(root: str, table: str) -> str:
    """The folder under `root` holding `table` ("" for a table at the top), with ``/``."""
    parent = os.path.relpath(os.path.dirname(table), root)
    return "" if parent == os.curdir else parent.replace(os.sep, "/")


def as_targets(tables: Iterable[DeltaTableTarget | str] | str) -> list[DeltaTableTarget]:
    """Normalize the factory's `tables` argument: targets, URLs, or one warehouse root."""
    if isinstance(tables, str):
        return discover_tables(tables)
    targets = [
        t
        if isinstance(t, DeltaTableTarget)
        else DeltaTableTarget(name=name_for(str(t)), url=str(t))
        for t in tables
    ]
    check_unique([t.name for t in targets], "a fleet", "Dagster")
    return targets
