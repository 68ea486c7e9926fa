"""`numRecords` from an `add.stats` JSON string, without parsing the whole document.

Every writer we know (Delta Spark, delta-rs, delta-kernel, ours) puts `numRecords` first, so a
stats string that starts with ``{"numRecords":<n>`` is answered by reading that number; any
other layout is parsed as JSON. Row-id assignment and the row-tracking backfill ask this of
every file, and the min/max values after `numRecords` are most of each document.

    num_records_in_stats('{"numRecords":3,"minValues":{...}}')  # 3
    num_records_in_stats(None)                                   # None
"""

from __future__ import annotations

import json
import re

_LEADING = re.compile(r'\{\s*"numRecords"\s*:\s*(-?\d+)\s*[,}]')


def num_records_in_stats(stats: str | None) -> int | None:
    """The stats' top-level `numRecords`, or None when absent, not an integer, or the stats
    are missing or not a JSON object."""
    if not stats:
        return None
    match = _LEADING.match(stats)
    if match is not None:
        return int(match.group(1))
    try:
        value = json.loads(stats)
    except ValueError:
        return None
    count = value.get("numRecords") if isinstance(value, dict) else None
    return count if isinstance(count, int) and not isinstance(count, bool) else None


__all__ = ["num_records_in_stats"]
