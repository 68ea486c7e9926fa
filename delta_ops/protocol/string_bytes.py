"""The bytes behind an Arrow string array, for whole-array byte searches.

A vectorised substring match (`pyarrow.compute.match_substring`) visits every row; when the
question is only "does any row hold this?", one `memchr`-speed search over the values' bytes
answers it in a fraction of the time (2 ms against 36 ms for 80k stats documents). The answer
is conservative: bytes a null slot happens to keep count too, so a caller uses it to skip work
when nothing matches and does the exact, per-row check otherwise.

For example:

    if not any_holds(paths, b"%", b".."):
        return paths  # no row needs decoding
"""

from __future__ import annotations

import pyarrow as pa


def data_buffer(strings: pa.Array) -> pa.Buffer:
    """The concatenated bytes of a string or large_string array's values (the slice its
    offsets span), without a copy."""
    offset_type = pa.int64() if pa.types.is_large_string(strings.type) else pa.int32()
    if len(strings) == 0 or strings.buffers()[2] is None:
        return pa.py_buffer(b"")
    offsets = pa.Array.from_buffers(
        offset_type, len(strings) + 1, [None, strings.buffers()[1]], offset=strings.offset
    )
    start, end = offsets[0].as_py(), offsets[len(strings)].as_py()
    return strings.buffers()[2].slice(start, end - start)


#: the bytes searched at a time: a search needs `bytes`, and a copy of the whole buffer at once
#: (17 MB for 65k stats documents) was a fresh allocation whose pages were all faulted in
SCAN_BYTES = 1 << 20


def any_holds(strings: pa.Array, *needles: bytes) -> bool:
    """Whether any of the needles occurs in the bytes of `strings`' values. Never False when
    a row holds one; possibly True when only a null slot's leftover bytes do."""
    view = memoryview(data_buffer(strings))
    overlap = max((len(needle) for needle in needles), default=1) - 1  # a needle across pieces
    for start in range(0, len(view), SCAN_BYTES):
        piece = view[start : start + SCAN_BYTES + overlap].tobytes()
        if any(needle in piece for needle in needles):
            return True
    return False


__all__ = ["any_holds", "data_buffer"]
