"""Alerts for failed maintenance runs: which table, which op, what went wrong, where to look.

The run-failure sensor turns a failed run into a `MaintenanceFailure` (table, job, the
step that failed first, its error, the run's id and a link to it in the UI) and logs it; pass
`notify` to send it on as well. Any callable taking a `MaintenanceFailure` works;
`slack_notifier` posts to a Slack channel:

    defs = build_delta_maintenance_defs(
        tables,
        notify=slack_notifier("#data-alerts"),  # token from $SLACK_BOT_TOKEN
        webserver_url="https://dagster.example.com",
    )

With dagster-slack's `SlackResource` configured elsewhere, a one-line callable does the same:
``notify=lambda failure: slack.get_client().chat_postMessage(channel="#x", text=failure.message)``.
"""

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeAlias

import dagster as dg
from dagster._core.definitions.unresolved_asset_job_definition import (
    UnresolvedAssetJobDefinition,
)

from delta_ops.errors import MissingExtra
from delta_ops.service.failure_notice import failure_line

TABLE_TAG = "delta_ops/table"
WEBSERVER_URL_ENV = "DAGSTER_WEBSERVER_URL"

JobLike: TypeAlias = dg.JobDefinition | UnresolvedAssetJobDefinition


@dataclass(frozen=True)
class MaintenanceFailure:
    """One failed maintenance run, as an alert should tell it."""

    table: str
    job: str
    step: str | None
    error: str
    run_id: str
    run_url: str | None

    @property
    def message(self) -> str:
        """One line: table, job and step, the error, and where to look (the same line
        Airflow's failure callback gives, `delta_ops.service.failure_notice`)."""
        link = self.run_url or f"run {self.run_id}"
        return failure_line(
            job=self.job, step=self.step, table=self.table, error=self.error, link=link
        )


Notifier: TypeAlias = Callable[[MaintenanceFailure], None]


def slack_notifier(
    channel: str, *, token: str | None = None, base_url: str | None = None
) -> Notifier:
    """Post each failure to a Slack channel (`pip install delta-ops[slack]`). The bot token
    is `token` or $SLACK_BOT_TOKEN, read when an alert is sent; `base_url` is for a proxy or
    a test server."""

    def notify(failure: MaintenanceFailure) -> None:
        try:
            from slack_sdk import WebClient
        except ImportError:
            raise MissingExtra("slack", "delta_ops.dagster.alerts.slack_notifier") from None
        key = token or os.environ.get("SLACK_BOT_TOKEN")
        if not key:
            raise dg.Failure("slack_notifier: no token (pass token= or set SLACK_BOT_TOKEN)")
        client = WebClient(token=key, base_url=base_url) if base_url else WebClient(token=key)
        client.chat_postMessage(channel=channel, text=failure.message)

    return notify


def first_step_failure(instance: dg.DagsterInstance, run_id: str) -> tuple[str | None, str | None]:
    """The step that failed first in a run and its error message (what an alert should say)."""
    records = instance.get_records_for_run(
        run_id, of_type=dg.DagsterEventType.STEP_FAILURE, limit=1
    ).records
    for record in records:
        event = record.event_log_entry.dagster_event
        if event is None:
            continue
        data = event.step_failure_data
        message = data.error.message.strip() if data and data.error else None
        return event.step_key, message
    return None, None


def build_failure_sensor(
    prefix: str,
    jobs: Sequence[JobLike],
    *,
    notify: Notifier | None = None,
    webserver_url: str | None = None,
    default_status: dg.DefaultSensorStatus = dg.DefaultSensorStatus.STOPPED,
) -> dg.SensorDefinition:
    """Report every failed maintenance run: an error line in the sensor's log, and `notify`.

    `webserver_url` (or $DAGSTER_WEBSERVER_URL) makes the alert link to the run."""

    @dg.run_failure_sensor(
        name=f"{prefix}_run_failure_sensor",
        monitored_jobs=list(jobs),
        default_status=default_status,
    )
    def _on_failure(context: dg.RunFailureSensorContext) -> None:
        run = context.dagster_run
        step, error = first_step_failure(context.instance, run.run_id)
        base = webserver_url or os.environ.get(WEBSERVER_URL_ENV)
        failure = MaintenanceFailure(
            table=run.tags.get(TABLE_TAG, "several tables"),
            job=run.job_name,
            step=step,
            error=error or context.failure_event.message or "unknown error",
            run_id=run.run_id,
            run_url=f"{base.rstrip('/')}/runs/{run.run_id}" if base else None,
        )
        context.log.error(failure.message)
        if notify is not None:
            notify(failure)

    return _on_failure


__all__ = [
    "MaintenanceFailure",
    "Notifier",
    "build_failure_sensor",
    "first_step_failure",
    "slack_notifier",
]
