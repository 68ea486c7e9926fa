"""Row tracking's table properties and the rule for naming its materialized columns.

Row ids and row commit versions may be materialized into hidden columns whose names the table
records in two properties; a name must never equal a column name (case-insensitive).

For example:

    names = materialized_column_names(dict(metadata.configuration), taken={"id", "value"})
"""

from __future__ import annotations

import uuid

from delta_ops.errors import InvalidTableProperty
from delta_ops.protocol.properties import (
    ENABLE_ROW_TRACKING,
    MATERIALIZED_ROW_COMMIT_VERSION_COLUMN_NAME,
    MATERIALIZED_ROW_ID_COLUMN_NAME,
)

# the property names, as properties.py defines them (one spelling of each)
ENABLE = ENABLE_ROW_TRACKING
ROW_ID_COLUMN = MATERIALIZED_ROW_ID_COLUMN_NAME
COMMIT_VERSION_COLUMN = MATERIALIZED_ROW_COMMIT_VERSION_COLUMN_NAME


def _fresh_name(prefix: str, taken: set[str]) -> str:
    while True:
        name = f"{prefix}{uuid.uuid4()}"
        if name.lower() not in taken:
            return name


def materialized_column_names(config: dict[str, str], taken: set[str]) -> dict[str, str]:
    """The two materialized column properties: existing values kept, new ones generated
    (`_row-id-col-<uuid>`, `_row-commit-version-col-<uuid>`) never equal to a column name."""
    out = {
        ROW_ID_COLUMN: config.get(ROW_ID_COLUMN) or _fresh_name("_row-id-col-", taken),
        COMMIT_VERSION_COLUMN: config.get(COMMIT_VERSION_COLUMN)
        or _fresh_name("_row-commit-version-col-", taken),
    }
    for key, value in out.items():
        if value.lower() in taken:
            raise InvalidTableProperty(key, value, "collides with a column name")
    return out
