"""A sensor that waits until commits piled up on a table: time for a checkpoint.

`DeltaCommitSensor` succeeds once the commits since the table's last checkpoint reach
``min_commits`` (default: the table's ``delta.checkpointInterval``), as Dagster's commit sensor
requests a checkpoint run, and returns the look's data (version, commits since the checkpoint,
the threshold) as its XCom. It looks once at once; while the table is not due it defers to
`delta_ops.airflow.triggers.DeltaCommitTrigger` (``deferrable=True``, the default: no worker
slot is held while it waits), or pokes every ``poke_interval`` in the worker. Every look reads
only the commits after the previous one (the trigger gets the cursor with it).

A table whose protocol refuses a checkpoint fails the sensor without retrying, naming the
feature; an unreadable table fails it (retryably when the error is transient).

Example (a DAG file):

    wait = DeltaCommitSensor(task_id="wait_for_commits", table="s3://lake/events",
                             delta_ops_conn_id="lake_s3", poke_interval=60)
    wait >> DeltaCheckpointOperator(task_id="checkpoint", table="s3://lake/events",
                                    delta_ops_conn_id="lake_s3")
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any, ClassVar, NoReturn

from airflow.sdk import BaseSensorOperator, Context, PokeReturnValue
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from delta_ops.airflow.hook import table_storage_options
from delta_ops.airflow.triggers import CommitWatch, DeltaCommitTrigger, describe
from delta_ops.errors import DeltaOpsError
from delta_ops.storage import Storage


class DeltaCommitSensor(BaseSensorOperator):
    """Waits until a table is due for a checkpoint (see the module's doc).

    Args:
        table: the table's path or URL (templated).
        delta_ops_conn_id: a connection holding its storage options.
        storage_options: options over the connection's (templated).
        min_commits: commits since the checkpoint that make it due (default: the table's
            ``delta.checkpointInterval``).
        deferrable: wait in the triggerer rather than a worker.
        **kwargs: ``BaseSensorOperator``'s (``poke_interval``, ``timeout``, ``mode``, ...).
    """

    template_fields = ("table", "storage_options")
    template_fields_renderers: ClassVar[dict[str, str]] = {"storage_options": "json"}
    ui_color = "#cde8f5"

    def __init__(
        self,
        *,
        table: str,
        delta_ops_conn_id: str | None = None,
        storage_options: Mapping[str, Any] | None = None,
        min_commits: int | None = None,
        deferrable: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.table = table
        self.delta_ops_conn_id = delta_ops_conn_id
        self.storage_options = dict(storage_options) if storage_options else None
        self.min_commits = min_commits
        self.deferrable = deferrable
        self._watch: CommitWatch | None = None

    def _look(self) -> dict[str, Any]:
        try:
            if self._watch is None:
                options = table_storage_options(self.delta_ops_conn_id, self.storage_options)
                self._watch = CommitWatch(Storage.open(self.table, options), self.min_commits)
            data = {"table": self.table, **self._watch.look()}
        except DeltaOpsError as exc:
            self._fail(str(exc), retryable=exc.retryable)
        self.log.info("%s", describe(self.table, data))
        if data["status"] == "refused":
            self._fail(f"not checkpointed: {data['reason']}", retryable=False)
        return data

    def _fail(self, message: str, *, retryable: bool) -> NoReturn:
        error = AirflowException if retryable else AirflowFailException
        raise error(f"{self.table}: {message}")

    def execute(self, context: Context) -> Any:
        if not self.deferrable:
            return super().execute(context)
        data = self._look()
        if data["status"] == "due":
            return data
        assert self._watch is not None  # _look made it
        self.defer(
            trigger=DeltaCommitTrigger(
                self.table,
                delta_ops_conn_id=self.delta_ops_conn_id,
                storage_options=self.storage_options,
                min_commits=self.min_commits,
                poll_interval=self.poke_interval,
                **self._watch.cursor(),
            ),
            method_name="execute_complete",
            timeout=timedelta(seconds=self.timeout),
        )

    def poke(self, context: Context) -> PokeReturnValue:
        data = self._look()
        return PokeReturnValue(is_done=data["status"] == "due", xcom_value=data)

    def execute_complete(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        """Where the deferred sensor resumes: the trigger's event, or its error."""
        if event["status"] == "error":
            self._fail(event["error"], retryable=bool(event["retryable"]))
        if event["status"] == "refused":
            self._fail(f"not checkpointed: {event['reason']}", retryable=False)
        self.log.info("%s", describe(self.table, event))
        return event


__all__ = ["DeltaCommitSensor"]
