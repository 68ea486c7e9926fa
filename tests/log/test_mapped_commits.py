"""A big local commit is parsed from its file mapped copy-on-write: the same actions and commit
timestamps as from a copy in memory, and the file is never written (its commitInfo line is
blanked in private pages only)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from delta_ops.log import reader
from delta_ops.table.snapshot import Snapshot, load_snapshot
from tests.ops.test_checkpoint import state_facts
from tests.support import log_builder as lb


def _commit_info(timestamp: int) -> dict:
    info = lb.commit_info(timestamp)
    info["commitInfo"]["inCommitTimestamp"] = timestamp + 1
    return info


def _table(path: Path, *, last_newline: bool = True) -> Path:
    lb.write_commit(path, 0, [_commit_info(1_000), lb.protocol(), lb.metadata()])
    # commitInfo first, in the middle, last and absent: each is blanked where it is
    lb.write_commit(path, 1, [_commit_info(2_000), *[lb.add(f"a{i}.parquet") for i in range(50)]])
    lb.write_commit(
        path,
        2,
        [lb.add("b0.parquet"), _commit_info(3_000), lb.remove("a0.parquet"), lb.add("b1.parquet")],
    )
    lb.write_commit(path, 3, [lb.remove("a1.parquet"), _commit_info(4_000)])
    lb.write_commit(path, 4, [lb.add("c0.parquet")])
    if not last_newline:
        commit = path / "_delta_log" / f"{4:020d}.json"
        commit.write_bytes(commit.read_bytes().rstrip(b"\n"))
    return path


def _facts(snapshot: Snapshot) -> tuple:
    return (
        state_facts(snapshot),
        snapshot.commit_times.column("version").to_pylist(),
        snapshot.commit_times.column("in_commit_timestamp").to_pylist(),
        [snapshot.commit_timestamp(v) for v in range(snapshot.version + 1)],
        sorted(snapshot.files.column("version").to_pylist()),
    )


def _one_per_chunk(commits):  # type: ignore[no-untyped-def]
    return [commits[i : i + 1] for i in range(len(commits))]


def _log_bytes(table: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((table / "_delta_log").iterdir())}


@pytest.mark.parametrize("last_newline", [True, False])
def test_a_mapped_commit_reads_as_a_copied_one_and_is_left_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, last_newline: bool
) -> None:
    table = _table(tmp_path / "t", last_newline=last_newline)
    before = _log_bytes(table)
    copied = _facts(load_snapshot(table))
    # every commit alone in its chunk, and mapped
    monkeypatch.setattr(reader, "_chunks", _one_per_chunk)
    monkeypatch.setattr(reader, "MAPPED_COMMIT_BYTES", 1)
    mapped_calls: list[str] = []
    original = reader._mapped_commit

    def spy(storage, commit):  # type: ignore[no-untyped-def]
        mapped = original(storage, commit)
        if mapped is not None:
            mapped_calls.append(commit.name)
        return mapped

    monkeypatch.setattr(reader, "_mapped_commit", spy)
    assert _facts(load_snapshot(table)) == copied
    assert len(mapped_calls) == (5 if last_newline else 4)
    assert _log_bytes(table) == before
    assert copied[2] == [1_001, 2_001, 3_001, 4_001, None]


def test_a_commit_line_a_mapped_parse_rejects_is_reported_as_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = _table(tmp_path / "t")
    commit = table / "_delta_log" / f"{2:020d}.json"
    commit.write_text(commit.read_text() + json.dumps({"add": {"path": 5}})[:-3] + "\n")
    monkeypatch.setattr(reader, "_chunks", _one_per_chunk)
    with pytest.raises(Exception) as copied:
        load_snapshot(table)
    monkeypatch.setattr(reader, "MAPPED_COMMIT_BYTES", 1)
    with pytest.raises(Exception) as mapped:
        load_snapshot(table)
    assert type(mapped.value) is type(copied.value) and str(mapped.value) == str(copied.value)
