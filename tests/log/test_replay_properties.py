"""Property: the snapshot at every version equals a naive replay of the same history."""

from __future__ import annotations

import tempfile
from pathlib import Path
from urllib.parse import unquote

import numpy as np
import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from delta_ops.log.actions import ActionSource
from delta_ops.log.replay import last_occurrence_mask, reconcile_files, winning_rows
from delta_ops.table.snapshot import load_snapshot
from tests.support import log_builder as lb
from tests.support.history import histories, naive_state


def _key_list(table) -> list[tuple[str, str | None]]:
    from delta_ops.protocol.deletion_vectors import dv_unique_ids

    paths = table.column("path").to_pylist()
    ids = dv_unique_ids(table.column("deletionVector")).to_pylist() if table.num_rows else []
    return list(zip(paths, ids))


def _keys(table) -> set[tuple[str, str | None]]:
    return set(_key_list(table))


def assert_matches_naive(table_dir: Path, commits, version: int) -> None:
    snapshot = load_snapshot(table_dir, version=version)
    expected = naive_state(commits, version)
    assert snapshot.version == version
    assert _keys(snapshot.files) == set(expected.files)
    assert _keys(snapshot.tombstones) == set(expected.tombstones)
    assert {k: t.version for k, t in snapshot.txns.items()} == expected.txns
    assert {k: d.configuration for k, d in snapshot.domains.items()} == expected.domains
    assert snapshot.metadata.configuration == expected.metadata["configuration"]
    assert (
        snapshot.protocol.to_action()["minReaderVersion"] == expected.protocol["minReaderVersion"]
    )
    # every live add keeps its own fields (stats, partition values) from the winning action
    stats = dict(zip(_key_list(snapshot.files), snapshot.files.column("stats").to_pylist()))
    for key, body in expected.files.items():
        assert stats[key] == body.get("stats")
    # paths are returned as written in the log; decoding gives the file name
    for path, _ in expected.files:
        assert unquote(path).endswith(" x.parquet")


@given(histories())
def test_snapshot_at_every_version_equals_naive_replay(commits):
    with tempfile.TemporaryDirectory() as tmp:
        table = Path(tmp)
        for version, actions in enumerate(commits):
            lb.write_commit(table, version, actions)
        for version in range(len(commits)):
            assert_matches_naive(table, commits, version)


@given(histories(with_dvs=False, max_commits=6))
def test_histories_without_deletion_vectors(commits):
    with tempfile.TemporaryDirectory() as tmp:
        table = Path(tmp)
        for version, actions in enumerate(commits):
            lb.write_commit(table, version, actions)
        assert_matches_naive(table, commits, len(commits) - 1)


def _last_occurrences(keys: list[tuple[int, str | None]]) -> list[bool]:
    """The reference: a dict from key to its last row (path -1: a non-file action)."""
    last = {key: row for row, key in enumerate(keys) if key[0] >= 0}
    return [last.get(key) == row for row, key in enumerate(keys)]


def _arrays(keys: list[tuple[int, str | None]]) -> tuple[pa.Array, pa.Array]:
    paths = pa.array([None if p < 0 else f"f{p}" for p, _ in keys], pa.string())
    return paths, pa.array([d for _, d in keys], pa.string())


@given(st.lists(st.tuples(st.integers(-1, 8), st.sampled_from([None, "a", "b"]))))
def test_the_last_occurrence_of_each_key_wins(keys):
    assert last_occurrence_mask(*_arrays(keys)).tolist() == _last_occurrences(keys)


@given(
    st.lists(st.tuples(st.integers(0, 6), st.sampled_from([None, "a", "b"])), unique=True),
    st.lists(st.tuples(st.integers(-1, 8), st.sampled_from([None, "a", "b"]))),
)
def test_replaying_only_the_keys_commits_touch_equals_a_full_replay(checkpoint_keys, later_keys):
    """A checkpoint's keys are unique; with commits after it, replaying only the checkpoint
    rows whose path the commits mention picks the same winners as replaying every row."""
    keys = checkpoint_keys + later_keys
    got = winning_rows(*_arrays(keys), reconciled_rows=len(checkpoint_keys))
    assert got.tolist() == _last_occurrences(keys)


_DV = pa.struct([("storageType", pa.string()), ("pathOrInlineDv", pa.string())])
_FILE = pa.struct([("path", pa.string()), ("size", pa.int64()), ("deletionVector", _DV)])


def _source(rows: list[tuple[str, int, str | None] | None], version: int) -> ActionSource:
    """Rows of (kind, path number, dv) as add / remove actions (None: a non-file action)."""

    def action(row: tuple[str, int, str | None] | None, kind: str) -> dict | None:
        if row is None or row[0] != kind:
            return None
        dv = None if row[2] is None else {"storageType": "i", "pathOrInlineDv": row[2]}
        return {"path": f"f{row[1]}", "size": len(rows), "deletionVector": dv}

    table = pa.table(
        {
            "add": pa.array([action(r, "add") for r in rows], _FILE),
            "remove": pa.array([action(r, "remove") for r in rows], _FILE),
        }
    )
    return ActionSource(table, np.full(len(rows), version, dtype=np.int64))


_row = st.one_of(
    st.none(),
    st.tuples(st.sampled_from(["add", "remove"]), st.integers(0, 8), st.sampled_from([None, "a"])),
)


@given(
    checkpoint=st.lists(
        st.tuples(
            st.sampled_from(["add", "remove"]), st.integers(0, 8), st.sampled_from([None, "a"])
        ),
        unique_by=lambda r: (r[1], r[2]),
    ),
    parts=st.integers(1, 3),
    commits=st.lists(st.lists(_row, max_size=6), max_size=3),
)
def test_a_checkpoint_replayed_a_source_at_a_time_is_a_full_replay(checkpoint, parts, commits):
    """Reconciling a checkpoint's sources one at a time (only the rows the commits after it
    mention are replayed with them) gives the live files and tombstones a replay of every row
    gives (a checkpoint's keys are unique)."""
    step = max(1, -(-len(checkpoint) // parts))
    sources = [_source(checkpoint[i : i + step], 3) for i in range(0, len(checkpoint), step)]
    sources += [_source(rows, 4 + n) for n, rows in enumerate(commits)]
    by_checkpoint = reconcile_files(sources, reconciled_rows=len(checkpoint))
    full = reconcile_files(sources, reconciled_rows=0)
    for got, want in zip(by_checkpoint, full):
        assert got.equals(want)
