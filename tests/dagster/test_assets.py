"""The Dagster maintenance assets and asset checks, executed for real on copies of the fixtures.

No `from __future__ import annotations` here: this module defines a decorated Dagster asset.
"""

import json
import os
import shutil
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pytest

from delta_ops.dagster import (
    ACTIONS,
    DeltaMaintenanceResource,
    DeltaMaintenanceTranslator,
    DeltaTableTarget,
    build_delta_maintenance_defs,
)
from delta_ops.dagster.resource import result_metadata
from delta_ops.ops.registry import OPERATIONS
from delta_ops.table.checksum import checksum_of_snapshot
from delta_ops.table.snapshot import load_snapshot
from delta_ops.table.writer import write_arrow
from tests.support import deltalake_files, deltalake_rows, fresh_copy, is_hadoop_checksum
from tests.support import log_builder as lb

DAY_S = 86_400


# --------------------------------------------------------------------------------- helpers
def resource_key(name: str) -> str:
    return f"{name}_delta_maintenance"


def action_key(
    table: str, action: str, prefix: Sequence[str] | None = None, *, fleet: str | None = None
) -> dg.AssetKey:
    """A maintenance asset key: the factory's default is delta_maintenance/<fleet>/<table>/<action>."""
    if prefix is None:
        prefix = ("delta_maintenance", fleet) if fleet else ("delta_maintenance",)
    return dg.AssetKey([*prefix, table, action])


def run_assets(
    defs: dg.Definitions, name: str, selection=None, instance=None
) -> dg.ExecuteInProcessResult:
    job = defs.resolve_job_def(f"{name}_maintenance_assets_job")
    return job.execute_in_process(
        asset_selection=selection,
        instance=instance or dg.DagsterInstance.ephemeral(),
        raise_on_error=False,
    )


def materializations(result: dg.ExecuteInProcessResult) -> dict[dg.AssetKey, dict]:
    out = {}
    for event in result.get_asset_materialization_events():
        mat = event.step_materialization_data.materialization
        assert mat.asset_key not in out, f"{mat.asset_key} materialized twice in one run"
        out[mat.asset_key] = {k: v.value for k, v in mat.metadata.items()}
    return out


def run_checks(defs: dg.Definitions) -> dict[tuple[dg.AssetKey, str], dg.AssetCheckEvaluation]:
    result = dg.materialize(
        [*defs.assets, *defs.asset_checks],
        resources=defs.resources,
        selection=dg.AssetSelection.all_asset_checks(),
        instance=dg.DagsterInstance.ephemeral(),
    )
    assert result.success
    assert not result.get_asset_materialization_events(), (
        "running checks must not materialize anything"
    )
    return {(e.asset_key, e.check_name): e for e in result.get_asset_check_evaluations()}


def data_files(table: Path) -> dict[str, int]:
    """relative path -> size of every file outside _delta_log."""
    out = {}
    for root, dirs, files in os.walk(table):
        dirs[:] = [d for d in dirs if d != "_delta_log"]
        for f in files:
            if is_hadoop_checksum(f):  # goes with its file; not the table's
                continue
            full = os.path.join(root, f)
            out[os.path.relpath(full, table)] = os.path.getsize(full)
    return out


def log_files(table: Path) -> set[str]:
    return {
        p.name
        for p in (table / "_delta_log").iterdir()
        if p.is_file() and not is_hadoop_checksum(p.name)
    }


def age(table: Path, days: float, *, log: bool = False, data: bool = True) -> None:
    """Move modification times `days` into the past (data files and/or _delta_log files); log
    files keep their order in time, one second apart, as a real log's do."""
    when = time.time() - days * DAY_S
    for root, dirs, files in os.walk(table):
        in_log = "_delta_log" in Path(root).relative_to(table).parts
        if (in_log and log) or (not in_log and data):
            for i, f in enumerate(sorted(files)):
                t = when + i if in_log else when
                os.utime(os.path.join(root, f), (t, t))


def last_checkpoint_version(table: Path) -> int:
    return json.loads((table / "_delta_log" / "_last_checkpoint").read_text())["version"]


def small_table(path: Path, commits: int = 2, configuration: dict | None = None) -> Path:
    for i in range(commits):
        write_arrow(
            path,
            pa.table({"id": pa.array([2 * i, 2 * i + 1], pa.int64())}),
            configuration=configuration,
        )
    return path


# --------------------------------------------------------------------------- definitions
def test_definitions_load_and_every_name_is_prefixed(tmp_path):
    defs = build_delta_maintenance_defs(
        [
            DeltaTableTarget("orders", str(tmp_path / "orders"), enable_row_tracking=True),
            DeltaTableTarget("events", str(tmp_path / "events")),
        ],
        name="lake",
        row_tracking_cron="0 4 * * 0",
    )
    dg.Definitions.validate_loadable(defs)
    repo = defs.get_repository_def()
    one_per_operation = {f"lake_{op.name}_job" for op in OPERATIONS.values()}
    assert {"lake_checkpoint_job", "lake_cleanup_job", "lake_compact_job"} <= one_per_operation
    assert {j.name for j in repo.get_all_jobs() if not j.name.startswith("__")} == (
        one_per_operation | {"lake_maintenance_assets_job", "lake_maintenance_job"}
    )
    assert {s.name for s in repo.schedule_defs} == {
        "lake_maintenance_schedule",
        "lake_row_tracking_schedule",
    }
    assert {s.name for s in repo.sensor_defs} == {"lake_commit_sensor", "lake_run_failure_sensor"}
    assert set(defs.resources) == {"lake_delta_maintenance"}
    ops = {a.node_def.name for a in defs.assets if isinstance(a, dg.AssetsDefinition)}
    assert ops == {
        "lake__orders__maintenance",
        "lake__events__maintenance",
        "lake__operation_history",
    }
    assert {c.node_def.name for c in defs.asset_checks} == {
        "lake__orders__health",
        "lake__events__health",
    }
    graph = defs.resolve_asset_graph()
    for table in ("orders", "events"):
        for action in ACTIONS:
            key = action_key(table, action, fleet="lake")
            if action == "enable_row_tracking" and table == "events":
                # row tracking is not enabled there: no node that would never run
                assert not graph.has(key)
                continue
            assert graph.get(key).parent_keys == {dg.AssetKey(["lake", table])}
    # nothing starts by itself: every schedule and sensor is STOPPED until turned on
    assert {s.default_status for s in repo.schedule_defs} == {dg.DefaultScheduleStatus.STOPPED}
    assert {s.default_status for s in repo.sensor_defs} == {dg.DefaultSensorStatus.STOPPED}


def test_start_automation_turns_the_daily_schedule_and_the_sensors_on(tmp_path):
    defs = build_delta_maintenance_defs(
        [DeltaTableTarget("orders", str(tmp_path / "orders"))],
        name="lake",
        row_tracking_cron="0 4 * * 0",
        start_automation=True,
    )
    repo = defs.get_repository_def()
    status = {s.name: s.default_status for s in repo.schedule_defs}
    assert status == {
        "lake_maintenance_schedule": dg.DefaultScheduleStatus.RUNNING,
        "lake_row_tracking_schedule": dg.DefaultScheduleStatus.STOPPED,  # always opt-in
    }
    assert {s.default_status for s in repo.sensor_defs} == {dg.DefaultSensorStatus.RUNNING}


def test_two_fleets_merge_into_one_code_location(tmp_path):
    a = build_delta_maintenance_defs(
        [DeltaTableTarget("orders", str(tmp_path / "orders"))], name="a"
    )
    b = build_delta_maintenance_defs(
        [
            DeltaTableTarget("events", str(tmp_path / "events")),
            DeltaTableTarget("users", str(tmp_path / "users")),
        ],
        name="b",
        translator=DeltaMaintenanceTranslator(key_prefix=("b_maintenance",)),
    )
    merged = dg.Definitions.merge(a, b)
    dg.Definitions.validate_loadable(merged)
    repo = merged.get_repository_def()
    names = {j.name for j in repo.get_all_jobs() if not j.name.startswith("__")}
    jobs_per_fleet = len(OPERATIONS) + 2  # one per operation, the assets job, the maintenance job
    assert len(names) == 2 * jobs_per_fleet and all(n.startswith(("a_", "b_")) for n in names)
    assert {s.name for s in repo.sensor_defs} == {
        "a_commit_sensor",
        "a_run_failure_sensor",
        "b_commit_sensor",
        "b_run_failure_sensor",
    }
    assert {s.name for s in repo.schedule_defs} == {
        "a_maintenance_schedule",
        "b_maintenance_schedule",
    }
    assert set(merged.resources) == {"a_delta_maintenance", "b_delta_maintenance"}
    keys = set(merged.resolve_asset_graph().get_all_asset_keys())
    assert (
        action_key("orders", "vacuum", fleet="a") in keys
        and action_key("events", "vacuum", ("b_maintenance",)) in keys
    )
    # each fleet's asset job selects only its own tables
    a_job = merged.resolve_job_def("a_maintenance_assets_job")
    assert {k for k in a_job.asset_layer.selected_asset_keys} == {
        action_key("orders", x, fleet="a") for x in ACTIONS if x != "enable_row_tracking"
    }


def test_a_warehouse_root_is_discovered(tmp_path):
    warehouse = tmp_path / "warehouse"
    small_table(warehouse / "events", commits=1)
    small_table(warehouse / "sales" / "orders", commits=1)
    small_table(warehouse / "a" / "b" / "too_deep", commits=1)
    (warehouse / "not_a_table").mkdir()
    defs = build_delta_maintenance_defs(str(warehouse), name="w")
    dg.Definitions.validate_loadable(defs)
    keys = set(defs.resolve_asset_graph().get_all_asset_keys())
    assert {k for k in keys if len(k.path) == 2} == {
        dg.AssetKey(["w", "events"]),
        dg.AssetKey(["w", "sales__orders"]),
    }
    result = run_assets(defs, "w", selection=[action_key("sales__orders", "checkpoint", fleet="w")])
    assert (
        result.success
        and materializations(result)[action_key("sales__orders", "checkpoint", fleet="w")][
            "version"
        ]
        == 0
    )
    assert (
        warehouse / "sales" / "orders" / "_delta_log" / f"{0:020d}.checkpoint.parquet"
    ).is_file()


def test_same_table_name_in_two_fleets(tmp_path):
    a = build_delta_maintenance_defs(
        [DeltaTableTarget("events", str(tmp_path / "wh1" / "events"))], name="a"
    )
    b = build_delta_maintenance_defs(
        [DeltaTableTarget("events", str(tmp_path / "wh2" / "events"))], name="b"
    )
    dg.Definitions.validate_loadable(dg.Definitions.merge(a, b))


def test_names_equal_after_sanitising_are_refused_clearly(tmp_path):
    with pytest.raises(ValueError, match="my.table"):
        build_delta_maintenance_defs(
            [
                DeltaTableTarget("my-table", str(tmp_path / "1")),
                DeltaTableTarget("my_table", str(tmp_path / "2")),
            ],
            name="x",
        )


def test_pools_and_retry_policy_per_table(tmp_path):
    names = ["orders", "events", "web-clicks"]
    defs = build_delta_maintenance_defs(
        [DeltaTableTarget(n, str(tmp_path / n)) for n in names], name="p"
    )
    by_op = {
        a.node_def.name: a
        for a in defs.assets
        if isinstance(a, dg.AssetsDefinition) and a.node_def.name.endswith("__maintenance")
    }
    pools = {name: a.op.pool for name, a in by_op.items()}
    assert pools == {
        "p__orders__maintenance": "p/orders",
        "p__events__maintenance": "p/events",
        "p__web_clicks__maintenance": "p/web_clicks",
    }
    for a in by_op.values():
        assert a.can_subset
        assert a.op.retry_policy is not None and a.op.retry_policy.max_retries >= 1
        assert a.op.retry_policy.backoff == dg.Backoff.EXPONENTIAL
        assert all(spec.skippable for spec in a.specs)


# ---------------------------------------------------------------------------- translator
@dataclass
class LakeTranslator(DeltaMaintenanceTranslator):
    key_prefix: Sequence[str] = ("lake", "maintenance")
    group_name: str | None = "lake_ops"
    owners: Sequence[str] = ("team:data-platform", "ops@example.com")


EVENTS_KEY = dg.AssetKey(["warehouse", "events"])


def test_a_lake_is_grouped_by_folder_with_each_tables_owners(tmp_path):
    """Thousands of maintenance nodes in one group are unfindable (issue 45.4): a discovered
    table's assets are grouped by the warehouse folder it is in, and carry its owners."""
    warehouse = tmp_path / "lake"
    for name in ("events", "sales/orders", "sales/refunds", "hr/people"):
        small_table(warehouse / name)
    defs = build_delta_maintenance_defs(str(warehouse), name="lake")
    graph = defs.resolve_asset_graph()
    groups = {
        key.path[-2]: graph.get(key).group_name
        for key in graph.get_all_asset_keys()
        if key.path[-1] == "vacuum"
    }
    assert groups == {
        "events": "delta_maintenance",
        "sales__orders": "delta_maintenance__sales",
        "sales__refunds": "delta_maintenance__sales",
        "hr__people": "delta_maintenance__hr",
    }
    owned = DeltaTableTarget("orders", str(warehouse / "sales/orders"), owners=("team:sales",))
    spec = DeltaMaintenanceTranslator().get_action_spec(owned, "vacuum")
    assert spec.owners == ["team:sales"]
    flat = build_delta_maintenance_defs(
        str(warehouse), name="flat", translator=DeltaMaintenanceTranslator(group_by_folder=False)
    )
    assert {
        flat.resolve_asset_graph().get(k).group_name
        for k in flat.resolve_asset_graph().get_all_asset_keys()
        if k.path[-1] == "vacuum"
    } == {"delta_maintenance"}


@dg.asset(key=EVENTS_KEY, group_name="pipeline")
def user_events() -> None:
    """The user's own asset that writes the table."""


def test_translator_maps_maintenance_onto_the_users_asset_graph(tmp_path):
    table = small_table(tmp_path / "events")
    maintenance = build_delta_maintenance_defs(
        [DeltaTableTarget("events", str(table), asset_key=EVENTS_KEY)],
        name="t",
        translator=LakeTranslator(),
    )
    defs = dg.Definitions.merge(dg.Definitions(assets=[user_events]), maintenance)
    dg.Definitions.validate_loadable(defs)
    graph = defs.resolve_asset_graph()
    keys = set(graph.get_all_asset_keys())
    # no external stand-in asset and no default keys: the user's key is the table
    assert dg.AssetKey(["events"]) not in keys
    assert not any(k.path[0] == "delta_maintenance" for k in keys)
    assert (
        graph.get(EVENTS_KEY).is_materializable and graph.get(EVENTS_KEY).group_name == "pipeline"
    )
    for action in (a for a in ACTIONS if a != "enable_row_tracking"):  # (not enabled on it)
        node = graph.get(action_key("events", action, ("lake", "maintenance")))
        assert node.parent_keys == {EVENTS_KEY}
        assert node.group_name == "lake_ops"
        assert set(node.owners) == {"team:data-platform", "ops@example.com"}
    check_keys = {k for k in graph.asset_check_keys if k.asset_key == EVENTS_KEY}
    assert {k.name for k in check_keys} == {
        "checkpoint_lag",
        "log_reconstructible",
        "writer_features_supported",
        "tombstone_backlog",
        "retention_properties_valid",
        "row_tracking_state",
        "small_files",
        "deleted_rows",
        "checksum_agrees",
        "clustering_layout",
    }
    # a run lands on the translated key
    key = action_key("events", "checkpoint", ("lake", "maintenance"))
    result = run_assets(defs, "t", selection=[key])
    assert result.success
    assert materializations(result)[key]["version"] == 1
    checks = run_checks(maintenance)
    assert all(e.asset_key == EVENTS_KEY and e.passed for e in checks.values()), checks


# -------------------------------------------------------------------- materializing assets
def _v2_with_new_commit(tmp_path: Path) -> Path:
    table = fresh_copy("delta-spark/v2-checkpoint-json", tmp_path)
    lb.write_commit(table, 3, [lb.commit_info(timestamp=int(time.time() * 1000))])
    return table


CHECKPOINT_CASES = {
    "simple_table": (lambda tmp: fresh_copy("delta-rs/simple_table", tmp), 4, "classic"),
    "dv_partitioned": (
        lambda tmp: fresh_copy("delta-spark/dv-partitioned-with-checkpoint", tmp),
        15,
        "classic",
    ),
    "v2_json": (_v2_with_new_commit, 3, "v2"),
    "write_arrow": (lambda tmp: small_table(tmp / "arrow", commits=3), 2, "classic"),
}


@pytest.mark.parametrize("case", sorted(CHECKPOINT_CASES))
def test_checkpoint_asset_writes_a_checkpoint_once(tmp_path, case):
    make, version, kind = CHECKPOINT_CASES[case]
    table = make(tmp_path)
    rows_before = deltalake_rows(table)
    protocol_before = load_snapshot(table).protocol
    defs = build_delta_maintenance_defs([DeltaTableTarget("t", str(table))], name="m")
    instance = dg.DagsterInstance.ephemeral()
    first = run_assets(defs, "m", instance=instance)
    assert first.success
    mats = materializations(first)
    # fresh copies: logs are young and no file is older than the retention, so only the checkpoint acts
    assert set(mats) == {action_key("t", "checkpoint", fleet="m")}
    meta = mats[action_key("t", "checkpoint", fleet="m")]
    assert meta["version"] == version and meta["kind"] == kind
    assert isinstance(meta["duration_ms"], int) and isinstance(meta["num_actions"], int)
    written = meta["written"]
    assert written and meta["num_written"] == len(written)
    for name in written:
        assert (table / "_delta_log" / name).is_file(), name
    if kind == "classic":
        assert written == [f"{version:020d}.checkpoint.parquet"]
    else:
        assert any(
            n.startswith(f"{version:020d}.checkpoint.") and n.endswith(".json") for n in written
        )
        assert any(n.startswith("_sidecars/") for n in written)
    assert meta["size_in_bytes"] == sum((table / "_delta_log" / n).stat().st_size for n in written)
    assert last_checkpoint_version(table) == version
    assert load_snapshot(table).segment.checkpoint_version == version
    assert deltalake_files(table)[0] == version and deltalake_rows(table) == rows_before
    assert load_snapshot(table).protocol == protocol_before  # row tracking stays off

    logs_before = log_files(table)
    second = run_assets(defs, "m", instance=instance)
    assert second.success and materializations(second) == {}
    assert log_files(table) == logs_before
    messages = [e.user_message for e in instance.all_logs(second.run_id)]
    assert any(
        f"checkpoint skipped: version {version} already has a checkpoint" in m for m in messages
    ), messages
    # the skip is in the asset's history as an observation with the reason
    observations = [
        e.asset_observation_data.asset_observation
        for e in second.all_events
        if e.event_type_value == "ASSET_OBSERVATION"
    ]
    reasons = {o.asset_key.path[-1]: o.metadata["skipped"].value for o in observations}
    assert f"version {version} already has a checkpoint" in reasons["checkpoint"]
    skipped = next(o.metadata for o in observations if o.asset_key.path[-1] == "checkpoint")
    assert skipped["table_version"].value == version  # a skip still records the table's state
    # row counts come from the files' stats; a table whose stats lack numRecords has none
    state = load_snapshot(table)
    if state.num_records is None:
        assert "dagster/row_count" not in skipped
    else:
        assert skipped["dagster/row_count"].value == len(rows_before)


def test_the_readable_twin_of_a_time_keeps_its_milliseconds():
    """Issue 51.6: `now_ms` 1691426735372 reads as 16:45:35.372, not 16:45:35."""

    @dataclass(frozen=True)
    class Asked:
        now_ms: int
        retention_ms: int

    meta = result_metadata(Asked(now_ms=1_691_426_735_372, retention_ms=1500))
    # a time is a timestamp (the UI shows it in the viewer's zone), to the millisecond
    assert isinstance(meta["now"], dg.TimestampMetadataValue)
    assert meta["now"].value == 1_691_426_735.372
    assert meta["retention"].value == "1500 ms"
    assert "now_ms" not in meta and "retention_ms" not in meta  # no raw twin beside them


def test_vacuum_asset_metadata_matches_what_left_the_disk(tmp_path):
    table = fresh_copy("delta-spark/dv-partitioned-with-checkpoint", tmp_path)
    age(table, 8)  # past the default 7-day delta.deletedFileRetentionDuration
    (table / "part=1" / "orphan-old.parquet").write_bytes(b"o" * 321)
    (table / "orphan-young.parquet").write_bytes(b"y" * 100)
    old = time.time() - 8 * DAY_S
    os.utime(table / "part=1" / "orphan-old.parquet", (old, old))
    young = time.time() - 6 * DAY_S
    os.utime(table / "orphan-young.parquet", (young, young))
    before = data_files(table)
    live = set(deltalake_files(table)[1])
    rows = deltalake_rows(table)
    version_before = load_snapshot(table).version
    log_files_before = len(load_snapshot(table).segment.listing)

    defs = build_delta_maintenance_defs([DeltaTableTarget("dv", str(table))], name="v")
    instance = dg.DagsterInstance.ephemeral()
    result = run_assets(
        defs, "v", selection=[action_key("dv", "vacuum", fleet="v")], instance=instance
    )
    assert result.success
    # the library's own log lines reach the run's event log, naming their table
    messages = [e.user_message for e in instance.all_logs(result.run_id)]
    assert any(
        f"delta_ops.table.transaction: {table}: committed VACUUM START as version"
        f" {version_before + 1}" in m
        for m in messages
    ), messages
    meta = materializations(result)[action_key("dv", "vacuum", fleet="v")]
    after = data_files(table)
    gone = set(before) - set(after)
    assert set(after) <= set(before)
    assert "part=1/orphan-old.parquet" in gone and "orphan-young.parquet" in after
    assert live <= set(after), "a live file was vacuumed"
    assert meta["num_deleted"] == len(gone) > 1
    assert meta["bytes"] == sum(before[p] for p in gone)
    assert set(meta["deleted"]) == gone
    # a duration reads as one: no raw milliseconds beside it
    assert meta["retention"] == "7 days" and "retention_ms" not in meta
    assert (meta["dagster/uri"], meta["dagster/table_name"]) == (str(table), "dv")
    assert meta["commits"] == [version_before + 1, version_before + 2]  # VACUUM START / END
    assert deltalake_rows(table) == rows
    # the table's state the vacuum was planned on, as numbers the UI plots over time
    snapshot = load_snapshot(table, version_before)
    assert meta["dagster/row_count"] == len(rows)  # rows a reader sees: DVs applied
    assert meta["table_version"] == version_before
    assert meta["table_files"] == snapshot.num_files
    assert meta["table_bytes"] == snapshot.size_bytes
    assert meta["log_files"] == log_files_before
    assert isinstance(meta["duration_s"], float)


def test_log_cleanup_asset_deletes_expired_log_files(tmp_path):
    table = fresh_copy("delta-spark/dv-partitioned-with-checkpoint", tmp_path)
    age(table, 40, log=True, data=False)  # past the 30-day delta.logRetentionDuration
    before = log_files(table)
    rows = deltalake_rows(table)
    defs = build_delta_maintenance_defs([DeltaTableTarget("dv", str(table))], name="c")
    result = run_assets(
        defs,
        "c",
        selection=[
            action_key("dv", "checkpoint", fleet="c"),
            action_key("dv", "cleanup", fleet="c"),
        ],
    )
    assert result.success
    mats = materializations(result)
    assert mats[action_key("dv", "checkpoint", fleet="c")]["version"] == 15
    meta = mats[action_key("dv", "cleanup", fleet="c")]
    gone = before - log_files(table)
    assert meta["num_deleted"] == len(gone) > 0
    assert set(meta["deleted"]) == gone
    assert f"{15:020d}.checkpoint.parquet" in log_files(table) and f"{15:020d}.json" in log_files(
        table
    )
    assert deltalake_files(table)[0] == 15 and deltalake_rows(table) == rows


def test_row_tracking_asset_acts_only_on_opted_in_tables(tmp_path):
    on = small_table(tmp_path / "on")
    off = small_table(tmp_path / "off")
    for t in (on, off):
        snap = load_snapshot(t)
        assert not snap.protocol.supports("rowTracking") and not snap.properties.enable_row_tracking
    off_protocol = load_snapshot(off).protocol
    defs = build_delta_maintenance_defs(
        [
            DeltaTableTarget("on", str(on), enable_row_tracking=True),
            DeltaTableTarget("off", str(off)),
        ],
        name="r",
    )
    # the table without row tracking enabled has no row_tracking asset at all (at a lake's
    # size, one never-running node per table)
    assert not defs.resolve_asset_graph().has(action_key("off", "enable_row_tracking", fleet="r"))
    selection = [action_key("on", "enable_row_tracking", fleet="r")]
    result = run_assets(defs, "r", selection=selection)
    assert result.success
    mats = materializations(result)
    assert set(mats) == {action_key("on", "enable_row_tracking", fleet="r")}
    meta = mats[action_key("on", "enable_row_tracking", fleet="r")]
    assert meta["files_backfilled"] == 2 and meta["protocol_upgrade_version"] == 2
    snap = load_snapshot(on)
    assert snap.protocol.supports("rowTracking") and snap.properties.enable_row_tracking
    assert snap.files.column("baseRowId").null_count == 0
    assert meta["property_commit_version"] == snap.version
    assert (
        load_snapshot(off).protocol == off_protocol
        and not load_snapshot(off).properties.enable_row_tracking
    )
    assert load_snapshot(off).version == 1
    again = run_assets(defs, "r", selection=selection)
    assert again.success and materializations(again) == {}


# ------------------------------------------------------------------------ failures, retries
def test_protocol_error_fails_once_without_retry(tmp_path):
    table = tmp_path / "ict"
    lb.write_commit(
        table,
        0,
        [
            lb.protocol(3, 7, reader_features=[], writer_features=["redirectWriterOnly-preview"]),
            lb.metadata(),
            lb.add("a.parquet"),
        ],
    )
    defs = build_delta_maintenance_defs([DeltaTableTarget("ict_table", str(table))], name="f")
    result = run_assets(defs, "f", selection=[action_key("ict_table", "checkpoint", fleet="f")])
    assert not result.success
    # one failure and no retry, told by the run's events (never by its duration)
    types = [e.event_type_value for e in result.all_events]
    assert (
        types.count("STEP_FAILURE") == 1
        and "STEP_UP_FOR_RETRY" not in types
        and "STEP_RESTARTED" not in types
    )
    [failure] = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    message = failure.step_failure_data.error.message
    assert "ict_table: checkpoint failed" in message and "redirectWriterOnly-preview" in message
    assert not list((table / "_delta_log").glob("*.checkpoint*"))


FLAKY_CALLS = []


class FlakyResource(DeltaMaintenanceResource):
    """Fails the first checkpoint with a storage error, as a dropped connection would."""

    def run(self, operation, url, options=None, **kwargs):
        FLAKY_CALLS.append(operation)
        if len(FLAKY_CALLS) == 1:
            raise OSError("connection reset by peer")
        return super().run(operation, url, options, **kwargs)


def test_transient_storage_error_is_retried(tmp_path):
    FLAKY_CALLS.clear()
    table = small_table(tmp_path / "t")
    defs = build_delta_maintenance_defs(
        [DeltaTableTarget("t", str(table))], name="r", resource=FlakyResource()
    )
    result = run_assets(defs, "r", selection=[action_key("t", "checkpoint", fleet="r")])
    assert result.success
    types = [e.event_type_value for e in result.all_events]
    assert types.count("STEP_UP_FOR_RETRY") == 1 and "STEP_FAILURE" not in types
    assert materializations(result)[action_key("t", "checkpoint", fleet="r")]["version"] == 1
    assert last_checkpoint_version(table) == 1


# ----------------------------------------------------------------------------- asset checks
def _lagging(path: Path, interval: int, commits: int) -> Path:
    lb.write_commit(
        path,
        0,
        [
            lb.protocol(),
            lb.metadata({"delta.checkpointInterval": str(interval)}),
            lb.add("f0.parquet"),
        ],
    )
    for v in range(1, commits):
        lb.write_commit(path, v, [lb.add(f"f{v}.parquet")])
    return path


def _build_check_tables(tmp: Path) -> dict[str, Path]:
    from delta_ops.ops.checkpoint import checkpoint

    tables = {}
    healthy = small_table(tmp / "healthy", commits=3)
    checkpoint(str(healthy))
    tables["healthy"] = healthy
    tables["lag_under_interval"] = _lagging(tmp / "lag_under_interval", interval=3, commits=2)
    tables["lag_warn"] = _lagging(tmp / "lag_warn", interval=2, commits=4)
    tables["lag_error"] = _lagging(tmp / "lag_error", interval=1, commits=11)
    ict = tmp / "ict"
    lb.write_commit(
        ict,
        0,
        [
            lb.protocol(3, 7, reader_features=[], writer_features=["redirectWriterOnly-preview"]),
            lb.metadata(),
            lb.add("a.parquet"),
        ],
    )
    tables["ict"] = ict
    tomb = tmp / "tomb"
    lb.write_commit(
        tomb,
        0,
        [
            lb.protocol(),
            lb.metadata(),
            lb.add("a.parquet"),
            lb.add("b.parquet", size=1234),
            lb.add("c.parquet", size=66),
        ],
    )
    lb.write_commit(
        tomb,
        1,
        [
            lb.remove("b.parquet", size=1234),
            lb.remove("c.parquet", size=66, deletion_timestamp=int(time.time() * 1000)),
        ],
    )
    # b's file is still there and as old as its tombstone: vacuum would delete it
    (tomb / "b.parquet").write_bytes(b"b" * 1234)
    os.utime(tomb / "b.parquet", (1_700_000_000, 1_700_000_000))
    (tomb / "c.parquet").write_bytes(b"c" * 66)
    tables["tomb"] = tomb
    # the same log, copied: its files are fresh, so vacuum deletes nothing and nothing warns
    copied = tmp / "tomb_copied"
    shutil.copytree(tomb, copied, copy_function=shutil.copy)  # fresh mtimes, as a copy has
    tables["tomb_copied"] = copied
    # and once vacuum deleted b's file, its tombstone (kept until a checkpoint) is no backlog
    vacuumed = tmp / "tomb_vacuumed"
    shutil.copytree(tomb, vacuumed, copy_function=shutil.copy2)
    (vacuumed / "b.parquet").unlink()
    tables["tomb_vacuumed"] = vacuumed
    ret = tmp / "ret"
    lb.write_commit(
        ret,
        0,
        [
            lb.protocol(),
            lb.metadata(
                {
                    "delta.logRetentionDuration": "interval 1 days",
                    "delta.deletedFileRetentionDuration": "interval 7 days",
                }
            ),
            lb.add("a.parquet"),
        ],
    )
    tables["ret"] = ret
    bad = tmp / "bad"
    lb.write_commit(bad, 0, [lb.protocol(), lb.metadata(), lb.add("a.parquet")])
    (bad / "_delta_log" / f"{1:020d}.json").write_text('{"add": {"path": "x.parquet", \n')
    tables["bad"] = bad
    rt = tmp / "rt"
    lb.write_commit(
        rt,
        0,
        [
            lb.protocol(1, 7, writer_features=["rowTracking", "domainMetadata"]),
            lb.metadata(),
            lb.add("a.parquet"),
        ],
    )
    tables["rt_backfill_pending"] = rt
    small = tmp / "small"
    adds = [lb.add(f"s{i:03d}.parquet", size=10, part="p") for i in range(60)]
    lb.write_commit(small, 0, [lb.protocol(), lb.metadata(partition_columns=["part"]), *adds])
    tables["small"] = small
    deleted = tmp / "deleted"
    from delta_ops.protocol.deletion_vectors import inline_descriptor

    dv = inline_descriptor([1, 2, 3]).to_dict()
    lb.write_commit(
        deleted,
        0,
        [
            lb.protocol(
                3, 7, reader_features=["deletionVectors"], writer_features=["deletionVectors"]
            ),
            lb.metadata(),
            lb.add("a.parquet", num_records=10, dv=dv),
        ],
    )
    tables["deleted"] = deleted
    # a checksum that says 2 files where the log has 1: the log or the checksum was changed
    tampered = tmp / "corrupt_checksum"
    lb.write_commit(tampered, 0, [lb.protocol(), lb.metadata(), lb.add("a.parquet", size=10)])
    checksum = checksum_of_snapshot(load_snapshot(tampered))
    (tampered / "_delta_log" / checksum.file_name).write_bytes(
        replace(checksum, num_files=2).to_json()
    )
    tables["corrupt_checksum"] = tampered
    # an older writer's checksum: the counts only, which agree with the log
    legacy = tmp / "legacy_checksum"
    lb.write_commit(legacy, 0, [lb.protocol(), lb.metadata(), lb.add("a.parquet", size=10)])
    counts = {"tableSizeBytes": 10, "numFiles": 1, "numMetadata": 1, "numProtocol": 1}
    (legacy / "_delta_log" / f"{0:020d}.crc").write_text(
        json.dumps({**counts, "numTransactions": 0})
    )
    tables["legacy_checksum"] = legacy
    # liquid clustering by `id`, and 60 files not clustered yet (no tags)
    clustered = tmp / "clustered"
    adds = [lb.add(f"c{i:03d}.parquet", size=10**9) for i in range(60)]
    domain = {
        "domainMetadata": {
            "domain": "delta.clustering",
            "configuration": '{"clusteringColumns":[["id"]]}',
            "removed": False,
        }
    }
    writer = ["clustering", "domainMetadata"]
    lb.write_commit(
        clustered, 0, [lb.protocol(1, 7, writer_features=writer), lb.metadata(), domain, *adds]
    )
    tables["clustered"] = clustered
    return tables


@pytest.fixture(scope="module")
def check_results(tmp_path_factory):
    tables = _build_check_tables(tmp_path_factory.mktemp("checks"))
    defs = build_delta_maintenance_defs(
        [DeltaTableTarget(n, str(p)) for n, p in tables.items()], name="h"
    )
    results = run_checks(defs)
    assert len(results) == len(CHECK_NAMES) * len(tables)
    return {(key.path[-1], check): e for (key, check), e in results.items()}


CHECK_NAMES = (
    "checkpoint_lag",
    "log_reconstructible",
    "writer_features_supported",
    "tombstone_backlog",
    "retention_properties_valid",
    "row_tracking_state",
    "small_files",
    "deleted_rows",
    "checksum_agrees",
    "clustering_layout",
)


def failed(check_results, table: str) -> dict[str, dg.AssetCheckSeverity]:
    return {
        c: check_results[(table, c)].severity
        for c in CHECK_NAMES
        if not check_results[(table, c)].passed
    }


def meta(check_results, table: str, check: str) -> dict:
    return {k: v.value for k, v in check_results[(table, check)].metadata.items()}


def test_checks_pass_on_a_healthy_checkpointed_table(check_results):
    assert failed(check_results, "healthy") == {}
    assert meta(check_results, "healthy", "checkpoint_lag") == {
        "commits_since_checkpoint": 0,
        "checkpoint_interval": 10,
        "version": 2,
    }
    assert meta(check_results, "healthy", "tombstone_backlog") == {
        "expired_tombstones": 0,
        "reclaimable_bytes": 0,
    }


def test_checkpoint_lag_warns_then_errors(check_results):
    # passes under the interval; at it a checkpoint is due (the sensor's and planner's rule)
    assert failed(check_results, "lag_under_interval") == {}
    assert failed(check_results, "lag_warn") == {"checkpoint_lag": dg.AssetCheckSeverity.WARN}
    assert meta(check_results, "lag_warn", "checkpoint_lag") == {
        "commits_since_checkpoint": 4,
        "checkpoint_interval": 2,
        "version": 3,
    }
    # (its 11 one-file commits are also 11 small files: a compaction is due there too)
    assert failed(check_results, "lag_error") == {
        "checkpoint_lag": dg.AssetCheckSeverity.ERROR,
        "small_files": dg.AssetCheckSeverity.WARN,
    }
    assert meta(check_results, "lag_error", "checkpoint_lag")["commits_since_checkpoint"] == 11


def test_unsupported_writer_feature_is_an_error(check_results):
    assert failed(check_results, "ict") == {
        "writer_features_supported": dg.AssetCheckSeverity.ERROR
    }
    assert meta(check_results, "ict", "writer_features_supported") == {
        "unsupported": "redirectWriterOnly-preview"
    }


def test_expired_tombstones_warn_with_reclaimable_bytes(check_results):
    assert failed(check_results, "tomb") == {"tombstone_backlog": dg.AssetCheckSeverity.WARN}
    # the fresh tombstone of c.parquet is inside the retention and not counted
    assert meta(check_results, "tomb", "tombstone_backlog") == {
        "expired_tombstones": 1,
        "reclaimable_bytes": 1234,
    }


def test_tombstones_whose_files_vacuum_would_not_delete_do_not_warn(check_results):
    for name in ("tomb_copied", "tomb_vacuumed"):
        assert "tombstone_backlog" not in failed(check_results, name), name
        assert meta(check_results, name, "tombstone_backlog") == {
            "expired_tombstones": 0,
            "reclaimable_bytes": 0,
        }


def test_log_retention_shorter_than_file_retention_is_an_error(check_results):
    assert failed(check_results, "ret") == {
        "retention_properties_valid": dg.AssetCheckSeverity.ERROR
    }
    assert meta(check_results, "ret", "retention_properties_valid") == {
        "log_retention_hours": 24.0,
        "deleted_file_retention_hours": 168.0,
    }


def test_row_tracking_without_row_ids_warns(check_results):
    assert failed(check_results, "rt_backfill_pending") == {
        "row_tracking_state": dg.AssetCheckSeverity.WARN
    }
    assert meta(check_results, "rt_backfill_pending", "row_tracking_state") == {
        "row_tracking": "supported",
        "files_without_row_ids": 1,
    }


def test_unreadable_log_fails_every_check_as_error(check_results):
    assert failed(check_results, "bad") == {c: dg.AssetCheckSeverity.ERROR for c in CHECK_NAMES}
    for c in CHECK_NAMES:
        error = meta(check_results, "bad", c)["error"]
        assert f"{1:020d}.json" in error and "malformed JSON" in error


def test_a_clustered_table_with_unclustered_files_warns(check_results):
    assert failed(check_results, "clustered") == {"clustering_layout": dg.AssetCheckSeverity.WARN}
    assert meta(check_results, "clustered", "clustering_layout") == {
        "clustering_columns": "id",
        "files": 60,
        "unclustered_files": 60,
        "unskippable_share": 1.0,  # no stats: no file can be skipped
        "threshold": 50,
    }
    assert meta(check_results, "healthy", "clustering_layout") == {"status": "not clustered"}


def test_small_files_and_deleted_rows_warn_with_the_numbers(check_results):
    assert failed(check_results, "small") == {"small_files": dg.AssetCheckSeverity.WARN}
    # the compaction rule's threshold (delta_ops.service.due.COMPACT_MIN_FILES)
    assert meta(check_results, "small", "small_files") == {"small_files": 60, "threshold": 10}
    assert failed(check_results, "deleted") == {"deleted_rows": dg.AssetCheckSeverity.WARN}
    assert meta(check_results, "deleted", "deleted_rows") == {
        "deleted_records": 3,
        "deleted_ratio": 0.3,
        "threshold": 0.1,
    }


def test_a_checksum_that_disagrees_with_the_log_is_an_error(check_results):
    assert failed(check_results, "corrupt_checksum") == {
        "checksum_agrees": dg.AssetCheckSeverity.ERROR
    }
    found = meta(check_results, "corrupt_checksum", "checksum_agrees")
    assert found["status"] == "disagrees" and found["file"] == f"{0:020d}.crc"
    assert "numFiles: the checksum says 2, the replay 1" in found["mismatches"]
    # a table without a checksum, and one whose checksum agrees, pass
    assert meta(check_results, "healthy", "checksum_agrees")["status"] in ("missing", "agrees")


def test_an_older_writers_checksum_that_agrees_passes(check_results):
    """Counts only, no metadata or protocol (issue 51.1): checked on what it has."""
    assert "checksum_agrees" not in failed(check_results, "legacy_checksum")
    found = meta(check_results, "legacy_checksum", "checksum_agrees")
    assert found["status"] == "agrees" and found["absent"] == "metadata, protocol"


def test_a_build_makes_each_spec_once_and_keeps_a_translators_overrides(tmp_path: Path) -> None:
    """The factory asks the translator once per table (and action): a 1,000-table lake made
    21,000 AssetSpecs where 5,000 differ. A subclass's overrides are still what every part of
    the build (asset, checks, job selection) uses."""
    calls: Counter[str] = Counter()

    class Owned(DeltaMaintenanceTranslator):
        def get_asset_spec(self, table: DeltaTableTarget) -> dg.AssetSpec:
            calls[f"asset {table.name}"] += 1
            return super().get_asset_spec(table).replace_attributes(owners=["team:data"])

        def get_action_spec(self, table: DeltaTableTarget, action: str) -> dg.AssetSpec:
            calls[f"{action} {table.name}"] += 1
            return super().get_action_spec(table, action)

    tables = [DeltaTableTarget(n, str(tmp_path / n)) for n in ("orders", "users")]
    defs = build_delta_maintenance_defs(tables, name="o", translator=Owned())
    dg.Definitions.validate_loadable(defs)
    assert calls and set(calls.values()) == {1}, calls
    graph = defs.resolve_asset_graph()
    table_key = dg.AssetKey(["orders"])
    assert graph.get(table_key).owners == ["team:data"]
    checked = {k.asset_key for k in graph.asset_check_keys}
    assert table_key in checked
