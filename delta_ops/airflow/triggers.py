"""Triggers that watch a table's commits, reading only the new ones: a deferred task's, and an
``AssetWatcher``'s.

Both keep a cursor (the newest version seen, the checkpoint interval and the protocol, as
Dagster's commit sensor keeps one per table) and probe from it
(`delta_ops.service.probe.probe_commits`): each look checks for ``N+1.json``, ``N+2.json``, ...
after the cursor and reads only those commits (for a changed interval or protocol), so it
costs a few existence checks however long the log is, also once the table is due: the
protocol that decides whether a checkpoint is allowed is the cursor's, never a replay. A table is *due* once the commits since its last checkpoint reach
``min_commits`` (default: its ``delta.checkpointInterval``) and its protocol lets delta-ops
checkpoint it.

* `DeltaCommitTrigger` (a ``BaseTrigger``): what `delta_ops.airflow.sensors`'s
  deferrable sensor waits on; fires once, when the table is due (or its checkpoint is refused,
  or the table cannot be read), and ends.
* `DeltaCommitEventTrigger` (a ``BaseEventTrigger``): runs for as long as the watcher
  lives and fires once per due version, so a DAG scheduled on the table's asset checkpoints
  after commits (one table; for a lake, the next):

    table = Asset("lake/events", uri="s3://lake/events", watchers=[AssetWatcher(
        name="events_commits",
        trigger=DeltaCommitEventTrigger("s3://lake/events", delta_ops_conn_id="lake_s3"),
    )])

* `DeltaLakeCommitEventTrigger` (a ``BaseEventTrigger``): one watcher for a whole lake
  (`delta_ops.airflow.dags.build_delta_commit_dag`): each look probes every table from its
  cursor and fires one event listing the tables newly due.

A look is logged at INFO when the table's status changes (the first look, waiting to due) and
at DEBUG otherwise, so a triggerer watching many tables logs what happens, not every poll.

Storage is read in a worker thread, so a slow store never blocks the triggerer's event loop;
the connection is read with the hook's async method.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from airflow.triggers.base import BaseEventTrigger, BaseTrigger, TriggerEvent

from delta_ops.airflow.hook import atable_storage_options
from delta_ops.errors import DeltaOpsError
from delta_ops.ops.registry import OPERATIONS
from delta_ops.protocol.features import Protocol
from delta_ops.service.due import checkpoint_due
from delta_ops.service.probe import probe_commits
from delta_ops.storage import Storage
from delta_ops.table.snapshot import load_head

DEFAULT_POLL_SECONDS = 30.0


@dataclass
class CommitWatch:
    """One table's cursor between looks (blocking I/O: call `look` in a thread): the
    newest version seen, the checkpoint interval and the protocol at it. The first look reads
    the table's head once (or the cursor's version, when handed a cursor without a protocol);
    every later look reads only the commits after the cursor, taking a changed interval or
    protocol from them, so a table that becomes due is judged without replaying its log."""

    storage: Storage
    min_commits: int | None = None
    version: int | None = None
    interval: int | None = None
    protocol: Protocol | None = None

    def look(self) -> dict[str, Any]:
        """The table's commits since its checkpoint, read from the cursor on; ``status`` is
        ``due``, ``refused`` (due, but its protocol refuses a checkpoint: ``reason`` says why)
        or ``waiting``."""
        if self.protocol is None:  # first sight: the head (protocol, interval) once
            head = load_head(self.storage, self.version)
            self.version, self.protocol = head.version, head.protocol
            if self.interval is None:
                self.interval = head.properties.checkpoint_interval
        probe = probe_commits(
            self.storage, known_version=self.version, known_interval=self.interval
        )
        self.version, self.interval = probe.latest_version, probe.checkpoint_interval
        if probe.protocol is not None:
            self.protocol = Protocol.from_action(probe.protocol)
        threshold = self.min_commits or probe.checkpoint_interval
        data: dict[str, Any] = {
            "status": "waiting",
            "version": probe.latest_version,
            "last_checkpoint_version": probe.last_checkpoint_version,
            "commits_since_checkpoint": probe.commits_since_checkpoint,
            "threshold": threshold,
            "files_checked": probe.files_checked,
        }
        if checkpoint_due(probe.commits_since_checkpoint, threshold):
            refused = self.protocol.refusal(OPERATIONS["checkpoint"].needs)
            data["status"] = "refused" if refused else "due"
            if refused:
                data["reason"] = refused
        return data

    def cursor(self) -> dict[str, Any]:
        """The cursor as a trigger's arguments (``known_*``): a deferring sensor hands it on."""
        return {
            "known_version": self.version,
            "known_interval": self.interval,
            "known_protocol": self.protocol.to_action() if self.protocol else None,
        }


def _event(payload: dict[str, Any]) -> TriggerEvent:
    """A trigger event carrying `payload` (plain data: the triggerer stores it as JSON)."""
    return TriggerEvent(payload)  # type: ignore[no-untyped-call]  # Airflow's is untyped


def describe(table: str, data: Mapping[str, Any]) -> str:
    """One line for a look's result."""
    return (
        f"{table}: {data['commits_since_checkpoint']} commit(s) since checkpoint"
        f" {data['last_checkpoint_version']}, at version {data['version']}; a checkpoint is due"
        f" at {data['threshold']}: {data['status']}"
    )


class _CommitTriggerBase:
    """The arguments both triggers take, opening the table from them, and logging the looks."""

    log: Any  # Airflow's LoggingMixin gives each trigger its logger
    _said_status: str | None = None

    def _log_look(self, data: Mapping[str, Any]) -> None:
        """A look's line: at INFO for the first look and when the status changes (waiting to
        due), at DEBUG for the routine looks in between (one every `poll_interval`)."""
        status = str(data["status"])
        level = self.log.info if status != self._said_status else self.log.debug
        self._said_status = status
        level("%s", describe(self.table, data))

    def _set_arguments(
        self,
        table: str,
        delta_ops_conn_id: str | None,
        storage_options: Mapping[str, Any] | None,
        min_commits: int | None,
        poll_interval: float,
    ) -> None:
        self.table = table
        self.delta_ops_conn_id = delta_ops_conn_id
        self.storage_options = dict(storage_options) if storage_options else None
        self.min_commits = min_commits
        self.poll_interval = poll_interval

    def _arguments(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "delta_ops_conn_id": self.delta_ops_conn_id,
            "storage_options": self.storage_options,
            "min_commits": self.min_commits,
            "poll_interval": self.poll_interval,
        }

    async def _watch(self) -> CommitWatch:
        options = await atable_storage_options(self.delta_ops_conn_id, self.storage_options)
        storage = await asyncio.to_thread(Storage.open, self.table, options)
        return CommitWatch(storage, self.min_commits)


class DeltaCommitTrigger(_CommitTriggerBase, BaseTrigger):
    """Fires once the table is due for a checkpoint, then ends (a deferred sensor's trigger).

    The event's payload is the last look's data with ``table``; ``status`` ``error`` (with
    ``error`` and ``retryable``) when the table cannot be read.

    Args:
        table: the table's path or URL.
        delta_ops_conn_id: a connection holding its storage options (`delta_ops.airflow.hook`).
        storage_options: options over the connection's.
        min_commits: commits since the checkpoint that make it due (default: the table's
            ``delta.checkpointInterval``).
        poll_interval: seconds between looks.
        known_version: the cursor a previous look left (the deferring sensor's).
        known_interval: the checkpoint interval it read with it.
        known_protocol: the protocol action at it (None: read once, at the cursor).
    """

    def __init__(
        self,
        table: str,
        *,
        delta_ops_conn_id: str | None = None,
        storage_options: Mapping[str, Any] | None = None,
        min_commits: int | None = None,
        poll_interval: float = DEFAULT_POLL_SECONDS,
        known_version: int | None = None,
        known_interval: int | None = None,
        known_protocol: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # Airflow's base is untyped
        self._set_arguments(table, delta_ops_conn_id, storage_options, min_commits, poll_interval)
        self.known_version = known_version
        self.known_interval = known_interval
        self.known_protocol = dict(known_protocol) if known_protocol else None

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{__name__}.DeltaCommitTrigger",
            {
                **self._arguments(),
                "known_version": self.known_version,
                "known_interval": self.known_interval,
                "known_protocol": self.known_protocol,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        try:
            watch = await self._watch()
            watch.version, watch.interval = self.known_version, self.known_interval
            if self.known_protocol is not None:
                watch.protocol = Protocol.from_action(self.known_protocol)
            while True:
                data = await asyncio.to_thread(watch.look)
                self._log_look(data)
                if data["status"] != "waiting":
                    yield _event({"table": self.table, **data})
                    return
                await asyncio.sleep(self.poll_interval)
        except DeltaOpsError as exc:
            yield _event(
                {
                    "table": self.table,
                    "status": "error",
                    "error": str(exc),
                    "retryable": exc.retryable,
                }
            )


class DeltaCommitEventTrigger(_CommitTriggerBase, BaseEventTrigger):
    """Fires once per version at which the table is due for a checkpoint, for as long as it
    runs (an ``AssetWatcher``'s trigger: each event is an asset event whose ``extra`` holds the
    look's data under ``payload``). A table whose checkpoint is refused, or that cannot be read
    (not created yet, a store's hiccup), is logged and looked at again; it fires nothing.

    Args: as `DeltaCommitTrigger`'s, without a cursor (the watcher keeps its own while
    it runs; Airflow tells watchers apart by their arguments, so they must not change).
    """

    def __init__(
        self,
        table: str,
        *,
        delta_ops_conn_id: str | None = None,
        storage_options: Mapping[str, Any] | None = None,
        min_commits: int | None = None,
        poll_interval: float = DEFAULT_POLL_SECONDS,
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # Airflow's base is untyped
        self._set_arguments(table, delta_ops_conn_id, storage_options, min_commits, poll_interval)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return f"{__name__}.DeltaCommitEventTrigger", self._arguments()

    async def run(self) -> AsyncIterator[TriggerEvent]:
        watch: CommitWatch | None = None
        fired: int | None = None
        said = ""
        while True:
            try:
                watch = watch or await self._watch()
                data = await asyncio.to_thread(watch.look)
            except DeltaOpsError as exc:
                if str(exc) != said:  # once per different problem, not every look
                    self.log.warning("%s: cannot look at the commits: %s", self.table, exc)
                said = str(exc)
            else:
                said = ""
                self._log_look(data)
                if data["version"] != fired and data["status"] == "due":
                    fired = data["version"]
                    yield _event({"table": self.table, **data})
                elif data["status"] == "refused" and data["version"] != fired:
                    fired = data["version"]
                    self.log.warning("%s: not checkpointed: %s", self.table, data["reason"])
            await asyncio.sleep(self.poll_interval)


class DeltaLakeCommitEventTrigger(BaseEventTrigger):
    """One watcher for a whole lake: each look probes every table from its own cursor (a few
    existence checks per table, as Dagster's commit sensor does) and fires one event listing
    the tables that became due since the last, so 1,000 tables cost one triggerer coroutine,
    not 1,000. The event's ``extra`` holds, under ``payload``, ``due``: a look's data
    (``table`` its name, ``url``, ``version``, ...) per due table, and ``looked``: how many
    tables were looked at. A table whose checkpoint is refused, or that cannot be read, is
    logged once per version or problem and fires nothing.

    Args:
        tables: each table as ``{"name", "url", "delta_ops_conn_id", "storage_options"}``
            (the last two may be None), as `delta_ops.airflow.dags` writes them.
        min_commits: commits since the checkpoint that make a table due (default: each
            table's ``delta.checkpointInterval``).
        poll_interval: seconds between looks.
        threads: tables looked at at once (object stores answer in parallel).
    """

    def __init__(
        self,
        tables: list[dict[str, Any]],
        *,
        min_commits: int | None = None,
        poll_interval: float = DEFAULT_POLL_SECONDS,
        threads: int = 8,
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # Airflow's base is untyped
        self.tables = [dict(t) for t in tables]
        self.min_commits = min_commits
        self.poll_interval = poll_interval
        self.threads = threads

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{__name__}.DeltaLakeCommitEventTrigger",
            {
                "tables": self.tables,
                "min_commits": self.min_commits,
                "poll_interval": self.poll_interval,
                "threads": self.threads,
            },
        )

    async def _watches(self) -> dict[str, CommitWatch | DeltaOpsError]:
        """Each table's watch (or why it cannot be opened), connections read once each."""
        by_connection: dict[str | None, Mapping[str, Any] | None] = {}
        out: dict[str, CommitWatch | DeltaOpsError] = {}
        for table in self.tables:
            conn_id = table.get("delta_ops_conn_id")
            try:
                if conn_id not in by_connection:
                    by_connection[conn_id] = await atable_storage_options(conn_id, None)
                options = {**(by_connection[conn_id] or {}), **(table.get("storage_options") or {})}
                storage = await asyncio.to_thread(Storage.open, table["url"], options or None)
                out[table["name"]] = CommitWatch(storage, self.min_commits)
            except DeltaOpsError as exc:
                out[table["name"]] = exc
        return out

    def _look_all(self, watches: Mapping[str, CommitWatch]) -> dict[str, Any]:
        """Every table's look (blocking: in a thread), by name: its data or its error."""

        def look(watch: CommitWatch) -> dict[str, Any] | DeltaOpsError:
            try:
                return watch.look()
            except DeltaOpsError as exc:
                return exc

        with ThreadPoolExecutor(max(1, self.threads)) as pool:
            return dict(zip(watches, pool.map(look, watches.values()), strict=True))

    async def run(self) -> AsyncIterator[TriggerEvent]:
        urls = {t["name"]: t["url"] for t in self.tables}
        watches: dict[str, CommitWatch] = {}
        fired: dict[str, int] = {}
        said: dict[str, str] = {}
        while True:
            if len(watches) < len(self.tables):  # first look, or tables that could not open
                for name, opened in (await self._watches()).items():
                    if isinstance(opened, CommitWatch):
                        watches.setdefault(name, opened)
                    elif said.get(name) != str(opened):
                        said[name] = str(opened)
                        self.log.warning("%s: cannot look at the commits: %s", name, opened)
            looks = await asyncio.to_thread(self._look_all, watches)
            due = []
            for name, data in looks.items():
                if isinstance(data, DeltaOpsError):
                    if said.get(name) != str(data):  # once per different problem
                        said[name] = str(data)
                        self.log.warning("%s: cannot look at the commits: %s", name, data)
                    continue
                said.pop(name, None)
                if data["status"] == "waiting" or fired.get(name) == data["version"]:
                    continue
                fired[name] = data["version"]
                if data["status"] == "refused":
                    self.log.warning("%s: not checkpointed: %s", name, data["reason"])
                else:
                    self.log.info("%s", describe(name, data))
                    due.append({**data, "table": name, "url": urls[name]})
            self.log.debug("looked at %d table(s): %d due", len(looks), len(due))
            if due:
                yield _event({"due": due, "looked": len(looks)})
            await asyncio.sleep(self.poll_interval)


__all__ = [
    "CommitWatch",
    "DeltaCommitEventTrigger",
    "DeltaCommitTrigger",
    "DeltaLakeCommitEventTrigger",
    "describe",
]
