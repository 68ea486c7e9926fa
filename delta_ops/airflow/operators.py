"""One Airflow operator per delta-ops operation, generated from the operation registry.

The CLI's subcommands and Dagster's jobs come from `delta_ops.ops.registry`; so do these
operators, one class per operation, named after it: ``DeltaCheckpointOperator``,
``DeltaCleanupOperator``, ``DeltaVacuumOperator``, ``DeltaEnableRowTrackingOperator``,
``DeltaPurgeOperator``, ``DeltaCompactOperator``, and one for every operation added later
(`OPERATORS` maps each operation's name to its class). Each takes:

* ``table``: the table's path or URL; ``delta_ops_conn_id`` and ``storage_options`` for an
  object store (`delta_ops.airflow.hook`; given options win over the connection's);
* the operation's options by their names, as the CLI's flags and Dagster's config take them
  (``retention="7d"``, ``force=True``, ``target_size="256MB"``, ``engine="spark"``), parsed by
  the same code: a bad value fails the DAG's import in one line naming the operation and the
  argument (``vacuum: retention: '30' is not a duration ...``), and a templated one
  (``"{{ params.retention }}"``) when the task runs, recorded in the operation history as a
  failed run. A misspelled argument fails the import in one line too, with the closest name
  and the operation's options (not Airflow's ``TypeError`` listing the kwargs). The CLI's own
  conveniences (``--now``) are not offered, as in Dagster;
* ``engine="spark"`` with ``spark_conn_id`` (`delta_ops.airflow.engines`), ``version`` for the
  operations that act on a chosen version (checkpoint: the CLI's ``--version``), ``dry_run``;
* ``deferrable=True`` (with ``engine="spark"``): the run is a Spark job of its own and the task
  defers while it works, holding no worker slot (`delta_ops.airflow.spark_jobs`, which says
  its limits; ``job_folder`` where the job's outcome and log go).

What a run does:

* plans, and logs the plan as ``delta-ops <op> --dry-run`` prints it, listing at most
  ``max_listed`` files (a vacuum's plan has a line per file);
* skips the task (``AirflowSkipException``, the plan's reason) when there is nothing to do, so
  a run's grid shows real work only;
* executes (not with ``dry_run=True``: then the plan is the result), logging progress of long
  steps every ``progress_every_seconds``, then what it did (at most ``max_listed`` files);
* returns the result as plain data (`delta_ops.ops.results.to_data`, the CLI's ``--json``): the
  task's XCom, and the ``extra`` of an event on each of the task's outlet assets. Lists longer
  than ``max_listed`` (1000: a vacuum's deleted paths) are cut to their first entries and named
  under ``truncated``; their counts stay whole;
* fails without retrying on a delta-ops error that retrying cannot fix (a bad value, a feature
  the table's protocol refuses: ``AirflowFailException`` naming the table and operation), and
  lets a retryable one (a concurrent commit, a store's hiccup) through to the task's
  ``retries``;
* reports its table to OpenLineage as input and output dataset, with the operation, the
  versions before and after, files and bytes (`delta_ops.airflow.lineage`), when the
  OpenLineage provider is installed;
* when the task is killed (``on_kill``: marked failed, cleared, timed out), cancels its Spark
  jobs and stops at once with ``AirflowTaskTerminated``. Every operation writes in an order
  where stopping at any point leaves a table every reader reads, and running it again
  finishes the work (see the guarantees page).

Example (a DAG file):

    from delta_ops.airflow.operators import DeltaVacuumOperator

    DeltaVacuumOperator(task_id="vacuum_events", table="s3://lake/events",
                        delta_ops_conn_id="lake_s3", retention="7d", retries=3)
"""

from __future__ import annotations

import difflib
import inspect
import os
import re
import types
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar, NoReturn, cast

from airflow.sdk import Asset, BaseHook, BaseOperator, Context
from airflow.sdk.exceptions import (
    AirflowFailException,
    AirflowSkipException,
    AirflowTaskTerminated,
)

from delta_ops.airflow.engines import build_engine, cancel_spark_jobs, spark_settings
from delta_ops.airflow.hook import table_storage_options
from delta_ops.airflow.spark_jobs import (
    DEFAULT_JOB_FOLDER,
    DeltaJobTrigger,
    JobSpec,
    job_path,
    run_data,
    submit,
)
from delta_ops.errors import DeltaOpsError, InvalidValue
from delta_ops.ops.engines import ENGINE_NAMES, LOCAL, Engine
from delta_ops.ops.operation import AnyOperation, Naming, Option, listed
from delta_ops.ops.progress import LogLines, reporting
from delta_ops.ops.registry import OPERATIONS
from delta_ops.service.history import OperationHistory
from delta_ops.service.runs import Run, record_refusal, run_operation
from delta_ops.storage.warehouse import history_location

#: a value holding Jinja is parsed once Airflow has rendered it, when the task runs
_TEMPLATE = re.compile(r"{{|{%")
_PLAIN = (str, int, float, bool, type(None))
#: lists in a result longer than this are cut in the XCom and asset events
MAX_LISTED = 1000


def operator_options(operation: AnyOperation) -> tuple[Option, ...]:
    """The options an operator takes: the registry's, less the CLI's own conveniences."""
    return tuple(option for option in operation.options if not option.cli_only)


def operator_name(operation: AnyOperation) -> str:
    """``enable_row_tracking`` -> ``DeltaEnableRowTrackingOperator``."""
    words = re.split(r"[-_]", operation.name)
    return "Delta" + "".join(word.capitalize() for word in words) + "Operator"


def option_names(operation: AnyOperation) -> tuple[str, ...]:
    """The names of the options an operator of `operation` takes, ``version`` (the CLI's
    ``--version``) for one acting on a chosen version."""
    at_version = ("version",) if operation.at_version else ()
    return (*(o.name for o in operator_options(operation)), *at_version)


def check_option_names(
    operation: AnyOperation, names: Iterable[str], others: Iterable[str] = (), besides: str = ""
) -> None:
    """Refuse, in one line, a name in `names` that is neither one of the operation's options
    nor in `others` (a misspelled keyword): the operation, the name, the closest accepted name
    and the options; `besides` says what else is accepted."""
    options = option_names(operation)
    accepted = {*options, *others}
    for name in names:
        if name in accepted or name.startswith("_airflow"):  # Airflow's own, when mapping
            continue
        close = difflib.get_close_matches(name, sorted(accepted), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise InvalidValue(
            f"{operation.name}: no argument {name!r}{hint}; its options: {', '.join(options)}"
            + (f" ({besides})" if besides else "")
        )


def bounded(data: Mapping[str, Any], limit: int) -> dict[str, Any]:
    """`data` with every list longer than `limit` cut to its first `limit` entries; the keys of
    the cut lists under ``truncated``."""
    out: dict[str, Any] = {}
    cut = []
    for key, value in data.items():
        if isinstance(value, list) and len(value) > limit:
            value = value[:limit]
            cut.append(key)
        out[key] = value
    if cut:
        out["truncated"] = cut
    return out


def _templated(value: Any) -> bool:
    """True for a value Airflow renders or resolves later (Jinja text, an XComArg)."""
    if isinstance(value, str):
        return _TEMPLATE.search(value) is not None
    return not isinstance(value, _PLAIN)


class DeltaOperationOperator(BaseOperator):
    """What every generated operator shares; `OPERATORS` has one subclass per operation
    (see the module's doc for the arguments and what a run does)."""

    #: the registry's operation the subclass runs
    operation: ClassVar[AnyOperation]
    ui_color = "#cde8f5"
    template_fields_renderers: ClassVar[dict[str, str]] = {"storage_options": "json"}

    def __init__(
        self,
        *,
        table: str,
        delta_ops_conn_id: str | None = None,
        storage_options: Mapping[str, Any] | None = None,
        dry_run: bool = False,
        engine: str = "local",
        spark_conn_id: str | None = None,
        table_name: str | None = None,
        max_listed: int = MAX_LISTED,
        progress_every_seconds: float = 10.0,
        history: bool = True,
        history_location: str | None = None,
        deferrable: bool = False,
        job_folder: str | None = None,
        **kwargs: Any,
    ) -> None:
        operation = self.operation
        options = operator_options(operation)
        check_option_names(
            operation,
            kwargs,
            (*_OWN_ARGUMENTS, *_BASE_ARGUMENTS),
            f"besides {', '.join(_OWN_ARGUMENTS)} and BaseOperator's arguments",
        )
        given = {o.name: kwargs.pop(o.name) for o in options if o.name in kwargs}
        # the version to act on, for an operation that takes one (the CLI's --version)
        version = kwargs.pop("version", None) if operation.at_version else None
        super().__init__(**kwargs)
        self.table = table
        self.delta_ops_conn_id = delta_ops_conn_id
        self.storage_options = dict(storage_options) if storage_options else None
        self.plan_only = dry_run  # `dry_run` is BaseOperator's method (render the templates)
        self.spark_conn_id = spark_conn_id
        if operation.at_version:
            self.version = version
        self.table_name = table_name
        self.max_listed = max_listed
        self.progress_every_seconds = progress_every_seconds
        self.history = history
        self.history_location = history_location
        if any(o.name == "engine" for o in options):
            given.setdefault("engine", engine)
        elif engine != "local":
            raise InvalidValue(
                f"{operation.name}: engine: {engine!r}: it runs in this process, on no other engine"
            )
        for option in options:
            setattr(self, option.name, given.get(option.name))
        # engine="spark" only: the job runs elsewhere while the task defers (spark_jobs)
        self.deferrable = deferrable
        self.job_folder = job_folder
        spark = given.get("engine", engine)
        if deferrable and not _templated(spark) and spark != "spark":
            raise InvalidValue(
                f"{operation.name}: deferrable: the work runs in the task with engine"
                f" {spark!r}; deferrable=True needs engine='spark'"
            )
        self._engine: Engine = LOCAL
        self._working = False
        self._run: Run[Any, Any] | None = None  # the last run, for its lineage
        self._check_values()

    # ------------------------------------------------------------------ values
    def _raw_options(self) -> dict[str, Any]:
        return {o.name: getattr(self, o.name) for o in operator_options(self.operation)}

    def _check_values(self) -> None:
        """Parse every value that is not templated now, so a bad one fails the DAG's import
        naming the operation and the argument (the rest are parsed when the task runs)."""
        operation = self.operation
        for option in operator_options(operation):
            value = getattr(self, option.name)
            if not _templated(value):
                option.parse(value, operation.label(option, Naming.ARGUMENT))
        if self.operation.at_version and not _templated(self.version):
            self._version()

    def _version(self) -> int | None:
        if not self.operation.at_version or self.version is None:
            return None
        try:
            return int(str(self.version).strip())
        except ValueError:
            raise InvalidValue(
                f"{self.operation.name}: version: {self.version!r} is not a whole number"
            ) from None

    @property
    def display_name(self) -> str:
        """The table as alerts and messages name it: `table_name`, else the path's last part."""
        return self.table_name or os.path.basename(str(self.table).rstrip("/")) or str(self.table)

    # ------------------------------------------------------------------ running
    def execute(self, context: Context) -> dict[str, Any]:
        operation = self.operation
        if self.deferrable:
            self._defer(context)
        self._working = True
        try:
            values, version, options, history = self._prepare()
            try:
                lines = LogLines(self.log.info, every_s=self.progress_every_seconds)
                with reporting(lines):
                    run = run_operation(
                        operation,
                        self.table,
                        values,
                        self._engine,
                        version=version,
                        storage_options=options,
                        dry_run=self.plan_only,
                        skip_idle=True,
                        progress=self.log.info,
                        on_plan=self._log_plan,
                        history=history,
                        table_name=self.display_name,
                        front_end="airflow",
                    )
            except DeltaOpsError as exc:
                self._fail(exc)
            self._run = run
            if run.plan.nothing_to_do:
                raise AirflowSkipException(
                    f"{self.display_name}: {operation.name}: nothing to do:"
                    f" {operation.idle_reason(run.plan)}"
                )
            if not self.plan_only:
                said = listed(operation.describe_result(run.result), self.max_listed)
                self.log.info("%s: %s", self.display_name, said)
            data = run_data(run, self.plan_only)
        finally:
            self._working = False
        data = bounded(data, self.max_listed)
        self._record(context, data)
        return data

    def _defer(self, context: Context) -> NoReturn:
        """Start the run as a Spark job of its own and wait for it in the triggerer
        (`delta_ops.airflow.spark_jobs`); `execute_complete` resumes with its outcome."""
        try:
            options = table_storage_options(self.delta_ops_conn_id, self.storage_options)
            self.operation.parse(self._raw_options(), Naming.ARGUMENT)  # refused here, at once
            ti = context["ti"]
            job = submit(
                JobSpec(
                    operation=self.operation.name,
                    table=self.table,
                    options=self._raw_options(),
                    version=self._version(),
                    dry_run=self.plan_only,
                    storage_options=dict(options) if options else None,
                    history_location=(
                        (self.history_location or history_location([self.table]))
                        if self.history
                        else None
                    ),
                    table_name=self.display_name,
                    spark=spark_settings(BaseHook.get_connection(self.spark_conn_id))
                    if self.spark_conn_id
                    else None,
                    outcome_path=str(
                        job_path(
                            self.job_folder or DEFAULT_JOB_FOLDER,
                            ti.dag_id,
                            ti.task_id,
                            ti.run_id,
                            ti.try_number,
                        )
                    ),
                )
            )
        except DeltaOpsError as exc:
            self._fail(exc)
        self.log.info(
            "%s: %s runs as job %d (log: %s)",
            self.display_name,
            self.operation.name,
            job.pid,
            job.log_path,
        )
        self.defer(
            trigger=DeltaJobTrigger(job.outcome_path, job.pid),
            method_name="execute_complete",
        )

    def execute_complete(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        """Where a deferred run resumes: the job's outcome, as `execute` ends."""
        if event["status"] == "error":
            error = DeltaOpsError(event["error"])
            error.retryable = bool(event.get("retryable"))
            self._fail(error)
        if event.get("nothing_to_do"):
            raise AirflowSkipException(
                f"{self.display_name}: {self.operation.name}: nothing to do: {event['idle_reason']}"
            )
        data = bounded(event["data"], self.max_listed)
        self._record(context, data)
        return data

    def _prepare(
        self,
    ) -> tuple[Any, int | None, Mapping[str, Any] | None, OperationHistory | None]:
        """The parsed values (templated ones are rendered by now), the version, the storage
        options and the history of a run, its engine built. A refusal fails the task, and is
        recorded in the history as a failed run first (not a dry run: it records none)."""
        history = None
        try:
            options = table_storage_options(self.delta_ops_conn_id, self.storage_options)
            history = self._history(options)
            values = self.operation.parse(self._raw_options(), Naming.ARGUMENT)
            version = self._version()
            self._engine = build_engine(self.operation.engine_name(values), self.spark_conn_id)
        except BaseException as exc:
            if not self.plan_only:
                engine = getattr(self, "engine", None)  # the option's value, if it has one
                record_refusal(
                    self.operation,
                    self.table,
                    exc,
                    history or self._history(self.storage_options),
                    engine=engine if engine in ENGINE_NAMES else LOCAL.name,
                    table_name=self.display_name,
                    front_end="airflow",
                )
            if isinstance(exc, DeltaOpsError):
                self._fail(exc)
            raise
        return values, version, options, history

    def _log_plan(self, plan: Any, warnings: tuple[str, ...]) -> None:
        said = listed(self.operation.describe_plan(plan), self.max_listed)
        self.log.info("%s: %s", self.display_name, said)
        for warning in warnings:
            self.log.warning("%s", warning)

    def _history(self, options: Mapping[str, Any] | None) -> OperationHistory | None:
        """Where the run is recorded: `history_location`, else ``_delta_ops_history`` beside
        the table (None with ``history=False``)."""
        if not self.history:
            return None
        location = self.history_location or history_location([self.table])
        return OperationHistory(location, options) if location else None

    def _fail(self, exc: DeltaOpsError) -> NoReturn:
        """Re-raise a retryable error for the task's retries; fail the rest without retrying."""
        if exc.retryable:
            raise exc
        name = self.operation.name
        said = str(exc).removeprefix(f"{name}: ")  # a refused value names it already
        raise AirflowFailException(f"{self.display_name}: {name} failed: {said}") from exc

    def _record(self, context: Context, data: dict[str, Any]) -> None:
        """The result in an event on each outlet asset (aliases get none)."""
        for outlet in self.outlets:
            if isinstance(outlet, Asset):
                context["outlet_events"][outlet].extra.update(data)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """The table as input and output dataset, with what the run did (Airflow's
        OpenLineage listener asks: `delta_ops.airflow.lineage`)."""
        # the OpenLineage provider is optional: only its listener, which it brings, calls this
        from delta_ops.airflow.lineage import operator_lineage

        return operator_lineage(self.operation, self.table, self._run)

    def on_kill(self) -> None:
        """Stop now: cancel the engine's Spark jobs, then end the task. Whatever the operation
        had done stays readable (its writes are ordered for exactly this), and the next run
        finishes the work."""
        if not self._working:
            return  # done already (a timeout calls this after the task stopped)
        self._working = False
        cancel_spark_jobs(self._engine)
        raise AirflowTaskTerminated(
            f"{self.display_name}: {self.operation.name} stopped by a kill; the table stays"
            " readable, and the next run finishes the work"
        )


def _operator_class(operation: AnyOperation) -> type[DeltaOperationOperator]:
    names = tuple(o.name for o in operator_options(operation))
    if operation.at_version and "version" in names:
        raise TypeError(f"{operation.name}: an option named version clashes with --version")
    at_version = ("version",) if operation.at_version else ()
    name = operator_name(operation)
    listed = "\n".join(
        f"* ``{o.name}`` ({o.kind.value}): {o.help}" for o in operator_options(operation)
    )
    namespace = {
        "operation": operation,
        "template_fields": ("table", "storage_options", *at_version, *names),
        "__doc__": f"delta-ops {operation.name}: {operation.help}\n\nOptions:\n\n{listed}\n",
        "__module__": __name__,
        "__qualname__": name,
    }
    # new_class makes it with the base's metaclass, as a class statement would
    made = types.new_class(
        name, (DeltaOperationOperator,), exec_body=lambda ns: ns.update(namespace)
    )
    return cast(type[DeltaOperationOperator], made)


#: the arguments every operator takes besides its operation's options, and BaseOperator's
_OWN_ARGUMENTS = tuple(
    name
    for name in inspect.signature(DeltaOperationOperator.__init__).parameters
    if name not in ("self", "kwargs")
)
_BASE_ARGUMENTS = frozenset(inspect.signature(BaseOperator.__init__).parameters) - {
    "self",
    "kwargs",
}

#: every registered operation's operator class, by the operation's name
OPERATORS: dict[str, type[DeltaOperationOperator]] = {
    name: _operator_class(operation) for name, operation in OPERATIONS.items()
}
globals().update({cls.__name__: cls for cls in OPERATORS.values()})


def operator_for(name: str) -> type[DeltaOperationOperator]:
    """The operator of a registered operation, by its name (``drop_feature``), its CLI
    spelling (``drop-feature``) or a name it had before (``log_cleanup``, deprecated)."""
    try:
        canonical = OPERATIONS.canonical(name)
    except InvalidValue:
        known = ", ".join(sorted(OPERATIONS))
        raise InvalidValue(f"unknown operation {name!r}; known: {known}") from None
    made = OPERATORS.get(canonical)
    if made is None:  # registered after this module was imported (`Registry.extend`)
        made = OPERATORS[canonical] = _operator_class(OPERATIONS[canonical])
        globals()[made.__name__] = made
    return made


__all__ = [  # noqa: PLE0604 - the generated classes' names are only known at import
    "MAX_LISTED",
    "OPERATORS",
    "DeltaOperationOperator",
    "bounded",
    "check_option_names",
    "operator_for",
    "operator_name",
    "operator_options",
    "option_names",
    *sorted(cls.__name__ for cls in OPERATORS.values()),
]
