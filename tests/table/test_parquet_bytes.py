"""`decode_parquet_bytes` (Arrow's reader opened directly) reads every data file of the real
tables in tests/data exactly as `pyarrow.parquet.ParquetFile` does: rows, types and metadata."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from delta_ops.table.parquet_bytes import decode_parquet_bytes
from tests.support import TABLES

DATA_FILES = sorted(
    p for p in TABLES.rglob("*.parquet") if "_delta_log" not in p.parts and p.stat().st_size
)


def test_there_are_real_data_files_to_compare():
    assert len(DATA_FILES) > 200
    assert len({p.relative_to(TABLES).parts[0] for p in DATA_FILES}) == 3  # spark, rs, kernel


@pytest.mark.parametrize("writer", ["delta-spark", "delta-rs", "kernel"])
def test_whole_file_decode_equals_parquet_file(writer):
    compared = 0
    for path in (p for p in DATA_FILES if p.relative_to(TABLES).parts[0] == writer):
        content = path.read_bytes()
        try:
            expected = pq.ParquetFile(
                pa.BufferReader(content), coerce_int96_timestamp_unit="us"
            ).read()
        except (OSError, pa.ArrowException):  # a deliberately damaged fixture file
            with pytest.raises((OSError, pa.ArrowException)):
                decode_parquet_bytes(content)
            continue
        decoded = decode_parquet_bytes(content)
        assert decoded.schema.equals(expected.schema, check_metadata=True), path
        assert decoded.equals(expected), path
        compared += 1
    assert compared > 20


@pytest.mark.parametrize("cut", [0, 4, 100, -9, -1])
def test_damaged_bytes_raise_what_pyarrow_raises(cut):
    sink = pa.BufferOutputStream()
    pq.write_table(pa.table({"id": list(range(100))}), sink)
    content = sink.getvalue().to_pybytes()
    damaged = content[:cut] if cut > 0 else content[:cut] if cut < 0 else b""
    with pytest.raises((OSError, pa.ArrowException)):
        decode_parquet_bytes(damaged)
