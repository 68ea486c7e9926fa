"""Rows' values of the clustering columns as one sortable key: a point on a space-filling curve.

    keys = [column_keys(batch.column(name)) for name in ("a", "b")]      # per column, uint64
    curve = fit_curve("hilbert", keys)           # rank cut points from a sample of the keys
    order = np.argsort(curve.values(keys), kind="stable")   # rows close on the curve, together

Three steps, each vectorized over the rows (numpy and Arrow kernels; loops run over bits and
columns, never over rows):

1. `column_keys`: each column's values as order-preserving unsigned 64-bit keys: nulls
   first (0), integers with the sign bit flipped, floats by their bits (negative ones
   inverted, NaN last, -0.0 as 0.0), decimals as doubles, dates and timestamps by their
   integer value, booleans, strings and binaries by their first 8 bytes (big-endian; longer
   values sharing a prefix tie, as do values differing only by trailing zero bytes). Sorting by one column's keys sorts by that column (up to the
   ties of string prefixes; the smallest value of a type may tie with null).
2. `fit_curve`: with two or more columns, each column's keys are mapped to ranks by cut
   points taken from a sample of them (the quantiles, as Delta Spark's `range_partition_id`
   does before it interleaves): every column then spreads over the same number of bits
   whatever its range or skew, so no column dominates the curve. One column needs no ranks:
   its keys are the curve.
3. `Curve.values`: the ranks interleaved bit by bit (Z-order: Delta Spark's
   `ZOrderClustering`, Morton order) or turned into the index along a Hilbert curve
   (Skilling's transposition, Delta Spark's `HilbertClustering`), which keeps neighbours on
   the curve neighbours in every column. Delta Spark uses Hilbert for two or more clustering
   columns and Z-order for one (`curve_for_clustering`); `OPTIMIZE ZORDER BY` is
   always Z-order.

`range_bounds` cuts a sample of curve values into ranges of about equal row counts: a
clustering rewrite sends each row to its range and sorts each range on its own, so it never
holds more than a range (`delta_ops.ops.cluster`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from delta_ops.errors import UnsupportedType


class CurveKind(StrEnum):
    """A space-filling curve, named as Delta's ZCUBE_ZORDER_CURVE tag names it."""

    ZORDER = "zorder"
    HILBERT = "hilbert"


CURVES: tuple[CurveKind, ...] = tuple(CurveKind)
#: bits of rank per column at most: 65,535 cut points a column, 65 times the 1,000 range ids
#: Delta Spark gives a column (`spark.databricks.io.skipping.mdc.rangeId.max`), and under
#: 0.5 MB a column held through a clustering (2**20 held 3 MB a column of a 1M-row cube)
MAX_RANK_BITS = 16
#: rows a curve's values are computed for at a time: each step's temporaries are arrays of
#: this many rows (a 400k-row sample's values took 10 MB more at once: issue 50.4)
VALUES_SLICE_ROWS = 65_536
_SIGN = np.uint64(1 << 63)
_ONE = np.uint64(1)

__all__ = [
    "CURVES",
    "VALUES_SLICE_ROWS",
    "Curve",
    "CurveKind",
    "column_keys",
    "curve_for_clustering",
    "fit_curve",
    "hilbert_index",
    "key_type_supported",
    "range_bounds",
    "range_ids",
    "zorder_index",
]


def curve_for_clustering(num_columns: int) -> CurveKind:
    """The curve Delta Spark clusters a table with: Hilbert for two or more columns, Z-order
    for one (a Hilbert curve of one dimension is the line itself)."""
    return CurveKind.HILBERT if num_columns >= 2 else CurveKind.ZORDER


# ------------------------------------------------------------------------------ column keys
def key_type_supported(typ: pa.DataType) -> bool:
    """Whether `column_keys` orders values of this Arrow type."""
    if pa.types.is_dictionary(typ):
        return key_type_supported(typ.value_type)
    return bool(
        pa.types.is_integer(typ)
        or pa.types.is_floating(typ)
        or pa.types.is_decimal(typ)
        or pa.types.is_boolean(typ)
        or pa.types.is_temporal(typ)
        or pa.types.is_string(typ)
        or pa.types.is_large_string(typ)
        or pa.types.is_string_view(typ)
        or pa.types.is_binary(typ)
        or pa.types.is_large_binary(typ)
        or pa.types.is_binary_view(typ)
        or pa.types.is_fixed_size_binary(typ)
    )


def column_keys(values: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Order-preserving uint64 keys of `values` (see the module text): `a < b` implies
    `key(a) <= key(b)`, nulls are 0 and every value is at least 1."""
    array = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    typ = array.type
    if pa.types.is_dictionary(typ):
        array = array.dictionary_decode()
        typ = array.type
    if not key_type_supported(typ):
        raise UnsupportedType(f"values of type {typ} cannot be ordered on a curve")
    if pa.types.is_boolean(typ):
        keys = pc.fill_null(array, False).to_numpy(zero_copy_only=False).astype(np.uint64) + _ONE
    elif pa.types.is_unsigned_integer(typ):
        keys = pc.fill_null(array.cast(pa.uint64()), 0).to_numpy().copy()
    elif pa.types.is_integer(typ) or pa.types.is_temporal(typ):
        ints = _as_int64(array)
        keys = ints.view(np.uint64) ^ _SIGN
    elif pa.types.is_floating(typ) or pa.types.is_decimal(typ):
        keys = _float_keys(pc.fill_null(array.cast(pa.float64()), 0.0).to_numpy())
    else:
        keys = _prefix_keys(array)
    out: np.ndarray = np.maximum(keys, _ONE)
    if array.null_count:
        out[~pc.is_valid(array).to_numpy(zero_copy_only=False)] = 0
    return out


def _as_int64(array: pa.Array) -> np.ndarray:
    """Integers, dates, times, timestamps and durations as int64 (nulls 0, overwritten later)."""
    typ = array.type
    if pa.types.is_date32(typ) or pa.types.is_time32(typ):
        array = array.view(pa.int32())
    elif not pa.types.is_integer(typ):  # date64, time64, timestamp, duration: 64-bit values
        array = array.view(pa.int64())
    ints: np.ndarray = pc.fill_null(array.cast(pa.int64()), 0).to_numpy()
    return ints.astype(np.int64, copy=True)


def _float_keys(doubles: np.ndarray) -> np.ndarray:
    """IEEE doubles as keys in numeric order: positive ones with the sign bit set, negative
    ones inverted; every NaN after +inf, -0.0 as 0.0."""
    nan = np.isnan(doubles)
    bits = (np.where(nan, 0.0, doubles) + 0.0).view(np.uint64)  # + 0.0: -0.0 becomes 0.0
    negative = (bits & _SIGN) != 0
    keys = np.where(negative, ~bits, bits | _SIGN)
    keys[nan] = np.uint64(0xFFFFFFFFFFFFFFFF)  # NaN after +inf, as Spark orders it
    return keys


def _prefix_keys(array: pa.Array) -> np.ndarray:
    """Strings and binaries by their first 8 bytes, big-endian (shorter ones padded with zero
    bytes, so a prefix sorts before what extends it)."""
    typ = array.type
    if (
        pa.types.is_fixed_size_binary(typ)
        or pa.types.is_string_view(typ)
        or pa.types.is_binary_view(typ)
        or not pa.types.is_large_binary(typ)
    ):
        array = array.cast(pa.large_binary())
    n = len(array)
    if n == 0:
        return np.zeros(0, dtype=np.uint64)
    _, offsets_buffer, data_buffer = array.buffers()
    offsets = np.frombuffer(offsets_buffer, dtype=np.int64)[array.offset : array.offset + n + 1]
    data = (
        np.frombuffer(data_buffer, dtype=np.uint8)
        if data_buffer is not None
        else np.zeros(0, dtype=np.uint8)
    )
    starts, lengths = offsets[:-1], np.diff(offsets)
    keys = np.zeros(n, dtype=np.uint64)
    padded = np.concatenate([data, np.zeros(8, dtype=np.uint8)])  # reads past the end are 0
    for j in range(8):
        byte = padded[starts + j].astype(np.uint64)
        byte[lengths <= j] = 0
        keys |= byte << np.uint64(8 * (7 - j))
    return keys


# ------------------------------------------------------------------------------ the curves
def zorder_index(ranks: Sequence[np.ndarray], bits: int) -> np.ndarray:
    """The Morton (Z-order) index of each row: the `bits` low bits of every column's rank
    interleaved, most significant first, the first column's bit leading each level."""
    k = len(ranks)
    if k * bits > 64:
        raise ValueError(f"{k} columns of {bits} bits do not fit 64 bits")
    if k == 2:  # the common case in a dozen whole-array steps instead of one per bit
        low = np.uint64((1 << bits) - 1)  # bits <= 32 here
        first, second = (_spread_bits(np.asarray(r, dtype=np.uint64) & low) for r in ranks)
        interleaved: np.ndarray = (first << _ONE) | second
        return interleaved
    out = np.zeros(len(ranks[0]) if k else 0, dtype=np.uint64)
    for level in range(bits):
        for d, rank in enumerate(ranks):
            bit = (rank >> np.uint64(level)) & _ONE
            out |= bit << np.uint64(level * k + (k - 1 - d))
    return out


#: (shift, mask) steps that move bit i of a 32-bit value to bit 2i
_SPREAD_STEPS = tuple(
    (np.uint64(shift), np.uint64(mask))
    for shift, mask in (
        (16, 0x0000FFFF0000FFFF),
        (8, 0x00FF00FF00FF00FF),
        (4, 0x0F0F0F0F0F0F0F0F),
        (2, 0x3333333333333333),
        (1, 0x5555555555555555),
    )
)


def _spread_bits(values: np.ndarray) -> np.ndarray:
    """Values below 2**32 with bit i moved to bit 2i (zeros between)."""
    out = values.copy()
    for shift, mask in _SPREAD_STEPS:
        out |= out << shift
        out &= mask
    return out


def hilbert_index(ranks: Sequence[np.ndarray], bits: int) -> np.ndarray:
    """The index of each row's cell along a Hilbert curve through a grid of 2**bits cells per
    column: Skilling's transposition of the coordinates ("Programming the Hilbert curve",
    2004), vectorized over the rows, then its bits interleaved as in Z-order. Consecutive
    indexes are neighbouring cells (one step in one column)."""
    k = len(ranks)
    if k * bits > 64:
        raise ValueError(f"{k} columns of {bits} bits do not fit 64 bits")
    x = [np.asarray(r, dtype=np.uint64).copy() for r in ranks]
    if k < 2 or bits == 0:
        return zorder_index(x, bits)
    top = np.uint64(1 << (bits - 1))
    q = top
    while q > 1:  # inverse undo
        p = q - _ONE
        for i in range(k):
            high = (x[i] & q) != 0
            # invert the low bits of x[0] where x[i]'s bit is set, else exchange them with x[i]'s
            t = np.where(high, np.uint64(0), (x[0] ^ x[i]) & p)
            x[0] = np.where(high, x[0] ^ p, x[0] ^ t)
            if i:
                x[i] = x[i] ^ t
        q >>= _ONE
    for i in range(1, k):  # Gray encode
        x[i] = x[i] ^ x[i - 1]
    t = np.zeros_like(x[0])
    q = top
    while q > 1:
        t = np.where((x[k - 1] & q) != 0, t ^ (q - _ONE), t)
        q >>= _ONE
    for i in range(k):
        x[i] = x[i] ^ t
    return zorder_index(x, bits)


@dataclass(frozen=True)
class Curve:
    """A curve fitted to a table's clustering columns: which curve, and each column's rank cut
    points (none for a single column, whose keys are the curve)."""

    kind: CurveKind
    cuts: tuple[np.ndarray, ...]
    bits: int

    @property
    def num_columns(self) -> int:
        return len(self.cuts)

    def values(self, keys: Sequence[np.ndarray]) -> np.ndarray:
        """Each row's position on the curve (uint64) from its columns' `column_keys`."""
        if len(keys) != len(self.cuts):
            raise ValueError(f"{len(keys)} key columns for a curve of {len(self.cuts)}")
        if len(keys) == 1:
            return np.asarray(keys[0], dtype=np.uint64)
        rows = len(keys[0])
        if rows <= VALUES_SLICE_ROWS:
            return self._values(keys)
        # slice by slice: the steps' temporaries (a dozen arrays of the rows) stay small
        out = np.empty(rows, dtype=np.uint64)
        for start in range(0, rows, VALUES_SLICE_ROWS):
            stop = min(rows, start + VALUES_SLICE_ROWS)
            out[start:stop] = self._values([key[start:stop] for key in keys])
        return out

    def _values(self, keys: Sequence[np.ndarray]) -> np.ndarray:
        # ranks stretched over all `bits`: a column of few distinct values spans the grid
        # as widely as one of many (else its ranks would sit in the low bits only)
        ranks = [
            (_ranks(cut, key) << np.uint64(self.bits)) // np.uint64(len(cut) + 1)
            for cut, key in zip(self.cuts, keys, strict=True)
        ]
        if self.kind is CurveKind.HILBERT:
            return hilbert_index(ranks, self.bits)
        return zorder_index(ranks, self.bits)


def _ranks(cut: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """How many cut points lie at or below each key (uint64): looked up in the keys' sorted
    order, where each binary search starts near the last one's answer (a lookup of unordered
    keys in a big cut array misses the cache at every step: ~3 times slower, sort included)."""
    keys = np.asarray(keys)
    order = np.argsort(keys)
    ranks = np.empty(len(keys), dtype=np.uint64)
    ranks[order] = np.searchsorted(cut, keys[order], side="right")
    return ranks


def fit_curve(kind: CurveKind, samples: Sequence[np.ndarray]) -> Curve:
    """The curve of `kind` over columns whose keys `samples` are samples of: with two or more
    columns, each one's cut points are its sample's distinct quantiles (at most 2**bits - 1 of
    them, bits = min(MAX_RANK_BITS, 64 // columns)), so ranks spread evenly over the rows."""
    kind = CurveKind(kind)  # ValueError for an unknown name
    if not samples:
        raise ValueError("a curve needs at least one column")
    if len(samples) == 1:
        return Curve(kind, (np.zeros(0, dtype=np.uint64),), 64)
    bits = min(MAX_RANK_BITS, 64 // len(samples))
    limit = (1 << bits) - 1
    cuts = []
    for sample in samples:
        distinct = _distinct(np.asarray(sample, dtype=np.uint64))
        if len(distinct) > limit:
            positions = np.linspace(0, len(distinct) - 1, limit).round().astype(np.int64)
            distinct = _distinct(distinct[positions])
        # a rank is the number of cut points at or below a key: the smallest distinct key
        # needs no cut point of its own (rank 0)
        cuts.append(distinct[1:] if len(distinct) else distinct)
    return Curve(kind, tuple(cuts), bits)


def range_bounds(sample: np.ndarray, ranges: int) -> np.ndarray:
    """At most `ranges - 1` ascending cut points that split the sampled curve values into
    `ranges` ranges of about equal counts (fewer where values repeat)."""
    if ranges <= 1 or len(sample) == 0:
        return np.zeros(0, dtype=np.uint64)
    ordered = np.sort(np.asarray(sample, dtype=np.uint64))
    positions = (np.arange(1, ranges) * len(ordered)) // ranges
    return _distinct(ordered[positions])


def _distinct(values: np.ndarray) -> np.ndarray:
    """The distinct values, ascending: a sort and a comparison of neighbours (numpy's
    `unique` hashes uint64 keys, some 15 times slower on a sample of 400k)."""
    ordered = np.sort(values)
    if len(ordered) < 2:
        return ordered
    keep = np.empty(len(ordered), dtype=bool)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    out: np.ndarray = ordered[keep]
    return out


def range_ids(values: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """Each value's range under `bounds` (`range_bounds`): 0 .. len(bounds)."""
    ids: np.ndarray = np.searchsorted(bounds, values, side="right")
    return ids
