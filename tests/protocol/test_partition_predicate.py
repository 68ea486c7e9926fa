"""Partition predicates (compact --where, replaceWhere): one grammar, typed comparisons, and a
clear refusal for anything else."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pyarrow.compute
import pytest

from delta_ops.errors import InvalidValue
from delta_ops.protocol.partition_predicate import parse_partition_predicate
from delta_ops.table.snapshot import load_snapshot
from delta_ops.table.writer import write_arrow


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    table = Path(tmp_path_factory.mktemp("pred")) / "t"
    days = [dt.date(2026, 11, d) for d in (1, 2, 3)]
    rows = pa.table(
        {
            "id": pa.array(range(7), pa.int64()),
            "day": pa.array([days[0], days[1], days[2], days[0], days[1], None, days[2]]),
            "n": pa.array([1, 2, 10, 1, 2, 3, None], pa.int32()),
            "region": ["eu", "us", "eu", "us", "eu", "eu", None],
        }
    )
    write_arrow(table, rows, partition_by=["day", "n", "region"])
    return load_snapshot(table)


def _selected(snapshot, text: str) -> int:  # type: ignore[no-untyped-def]
    """How many of the table's files (one per partition value set) the predicate selects."""
    predicate = parse_partition_predicate(text, snapshot.schema, snapshot.partition_columns)
    return int(pa.compute.sum(predicate.mask(snapshot.files)).as_py() or 0)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("day = '2026-11-01'", 2),
        ("day=2026-11-01", 2),  # compact's original form: bare value
        ("day >= '2026-11-02'", 4),
        ("day > '2026-11-01' AND day < '2026-11-03'", 2),
        ("day >= '2026-11-02' and region = 'eu'", 2),
        ("n > 2", 2),  # 10 and 3: numbers compare as numbers, not text ('10' < '2')
        ("n IN (1, 10)", 3),
        ("region IS NULL", 1),
        ("region IS NOT NULL AND n != 1", 4),
        ("day = '2026-11-01',region=us", 1),
        ("DAY = '2026-11-01'", 2),  # column names are case-insensitive, as in Spark
        ("region = 'it''s'", 0),  # quotes are doubled inside strings
        ("day IS NULL", 1),
        ("day = NULL", 0),  # a comparison with null is never true
    ],
)
def test_forms_select_files_by_typed_partition_values(snapshot, text, expected) -> None:  # type: ignore[no-untyped-def]
    assert _selected(snapshot, text) == expected


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("id = 3", "'id' is not a partition column"),
        ("day = '2026-11-01' OR n = 1", "joined by AND, found 'OR'"),
        ("n > 'many'", "cannot be read as n's type"),
        ("day IN '2026-11-01'", "IN needs a parenthesised list"),
        ("region IS EMPTY", "IS must be followed by NULL"),
        ("", "it is empty"),
        ("day =", "ends too early"),
        ("day = '2026-11-01' AND", "ends after AND"),
        ("upper(region) = 'EU'", "'upper' is not a partition column"),
    ],
)
def test_anything_else_is_one_clear_refusal(snapshot, text, needle) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InvalidValue) as info:
        predicate = parse_partition_predicate(
            text, snapshot.schema, snapshot.partition_columns, option="--where"
        )
        predicate.mask(snapshot.files)
    message = str(info.value)
    assert needle in message and "\n" not in message, message
    assert message.startswith(f"--where {text!r}")
    if "cannot be read" not in needle:  # a grammar error lists what is accepted
        assert "partition columns: day, n, region" in message
