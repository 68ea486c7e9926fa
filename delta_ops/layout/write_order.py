"""The order a write to a clustered table gives its rows: along the table's curve over its
clustering columns, so that the rows of a file, and of each of its row groups, are neighbours on
the curve and cover a small box of those columns' values.

    order = WriteOrder((("ts",), ("id",)), CurveKind.HILBERT)
    data = order.sort(data)                  # one task's rows, the curve fitted to them

    curve = order.fit(sample)                # or one curve fitted to a sample of the write ...
    values = order.values(batch, curve)      # ... so every task's rows get comparable positions

Columns are name paths (``("s", "x")`` for a nested field), matched case-insensitively at the
top level as Spark matches a DataFrame's columns. Delta Spark writes the files of a clustered
table unsorted and untagged (only OPTIMIZE clusters and tags: ``clusteringProvider`` and the
ZCUBE tags), and so does delta-ops: a sorted write leaves the tags off too, since only a
clustering rewrite's cube is one sorted whole, and a later `compact` merges these files as
it merges any unclustered file. The curve and the keys are `delta_ops.layout.curves`'.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from delta_ops.layout.curves import Curve, CurveKind, column_keys, fit_curve

#: keys of at most this many rows (evenly spaced) fit a curve
SAMPLE_ROWS = 200_000


def curve_keys(
    data: pa.Table | pa.RecordBatch, columns: Sequence[tuple[str, ...]]
) -> list[np.ndarray]:
    """Each column's curve keys (`column_keys`) for the rows of `data`; a top-level name is
    matched exactly, else case-insensitively."""
    names = {name.lower(): name for name in data.schema.names}
    out = []
    for path in columns:
        top = path[0] if path[0] in data.schema.names else names[path[0].lower()]
        column: pa.Array | pa.ChunkedArray = data.column(top)
        for part in path[1:]:
            column = pc.struct_field(column, part)
        out.append(column_keys(column))
    return out


def stride_sample(keys: np.ndarray, limit: int = SAMPLE_ROWS) -> np.ndarray:
    """Every n-th key, at most about `limit` of them."""
    step = max(1, len(keys) // limit)
    return keys[::step]


@dataclass(frozen=True)
class WriteOrder:
    """Rows ordered along a curve of `kind` over `columns` (name paths)."""

    columns: tuple[tuple[str, ...], ...]
    kind: CurveKind

    def fit(self, data: pa.Table | pa.RecordBatch) -> Curve:
        """The curve fitted to (a stride sample of) the rows of `data`."""
        return fit_curve(self.kind, [stride_sample(k) for k in curve_keys(data, self.columns)])

    def values(self, data: pa.Table | pa.RecordBatch, curve: Curve) -> np.ndarray:
        """Each row's position on `curve` (uint64)."""
        return curve.values(curve_keys(data, self.columns))

    def sort(self, data: pa.Table) -> pa.Table:
        """`data`'s rows along the curve fitted to them (ties in input order)."""
        if data.num_rows < 2:
            return data
        positions = self.values(data, self.fit(data))
        return data.take(pa.array(np.argsort(positions, kind="stable")))


__all__ = ["SAMPLE_ROWS", "WriteOrder", "curve_keys", "stride_sample"]
