"""What every Delta operator shares: the base class, its argument names, the typed keywords.

`delta_ops.airflow.operators` is the public module: one operator class per registered
operation, written out in `delta_ops.airflow.operator_classes` (generated from the registry by
`delta_ops.airflow.operator_code`) on top of `DeltaOperationOperator` here, which does the
work (see `delta_ops.airflow.operators` for the arguments and what a run does). An operation
registered after import (`Registry.extend`: a plugin's) gets its class from `operator_class`,
untyped.

Here too: `BaseOperatorArguments`, Airflow's own keywords (`retries`, `pool`, ...) as a
`TypedDict`, so the generated classes' `**kwargs` are typed and a misspelled keyword fails
type-checking; `COMMON_ARGUMENTS`, what the arguments every operator takes mean (the classes'
docstrings and the how-to pages say it); and the helpers naming an operation's operator and
its options.
"""

from __future__ import annotations

import difflib
import inspect
import os
import re
import types
from collections.abc import Callable, Collection, Iterable, Mapping, MutableMapping, Sequence
from datetime import datetime, timedelta
from typing import Any, ClassVar, NoReturn, Required, TypedDict, cast

from airflow.sdk import (
    DAG,
    Asset,
    BaseHook,
    BaseOperator,
    Context,
    RetryPolicy,
    TaskGroup,
    XComArg,
)
from airflow.sdk.exceptions import (
    AirflowFailException,
    AirflowSkipException,
    AirflowTaskTerminated,
)
from airflow.sdk.types import WeightRuleParam

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
from delta_ops.service.history import OperationHistory
from delta_ops.service.runs import Run, record_refusal, run_operation
from delta_ops.storage.warehouse import history_location

#: the public module of the operator classes, where DAG files import them from and Airflow's
#: serialized DAGs name them
PUBLIC_MODULE = "delta_ops.airflow.operators"

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
    """What every operator shares; `delta_ops.airflow.operators.OPERATORS` has one subclass per
    operation (see that module's doc for the arguments and what a run does).

    Its `__init__` takes the operation's options (and `version`) as `**kwargs`: the generated
    subclasses name each one, typed, and pass them on; an unknown name is refused here, in one
    line, for every subclass."""

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
        engine: str | XComArg = "local",
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


def operator_class(operation: AnyOperation) -> type[DeltaOperationOperator]:
    """An operator class for `operation`, made now: for an operation registered after import
    (`Registry.extend`), which has no class in `delta_ops.airflow.operator_classes`. Its
    options arrive as `**kwargs` (checked when it is built, not by a type checker)."""
    names = tuple(o.name for o in operator_options(operation))
    if operation.at_version and "version" in names:
        raise TypeError(f"{operation.name}: an option named version clashes with --version")
    at_version = ("version",) if operation.at_version else ()
    name = operator_name(operation)
    said = "\n".join(
        f"- `{o.name}` ({o.kind.value}): {o.help}" for o in operator_options(operation)
    )
    namespace = {
        "operation": operation,
        "template_fields": ("table", "storage_options", *at_version, *names),
        "__doc__": f"delta-ops {operation.name}: {operation.help}\n\nOptions:\n\n{said}\n",
        "__module__": PUBLIC_MODULE,
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

#: what the arguments every operator takes besides its operation's options mean, in the order
#: the how-to pages list them (`engine` and `spark_conn_id` are said apart: see
#: `ENGINE_ONLY_LOCAL`)
COMMON_ARGUMENTS: tuple[tuple[str, str], ...] = (
    ("task_id", "the task's id (BaseOperator's, as are `retries`, `pool`, `outlets`, ...)"),
    ("table", "the table's path or URL (templated)"),
    ("delta_ops_conn_id", "an Airflow connection holding the storage options (the hook's types)"),
    ("storage_options", "options over the connection's (templated; shown as JSON in the UI)"),
    ("dry_run", "plan only: log and return the plan, change nothing"),
    ("table_name", "the table's name in logs, alerts and the history (default: the path's end)"),
    ("max_listed", "lists longer than this are cut in the log, the XCom and asset events"),
    ("progress_every_seconds", "how often a long step logs its progress"),
    ("history", "record the run in the operation history (`_delta_ops_history`)"),
    ("history_location", "where the history is, if not beside the table"),
    ("deferrable", 'with `engine="spark"`: run as a Spark job of its own, the task deferred'),
    ("job_folder", "where a deferred run's job writes its outcome and log"),
    ("spark_conn_id", 'the Spark connection when `engine="spark"`'),
)
#: `engine` of an operation without the option
ENGINE_ONLY_LOCAL = "only `local`: this operation runs in the task's process"
#: `version` of an operation acting on a chosen version (checkpoint's: the CLI's `--version`)
VERSION_HELP = "the version to act on (default: the latest)"

TaskCallback = Callable[[Context], None]


class BaseOperatorArguments(TypedDict, total=False):
    """Airflow's own keywords (`BaseOperator`'s), as Airflow 3.3 types them: the generated
    operators' `**kwargs`, so a type checker refuses a keyword neither they nor Airflow take.
    `tests/airflow/test_operator_code.py` checks the names against the installed Airflow."""

    task_id: Required[str]
    owner: str
    email: str | Sequence[str] | None
    email_on_retry: bool
    email_on_failure: bool
    retries: int | None
    retry_delay: timedelta | float
    retry_exponential_backoff: float
    max_retry_delay: timedelta | float | None
    retry_policy: RetryPolicy | None
    start_date: datetime | None
    end_date: datetime | None
    depends_on_past: bool
    ignore_first_depends_on_past: bool
    wait_for_past_depends_before_skipping: bool
    wait_for_downstream: bool
    dag: DAG | None
    params: MutableMapping[str, Any] | None
    default_args: dict[str, Any] | None
    priority_weight: int
    weight_rule: WeightRuleParam
    queue: str
    pool: str | None
    pool_slots: int
    sla: timedelta | None
    execution_timeout: timedelta | None
    on_execute_callback: TaskCallback | Collection[TaskCallback] | None
    on_failure_callback: TaskCallback | list[TaskCallback] | None
    on_success_callback: TaskCallback | Collection[TaskCallback] | None
    on_retry_callback: TaskCallback | list[TaskCallback] | None
    on_skipped_callback: TaskCallback | Collection[TaskCallback] | None
    pre_execute: Callable[[Context], None] | None
    post_execute: Callable[[Context, Any], None] | None
    trigger_rule: str
    resources: dict[str, Any] | None
    run_as_user: str | None
    map_index_template: str | None
    max_active_tis_per_dag: int | None
    max_active_tis_per_dagrun: int | None
    executor: str | None
    executor_config: dict[str, Any] | None
    do_xcom_push: bool
    multiple_outputs: bool
    inlets: Any | None
    outlets: Any | None
    task_group: TaskGroup | None
    doc: str | None
    doc_md: str | None
    doc_json: str | None
    doc_yaml: str | None
    doc_rst: str | None
    task_display_name: str | None
    logger_name: str | None
    allow_nested_operators: bool
    render_template_as_native_obj: bool | None


__all__ = [
    "COMMON_ARGUMENTS",
    "ENGINE_ONLY_LOCAL",
    "MAX_LISTED",
    "PUBLIC_MODULE",
    "VERSION_HELP",
    "BaseOperatorArguments",
    "DeltaOperationOperator",
    "bounded",
    "check_option_names",
    "operator_class",
    "operator_name",
    "operator_options",
    "option_names",
]
