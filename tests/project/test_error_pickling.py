"""A delta-ops error raised in a worker process reaches the caller as itself.

Errors whose constructor takes other arguments than their message (CorruptLog's file and
problem, UnsupportedFeature's features) could not be unpickled, so one raised in a forked
rewrite worker arrived as BrokenProcessPool: a table problem looked like a crash.
"""

from __future__ import annotations

import pickle

import pytest

from delta_ops.errors import (
    CorruptLog,
    DeltaOpsError,
    InvalidSchema,
    InvalidTableProperty,
    NotADeltaTable,
    UnsupportedFeature,
    VersionGap,
)
from delta_ops.ops.engines import LOCAL, Spread

ERRORS = [
    CorruptLog("00000000000000000003.json", "not JSON", 7),
    InvalidSchema("schemaString", "unknown data type 'uuid' (column a)"),
    UnsupportedFeature(["variantType"], "vacuum", ["a reason"]),
    InvalidTableProperty("delta.logRetentionDuration", "forever", "not an interval"),
    VersionGap("_delta_log", 4, 6),
    NotADeltaTable("/data/t"),
]


@pytest.mark.parametrize("error", ERRORS, ids=lambda e: type(e).__name__)
def test_every_error_pickles_as_itself(error: DeltaOpsError) -> None:
    error.add_note("delta-ops was reading /data/t/_delta_log/3.json")
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is type(error)
    assert str(again) == str(error)
    assert again.__dict__ == error.__dict__  # attributes and notes


def _fail(index: int) -> int:
    if index == 1:
        raise CorruptLog("part-1.parquet", "truncated footer")
    return index


def test_an_error_in_a_forked_worker_reaches_the_caller_as_itself() -> None:
    with pytest.raises(CorruptLog, match="part-1.parquet: truncated footer"):
        LOCAL.map_ordered(_fail, [0, 1, 2], spread=Spread.PROCESSES)
