"""Every real fixture table read by delta-ops agrees with the independent readers."""

from __future__ import annotations

from urllib.parse import unquote

import pyarrow.parquet as pq
import pytest

from delta_ops.errors import NotADeltaTable, UnsupportedFeature, VersionGap
from delta_ops.table.snapshot import file_num_records, load_snapshot
from tests.support import TABLES, copy_fixture, peer_facts, readable_fixture_names

READABLE = readable_fixture_names()


@pytest.mark.parametrize("name", READABLE)
def test_version_and_live_files_match_delta_rs(name):
    fact = peer_facts()[name]
    snapshot = load_snapshot(TABLES / name)
    assert snapshot.version == fact["rs_version"]
    ours = sorted(unquote(p) for p in snapshot.files.column("path").to_pylist())
    assert ours == sorted(unquote(p) for p in fact["rs_files"])


def _live_rows(name: str) -> int:
    """Rows a reader returns: numRecords (or the parquet footer's count where stats lack it)
    minus the rows deletion vectors hide."""
    snapshot = load_snapshot(TABLES / name)
    counts = file_num_records(snapshot.files).to_pylist()
    paths = snapshot.files.column("path").to_pylist()
    total = sum(
        n if n is not None else pq.ParquetFile(TABLES / name / unquote(p)).metadata.num_rows
        for n, p in zip(counts, paths)
    )
    return total - snapshot.num_deleted_records


@pytest.mark.parametrize("name", [n for n in READABLE if "kernel_rows" in peer_facts()[n]])
def test_row_count_matches_duckdb(name):
    assert _live_rows(name) == peer_facts()[name]["kernel_rows"]


def test_num_records_is_null_when_a_file_lacks_stats():
    assert load_snapshot(TABLES / "delta-rs/simple_table").num_records is None
    assert load_snapshot(TABLES / "delta-rs/table-without-dv-small").num_records == 10


def test_corrupted_last_checkpoint_is_read_like_delta_spark():
    """Both peers refuse this table (its checkpoint's metaData has a null schemaString);
    Delta Spark reads it, treating the schema as empty, and so do we."""
    snapshot = load_snapshot(TABLES / "delta-spark/corrupted-last-checkpoint")
    assert snapshot.version == 10
    assert snapshot.segment.checkpoint_version == 10
    assert sorted(snapshot.files.column("path").to_pylist(), key=int) == [str(i) for i in range(11)]
    assert len(snapshot.schema.fields) == 0
    # the same state replayed from JSON only
    replayed = load_snapshot(TABLES / "delta-spark/corrupted-last-checkpoint", version=9)
    assert sorted(replayed.files.column("path").to_pylist(), key=int) == [str(i) for i in range(10)]


def test_invalid_protocol_version_fails_clearly():
    with pytest.raises(UnsupportedFeature, match="reader protocol version 99"):
        load_snapshot(TABLES / "delta-spark/deltalog-invalid-protocol-version")


def test_versions_not_contiguous_names_the_gap():
    with pytest.raises(
        VersionGap, match=r"00000000000000000002\.json.*expected version 1, found 2"
    ):
        load_snapshot(TABLES / "delta-spark/versions-not-contiguous")


def test_crc_without_commits_is_not_a_table():
    with pytest.raises(NotADeltaTable, match="no commit or complete checkpoint"):
        load_snapshot(TABLES / "kernel/crc-malformed")


def test_every_peer_fact_is_covered():
    """No fixture is silently left out: each is readable or one of the known refusals."""
    refused = {n for n, f in peer_facts().items() if "rs_error" in f}
    assert refused == {
        "delta-spark/corrupted-last-checkpoint",
        "delta-spark/deltalog-invalid-protocol-version",
        "delta-spark/versions-not-contiguous",
        "kernel/crc-malformed",
    }


@pytest.mark.parametrize(
    ("name", "checkpoint"),
    [
        ("delta-spark/multi-part-checkpoint", 1),
        ("delta-spark/v2-checkpoint-json", 2),
        ("delta-spark/v2-checkpoint-parquet", 2),
        ("kernel/v2-checkpoints-json-with-sidecars", 6),
        ("delta-rs/checkpoint-v2-table", 8),
        ("delta-rs/table_failed_last_checkpoint_update", 3),  # hint says 1, listing finds 3
        ("delta-rs/with_checkpoint_no_last_checkpoint", 2),
    ],
)
def test_newest_complete_checkpoint_is_used(name, checkpoint):
    assert load_snapshot(TABLES / name).segment.checkpoint_version == checkpoint


def _checkpointed_with_full_history() -> list[str]:
    names = []
    for name in READABLE:
        log = TABLES / name / "_delta_log"
        has_checkpoint = any(".checkpoint." in p.name for p in log.iterdir())
        if has_checkpoint and (log / "00000000000000000000.json").exists():
            names.append(name)
    return names


@pytest.mark.parametrize("name", _checkpointed_with_full_history())
def test_state_from_checkpoint_equals_json_replay(name, tmp_path):
    """State built from a checkpoint equals the state replayed from JSON alone."""
    latest = load_snapshot(TABLES / name)
    segment = latest.segment
    assert segment.checkpoint is not None
    copy = copy_fixture(name, tmp_path)
    for cp_file in segment.checkpoint.files:
        (copy / "_delta_log" / cp_file.name).unlink()
    replayed = load_snapshot(copy)
    assert replayed.segment.checkpoint_version != segment.checkpoint_version
    assert sorted(replayed.files.column("path").to_pylist()) == sorted(
        latest.files.column("path").to_pylist()
    )
    assert replayed.metadata == latest.metadata
    assert replayed.protocol == latest.protocol
    assert replayed.txns == latest.txns
    assert replayed.domains == latest.domains


def test_app_txn_checkpoint_keeps_set_transactions():
    snapshot = load_snapshot(TABLES / "kernel/app-txn-checkpoint")
    assert {app: t.version for app, t in snapshot.txns.items()} == {"my-app": 3, "my-app2": 2}


def test_domain_metadata_fixture():
    snapshot = load_snapshot(TABLES / "delta-rs/table-with-domain-metadata")
    assert snapshot.domains  # every live domain survives the checkpoint
    assert all(not d.removed for d in snapshot.domains.values())


def test_deletion_vector_fixture_keys():
    """log-replay-dv-key-cases: the same path with different DVs are different keys."""
    snapshot = load_snapshot(TABLES / "delta-spark/log-replay-dv-key-cases")
    assert snapshot.num_files == 1
    assert (
        snapshot.num_records - snapshot.num_deleted_records
        == peer_facts()["delta-spark/log-replay-dv-key-cases"]["kernel_rows"]
    )
