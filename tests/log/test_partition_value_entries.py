"""A file's partition values are the entries its action wrote: the JSON reader unifies object
keys across the rows of a parse, so a row shows keys it never had (as null) until the load
drops them; a partition column's null value stays, and a checkpoint's maps (no null entry
beyond the partition columns') are kept as read."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from delta_ops.log.actions import STRING_MAP, restrict_partition_values
from delta_ops.ops.checkpoint import checkpoint
from delta_ops.table.snapshot import load_snapshot
from tests.support import log_builder as lb


def _partition_values(table: Path) -> dict[str, dict[str, str | None]]:
    files = load_snapshot(table).files
    return {
        path: dict(values)
        for path, values in zip(
            files.column("path").to_pylist(), files.column("partitionValues").to_pylist()
        )
    }


def test_keys_a_row_never_had_are_dropped_and_null_partition_values_kept(tmp_path: Path) -> None:
    table = tmp_path / "t"
    lb.write_commit(table, 0, [lb.protocol(), lb.metadata(partition_columns=["part"])])
    a = lb.add("a.parquet", part="x")
    b = lb.add("b.parquet")
    b["add"]["partitionValues"] = {"part": None, "extra": "e"}
    lb.write_commit(table, 1, [a, b])
    want = {"a.parquet": {"part": "x"}, "b.parquet": {"part": None, "extra": "e"}}
    assert _partition_values(table) == want
    checkpoint(str(table))
    assert _partition_values(table) == want


def test_maps_without_null_entries_are_kept_as_they_are() -> None:
    values = pa.array([[("part", "x"), ("extra", "e")], None, []], STRING_MAP)
    table = pa.table({"partitionValues": pa.chunked_array([values.slice(0, 2), values.slice(2)])})
    assert restrict_partition_values(table, {"part"}) is table
    nulls = pa.array([[("part", "x"), ("extra", None)]], STRING_MAP)
    restricted = restrict_partition_values(pa.table({"partitionValues": nulls}), {"part"})
    assert restricted.column("partitionValues").to_pylist() == [[("part", "x")]]
