"""Which tables a maintenance fleet covers: explicit targets or a discovered warehouse."""

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import dagster as dg


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
    """

    name: str
    url: str
    asset_key: dg.AssetKey | None = None
    storage_options: Mapping[str, str] = field(default_factory=dict)
    enable_row_tracking: bool = False

    @property
    def safe_name(self) -> str:
        """The name as a Dagster identifier (letters, digits, underscores)."""
        return re.sub(r"[^A-Za-z0-9_]", "_", self.name)


def discover_tables(warehouse: str, *, max_depth: int = 2) -> list[DeltaTableTarget]:
    """Local directories under `warehouse` (up to `max_depth` levels) that hold a `_delta_log`."""
    found: list[DeltaTableTarget] = []
    root = os.path.abspath(warehouse)
    if not os.path.isdir(root):
        return found
    for current, dirs, _ in os.walk(root):
        depth = os.path.relpath(current, root).count(os.sep) + (0 if current == root else 1)
        if "_delta_log" in dirs and current != root:
            rel = os.path.relpath(current, root)
            found.append(DeltaTableTarget(name=rel.replace(os.sep, "__"), url=current))
            dirs[:] = []
            continue
        dirs[:] = [d for d in dirs if not d.startswith((".", "_"))] if depth < max_depth else []
    return sorted(found, key=lambda t: t.name)


def as_targets(tables: Iterable[DeltaTableTarget | str] | str) -> list[DeltaTableTarget]:
    """Normalize the factory's `tables` argument: targets, URLs, or one warehouse root."""
    if isinstance(tables, str):
        return discover_tables(tables)
    targets = []
    for t in tables:
        if isinstance(t, DeltaTableTarget):
            targets.append(t)
        else:
            name = os.path.basename(str(t).rstrip("/")) or "table"
            targets.append(DeltaTableTarget(name=name, url=str(t)))
    names = [t.name for t in targets]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"table names must be unique within a fleet: {duplicates}")
    by_safe: dict[str, list[str]] = {}
    for t in targets:
        by_safe.setdefault(t.safe_name, []).append(t.name)
    clashes = [sorted(group) for group in by_safe.values() if len(group) > 1]
    if clashes:
        raise ValueError(
            f"table names must stay unique as Dagster identifiers (letters, digits, _): {clashes}"
        )
    return targets
