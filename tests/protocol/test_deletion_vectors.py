"""Tests for delta_ops.protocol.deletion_vectors: the spec's examples, every DV in the real fixtures, and
DVs we write read back by independent readers (deltalake / delta-rs and DuckDB's delta
extension / delta-kernel-rs)."""

from __future__ import annotations

import json
import re
import shutil
import struct
import uuid
import zlib
from pathlib import Path

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from pyroaring import BitMap64

from delta_ops.errors import InvalidDeletionVector
from delta_ops.protocol.deletion_vectors import (
    NATIVE_MAGIC,
    DeletionVectorDescriptor,
    decode_bitmap,
    dv_relative_paths,
    dv_unique_ids,
    encode_bitmap,
    encode_deletion_vector_file,
    inline_descriptor,
    load_deletion_vector,
    write_deletion_vector_file,
    z85_decode,
    z85_encode,
)
from tests.support import DATA, TABLES, duckdb_connection
from tests.support.dv_tables import RUST_TAIL_DV, z85_crate_encode

DV_TABLES = [
    "delta-rs/table-with-dv-small",
    "kernel/with-short-dv",
    "delta-spark/dv-partitioned-with-checkpoint",
    "delta-spark/log-replay-dv-key-cases",
    "delta-rs/table_with_deletion_logs",
]
SPEC_INLINE_DV = "wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L"

LOCAL = fsspec.filesystem("file")


# --- helpers -------------------------------------------------------------------------------


def _commit_actions(table: Path):
    """Yield (version, action) for every action of every JSON commit, in order."""
    for commit in sorted((table / "_delta_log").glob("*.json")):
        version = int(commit.name.split(".")[0])
        for line in commit.read_text().splitlines():
            if line.strip():
                yield version, json.loads(line)


def _referenced_dvs(table: Path) -> list[dict]:
    seen: dict[str, dict] = {}
    for _, action in _commit_actions(table):
        for kind in ("add", "remove"):
            dv = action.get(kind, {}).get("deletionVector")
            if dv:
                seen[json.dumps(dv, sort_keys=True)] = dv
    return list(seen.values())


def _peer_facts() -> dict[str, dict]:
    lines = (TABLES / "PEER_FACTS.jsonl").read_text().splitlines()
    return {fact["table"]: fact for fact in map(json.loads, filter(None, lines))}


def _spec_descriptor(name: str) -> dict:
    """One of the protocol text's example descriptors ("inline", "uuid", "absolute_path"),
    copied verbatim from the spec into tests/data/spec_deletion_vector_examples.json."""
    return json.loads((DATA / "spec_deletion_vector_examples.json").read_text())[name]


# --- the protocol's own examples ------------------------------------------------------------


def test_spec_inline_example_decodes_to_documented_rows():
    spec = _spec_descriptor("inline")
    desc = DeletionVectorDescriptor.from_dict(spec)
    assert desc.storage_type == "i" and desc.offset is None
    rows = load_deletion_vector(desc, "/nonexistent-table-root", LOCAL)
    assert list(rows) == [3, 4, 7, 11, 18, 29]
    assert desc.relative_path() is None and desc.absolute_path("s3://t") is None
    assert desc.unique_id == "i" + SPEC_INLINE_DV


def test_spec_inline_example_is_spark_native_with_big_endian_framing():
    raw = z85_decode(SPEC_INLINE_DV)
    assert struct.unpack(">i", raw[:4])[0] == NATIVE_MAGIC
    # The same bitmap re-framed little-endian (what Spark's native writer emits today) and in the
    # portable format must decode to the same rows.
    count, length = struct.unpack(">ii", raw[4:12])
    little = struct.pack("<iii", NATIVE_MAGIC, count, length) + raw[12:]
    expected = [3, 4, 7, 11, 18, 29]
    assert list(decode_bitmap(little)) == expected
    assert list(decode_bitmap(encode_bitmap(expected))) == expected


def test_native_format_with_several_buckets():
    from pyroaring import BitMap

    low, high = BitMap([1, 2]), BitMap([5])
    parts = [low.serialize(), BitMap().serialize(), high.serialize()]  # empty middle bucket
    body = b"".join(struct.pack("<i", len(p)) + p for p in parts)
    native = struct.pack("<ii", NATIVE_MAGIC, len(parts)) + body
    assert list(decode_bitmap(native)) == [1, 2, 2 * 2**32 + 5]
    with pytest.raises(InvalidDeletionVector, match="trailing"):
        decode_bitmap(native + b"\x00")
    with pytest.raises(InvalidDeletionVector, match="bucket 2"):
        decode_bitmap(native[:-3])


def test_spec_on_disk_examples_resolve_paths():
    u = DeletionVectorDescriptor.from_dict(_spec_descriptor("uuid"))
    assert u.random_prefix == "ab"
    assert u.uuid() == uuid.UUID("d2c639aa-8816-431a-aaf6-d3fe2512ff61")
    assert u.relative_path() == "ab/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin"
    assert (
        u.absolute_path("s3://mytable/")
        == "s3://mytable/ab/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin"
    )
    assert u.unique_id == "uab^-aqEH.-t@S}K{vb[*k^@4"
    assert u.to_dict() == _spec_descriptor("uuid")

    p = DeletionVectorDescriptor.from_dict(_spec_descriptor("absolute_path"))
    assert p.storage_type == "p"
    assert p.relative_path() is None
    assert p.absolute_path("s3://other") == p.path_or_inline_dv
    encoded = DeletionVectorDescriptor(
        "p", "s3://my%20table/dv.bin", offset=1, size_in_bytes=34, cardinality=1
    )
    assert encoded.absolute_path("ignored") == "s3://my table/dv.bin"


def test_descriptor_validation():
    with pytest.raises(InvalidDeletionVector, match="storageType 'x'"):
        DeletionVectorDescriptor.from_dict(
            {"storageType": "x", "pathOrInlineDv": "abc", "sizeInBytes": 1, "cardinality": 1}
        )
    with pytest.raises(InvalidDeletionVector, match="lacks the field 'sizeInBytes'"):
        DeletionVectorDescriptor.from_dict({"storageType": "i", "pathOrInlineDv": "abcde"})
    with pytest.raises(InvalidDeletionVector, match="only for storageType 'u'"):
        DeletionVectorDescriptor(
            "i", SPEC_INLINE_DV, offset=None, size_in_bytes=40, cardinality=6
        ).uuid()
    no_prefix = DeletionVectorDescriptor(
        "u", z85_encode(bytes(16)), offset=1, size_in_bytes=34, cardinality=1
    )
    assert no_prefix.random_prefix == ""
    assert no_prefix.relative_path() == f"deletion_vector_{uuid.UUID(int=0)}.bin"
    assert (
        "offset"
        not in DeletionVectorDescriptor(
            "i", "00000", offset=None, size_in_bytes=4, cardinality=0
        ).to_dict()
    )


# --- Z85 ------------------------------------------------------------------------------------


def test_z85_reference_vector():
    # The test vector of the Z85 specification (ZeroMQ RFC 32).
    data = bytes([0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B])
    assert z85_encode(data) == "HelloWorld"
    assert z85_decode("HelloWorld") == data


@settings(max_examples=40, deadline=None)
@given(
    st.integers(min_value=0, max_value=1024).flatmap(
        lambda n: st.binary(min_size=4 * n, max_size=4 * n)
    )
)
def test_z85_round_trip(data: bytes):
    text = z85_encode(data)
    assert len(text) == len(data) * 5 // 4
    assert z85_decode(text) == data


@pytest.mark.parametrize(
    "text, problem",
    [
        ("abcd", "multiple of 5"),
        ("abc~d", "'~'"),
        ("abcdé", "non-ASCII"),
        ("#####~", "multiple of 5"),
        ("%nSc1~~~~~", "'~'"),
        ("%nSc1%nSc ", "' '"),
    ],
)
def test_z85_decode_rejects_invalid_text(text, problem):
    with pytest.raises(InvalidDeletionVector, match=problem):
        z85_decode(text)


# The Z85 alphabet of ZeroMQ RFC 32, which Delta Spark's Base85Codec uses.
Z85_ALPHABET = (
    "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
)
Z85_MAX_BLOCK = 85**5 - 1  # above 2**32 - 1: five digits can encode a value 32 bits cannot hold


def spark_z85_decode(text: str) -> bytes:
    """Delta Spark's ``Base85Codec.decodeBlocks`` rewritten independently: per 5-character block
    the sum of digit * 85**k as a Long, then ``sum.toInt`` (its low 32 bits), big-endian."""
    out = bytearray()
    for start in range(0, len(text), 5):
        block = text[start : start + 5]
        total = sum(Z85_ALPHABET.index(ch) * 85 ** (4 - k) for k, ch in enumerate(block))
        out += (total & 0xFFFFFFFF).to_bytes(4, "big")
    return bytes(out)


def z85_block(value: int) -> str:
    """The five Z85 digits of ``value`` (0 <= value <= 85**5 - 1, so possibly above 32 bits)."""
    assert 0 <= value <= Z85_MAX_BLOCK
    digits = []
    for _ in range(5):
        value, digit = divmod(value, 85)
        digits.append(Z85_ALPHABET[digit])
    return "".join(reversed(digits))


def overflow_last_block(data: bytes, padding: int = 0) -> str:
    """Z85 text for ``data`` (not a multiple of 4 bytes) whose last block, holding the trailing
    data bytes then ``padding`` in the padding bytes, is worth 2**32 more than 32 bits hold: the
    low 32 bits, all Spark keeps, still carry ``data``'s bytes."""
    data_bytes = len(data) % 4
    assert data_bytes, "a length that is a multiple of 4 has no padding to overflow"
    pad_bits = 8 * (4 - data_bytes)
    head, tail = data[: len(data) - data_bytes], data[len(data) - data_bytes :]
    value = 2**32 + (int.from_bytes(tail, "big") << pad_bits) + padding
    assert padding < 2**pad_bits and 0xFFFFFFFF < value <= Z85_MAX_BLOCK
    return z85_encode(head) + z85_block(value)


@pytest.mark.parametrize(
    "text, value",
    [
        ("%nSc0", 0xFFFFFFFF),  # the largest block that fits 32 bits
        ("%nSc1", 0),  # 2**32: Spark keeps the low 32 bits
        ("%nSc2", 1),
        ("$0000", 83 * 85**4 - 2**32),  # above 32 bits, but no '#': not the z85 crate's tail
        ("#####HelloWorld", None),  # a '#' block that is not the last one
    ],
)
def test_z85_decode_keeps_the_low_32_bits_of_every_block_but_a_z85_tail(text, value):
    assert z85_decode(text) == spark_z85_decode(text)
    if value is not None:
        assert z85_decode(text) == value.to_bytes(4, "big")


# The last block starts with anything but '#', the z85 crate's tail mark.
@given(
    st.lists(st.text(alphabet=Z85_ALPHABET, min_size=5, max_size=5), max_size=40).filter(
        lambda blocks: not blocks or blocks[-1][0] != "#"
    )
)
def test_z85_decode_matches_spark_on_any_text_without_a_z85_tail(blocks: list[str]):
    text = "".join(blocks)
    assert z85_decode(text) == spark_z85_decode(text)


# What the z85 crate 3.0.6 (the version delta-kernel-rs pins) returns, run once by hand:
# `z85::encode(bytes)`, and `z85::decode` of it gives the bytes back.
Z85_CRATE_OUTPUTS = [
    (b"\x00", "###00"),
    (b"\xff", "###30"),
    (b"\xff\xff", "##960"),
    (b"\xff\xff\xff", "#rr90"),
    (b"\x00\x00\x00", "#0000"),
    (b"\x12\x34", "##0S*"),
    (b"\x03\x00", "##093"),
    (bytes([1, 2, 3, 4, 5]), "0rJua###05"),
    (bytes([0xDE, 0xAD, 0xBE, 0xEF, 1, 2, 3]), "?MsJX#09c6"),
]


@pytest.mark.parametrize("data, text", Z85_CRATE_OUTPUTS)
def test_z85_crate_tails_decode_to_the_bytes_the_crate_encoded(data, text):
    assert z85_crate_encode(data) == text  # the tests' model of the crate, pinned
    assert z85_decode(text) == data
    assert spark_z85_decode(text)[: len(data)] != data  # Delta Spark's reading gets them wrong


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=80))
def test_z85_decode_reads_any_z85_crate_text(data: bytes):
    """Every text the crate writes decodes to its bytes; a whole-block text is Spark's too."""
    text = z85_crate_encode(data)
    assert z85_decode(text) == data
    if len(data) % 4 == 0:
        assert text == z85_encode(data)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=80))
def test_spark_padded_text_never_looks_like_a_z85_tail(data: bytes):
    """What Delta Spark (and delta-ops) writes: zero-padded whole blocks, none above 32 bits,
    so none starts with '#', and each decodes exactly as Spark decodes it."""
    padded = data + bytes(-len(data) % 4)
    text = z85_encode(padded)
    assert "#" not in text[::5]
    assert z85_decode(text) == spark_z85_decode(text) == padded


@pytest.mark.parametrize(
    "text",
    [
        "#####",  # five marks: no bytes left
        "####0",  # four marks: no bytes left
        "###3[",  # 256 does not fit 1 byte
        "##jdd",  # 65536 does not fit 2 bytes
        "#rr91",  # 2**24 does not fit 3 bytes
        "HelloWorld##jdd",
    ],
)
def test_z85_decode_refuses_a_tail_the_crate_never_writes(text):
    with pytest.raises(
        InvalidDeletionVector, match=re.escape(f"last block '{text[-5:]}' starts with '#'")
    ):
        z85_decode(text)


def test_kernel_inline_dv_with_a_z85_tail_deletes_row_3():
    """delta-kernel-rs' `cdf-table-with-dv` v5: 34 bytes whose last two are the chunk
    ``##093`` (``03 00``); its test says the commit deleted row 3. Delta Spark's reading
    (``sum.toInt``) gives the bytes ``08 6e``, row 28168."""
    dv = DeletionVectorDescriptor("i", RUST_TAIL_DV, offset=None, size_in_bytes=34, cardinality=1)
    assert list(load_deletion_vector(dv, "unused-by-inline-dvs", LOCAL)) == [3]
    assert list(decode_bitmap(spark_z85_decode(RUST_TAIL_DV)[:34])) == [28168]
    spark_twin = inline_descriptor([3])
    assert spark_twin.size_in_bytes == 34 and spark_twin.path_or_inline_dv != RUST_TAIL_DV
    assert list(load_deletion_vector(spark_twin, "unused", LOCAL)) == [3]


@given(
    head=st.binary(max_size=64).map(lambda b: b[: len(b) - len(b) % 4]),
    # The top byte of the last block must leave room for 2**32 below 85**5.
    first=st.integers(min_value=0, max_value=7),
    rest=st.binary(max_size=2),
    padding=st.integers(min_value=0, max_value=2**32 - 1),
)
def test_z85_overflowing_padding_leaves_data_bytes_alone(head, first, rest, padding):
    data = head + bytes([first]) + rest
    padding %= 2 ** (8 * (4 - len(data) % 4))
    text = overflow_last_block(data, padding)
    assume(text[-5] != "#")  # a last block starting with '#' is the z85 crate's tail
    assert z85_decode(text) == spark_z85_decode(text)
    assert z85_decode(text)[: len(data)] == data


def test_inline_dv_with_overflowing_padding_loads_like_spark():
    rows = [1, 3, 5]  # three 16-bit values: the serialized bitmap ends 2 bytes into a block
    data = encode_bitmap(rows)
    assert len(data) % 4 == 2
    dv = DeletionVectorDescriptor(
        "i", overflow_last_block(data, 0xFFFF), offset=None, size_in_bytes=len(data), cardinality=3
    )
    assert list(load_deletion_vector(dv, "unused-by-inline-dvs", LOCAL)) == rows


def test_z85_encode_requires_whole_blocks():
    with pytest.raises(ValueError, match="pad"):
        z85_encode(b"abc")


# --- every DV of the real fixtures ----------------------------------------------------------


@pytest.mark.parametrize("table", DV_TABLES)
def test_fixture_dvs_load_with_declared_cardinality(table):
    root = TABLES / table
    dvs = _referenced_dvs(root)
    assert dvs, f"{table} should reference deletion vectors"
    for dv in dvs:
        desc = DeletionVectorDescriptor.from_dict(dv)
        rows = load_deletion_vector(desc, str(root), LOCAL)
        assert len(rows) == dv["cardinality"]
        assert (root / desc.relative_path()).is_file()


@pytest.mark.parametrize("table", DV_TABLES)
def test_fixture_live_row_count_matches_peer_readers(table):
    """Replaying the JSON log by (path, dvId) and subtracting each live file's loaded DV from
    its numRecords gives the row count DuckDB's delta extension reports."""
    root = TABLES / table
    live: dict[tuple[str, str | None], dict] = {}
    for _, action in _commit_actions(root):
        for kind in ("add", "remove"):
            if kind not in action:
                continue
            entry = action[kind]
            dv = entry.get("deletionVector")
            key = (entry["path"], DeletionVectorDescriptor.from_dict(dv).unique_id if dv else None)
            if kind == "add":
                live[key] = entry
            else:
                live.pop(key, None)
    rows = 0
    for add in live.values():
        rows += json.loads(add["stats"])["numRecords"]
        if add.get("deletionVector"):
            desc = DeletionVectorDescriptor.from_dict(add["deletionVector"])
            rows -= len(load_deletion_vector(desc, str(root), LOCAL))
    assert rows == _peer_facts()[table]["kernel_rows"]


def test_dv_small_deletes_two_of_ten_rows():
    root = TABLES / "delta-rs/table-with-dv-small"
    [dv] = _referenced_dvs(root)
    rows = load_deletion_vector(DeletionVectorDescriptor.from_dict(dv), str(root), LOCAL)
    data = pq.read_table(
        root / "part-00000-fae5310a-a37d-4e51-827b-c3d5516560ca-c000.snappy.parquet"
    )
    assert data.num_rows == 10
    assert list(rows) == [0, 9]
    assert data.num_rows - len(rows) == _peer_facts()["delta-rs/table-with-dv-small"]["kernel_rows"]


@pytest.mark.parametrize("table", DV_TABLES)
def test_reencoding_fixture_dvs_reproduces_stored_bytes(table):
    # All fixture DVs keep their rows in bucket 0, so Spark's empty gap buckets never occur and
    # pyroaring's serialization must match Spark's byte for byte.
    root = TABLES / table
    for dv in _referenced_dvs(root):
        desc = DeletionVectorDescriptor.from_dict(dv)
        stored = (root / desc.relative_path()).read_bytes()
        payload = stored[desc.offset + 4 : desc.offset + 4 + desc.size_in_bytes]
        rows = decode_bitmap(payload)
        assert rows.max() < 2**32
        assert encode_bitmap(rows) == payload
        assert encode_bitmap(list(rows)) == payload


# --- corrupted inputs -----------------------------------------------------------------------

DV_SMALL_FILE = "deletion_vector_61d16c75-6994-46b7-a15b-8b538852e50e.bin"


@pytest.fixture
def dv_small(tmp_path) -> tuple[Path, DeletionVectorDescriptor]:
    src = TABLES / "delta-rs/table-with-dv-small"
    root = tmp_path / "table"
    shutil.copytree(src, root)
    [dv] = _referenced_dvs(root)
    return root, DeletionVectorDescriptor.from_dict(dv)


def _rewrite(path: Path, change) -> None:
    data = bytearray(path.read_bytes())
    change(data)
    path.write_bytes(bytes(data))


def _fix_crc(data: bytearray, offset: int = 1) -> None:
    (size,) = struct.unpack_from(">i", data, offset)
    payload = bytes(data[offset + 4 : offset + 4 + size])
    struct.pack_into(">I", data, offset + 4 + size, zlib.crc32(payload))


def test_corrupt_crc_byte(dv_small):
    root, desc = dv_small
    _rewrite(root / DV_SMALL_FILE, lambda d: d.__setitem__(-1, d[-1] ^ 0xFF))
    with pytest.raises(InvalidDeletionVector, match=f"{DV_SMALL_FILE}.*CRC-32 mismatch"):
        load_deletion_vector(desc, str(root), LOCAL)


def test_corrupt_payload_byte_caught_by_crc(dv_small):
    root, desc = dv_small
    _rewrite(root / DV_SMALL_FILE, lambda d: d.__setitem__(-6, d[-6] ^ 0x01))
    with pytest.raises(InvalidDeletionVector, match=f"{DV_SMALL_FILE}.*CRC-32"):
        load_deletion_vector(desc, str(root), LOCAL)


def test_wrong_size_in_descriptor(dv_small):
    root, desc = dv_small
    bad = DeletionVectorDescriptor(
        "u", desc.path_or_inline_dv, offset=1, size_in_bytes=desc.size_in_bytes + 1, cardinality=2
    )
    with pytest.raises(InvalidDeletionVector, match=f"{DV_SMALL_FILE}.*sizeInBytes is 37"):
        load_deletion_vector(bad, str(root), LOCAL)


def test_wrong_size_in_file(dv_small):
    root, desc = dv_small
    _rewrite(root / DV_SMALL_FILE, lambda d: struct.pack_into(">i", d, 1, 35))
    with pytest.raises(InvalidDeletionVector, match=f"{DV_SMALL_FILE}.*35 bytes in the file"):
        load_deletion_vector(desc, str(root), LOCAL)


def test_bad_magic(dv_small):
    root, desc = dv_small

    def change(d: bytearray) -> None:
        struct.pack_into("<i", d, 5, 1234567)
        _fix_crc(d)  # so that the magic, not the checksum, is what fails

    _rewrite(root / DV_SMALL_FILE, change)
    with pytest.raises(InvalidDeletionVector, match=f"{DV_SMALL_FILE}.*magic 1234567"):
        load_deletion_vector(desc, str(root), LOCAL)


def test_wrong_version_byte(dv_small):
    root, desc = dv_small
    _rewrite(root / DV_SMALL_FILE, lambda d: d.__setitem__(0, 2))
    with pytest.raises(InvalidDeletionVector, match=f"{DV_SMALL_FILE}.*format version 2"):
        load_deletion_vector(desc, str(root), LOCAL)


def test_wrong_cardinality(dv_small):
    root, desc = dv_small
    bad = DeletionVectorDescriptor(
        "u", desc.path_or_inline_dv, offset=1, size_in_bytes=desc.size_in_bytes, cardinality=3
    )
    with pytest.raises(InvalidDeletionVector, match=f"{DV_SMALL_FILE}.*cardinality 3"):
        load_deletion_vector(bad, str(root), LOCAL)


def test_truncated_and_missing_file(dv_small):
    root, desc = dv_small
    _rewrite(root / DV_SMALL_FILE, lambda d: d.__delitem__(slice(-2, None)))
    with pytest.raises(InvalidDeletionVector, match=f"{DV_SMALL_FILE}.*truncated"):
        load_deletion_vector(desc, str(root), LOCAL)
    (root / DV_SMALL_FILE).unlink()
    with pytest.raises(InvalidDeletionVector, match=f"{DV_SMALL_FILE}.*does not exist"):
        load_deletion_vector(desc, str(root), LOCAL)


def test_corrupt_inline_dvs_name_inline():
    good = DeletionVectorDescriptor(
        "i", SPEC_INLINE_DV, offset=None, size_in_bytes=40, cardinality=6
    )
    for bad, problem in [
        (
            DeletionVectorDescriptor(
                "i", SPEC_INLINE_DV, offset=None, size_in_bytes=40, cardinality=5
            ),
            "cardinality 5",
        ),
        (
            DeletionVectorDescriptor(
                "i", SPEC_INLINE_DV, offset=None, size_in_bytes=44, cardinality=6
            ),
            "sizeInBytes is 44",
        ),
        (
            DeletionVectorDescriptor(
                "i", "~" + SPEC_INLINE_DV[1:], offset=None, size_in_bytes=40, cardinality=6
            ),
            "'~'",
        ),
        (
            DeletionVectorDescriptor(
                "i", "00000" + SPEC_INLINE_DV[5:], offset=None, size_in_bytes=40, cardinality=6
            ),
            "magic",
        ),
    ]:
        with pytest.raises(InvalidDeletionVector, match=f"^inline: .*{problem}"):
            load_deletion_vector(bad, "/t", LOCAL)
    assert len(load_deletion_vector(good, "/t", LOCAL)) == 6


# --- encoding and writing -------------------------------------------------------------------


def test_encode_bitmap_rejects_out_of_range_rows():
    with pytest.raises(InvalidDeletionVector, match="2\\*\\*63"):
        encode_bitmap([2**63])
    with pytest.raises(InvalidDeletionVector, match="2\\*\\*63"):
        encode_bitmap([-1])
    assert list(decode_bitmap(encode_bitmap([0, 2**63 - 1]))) == [0, 2**63 - 1]


def test_encode_file_layout_and_offsets():
    data, entries = encode_deletion_vector_file([[1, 2], BitMap64([7]), range(100_000)])
    assert data[0] == 1
    assert [e[2] for e in entries] == [2, 1, 100_000]
    assert entries[0][0] == 1
    for (offset, size, _), nxt in zip(entries, entries[1:] + [(len(data), 0, 0)]):
        assert offset + 4 + size + 4 == nxt[0]
    with pytest.raises(InvalidDeletionVector, match="empty"):
        encode_deletion_vector_file([[1], []])


def test_write_file_round_trip_with_prefix_and_no_overwrite(tmp_path, monkeypatch):
    bitmaps = [[0, 5, 2**40], range(10, 20)]
    descs = write_deletion_vector_file(LOCAL, str(tmp_path), bitmaps, random_prefix="q7")
    assert descs[0].offset == 1
    assert all(d.random_prefix == "q7" and d.storage_type == "u" for d in descs)
    assert len({d.path_or_inline_dv for d in descs}) == 1  # one file, packed
    path = tmp_path / descs[0].relative_path()
    assert path.parent.name == "q7" and path.name.startswith("deletion_vector_")
    for desc, rows in zip(descs, bitmaps):
        assert list(load_deletion_vector(desc, str(tmp_path), LOCAL)) == sorted(rows)
        assert DeletionVectorDescriptor.from_dict(desc.to_dict()) == desc

    # A UUID clash must fail instead of overwriting the existing file.
    fixed = descs[0].uuid()
    monkeypatch.setattr(uuid, "uuid4", lambda: fixed)
    before = path.read_bytes()
    with pytest.raises(InvalidDeletionVector, match="already exists"):
        write_deletion_vector_file(LOCAL, str(tmp_path), [[1]], random_prefix="q7")
    assert path.read_bytes() == before


def test_absent_offset_means_first_dv_and_p_paths_are_url_decoded(tmp_path):
    root = tmp_path / "a table"  # the space is URL-encoded in a 'p' descriptor
    root.mkdir()
    [first, second] = write_deletion_vector_file(LOCAL, str(root), [[4], [6, 8]])
    no_offset = DeletionVectorDescriptor(
        "u", first.path_or_inline_dv, offset=None, size_in_bytes=34, cardinality=1
    )
    assert list(load_deletion_vector(no_offset, str(root), LOCAL)) == [4]

    encoded = (root / second.relative_path()).as_uri()
    assert "%20" in encoded
    p = DeletionVectorDescriptor(
        "p", encoded, offset=second.offset, size_in_bytes=second.size_in_bytes, cardinality=2
    )
    assert p.absolute_path("/elsewhere") == encoded.replace("%20", " ")
    assert list(load_deletion_vector(p, "/elsewhere", LOCAL)) == [6, 8]


def test_write_file_on_memory_filesystem():
    fs = fsspec.filesystem("memory")
    root = f"memory://dv-test-{uuid.uuid4()}"
    [desc] = write_deletion_vector_file(fs, root, [[3, 1]])
    assert list(load_deletion_vector(desc, root, fs)) == [1, 3]


def test_inline_descriptor_pads_and_round_trips():
    rows = [3, 4, 7, 11, 18]  # an odd count makes the bitmap 42 bytes: padding is exercised
    desc = inline_descriptor(rows)
    assert desc.storage_type == "i" and desc.offset is None and desc.cardinality == 5
    assert desc.size_in_bytes == len(encode_bitmap(rows)) == 42
    assert len(desc.path_or_inline_dv) == 44 * 5 // 4
    assert z85_decode(desc.path_or_inline_dv) == encode_bitmap(rows) + b"\x00\x00"
    assert list(load_deletion_vector(desc, "/t", LOCAL)) == rows


# --- Arrow helpers --------------------------------------------------------------------------


def test_dv_unique_ids_and_relative_paths_on_arrow():
    u = DeletionVectorDescriptor(
        "u", "ab" + z85_encode(uuid.UUID(int=1).bytes), offset=9, size_in_bytes=34, cardinality=1
    )
    i = DeletionVectorDescriptor("i", SPEC_INLINE_DV, offset=None, size_in_bytes=40, cardinality=6)
    p = DeletionVectorDescriptor("p", "s3://x/dv.bin", offset=1, size_in_bytes=34, cardinality=1)
    rows = [u.to_dict(), None, i.to_dict(), p.to_dict(), u.to_dict()]
    dv_type = pa.struct(
        [
            ("storageType", pa.string()),
            ("pathOrInlineDv", pa.string()),
            ("offset", pa.int32()),
            ("sizeInBytes", pa.int32()),
            ("cardinality", pa.int64()),
        ]
    )
    arr = pa.array(rows, type=dv_type)
    expected_ids = [u.unique_id, None, i.unique_id, p.unique_id, u.unique_id]
    assert dv_unique_ids(arr).to_pylist() == expected_ids
    expected_paths = [u.relative_path(), None, None, None, u.relative_path()]
    assert dv_relative_paths(arr).to_pylist() == expected_paths

    chunked = pa.chunked_array([arr.slice(0, 2), arr.slice(2)])
    assert dv_unique_ids(chunked).to_pylist() == expected_ids
    assert dv_relative_paths(chunked).to_pylist() == expected_paths
    assert dv_unique_ids(pa.chunked_array([], type=dv_type)).to_pylist() == []


def test_dv_unique_ids_respects_struct_validity_over_children():
    # A null struct slot whose children still hold values (as Arrow permits) must be null.
    children = [pa.array(["u", "i"]), pa.array([z85_encode(bytes(16)), SPEC_INLINE_DV])]
    arr = pa.StructArray.from_arrays(
        children, names=["storageType", "pathOrInlineDv"], mask=pa.array([True, False])
    )
    assert dv_unique_ids(arr).to_pylist() == [None, "i" + SPEC_INLINE_DV]
    assert dv_relative_paths(arr).to_pylist() == [None, None]


# --- DVs we write, read by independent readers ---------------------------------------------

WITHOUT_DV = "delta-rs/table-without-dv-small"


def _duckdb_rows(table: Path) -> list[tuple]:
    con = duckdb_connection()
    try:
        return con.sql(f"SELECT * FROM delta_scan('{table}')").fetchall()
    finally:
        con.close()


def _commit_with_dv(root: Path, dv: DeletionVectorDescriptor) -> None:
    """Write version 1 by hand: upgrade the protocol to DVs, then swap the file for itself
    plus ``dv``."""
    actions = {k: v for _, a in _commit_actions(root) for k, v in a.items()}
    old_protocol, metadata, add = actions["protocol"], actions["metaData"], actions["add"]
    # The fixture is (1, 2); writer version 2 implies appendOnly and invariants, which a table-
    # features protocol must then list explicitly.
    assert (old_protocol["minReaderVersion"], old_protocol["minWriterVersion"]) == (1, 2)
    protocol = {
        "minReaderVersion": 3,
        "minWriterVersion": 7,
        "readerFeatures": ["deletionVectors"],
        "writerFeatures": ["appendOnly", "invariants", "deletionVectors"],
    }
    metadata = {
        **metadata,
        "configuration": {**metadata["configuration"], "delta.enableDeletionVectors": "true"},
    }
    stats = json.loads(add["stats"])
    # Deleting rows may leave min/max wider than the remaining values.
    new_stats = {**stats, "tightBounds": False}
    remove = {
        "path": add["path"],
        "deletionTimestamp": 1_700_000_000_000,
        "dataChange": True,
        "extendedFileMetadata": True,
        "partitionValues": add["partitionValues"],
        "size": add["size"],
        "stats": json.dumps({"numRecords": stats["numRecords"]}),
    }
    new_add = {**add, "stats": json.dumps(new_stats), "deletionVector": dv.to_dict()}
    commit_info = {
        "timestamp": 1_700_000_000_000,
        "operation": "DELETE",
        "engineInfo": "delta-ops tests",
    }
    lines = [
        {"commitInfo": commit_info},
        {"protocol": protocol},
        {"metaData": metadata},
        {"remove": remove},
        {"add": new_add},
    ]
    target = root / "_delta_log" / "00000000000000000001.json"
    with open(target, "x") as handle:
        handle.write("\n".join(json.dumps(line) for line in lines) + "\n")


def _assert_readers_see(root: Path, deleted: list[int]) -> None:
    [data_file] = root.glob("*.parquet")
    original = pq.read_table(data_file).to_pylist()
    expected = sorted(
        (row for index, row in enumerate(original) if index not in deleted),
        key=lambda r: r["value"],
    )
    assert len(expected) == len(original) - len(deleted)

    import deltalake

    dt = deltalake.DeltaTable(str(root))
    assert dt.version() == 1
    # deltalake's to_pyarrow_table() refuses every table with the deletionVectors reader
    # feature (pyarrow datasets cannot apply DVs); scan() is its DV-aware DataFusion reader.
    got = pa.RecordBatchReader.from_stream(dt.scan()).read_all().to_pylist()
    assert sorted(got, key=lambda r: r["value"]) == expected
    [dv_row] = pa.RecordBatchReader.from_stream(dt.deletion_vectors()).read_all().to_pylist()
    assert dv_row["filepath"].endswith(data_file.name)
    assert [i for i, keep in enumerate(dv_row["selection_vector"]) if not keep] == deleted

    duck = sorted(_duckdb_rows(root))
    assert duck == [(row["value"],) for row in expected]


@pytest.fixture
def plain_table(tmp_path) -> Path:
    root = tmp_path / "table"
    shutil.copytree(TABLES / WITHOUT_DV, root)
    return root


def test_written_file_dv_is_honoured_by_deltalake_and_duckdb(plain_table):
    deleted = [2, 7]
    [dv] = write_deletion_vector_file(LOCAL, str(plain_table), [deleted])
    assert list(load_deletion_vector(dv, str(plain_table), LOCAL)) == deleted
    _commit_with_dv(plain_table, dv)
    _assert_readers_see(plain_table, deleted)


def test_written_inline_dv_is_honoured_by_deltalake_and_duckdb(plain_table):
    deleted = [0, 9]
    dv = inline_descriptor(deleted)
    _commit_with_dv(plain_table, dv)
    _assert_readers_see(plain_table, deleted)


# --- an inline DV whose last block overflows, at every version ----------------------------

FIRST = pa.table({"id": pa.array(range(8), pa.int64()), "name": [f"r{i}" for i in range(8)]})
APPENDED = pa.table({"id": pa.array([8, 9], pa.int64()), "name": ["r8", "r9"]})


def _hand_commit(root: Path, version: int, actions: list[dict]) -> None:
    with open(root / "_delta_log" / f"{version:020d}.json", "x") as handle:
        handle.write("".join(json.dumps(action) + "\n" for action in actions))


def _file_actions(path: str, size: int, rows: int, dv: dict | None) -> tuple[dict, dict]:
    """The add of ``path`` carrying ``dv``, and the remove that retires it in a later commit."""
    add = {
        "path": path,
        "partitionValues": {},
        "size": size,
        "modificationTime": 1_700_000_000_000,
        "dataChange": True,
        "stats": json.dumps({"numRecords": rows, "tightBounds": dv is None}),
    }
    remove = {
        "path": path,
        "deletionTimestamp": 1_700_000_000_000,
        "dataChange": True,
        "extendedFileMetadata": True,
        "partitionValues": {},
        "size": size,
    }
    if dv is not None:
        add["deletionVector"] = remove["deletionVector"] = dv
    return add, remove


def _dv_history(root: Path, v2_inline_dv: str) -> None:
    """v0 a deltalake write of FIRST; v1 an inline DV deleting rows 1 and 3; v2 the inline DV
    text ``v2_inline_dv`` deleting rows 1, 3 and 5; v3 an append of APPENDED."""
    import deltalake

    deltalake.write_deltalake(str(root), FIRST)
    [data_file] = root.glob("*.parquet")
    assert pq.read_table(data_file).to_pylist() == FIRST.to_pylist()  # row index = position
    size = data_file.stat().st_size

    # v1: upgrade to deletion vectors (writer 2 implies appendOnly and invariants, which a
    # table-features protocol lists) and delete rows 1 and 3 with a correctly padded inline DV.
    actions = {k: v for _, a in _commit_actions(root) for k, v in a.items()}
    assert actions["protocol"] == {"minReaderVersion": 1, "minWriterVersion": 2}
    metadata = {**actions["metaData"], "configuration": {"delta.enableDeletionVectors": "true"}}
    protocol = {
        "minReaderVersion": 3,
        "minWriterVersion": 7,
        "readerFeatures": ["deletionVectors"],
        "writerFeatures": ["appendOnly", "invariants", "deletionVectors"],
    }
    _, plain_remove = _file_actions(data_file.name, size, 8, None)
    v1_add, v1_remove = _file_actions(data_file.name, size, 8, inline_descriptor([1, 3]).to_dict())
    commit_info = {"timestamp": 1_700_000_000_000, "operation": "DELETE"}
    _hand_commit(
        root,
        1,
        [
            {"commitInfo": commit_info},
            {"protocol": protocol},
            {"metaData": metadata},
            {"remove": plain_remove},
            {"add": v1_add},
        ],
    )

    v2_dv = {
        "storageType": "i",
        "pathOrInlineDv": v2_inline_dv,
        "sizeInBytes": len(encode_bitmap([1, 3, 5])),
        "cardinality": 3,
    }
    v2_add, _ = _file_actions(data_file.name, size, 8, v2_dv)
    _hand_commit(root, 2, [{"commitInfo": commit_info}, {"remove": v1_remove}, {"add": v2_add}])

    pq.write_table(APPENDED, root / "appended.parquet")
    appended_size = (root / "appended.parquet").stat().st_size
    appended, _ = _file_actions("appended.parquet", appended_size, 2, None)
    _hand_commit(
        root, 3, [{"commitInfo": {**commit_info, "operation": "WRITE"}}, {"add": appended}]
    )


def _duckdb_rows_at(table: Path, version: int) -> list[dict]:
    con = duckdb_connection()
    try:
        sql = f"SELECT * FROM delta_scan('{table}', version => {version})"
        return con.sql(sql).to_arrow_table().to_pylist()
    finally:
        con.close()


def test_inline_dv_with_overflowing_padding_reads_as_spark_at_every_version(tmp_path):
    """At v2 the serialized bitmap of rows {1, 3, 5} ends 2 bytes into its last 4-byte block; in
    ``table`` that block's padding makes its Z85 value exceed 2**32, which Delta Spark decodes
    to its low 32 bits (``sum.toInt``): the data bytes, the same rows as the zero-padded
    encoding in ``twin``. delta-ops reads ``table`` at every version as DuckDB's delta
    extension and delta-rs read ``twin`` (both refuse ``table`` from v2 on: delta-kernel-rs'
    Z85 decoder rejects blocks above 32 bits), and as the rows computed here."""
    from delta_ops.table.scan import read_table
    from delta_ops.table.snapshot import load_snapshot
    from tests.support import deltalake_rows

    bitmap = encode_bitmap([1, 3, 5])
    assert len(bitmap) % 4 == 2
    canonical = inline_descriptor([1, 3, 5]).path_or_inline_dv
    overflowing = overflow_last_block(bitmap, 0xABCD)
    assert overflowing != canonical and overflowing[:-5] == canonical[:-5]
    last = sum(Z85_ALPHABET.index(ch) * 85 ** (4 - k) for k, ch in enumerate(overflowing[-5:]))
    assert last > 0xFFFFFFFF
    assert spark_z85_decode(overflowing)[: len(bitmap)] == bitmap

    table, twin = tmp_path / "table", tmp_path / "twin"
    _dv_history(table, overflowing)
    _dv_history(twin, canonical)

    def keep(deleted: set[int]) -> list[dict]:
        return [row for index, row in enumerate(FIRST.to_pylist()) if index not in deleted]

    expected = {
        0: keep(set()),
        1: keep({1, 3}),
        2: keep({1, 3, 5}),
        3: keep({1, 3, 5}) + APPENDED.to_pylist(),
    }

    def by_id(rows: list[dict]) -> list[dict]:
        return sorted(rows, key=lambda row: row["id"])

    for version, rows in expected.items():
        ours = read_table(load_snapshot(str(table), version=version)).to_pylist()
        assert by_id(ours) == by_id(rows), version
        assert by_id(_duckdb_rows_at(twin, version)) == by_id(rows), version
        assert by_id(deltalake_rows(twin, version=version)) == by_id(rows), version
        if version < 2:  # before the overflowing DV the peers read ``table`` itself
            assert by_id(_duckdb_rows_at(table, version)) == by_id(rows), version
    assert by_id(read_table(load_snapshot(str(table))).to_pylist()) == by_id(expected[3])
