"""The one line a failed maintenance run is reported with, whichever orchestrator ran it.

Dagster's run-failure sensor (`delta_ops.dagster.alerts`) and Airflow's failure callback
(`delta_ops.airflow.alerts`) say the same thing the same way, so an alert channel fed by both
reads alike:

    failure_line(job="lake_maintenance", step="events.vacuum", table="events",
                 error="vacuum failed: ...", link="https://airflow.example.com/...")
    # 'delta-ops: lake_maintenance (step events.vacuum) failed for events: vacuum failed: ...
    #  | https://airflow.example.com/...'

The error is folded onto one line (a traceback's or a message's newlines become spaces), less
the table's name where it opens with it (an operator's failure says ``events: vacuum failed:
...``; the line names the table already).
"""

from __future__ import annotations


def failure_line(*, job: str, step: str | None, table: str, error: str, link: str) -> str:
    """One line: the job (DAG) and step (task) that failed, the table, the error, and where to
    look (a link to the run, or ``run <id>`` when no address is known)."""
    where = f" (step {step})" if step else ""
    # the line names the table once: not again where the error opens with it
    message = " ".join(error.split()).removeprefix(f"{table}: ") or "unknown error"
    return f"delta-ops: {job}{where} failed for {table}: {message} | {link}"


__all__ = ["failure_line"]
