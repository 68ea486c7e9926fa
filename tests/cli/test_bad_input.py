"""Bad input gets a clear error naming the file and problem, or a safe fallback with a warning."""

from __future__ import annotations

import json
import logging
import shutil

import pytest

from delta_ops.errors import CorruptLog, NotADeltaTable, VersionNotFound
from delta_ops.table.snapshot import load_snapshot
from tests.support import TABLES, copy_fixture
from tests.support import log_builder as lb


def _simple(table, versions=3):
    lb.write_commit(table, 0, [lb.commit_info(), lb.protocol(), lb.metadata(), lb.add("a.parquet")])
    for v in range(1, versions):
        lb.write_commit(table, v, [lb.commit_info(), lb.add(f"f{v}.parquet")])


def test_malformed_json_line_names_file_and_line(tmp_path):
    _simple(tmp_path)
    path = tmp_path / "_delta_log" / "00000000000000000001.json"
    path.write_text(path.read_text() + '{"add": {"path": "x", "size": \n')
    with pytest.raises(CorruptLog) as err:
        load_snapshot(tmp_path)
    assert err.value.file == "00000000000000000001.json"
    assert err.value.line == 3
    assert "00000000000000000001.json:3" in str(err.value)


def test_non_object_line_is_reported(tmp_path):
    _simple(tmp_path)
    (tmp_path / "_delta_log" / "00000000000000000002.json").write_text("[1, 2]\n")
    with pytest.raises(
        CorruptLog, match=r"00000000000000000002\.json:1: an action line must be a JSON object"
    ):
        load_snapshot(tmp_path)


def test_missing_delta_log_is_not_a_table(tmp_path):
    with pytest.raises(NotADeltaTable, match="no _delta_log"):
        load_snapshot(tmp_path)


def test_empty_delta_log_is_not_a_table(tmp_path):
    (tmp_path / "_delta_log").mkdir()
    with pytest.raises(NotADeltaTable):
        load_snapshot(tmp_path)


def test_truncated_checkpoint_falls_back_to_json_with_a_warning(tmp_path, caplog):
    table = copy_fixture("delta-rs/simple_table_with_checkpoint", tmp_path)
    expected = sorted(load_snapshot(table).files.column("path").to_pylist())
    checkpoint = table / "_delta_log" / "00000000000000000010.checkpoint.parquet"
    checkpoint.write_bytes(checkpoint.read_bytes()[:300])
    with caplog.at_level(logging.WARNING):
        snapshot = load_snapshot(table)
    assert snapshot.segment.checkpoint is None
    assert sorted(snapshot.files.column("path").to_pylist()) == expected
    assert "00000000000000000010.checkpoint.parquet" in caplog.text


def test_truncated_checkpoint_falls_back_to_an_older_checkpoint(tmp_path, caplog):
    table = copy_fixture("delta-spark/only-checkpoint-files", tmp_path)
    expected = sorted(load_snapshot(table).files.column("path").to_pylist())
    newest = table / "_delta_log" / "00000000000000000002.checkpoint.parquet"
    newest.write_bytes(newest.read_bytes()[:-100])
    with caplog.at_level(logging.WARNING):
        snapshot = load_snapshot(table)
    assert snapshot.segment.checkpoint_version == 1
    assert sorted(snapshot.files.column("path").to_pylist()) == expected
    assert "unreadable checkpoint parquet" in caplog.text


def test_corrupt_checkpoint_without_history_is_an_error(tmp_path):
    table = copy_fixture("delta-rs/table-with-domain-metadata", tmp_path)  # only a checkpoint
    checkpoint = table / "_delta_log" / "00000000000000000108.checkpoint.parquet"
    checkpoint.write_bytes(b"PAR1 not really")
    with pytest.raises((CorruptLog, VersionNotFound, NotADeltaTable)) as err:
        load_snapshot(table)
    assert "00000000000000000108.checkpoint.parquet" in str(err.value) or "108" in str(err.value)


def test_zero_byte_checkpoint_is_ignored(tmp_path):
    table = copy_fixture("delta-rs/simple_table_with_checkpoint", tmp_path)
    (table / "_delta_log" / "00000000000000000010.checkpoint.parquet").write_bytes(b"")
    snapshot = load_snapshot(table)
    assert snapshot.segment.checkpoint is None
    assert snapshot.version == 10


def test_incomplete_multi_part_checkpoint_is_ignored(tmp_path):
    table = copy_fixture("delta-spark/multi-part-checkpoint", tmp_path)
    expected = sorted(load_snapshot(table).files.column("path").to_pylist())
    (
        table / "_delta_log" / "00000000000000000001.checkpoint.0000000002.0000000002.parquet"
    ).unlink()
    snapshot = load_snapshot(table)
    assert snapshot.segment.checkpoint is None
    assert sorted(snapshot.files.column("path").to_pylist()) == expected


def test_checksum_mismatch_in_last_checkpoint_is_reported_and_listing_used(tmp_path, caplog):
    table = copy_fixture("delta-spark/dv-partitioned-with-checkpoint", tmp_path)
    hint = table / "_delta_log" / "_last_checkpoint"
    obj = json.loads(hint.read_text())
    obj["numOfAddFiles"] = obj["numOfAddFiles"] + 1  # content no longer matches the checksum
    hint.write_text(json.dumps(obj))
    with caplog.at_level(logging.WARNING):
        snapshot = load_snapshot(table)
    assert snapshot.segment.last_checkpoint.info is None
    assert "checksum mismatch" in snapshot.segment.last_checkpoint.problem
    assert "checksum mismatch" in caplog.text
    assert snapshot.segment.checkpoint_version == 10
    assert snapshot.version == 15


def test_garbage_last_checkpoint_and_hint_pointing_nowhere(tmp_path):
    table = copy_fixture("delta-rs/simple_table_with_checkpoint", tmp_path)
    hint = table / "_delta_log" / "_last_checkpoint"
    hint.write_text("{not json")
    assert load_snapshot(table).segment.checkpoint_version == 10
    hint.write_text('{"version": 7, "size": 3}')  # a checkpoint that does not exist
    assert load_snapshot(table).segment.checkpoint_version == 10


def test_time_travel_before_cleaned_history_fails_clearly(tmp_path):
    table = copy_fixture("delta-spark/only-checkpoint-files", tmp_path)
    for v in (0,):
        (table / "_delta_log" / f"{v:020d}.json").unlink()
    assert load_snapshot(table, version=1).version == 1  # from the checkpoint at 1
    with pytest.raises(VersionNotFound, match="cannot be reconstructed"):
        load_snapshot(table, version=0)
    with pytest.raises(VersionNotFound, match="does not exist"):
        load_snapshot(table, version=99)


def test_missing_sidecar_is_a_clear_error(tmp_path):
    table = copy_fixture("delta-spark/v2-checkpoint-json", tmp_path)
    for sidecar in (table / "_delta_log" / "_sidecars").iterdir():
        sidecar.unlink()
    # falls back to JSON replay, which has the full history
    snapshot = load_snapshot(table)
    assert snapshot.segment.checkpoint is None and snapshot.num_files == 4
    (table / "_delta_log" / "00000000000000000000.json").unlink()
    with pytest.raises(CorruptLog, match="sidecar"):
        load_snapshot(table)


def test_unknown_reader_feature_fails_naming_it(tmp_path):
    lb.write_commit(
        tmp_path,
        0,
        [
            lb.protocol(
                3, 7, reader_features=["futureFeatureX"], writer_features=["futureFeatureX"]
            ),
            lb.metadata(),
        ],
    )
    from delta_ops.errors import UnsupportedFeature

    with pytest.raises(UnsupportedFeature, match="futureFeatureX"):
        load_snapshot(tmp_path)


def test_missing_protocol_is_corrupt(tmp_path):
    lb.write_commit(tmp_path, 0, [lb.metadata(), lb.add("a")])
    with pytest.raises(CorruptLog, match="no protocol action"):
        load_snapshot(tmp_path)


def test_fixture_dirs_are_untouched():
    """Tests copy fixtures before writing: the originals keep their checkpoint files."""
    assert (
        TABLES
        / "delta-rs/simple_table_with_checkpoint/_delta_log/00000000000000000010.checkpoint.parquet"
    ).stat().st_size > 1000
    assert shutil.disk_usage(TABLES).total > 0


def test_date_like_strings_in_maps_stay_exact_strings(tmp_path):
    """pyarrow's JSON inference would turn these into timestamps; they must stay as written."""
    meta = lb.metadata(
        configuration={"custom.since": "2023-01-01", "delta.checkpointInterval": "5"},
        partition_columns=["part"],
    )
    lb.write_commit(tmp_path, 0, [lb.commit_info(), lb.protocol(), meta])
    a = lb.add("part=2023-12-29/a.parquet", part="2023-12-29")
    a["add"]["tags"] = {"INSERTION_TIME": "2024-01-01T00:00:00.000000Z", "n": "1"}
    lb.write_commit(tmp_path, 1, [lb.commit_info(), a, lb.add("part=x/b.parquet", part="x")])
    snapshot = load_snapshot(tmp_path)
    rows = {r["path"]: r for r in snapshot.files.to_pylist()}
    assert dict(rows["part=2023-12-29/a.parquet"]["partitionValues"]) == {"part": "2023-12-29"}
    assert dict(rows["part=2023-12-29/a.parquet"]["tags"]) == {
        "INSERTION_TIME": "2024-01-01T00:00:00.000000Z",
        "n": "1",
    }
    assert dict(rows["part=x/b.parquet"]["partitionValues"]) == {"part": "x"}
    assert snapshot.metadata.configuration["custom.since"] == "2023-01-01"


def test_fixture_partition_values_are_exact():
    snapshot = load_snapshot(TABLES / "delta-rs/cdf-table")
    values = {dict(pv)["birthday"] for pv in snapshot.files.column("partitionValues").to_pylist()}
    assert values == {"2023-12-22", "2023-12-25", "2023-12-29"}
