"""Reads never fail for a feature that refuses an operation: `inspect`, the Dagster health
checks, the maintenance schedule and the commit sensor report what a table's features allow,
on every table a peer reader reads, whatever its features.

The tables: every fixture in tests/data that `deltalake` or DuckDB reads, and a small table
given, in turn, each table feature delta-ops knows, an unknown one, and the pre-release name
`liquid` of `clustering` (as Databricks wrote it: writer features `domainMetadata,
deletionVectors, rowTracking, liquid`).

No `from __future__ import annotations` here: Dagster definitions are built in this module.
"""

import datetime
import hashlib
import json
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pytest

from delta_ops import cli
from delta_ops.dagster import DeltaTableTarget, build_delta_maintenance_defs
from delta_ops.protocol.features import (
    FEATURES,
    Access,
    Protocol,
    canonical_feature_name,
    lookup_feature,
)
from delta_ops.service.due import Action, judge
from delta_ops.service.health import due_facts
from delta_ops.table.snapshot import load_snapshot
from tests.support import copy_fixture, deltalake_rows, duckdb_rows, peer_facts
from tests.support.log_builder import write_commit

LIQUID_WRITER_FEATURES = ["domainMetadata", "deletionVectors", "rowTracking", "liquid"]
UNKNOWN = "someFutureWriterFeature"


def _digests(root: Path) -> dict[str, str]:
    """Every file under `root` and the sha256 of its bytes, read now (never cached)."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _table_with_protocol(dest: Path, reader: list[str], writer: list[str]) -> Path:
    """A table of 3 appended files written by `deltalake`, then a commit setting a protocol
    with these features (reader 3 / writer 7) as another engine would have written it."""
    from deltalake import write_deltalake

    dest.mkdir(parents=True)
    for i in range(3):
        write_deltalake(
            str(dest), pa.table({"id": pa.array([i, i + 10], pa.int64())}), mode="append"
        )
    protocol = {
        "minReaderVersion": 3,
        "minWriterVersion": 7,
        "readerFeatures": reader,
        "writerFeatures": writer,
    }
    actions: list[dict] = [
        {"commitInfo": {"timestamp": 1_700_000_000_000, "operation": "UPGRADE PROTOCOL"}},
        {"protocol": protocol},
    ]
    if "liquid" in writer or "clustering" in writer:
        actions.append(
            {
                "domainMetadata": {
                    "domain": "delta.clustering",
                    "configuration": json.dumps({"clusteringColumns": [["id"]]}),
                    "removed": False,
                }
            }
        )
    write_commit(dest, 3, actions)
    return dest


def _feature_protocol(name: str) -> tuple[list[str], list[str]]:
    """The reader and writer feature lists of a protocol that uses `name` (and what it needs)."""
    feature = lookup_feature(name)
    if feature is None:  # an unknown name: a writer feature, readers ignore it
        return [], [name]
    names = {name, *feature.requires}
    reader = sorted(n for n in names if FEATURES[canonical_feature_name(n)].is_reader_writer)
    return reader, sorted(names)


def _peer_reads(table: Path) -> bool:
    """Whether `deltalake` or DuckDB reads the table's rows (each raises its own errors)."""
    import duckdb
    from deltalake.exceptions import DeltaError

    for read in (deltalake_rows, duckdb_rows):
        try:
            read(table)
        except (DeltaError, duckdb.Error):
            pass
        else:
            return True
    return False


@pytest.fixture(scope="module")
def feature_tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A table per known feature name, an unknown one, the Databricks liquid table, and every
    fixture: only those a peer reads."""
    root = tmp_path_factory.mktemp("features")
    tables: dict[str, Path] = {}
    for name in [*sorted(FEATURES), UNKNOWN]:
        reader, writer = _feature_protocol(name)
        tables[f"feature_{name}"] = _table_with_protocol(root / name, reader, writer)
    tables["liquid"] = _table_with_protocol(
        root / "liquid", ["deletionVectors"], LIQUID_WRITER_FEATURES
    )
    readable = {name: path for name, path in tables.items() if _peer_reads(path)}
    # fixtures by what the peers said of them (some hold a log and no data files)
    for fixture, fact in peer_facts().items():
        if "rs_error" not in fact or "kernel_error" not in fact:
            readable[fixture] = copy_fixture(fixture, root / "fixtures")
    return readable


def test_the_tables_cover_refusing_features(feature_tables: dict[str, Path]) -> None:
    """The property below is only as good as the tables: many features that refuse some
    operation, and fixtures, are among those a peer reads."""
    refusing = [
        name
        for name, path in feature_tables.items()
        if any(load_snapshot(path).protocol.refusal(op) for op in Access)
    ]
    assert {f"feature_{UNKNOWN}"} <= set(refusing)
    assert len(refusing) >= 10, refusing
    assert sum(1 for name in feature_tables if "/" in name) >= 28  # every fixture a peer reads


def test_inspect_succeeds_on_every_table_a_peer_reads(
    feature_tables: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    for name, table in feature_tables.items():
        assert cli.main(["inspect", str(table)]) == 0, (name, capsys.readouterr().err)
        text = capsys.readouterr().out
        assert cli.main(["inspect", str(table), "--json"]) == 0, (name, capsys.readouterr().err)
        summary = json.loads(capsys.readouterr().out)
        protocol = load_snapshot(table).protocol
        for op in Access:
            refusing = protocol.refusing(op)
            state = summary["operations"][op.name.lower()]
            assert (state == "allowed") == (protocol.refusal(op) is None), (name, op, state)
            if refusing:
                assert op.name.lower() + ": refused" in text, (name, op)
        # advice never names a command the table refuses
        commands = " ".join(item["command"] for item in summary["advice"])
        for op, command in (
            (Access.CHECKPOINT, "delta-ops checkpoint"),
            (Access.CLEANUP, "delta-ops cleanup"),
            (Access.VACUUM, "delta-ops vacuum"),
            (Access.ENABLE_ROW_TRACKING, "delta-ops enable-row-tracking"),
        ):
            if protocol.refusal(op) is not None:
                assert command not in commands, (name, command)


def test_due_verdicts_report_refusals_instead_of_failing(
    feature_tables: dict[str, Path],
) -> None:
    for name, table in feature_tables.items():
        snapshot = load_snapshot(table)
        verdicts = judge(due_facts(snapshot, 1_900_000_000_000))
        for op, action in (
            (Access.CHECKPOINT, Action.CHECKPOINT),
            (Access.CLEANUP, Action.CLEANUP),
            (Access.VACUUM, Action.VACUUM),
            (Access.COMPACT, Action.COMPACT),
            (Access.REWRITE, Action.PURGE),
        ):
            why = snapshot.protocol.refusal(op)
            if why is not None:
                assert not verdicts[action].due, (name, op)
                assert verdicts[action].reason == why, (name, op, verdicts[action])


def test_dagster_checks_schedule_and_sensor_run_on_every_table(
    feature_tables: dict[str, Path],
) -> None:
    targets = [
        DeltaTableTarget(name=f"t{i}", url=str(path), enable_row_tracking=True)
        for i, path in enumerate(feature_tables.values())
    ]
    defs = build_delta_maintenance_defs(targets, name="feat", row_tracking_cron="0 4 * * *")
    result = dg.materialize(
        [*defs.assets, *defs.asset_checks],
        resources=defs.resources,
        selection=dg.AssetSelection.all_asset_checks(),
        instance=dg.DagsterInstance.ephemeral(),
    )
    assert result.success
    evaluations = result.get_asset_check_evaluations()
    assert len(evaluations) >= 8 * len(targets)
    # every table's log was read: no check carries an error instead of a verdict
    for evaluation in evaluations:
        if evaluation.check_name == "log_reconstructible":
            assert evaluation.passed, evaluation.asset_key
    # the schedules and the sensor evaluate without raising, table by table
    with dg.instance_for_test() as instance:
        for schedule in defs.schedules or []:
            context = dg.build_schedule_context(
                instance=instance,
                resources=defs.resources,
                scheduled_execution_time=datetime.datetime.now(datetime.UTC),
            )
            schedule.evaluate_tick(context)
        for sensor in defs.sensors or []:
            if "commit" in sensor.name:
                sensor.evaluate_tick(
                    dg.build_sensor_context(instance=instance, resources=defs.resources)
                )


# ------------------------------------------------------------------ the Databricks liquid table
def test_liquid_is_the_old_name_of_clustering() -> None:
    assert canonical_feature_name("liquid") == "clustering"
    protocol = Protocol(3, 7, frozenset({"deletionVectors"}), frozenset(LIQUID_WRITER_FEATURES))
    assert protocol.supports("clustering") and protocol.refusal(Access.WRITE) is None
    # an upgrade keeps the name the table lists, and adds no second clustering name
    upgraded = protocol.with_features("rowTracking", "clustering")
    assert upgraded is protocol
    upgraded = protocol.with_features("timestampNtz")
    assert upgraded.writer_features is not None
    assert "liquid" in upgraded.writer_features and "clustering" not in upgraded.writer_features


def test_clustering_allows_every_operation(tmp_path: Path) -> None:
    protocol = Protocol(3, 7, frozenset({"deletionVectors"}), frozenset(LIQUID_WRITER_FEATURES))
    assert {op for op in Access if protocol.refusal(op) is not None} == set()


def test_compaction_of_a_liquid_table_clusters_it_by_its_columns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Delta Spark's OPTIMIZE on a clustered table clusters (issue 36): the Databricks table
    listing `liquid` is clustered by its domain's column, and keeps the name it lists."""
    table = _table_with_protocol(tmp_path / "t", ["deletionVectors"], LIQUID_WRITER_FEATURES)
    rows = deltalake_rows(table)
    assert cli.main(["compact", str(table), "--json"]) == 0, capsys.readouterr().err
    result = json.loads(capsys.readouterr().out)
    assert result["mode"] == "clustering" and result["columns"] == ["id"]
    snapshot = load_snapshot(table)
    assert set(snapshot.files.column("clusteringProvider").to_pylist()) == {"liquid"}
    assert snapshot.protocol.writer_features == frozenset(LIQUID_WRITER_FEATURES)
    assert deltalake_rows(table) == rows == duckdb_rows(table)


@pytest.mark.parametrize("op", ["checkpoint", "cleanup", "vacuum", "purge", "enable-row-tracking"])
def test_maintenance_that_lays_out_no_data_runs_on_a_liquid_table(
    tmp_path: Path, op: str, capsys: pytest.CaptureFixture[str]
) -> None:
    table = _table_with_protocol(tmp_path / "t", ["deletionVectors"], LIQUID_WRITER_FEATURES)
    rows = deltalake_rows(table)
    assert cli.main([op, str(table), "--json"]) == 0, capsys.readouterr().err
    assert deltalake_rows(table) == rows == duckdb_rows(table)
    assert load_snapshot(table).protocol.writer_features == frozenset(LIQUID_WRITER_FEATURES)
