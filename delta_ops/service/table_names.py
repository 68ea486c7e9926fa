"""Names of the tables an orchestrator maintains: unique, and unique again once made into
identifiers (Dagster asset and job names, Airflow task and pool ids allow letters, digits and
``_`` only).

    safe_identifier("sales/orders-2026")      # 'sales_orders_2026'
    check_unique(["a-b", "a_b"], "a Dagster fleet", "Dagster")   # ValueError naming the clash
"""

from __future__ import annotations

import re
from collections.abc import Sequence


def safe_identifier(name: str) -> str:
    """`name` with every character but letters, digits and ``_`` replaced by ``_``."""
    return re.sub(r"[^A-Za-z0-9_]", "_", name)


def check_unique(names: Sequence[str], within: str, identifiers_of: str) -> None:
    """Raise ValueError when two tables share a name, or share it once made identifiers."""
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"table names must be unique within {within}: {duplicates}")
    by_safe: dict[str, list[str]] = {}
    for name in names:
        by_safe.setdefault(safe_identifier(name), []).append(name)
    clashes = [sorted(group) for group in by_safe.values() if len(group) > 1]
    if clashes:
        raise ValueError(
            f"table names must stay unique as {identifiers_of} identifiers"
            f" (letters, digits, _): {clashes}"
        )


__all__ = ["check_unique", "safe_identifier"]
