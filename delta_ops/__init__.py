"""delta-ops: maintenance for Delta Lake tables in pure Python.

The protocol core reads any Delta table's state columnar (pyarrow); the operations
(checkpoint, log cleanup, vacuum, row-tracking backfill) plan purely and execute crash-safely;
the Dagster layer in :mod:`delta_ops.dagster` orchestrates them for a fleet of tables.

Example::

    from delta_ops import load_snapshot
    snapshot = load_snapshot("/data/events")
    print(snapshot.version, snapshot.num_files)

Importing this package stays light: Dagster and PySpark are only imported by their layers.
"""

from __future__ import annotations

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
from delta_ops.storage import Storage
from delta_ops.table.snapshot import Snapshot, load_snapshot
from delta_ops.version import __version__

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
