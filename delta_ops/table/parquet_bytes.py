"""A whole parquet file held in memory, decoded by the calling thread.

    table = decode_parquet_bytes(content)   # content: the file's bytes

Rewrites read many small files whole and decode each from memory (see
`delta_ops.ops.rewrite`). For a file of a few kilobytes, `pyarrow.parquet.ParquetFile`
spends about a quarter of the decode building Python views of the schema that a whole-file read
never uses; this opens Arrow's reader directly, with the options `ParquetFile` would pass
(Arrow extension types as `ParquetFile` reads them, INT96 timestamps as microseconds, as Delta
readers do), so the rows and schema come out the same. Where a pyarrow release lacks that
reader, `ParquetFile` is used.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

try:
    from pyarrow._parquet import ParquetReader as _ParquetReader
except ImportError:  # pragma: no cover - every supported pyarrow has it
    _ParquetReader = None


@functools.cache
def _reader_options() -> dict[str, Any] | None:
    """The options `ParquetFile` opens a file with that matter to what it reads, or None when
    this pyarrow's reader does not take them all (then `ParquetFile` itself is used)."""
    if _ParquetReader is None:
        return None
    options: dict[str, Any] = {"pre_buffer": False, "coerce_int96_timestamp_unit": "us"}
    extensions = inspect.signature(pq.ParquetFile.__init__).parameters.get(
        "arrow_extensions_enabled"
    )
    if extensions is not None:  # Arrow's reader and ParquetFile default it differently
        options["arrow_extensions_enabled"] = extensions.default
    try:
        accepted = inspect.signature(_ParquetReader.open).parameters
    except (TypeError, ValueError):  # a build without signatures: do not guess
        return None
    return options if all(name in accepted for name in options) else None


def decode_parquet_bytes(content: bytes) -> pa.Table:
    """A parquet file's rows from its whole bytes, decoded by this thread (no read-ahead:
    everything is in memory already). Raises `pa.ArrowException` / `OSError` on a file that is
    not parquet or is damaged, as `pyarrow.parquet` does."""
    options = _reader_options()
    if options is None:
        return pq.ParquetFile(
            pa.BufferReader(content), coerce_int96_timestamp_unit="us", pre_buffer=False
        ).read(use_threads=False)
    reader = _ParquetReader()
    reader.open(pa.BufferReader(content), **options)
    table: pa.Table = reader.read_all(use_threads=False)
    return table


__all__ = ["decode_parquet_bytes"]
