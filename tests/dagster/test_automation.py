"""The commit sensor, the maintenance schedules and the run-failure sensor, on real tables."""

import datetime as dt
import http.server
import json
import logging
import os
import threading
import time
import urllib.parse
from pathlib import Path

import dagster as dg
import pyarrow as pa

from delta_ops.dagster import (
    DeltaMaintenanceResource,
    DeltaTableTarget,
    build_delta_maintenance_defs,
)
from delta_ops.dagster.alerts import MaintenanceFailure, slack_notifier
from delta_ops.ops.checkpoint import checkpoint
from delta_ops.ops.registry import OPERATIONS
from delta_ops.service.probe import probe_commits
from delta_ops.storage import Storage
from delta_ops.table.snapshot import load_snapshot
from delta_ops.table.transaction import Transaction
from delta_ops.table.writer import write_arrow
from tests.support import deltalake_rows, duckdb_rows, fresh_copy
from tests.support import log_builder as lb

DAY_MS = 86_400_000
WHEN = dt.datetime(2026, 1, 2, 3, 0, tzinfo=dt.UTC)


# --------------------------------------------------------------------------------- helpers
def append(table: Path, n: int = 1, configuration: dict | None = None) -> int:
    """n commits of one row each; returns the last version."""
    version = -1
    for _ in range(n):
        version = write_arrow(
            table, pa.table({"id": pa.array([1], pa.int64())}), configuration=configuration
        ).version
    return version


def set_properties(table: Path, **properties: str) -> int:
    snapshot = load_snapshot(table)
    metadata = snapshot.metadata.to_action()
    metadata["configuration"] = {**metadata["configuration"], **properties}
    txn = Transaction(snapshot, operation="SET TBLPROPERTIES")
    txn.add_action({"metaData": metadata})
    return txn.commit().version


def ckpt_key(table: str, fleet_name: str) -> dg.AssetKey:
    return dg.AssetKey(["delta_maintenance", fleet_name, table, "checkpoint"])


def fleet(name: str, tables: dict[str, Path], **kwargs) -> tuple[dg.Definitions, dict]:
    defs = build_delta_maintenance_defs(
        [DeltaTableTarget(n, str(p)) for n, p in tables.items()], name=name, **kwargs
    )
    return defs, {f"{name}_delta_maintenance": DeltaMaintenanceResource()}


class Sensor:
    """Ticks the commit sensor like the daemon does, carrying the cursor between ticks."""

    def __init__(self, defs: dg.Definitions, resources: dict, name: str):
        self.defs, self.resources = defs, resources
        self.sensor = defs.resolve_sensor_def(f"{name}_commit_sensor")
        self.cursor: str | None = None

    def tick(self) -> dg.SensorResult:
        context = dg.build_sensor_context(
            cursor=self.cursor, resources=self.resources, definitions=self.defs
        )
        data = self.sensor.evaluate_tick(context)
        self.cursor = data.cursor
        return data


def tick_schedule(
    defs: dg.Definitions, resources: dict, name: str, schedule: str = "maintenance_schedule"
):
    sched = defs.resolve_schedule_def(f"{name}_{schedule}")
    return sched.evaluate_tick(
        dg.build_schedule_context(scheduled_execution_time=WHEN, resources=resources)
    )


def run_request(
    defs: dg.Definitions, name: str, request: dg.RunRequest
) -> dg.ExecuteInProcessResult:
    # as the daemon launches it: the request's assets and asset checks
    job = defs.resolve_job_def(f"{name}_maintenance_assets_job").get_subset(
        asset_selection=set(request.asset_selection or []),
        asset_check_selection=set(request.asset_check_keys or []),
    )
    result = job.execute_in_process(tags=request.tags, instance=dg.DagsterInstance.ephemeral())
    assert result.success
    return result


# ----------------------------------------------------------------------------- commit sensor
def test_commit_sensor_requests_a_checkpoint_when_commits_reach_the_interval(tmp_path):
    table = tmp_path / "events"
    append(table, configuration={"delta.checkpointInterval": "3"})
    defs, resources = fleet("s", {"events": table})
    sensor = Sensor(defs, resources, "s")

    first = sensor.tick()
    assert (
        first.run_requests == []
        and "events: 1 commit(s) since checkpoint None, interval 3" in first.skip_message
    )
    assert json.loads(sensor.cursor)["events"]["version"] == 0
    append(table)
    assert sensor.tick().run_requests == []

    append(table)  # version 2: three commits, no checkpoint yet
    due = sensor.tick()
    [request] = due.run_requests
    assert request.run_key == "events:2"
    assert request.asset_selection == [ckpt_key("events", "s")]
    assert request.tags["delta_ops/table"] == "events"
    assert json.loads(sensor.cursor)["events"]["version"] == 2

    # the same version is not requested twice
    again = sensor.tick()
    assert again.run_requests == [] and "already requested" in again.skip_message

    # run what was requested: the checkpoint resets the count
    result = run_request(defs, "s", request)
    assert [e.asset_key for e in result.get_asset_materialization_events()] == [
        ckpt_key("events", "s")
    ]
    append(table, 2)
    after = sensor.tick()
    assert after.run_requests == [] and "2 commit(s) since checkpoint 2" in after.skip_message
    append(table)
    [next_request] = sensor.tick().run_requests
    assert next_request.run_key == "events:5"


def test_commit_sensor_one_request_per_due_table(tmp_path):
    tables = {name: tmp_path / name for name in ("a", "b", "c")}
    append(tables["a"], 3, configuration={"delta.checkpointInterval": "3"})
    append(tables["b"], 4, configuration={"delta.checkpointInterval": "2"})
    append(tables["c"], 1, configuration={"delta.checkpointInterval": "3"})
    tables["missing"] = tmp_path / "missing"
    defs, resources = fleet("m", tables)
    sensor = Sensor(defs, resources, "m")
    data = sensor.tick()
    requests = {r.tags["delta_ops/table"]: r for r in data.run_requests}
    assert set(requests) == {"a", "b"}
    assert requests["a"].run_key == "a:2" and requests["b"].run_key == "b:3"
    assert requests["a"].asset_selection == [ckpt_key("a", "m")] and requests[
        "b"
    ].asset_selection == [ckpt_key("b", "m")]
    cursor = json.loads(sensor.cursor)
    assert {k: v["version"] for k, v in cursor.items()} == {"a": 2, "b": 3, "c": 0}
    assert {k: v["interval"] for k, v in cursor.items()} == {"a": 3, "b": 2, "c": 3}
    # an unreadable table is reported, not fatal, and not in the cursor
    assert "missing" not in cursor
    assert sensor.tick().run_requests == []


class ProtocolReadsCounted(DeltaMaintenanceResource):
    """The resource, counting the protocol reads the sensor makes to ask whether a table's
    features allow a checkpoint."""

    def refusal(self, operation, url, *, storage_options=None):
        PROTOCOL_READS.append(url)
        return super().refusal(operation, url, storage_options=storage_options)


PROTOCOL_READS: list[str] = []


def test_commit_sensor_reads_a_refusing_protocol_once_per_version(tmp_path):
    """A due table whose features refuse a checkpoint is reported on every tick, but its
    protocol is read once per version: a tick over a lake where nothing changed reads only
    the newest commit names (the 1,000-table tick of benchmarks/bench_lake_dagster.py)."""
    table = tmp_path / "t"
    append(table, 2, configuration={"delta.checkpointInterval": "2"})
    unknown = lb.protocol(3, 7, reader_features=[], writer_features=["someFutureWriterFeature"])
    lb.write_commit(table, 2, [lb.commit_info(operation="UPGRADE PROTOCOL"), unknown])
    defs = build_delta_maintenance_defs([DeltaTableTarget("t", str(table))], name="r")
    sensor = Sensor(defs, {"r_delta_maintenance": ProtocolReadsCounted()}, "r")
    PROTOCOL_READS.clear()
    for tick in range(3):
        data = sensor.tick()
        assert data.run_requests == [], tick
        assert "t: not checkpointed" in data.skip_message and "someFutureWriterFeature" in (
            data.skip_message
        ), data.skip_message
        assert len(PROTOCOL_READS) == 1, (tick, PROTOCOL_READS)
    lb.write_commit(table, 3, [lb.commit_info()])  # a new version: asked again
    assert "t: not checkpointed" in sensor.tick().skip_message
    assert len(PROTOCOL_READS) == 2


def test_commit_sensor_follows_a_changed_interval(tmp_path):
    lower, higher = tmp_path / "lower", tmp_path / "higher"
    append(lower)  # default interval 10
    append(higher, configuration={"delta.checkpointInterval": "3"})
    defs, resources = fleet("i", {"lower": lower, "higher": higher})
    sensor = Sensor(defs, resources, "i")
    assert sensor.tick().run_requests == []
    assert set_properties(lower, **{"delta.checkpointInterval": "2"}) == 1
    assert set_properties(higher, **{"delta.checkpointInterval": "100"}) == 1
    append(higher)  # three commits: due under the old interval, not under the new one
    [request] = sensor.tick().run_requests
    assert request.run_key == "lower:1"
    cursor = json.loads(sensor.cursor)
    assert cursor["lower"]["interval"] == 2 and cursor["higher"]["interval"] == 100


def test_commit_sensor_sees_an_interval_change_under_a_newer_checkpoint(tmp_path):
    table = tmp_path / "t"
    append(table, configuration={"delta.checkpointInterval": "3"})
    defs, resources = fleet("k", {"t": table})
    sensor = Sensor(defs, resources, "k")
    assert sensor.tick().run_requests == []
    set_properties(table, **{"delta.checkpointInterval": "100"})  # version 1
    append(table)
    checkpoint(str(table))  # e.g. written by Spark at version 2, before the next tick
    append(table, 3)  # version 5: 3 commits since the checkpoint, far below 100
    data = sensor.tick()
    assert data.run_requests == []
    assert json.loads(sensor.cursor)["t"]["interval"] == 100


def test_probe_reads_only_new_commits(tmp_path, monkeypatch):
    table = tmp_path / "t"
    append(table, 12)  # versions 0..11
    checkpoint(str(table), version=None)  # at 11
    append(table, 5)  # 12..16
    storage = Storage.open(str(table))
    exists, reads = [], []
    real_exists, real_read = storage.exists, storage.read_bytes
    monkeypatch.setattr(
        storage, "exists", lambda p: exists.append(os.path.basename(p)) or real_exists(p)
    )
    monkeypatch.setattr(
        storage,
        "read_bytes",
        lambda p, *a, **k: reads.append(os.path.basename(p)) or real_read(p, *a, **k),
    )

    probe = probe_commits(storage, known_version=14, known_interval=10)
    assert (probe.latest_version, probe.last_checkpoint_version, probe.checkpoint_interval) == (
        16,
        11,
        10,
    )
    assert probe.commits_since_checkpoint == 5
    assert probe.files_checked == 2 + 1  # versions 15, 16, and the missing 17
    assert exists == [f"{v:020d}.json" for v in (15, 16, 17)]
    assert sorted(reads) == sorted(["_last_checkpoint", f"{15:020d}.json", f"{16:020d}.json"])

    # without a cursor the probe starts from the checkpoint, not version 0
    exists.clear()
    first = probe_commits(storage, known_interval=10)
    assert first.files_checked == 5 + 1 and exists[0] == f"{12:020d}.json"
    # nothing new: one existence check
    assert probe_commits(storage, known_version=16, known_interval=10).files_checked == 1


# --------------------------------------------------------------------------------- schedules
def quiet_table(path: Path) -> Path:
    append(path, 2)
    checkpoint(str(path))
    return path


def vacuum_only_table(path: Path) -> Path:
    """Checkpointed, a log inside its 30-day retention but outside vacuum's 7 days, one
    tombstone past the 7-day retention (kept by a checkpoint written when it had not expired
    yet)."""
    deleted = 1_700_000_000_000
    lb.write_commit(
        path, 0, [lb.protocol(), lb.metadata(), lb.add("a.parquet"), lb.add("b.parquet", size=7)]
    )
    lb.write_commit(path, 1, [lb.remove("b.parquet", size=7, deletion_timestamp=deleted)])
    ten_days_ago = time.time() - 10 * DAY_MS / 1000
    for commit in (path / "_delta_log").glob("*.json"):
        os.utime(commit, (ten_days_ago, ten_days_ago))
    checkpoint(str(path), now_ms=deleted + DAY_MS)
    for name in ("a.parquet", "b.parquet"):
        (path / name).write_bytes(b"x" * 7)
        os.utime(path / name, (deleted / 1000, deleted / 1000))
    return path


def test_schedule_skips_a_quiet_table_with_the_reason(tmp_path):
    defs, resources = fleet("q", {"quiet": quiet_table(tmp_path / "quiet")})
    data = tick_schedule(defs, resources, "q")
    assert data.run_requests == []
    assert data.skip_message.startswith("no table has maintenance work: quiet: nothing to do")
    assert "checkpoint: version 1 is already checkpointed" in data.skip_message
    assert "vacuum: no file of a tombstone past" in data.skip_message


def test_schedule_requests_only_the_actions_with_work(tmp_path):
    dv = fresh_copy("delta-spark/dv-partitioned-with-checkpoint", tmp_path)
    old = time.time() - 40 * 86_400
    for i, name in enumerate(sorted(os.listdir(dv / "_delta_log"))):
        if (dv / "_delta_log" / name).is_file():
            os.utime(dv / "_delta_log" / name, (old + i, old + i))
    tables = {
        "quiet": quiet_table(tmp_path / "quiet"),
        "new": tmp_path / "new",
        "tombstones": vacuum_only_table(tmp_path / "tombstones"),
        "dv": dv,
        "missing": tmp_path / "missing",
    }
    append(tables["new"])
    defs, resources = fleet("d", tables)
    data = tick_schedule(defs, resources, "d")
    assert data.skip_message is None
    requests = {r.tags["delta_ops/table"]: r for r in data.run_requests}
    # `new` has 1 commit without a checkpoint: not due before delta.checkpointInterval (10)
    assert set(requests) == {"tombstones", "dv"}
    key = lambda t, a: dg.AssetKey(["delta_maintenance", "d", t, a])
    assert requests["tombstones"].asset_selection == [key("tombstones", "vacuum")]
    for name, request in requests.items():
        assert request.run_key == f"{name}:2026-01-02"

    # nine commits later `new` reaches its interval: a checkpoint, then it is quiet again
    append(tables["new"], 9)
    [request] = [
        r for r in tick_schedule(defs, resources, "d").run_requests
        if r.tags["delta_ops/table"] == "new"
    ]  # fmt: skip
    assert request.asset_selection == [key("new", "checkpoint")]
    run_request(defs, "d", request)
    later = tick_schedule(defs, resources, "d")
    assert "new" not in {r.tags["delta_ops/table"] for r in later.run_requests}


def test_schedule_pairs_cleanup_with_a_checkpoint_that_lets_old_commits_go(tmp_path):
    """Commits past the 30-day log retention and no checkpoint: cleanup has nothing to do
    before the checkpoint, so once the checkpoint is due the schedule asks for cleanup with it
    (the run plans it after the checkpoint) and the old commits go in that one run."""
    table = tmp_path / "t"
    append(table, 3, configuration={"delta.checkpointInterval": "5"})
    old = time.time() - 40 * 86_400
    for path in (table / "_delta_log").iterdir():  # commits and their checksums
        os.utime(path, (old, old))
    append(table)  # version 3, today: 4 commits, under the interval
    defs, resources = fleet("c", {"t": table})
    key = lambda a: dg.AssetKey(["delta_maintenance", "c", "t", a])
    # as Delta Spark, the old commits wait for the checkpoint to be due (vacuum, never run on
    # commits this old, is due on its own)
    [waiting] = tick_schedule(defs, resources, "c").run_requests
    assert waiting.asset_selection == [key("vacuum")]
    for path in (table / "_delta_log").iterdir():  # version 3 ages too
        os.utime(path, (old, old))
    append(table)  # version 4, today: the interval is reached
    [request] = tick_schedule(defs, resources, "c").run_requests
    assert request.asset_selection[:2] == [key("checkpoint"), key("cleanup")]
    result = run_request(defs, "c", request)
    assert {key("checkpoint"), key("cleanup")} <= {
        e.asset_key for e in result.get_asset_materialization_events()
    }
    log = table / "_delta_log"
    assert not any((log / f"{v:020d}.json").exists() for v in range(4)), sorted(log.iterdir())
    assert len(deltalake_rows(table)) == len(duckdb_rows(table)) == 5


def test_vacuum_only_request_deletes_the_expired_file(tmp_path):
    table = vacuum_only_table(tmp_path / "t")
    defs, resources = fleet("v", {"t": table})
    [request] = tick_schedule(defs, resources, "v").run_requests
    result = run_request(defs, "v", request)
    mats = {e.asset_key: e for e in result.get_asset_materialization_events()}
    assert set(mats) == {dg.AssetKey(["delta_maintenance", "v", "t", "vacuum"])}
    assert not (table / "b.parquet").exists() and (table / "a.parquet").exists()


def test_schedule_vacuums_files_whose_tombstone_a_checkpoint_dropped(tmp_path):
    table = tmp_path / "t"
    deleted = 1_700_000_000_000
    lb.write_commit(
        table, 0, [lb.protocol(), lb.metadata(), lb.add("a.parquet"), lb.add("b.parquet", size=7)]
    )
    lb.write_commit(table, 1, [lb.remove("b.parquet", size=7, deletion_timestamp=deleted)])
    for name in ("a.parquet", "b.parquet"):
        (table / name).write_bytes(b"x" * 7)
        os.utime(table / name, (deleted / 1000, deleted / 1000))
    for commit in (table / "_delta_log").glob("*.json"):  # the commits are as old as their removes
        os.utime(commit, (deleted / 1000, deleted / 1000))
    checkpoint(str(table))  # drops the expired tombstone
    defs, resources = fleet("o", {"t": table})
    resource = resources["o_delta_maintenance"]
    assert [c.path for c in resource.plan("vacuum", str(table)).candidates] == ["b.parquet"]
    data = tick_schedule(defs, resources, "o")
    assert len(data.run_requests) == 1, data.skip_message
    assert (
        dg.AssetKey(["delta_maintenance", "o", "t", "vacuum"])
        in data.run_requests[0].asset_selection
    )


def test_row_tracking_schedule_requests_opted_in_tables(tmp_path):
    table = quiet_table(tmp_path / "t")
    defs = build_delta_maintenance_defs(
        [DeltaTableTarget("t", str(table), enable_row_tracking=True)],
        name="r",
        row_tracking_cron="0 4 * * 0",
    )
    data = tick_schedule(
        defs, {"r_delta_maintenance": DeltaMaintenanceResource()}, "r", "row_tracking_schedule"
    )
    assert len(data.run_requests) == 1, data.skip_message
    assert data.run_requests[0].asset_selection == [
        dg.AssetKey(["delta_maintenance", "r", "t", "enable_row_tracking"])
    ]


# ----------------------------------------------------------------------- run-failure sensor
def _failed_vacuum_run(defs, instance):
    job = defs.resolve_job_def("f_vacuum_job")
    result = job.execute_in_process(
        run_config={"ops": {"f_vacuum": {"config": {"retention": "1 hour"}}}},
        instance=instance,
        raise_on_error=False,
        tags={"delta_ops/table": "simple"},
    )
    assert not result.success
    return result


def _evaluate_failure_sensor(sensor, result, instance, resources, caplog=None):
    [failure] = [e for e in result.all_events if e.event_type_value == "PIPELINE_FAILURE"]
    context = dg.build_run_status_sensor_context(
        sensor_name=sensor.name,
        dagster_event=failure,
        dagster_instance=instance,
        dagster_run=instance.get_run_by_id(result.run_id),
        resources=resources,
    ).for_run_failure()
    if caplog is not None:
        context.log.addHandler(caplog.handler)  # the sensor's logger, as the daemon captures it
    sensor(context)


def test_run_failure_sensor_reports_failed_maintenance_runs(tmp_path, caplog):
    table = fresh_copy("delta-rs/simple_table", tmp_path)
    defs, resources = fleet("f", {"simple": table})
    sensor = defs.resolve_sensor_def("f_run_failure_sensor")
    assert isinstance(sensor, dg.RunStatusSensorDefinition)
    assert sensor.default_status == dg.DefaultSensorStatus.STOPPED
    every_operation = {f"f_{op.name}_job" for op in OPERATIONS.values()}  # one job each
    assert {"f_checkpoint_job", "f_cleanup_job", "f_repair_job"} <= every_operation
    assert {j.name for j in sensor._monitored_jobs} == every_operation | {
        "f_maintenance_assets_job",
        "f_maintenance_job",
    }
    instance = dg.DagsterInstance.ephemeral()
    result = _failed_vacuum_run(defs, instance)
    _evaluate_failure_sensor(sensor, result, instance, resources, caplog)
    messages = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    [alert] = [m for m in messages if result.run_id in m]
    # which table, which job and step, and the error itself (a retention below the minimum)
    assert alert.startswith("delta-ops: f_vacuum_job (step f_vacuum) failed for simple: "), alert
    assert "retention" in alert and alert.endswith(f"run {result.run_id}"), alert


def test_failure_alerts_reach_a_notifier_with_a_link_to_the_run(tmp_path):
    table = fresh_copy("delta-rs/simple_table", tmp_path)
    received: list[MaintenanceFailure] = []
    defs = build_delta_maintenance_defs(
        [DeltaTableTarget("simple", str(table))],
        name="f",
        notify=received.append,
        webserver_url="https://dagster.example.com/",
    )
    resources = {"f_delta_maintenance": DeltaMaintenanceResource()}
    instance = dg.DagsterInstance.ephemeral()
    result = _failed_vacuum_run(defs, instance)
    _evaluate_failure_sensor(
        defs.resolve_sensor_def("f_run_failure_sensor"), result, instance, resources
    )
    [failure] = received
    assert (failure.table, failure.job, failure.step) == ("simple", "f_vacuum_job", "f_vacuum")
    assert failure.run_url == f"https://dagster.example.com/runs/{result.run_id}"
    assert "retention" in failure.error
    assert failure.message.endswith(failure.run_url)


def test_slack_notifier_posts_the_alert_to_the_channel():
    posts: list[dict] = []

    class SlackApi(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers["Content-Length"]))
            posts.append(
                {
                    "path": self.path,
                    "auth": self.headers["Authorization"],
                    "form": json.loads(body)
                    if "json" in self.headers["Content-Type"]
                    else dict(urllib.parse.parse_qsl(body.decode())),
                }
            )
            payload = json.dumps({"ok": True, "channel": "C1", "ts": "1.0"}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), SlackApi)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        notify = slack_notifier(
            "#data-alerts",
            token="xoxb-test",
            base_url=f"http://127.0.0.1:{server.server_port}/api/",
        )
        failure = MaintenanceFailure("events", "lake_vacuum_job", "lake_vacuum", "boom", "r1", None)
        notify(failure)
    finally:
        server.shutdown()
    [post] = posts
    assert post["path"] == "/api/chat.postMessage"
    assert post["auth"] == "Bearer xoxb-test"
    assert post["form"]["channel"] == "#data-alerts"
    assert post["form"]["text"] == failure.message


def test_a_maintenance_run_re_evaluates_the_tables_checks_after_its_actions(tmp_path):
    """The checks show the state the run left, not the one before it: a lagging table's
    checkpoint_lag fails before the run, and the run's own evaluation, ordered after the
    checkpoint, passes."""
    table = tmp_path / "t"
    append(table, 11)
    defs, resources = fleet("e", {"t": table})
    [request] = tick_schedule(defs, resources, "e").run_requests
    key = dg.AssetKey(["e", "t"])
    assert dg.AssetCheckKey(key, "checkpoint_lag") in set(request.asset_check_keys or [])
    result = run_request(defs, "e", request)
    evaluations = {e.check_name: e for e in result.get_asset_check_evaluations()}
    assert evaluations["checkpoint_lag"].passed
    assert evaluations["checkpoint_lag"].metadata["commits_since_checkpoint"].value == 0
    # ordered after the maintenance step: the check ran on the checkpointed table
    steps = [e.step_key for e in result.all_events if e.event_type_value == "STEP_SUCCESS"]
    assert steps.index("e__t__health") > steps.index("e__t__maintenance"), steps
