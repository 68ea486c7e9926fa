"""A maintenance DAG's run-time configuration: the "Trigger DAG w/ config" form.

`delta_ops.airflow.dags.build_delta_maintenance_dag` gives its DAG these ``params`` (each with
a description the form shows):

| param | form | what a run does with it |
|---|---|---|
| ``dry_run`` | a switch (default: the factory's ``dry_run``) | every step plans only: it logs and returns its plan and changes nothing. It can only turn a dry run on: a DAG built with ``dry_run=True`` stays one |
| ``retention`` | text, empty for none | vacuum's ``retention`` for this run (``"7d"``, ``"168h"``), over the factory's options |
| ``log_retention`` | text, empty for none | cleanup's ``retention`` for this run |
| ``tables`` | a multi-select of the DAG's tables (up to `LISTED_TABLES`; a list to type for more), empty for all | only these tables' steps run; the others' are skipped |

The run's first task, ``check_params`` (`CheckRunConfig`), reads them: a bad value fails
it in one line naming the param and what is accepted (``params: retention: 'banana' is not a
duration ...``, ``params: tables: 'evnts' is not a table of this DAG (did you mean 'events'?)
...``), and every step waits on it, so a mistyped run changes nothing. Each step applies them
just before it runs (`apply_run_config`, its ``pre_execute``).

Example (the CLI's counterpart of the form):

    airflow dags trigger lake_maintenance -c '{"tables": ["events"], "retention": "30d"}'
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from airflow.sdk import BaseOperator, Context, Param
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from delta_ops.errors import InvalidValue
from delta_ops.ops.registry import OPERATIONS

#: the task that checks a run's params before any step runs
CHECK_TASK_ID = "check_params"
#: the form lists a fleet's tables to choose from up to this many; Airflow copies a DAG's
#: params into every task it serializes, so a lake of 1,000 names would weigh on each
LISTED_TABLES = 100
#: param -> (operation, option) it overrides
RETENTIONS = {"retention": ("vacuum", "retention"), "log_retention": ("cleanup", "retention")}


@dataclass(frozen=True)
class RunConfig:
    """A run's params, checked: ``tables`` None for all."""

    dry_run: bool
    overrides: Mapping[str, Mapping[str, str]]  # operation -> option -> raw value
    tables: frozenset[str] | None

    def to_data(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "overrides": {op: dict(values) for op, values in self.overrides.items()},
            "tables": sorted(self.tables) if self.tables is not None else None,
        }


def _listed(table_names: Sequence[str]) -> dict[str, Any]:
    """The ``tables`` param's choices for the form (none past `LISTED_TABLES`)."""
    return {"examples": list(table_names)} if len(table_names) <= LISTED_TABLES else {}


def dag_params(table_names: Sequence[str], *, dry_run: bool) -> dict[str, Param]:
    """The params of a maintenance DAG over `table_names` (see the module's table)."""
    return {
        "dry_run": Param(
            dry_run,
            type="boolean",
            title="Dry run",
            description="Plan only: every step logs and returns its plan and changes nothing.",
        ),
        "retention": Param(
            None,
            type=["null", "string"],
            title="Vacuum retention",
            description="Vacuum's retention for this run (7d, 168h); empty: the DAG's.",
        ),
        "log_retention": Param(
            None,
            type=["null", "string"],
            title="Log retention",
            description="Log cleanup's retention for this run (30d); empty: the DAG's.",
        ),
        "tables": Param(
            [],
            type="array",
            items={"type": "string"},
            **_listed(table_names),
            title="Tables",
            description="Only these tables' steps run; empty: every table.",
        ),
    }


def read_run_config(
    params: Mapping[str, Any], table_names: Sequence[str], *, dry_run: bool
) -> RunConfig:
    """The run's params, checked against the DAG's tables and the operations' options.

    Raises:
        InvalidValue: one line naming the param, the bad value and what is accepted.
    """
    asked = params.get("dry_run", False)
    if not isinstance(asked, bool):
        raise InvalidValue(f"params: dry_run: {asked!r} is not true or false")
    overrides: dict[str, dict[str, str]] = {}
    for param, (operation, option_name) in RETENTIONS.items():
        value = params.get(param)
        if value in (None, ""):
            continue
        [option] = [o for o in OPERATIONS[operation].options if o.name == option_name]
        option.parse(value, f"params: {param}")  # a bad one raises, naming the param
        overrides.setdefault(operation, {})[option_name] = str(value)
    tables = params.get("tables") or []
    if isinstance(tables, str) or not isinstance(tables, Sequence):
        raise InvalidValue(f"params: tables: {tables!r} is not a list of table names")
    for name in tables:
        if name not in table_names:
            close = difflib.get_close_matches(str(name), table_names, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise InvalidValue(
                f"params: tables: {name!r} is not a table of this DAG{hint}; its tables:"
                f" {', '.join(table_names)}"
            )
    return RunConfig(dry_run or asked, overrides, frozenset(tables) if tables else None)


class CheckRunConfig(BaseOperator):
    """A run's first task: fails in one line when a param is wrong (see the module's doc);
    returns the checked config as its XCom."""

    ui_color = "#cde8f5"

    def __init__(self, *, table_names: Sequence[str], dry_run: bool, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.table_names = list(table_names)
        self.factory_dry_run = dry_run

    def execute(self, context: Context) -> dict[str, Any]:
        try:
            config = read_run_config(
                context["params"], self.table_names, dry_run=self.factory_dry_run
            )
        except InvalidValue as exc:
            raise AirflowFailException(str(exc)) from None
        self.log.info("run config: %s", config.to_data())
        return config.to_data()


def apply_run_config(
    table_name: str, operation: str, table_names: Sequence[str], *, dry_run: bool
) -> Callable[[Context], None]:
    """A step's ``pre_execute``: skips the step when the run's ``tables`` leave its table out,
    and sets the run's dry run and retention on the task (they are parsed when it runs)."""

    def apply(context: Context) -> None:
        config = read_run_config(context["params"], table_names, dry_run=dry_run)
        if config.tables is not None and table_name not in config.tables:
            raise AirflowSkipException(f"{table_name}: not among this run's tables")
        task = context["task"]
        if config.dry_run:
            setattr(task, "plan_only", True)  # noqa: B010 - a delta-ops operator's attribute
        for option, value in config.overrides.get(operation, {}).items():
            setattr(task, option, value)

    return apply


__all__ = [
    "CHECK_TASK_ID",
    "LISTED_TABLES",
    "CheckRunConfig",
    "RunConfig",
    "apply_run_config",
    "dag_params",
    "read_run_config",
]
