"""The options of every operation that rewrites data files (compact, purge): the parquet codec
and row-group size of the files it writes (`delta_ops.table.parquet_format`).

    options=(..., *WRITE_OPTIONS, ENGINE_OPTION)              # in the operation's OPERATION
    compression: str = "zstd"                                 # in its options dataclass
    row_group_size: int = DEFAULT_FORMAT.row_group_bytes
    plan = plan_compact(snapshot, parquet=parquet_format(options))

Delta defines no table property for either (see `delta_ops.table.parquet_format`), so a run's
options decide, and without them the default format (zstd, 64 MB row groups).
"""

from __future__ import annotations

from typing import Protocol

from delta_ops.ops.operation import Option, OptionKind
from delta_ops.table.parquet_format import CODECS, DEFAULT_FORMAT, Codec, ParquetFormat

COMPRESSION_OPTION = Option(
    "compression",
    OptionKind.CHOICE,
    "codec of the parquet files written",
    DEFAULT_FORMAT.codec.value,
    CODECS,
)
ROW_GROUP_SIZE_OPTION = Option(
    "row_group_size",
    OptionKind.SIZE,
    "row groups of the files written hold at most about this much data (in memory)",
    "64MB",
)
WRITE_OPTIONS = (COMPRESSION_OPTION, ROW_GROUP_SIZE_OPTION)


class WritesParquet(Protocol):
    """The options of an operation that writes data files (fields of its options dataclass)."""

    @property
    def compression(self) -> str: ...

    @property
    def row_group_size(self) -> int: ...


def parquet_format(options: WritesParquet) -> ParquetFormat:
    """The format an operation's parsed options ask for (the default where they are empty)."""
    codec = options.compression or DEFAULT_FORMAT.codec.value
    size = options.row_group_size or DEFAULT_FORMAT.row_group_bytes  # parsed: >= 1
    return ParquetFormat(Codec(codec), int(size))


__all__ = [
    "COMPRESSION_OPTION",
    "ROW_GROUP_SIZE_OPTION",
    "WRITE_OPTIONS",
    "WritesParquet",
    "parquet_format",
]
