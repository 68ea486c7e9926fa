"""The light table head: version, protocol and metadata without the file state.

Log cleanup, probes and commit sensors need no file actions; `load_head` must agree with the
full snapshot on every fixture while reading only a checkpoint's protocol and metaData.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from delta_ops.table.snapshot import load_head, load_snapshot
from tests.support import copy_fixture, readable_fixture_names


@pytest.mark.parametrize("name", readable_fixture_names())
def test_head_agrees_with_the_snapshot(name: str, tmp_path: Path) -> None:
    table = copy_fixture(name, tmp_path)
    snapshot = load_snapshot(table)
    head = load_head(table)
    assert head.version == snapshot.version
    assert head.protocol == snapshot.protocol
    assert head.metadata == snapshot.metadata
    assert head.segment == snapshot.segment
    assert head.properties == snapshot.properties


def test_head_reads_no_file_actions(tmp_path: Path) -> None:
    # With every sidecar gone the file state cannot be read from the V2 checkpoint (the
    # snapshot falls back to replaying JSON, or fails); the head never needs them.
    table = copy_fixture("delta-spark/v2-checkpoint-parquet", tmp_path)
    expected = load_snapshot(table)
    for sidecar in (table / "_delta_log" / "_sidecars").iterdir():
        sidecar.unlink()
    head = load_head(table)
    assert head.segment.checkpoint is not None
    assert head.segment.checkpoint.version == expected.segment.checkpoint_version
    assert (head.version, head.protocol, head.metadata) == (
        expected.version,
        expected.protocol,
        expected.metadata,
    )
