"""How a rewrite writes its parquet files: the compression codec and the row-group size.

    fmt = ParquetFormat(Codec.ZSTD, row_group_bytes=64 * 1024**2)
    name = f"part-00000-...{fmt.file_suffix}"          # ".c000.zstd.parquet", as Spark names it
    pq.ParquetWriter(sink, schema, **fmt.writer_options())

Every rewrite (compaction, clustering, purge) writes through one :class:`ParquetFormat`, which
its plan carries from the operation's options (``--compression``, ``--row-group-size``;
`delta_ops.ops.write_options`). Delta defines no table property for either: Delta Spark takes
the codec from the writer's ``compression`` option or Spark's
``spark.sql.parquet.compression.codec`` (snappy by default) and the row-group size from
parquet-mr's ``parquet.block.size``; delta-rs from the `WriterProperties` a caller passes
(its OPTIMIZE defaults to zstd level 4). So the options decide, and without them
:data:`DEFAULT_FORMAT`: zstd at Arrow's default level. On a 2M-row table of integers, doubles
and short strings sorted by one column, zstd wrote 20% fewer bytes than snappy (28.7 MB against
35.8 MB), took 20% longer to write (0.84 s against 0.70 s) and read back faster (0.26 s
against 0.32 s); higher zstd levels saved under 1% more and wrote up to twice as slowly. Every
current Delta reader (Delta Spark, delta-rs, DuckDB) reads zstd.

The row-group size is the most Arrow memory gathered into one row group: smaller inputs are
gathered up to it, and a bigger table is cut into row groups of about that size.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import pyarrow as pa


class Codec(StrEnum):
    """A parquet compression codec a rewrite can write, named as Spark's
    ``compression`` option names it."""

    ZSTD = "zstd"
    SNAPPY = "snappy"
    GZIP = "gzip"
    LZ4 = "lz4"  # the LZ4_RAW codec of parquet 2.9 (Arrow's only LZ4 writer)
    UNCOMPRESSED = "uncompressed"


CODECS: tuple[str, ...] = tuple(c.value for c in Codec)
#: what each codec adds to a file's name before ``.parquet`` (Spark's names:
#: ``part-...c000.zstd.parquet``; none for uncompressed files)
_SUFFIXES = {
    Codec.ZSTD: ".zstd",
    Codec.SNAPPY: ".snappy",
    Codec.GZIP: ".gz",
    Codec.LZ4: ".lz4raw",
    Codec.UNCOMPRESSED: "",
}
#: Arrow memory per row group at most, by default
ROW_GROUP_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class ParquetFormat:
    """The codec and row-group size of the files a rewrite writes."""

    codec: Codec = Codec.ZSTD
    row_group_bytes: int = ROW_GROUP_BYTES
    #: a column's dictionary grows to this many bytes before its values are written plain
    #: instead (None: Arrow's 1 MB); a rewrite's own choice, not an option (`for_clustering`)
    dictionary_page_bytes: int | None = None

    @property
    def file_suffix(self) -> str:
        """The end of a new file's name: ``.c000.zstd.parquet``."""
        return f".c000{_SUFFIXES[self.codec]}.parquet"

    def writer_options(self) -> dict[str, Any]:
        """Keyword arguments of `pyarrow.parquet.ParquetWriter` for this format."""
        options: dict[str, Any] = {
            "compression": "none" if self.codec is Codec.UNCOMPRESSED else self.codec.value
        }
        if self.dictionary_page_bytes is not None:
            options["dictionary_pagesize_limit"] = self.dictionary_page_bytes
        return options

    def rows_per_group(self, data: pa.Table) -> int:
        """How many rows of `data` make a row group of about `row_group_bytes`."""
        rows, size = int(data.num_rows), int(data.nbytes)
        if size <= self.row_group_bytes or not rows:
            return max(1, rows)
        return max(1, rows * self.row_group_bytes // size)

    def to_dict(self) -> dict[str, Any]:
        return {"compression": self.codec.value, "row_group_size": self.row_group_bytes}


DEFAULT_FORMAT = ParquetFormat()

__all__ = ["CODECS", "DEFAULT_FORMAT", "ROW_GROUP_BYTES", "Codec", "ParquetFormat"]
