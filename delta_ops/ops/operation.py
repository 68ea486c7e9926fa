"""What an operation is, as every front end sees it: its name, typed options, plan, execute.

An `Operation` names the op, its typed options (`Option`: a duration, a time, a
count, a flag, a choice, a share, a size or a text, parsed by one vocabulary,
`delta_ops.protocol.units`), how to plan it from a snapshot, how to execute the plan, and how
to say both in a line of text. Each operation's module ends with its ``OPERATION``;
`delta_ops.ops.registry` gathers them, and the CLI and the Dagster plugin are generated from
the registry:

    op = OPERATIONS["vacuum"]
    options = op.parse({"retention": "7d", "force": False})  # InvalidValue names a bad value
    plan = op.plan(load_snapshot(path), options, LOCAL)      # the engine the front end built
    print(op.describe_plan(plan))
    print(to_data(op.execute(plan)))  # delta_ops.ops.results

An operation is typed end to end, ``Operation[OptionsT, PlanT, ResultT]``: the raw values are
parsed once, by the `Option` declarations, into the operation's own frozen options
dataclass (``VacuumOptions``: one field per option), which its planner takes; the plan and the
result have their own types, so mypy checks a front end that misspells an option or hands
one operation's plan to another. Every plan has the shape of `Plan`: whether it has
nothing to do, why, and its data.

What `describe_plan` and `describe_result` say opens with a line that says it all (the plan
as a dry run shows it, the result in the past tense, bytes written and deleted apart); the
lines after it list files or steps. `headline` is that line (the operation history's
``reason``), `listed` the text with at most so many of the lines after it (a task's
log).
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Generic, ParamSpec, Protocol, TypeVar, runtime_checkable

from delta_ops import clock
from delta_ops.errors import InvalidValue, NeedsForce
from delta_ops.ops.engines import ENGINE_NAMES, LOCAL, Engine
from delta_ops.protocol.features import Access
from delta_ops.protocol.units import parse_duration_ms, parse_size_bytes, parse_time_ms
from delta_ops.storage import Storage
from delta_ops.table.snapshot import Snapshot, TableHead, load_head, load_snapshot


@runtime_checkable
class Plan(Protocol):
    """What every operation's plan offers a front end."""

    @property
    def nothing_to_do(self) -> bool: ...

    @property
    def idle_reason(self) -> str:
        """Why a plan with nothing to do has nothing to do."""
        ...

    def to_dict(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class EnginePlan:
    """The base of a plan whose heavy work runs on an engine (`delta_ops.ops.engines`): it
    holds the engine the front end built, left out of the plan's repr and equality (its data
    reports the engine's name). A keyword-only field, so a plan's own fields keep their order.
    """

    engine: Engine = field(default=LOCAL, repr=False, compare=False, kw_only=True)


@dataclass(frozen=True)
class Timed:
    """The base of a result: how long executing its plan took, measured by `timed` (a
    keyword-only field, so a result's own fields keep their order)."""

    duration_ms: int = field(default=0, kw_only=True)


TimedT = TypeVar("TimedT", bound=Timed)
_Params = ParamSpec("_Params")


def timed(execute: Callable[_Params, TimedT]) -> Callable[_Params, TimedT]:
    """`execute` (an operation's ``execute_<name>``), its result's `duration_ms` measured
    here: the one place every operation's run is timed."""

    @functools.wraps(execute)
    def run(*args: _Params.args, **kwargs: _Params.kwargs) -> TimedT:
        started = time.monotonic()
        result = execute(*args, **kwargs)
        return dataclasses.replace(result, duration_ms=int((time.monotonic() - started) * 1000))

    return run


class OptionKind(StrEnum):
    """How an option's raw value (CLI text, Dagster config) is parsed."""

    DURATION = "duration"
    TIME = "time"
    COUNT = "count"
    FLAG = "flag"
    CHOICE = "choice"
    RATIO = "ratio"
    SIZE = "size"
    TEXT = "text"
    VERSION = "version"  # a table version: a whole number, 0 or more


class Naming(StrEnum):
    """How a bad value's message names its option: the CLI's flag (``--retention: ...``), or
    the operation and the argument, as a Python front end takes it (``vacuum: retention:
    ...``: an Airflow operator's keyword)."""

    FLAG = "flag"
    ARGUMENT = "argument"


Progress = Callable[[str], None] | None
#: what a result touched: (files, bytes); bytes None where the operation does not count them
Touched = tuple[int, int | None]


@dataclass(frozen=True)
class Option:
    """One option of an operation: `name` is the CLI flag (``--name`` with ``-`` for ``_``) and
    the Dagster config field; the parsed value is passed to the plan under the same name."""

    name: str
    kind: OptionKind
    help: str
    default: Any = None
    choices: tuple[str, ...] = ()
    cli_only: bool = False  # a CLI convenience (``--now``), not offered in Dagster config
    #: the CLI takes it as an argument after the table (``drop-feature TABLE FEATURE``), not
    #: as a flag; elsewhere it is an option like the others
    positional: bool = False
    example: str = ""  # the accepted forms, where the kind's own hint would mislead

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", OptionKind(self.kind))  # its value ("count") will do

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def hint(self) -> str:
        """The accepted forms of a value, as help texts show them."""
        if self.kind is OptionKind.CHOICE:
            return " | ".join(self.choices)
        return self.example or _HINTS[self.kind]

    def parse(self, raw: Any, label: str | None = None) -> Any:
        """The typed value of `raw` (text from the CLI, a value from Dagster config); a default
        written as text (``"128MB"``) is parsed like a value the user gave. A bad value's
        message opens with `label` (default: the flag, ``--retention``)."""
        if raw is None:  # not given; an empty text is a value, and refused by its parser
            if not isinstance(self.default, str):
                return self.default
            raw = self.default
        try:
            return _PARSERS[self.kind](self, raw)
        except ValueError as exc:
            raise InvalidValue(f"{label or self.flag}: {exc}") from None


def _duration(option: Option, raw: Any) -> int:
    text = raw if isinstance(raw, str) else repr(raw)  # a number from config has no unit
    return parse_duration_ms(text)


def _time(option: Option, raw: Any) -> int:
    return parse_time_ms(str(raw), now_ms=clock.now_ms())


def _integer(raw: Any, expected: str) -> int:
    """`raw` as an int; ValueError "<raw> is not <expected>" when it is none."""
    try:
        return int(str(raw).strip())
    except ValueError:
        raise ValueError(f"{raw!r} is not {expected}") from None


def _count(option: Option, raw: Any) -> int:
    value = _integer(raw, "a whole number (at least 1)")
    if value < 1:
        raise ValueError(f"must be at least 1, got {value}")
    return value


def _version(option: Option, raw: Any) -> int:
    value = _integer(raw, "a version number (0 or more)")
    if value < 0:
        raise ValueError(f"{value} is not a version number (0 or more)")
    return value


def _flag(option: Option, raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    raise ValueError(f"{raw!r} is not true or false")


def _ratio(option: Option, raw: Any) -> float:
    try:
        value = float(str(raw).strip().rstrip("%")) / (100 if str(raw).strip().endswith("%") else 1)
    except ValueError:
        raise ValueError(f"{raw!r} is not a share such as 0.1 or 10%") from None
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{raw!r} is not a share from 0 to 1 (or 0% to 100%)")
    return value


def _choice(option: Option, raw: Any) -> str:
    if raw not in option.choices:
        raise ValueError(f"{raw!r} is not one of {', '.join(option.choices)}")
    return str(raw)


_HINTS: dict[OptionKind, str] = {
    OptionKind.DURATION: "e.g. 7d, 168h, P7D, '7 days'",
    OptionKind.TIME: "now, ISO 8601 with a zone, or 1700000000s",
    OptionKind.COUNT: "a whole number",
    OptionKind.FLAG: "true or false",
    OptionKind.RATIO: "e.g. 0.1 or 10%",
    OptionKind.SIZE: "e.g. 128MB, 1GB, or bytes: 4194304",
    OptionKind.TEXT: "e.g. day=2026-11-01",
    OptionKind.VERSION: "a version number, 0 or more",
}

_PARSERS: dict[OptionKind, Callable[[Option, Any], Any]] = {
    OptionKind.DURATION: _duration,
    OptionKind.TIME: _time,
    OptionKind.COUNT: _count,
    OptionKind.FLAG: _flag,
    OptionKind.CHOICE: _choice,
    OptionKind.RATIO: _ratio,
    OptionKind.SIZE: lambda option, raw: parse_size_bytes(str(raw)),
    OptionKind.TEXT: lambda option, raw: str(raw),
    OptionKind.VERSION: _version,
}


#: where an operation's heavy I/O runs (`delta_ops.ops.engines`): vacuum's listing and
#: deletes, the row-tracking backfill's footer reads, rewrites, checkpoint parts and sidecars
ENGINE_OPTION = Option(
    "engine",
    OptionKind.CHOICE,
    "where the heavy I/O runs: local (this process), or spark (executors)",
    "local",
    ENGINE_NAMES,
)


#: an operation's options: a frozen dataclass with one field per `Option`
OptionsT = TypeVar("OptionsT")
#: an operation's plan (of the `Plan` shape)
PlanT = TypeVar("PlanT", bound=Plan)
#: an operation's result
ResultT = TypeVar("ResultT")


@dataclass(frozen=True)
class Operation(Generic[OptionsT, PlanT, ResultT]):
    """An operation as every front end sees it: ``Operation[VacuumOptions, VacuumPlan,
    VacuumResult]``.

    Attributes:
        name: its one name (the history's, Dagster's and Airflow's; the CLI spells it with
            ``-`` for ``_``, as it spells the options: ``drop-feature``).
        needs: what the table's features must allow for it to run.
        help: one line saying what it does.
        options: how each raw option value is parsed (its kind, default, help).
        options_type: the frozen dataclass the parsed values fill, one field per option.
        plan_with: the plan from what `load` gave, the options and the engine to run on.
        execute_with: the result of executing a plan, saying what it does to `progress`.
        describe_plan: the plan as a dry run shows it.
        describe_result: the result, in the past tense.
        touched: the files and bytes a result deleted, rewrote or wrote (the history's
            columns).
        at_version: plans a chosen version (``--version``) rather than the latest.
        needs_files: False: plans from a `TableHead` (no file state is loaded).
        load_with: loads what the op plans from, when neither a snapshot nor a head always
            fits.
    """

    name: str
    needs: Access
    help: str
    options: tuple[Option, ...]
    options_type: type[OptionsT]
    # what `load` gave: a Snapshot or a TableHead, as the operation asked for
    plan_with: Callable[[Any, OptionsT, Engine], PlanT]
    execute_with: Callable[[PlanT, Progress], ResultT]
    describe_plan: Callable[[PlanT], str]
    describe_result: Callable[[ResultT], str]
    touched: Callable[[ResultT], Touched]
    at_version: bool = False
    needs_files: bool = True
    load_with: Callable[[str | Storage, int | None, Mapping[str, Any] | None], Any] | None = None

    def __post_init__(self) -> None:
        declared = [o.name for o in self.options]
        fields = [f.name for f in dataclasses.fields(self.options_type)]  # type: ignore[arg-type]
        if sorted(declared) != sorted(fields):
            raise TypeError(
                f"{self.name}: the options {declared} and {self.options_type.__name__}'s"
                f" fields {fields} differ"
            )

    @property
    def command(self) -> str:
        """The CLI's spelling of the name (``drop-feature``)."""
        return self.name.replace("_", "-")

    def parse(self, raw: Mapping[str, Any], naming: Naming = Naming.FLAG) -> OptionsT:
        """The typed options from raw values (CLI text, Dagster config, Airflow arguments);
        a name no option has is refused. A bad value is named as `naming` says.

        Raises:
            InvalidValue: an unknown option, or a value its option does not accept.
        """
        unknown = set(raw) - {o.name for o in self.options}
        if unknown:
            raise InvalidValue(f"{self.name}: unknown options {sorted(unknown)}")
        parsed = {o.name: o.parse(raw.get(o.name), self.label(o, naming)) for o in self.options}
        return self.options_type(**parsed)

    def label(self, option: Option, naming: Naming) -> str:
        """How a message names `option`: ``--retention``, or ``vacuum: retention``."""
        return option.flag if naming is Naming.FLAG else f"{self.name}: {option.name}"

    def engine_name(self, options: OptionsT) -> str:
        """The engine `options` name (``local`` for an operation without the option)."""
        name: str = getattr(options, ENGINE_OPTION.name, ENGINE_OPTION.default)
        return name

    def load(
        self,
        table: str | Storage,
        version: int | None = None,
        storage_options: Mapping[str, Any] | None = None,
    ) -> Snapshot | TableHead:
        """What the op plans from: the full snapshot, or only the head when it needs no files."""
        if self.load_with is not None:
            loaded: Snapshot | TableHead = self.load_with(table, version, storage_options)
            return loaded
        load = load_snapshot if self.needs_files else load_head
        return load(table, version, storage_options=storage_options)

    def plan(
        self, snapshot: Snapshot | TableHead, options: OptionsT, engine: Engine = LOCAL
    ) -> PlanT:
        """The op's plan; `engine` runs its heavy work (the front end built it from the
        ``engine`` option's value)."""
        return self.plan_with(snapshot, options, engine)

    def preview(
        self, snapshot: Snapshot | TableHead, options: OptionsT, engine: Engine = LOCAL
    ) -> tuple[PlanT, list[str]]:
        """The plan a dry run shows, and warnings. A dry run never fails for a safety limit
        `--force` overrides (a retention below the table's minimum, too many files missing): it
        shows what `--force` would do and says that it needs it."""
        try:
            return self.plan(snapshot, options, engine), []
        except NeedsForce as exc:
            if not hasattr(options, "force"):
                raise
            warning = f"{exc} (this dry run shows what --force would do)"
            forced = dataclasses.replace(options, force=True)  # type: ignore[type-var]
            return self.plan(snapshot, forced, engine), [warning]

    def execute(self, plan: PlanT, progress: Progress = None) -> ResultT:
        return self.execute_with(plan, progress)

    def idle_reason(self, plan: PlanT) -> str:
        """Why `plan` has nothing to do."""
        return plan.idle_reason


#: an operation of any options, plan and result (what the registry holds)
AnyOperation = Operation[Any, Any, Any]


def headline(text: str) -> str:
    """The first line of what an operation says: the whole of it in one line."""
    return text.split("\n", 1)[0]


def listed(text: str, limit: int) -> str:
    """`text` with at most `limit` of the lines after its first (the files or steps it
    lists), and a last line saying how many more there are."""
    lines = text.split("\n")
    more = len(lines) - 1 - limit
    if more <= 0:
        return text
    return "\n".join([*lines[: limit + 1], f"... and {more:,} more lines not listed"])


def requested_now(now: int | None) -> int:
    """The `now` the user asked for (the wall clock by default); plans clamp it themselves,
    so they can also report what was asked."""
    return clock.now_ms() if now is None else now


__all__ = [
    "ENGINE_OPTION",
    "AnyOperation",
    "EnginePlan",
    "Naming",
    "Operation",
    "Option",
    "OptionKind",
    "OptionsT",
    "Plan",
    "PlanT",
    "Progress",
    "ResultT",
    "Timed",
    "Touched",
    "requested_now",
    "timed",
]
