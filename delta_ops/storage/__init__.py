"""Storage: the layer that touches files, for every other layer of delta-ops.

A `Storage` is a table's location (local path or fsspec URL plus storage options). It
lists `_delta_log`, reads files (many at once where the store can), and writes with the
guarantees the protocol needs: put-if-absent for commits, atomic replacement for hints.

For example:

    from delta_ops.storage import Storage

    storage = Storage.open("/data/events")
    [entry.name for entry in storage.list_log()]
"""

from delta_ops.storage.table_storage import (
    CONDITIONAL_CREATE_PROTOCOLS,
    LOG_DIR,
    FileEntry,
    Location,
    Storage,
    is_temporary_name,
    temporary_path,
)

__all__ = [
    "CONDITIONAL_CREATE_PROTOCOLS",
    "LOG_DIR",
    "FileEntry",
    "Location",
    "Storage",
    "is_temporary_name",
    "temporary_path",
]
