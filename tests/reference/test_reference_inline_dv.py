"""Delta Spark reading the inline deletion vectors of `tests/support/dv_tables.py`: the history
of delta-kernel-rs' `cdf-table-with-dv`, its DVs in Delta Spark's own encoding and in the Rust
`z85` crate's (docs/decisions.md, "Inline deletion vectors are decoded as their writer encoded
them").

- Delta Spark's encoding: Delta Spark reads every version's rows, as delta-ops, DuckDB and
  delta-rs do (tests/table/test_inline_dv_tables.py).
- The z85 crate's: every version alike too, except the one whose text ends in the crate's short
  tail (`##093`, v5, which deletes row 3). Delta Spark decodes that tail as a whole block,
  names row 28168 of the 10-row file, deletes nothing and reads 10 rows where the writer,
  DuckDB, delta-rs and delta-ops read 9. The test pins that run-time behaviour: if a Delta
  Spark release learns the tail, it goes red and the decision's text must change.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.reference.delta_spark import DeltaSpark
from tests.support.dv_tables import (
    ALL_VALUES,
    EXPECTED_VALUES,
    RUST_TAIL_VERSION,
    DvText,
    build_inline_dv_history,
)


@pytest.mark.parametrize("encoding", list(DvText))
def test_delta_spark_reads_the_inline_dv_history(
    encoding: DvText, delta_spark: DeltaSpark, tmp_path: Path
) -> None:
    root = build_inline_dv_history(tmp_path / encoding.value, encoding)
    tables = delta_spark.read_versions(root, EXPECTED_VALUES)
    read = {v: sorted(t.column("value").to_pylist()) for v, t in tables.items()}
    expected = dict(EXPECTED_VALUES)
    if encoding is DvText.Z85_CRATE:
        expected[RUST_TAIL_VERSION] = ALL_VALUES  # Delta Spark misreads the crate's tail
    assert read == expected
