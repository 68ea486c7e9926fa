"""Compaction's packing, columnar (issue 35), against the row-by-row packing it replaced.

The old planner grouped files by their partition values as Python tuples (the same values in
another key order: one partition), sorted partitions by their text and each one's files by
path, and packed them greedily; `reference_bins` is that code. The columnar packing must give
the same bins, in the same order, for any file list: partition values with nulls, empty and
missing maps, keys in either order, duplicate paths, files with deletion vectors, sizes of
zero, null or negative.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given, settings
from hypothesis import strategies as st

from delta_ops.ops.compact import pack

MAP = pa.map_(pa.string(), pa.string())
DV = pa.struct([("storageType", pa.string()), ("pathOrInlineDv", pa.string())])


def reference_bins(files: pa.Table, target_size: int) -> list[tuple[Any, tuple[str, ...], int]]:
    """The packing of plan_compact before issue 35, row by row."""
    paths = files.column("path").to_pylist()
    sizes = [int(s or 0) for s in files.column("size").to_pylist()]
    has_dv = pc.is_valid(files.column("deletionVector")).to_pylist()
    rows_of: dict[Any, list[int]] = {}
    for i, entries in enumerate(files.column("partitionValues").to_pylist()):
        rows_of.setdefault(tuple(entries) if entries else (), []).append(i)
    by_partition: dict[Any, list[int]] = {}
    for entries, rows in rows_of.items():
        by_partition.setdefault(tuple(sorted(entries)), []).extend(rows)
    bins: list[tuple[Any, tuple[str, ...], int]] = []

    def worth_it(values: Any, rows: list[int]) -> None:
        if rows and not (len(rows) == 1 and not has_dv[rows[0]]):
            bins.append((values, tuple(paths[r] for r in rows), sum(sizes[r] for r in rows)))

    for values, rows in sorted(by_partition.items(), key=lambda item: str(item[0])):
        rows.sort(key=paths.__getitem__)
        start, filled = 0, 0
        for position, row in enumerate(rows):
            if position > start and filled + sizes[row] > target_size:
                worth_it(values, rows[start:position])
                start, filled = position, 0
            filled += sizes[row]
        worth_it(values, rows[start:])
    return bins


def packed_bins(files: pa.Table, target_size: int) -> list[tuple[Any, tuple[str, ...], int]]:
    packing = pack(files, target_size)
    paths = packing.paths.take(packing.order).to_pylist() if packing.bins else []
    return [
        (packing.partitions[partition], tuple(paths[start:stop]), size)
        for partition, start, stop, size in packing.bins
    ]


_values = st.one_of(st.none(), st.sampled_from(["a", "b", "", "é", "a\x00"]))
_partition = st.one_of(
    st.none(),
    st.just([]),
    st.lists(
        st.tuples(st.sampled_from(["day", "region", "k"]), _values),
        max_size=3,
        unique_by=lambda e: e[0],
    ),
)
_file = st.tuples(
    st.sampled_from([f"f{i}.parquet" for i in range(12)]),
    st.one_of(st.none(), st.integers(min_value=0, max_value=60)),
    _partition,
    st.booleans(),
)


def _table(rows: list[tuple[str, int | None, Any, bool]], chunks: int) -> pa.Table:
    columns = {
        "path": pa.array([r[0] for r in rows], pa.string()),
        "size": pa.array([r[1] for r in rows], pa.int64()),
        "partitionValues": pa.array([r[2] for r in rows], MAP),
        "deletionVector": pa.array(
            [{"storageType": "u", "pathOrInlineDv": "x"} if r[3] else None for r in rows], DV
        ),
    }
    table = pa.table(columns)
    step = max(1, len(rows) // chunks)
    return pa.concat_tables([table.slice(i, step) for i in range(0, len(rows), step)] or [table])


@settings(max_examples=300, deadline=None)
@given(
    rows=st.lists(_file, max_size=40),
    target_size=st.integers(min_value=1, max_value=150),
    chunks=st.integers(min_value=1, max_value=3),
)
def test_the_columnar_packing_is_the_row_by_row_one(rows, target_size, chunks):
    files = _table(rows, chunks)
    assert packed_bins(files, target_size) == reference_bins(files, target_size)


@given(rows=st.lists(_file, max_size=30), target_size=st.integers(min_value=1, max_value=100))
@settings(max_examples=100, deadline=None)
def test_a_negative_size_is_packed_row_by_row(rows, target_size):
    rows = [(p, -5 if i % 4 == 0 else s, v, d) for i, (p, s, v, d) in enumerate(rows)]
    files = _table(rows, 1)
    assert packed_bins(files, target_size) == reference_bins(files, target_size)


def test_a_partition_of_many_files_is_packed_by_size():
    rows = [(f"part/f{i:03}.parquet", 10, [("day", "1")], False) for i in range(25)]
    bins = packed_bins(_table(rows, 2), 100)
    assert [len(paths) for _, paths, _ in bins] == [10, 10, 5]
    assert bins == reference_bins(_table(rows, 1), 100)


def test_equal_paths_keep_the_order_the_row_by_row_grouping_gave_them():
    """A path twice in one partition whose values came in two key orders (no valid log does
    this): the rows of the values seen first come first, as the old grouping had them."""
    one, other = [("day", "1"), ("k", "2")], [("k", "2"), ("day", "1")]
    rows = [("y", 10, one, False), ("x", 10, other, False), ("x", 50, one, False)]
    files = _table(rows, 1)
    assert (
        packed_bins(files, 55)
        == reference_bins(files, 55)
        == [((("day", "1"), ("k", "2")), ("x", "y"), 20)]
    )
