"""A run on the Spark engine as a job of its own, which a deferrable operator waits for.

``DeltaVacuumOperator(..., engine="spark", deferrable=True)`` does not drive Spark from its
task: `submit` starts the run as a process of its own (``python -m
delta_ops.airflow.spark_jobs``, the Spark driver, detached from the task), and the task
defers to `DeltaJobTrigger`, which waits in the triggerer for the job's outcome file;
the task resumes (``execute_complete``) with the result as its XCom, as a run in the task would
return it. No worker slot is held while Spark works, as Databricks' deferrable operators do.

The job gets what it needs in its environment (`JOB_ENV`, JSON: the operation, the table,
the rendered options, the storage options, the Spark master and options the connection named),
never on disk; it records its run in the operation history itself and writes its outcome
(`Outcome`'s fields) atomically to ``<job_folder>/<dag>__<task>__<run>__<try>.json``,
its log beside it (``.log``).

Limits, by design of this first form:

* the job runs on the worker's host, detached: it outlives the task's process (Local and
  Celery executors), not a Kubernetes pod that ends when the task defers;
* the triggerer must see `job_folder` (default: the host's temporary folder): the same host
  (``airflow standalone``, ``airflow dags test``) or a folder they share;
* killing the deferred task does not stop the job (it finishes, or is stopped by Spark's UI);
  the table stays readable either way, as with any stopped run;
* a Spark Connect engine, whose driver is a server, would let the job run anywhere; that form
  waits for the Connect engine.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from delta_ops.airflow.engines import spark_engine
from delta_ops.errors import DeltaOpsError
from delta_ops.ops.operation import Naming
from delta_ops.ops.registry import OPERATIONS
from delta_ops.ops.results import to_data
from delta_ops.service.history import OperationHistory
from delta_ops.service.runs import Run, run_operation

#: the environment variable holding a job's `JobSpec` as JSON
JOB_ENV = "DELTA_OPS_JOB"
DEFAULT_JOB_FOLDER = Path(tempfile.gettempdir()) / "delta-ops-jobs"


@dataclass(frozen=True)
class JobSpec:
    """What a job runs (plain data: it travels as JSON)."""

    operation: str
    table: str
    options: dict[str, Any]  # the rendered raw values, parsed by the job
    version: int | None
    dry_run: bool
    storage_options: dict[str, Any] | None
    history_location: str | None  # None: the run is not recorded
    table_name: str
    spark: tuple[str, dict[str, str]] | None  # the connection's master and options
    outcome_path: str


@dataclass(frozen=True)
class Submitted:
    """A started job: its process and where its outcome will be."""

    pid: int
    outcome_path: str
    log_path: str


def run_data(run: Run[Any, Any], dry_run: bool) -> dict[str, Any]:
    """What a run returns as XCom: the plan's data on a dry run, the result's otherwise."""
    if dry_run:
        return {**to_data(run.plan), "dry_run": True, "warnings": list(run.warnings)}
    return {**to_data(run.result), "dry_run": False}


def job_path(folder: str | Path, dag_id: str, task_id: str, run_id: str, try_number: int) -> Path:
    """Where a task try's job writes its outcome (a name safe on every filesystem)."""
    name = "__".join([dag_id, task_id, run_id, str(try_number)])
    return Path(folder) / (re.sub(r"[^A-Za-z0-9_.-]", "_", name) + ".json")


def submit(spec: JobSpec) -> Submitted:
    """Start the job, detached from this process (its own session: a task's end or kill does
    not reach it)."""
    outcome = Path(spec.outcome_path)
    outcome.parent.mkdir(parents=True, exist_ok=True)
    outcome.unlink(missing_ok=True)  # a previous try's
    log_path = outcome.with_suffix(".log")
    env = {**os.environ, JOB_ENV: json.dumps(asdict(spec))}
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", __name__],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return Submitted(process.pid, str(outcome), str(log_path))


def _running(pid: int) -> bool:
    """Whether the process still runs (a finished child not yet reaped counts as ended)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
    except OSError:  # no /proc: ask the kernel
        try:
            os.kill(pid, 0)
        except OSError:
            return False
        return True


def _event(payload: dict[str, Any]) -> TriggerEvent:
    return TriggerEvent(payload)  # type: ignore[no-untyped-call]  # Airflow's is untyped


class DeltaJobTrigger(BaseTrigger):
    """Fires once the job's outcome file is there (its content is the event's payload), or
    with ``status`` ``error`` when the job's process ended without one (its log named).

    Args:
        outcome_path: where the job writes its outcome.
        pid: the job's process.
        poll_interval: seconds between looks.
    """

    def __init__(self, outcome_path: str, pid: int, poll_interval: float = 5.0) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # Airflow's base is untyped
        self.outcome_path = outcome_path
        self.pid = pid
        self.poll_interval = poll_interval

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{__name__}.DeltaJobTrigger",
            {
                "outcome_path": self.outcome_path,
                "pid": self.pid,
                "poll_interval": self.poll_interval,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        path = Path(self.outcome_path)
        while True:
            ended = not _running(self.pid)  # before the look: an outcome written just then
            if path.exists():
                yield _event(json.loads(await asyncio.to_thread(path.read_text)))
                return
            if ended:
                log = path.with_suffix(".log")
                yield _event(
                    {
                        "status": "error",
                        "error": f"the job (process {self.pid}) ended without an outcome;"
                        f" its log: {log}",
                        "retryable": True,
                    }
                )
                return
            await asyncio.sleep(self.poll_interval)


@dataclass(frozen=True)
class Outcome:
    """What a job ends with (written as JSON to its outcome path)."""

    status: str  # "done" or "error"
    data: dict[str, Any] | None = None
    nothing_to_do: bool = False
    idle_reason: str = ""
    error: str = ""
    retryable: bool = False


def run_job(spec: JobSpec) -> Outcome:
    """Run the spec's operation on the Spark engine here (the job's process)."""
    operation = OPERATIONS[spec.operation]
    try:
        values = operation.parse(spec.options, Naming.ARGUMENT)
        engine = spark_engine(
            (spec.spark[0], dict(spec.spark[1])) if spec.spark is not None else None
        )
        history = (
            OperationHistory(spec.history_location, spec.storage_options)
            if spec.history_location
            else None
        )
        run = run_operation(
            operation,
            spec.table,
            values,
            engine,
            version=spec.version,
            storage_options=spec.storage_options,
            dry_run=spec.dry_run,
            skip_idle=True,
            progress=print,
            history=history,
            table_name=spec.table_name,
            front_end="airflow",
        )
    except DeltaOpsError as exc:
        return Outcome("error", error=str(exc), retryable=exc.retryable)
    if run.plan.nothing_to_do:
        return Outcome("done", nothing_to_do=True, idle_reason=operation.idle_reason(run.plan))
    return Outcome("done", data=run_data(run, spec.dry_run))


def _write_outcome(path: str, outcome: Mapping[str, Any]) -> None:
    """Write atomically: the trigger reads either nothing or the whole outcome."""
    temporary = f"{path}.partial"
    Path(temporary).write_text(json.dumps(outcome, default=str))
    os.replace(temporary, path)


def main() -> int:
    """The job's process: run the spec in `JOB_ENV`, write its outcome."""
    given = json.loads(os.environ[JOB_ENV])
    spark = given.get("spark")
    spec = JobSpec(**{**given, "spark": tuple(spark) if spark else None})
    try:
        outcome = run_job(spec)
    except BaseException as exc:
        _write_outcome(
            spec.outcome_path,
            asdict(Outcome("error", error=f"internal error: {type(exc).__name__}: {exc}")),
        )
        raise
    _write_outcome(spec.outcome_path, asdict(outcome))
    return 0


if __name__ == "__main__":
    sys.exit(main())


__all__ = [
    "DEFAULT_JOB_FOLDER",
    "JOB_ENV",
    "DeltaJobTrigger",
    "JobSpec",
    "Outcome",
    "Submitted",
    "job_path",
    "run_data",
    "run_job",
    "submit",
]
