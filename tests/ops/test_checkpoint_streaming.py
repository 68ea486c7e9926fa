"""A checkpoint streamed from the previous one equals a checkpoint written from the loaded state.

Big tables are checkpointed without loading their file state (`delta_ops.log.state_stream`):
the previous checkpoint's file actions are read a batch at a time and those a later commit
touched are dropped. These tests write the same version both ways, on two copies of each table,
and require the same plan numbers, the same rows in the written files, the same state when the
table is read back (by the rules a checkpoint must follow) and the same files in delta-rs. Batches
of a few rows make every table span many batches, so the cuts between batches, parts and
sidecars are exercised too.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from delta_ops.log import state_stream
from delta_ops.log.checkpoint_content import part_of_paths
from delta_ops.ops.checkpoint import (
    CheckpointPlan,
    checkpoint,
    execute_checkpoint,
    plan_checkpoint,
)
from delta_ops.table.snapshot import load_head, load_snapshot
from tests.ops.test_checkpoint import expected_after_checkpoint, state_facts
from tests.support import TABLES, copy_fixture, deltalake_files, readable_fixture_names
from tests.support import log_builder as lb

NOW = int(time.time() * 1000) - 60_000  # plans clamp later times to the wall clock
HOUR = 3_600_000
OLD = NOW - 30 * 24 * HOUR  # past the default 7-day tombstone retention: expires
RECENT = NOW - HOUR  # inside it: kept

pytestmark = pytest.mark.usefixtures("small_batches")


@pytest.fixture
def small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(state_stream, "STREAM_BATCH_ROWS", 7)


def _layout_config(layout: str) -> tuple[dict[str, Any], dict[str, str]]:
    if layout == "v2":
        protocol = lb.protocol(
            3,
            7,
            reader_features=["deletionVectors", "v2Checkpoint"],
            writer_features=["deletionVectors", "domainMetadata", "v2Checkpoint"],
        )
        return protocol, {"delta.checkpointPolicy": "v2"}
    protocol = lb.protocol(
        3,
        7,
        reader_features=["deletionVectors"],
        writer_features=["deletionVectors", "domainMetadata"],
    )
    return protocol, {"delta.checkpoint.writeStatsAsStruct": "true"}


def build_history(table: Path, layout: str) -> int:
    """A table whose last checkpoint is followed by commits that remove checkpoint files,
    replace deletion vectors, re-add removed paths, add and remove new files, and change
    txns, domains and metadata. Returns the head version."""
    protocol, config = _layout_config(layout)
    parts = ["a", "b", "c"]
    lb.write_commit(table, 0, [protocol, lb.metadata(config, partition_columns=["part"])])
    lb.write_commit(
        table,
        1,
        [lb.add(f"part={parts[i % 3]}/f{i:03d}.parquet", part=parts[i % 3]) for i in range(60)],
    )
    lb.write_commit(
        table,
        2,
        [lb.remove(f"part=a/f{i:03d}.parquet", deletion_timestamp=OLD) for i in (0, 3, 6)]
        + [lb.remove(f"part=b/f{i:03d}.parquet", deletion_timestamp=RECENT) for i in (1, 4, 7)]
        + [{"txn": {"appId": "app1", "version": 1, "lastUpdated": NOW - HOUR}}],
    )
    lb.write_commit(
        table,
        3,
        [
            lb.remove("part=a/f009.parquet", deletion_timestamp=RECENT),
            lb.add("part=a/f009.parquet", part="a", dv=lb.inline_dv(1)),
            {"domainMetadata": {"domain": "d1", "configuration": "{}", "removed": False}},
        ],
    )
    checkpoint(table, version=3, now_ms=NOW)  # the checkpoint later versions stream from
    lb.write_commit(
        table,
        4,
        [lb.remove(f"part=c/f{i:03d}.parquet", deletion_timestamp=RECENT) for i in (2, 5)]
        + [
            lb.remove("part=a/f009.parquet", dv=lb.inline_dv(1), deletion_timestamp=RECENT),
            lb.add("part=a/f009.parquet", part="a", dv=lb.inline_dv(2)),
            lb.add("part=b/f001.parquet", part="b"),  # a tombstone of the checkpoint lives again
            {"txn": {"appId": "app1", "version": 2, "lastUpdated": NOW}},
            {"txn": {"appId": "app2", "version": 7, "lastUpdated": NOW}},
            {"domainMetadata": {"domain": "d1", "configuration": "{}", "removed": True}},
            {"domainMetadata": {"domain": "d2", "configuration": '{"x":1}', "removed": False}},
        ]
        + [lb.add(f"part=c/g{i}.parquet", part="c") for i in range(9)],
    )
    lb.write_commit(
        table,
        5,
        [
            lb.remove("part=c/g0.parquet", deletion_timestamp=RECENT),
            lb.remove("part=c/g1.parquet", deletion_timestamp=OLD),
            lb.metadata({**config, "delta.logRetentionDuration": "interval 60 days"}, ["part"]),
        ],
    )
    return 5


def _written_rows(table: Path, plan: CheckpointPlan) -> dict[str, list[str]]:
    """The actions in the files a plan wrote, by kind, each as canonical JSON, sorted."""
    out: dict[str, list[str]] = {}
    for name in plan.files:
        path = table / "_delta_log" / name
        if name.endswith(".json"):
            actions = [json.loads(line) for line in path.read_text().splitlines()]
            rows = [a for a in actions if "checkpointMetadata" not in a and "sidecar" not in a]
        else:
            rows = [
                {k: v for k, v in row.items() if v is not None}
                for row in pq.read_table(path).to_pylist()
            ]
        for row in rows:
            for kind, body in row.items():
                out.setdefault(kind, []).append(json.dumps(body, sort_keys=True, default=str))
    return {k: sorted(v) for k, v in out.items()}


def _both_ways(src: Path, tmp_path: Path, **options: Any) -> tuple[Path, Path, Any, Any]:
    """Copies of `src` checkpointed from the loaded snapshot and streamed; their plans."""
    loaded_table, streamed_table = tmp_path / "loaded", tmp_path / "streamed"
    shutil.copytree(src, loaded_table)
    shutil.copytree(src, streamed_table)
    loaded = plan_checkpoint(load_snapshot(loaded_table), NOW, **options)
    streamed = plan_checkpoint(load_head(streamed_table), NOW, stream_above=0, **options)
    return loaded_table, streamed_table, loaded, streamed


def _plan_numbers(plan: CheckpointPlan) -> dict[str, Any]:
    return {
        k: getattr(plan, k)
        for k in (
            "version",
            "kind",
            "num_parts",
            "num_add_files",
            "num_tombstones",
            "num_txns",
            "num_domains",
            "expired_tombstones",
            "expired_txns",
            "existing",
        )
    }


@pytest.mark.parametrize(
    "layout,parts",
    [("classic", None), ("classic", 3), ("v2", None)],
    ids=["classic", "3-part", "v2"],
)
def test_streamed_checkpoint_equals_the_loaded_one(tmp_path, layout, parts):
    src = tmp_path / "src"
    version = build_history(src, layout)
    before = load_snapshot(src)
    loaded_table, streamed_table, loaded, streamed = _both_ways(src, tmp_path, parts=parts)
    assert streamed.streamed and not loaded.streamed
    assert _plan_numbers(streamed) == _plan_numbers(loaded)
    # g1; the old removes of f000, f003, f006 expired in the checkpoint at version 3 already
    assert streamed.version == version and streamed.expired_tombstones == 1
    execute_checkpoint(loaded)
    execute_checkpoint(streamed)
    assert _written_rows(streamed_table, streamed) == _written_rows(loaded_table, loaded)
    expected = expected_after_checkpoint(before, NOW)
    for table in (loaded_table, streamed_table):
        after = load_snapshot(table)
        assert after.segment.checkpoint_version == version
        assert state_facts(after) == expected
    assert deltalake_files(streamed_table) == deltalake_files(loaded_table)
    if parts:  # every action on a path is in one part
        for name in streamed.files:
            data = pq.read_table(streamed_table / "_delta_log" / name, columns=["add", "remove"])
            paths = [
                (r["add"] or r["remove"])["path"]
                for r in data.to_pylist()
                if r["add"] or r["remove"]
            ]
            assert set(part_of_paths(pa.array(paths), parts)) <= {streamed.files.index(name)}


def test_a_streamed_checkpoint_is_the_base_of_the_next(tmp_path):
    """Streaming from a checkpoint that was itself streamed (V2 sidecars cut across batches)."""
    table = tmp_path / "t"
    build_history(table, "v2")
    first = plan_checkpoint(load_head(table), NOW, stream_above=0)
    execute_checkpoint(first)
    lb.write_commit(table, 6, [lb.add("part=a/h.parquet", part="a")])
    before = load_snapshot(table)
    second = plan_checkpoint(load_head(table), NOW, stream_above=0)
    assert second.streamed and second.num_add_files == before.num_files
    execute_checkpoint(second)
    assert state_facts(load_snapshot(table)) == expected_after_checkpoint(before, NOW)


def test_an_unreadable_base_checkpoint_falls_back_to_the_log(tmp_path):
    table = tmp_path / "t"
    build_history(table, "classic")
    base = table / "_delta_log" / f"{3:020d}.checkpoint.parquet"
    base.write_bytes(base.read_bytes()[:-100])  # truncated: the footer is gone
    before = load_snapshot(table)  # the loader itself falls back to JSON replay
    plan = plan_checkpoint(load_head(table), NOW, stream_above=0)
    assert not plan.streamed and plan.num_add_files == before.num_files
    execute_checkpoint(plan)
    assert state_facts(load_snapshot(table)) == expected_after_checkpoint(before, NOW)


def test_below_the_threshold_the_snapshot_is_loaded(tmp_path):
    table = tmp_path / "t"
    build_history(table, "classic")
    plan = plan_checkpoint(load_head(table), NOW)
    assert not plan.streamed  # a few KB of checkpoint: one read is cheaper than two passes


def _fixtures_with_checkpoints() -> list[str]:
    names = []
    for name in readable_fixture_names():
        if any(".checkpoint." in p.name for p in (TABLES / name / "_delta_log").iterdir()):
            names.append(name)
    return names


@pytest.mark.parametrize("name", _fixtures_with_checkpoints())
def test_fixture_tables_stream_as_they_load(tmp_path, name):
    """Real checkpoints (Delta Spark classic, multi-part and V2 with sidecars, delta-rs,
    kernel): a version after the last checkpoint is written both ways and must agree."""
    src = copy_fixture(name, tmp_path / "fixture")
    head = load_head(src)
    assert head.segment.checkpoint is not None
    if not head.segment.commits:  # make a version after the checkpoint to stream towards
        snap = load_snapshot(src)
        first = snap.files.column("path")[0].as_py() if snap.num_files else None
        actions: list[dict[str, Any]] = [lb.commit_info(NOW)]
        if first is not None:
            actions.append(lb.remove(first, deletion_timestamp=RECENT))
        lb.write_commit(src, head.version + 1, actions)
    before = load_snapshot(src)
    loaded_table, streamed_table, loaded, streamed = _both_ways(src, tmp_path)
    assert streamed.streamed
    assert _plan_numbers(streamed) == _plan_numbers(loaded)
    execute_checkpoint(loaded)
    execute_checkpoint(streamed)
    assert _written_rows(streamed_table, streamed) == _written_rows(loaded_table, loaded)
    assert state_facts(load_snapshot(streamed_table)) == expected_after_checkpoint(before, NOW)
    assert deltalake_files(streamed_table) == deltalake_files(loaded_table)
