"""Space-filling curves (issue 36): order-preserving column keys, Z-order and Hilbert indexes,
rank cut points and ranges. The keys of one column sort as the column does (any type, nulls
first); consecutive Hilbert indexes are neighbouring cells; Z-order interleaves bits."""

from __future__ import annotations

import datetime as dt
import decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from delta_ops.errors import UnsupportedType
from delta_ops.layout.curves import (
    VALUES_SLICE_ROWS,
    column_keys,
    curve_for_clustering,
    fit_curve,
    hilbert_index,
    range_bounds,
    range_ids,
    zorder_index,
)


def _assert_sorts_like_the_column(array: pa.Array) -> None:
    """Sorting by the keys (stable) gives the column in Arrow's order, nulls first."""
    keys = column_keys(array)
    by_key = array.take(pa.array(np.argsort(keys, kind="stable")))
    expected = array.take(
        pc.sort_indices(pa.table({"v": array}), sort_keys=[("v", "ascending", "at_start")])
    )
    assert by_key.to_pylist() == expected.to_pylist()


_ints = st.lists(st.one_of(st.none(), st.integers(-(2**63) + 1, 2**63 - 1)), max_size=60)
_floats = st.lists(
    st.one_of(st.none(), st.floats(allow_nan=False).map(lambda f: 0.0 if f == 0 else f)),
    max_size=60,
)
# strings that differ within their first 8 bytes, not by trailing zero bytes (those tie by
# design: keys are zero-padded prefixes)
_strings = st.lists(
    st.one_of(st.none(), st.text(alphabet="ab\x01é", max_size=3)), max_size=60, unique=True
)


@settings(max_examples=150, deadline=None)
@given(_ints)
def test_integer_keys_sort_like_the_column(values: list[int | None]) -> None:
    for typ in (pa.int64(), pa.int32()):
        fitting = [v if v is None or -(2**31) < v < 2**31 else v % 2**31 for v in values]
        _assert_sorts_like_the_column(pa.array(values if typ == pa.int64() else fitting, typ))


@settings(max_examples=150, deadline=None)
@given(_floats)
def test_float_keys_sort_like_the_column(values: list[float | None]) -> None:
    _assert_sorts_like_the_column(pa.array(values, pa.float64()))


@settings(max_examples=150, deadline=None)
@given(_strings)
def test_string_keys_sort_like_the_column(values: list[str | None]) -> None:
    array = pa.array(values, pa.string())
    _assert_sorts_like_the_column(array)
    _assert_sorts_like_the_column(array.slice(1))  # an offset into the buffers
    _assert_sorts_like_the_column(pa.array(values, pa.large_string()))


def test_temporal_decimal_and_boolean_keys_sort_like_the_column() -> None:
    days = [dt.date(2026, 1, 3), None, dt.date(1969, 12, 31), dt.date(2026, 1, 1)]
    _assert_sorts_like_the_column(pa.array(days, pa.date32()))
    times = [dt.datetime(2026, 1, 1, 5), dt.datetime(1960, 1, 1), None, dt.datetime(2026, 1, 1)]
    _assert_sorts_like_the_column(pa.array(times, pa.timestamp("us", tz="UTC")))
    _assert_sorts_like_the_column(pa.array(times, pa.timestamp("us")))
    decimals = [decimal.Decimal("1.25"), decimal.Decimal("-3.50"), None, decimal.Decimal("0.01")]
    _assert_sorts_like_the_column(pa.array(decimals, pa.decimal128(10, 2)))
    _assert_sorts_like_the_column(pa.array([True, None, False, True]))
    encoded = pa.array(["b", "a", None, "b"]).dictionary_encode()
    assert column_keys(encoded).tolist() == column_keys(encoded.dictionary_decode()).tolist()


def test_nan_sorts_last_and_negative_zero_equals_zero() -> None:
    keys = column_keys(pa.array([float("nan"), float("inf"), -0.0, 0.0, None, -1.0]))
    assert keys[4] == 0 and keys[0] > keys[1] > keys[3] > keys[5] > keys[4]
    assert keys[2] == keys[3]


def test_strings_tie_only_beyond_their_first_eight_bytes() -> None:
    keys = column_keys(pa.array(["abcdefgh1", "abcdefgh2", "abcdefg", "", None]))
    assert keys[0] == keys[1] > keys[2] > keys[3] >= 1 and keys[4] == 0


def test_unorderable_types_are_refused() -> None:
    with pytest.raises(UnsupportedType, match="cannot be ordered"):
        column_keys(pa.array([[1], [2]]))


def test_zorder_interleaves_bits_with_the_first_column_leading() -> None:
    x = np.array([0b11, 0b00, 0b10], dtype=np.uint64)
    y = np.array([0b00, 0b11, 0b01], dtype=np.uint64)
    assert zorder_index([x, y], 2).tolist() == [0b1010, 0b0101, 0b1001]


@pytest.mark.parametrize("bits", [1, 7, 20, 32])
def test_two_columns_interleave_as_the_bit_by_bit_loop_does(bits: int) -> None:
    rng = np.random.default_rng(bits)
    ranks = [rng.integers(0, 1 << bits, 2_000, dtype=np.uint64) for _ in range(2)]
    expected = np.zeros(2_000, dtype=np.uint64)
    for level in range(bits):
        for d, rank in enumerate(ranks):
            bit = (rank >> np.uint64(level)) & np.uint64(1)
            expected |= bit << np.uint64(2 * level + 1 - d)
    assert zorder_index(ranks, bits).tolist() == expected.tolist()


@pytest.mark.parametrize("kind", ["zorder", "hilbert"])
@pytest.mark.parametrize("rows", [5_000, 2 * VALUES_SLICE_ROWS + 1_000])  # one slice; three
def test_curve_values_rank_each_key_by_the_cut_points_at_or_below_it(kind: str, rows: int) -> None:
    rng = np.random.default_rng(5)
    keys = [
        rng.integers(0, 1 << 63, rows, dtype=np.uint64),
        rng.integers(0, 40, rows, dtype=np.uint64),
    ]
    curve = fit_curve(kind, [k[::3] for k in keys])
    ranks = [
        (np.searchsorted(cut, key, side="right").astype(np.uint64) << np.uint64(curve.bits))
        // np.uint64(len(cut) + 1)
        for cut, key in zip(curve.cuts, keys, strict=True)
    ]
    index = hilbert_index if kind == "hilbert" else zorder_index
    assert curve.values(keys).tolist() == index(ranks, curve.bits).tolist()


@pytest.mark.parametrize(("dims", "bits"), [(2, 1), (2, 3), (2, 5), (3, 3), (4, 2)])
def test_hilbert_visits_every_cell_once_and_steps_to_a_neighbour(dims: int, bits: int) -> None:
    side = 1 << bits
    grid = np.stack(np.meshgrid(*[np.arange(side)] * dims, indexing="ij"), -1).reshape(-1, dims)
    coords = grid.astype(np.uint64)
    index = hilbert_index([coords[:, d] for d in range(dims)], bits)
    assert sorted(index.tolist()) == list(range(side**dims))
    path = grid[np.argsort(index)].astype(np.int64)
    assert (np.abs(np.diff(path, axis=0)).sum(axis=1) == 1).all()


def test_one_column_curve_is_the_column_order() -> None:
    values = pa.array([5, None, -2, 7, 5, 0])
    keys = column_keys(values)
    curve = fit_curve("hilbert", [keys])
    order = np.argsort(curve.values([keys]), kind="stable")
    assert values.take(pa.array(order)).to_pylist() == [None, -2, 0, 5, 5, 7]
    assert curve_for_clustering(1) == "zorder" and curve_for_clustering(2) == "hilbert"


@pytest.mark.parametrize("kind", ["zorder", "hilbert"])
def test_ranks_make_skewed_columns_count_alike(kind: str) -> None:
    """A column of a huge range and one of a tiny range both spread over the curve: sorting by
    it, each half of the rows covers about half of each column's values."""
    rng = np.random.default_rng(7)
    a = rng.integers(0, 10**15, 20_000)
    b = rng.integers(0, 100, 20_000)
    keys = [column_keys(pa.array(a)), column_keys(pa.array(b))]
    curve = fit_curve(kind, keys)  # type: ignore[arg-type]
    order = np.argsort(curve.values(keys), kind="stable")
    first = order[: len(order) // 2]
    # the first half of the curve spans neither column whole: both are split, not one only
    assert np.ptp(a[first]) < 0.9 * np.ptp(a) or np.ptp(b[first]) < 0.9 * np.ptp(b)
    quarters = np.array_split(order, 4)
    assert all(len(np.unique(b[q])) < 90 for q in quarters)
    assert all(np.ptp(a[q]) < 0.9 * np.ptp(a) for q in quarters)


def test_range_bounds_split_evenly_and_ids_follow_them() -> None:
    values = np.arange(1000, dtype=np.uint64)
    bounds = range_bounds(values, 4)
    assert bounds.tolist() == [250, 500, 750]
    counts = np.bincount(range_ids(values, bounds))
    assert counts.tolist() == [250, 250, 250, 250]
    assert range_bounds(values, 1).size == 0
    assert range_bounds(np.full(10, 3, dtype=np.uint64), 5).tolist() == [3]
