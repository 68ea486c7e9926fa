"""`to_bool_numpy` unpacks an Arrow boolean array's bits: the same values as the array's own
conversion (nulls as False) for slices at any bit offset and chunked arrays; `true_positions`
and `valid_positions` are the positions of the true and the non-null rows."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from delta_ops.log.actions import to_bool_numpy, true_positions, valid_positions


def _expected(mask: pa.Array | pa.ChunkedArray) -> list[bool]:
    return [bool(v) for v in mask.to_pylist()]


@given(
    st.lists(st.booleans(), max_size=70),
    st.integers(0, 70),
    st.integers(0, 70),
    st.booleans(),
)
def test_unpacked_bits_are_the_values(
    values: list[bool | None], start: int, split: int, nulls: bool
) -> None:
    if nulls:  # every third value null
        values = [None if i % 3 == 1 else v for i, v in enumerate(values)]
    array = pa.array(values, pa.bool_())
    start = start % (len(values) + 1)
    sliced = array.slice(start)
    got = to_bool_numpy(sliced)
    assert got.dtype == np.bool_ and got.tolist() == _expected(sliced)
    split = min(split, len(values))
    chunked = pa.chunked_array([array.slice(0, split), array.slice(split)], pa.bool_())
    assert to_bool_numpy(chunked).tolist() == _expected(chunked)
    assert to_bool_numpy(pa.chunked_array([], pa.bool_())).tolist() == []
    for mask in (sliced, chunked):
        want = _expected(mask)
        positions = true_positions(mask)
        assert positions.dtype == np.int64
        assert positions.tolist() == [i for i, v in enumerate(want) if v]
        valid = [i for i, v in enumerate(mask.to_pylist()) if v is not None]
        assert valid_positions(mask).tolist() == valid
