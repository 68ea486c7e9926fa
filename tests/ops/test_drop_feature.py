"""`drop-feature`: a table feature out of the protocol, Delta Spark 4's way (issue 30, item 3).

On the real tables of tests/data that carry a feature delta-ops drops (deletion vectors by
Delta Spark and delta-rs, V2 checkpoints with and without sidecars, vacuumProtocolCheck) and
on tables our writer builds (in-commit timestamps, a history to truncate): `deltalake`'s
pyarrow reader, which lacks those features, refuses the table before and reads it after, with
the rows DuckDB reads; the protocol ends as low as the remaining features allow; the two-step
`--truncate-history` drop waits for its retention; checkpointProtection, which the fast drop
adds and which `deltalake`'s writer refuses, goes with the history before it.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from deltalake.exceptions import DeltaError, DeltaProtocolError

from delta_ops import cli
from delta_ops.clock import fixed_wall_clock
from delta_ops.errors import InvalidValue
from delta_ops.log.file_names import LogFile, LogFileKind, parse_log_file_name
from delta_ops.ops import drop_feature as drop_module
from delta_ops.ops import log_cleanup as cleanup_module
from delta_ops.ops.cleanup import execute_cleanup, plan_cleanup
from delta_ops.ops.drop_feature import (
    DropFeatureResult,
    execute_drop_feature,
    plan_drop_feature,
)
from delta_ops.protocol.features import Protocol
from delta_ops.table.snapshot import load_snapshot
from delta_ops.table.writer import write_arrow
from tests.support import copy_fixture, deltalake_rows, duckdb_rows, file_digests
from tests.support.rewrite_support import dv_table

HOUR = 3_600_000
DAY = 24 * HOUR

#: real tables carrying a feature delta-ops drops, and that feature
FIXTURES = [
    ("delta-rs/table-with-dv-small", "deletionVectors"),
    ("delta-spark/dv-partitioned-with-checkpoint", "deletionVectors"),
    ("delta-spark/log-replay-dv-key-cases", "deletionVectors"),
    ("kernel/with-short-dv", "deletionVectors"),
    ("delta-spark/v2-checkpoint-json", "v2Checkpoint"),
    ("delta-spark/v2-checkpoint-parquet", "v2Checkpoint"),
    ("kernel/v2-checkpoints-json-with-sidecars", "v2Checkpoint"),
    ("delta-rs/checkpoint-v2-table", "v2Checkpoint"),
    ("delta-spark/basic-with-vacuum-protocol-check-feature", "vacuumProtocolCheck"),
]


def _now() -> int:
    return time.time_ns() // 1_000_000


def _drop(table: Path, feature: str, *, truncate: bool = False, at: int | None = None) -> Any:
    with fixed_wall_clock(_now() if at is None else at, all_threads=True):
        plan = plan_drop_feature(load_snapshot(table), feature=feature, truncate_history=truncate)
        return execute_drop_feature(plan)


def _pyarrow_rows(table: Path) -> list[dict[str, Any]]:
    """The rows `deltalake`'s pyarrow reader returns: it refuses the reader features it lacks
    (deletion vectors, V2 checkpoints, vacuumProtocolCheck)."""
    data = DeltaTable(str(table)).to_pyarrow_table()
    return sorted(data.to_pylist(), key=lambda r: json.dumps(r, sort_keys=True, default=str))


def _sorted(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda r: json.dumps(r, sort_keys=True, default=str))


def _log(table: Path) -> list[LogFile]:
    names = [p.name for p in (table / "_delta_log").iterdir()]
    return sorted((f for n in names if (f := parse_log_file_name(n))), key=lambda f: f.name)


# ------------------------------------------------------------------ the protocol algebra
@pytest.mark.parametrize(
    ("before", "feature", "after"),
    [
        # a reader-writer table feature alone: back to the lowest legacy protocol
        ((3, 7, ["deletionVectors"], ["deletionVectors"]), "deletionVectors", (1, 1, None, None)),
        # what is left is exactly what (1, 2) implies
        (
            (3, 7, ["deletionVectors"], ["appendOnly", "deletionVectors", "invariants"]),
            "deletionVectors",
            (1, 2, None, None),
        ),
        (
            (1, 7, None, ["appendOnly", "inCommitTimestamp", "invariants"]),
            "inCommitTimestamp",
            (1, 2, None, None),
        ),
        # Delta Spark's own example: (1, 3) less invariants cannot be a legacy protocol
        ((1, 3, None, None), "invariants", (1, 7, None, ["appendOnly", "checkConstraints"])),
        # a writer table feature left: writer 7, reader 1
        (
            (3, 7, ["v2Checkpoint"], ["checkpointProtection", "v2Checkpoint"]),
            "v2Checkpoint",
            (1, 7, None, ["checkpointProtection"]),
        ),
        # column mapping left: reader 2 implies it, listed for writers only
        (
            (3, 7, ["columnMapping", "deletionVectors"], ["columnMapping", "deletionVectors"]),
            "deletionVectors",
            (2, 7, None, ["columnMapping"]),
        ),
        ((2, 5, None, None), "columnMapping", (1, 4, None, None)),
        # another reader-writer feature stays: reader 3, names keep their spelling
        (
            (3, 7, ["deletionVectors", "timestampNTZ"], ["deletionVectors", "timestampNTZ"]),
            "DELETIONVECTORS",
            (3, 7, ["timestampNTZ"], ["timestampNTZ"]),
        ),
    ],
)
def test_the_protocol_ends_as_low_as_the_remaining_features_allow(
    before: tuple[Any, ...], feature: str, after: tuple[Any, ...]
) -> None:
    r, w, readers, writers = before
    protocol = Protocol(r, w, frozenset(readers) if readers else None, frozenset(writers or ()))
    if w < 7:
        protocol = Protocol(r, w)
    r, w, readers, writers = after
    expected = Protocol(r, w, frozenset(readers) if readers else None, None)
    if writers is not None:
        expected = Protocol(r, w, expected.reader_features, frozenset(writers))
    assert protocol.without_feature(feature) == expected


# ------------------------------------------------------------------ real tables, fast drop
@pytest.mark.parametrize(("name", "feature"), FIXTURES)
def test_fast_drop_on_real_tables_lets_a_reader_without_the_feature_read(
    name: str, feature: str, tmp_path: Path
) -> None:
    table = copy_fixture(name, tmp_path)
    rows = _sorted(duckdb_rows(table))
    with pytest.raises(DeltaProtocolError, match=feature):
        DeltaTable(str(table)).to_pyarrow_table()  # deltalake's reader lacks the feature
    before = load_snapshot(table)
    older: dict[int, Any] = {}
    if feature != "vacuumProtocolCheck":  # deltalake's scan refuses it too, at every version
        older = {v: deltalake_rows(table, version=v) for v in (0, before.version)}

    result = _drop(table, feature)

    assert isinstance(result, DropFeatureResult) and result.dropped
    after = load_snapshot(table)
    assert not after.protocol.supports(feature)
    assert after.protocol.min_reader_version == 1  # no reader feature is left
    assert (
        after.protocol.writer_features and "checkpointProtection" in after.protocol.writer_features
    )
    assert after.properties.require_checkpoint_protection_before_version == result.version
    assert _pyarrow_rows(table) == _sorted(duckdb_rows(table)) == rows
    # three barrier checkpoints before the drop, one after it, all classic
    assert len(result.checkpoints) == 4 and result.checkpoints[-1] == after.version
    assert result.checkpoints[2] == result.version - 1
    assert after.segment.checkpoint is not None
    assert after.segment.checkpoint.kind is LogFileKind.CLASSIC_CHECKPOINT
    # the history before reads as it did, for readers that have the feature
    for version, expected in older.items():
        assert deltalake_rows(table, version=version) == expected
    info = _commit_info(table, result.version)
    assert info["operation"] == "DROP FEATURE"
    assert info["operationParameters"] == {"featureName": feature, "truncateHistory": "false"}
    if feature == "deletionVectors":
        assert after.file_index.column("deletionVector").null_count == after.num_files
        assert "delta.enableDeletionVectors" not in after.metadata.configuration
    if feature == "v2Checkpoint":
        assert after.properties.checkpoint_policy == "classic"
        # no version a reader without V2 checkpoints reads needs one: the latest reads the
        # same with every V2 checkpoint and sidecar gone
        bare = shutil.copytree(table, tmp_path / "bare")
        for f in _log(bare):
            if f.kind is LogFileKind.V2_CHECKPOINT:
                (bare / "_delta_log" / f.name).unlink()
        shutil.rmtree(bare / "_delta_log" / "_sidecars", ignore_errors=True)
        assert _pyarrow_rows(bare) == _sorted(duckdb_rows(bare)) == rows


def _commit_info(table: Path, version: int) -> dict[str, Any]:
    lines = (table / "_delta_log" / f"{version:020d}.json").read_text().splitlines()
    return next(json.loads(line)["commitInfo"] for line in lines if "commitInfo" in line)


def test_dv_drop_keeps_the_deletion_vector_files_older_versions_read(tmp_path: Path) -> None:
    """Delta Spark's DV table: the purge's removes and the tombstones inside the file retention
    name deletion-vector files; each gets a tombstone of its own (a vacuum by a client without
    deletion vectors then keeps it), and a vacuum by ours keeps every version readable."""
    table = copy_fixture("delta-spark/dv-partitioned-with-checkpoint", tmp_path)
    before = load_snapshot(table)
    versions = {v: deltalake_rows(table, version=v) for v in range(before.version + 1)}
    result = _drop(table, "deletionVectors")
    assert result.files_purged == 2 and result.dv_tombstones >= 2
    snapshot = load_snapshot(table)
    tombstones = snapshot.tombstones.filter(
        pa.compute.is_null(snapshot.tombstones.column("deletionVector"))
    )
    dv_paths = {p for p in tombstones.column("path").to_pylist() if p.startswith("deletion_vector")}
    assert len(dv_paths) == result.dv_tombstones
    assert all((table / p).exists() for p in dv_paths)
    assert cli.main(["vacuum", str(table)]) == 0
    for version, rows in versions.items():
        if version >= 10:  # the checkpoint of 10 and the commits after it are all there
            assert deltalake_rows(table, version=version) == rows


# ------------------------------------------------------------------ truncate history
def test_truncate_history_takes_two_runs_a_retention_apart(tmp_path: Path) -> None:
    """The first run purges and checkpoints, then says to wait; a run too early waits; a run
    after delta.dropFeatureTruncateHistory.retentionDuration (24 hours) truncates the log and
    drops the feature, with no checkpointProtection: back to (1, 2)."""
    table = dv_table(tmp_path)
    rows = _sorted(duckdb_rows(table))
    now = _now()
    first = _drop(table, "deletionVectors", truncate=True, at=now)
    assert not first.dropped and first.files_purged == 2 and first.run_again_after_ms
    assert first.run_again_after_ms >= now + DAY and "older than 1 day" in (first.waiting_for or "")
    assert load_snapshot(table).protocol.supports("deletionVectors")
    early = _drop(table, "deletionVectors", truncate=True, at=now + 2 * HOUR)
    assert not early.dropped and early.log_files_deleted == 0
    late = _drop(table, "deletionVectors", truncate=True, at=first.run_again_after_ms)
    assert late.dropped and late.log_files_deleted > 0
    snapshot = load_snapshot(table)
    assert snapshot.protocol == Protocol(1, 2)
    assert "checkpointProtection" not in str(snapshot.protocol)
    commits = [f.version for f in _log(table) if f.kind is LogFileKind.COMMIT]
    assert min(commits) > first.commits[-1]  # the commits that held traces are gone
    assert _pyarrow_rows(table) == _sorted(duckdb_rows(table)) == rows
    info = _commit_info(table, late.version)
    assert info["operationParameters"]["truncateHistory"] == "true"


def test_truncate_history_of_v2_checkpoints_leaves_no_v2_checkpoint_or_sidecar(
    tmp_path: Path,
) -> None:
    table = copy_fixture("delta-spark/v2-checkpoint-parquet", tmp_path)
    rows = _sorted(duckdb_rows(table))
    now = _now()
    assert not _drop(table, "v2Checkpoint", truncate=True, at=now).dropped
    result = _drop(table, "v2Checkpoint", truncate=True, at=now + DAY + 2 * 60_000)
    assert result.dropped
    assert load_snapshot(table).protocol == Protocol(1, 2)
    assert not [f for f in _log(table) if f.kind is LogFileKind.V2_CHECKPOINT]
    assert not list((table / "_delta_log" / "_sidecars").glob("*.parquet"))
    assert _pyarrow_rows(table) == rows


def test_vacuum_protocol_check_with_truncate_history_drops_at_once(tmp_path: Path) -> None:
    """The feature leaves no trace in any version: nothing to wait for (as in Delta Spark)."""
    table = copy_fixture("delta-spark/basic-with-vacuum-protocol-check-feature", tmp_path)
    result = _drop(table, "vacuumProtocolCheck", truncate=True)
    assert result.dropped
    assert load_snapshot(table).protocol == Protocol(1, 2)
    assert len(_pyarrow_rows(table)) == 100


# ------------------------------------------------------------------ writer features
def test_in_commit_timestamps_are_turned_off_then_dropped(tmp_path: Path) -> None:
    table = tmp_path / "t"
    config = {"delta.enableInCommitTimestamps": "true"}
    write_arrow(table, pa.table({"id": pa.array([1, 2], pa.int64())}), configuration=config)
    write_arrow(table, pa.table({"id": pa.array([3], pa.int64())}))
    assert load_snapshot(table).protocol.supports("inCommitTimestamp")
    assert cli.main(["drop-feature", str(table), "inCommitTimestamp", "--truncate-history"]) == 2
    result = _drop(table, "inCommitTimestamp")
    snapshot = load_snapshot(table)
    assert result.dropped and snapshot.protocol == Protocol(1, 2)
    assert snapshot.properties.enable_in_commit_timestamps is False
    # the commit that turned them off and every one after carries none
    for version in result.commits:
        assert "inCommitTimestamp" not in _commit_info(table, version)
    assert len(result.commits) == 2 and not result.checkpoints  # no history protection
    write_deltalake(str(table), pa.table({"id": pa.array([4], pa.int64())}), mode="append")
    assert sorted(r["id"] for r in _pyarrow_rows(table)) == [1, 2, 3, 4]


def test_checkpoint_protection_goes_with_the_history_before_it(tmp_path: Path) -> None:
    """The fast drop adds checkpointProtection, which deltalake's writer refuses; dropping it
    needs --truncate-history, and the history before the protected version goes in one go."""
    table = copy_fixture("delta-rs/table-with-dv-small", tmp_path)
    rows = _sorted(duckdb_rows(table))
    now = _now()
    fast = _drop(table, "deletionVectors", at=now)
    extra = DeltaTable(str(table)).to_pyarrow_table().slice(0, 1)  # a row to append again
    with pytest.raises(DeltaError, match="checkpointProtection"):
        write_deltalake(str(table), extra, mode="append")
    assert cli.main(["drop-feature", str(table), "checkpointProtection"]) == 2
    first = _drop(table, "checkpointProtection", truncate=True, at=now + HOUR)
    assert not first.dropped and "before version" in (first.waiting_for or "")
    assert [f for f in _log(table) if f.version < fast.version]  # nothing went early
    later = now + HOUR + DAY + 2 * 60_000
    result = _drop(table, "checkpointProtection", truncate=True, at=later)
    assert result.dropped
    snapshot = load_snapshot(table)
    assert snapshot.protocol == Protocol(1, 1)
    assert "delta.requireCheckpointProtectionBeforeVersion" not in snapshot.metadata.configuration
    assert not [f for f in _log(table) if f.version < fast.version]
    assert _pyarrow_rows(table) == rows
    write_deltalake(str(table), extra, mode="append")
    assert len(_pyarrow_rows(table)) == len(rows) + 1


# ------------------------------------------------------------------ the CLI, refusals, plans
def test_the_cli_refuses_in_one_line_what_it_cannot_drop(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = copy_fixture("delta-rs/table-with-dv-small", tmp_path)
    digests = file_digests(table)
    for args in (["bogus"], ["rowTracking"], ["v2Checkpoint"], ["inCommitTimestamp"]):
        assert cli.main(["drop-feature", str(table), *args]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("delta-ops: error: drop-feature:")
        if args[0] == "bogus":
            assert "deletionVectors, v2Checkpoint, inCommitTimestamp" in err
        else:
            assert "is not in the protocol" in err
    assert file_digests(table) == digests
    with pytest.raises(InvalidValue, match="name the feature"):
        plan_drop_feature(load_snapshot(table), feature=None)


def test_dry_run_prints_the_plan_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = copy_fixture("delta-spark/dv-partitioned-with-checkpoint", tmp_path)
    digests = file_digests(table)
    assert cli.main(["drop-feature", str(table), "deletionvectors", "--dry-run", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert file_digests(table) == digests
    assert plan["feature"] == "deletionVectors" and plan["mode"] == "fast" and plan["dry_run"]
    assert [s["action"] for s in plan["steps"]] == [
        "unset",
        "purge",
        "dv-tombstones",
        "barrier",
        "drop",
        "checkpoint",
    ]
    assert plan["protocol_after"] == {
        "minReaderVersion": 1,
        "minWriterVersion": 7,
        "writerFeatures": ["checkpointProtection"],
    }
    assert cli.main(["drop-feature", str(table), "deletionVectors", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "fast drop" in out
    # the protocols as `inspect` writes them, not as a Python object's repr
    assert "Protocol(" not in out and "writerFeatures=" not in out, out
    assert "-> reader v1, writer v7 (writer features: checkpointProtection)" in out, out
    assert cli.main(["drop-feature", str(table), "deletionVectors"]) == 0
    out = capsys.readouterr().out
    assert "dropped deletionVectors" in out and "Protocol(" not in out, out
    assert "protocol reader v1, writer v7 (writer features: checkpointProtection)" in out, out


# ------------------------------------------------------------------ crashes and re-runs
def test_a_crash_before_the_last_checkpoint_is_finished_by_a_rerun(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = copy_fixture("delta-rs/table-with-dv-small", tmp_path)
    rows = _sorted(duckdb_rows(table))
    real = drop_module.checkpoint
    calls = []

    def crashing(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 4:  # the checkpoint after the downgrade commit
            raise RuntimeError("killed")
        return real(*args, **kwargs)

    monkeypatch.setattr(drop_module, "checkpoint", crashing)
    with pytest.raises(RuntimeError, match="killed"):
        _drop(table, "deletionVectors")
    monkeypatch.setattr(drop_module, "checkpoint", real)
    assert _pyarrow_rows(table) == _sorted(duckdb_rows(table)) == rows
    plan = plan_drop_feature(load_snapshot(table), feature="deletionVectors")
    assert plan.mode == "finish" and [s.action for s in plan.steps] == ["checkpoint"]
    result = execute_drop_feature(plan)
    assert result.dropped and result.checkpoints == (load_snapshot(table).version,)
    with pytest.raises(InvalidValue, match="not in the protocol"):
        plan_drop_feature(load_snapshot(table), feature="deletionVectors")


def test_a_crash_after_the_purge_is_finished_by_a_rerun(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = copy_fixture("delta-spark/dv-partitioned-with-checkpoint", tmp_path)
    rows = _sorted(duckdb_rows(table))
    real = drop_module.checkpoint

    def crashing(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("killed")

    monkeypatch.setattr(drop_module, "checkpoint", crashing)
    with pytest.raises(RuntimeError, match="killed"):
        _drop(table, "deletionVectors")
    monkeypatch.setattr(drop_module, "checkpoint", real)
    assert _sorted(deltalake_rows(table)) == _sorted(duckdb_rows(table)) == rows
    plan = plan_drop_feature(load_snapshot(table), feature="deletionVectors")
    assert [s.action for s in plan.steps] == ["barrier", "drop", "checkpoint"]
    assert execute_drop_feature(plan).dropped
    assert _pyarrow_rows(table) == rows


# ------------------------------------------------------------------ cleanup and protection
def test_cleanup_honours_checkpoint_protection(tmp_path: Path, monkeypatch: Any) -> None:
    """After a fast drop, a cleanup a month later deletes commits before checkpoints (the
    protocol's writer requirement (d)) and keeps the barrier checkpoints and everything
    after; the rule itself stops a cleanup that would leave no checkpoint where it stops."""
    table = dv_table(tmp_path)
    result = _drop(table, "deletionVectors")
    deleted: list[str] = []
    real_delete = type(load_snapshot(table).storage).delete

    def recording(self: Any, paths: Any) -> Any:
        paths = list(paths)
        deleted.extend(str(p).rsplit("/", 1)[-1] for p in paths)
        return real_delete(self, paths)

    monkeypatch.setattr(type(load_snapshot(table).storage), "delete", recording)
    with fixed_wall_clock(_now() + 40 * DAY, all_threads=True):
        plan = plan_cleanup(load_snapshot(table), _now() + 40 * DAY)
        assert plan.protected_before_version == result.version
        execute_cleanup(plan)
    kinds = [".checkpoint." in name for name in deleted]
    assert kinds == sorted(kinds) and any(kinds)  # every commit before any checkpoint
    assert _pyarrow_rows(table) == _sorted(duckdb_rows(table))

    def listed(*names: str) -> list[LogFile]:
        return [f for n in names if (f := parse_log_file_name(n, 1))]

    files = listed(*(f"{v:020d}.json" for v in range(12)), f"{5:020d}.checkpoint.parquet")
    doomed = {f"{v:020d}.json" for v in range(4)}
    refusal = cleanup_module._protection_refusal
    storage = load_snapshot(table).storage
    assert "checkpointProtection" in (refusal(storage, files, doomed, 4, 10, False) or "")
    assert refusal(storage, files, {f"{v:020d}.json" for v in range(5)}, 5, 10, False) is None
    everything = {f"{v:020d}.json" for v in range(10)}
    assert refusal(storage, files, everything, 10, 10, False) is None


def test_inspect_advises_dropping_a_reader_feature_nothing_uses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Deletion vectors turned off and purged (a truncating drop's first run): readers without
    them still refuse the table, and `inspect` says which command lets them read it."""
    table = dv_table(tmp_path)

    def advice() -> list[str]:
        assert cli.main(["inspect", str(table), "--json"]) == 0
        return [a["command"] for a in json.loads(capsys.readouterr().out)["advice"]]

    assert not [c for c in advice() if "drop-feature" in c]  # deletion vectors in use
    assert not _drop(table, "deletionVectors", truncate=True).dropped
    assert f"delta-ops drop-feature {table} deletionVectors --dry-run" in advice()
    _drop(table, "deletionVectors")  # the fast drop, at once
    assert not [c for c in advice() if "drop-feature" in c]
