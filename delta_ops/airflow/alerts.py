"""Alerts for failed maintenance tasks: which table, which DAG and task, what went wrong, where.

`failure_callback` makes an ``on_failure_callback`` (the DAG factory sets it on every
task) that turns a failed task into a `MaintenanceFailure` and logs its one line, the
same line Dagster's run-failure sensor reports (`delta_ops.service.failure_notice`):

    delta-ops: lake_maintenance (step events.vacuum) failed for events: vacuum failed:
    ... | http://airflow.example.com/dags/lake_maintenance/runs/.../tasks/events.vacuum

Pass `notify` to send it on as well: any callable taking a `MaintenanceFailure` (a Slack post,
a page); Airflow's own notifiers work too, set as the callback instead. The link is the task's
log in the UI (Airflow's ``[api] base_url``), or under `base_url` when given.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeAlias
from urllib.parse import quote

from airflow.sdk import Context
from airflow.sdk.exceptions import AirflowException

from delta_ops.errors import DeltaOpsError
from delta_ops.service.failure_notice import failure_line


@dataclass(frozen=True)
class MaintenanceFailure:
    """One failed maintenance task, as an alert should tell it."""

    table: str
    dag_id: str
    task_id: str
    error: str
    run_id: str
    url: str | None

    @property
    def message(self) -> str:
        """One line: DAG and task, the table, the error, and where to look."""
        link = self.url or f"run {self.run_id}"
        return failure_line(
            job=self.dag_id, step=self.task_id, table=self.table, error=self.error, link=link
        )


Notifier: TypeAlias = Callable[[MaintenanceFailure], None]


def error_text(exc: BaseException | str | None) -> str:
    """What failed, as an alert says it: the message of delta-ops' and Airflow's own errors
    (they name the table and operation), the type and message of anything else."""
    if exc is None:
        return "unknown error"
    if isinstance(exc, str):  # Airflow passes some failures as text
        return exc
    if isinstance(exc, (DeltaOpsError, AirflowException)):
        return str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def table_of(task: Any) -> str:
    """The table a task works on: an operator's display name, a sensor's table."""
    name = getattr(task, "display_name", None) or getattr(task, "table", None)
    return str(name) if name else "several tables"


def failure_of(context: Context, base_url: str | None = None) -> MaintenanceFailure:
    """The failure a failed task's callback context describes."""
    ti = context["ti"]
    task = context["task"]
    if base_url:
        run = quote(ti.run_id, safe="")
        url: str | None = f"{base_url.rstrip('/')}/dags/{ti.dag_id}/runs/{run}/tasks/{ti.task_id}"
    else:
        url = getattr(ti, "log_url", None)
    return MaintenanceFailure(
        table=table_of(task),
        dag_id=ti.dag_id,
        task_id=ti.task_id,
        error=error_text(context.get("exception")),
        run_id=ti.run_id,
        url=url,
    )


def failure_callback(
    notify: Notifier | None = None, *, base_url: str | None = None
) -> Callable[[Context], None]:
    """An ``on_failure_callback`` logging each failure's line, and passing it to `notify`."""

    def on_failure(context: Context) -> None:
        failure = failure_of(context, base_url)
        context["task"].log.error("%s", failure.message)
        if notify is not None:
            notify(failure)

    return on_failure


__all__ = [
    "MaintenanceFailure",
    "Notifier",
    "error_text",
    "failure_callback",
    "failure_of",
    "table_of",
]
