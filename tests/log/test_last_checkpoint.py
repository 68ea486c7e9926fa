"""`_last_checkpoint`: Spark's checksum, strict parsing, and every real hint validates."""

from __future__ import annotations

import json

import pytest

from delta_ops.log.last_checkpoint import (
    last_checkpoint_checksum,
    parse_last_checkpoint,
    serialize_last_checkpoint,
)
from tests.support import TABLES


def test_protocol_test_vector():
    text = '{"k0":"\'v 0\'", "checksum": "adsaskfljadfkjadfkj", "k1":{"k2": 2, "k3": ["v3", [1, 2], {"k4": "v4", "k5": ["v5", "v6", "v7"]}]}}'
    assert last_checkpoint_checksum(json.loads(text)) == "6a92d155a59bf2eecbd4b4ec7fd1f875"


def test_every_fixture_hint_with_a_checksum_validates():
    hints = list(TABLES.glob("*/*/_delta_log/_last_checkpoint"))
    checked = 0
    for hint in hints:
        info = parse_last_checkpoint(hint.read_bytes())
        if "checksum" in info.raw:
            checked += 1
    assert checked >= 8


def test_sort_by_whole_path_value_string_like_spark():
    """With >= 11 array elements Spark's sort of 'path=value' differs from sorting paths."""
    obj = {"a": list(range(12))}
    pairs = sorted(f'"a"+{i}={i}' for i in range(12))
    import hashlib

    assert last_checkpoint_checksum(obj) == hashlib.md5(",".join(pairs).encode()).hexdigest()


def test_duplicate_keys_and_mismatch_are_rejected():
    with pytest.raises(ValueError, match="duplicate key"):
        parse_last_checkpoint(b'{"version": 1, "version": 2}')
    with pytest.raises(ValueError, match="checksum mismatch"):
        parse_last_checkpoint(
            b'{"version": 1, "size": 2, "checksum": "00000000000000000000000000000000"}'
        )
    with pytest.raises(ValueError, match="version"):
        parse_last_checkpoint(b'{"size": 2}')


def test_serialize_round_trips_with_checksum():
    data = serialize_last_checkpoint(
        {"version": 12, "size": 40, "sizeInBytes": 1234, "numOfAddFiles": 30, "parts": None}
    )
    info = parse_last_checkpoint(data)
    assert (info.version, info.size, info.num_of_add_files) == (12, 40, 30)
    assert "parts" not in info.raw and "checksum" in info.raw
