"""Tables with inline deletion vectors, built by the tests: one history, two encodings of its DVs.

The history is delta-kernel-rs' public test table `cdf-table-with-dv`: ten rows `value` 0..9 in
one file, then a deletion vector per commit, its rows as that table's own test lists them:

    v0 insert 0..9     v1 delete {0, 9}   v2 restore them    v3 delete {0, 1, 4, 5}
    v4 restore {1, 4}  v5 restore {0, 5}, delete {3}          v6 restore 3

Every DV is inline, in one of two encodings of the same bitmaps (:class:`DvText`):

* ``Z85_CRATE``: as the Rust `z85` crate writes them (delta-rs, delta-kernel-rs): a length that
  is not a multiple of 4 ends in a short chunk marked with '#'. The v5 bitmap is 34 bytes, so
  its text ends in ``##093`` (bytes ``03 00``), the kernel table's own text byte for byte
  (:data:`RUST_TAIL_DV`).
* ``SPARK``: as Delta Spark's `Base85Codec` (and delta-ops) write them: zero-padded blocks.

Both must read the same rows at every version (:data:`EXPECTED_VALUES`) in every reader: our
scan and `inspect`, DuckDB's delta extension (tests/table/test_inline_dv_tables.py), and Delta Spark,
whose reference tier builds the tables with :func:`build_inline_dv_history` too.

    root = build_inline_dv_history(tmp_path / "rust", DvText.Z85_CRATE)
    spark.read.format("delta").option("versionAsOf", 5).load(str(root)).count()   # 9
"""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from delta_ops.protocol.deletion_vectors import encode_bitmap, inline_descriptor
from tests.support.log_builder import add, commit_info, remove, write_commit

#: the v5 DV text of delta-kernel-rs' `cdf-table-with-dv` (row 3 deleted; 34 bytes, so the
#: z85 crate ends it with a 2-byte chunk: ``##093``)
RUST_TAIL_DV = "^Bg9^0rr910000000000iXQKl0rr91000005c8Xg##093"
RUST_TAIL_VERSION = 5

#: the rows each version deletes from the one data file (None: no deletion vector)
DELETED: dict[int, list[int] | None] = {
    0: None,
    1: [0, 9],
    2: None,
    3: [0, 1, 4, 5],
    4: [0, 5],
    5: [3],
    6: None,
}
ALL_VALUES = list(range(10))
#: the `value`s every reader must return at each version
EXPECTED_VALUES: dict[int, list[int]] = {
    version: [v for v in ALL_VALUES if v not in (deleted or [])]
    for version, deleted in DELETED.items()
}
DATA_FILE = "part-00000-inline-dv-history.snappy.parquet"
SCHEMA_STRING = json.dumps(
    {
        "type": "struct",
        "fields": [{"name": "value", "type": "integer", "nullable": True, "metadata": {}}],
    }
)


class DvText(StrEnum):
    """Which encoder wrote a DV's Z85 text."""

    Z85_CRATE = "z85-crate"  # Rust writers: a short last chunk marked with '#'
    SPARK = "spark"  # Delta Spark and delta-ops: zero bytes pad the last block


Z85_ALPHABET = (
    "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
)


def z85_digits(value: int) -> str:
    """The five Z85 digits of ``value`` (0 <= value < 85**5), most significant first."""
    assert 0 <= value < 85**5
    digits = []
    for _ in range(5):
        value, digit = divmod(value, 85)
        digits.append(Z85_ALPHABET[digit])
    return "".join(reversed(digits))


def z85_crate_encode(data: bytes) -> str:
    """Z85 as the `z85` crate (3.x) encodes any length, written here from its documented rule,
    not by delta-ops' codec: whole 4-byte chunks as ZeroMQ's Z85; a last chunk of k < 4 bytes
    as the five digits of its big-endian value with the first 4 - k replaced by '#'.
    (tests/protocol/test_deletion_vectors.py pins it to the crate's own outputs.)"""
    whole = len(data) - len(data) % 4
    text = "".join(z85_digits(int.from_bytes(data[i : i + 4], "big")) for i in range(0, whole, 4))
    tail = data[whole:]
    if tail:
        marks = 4 - len(tail)
        text += "#" * marks + z85_digits(int.from_bytes(tail, "big"))[marks:]
    return text


def inline_dv(rows: list[int], encoding: DvText) -> dict:
    """The inline descriptor of ``rows`` (as the log holds it), its text in ``encoding``."""
    descriptor = inline_descriptor(rows).to_dict()
    if encoding is DvText.Z85_CRATE:
        descriptor["pathOrInlineDv"] = z85_crate_encode(encode_bitmap(rows))
    return descriptor


def build_inline_dv_history(root: Path, encoding: DvText, *, num_records: int | None = 10) -> Path:
    """Write the history at ``root`` (a new directory): one parquet file of ``value`` 0..9 and
    commits 0..6, each DV inline in ``encoding``. ``num_records`` is what the adds' stats
    claim (None: no stats; a count below 10 makes a DV name rows past the file's end).
    Returns ``root``."""
    root.mkdir(parents=True)
    pq.write_table(pa.table({"value": pa.array(ALL_VALUES, pa.int32())}), root / DATA_FILE)
    size = (root / DATA_FILE).stat().st_size
    previous: dict | None = None
    for version, deleted in DELETED.items():
        dv = inline_dv(deleted, encoding) if deleted is not None else None
        actions = [commit_info(1_700_000_000_000 + version * 1000, "DELETE")]
        if version == 0:
            actions = [
                commit_info(1_700_000_000_000, "WRITE"),
                {
                    "protocol": {
                        "minReaderVersion": 3,
                        "minWriterVersion": 7,
                        "readerFeatures": ["deletionVectors"],
                        "writerFeatures": ["deletionVectors"],
                    }
                },
                {
                    "metaData": {
                        "id": "6c1d6c4e-3b7d-4d0e-9a35-1f6c0a0d5e01",
                        "format": {"provider": "parquet", "options": {}},
                        "schemaString": SCHEMA_STRING,
                        "partitionColumns": [],
                        "configuration": {"delta.enableDeletionVectors": "true"},
                        "createdTime": 1_700_000_000_000,
                    }
                },
            ]
        else:
            actions.append(remove(DATA_FILE, size=size, dv=previous))
        actions.append(add(DATA_FILE, size=size, num_records=num_records, dv=dv))
        write_commit(root, version, actions)
        previous = dv
    if encoding is DvText.Z85_CRATE:
        assert inline_dv([3], encoding)["pathOrInlineDv"] == RUST_TAIL_DV
    return root


__all__ = [
    "DELETED",
    "EXPECTED_VALUES",
    "RUST_TAIL_DV",
    "RUST_TAIL_VERSION",
    "DvText",
    "build_inline_dv_history",
    "inline_dv",
    "z85_crate_encode",
    "z85_digits",
]
