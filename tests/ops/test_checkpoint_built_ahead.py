"""A checkpoint's row groups are built by a thread of their own while the previous ones are
written: the file must be byte for byte the one written a group at a time, an error building a
group must surface where that group was due, and a write that stops early must stop the
builder."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from delta_ops.log import state_stream
from delta_ops.ops import checkpoint_writer as checkpoint_op
from delta_ops.ops.checkpoint import checkpoint
from delta_ops.ops.checkpoint_writer import built_ahead
from tests.ops.test_checkpoint import write_table
from tests.support import log_builder as lb

NOW_MS = 1_700_000_100_000


def _table(path: Path) -> Path:
    commits: list[list[dict]] = [[lb.protocol(), lb.metadata()]]
    for version in range(1, 9):
        actions = [lb.add(f"v{version}-{i}.parquet", num_records=version + i) for i in range(7)]
        actions += [lb.remove(f"v{version - 1}-{i}.parquet") for i in range(version % 3)]
        commits.append(actions)
    return write_table(path, commits)


@pytest.mark.parametrize("ahead", [1, 2, 5])
def test_built_ahead_writes_the_file_written_a_group_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ahead: int
) -> None:
    monkeypatch.setattr(state_stream, "STREAM_BATCH_ROWS", 5)  # many row groups
    files = {}
    for label, groups_ahead in (("serial", 0), ("ahead", ahead)):
        table = _table(tmp_path / label)
        monkeypatch.setattr(checkpoint_op, "ROW_GROUPS_AHEAD", groups_ahead)
        result = checkpoint(str(table), now_ms=NOW_MS)
        (name,) = result.written
        files[label] = (table / "_delta_log" / name).read_bytes()
    assert files["ahead"] == files["serial"]


def _groups(count: int, made: list[int], fail_at: int | None = None) -> Iterator[pa.Table]:
    for index in range(count):
        time.sleep(random.random() / 1000)
        if index == fail_at:
            raise ValueError(f"group {index}")
        made.append(index)
        yield pa.table({"i": [index]})


@pytest.mark.parametrize("ahead", [1, 2, 3])
def test_groups_come_in_order_and_an_error_where_its_group_was_due(ahead: int) -> None:
    made: list[int] = []
    assert [g["i"][0].as_py() for g in built_ahead(_groups(20, made), ahead)] == list(range(20))
    got = []
    with pytest.raises(ValueError, match="group 7"):
        for group in built_ahead(_groups(20, [], fail_at=7), ahead):
            got.append(group["i"][0].as_py())
    assert got == list(range(7))


def test_a_caller_that_stops_early_stops_the_builder() -> None:
    before = threading.active_count()
    made: list[int] = []
    groups = built_ahead(_groups(100, made), 2)
    assert [next(groups)["i"][0].as_py() for _ in range(3)] == [0, 1, 2]
    groups.close()  # as a write that failed leaves the loop
    assert threading.active_count() == before
    assert len(made) <= 3 + 2 + 1  # the groups handed over, waiting, and one being built


def test_a_failed_build_leaves_no_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = _table(tmp_path / "t")
    before = sorted(p.name for p in (table / "_delta_log").iterdir())

    def broken(*args, **kwargs):  # type: ignore[no-untyped-def]
        yield from original(*args, **kwargs)
        raise OSError("disk gone")

    original = checkpoint_op.checkpoint_rows
    monkeypatch.setattr(checkpoint_op, "checkpoint_rows", broken)
    with pytest.raises(OSError, match="disk gone"):
        checkpoint(str(table), now_ms=NOW_MS)
    assert sorted(p.name for p in (table / "_delta_log").iterdir()) == before


def test_a_write_that_fails_stops_the_builder_before_the_error_leaves(tmp_path: Path) -> None:
    """The error is kept (here by pytest, elsewhere by a future or a log record) with the
    frame that iterated the groups: the builder must not wait on, still building groups,
    until the error is dropped or the interpreter tears down around it."""
    from delta_ops.storage import Storage

    before = threading.active_count()
    made: list[int] = []

    def groups() -> Iterator[pa.Table]:
        yield from _groups(2, made)
        yield pa.table({"other": ["a schema the file was not opened with"]})
        yield from _groups(100, made)

    storage = Storage.open(str(tmp_path))
    with pytest.raises(ValueError, match="schema") as caught:
        checkpoint_op._write_parquet(
            storage, "part.parquet", pa.schema({"i": pa.int64()}), groups()
        )
    assert caught.value is not None  # the error, and the frames it holds, are still alive
    assert threading.active_count() == before
    assert len(made) <= 2 + 1 + 1  # what was written, waiting, and one being built
