"""Local commits are read chunk after chunk into one buffer: every split of a log into chunks
must read as the whole log in one chunk does, though each chunk's bytes overwrite the last
one's and a shorter chunk leaves the end of a longer one's bytes in the buffer."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from delta_ops.log import reader
from delta_ops.log.file_names import LogFile
from delta_ops.table.snapshot import Snapshot, load_snapshot
from tests.ops.test_checkpoint import state_facts
from tests.support import log_builder as lb


def _facts(snapshot: Snapshot) -> tuple:
    return (
        state_facts(snapshot),
        snapshot.commit_times.column("version").to_pylist(),
        snapshot.commit_times.column("in_commit_timestamp").to_pylist(),
        [snapshot.commit_timestamp(v) for v in range(snapshot.version + 1)],
        sorted(snapshot.files.column("version").to_pylist()),
    )


def _table(path: Path) -> Path:
    lb.write_commit(path, 0, [lb.commit_info(1_000), lb.protocol(), lb.metadata()])
    # later commits are shorter: each chunk leaves bytes of the one before behind it
    for version in range(1, 12):
        actions = [lb.add(f"{version}-{i}-{'x' * (60 - 5 * version)}.parquet") for i in range(12)]
        if version > 2:
            actions.append(lb.remove(f"{version - 2}-0-{'x' * (60 - 5 * (version - 2))}.parquet"))
        actions.insert(version % 3, lb.commit_info(1_000 + version))
        lb.write_commit(path, version, actions)
    unterminated = path / "_delta_log" / f"{6:020d}.json"  # a commit without its last newline
    unterminated.write_bytes(unterminated.read_bytes().rstrip(b"\n"))
    return path


def _split(sizes: Sequence[int]):  # type: ignore[no-untyped-def]
    def chunks(commits: Sequence[LogFile]) -> list[Sequence[LogFile]]:
        out, start, turn = [], 0, 0
        while start < len(commits):
            size = sizes[turn % len(sizes)]
            out.append(commits[start : start + size])
            start, turn = start + size, turn + 1
        return out

    return chunks


@pytest.mark.parametrize("sizes", [[1], [2], [3, 1], [1, 4, 2], [5]])
def test_every_split_into_chunks_reads_as_one_chunk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sizes: list[int]
) -> None:
    table = _table(tmp_path / "t")
    monkeypatch.setattr(reader, "_chunks", _split([100]))
    whole = _facts(load_snapshot(table))
    buffers: set[int] = set()
    original = reader._commit_buffer

    def spy(storage, commits, scratch=None):  # type: ignore[no-untyped-def]
        buffer, length, regions = original(storage, commits, scratch)
        buffers.add(id(buffer))
        return buffer, length, regions

    monkeypatch.setattr(reader, "_commit_buffer", spy)

    def one_by_one(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("the bulk parse failed over to the per-file one")

    monkeypatch.setattr(reader, "_read_commits_one_by_one", one_by_one)
    monkeypatch.setattr(reader, "_chunks", _split(sizes))
    assert _facts(load_snapshot(table)) == whole
    assert len(buffers) == 1  # every chunk was read into the one buffer
    assert len(whole[0]["files"]) == 11 * 12 - 9 and len(whole[0]["tombstones"]) == 9


def test_the_buffer_goes_once_no_later_chunk_is_read_into_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Chunks of small commits, then big ones: the buffer, sized for the biggest, is let go
    once the last chunk is read, not before and not held after."""
    table = tmp_path / "t"
    lb.write_commit(table, 0, [lb.commit_info(1_000), lb.protocol(), lb.metadata()])
    for version in range(1, 7):
        count = 2 if version < 4 else 40  # the last three are big
        lb.write_commit(table, version, [lb.add(f"{version}-{i}.parquet") for i in range(count)])
    monkeypatch.setattr(reader, "_chunks", _split([1]))
    events: list[str] = []
    release, read = reader._ChunkBuffer.release, reader._commit_buffer

    def spy_release(self):  # type: ignore[no-untyped-def]
        events.append("release")
        release(self)

    def spy_read(storage, commits, scratch=None):  # type: ignore[no-untyped-def]
        events.append("read")
        return read(storage, commits, scratch)

    monkeypatch.setattr(reader._ChunkBuffer, "release", spy_release)
    monkeypatch.setattr(reader, "_commit_buffer", spy_read)
    assert len(load_snapshot(table).files) == 3 * 2 + 3 * 40
    assert events == ["read"] * 7 + ["release"]  # a chunk a commit, then the buffer goes
