"""The tables a lake's commit watcher found due, as the arguments of one checkpoint each.

A lake's commit DAG (`delta_ops.airflow.dags.build_delta_commit_dag`) is scheduled on the
lake's asset, which one `delta_ops.airflow.triggers.DeltaLakeCommitEventTrigger` updates with
the tables newly due. Its first task, `DueTables`, reads the events that started the run
(``triggering_asset_events``; several events queued while a run was busy make one run) and
returns one set of operator arguments per due table, which the checkpoint task is mapped over
(``expand_kwargs``): one mapped task instance per table, ``max_active_tis_per_dag`` of them at
once. A run started by hand (no events) looks at every table itself, as the watcher does, and
checkpoints those due now.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from airflow.sdk import Asset, BaseOperator, Context

from delta_ops.airflow.hook import table_storage_options
from delta_ops.airflow.triggers import CommitWatch, describe
from delta_ops.errors import DeltaOpsError
from delta_ops.storage import Storage


class DueTables(BaseOperator):
    """Returns ``[{"table", "table_name", "delta_ops_conn_id", "storage_options"}, ...]`` for
    the due tables the triggering events name (each once, in the order they became due).

    Args:
        lake: the lake's asset the watcher updates.
        tables: each table's checkpoint arguments by its name.
        min_commits: the watcher's (for a run started by hand).
    """

    ui_color = "#cde8f5"

    def __init__(
        self,
        *,
        lake: Asset,
        tables: Mapping[str, Mapping[str, Any]],
        min_commits: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.lake = lake
        self.tables = {name: dict(arguments) for name, arguments in tables.items()}
        self.min_commits = min_commits

    def execute(self, context: Context) -> list[dict[str, Any]]:
        events: Sequence[Any] = context["triggering_asset_events"].get(self.lake, [])
        names: list[str] = []
        for event in events:
            for due in (event.extra or {}).get("payload", {}).get("due", []):
                if due["table"] in self.tables and due["table"] not in names:
                    names.append(due["table"])
        if not events:  # started by hand: look now
            names = [name for name in self.tables if self._due_now(name)]
        self.log.info("%d table(s) due for a checkpoint: %s", len(names), ", ".join(names))
        return [self.tables[name] for name in names]

    def _due_now(self, name: str) -> bool:
        given = self.tables[name]
        try:
            options = table_storage_options(given["delta_ops_conn_id"], given["storage_options"])
            watch = CommitWatch(Storage.open(given["table"], options), self.min_commits)
            data = watch.look()
        except DeltaOpsError as exc:
            self.log.warning("%s: cannot look at the commits: %s", name, exc)
            return False
        self.log.info("%s", describe(name, data))
        return bool(data["status"] == "due")


__all__ = ["DueTables"]
