"""The test helpers that compare a directory before and after an operation must see every
change: a helper that misses one makes every "refused, nothing written" assertion pass
whatever the operation did (file_digests once carried an lru_cache and did exactly that)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support import file_digests


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "t"
    (root / "_delta_log").mkdir(parents=True)
    (root / "_delta_log" / "00000000000000000000.json").write_bytes(b'{"commitInfo":{}}\n')
    (root / "day=a").mkdir()
    (root / "day=a" / "part-0.parquet").write_bytes(b"PAR1" + b"\x00" * 32 + b"PAR1")
    return root


def test_a_changed_byte_in_an_existing_file_is_seen(tree: Path) -> None:
    before = file_digests(tree)
    data = tree / "day=a" / "part-0.parquet"
    content = bytearray(data.read_bytes())
    content[10] ^= 0x01
    data.write_bytes(bytes(content))
    after = file_digests(tree)
    assert after != before
    assert {k for k in after if after[k] != before[k]} == {"day=a/part-0.parquet"}


def test_a_new_file_is_seen(tree: Path) -> None:
    before = file_digests(tree)
    (tree / "day=b").mkdir()
    (tree / "day=b" / "part-1.parquet").write_bytes(b"")  # even an empty one
    after = file_digests(tree)
    assert set(after) - set(before) == {"day=b/part-1.parquet"}


def test_a_new_hidden_file_is_seen(tree: Path) -> None:
    before = file_digests(tree)
    (tree / "_delta_log" / ".00000000000000000001.json.0123.tmp").write_bytes(b"{}")
    assert set(file_digests(tree)) - set(before) == {
        "_delta_log/.00000000000000000001.json.0123.tmp"
    }


def test_a_deleted_file_is_seen(tree: Path) -> None:
    before = file_digests(tree)
    (tree / "day=a" / "part-0.parquet").unlink()
    assert set(before) - set(file_digests(tree)) == {"day=a/part-0.parquet"}


def test_a_change_that_keeps_size_and_times_is_seen(tree: Path) -> None:
    """Same length, same mtime: only the bytes tell."""
    commit = tree / "_delta_log" / "00000000000000000000.json"
    before = file_digests(tree)
    times = commit.stat()
    commit.write_bytes(b'{"commitInfo":{}}\n'.replace(b"{}", b"[]"))
    os.utime(commit, ns=(times.st_atime_ns, times.st_mtime_ns))
    assert commit.stat().st_size == times.st_size
    assert commit.stat().st_mtime_ns == times.st_mtime_ns
    assert (
        file_digests(tree)["_delta_log/00000000000000000000.json"]
        != before["_delta_log/00000000000000000000.json"]
    )


def test_each_call_reads_its_own_root(tree: Path, tmp_path: Path) -> None:
    """Two roots never share an answer, and going back to the first reads it again."""
    other = tmp_path / "other"
    other.mkdir()
    (other / "x").write_bytes(b"x")
    first = file_digests(tree)
    assert file_digests(other) == {"x": file_digests(other)["x"]}
    (tree / "new").write_bytes(b"n")
    assert set(file_digests(tree)) == {*first, "new"}


def test_an_untouched_tree_reads_the_same(tree: Path) -> None:
    assert file_digests(tree) == file_digests(tree)
