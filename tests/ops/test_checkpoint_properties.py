"""Property: a checkpoint of any random history, at any version, changes no snapshot.

For a random history (appends, deletes, re-adds, DV updates, txns, domains, metadata and
protocol changes) and a random version V, our checkpoint at V is written; then the snapshot
at every version >= V, which now starts from that checkpoint, must equal both the naive replay
of the history and the snapshot replayed from JSON alone before the checkpoint existed. The
same holds after every commit <= V is deleted. delta-rs must read the same live files.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from urllib.parse import unquote

from hypothesis import given
from hypothesis import strategies as st

from delta_ops.ops.checkpoint import execute_checkpoint, plan_checkpoint
from delta_ops.table.snapshot import load_snapshot
from tests.log.test_replay_properties import assert_matches_naive
from tests.ops.test_checkpoint import state_facts
from tests.support import deltalake_files
from tests.support import log_builder as lb
from tests.support.history import dv_id, histories, naive_state

FAR_PAST_MS = 0  # tombstones are deleted at 1.7e12 ms: with now=0 none of them expires


def _facts(snapshot) -> dict:
    """state_facts, with null-valued partitionValues entries dropped.

    The JSON reader unifies partitionValues keys over every add read in one batch, so an add
    written with `{}` reads as `{"part": null}` when another add in the same batch has a
    `part` key (the generated histories mix both on an unpartitioned table). Which commits
    share a batch changes when a checkpoint exists, so those invented null entries are not
    compared here; `test_checkpoint.py::test_partition_values_written_as_the_log_has_them`
    tracks that reader behaviour on its own.
    """
    facts = state_facts(snapshot)
    for kind in ("files", "tombstones"):
        for entry in facts[kind].values():
            if entry["partitionValues"] is not None:
                entry["partitionValues"] = {
                    k: v for k, v in entry["partitionValues"].items() if v is not None
                }
    return facts


def _assert_bodies_match_naive(snapshot, commits, version: int) -> None:
    """Every live file and tombstone carries the fields of the action that won in the log."""
    expected = naive_state(commits, version)
    facts = _facts(snapshot)
    for kind, fields in (
        ("files", ("size", "stats", "modificationTime")),
        ("tombstones", ("size", "deletionTimestamp")),
    ):
        got = facts[kind]
        assert set(got) == set(getattr(expected, kind))
        for key, body in getattr(expected, kind).items():
            entry = got[key]
            for f in fields:
                assert entry[f] == body.get(f), (kind, key, f)
            pv = body.get("partitionValues")
            assert entry["partitionValues"] == (
                None if pv is None else {k: v for k, v in pv.items() if v is not None}
            )
            dv = body.get("deletionVector")
            assert (entry["deletionVector"] or None) == ({"offset": None, **dv} if dv else None)
            assert dv_id(entry["deletionVector"]) == key[1]


def _write(table: Path, commits) -> None:
    for version, actions in enumerate(commits):
        lb.write_commit(table, version, actions)


def _checkpoint_then_compare(table: Path, commits, version: int) -> None:
    latest = len(commits) - 1
    replayed = {v: _facts(load_snapshot(table, version=v)) for v in range(version, latest + 1)}

    snap = load_snapshot(table, version=version)
    plan = plan_checkpoint(snap, FAR_PAST_MS)
    assert plan.expired_tombstones == 0 and plan.expired_txns == 0
    result = execute_checkpoint(plan)
    assert result.written and result.skipped_existing is None
    assert result.num_add_files == snap.num_files

    for v in range(version, latest + 1):
        after = load_snapshot(table, version=v)
        assert after.segment.checkpoint_version == version
        assert_matches_naive(table, commits, v)
        _assert_bodies_match_naive(after, commits, v)
        assert _facts(after) == replayed[v], f"version {v} differs after a checkpoint at {version}"

    # without the commits the checkpoint replaces, every later version is still the same
    log = table / "_delta_log"
    for v in range(version + 1):
        (log / f"{v:020d}.json").unlink()
    for v in range(version, latest + 1):
        assert _facts(load_snapshot(table, version=v)) == replayed[v]


def _deltalake_agrees(table: Path, commits) -> None:
    latest = len(commits) - 1
    ours = sorted(unquote(p) for p in load_snapshot(table).files.column("path").to_pylist())
    rs_version, rs_files = deltalake_files(table)
    assert rs_version == latest
    assert sorted(unquote(p) for p in rs_files) == ours


@given(histories(), st.data())
def test_checkpoint_at_random_version_preserves_every_later_snapshot(commits, data):
    """With deletion vectors (synthetic inline descriptors: delta-rs lists them without decoding)."""
    version = data.draw(st.integers(0, len(commits) - 1), label="checkpoint version")
    with tempfile.TemporaryDirectory() as tmp:
        table = Path(tmp)
        _write(table, commits)
        _checkpoint_then_compare(table, commits, version)
        _deltalake_agrees(table, commits)


@given(histories(with_dvs=False, max_commits=8), st.data())
def test_checkpoint_of_random_histories_without_deletion_vectors(commits, data):
    """Legacy protocol (1, 2) tables: the checkpoint has no DV-only fields in use."""
    version = data.draw(st.integers(0, len(commits) - 1), label="checkpoint version")
    with tempfile.TemporaryDirectory() as tmp:
        table = Path(tmp)
        _write(table, commits)
        _checkpoint_then_compare(table, commits, version)
        _deltalake_agrees(table, commits)
