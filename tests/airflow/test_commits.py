"""Waiting for commits: the triggers run in-process on an asyncio loop, the deferrable sensor by
Airflow's `dag.test()` (which runs a deferred task's trigger inline), on real tables.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from delta_ops.ops.checkpoint import checkpoint
from delta_ops.table.writer import write_arrow
from tests.support.airflow_support import airflow_home, dag_module, task_states, xcom


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return airflow_home(tmp_path_factory.getbasetemp())


def commit(table: Path, n: int = 1) -> None:
    for i in range(n):
        write_arrow(table, pa.table({"id": pa.array([i], pa.int64())}))


async def first_events(events: AsyncIterator[Any], count: int, within: float) -> list[Any]:
    """Up to `count` events a trigger fires within `within` seconds (it is stopped then)."""
    got: list[Any] = []

    async def collect() -> None:
        async for event in events:
            got.append(event.payload)
            if len(got) == count:
                return

    try:
        await asyncio.wait_for(collect(), within)
    except TimeoutError:
        pass
    return got


class Watching:
    """A trigger running in the background of the test's event loop, its events queued."""

    def __init__(self, events: AsyncIterator[Any]) -> None:
        self.queue: asyncio.Queue[Any] = asyncio.Queue()
        self.task = asyncio.ensure_future(self._pump(events))

    async def _pump(self, events: AsyncIterator[Any]) -> None:
        async for event in events:
            await self.queue.put(event.payload)

    async def events(self, within: float) -> list[Any]:
        """The events fired by now, or within `within` seconds if none was yet."""
        got = []
        try:
            got.append(await asyncio.wait_for(self.queue.get(), within))
        except TimeoutError:
            return got
        while not self.queue.empty():
            got.append(self.queue.get_nowait())
        return got

    def stop(self) -> None:
        self.task.cancel()


def test_the_trigger_reads_only_the_commits_after_its_cursor(home: Path, tmp_path: Path) -> None:
    from delta_ops.airflow.triggers import DeltaCommitTrigger

    table = tmp_path / "events"
    commit(table, 40)  # versions 0..39, no checkpoint
    # a cursor at version 36 (a previous look): three newer commits, one missing file checked
    trigger = DeltaCommitTrigger(
        str(table), min_commits=40, poll_interval=0.05, known_version=36, known_interval=10
    )
    [event] = asyncio.run(first_events(trigger.run(), 1, within=30))
    assert event == {
        "table": str(table),
        "status": "due",
        "version": 39,
        "last_checkpoint_version": None,
        "commits_since_checkpoint": 40,
        "threshold": 40,
        "files_checked": 4,
    }
    # it is rebuilt from what it serializes, as the triggerer rebuilds it
    classpath, kwargs = trigger.serialize()
    assert classpath == "delta_ops.airflow.triggers.DeltaCommitTrigger"
    assert DeltaCommitTrigger(**kwargs).serialize() == (classpath, kwargs)


def test_the_trigger_waits_until_enough_commits_piled_up(home: Path, tmp_path: Path) -> None:
    from delta_ops.airflow.triggers import DeltaCommitTrigger

    table = tmp_path / "events"
    commit(table, 2)

    async def scenario() -> list[Any]:
        trigger = DeltaCommitTrigger(str(table), min_commits=5, poll_interval=0.05)
        waiting = asyncio.ensure_future(first_events(trigger.run(), 1, within=30))
        await asyncio.sleep(0.3)
        assert not waiting.done()  # 2 commits, 5 wanted
        await asyncio.to_thread(commit, table, 3)
        return await waiting

    [event] = asyncio.run(scenario())
    assert event["status"] == "due" and event["version"] == 4
    # the looks after the first checked only the new commits: one existence check each
    # beyond them, never the whole log again
    assert event["files_checked"] <= 4


class Said:
    """A trigger's log, by level."""

    def __init__(self) -> None:
        self.lines: dict[str, list[str]] = {"debug": [], "info": [], "warning": []}

    def __getattr__(self, level: str) -> Any:
        return lambda message, *args: self.lines[level].append(message % args)


def test_the_trigger_logs_changes_at_info_and_routine_looks_at_debug(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from delta_ops.airflow.triggers import DeltaCommitEventTrigger, DeltaCommitTrigger

    table = tmp_path / "events"
    commit(table, 2)
    said = {DeltaCommitTrigger: Said(), DeltaCommitEventTrigger: Said()}
    for cls, log in said.items():
        monkeypatch.setattr(cls, "log", property(lambda self, log=log: log))

    async def scenario() -> list[Any]:
        trigger = DeltaCommitTrigger(str(table), min_commits=5, poll_interval=0.02)
        watcher = Watching(
            DeltaCommitEventTrigger(str(table), min_commits=5, poll_interval=0.02).run()
        )
        waiting = asyncio.ensure_future(first_events(trigger.run(), 1, within=30))
        await asyncio.sleep(0.5)  # many looks, all waiting
        await asyncio.to_thread(commit, table, 3)
        fired = await waiting
        fired += await watcher.events(within=30)
        await asyncio.sleep(0.2)  # looks at a due version it fired for already
        watcher.stop()
        return fired

    fired = asyncio.run(scenario())
    assert [e["status"] for e in fired] == ["due", "due"]
    for cls, log in said.items():
        # the first look, and the change to due: not a line per look
        assert [line.rsplit(": ", 1)[-1] for line in log.lines["info"]] == ["waiting", "due"], (
            cls,
            log.lines["info"],
        )
        assert len(log.lines["debug"]) >= 5, cls  # every other look, for whoever wants it


def test_the_trigger_reports_a_table_it_cannot_read(home: Path, tmp_path: Path) -> None:
    from delta_ops.airflow.triggers import DeltaCommitTrigger

    (tmp_path / "empty").mkdir()
    trigger = DeltaCommitTrigger(str(tmp_path / "empty"), poll_interval=0.05)
    [event] = asyncio.run(first_events(trigger.run(), 1, within=30))
    assert event["status"] == "error" and event["retryable"] is False
    assert "no _delta_log" in event["error"]


def test_the_event_trigger_fires_once_per_due_version(home: Path, tmp_path: Path) -> None:
    from delta_ops.airflow.triggers import DeltaCommitEventTrigger

    table = tmp_path / "events"
    commit(table, 10)  # versions 0..9: the default interval (10) is reached

    async def scenario() -> list[list[Any]]:
        watching = Watching(DeltaCommitEventTrigger(str(table), poll_interval=0.05).run())
        first = await watching.events(within=30)
        await asyncio.sleep(0.5)  # ten more looks: the same version fires no more events
        first += await watching.events(within=0.1)
        await asyncio.to_thread(checkpoint, str(table))  # no longer due
        await asyncio.to_thread(commit, table, 2)
        after_checkpoint = await watching.events(within=0.5)
        await asyncio.to_thread(commit, table, 8)  # 10 commits since the checkpoint at 9
        after_more = await watching.events(within=30)
        watching.stop()
        return [first, after_checkpoint, after_more]

    first, after_checkpoint, after_more = asyncio.run(scenario())
    assert [e["version"] for e in first] == [9]
    assert after_checkpoint == []
    assert [(e["version"], e["last_checkpoint_version"]) for e in after_more] == [(19, 9)]


def test_the_deferred_sensor_resumes_when_commits_land_then_checkpoints(
    home: Path, tmp_path: Path
) -> None:
    table = tmp_path / "events"
    commit(table, 2)
    module = dag_module(
        home,
        "commits",
        f"""
        from airflow.sdk import DAG
        from delta_ops.airflow.operators import DeltaCheckpointOperator
        from delta_ops.airflow.sensors import DeltaCommitSensor

        with DAG("wait_then_checkpoint", schedule=None) as dag:
            wait = DeltaCommitSensor(task_id="wait", table={str(table)!r}, min_commits=6,
                                     poke_interval=0.1, timeout=120)
            wait >> DeltaCheckpointOperator(task_id="checkpoint", table={str(table)!r})
        """,
    )
    # commits land while the sensor is deferred (dag.test runs its trigger inline)
    later = threading.Timer(3.0, commit, (table, 4))
    later.start()
    try:
        run = module.dag.test()
    finally:
        later.join()
    assert task_states(run) == {"wait": "success", "checkpoint": "success"}
    waited = xcom(run, "wait")
    assert waited["status"] == "due" and waited["version"] == 5
    assert xcom(run, "checkpoint")["version"] == 5
    assert (table / "_delta_log" / f"{5:020d}.checkpoint.parquet").exists()


def test_the_sensor_pokes_in_the_worker_when_not_deferrable(home: Path, tmp_path: Path) -> None:
    table = tmp_path / "events"
    commit(table, 12)
    module = dag_module(
        home,
        "poke",
        f"""
        from airflow.sdk import DAG
        from delta_ops.airflow.sensors import DeltaCommitSensor

        with DAG("poke", schedule=None) as dag:
            DeltaCommitSensor(task_id="wait", table={str(table)!r}, deferrable=False,
                              poke_interval=0.1, timeout=60)
        """,
    )
    run = module.dag.test()
    assert task_states(run) == {"wait": "success"}
    assert xcom(run, "wait")["commits_since_checkpoint"] == 12


def _break_commit(table: Path, version: int) -> None:
    """Make an old commit unreadable: a look that replays the log fails on it from now on."""
    (table / "_delta_log" / f"{version:020d}.json").write_text('{"add": {"path": \n')


def test_a_look_once_due_reads_only_the_new_commits_not_the_log_since_the_checkpoint(
    home: Path, tmp_path: Path
) -> None:
    from delta_ops.airflow.triggers import CommitWatch, DeltaCommitTrigger
    from delta_ops.storage import Storage

    table = tmp_path / "events"
    commit(table, 5)  # versions 0..4
    watch = CommitWatch(Storage.open(str(table)), min_commits=8)
    assert watch.look()["status"] == "waiting"  # first sight: the head, once
    cursor = watch.cursor()
    commit(table, 5)  # versions 5..9: due at 8
    # commit 2 is older than the cursor: a look that replays the log since the checkpoint to
    # learn the protocol (load_head, as looks did once a table was due) fails on it
    _break_commit(table, 2)
    data = watch.look()
    assert (data["status"], data["version"], data["files_checked"]) == ("due", 9, 6)
    # a deferred sensor hands its cursor, protocol included, to its trigger, which reads no
    # more than the commits after it either
    trigger = DeltaCommitTrigger(str(table), min_commits=8, poll_interval=0.05, **cursor)
    [event] = asyncio.run(first_events(trigger.run(), 1, within=30))
    assert (event["status"], event["version"]) == ("due", 9)
    assert DeltaCommitTrigger(**trigger.serialize()[1]).serialize() == trigger.serialize()


def test_a_protocol_change_in_a_new_commit_is_seen_without_a_replay(
    home: Path, tmp_path: Path
) -> None:
    import json

    from delta_ops.airflow.triggers import CommitWatch
    from delta_ops.storage import Storage

    table = tmp_path / "events"
    commit(table, 3)  # versions 0..2
    watch = CommitWatch(Storage.open(str(table)), min_commits=4)
    assert watch.look()["status"] == "waiting"
    _break_commit(table, 1)
    # version 3 upgrades the protocol to a writer feature delta-ops does not know
    protocol = {
        "minReaderVersion": 1,
        "minWriterVersion": 7,
        "writerFeatures": ["appendOnly", "invariants", "madeUpFeature"],
    }
    (table / "_delta_log" / f"{3:020d}.json").write_text(json.dumps({"protocol": protocol}) + "\n")
    data = watch.look()
    assert data["status"] == "refused" and "madeUpFeature" in data["reason"]


def test_one_lake_watcher_fires_once_per_look_with_the_tables_newly_due(
    home: Path, tmp_path: Path
) -> None:
    from delta_ops.airflow.triggers import DeltaLakeCommitEventTrigger

    tables = {name: tmp_path / name for name in ("events", "orders", "quiet")}
    commit(tables["events"], 5)
    commit(tables["orders"], 2)
    commit(tables["quiet"], 1)
    trigger = DeltaLakeCommitEventTrigger(
        [{"name": name, "url": str(path)} for name, path in tables.items()]
        + [{"name": "missing", "url": str(tmp_path / "missing")}],
        min_commits=5,
        poll_interval=0.05,
    )

    async def scenario() -> list[list[Any]]:
        watching = Watching(trigger.run())
        first = await watching.events(within=30)
        await asyncio.sleep(0.5)  # ten more looks: nothing new is due
        first += await watching.events(within=0.1)
        await asyncio.to_thread(commit, tables["orders"], 3)
        later = await watching.events(within=30)
        watching.stop()
        return [first, later]

    first, later = asyncio.run(scenario())
    assert [[(d["table"], d["version"]) for d in e["due"]] for e in first] == [[("events", 4)]]
    assert first[0]["looked"] == 4  # the missing table too: logged once, looked for again
    assert first[0]["due"][0]["url"] == str(tables["events"])
    assert [[(d["table"], d["version"]) for d in e["due"]] for e in later] == [[("orders", 4)]]
    classpath, kwargs = trigger.serialize()
    assert classpath == "delta_ops.airflow.triggers.DeltaLakeCommitEventTrigger"
    assert DeltaLakeCommitEventTrigger(**kwargs).serialize() == (classpath, kwargs)


def test_the_lake_commit_dag_checkpoints_each_due_table_as_a_mapped_task(
    home: Path, tmp_path: Path
) -> None:
    warehouse = tmp_path / "warehouse"
    commit(warehouse / "events", 6)
    commit(warehouse / "orders", 6)
    commit(warehouse / "quiet", 2)
    module = dag_module(
        home,
        "lake_commits",
        f"""
        from delta_ops.airflow.dags import build_delta_commit_dag

        dag = build_delta_commit_dag({str(warehouse)!r}, name="lake", min_commits=5,
                                     pool="delta_ops", max_active_tis_per_dag=2)
        """,
    )
    dag = module.dag
    assert dag.dag_id == "lake_checkpoint_on_commits"
    # one asset, one watcher, however many tables
    [lake] = dag.timetable.asset_condition.objects
    assert lake.name == "delta_commits/lake" and len(lake.watchers) == 1
    checkpoint = dag.get_task("checkpoint")
    assert checkpoint.max_active_tis_per_dag == 2 and checkpoint.pool == "delta_ops"
    run = dag.test()  # by hand: the first task looks at every table itself
    assert xcom(run, "due_tables") == [
        {
            "table": str(warehouse / name),
            "table_name": name,
            "delta_ops_conn_id": None,
            "storage_options": None,
        }
        for name in ("events", "orders")
    ]
    states = sorted((ti.task_id, ti.map_index, str(ti.state)) for ti in run.get_task_instances())
    assert states == [
        ("checkpoint", 0, "success"),
        ("checkpoint", 1, "success"),
        ("due_tables", -1, "success"),
    ]
    for name in ("events", "orders"):
        assert (warehouse / name / "_delta_log" / f"{5:020d}.checkpoint.parquet").exists()
    assert not list((warehouse / "quiet" / "_delta_log").glob("*.checkpoint.parquet"))
