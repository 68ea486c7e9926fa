"""The DAG factory: a fleet of Delta tables maintained by Airflow, in one call per DAG.

Airflow's counterpart of Dagster's `build_delta_maintenance_defs`:

* `build_delta_maintenance_dag`: per table a task group, ``[rewrites] ->
  [enable_row_tracking] -> checkpoint -> cleanup -> vacuum``, each task one of
  `delta_ops.airflow.operators`' operators, retried with backoff for transient errors only,
  skipped with the plan's reason when there is nothing to do, and reporting a failure in one
  line (`delta_ops.airflow.alerts`). A table's steps run one after the other and the DAG one
  run at a time, so they never overlap; how many tables work at once is set once, for the
  fleet: the DAG's ``max_active_tasks`` and the slots of one ``pool``. Each task's result is
  an event on its own maintenance asset (``delta_maintenance/<name>/<table>/<action>``),
  which plots it over time; a skipped step leaves none. Its ``params`` make the "Trigger DAG
  w/ config" form: a dry run, a vacuum or log retention, a subset of the tables, checked by
  the run's first task (`delta_ops.airflow.run_config`).
* `build_delta_commit_dag`: one DAG for the lake, scheduled on the lake's asset, which
  one ``AssetWatcher`` (`delta_ops.airflow.triggers.DeltaLakeCommitEventTrigger`) updates
  whenever tables reached ``delta.checkpointInterval`` commits since their checkpoint: it
  checkpoints those tables, a mapped task instance each (`delta_ops.airflow.due_tables`), at
  most ``max_active_tis_per_dag`` at once. One watcher polls the whole lake, so 1,000 tables
  are one triggerer coroutine, not 1,000 (`benchmarks/bench_airflow_lake.py`).

Like Dagster's schedules and sensors, the DAGs start **paused**: deploying a DAG file never
starts deleting files by itself (``start_automation=True`` to start them running). A ``pool``
must exist before the scheduler runs its tasks (Airflow does not create pools): ``airflow
pools set NAME SLOTS DESCRIPTION`` once, or ``airflow pools import`` the file
`pools_file` writes. A DAG file:

    from delta_ops.airflow.dags import build_delta_commit_dag, build_delta_maintenance_dag

    maintenance = build_delta_maintenance_dag("/data/warehouse", name="lake",
                                              options={"vacuum": {"retention": "7d"}})
    commits = build_delta_commit_dag("/data/warehouse", name="lake")
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, Asset, AssetWatcher, BaseOperator, TaskGroup, TriggerRule

from delta_ops.airflow.alerts import Notifier, failure_callback
from delta_ops.airflow.due_tables import DueTables
from delta_ops.airflow.operators import check_option_names, operator_for
from delta_ops.airflow.run_config import (
    CHECK_TASK_ID,
    CheckRunConfig,
    apply_run_config,
    dag_params,
)
from delta_ops.airflow.tables import DeltaTable, as_tables
from delta_ops.airflow.triggers import DEFAULT_POLL_SECONDS, DeltaLakeCommitEventTrigger
from delta_ops.errors import InvalidValue
from delta_ops.ops.registry import OPERATIONS
from delta_ops.ops.row_tracking import OPERATION as ROW_TRACKING
from delta_ops.service.due import Action
from delta_ops.service.history import fleet_history

#: what every table gets, in order, after its rewrites (and row-tracking backfill)
CHAIN = (Action.CHECKPOINT.value, Action.CLEANUP.value, Action.VACUUM.value)
#: operations that may run before the chain (``rewrites=``): they rewrite data files
REWRITES = (Action.PURGE.value, Action.COMPACT.value)
DEFAULT_START = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
TAGS = ("delta-ops",)


def _named(operation: str) -> str:
    """The one name of the operation `operation` names (its CLI spelling, or a name it had
    before, with a deprecation warning); an unknown name as it is, for the caller to refuse."""
    try:
        return OPERATIONS.canonical(operation, "options")
    except InvalidValue:
        return operation


#: Airflow's own pool, which needs no creating
DEFAULT_POOL = "default_pool"


def task_id(operation: str) -> str:
    """A task's id in its table's group: the operation's name (``enable_row_tracking``)."""
    return operation.replace("-", "_")


def table_asset(table: DeltaTable, watchers: Sequence[AssetWatcher] = ()) -> Asset:
    """The table's asset, named by its URI as a pipeline's ``Asset(uri)`` would be."""
    return Asset(uri=table.uri, name=table.uri, watchers=list(watchers))


def maintenance_asset(name: str, table: DeltaTable, operation: str) -> Asset:
    """The asset one maintenance step's results are events of."""
    action = OPERATIONS.canonical(operation)
    return Asset(
        name=f"delta_maintenance/{name}/{table.name}/{action}",
        uri=f"x-delta-ops://{name}/{table.safe_name}/{action}",
        group="delta_maintenance",
    )


def _default_args(
    retries: int, retry_delay: dt.timedelta, notify: Notifier | None, base_url: str | None
) -> dict[str, Any]:
    return {
        "owner": "delta-ops",
        "retries": retries,
        "retry_delay": retry_delay,
        "retry_exponential_backoff": 2.0,
        "on_failure_callback": failure_callback(notify, base_url=base_url),
    }


def _step(
    operation: str,
    table: DeltaTable,
    *,
    name: str,
    delta_ops_conn_id: str | None,
    storage_options: Mapping[str, Any] | None,
    options: Mapping[str, Mapping[str, Any]],
    dry_run: bool,
    spark_conn_id: str | None,
    pool: str | None,
    history: str | None,
    **more: Any,
) -> BaseOperator:
    """One maintenance task of one table; `history` is where it records its runs (None:
    nowhere); `more` are BaseOperator's arguments."""
    operator = operator_for(operation)
    return operator(
        task_id=task_id(operation),
        table=table.url,
        table_name=table.name,
        delta_ops_conn_id=table.delta_ops_conn_id or delta_ops_conn_id,
        storage_options={**(storage_options or {}), **table.storage_options} or None,
        dry_run=dry_run,
        spark_conn_id=spark_conn_id,
        pool=pool or DEFAULT_POOL,
        outlets=[maintenance_asset(name, table, operation)],
        inlets=[table_asset(table)],
        # a step runs when the steps before it succeeded or had nothing to do
        trigger_rule=TriggerRule.NONE_FAILED,
        history=history is not None,
        history_location=history,
        **dict(options.get(operation, {})),
        **more,
    )


def build_delta_maintenance_dag(
    tables: Iterable[DeltaTable | str] | str,
    *,
    name: str = "delta",
    dag_id: str | None = None,
    schedule: str | None = "0 3 * * *",
    start_date: dt.datetime = DEFAULT_START,
    delta_ops_conn_id: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    rewrites: Sequence[str] = (),
    dry_run: bool = False,
    spark_conn_id: str | None = None,
    pool: str | None = None,
    max_active_tasks: int | None = None,
    retries: int = 3,
    retry_delay: dt.timedelta = dt.timedelta(seconds=30),
    notify: Notifier | None = None,
    base_url: str | None = None,
    start_automation: bool = False,
    tags: Sequence[str] = TAGS,
    history: bool | str = True,
) -> DAG:
    """The maintenance DAG of a fleet of Delta tables.

    Args:
        tables: `DeltaTable`s, table URLs, or one warehouse root to discover tables in.
        name: the fleet's name: the DAG's (``<name>_maintenance``), the pools' and the
            maintenance assets' prefix, so several fleets live side by side.
        dag_id: the DAG's id, if not ``<name>_maintenance``.
        schedule: when it runs (a cron expression, a timetable, None for manual runs).
        start_date: the first date a schedule counts from.
        delta_ops_conn_id: the connection holding every table's storage options (a table's
            own wins).
        storage_options: options over the connection's, for every table (a table's win).
        options: each operation's options, by its name
            (``{"vacuum": {"retention": "7d", "engine": "spark"}}``), as the CLI takes them;
            a name the operation does not take, or a bad value, fails the DAG's import in one
            line naming the operation and the option.
        rewrites: operations to run before the chain (``"purge"``, ``"compact"``), in order.
        dry_run: plan only: every task logs and returns its plan and changes nothing.
        spark_conn_id: the Spark connection of the steps whose ``engine`` is ``spark``.
        pool: the pool every step runs in (Airflow's ``default_pool`` when None): created
            once (``airflow pools set NAME SLOTS DESCRIPTION``, or `pools_file`), its
            slots bound how many steps run at once across the fleet's DAGs.
        max_active_tasks: how many steps of one run work at once (Airflow's
            ``[core] max_active_tasks_per_dag`` when None).
        retries: how often a step retries a retryable error (a concurrent commit, a store's
            hiccup), with exponential backoff from `retry_delay`; other errors never retry.
        retry_delay: the first retry's delay.
        notify: called with a `MaintenanceFailure` for every failed step (they are logged
            anyway).
        base_url: the Airflow UI's address for the alerts' links (default: Airflow's own).
        start_automation: the DAG starts running when deployed (default: paused).
        tags: the DAG's tags.
        history: where every step records its runs, the operation history
            (`delta_ops.service.history`): True for ``_delta_ops_history`` in the warehouse root
            (or the folder holding the tables), a path or URL, or False for nowhere.
    """
    targets = as_tables(tables)
    names = [t.name for t in targets]
    location = fleet_history(
        history, tables if isinstance(tables, str) else [t.url for t in targets]
    )
    options = {_named(operation): given for operation, given in (options or {}).items()}
    unknown = sorted(set(options) - set(OPERATIONS))
    if unknown:
        raise InvalidValue(f"options for unknown operations {unknown}; known: {sorted(OPERATIONS)}")
    for operation, given in options.items():  # a misspelled name fails the import in one line
        check_option_names(OPERATIONS[operation], given)
    for rewrite in rewrites:
        if rewrite not in REWRITES:
            raise InvalidValue(f"rewrites: {rewrite!r} is not one of {', '.join(REWRITES)}")
    with DAG(
        dag_id or f"{name}_maintenance",
        schedule=schedule,
        start_date=start_date,
        catchup=False,
        max_active_runs=1,
        is_paused_upon_creation=not start_automation,
        default_args=_default_args(retries, retry_delay, notify, base_url),
        tags=list(tags),
        description=f"delta-ops maintenance of {len(targets)} Delta table(s)",
        doc_md=__doc__,
        params=dag_params(names, dry_run=dry_run),
    ) as dag:
        if max_active_tasks:  # else Airflow's [core] max_active_tasks_per_dag
            dag.max_active_tasks = max_active_tasks
        check = CheckRunConfig(task_id=CHECK_TASK_ID, table_names=names, dry_run=dry_run)
        for table in targets:
            with TaskGroup(group_id=table.safe_name, tooltip=f"maintenance of {table.url}"):
                steps = [*rewrites]
                if table.enable_row_tracking:
                    steps.append(ROW_TRACKING.name)
                steps.extend(CHAIN)
                previous: BaseOperator | None = None
                for operation in steps:
                    task = _step(
                        operation,
                        table,
                        name=name,
                        delta_ops_conn_id=delta_ops_conn_id,
                        storage_options=storage_options,
                        options=options,
                        dry_run=dry_run,
                        spark_conn_id=spark_conn_id,
                        pool=pool,
                        history=location,
                        pre_execute=apply_run_config(table.name, operation, names, dry_run=dry_run),
                    )
                    (check if previous is None else previous) >> task
                    previous = task
    return dag


def lake_asset(name: str) -> Asset:
    """The asset a lake's commit watcher updates with the tables newly due."""
    return Asset(
        name=f"delta_commits/{name}", uri=f"x-delta-ops://{name}/commits", group="delta_commits"
    )


def build_delta_commit_dag(
    tables: Iterable[DeltaTable | str] | str,
    *,
    name: str = "delta",
    delta_ops_conn_id: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
    options: Mapping[str, Any] | None = None,
    min_commits: int | None = None,
    poll_interval: float = DEFAULT_POLL_SECONDS,
    spark_conn_id: str | None = None,
    pool: str | None = None,
    max_active_tis_per_dag: int = 8,
    retries: int = 3,
    retry_delay: dt.timedelta = dt.timedelta(seconds=30),
    notify: Notifier | None = None,
    base_url: str | None = None,
    start_automation: bool = False,
    tags: Sequence[str] = TAGS,
    history: bool | str = True,
) -> DAG:
    """One DAG for the lake, ``<name>_checkpoint_on_commits``: scheduled on the lake's asset
    (`lake_asset`), which one `DeltaLakeCommitEventTrigger` watcher updates whenever
    tables became due (the commits since their checkpoint reached `min_commits`, default each
    table's ``delta.checkpointInterval``); it checkpoints each due table (with `options`, the
    checkpoint's), a mapped task instance per table, at most `max_active_tis_per_dag` at once.
    One watcher and one DAG whatever the number of tables. The other arguments are
    `build_delta_maintenance_dag`'s."""
    check_option_names(OPERATIONS["checkpoint"], options or {})
    targets = as_tables(tables)
    location = fleet_history(
        history, tables if isinstance(tables, str) else [t.url for t in targets]
    )
    arguments = {
        table.name: {
            "table": table.url,
            "table_name": table.name,
            "delta_ops_conn_id": table.delta_ops_conn_id or delta_ops_conn_id,
            "storage_options": {**(storage_options or {}), **table.storage_options} or None,
        }
        for table in targets
    }
    watcher = AssetWatcher(
        name=f"{name}_commits",
        trigger=DeltaLakeCommitEventTrigger(
            [
                {
                    "name": table_name,
                    "url": given["table"],
                    "delta_ops_conn_id": given["delta_ops_conn_id"],
                    "storage_options": given["storage_options"],
                }
                for table_name, given in arguments.items()
            ],
            min_commits=min_commits,
            poll_interval=poll_interval,
        ),
    )
    lake = lake_asset(name)
    lake.watchers = [watcher]
    with DAG(
        f"{name}_checkpoint_on_commits",
        schedule=[lake],
        start_date=DEFAULT_START,
        catchup=False,
        max_active_runs=1,
        is_paused_upon_creation=not start_automation,
        default_args=_default_args(retries, retry_delay, notify, base_url),
        tags=list(tags),
        description=f"delta-ops: checkpoint the tables of {name} when commits piled up",
    ) as dag:
        due = DueTables(task_id="due_tables", lake=lake, tables=arguments, min_commits=min_commits)
        operator_for("checkpoint").partial(
            task_id="checkpoint",
            spark_conn_id=spark_conn_id,
            pool=pool or DEFAULT_POOL,
            max_active_tis_per_dag=max_active_tis_per_dag,
            history=location is not None,
            history_location=location,
            **dict(options or {}),
        ).expand_kwargs(due.output)
    return dag


def pool_specs(*dags: DAG, slots: int = 4) -> dict[str, dict[str, Any]]:
    """The pools the DAGs' tasks use besides Airflow's own (`slots` each), as ``airflow pools
    import`` reads them."""
    specs: dict[str, dict[str, Any]] = {}
    for dag in dags:
        for task in dag.tasks:
            if task.pool and task.pool != DEFAULT_POOL and task.pool not in specs:
                description = f"delta-ops: maintenance steps running at once ({task.pool})"
                specs[task.pool] = {"slots": slots, "description": description}
    return specs


def pools_file(path: str | Path, *dags: DAG, slots: int = 4) -> Path:
    """Write `pool_specs` to `path` for ``airflow pools import PATH``."""
    target = Path(path)
    target.write_text(json.dumps(pool_specs(*dags, slots=slots), indent=2, sort_keys=True) + "\n")
    return target


__all__ = [
    "CHAIN",
    "REWRITES",
    "build_delta_commit_dag",
    "build_delta_maintenance_dag",
    "lake_asset",
    "maintenance_asset",
    "pool_specs",
    "pools_file",
    "table_asset",
    "task_id",
]
