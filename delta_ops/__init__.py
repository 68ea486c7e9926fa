"""delta-ops: maintenance for Delta Lake tables in pure Python.

The protocol core reads any Delta table's state columnar (pyarrow); the operations
(checkpoint, log cleanup, vacuum, row-tracking backfill) plan purely and execute crash-safely;
the Dagster layer in `delta_ops.dagster` orchestrates them for a fleet of tables.

For example:

    from delta_ops import load_snapshot
    snapshot = load_snapshot("/data/events")
    print(snapshot.version, snapshot.num_files)

Importing this package stays light: the table API (and with it pyarrow and numpy) loads when
one of its names is first used, Dagster and PySpark only with their layers. So the `delta-ops`
process can set up its environment before numpy loads (`delta_ops.cli`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from delta_ops.errors import (
    ConcurrentModification,
    CorruptLog,
    DeltaOpsError,
    InvalidTableProperty,
    NotADeltaTable,
    RetentionTooShort,
    UnsafePath,
    UnsupportedFeature,
    VersionGap,
    VersionNotFound,
)
from delta_ops.version import __version__

if TYPE_CHECKING:
    from delta_ops.storage import Storage
    from delta_ops.table.snapshot import Snapshot, load_snapshot


def __getattr__(name: str) -> Any:
    """The table API's names, imported on first use (pyarrow and numpy load with them)."""
    value: Any
    if name in ("Snapshot", "load_snapshot"):
        # the table API on first use, not with the package
        from delta_ops.table import snapshot

        value = getattr(snapshot, name)
    elif name == "Storage":
        # the table API on first use, not with the package
        from delta_ops.storage import Storage as value
    else:
        raise AttributeError(f"module 'delta_ops' has no attribute {name!r}")
    globals()[name] = value
    return value


__all__ = [
    "ConcurrentModification",
    "CorruptLog",
    "DeltaOpsError",
    "InvalidTableProperty",
    "NotADeltaTable",
    "RetentionTooShort",
    "Snapshot",
    "Storage",
    "UnsafePath",
    "UnsupportedFeature",
    "VersionGap",
    "VersionNotFound",
    "__version__",
    "load_snapshot",
]
