"""The maintenance op jobs (typed config, UI launches), executed in process on fixture copies."""

import json
import os
import time
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pytest

from delta_ops.dagster import DeltaTableTarget, build_delta_maintenance_defs
from delta_ops.table.snapshot import load_snapshot
from delta_ops.table.writer import write_arrow
from tests.support import deltalake_files, deltalake_rows, fresh_copy, is_hadoop_checksum

DAY_S = 86_400
NAME = "ops"


# --------------------------------------------------------------------------------- helpers
def age(table: Path, days: float, *, log: bool) -> None:
    """Move data files (or log files) `days` into the past; log files keep their order in time,
    one second apart, as a real log's do (equal times would not make checkpoints flush points)."""
    when = time.time() - days * DAY_S
    for root, _, files in os.walk(table):
        if ("_delta_log" in Path(root).relative_to(table).parts) == log:
            for i, f in enumerate(sorted(files)):
                t = when + i if log else when
                os.utime(os.path.join(root, f), (t, t))


def tree(root: Path) -> dict[str, tuple]:
    """Every file and directory under `root` with its size and mtime: a dry run changes none.
    The fleet's operation history (`_delta_ops_history`, which records every run, a failed
    one too) is left out."""
    out = {}
    for current, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != "_delta_ops_history"]
        for d in dirs:
            out[os.path.relpath(os.path.join(current, d), root) + "/"] = ()
        for f in files:
            st = os.stat(os.path.join(current, f))
            out[os.path.relpath(os.path.join(current, f), root)] = (st.st_size, st.st_mtime_ns)
    return out


def data_files(table: Path) -> dict[str, int]:
    """The table's files outside the log (Hadoop's checksum sidecars, which go with their
    files, are not the table's)."""
    return {
        k: v[0]
        for k, v in tree(table).items()
        if v and not k.startswith("_delta_log/") and not is_hadoop_checksum(Path(k).name)
    }


def log_files(table: Path) -> set[str]:
    return {
        p.name
        for p in (table / "_delta_log").iterdir()
        if p.is_file() and not is_hadoop_checksum(p.name)
    }


def observations(result: dg.ExecuteInProcessResult) -> dict[str, dict]:
    out = {}
    for event in result.get_asset_observation_events():
        obs = event.asset_observation_data.asset_observation
        key = obs.asset_key.path[-1]  # the table name (its key is <fleet>/<table>)
        assert key not in out, f"two observations of {key}"
        out[key] = {k: v.value for k, v in obs.metadata.items()}
    return out


def run(
    defs: dg.Definitions, action: str, config: dict | None = None, **kwargs
) -> dg.ExecuteInProcessResult:
    job = defs.resolve_job_def(f"{NAME}_{action}_job")
    run_config = {"ops": {f"{NAME}_{action}": {"config": config or {}}}}
    return job.execute_in_process(
        run_config=run_config,
        instance=kwargs.pop("instance", None) or dg.DagsterInstance.ephemeral(),
        raise_on_error=False,
        **kwargs,
    )


def failure_messages(result: dg.ExecuteInProcessResult) -> list[str]:
    return [
        e.step_failure_data.error.message
        for e in result.all_events
        if e.event_type_value == "STEP_FAILURE"
    ]


@pytest.fixture
def fleet(tmp_path):
    """simple: 5 commits, no checkpoint. dv: checkpoint at 10 of 15, data 8 days old, log 40 days old.
    arrow: two commits written by delta-ops, no row tracking."""
    simple = fresh_copy("delta-rs/simple_table", tmp_path)
    dv = fresh_copy("delta-spark/dv-partitioned-with-checkpoint", tmp_path)
    age(dv, 8, log=False)
    age(dv, 40, log=True)
    arrow = tmp_path / "arrow"
    for i in range(2):
        write_arrow(arrow, pa.table({"id": pa.array([i], pa.int64())}))
    tables = {"simple": simple, "dv": dv, "arrow": arrow}
    defs = build_delta_maintenance_defs(
        [DeltaTableTarget(n, str(p)) for n, p in tables.items()], name=NAME
    )
    return defs, tables


# -------------------------------------------------------------------------------- dry runs
@pytest.mark.parametrize("action", ["checkpoint", "cleanup", "vacuum", "enable_row_tracking"])
def test_dry_run_changes_nothing_and_observes_the_plan(fleet, tmp_path, action):
    defs, tables = fleet
    before = tree(tmp_path)
    result = run(defs, action, {"dry_run": True})
    assert result.success
    assert tree(tmp_path) == before
    obs = observations(result)
    assert set(obs) == {"simple", "dv", "arrow"}
    for meta in obs.values():
        assert meta["action"] == action and meta["dry_run"] is True
    assert result.get_asset_materialization_events() == []  # a plan changes no asset
    dv = obs["dv"]
    if action == "checkpoint":
        assert (
            dv["version"] == 15
            and dv["files"] == [f"{15:020d}.checkpoint.parquet"]
            and "existing" not in dv  # no checkpoint there yet: nothing said, not "None"
        )
        assert obs["simple"]["version"] == 4 and obs["arrow"]["version"] == 1
    elif action == "cleanup":
        # the boundary is the checkpoint at 10: commits 0..9 would go
        assert dv["boundary_checkpoint_version"] == 10
        assert dv["num_deleted"] == 10 and set(dv["deleted"]) == {
            f"{v:020d}.json" for v in range(10)
        }
        assert all((tables["dv"] / "_delta_log" / n).exists() for n in dv["deleted"])
        assert "no readable _last_checkpoint" in obs["simple"]["skipped"]
    elif action == "vacuum":
        assert dv["num_files"] > 0 and dv["bytes"] == sum(f["size"] for f in dv["files"])
        assert all((tables["dv"] / f["path"]).exists() for f in dv["files"])
        assert "nothing to vacuum" in obs["simple"]["skipped"]
    else:
        assert obs["arrow"]["upgrade_protocol"] == "True" and obs["arrow"]["files_to_backfill"] == 2
        assert not load_snapshot(tables["arrow"]).protocol.supports("rowTracking")


# ------------------------------------------------------------------------------- real runs
def test_checkpoint_job_on_selected_tables(fleet):
    defs, tables = fleet
    arrow_log = log_files(tables["arrow"])
    result = run(defs, "checkpoint", {"tables": ["simple", "dv"]})
    assert result.success
    obs = observations(result)
    assert set(obs) == {"simple", "dv"}
    for name, version in (("simple", 4), ("dv", 15)):
        assert obs[name]["version"] == version and obs[name]["dry_run"] is False
        assert obs[name]["written"] == [f"{version:020d}.checkpoint.parquet"]
        assert (tables[name] / "_delta_log" / f"{version:020d}.checkpoint.parquet").is_file()
        assert (
            json.loads((tables[name] / "_delta_log" / "_last_checkpoint").read_text())["version"]
            == version
        )
        assert deltalake_files(tables[name])[0] == version
    assert log_files(tables["arrow"]) == arrow_log
    again = run(defs, "checkpoint", {"tables": ["dv"]})
    assert again.success and "already has a checkpoint" in observations(again)["dv"]["skipped"]


def test_checkpoint_job_writes_a_multi_part_checkpoint_on_request(fleet):
    defs, tables = fleet
    result = run(defs, "checkpoint", {"tables": ["simple"], "parts": 2})
    assert result.success
    meta = observations(result)["simple"]
    expected = [f"{4:020d}.checkpoint.{i:010d}.{2:010d}.parquet" for i in (1, 2)]
    assert meta["kind"] == "multi-part" and meta["written"] == expected
    assert (meta["dagster/uri"], meta["dagster/table_name"]) == (str(tables["simple"]), "simple")
    assert all((tables["simple"] / "_delta_log" / n).is_file() for n in expected)
    assert deltalake_files(tables["simple"])[0] == 4


def test_cleanup_job_deletes_what_it_reports(fleet):
    defs, tables = fleet
    dv = tables["dv"]
    before = log_files(dv)
    rows = deltalake_rows(dv)
    result = run(defs, "cleanup", {"tables": ["dv"]})
    assert result.success
    meta = observations(result)["dv"]
    gone = before - log_files(dv)
    assert gone == {f"{v:020d}.json" for v in range(10)}
    assert meta["num_deleted"] == 10 and set(meta["deleted"]) == gone
    assert meta["boundary_checkpoint_version"] == 10 and meta["oldest_retained_version"] == 10
    assert deltalake_files(dv)[0] == 15 and deltalake_rows(dv) == rows


def test_log_cleanup_retention_config_keeps_young_enough_logs(fleet):
    defs, tables = fleet
    before = log_files(tables["dv"])
    result = run(defs, "cleanup", {"tables": ["dv"], "retention": "60 days"})
    assert result.success
    assert log_files(tables["dv"]) == before
    meta = observations(result)["dv"]
    assert "no complete, readable checkpoint" in meta["skipped"]


def test_vacuum_job_deletes_what_it_reports(fleet):
    defs, tables = fleet
    dv = tables["dv"]
    before = data_files(dv)
    live = set(deltalake_files(dv)[1])
    rows = deltalake_rows(dv)
    result = run(defs, "vacuum", {"tables": ["dv"]})
    assert result.success
    meta = observations(result)["dv"]
    after = data_files(dv)
    gone = set(before) - set(after)
    assert gone and set(after) <= set(before) and live <= set(after)
    assert meta["num_deleted"] == len(gone) and meta["bytes"] == sum(before[p] for p in gone)
    assert set(meta["deleted"]) == gone
    assert deltalake_rows(dv) == rows


def test_vacuum_lite_mode_from_config(fleet):
    defs, tables = fleet
    dv = tables["dv"]
    before = data_files(dv)
    result = run(defs, "vacuum", {"tables": ["dv"], "mode": "lite"})
    assert result.success
    meta = observations(result)["dv"]
    assert meta["mode"] == "lite"
    gone = set(before) - set(data_files(dv))
    assert meta["num_deleted"] == len(gone) and set(meta["deleted"]) == gone


def test_row_tracking_job_enables_it(fleet):
    defs, tables = fleet
    arrow = tables["arrow"]
    instance = dg.DagsterInstance.ephemeral()
    result = run(
        defs, "enable_row_tracking", {"tables": ["arrow"], "batch_files": 1}, instance=instance
    )
    assert result.success
    progress = [e.user_message for e in instance.all_logs(result.run_id)]
    assert any("protocol upgraded for row tracking" in m for m in progress), progress
    meta = observations(result)["arrow"]
    assert (
        meta["files_backfilled"] == 2 and len(meta["backfill_commits"]) == 2
    )  # one commit per file
    snap = load_snapshot(arrow)
    assert snap.protocol.supports("rowTracking") and snap.properties.enable_row_tracking
    assert snap.files.column("baseRowId").null_count == 0
    assert sorted(r["id"] for r in deltalake_rows(arrow)) == [0, 1]


def test_unknown_table_fails_clearly(fleet, tmp_path):
    defs, _ = fleet
    before = tree(tmp_path)
    result = run(defs, "checkpoint", {"tables": ["simple", "nope"]})
    assert not result.success
    [message] = failure_messages(result)
    assert "unknown tables ['nope']" in message and "['arrow', 'dv', 'simple']" in message
    assert tree(tmp_path) == before
    assert observations(result) == {}


def test_vacuum_retention_below_the_table_property_needs_force(fleet, tmp_path):
    defs, tables = fleet
    before = tree(tmp_path)
    result = run(defs, "vacuum", {"tables": ["simple"], "retention": "1 hour"})
    assert not result.success
    types = [e.event_type_value for e in result.all_events]
    assert types.count("STEP_FAILURE") == 1
    assert not {"STEP_UP_FOR_RETRY", "STEP_RESTARTED"} & set(types)
    [failure] = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    assert failure.step_failure_data.user_failure_data is not None  # a dg.Failure, not a crash
    message = failure.step_failure_data.error.message
    assert message.startswith("dagster._core.definitions.events.Failure: simple: vacuum failed")
    assert "delta.deletedFileRetentionDuration" in message and "force" in message.lower()
    assert tree(tmp_path) == before

    # forced, a zero retention deletes the young (tombstoned) files too, never a live one
    simple = tables["simple"]
    live = set(deltalake_files(simple)[1])
    files_before = data_files(simple)
    forced = run(defs, "vacuum", {"tables": ["simple"], "retention": "0 hours", "force": True})
    assert forced.success
    meta = observations(forced)["simple"]
    gone = set(files_before) - set(data_files(simple))
    assert gone and meta["num_deleted"] == len(gone) and set(meta["deleted"]) == gone
    assert set(data_files(simple)) >= live


def test_maintenance_job_runs_checkpoint_then_cleanup_then_vacuum(fleet):
    defs, tables = fleet
    dv = tables["dv"]
    data_before = data_files(dv)
    rows = deltalake_rows(dv)
    job = defs.resolve_job_def(f"{NAME}_maintenance_job")
    result = job.execute_in_process(
        run_config={
            "ops": {
                f"{NAME}_{a}": {"config": {"tables": ["dv"]}}
                for a in ("checkpoint", "cleanup", "vacuum")
            }
        },
        instance=dg.DagsterInstance.ephemeral(),
    )
    assert result.success
    steps = [
        (e.event_type_value, e.step_key)
        for e in result.all_events
        if e.event_type_value in ("STEP_START", "STEP_SUCCESS")
    ]
    assert steps == [
        ("STEP_START", "ops_checkpoint"),
        ("STEP_SUCCESS", "ops_checkpoint"),
        ("STEP_START", "ops_cleanup"),
        ("STEP_SUCCESS", "ops_cleanup"),
        ("STEP_START", "ops_vacuum"),
        ("STEP_SUCCESS", "ops_vacuum"),
    ]
    by_action = {}
    for event in result.get_asset_observation_events():
        obs = event.asset_observation_data.asset_observation
        assert obs.asset_key == dg.AssetKey([NAME, "dv"])
        by_action[obs.metadata["action"].value] = {k: v.value for k, v in obs.metadata.items()}
    assert list(by_action) == ["checkpoint", "cleanup", "vacuum"]
    # each action that changed the table materialized its own maintenance asset, with the
    # metadata the table's observation has (a scheduled run records it on the same page)
    materialized = {
        e.asset_key: e.step_materialization_data.materialization.metadata
        for e in result.get_asset_materialization_events()
    }
    assert list(materialized) == [
        dg.AssetKey(["delta_maintenance", NAME, "dv", a])
        for a in ("checkpoint", "cleanup", "vacuum")
    ]
    for key, meta in materialized.items():
        observed = by_action[key.path[-1]]
        assert {k: v.value for k, v in meta.items()} == {
            k: v for k, v in observed.items() if k not in ("action", "dry_run")
        }
    # the fresh checkpoint at 15 became the cleanup boundary: everything older went
    assert by_action["checkpoint"]["version"] == 15
    assert by_action["cleanup"]["boundary_checkpoint_version"] == 15
    remaining = log_files(dv)
    assert not any(n.endswith(".json") and int(n[:20]) < 15 for n in remaining if n[:20].isdigit())
    gone = set(data_before) - set(data_files(dv))
    assert by_action["vacuum"]["num_deleted"] == len(gone) > 0
    assert deltalake_rows(dv) == rows


@pytest.mark.parametrize("size", [4_194_304, "4194304", "4MB"])
def test_a_compact_job_takes_a_size_in_bytes(fleet, size):
    """Issue 50.5: YAML's `target_size: 4194304` is a number, and means bytes, as in delta-rs."""
    defs, _ = fleet
    result = run(defs, "compact", {"dry_run": True, "target_size": size, "tables": ["simple"]})
    assert result.success, failure_messages(result)
    assert observations(result)["simple"]["target_size"] == 4_194_304
