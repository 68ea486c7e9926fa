"""What a fleet's maintenance does to each table: retention, actions and engine, per table and
fleet-wide.

`MaintenanceSettings` holds the values the component's YAML (or a `DeltaTableTarget`) gives;
a value left out (None) is inherited: a table's settings are laid over the fleet's
(`MaintenanceSettings.over`), and the fleet's over `DEFAULTS` (each table's own
Delta properties for retention, the local engine, checkpoint -> log cleanup -> vacuum). The
maintenance asset runs each action with `MaintenanceSettings.options_for`, so the runs
the schedule, the sensor and the UI launch all follow them:

    fleet = MaintenanceSettings.parse(file_retention="7 days", engine="local")
    table = MaintenanceSettings.parse(actions=["checkpoint", "vacuum"], file_retention="0 days",
                                      vacuum_force=True).over(fleet)
    table.options_for("vacuum")   # {"retention": "0 days", "force": True, "engine": "local"}

Bad values raise `InvalidValue` with one line naming the setting, the value and what is
accepted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields
from enum import StrEnum
from typing import Any

from delta_ops.errors import InvalidValue
from delta_ops.ops.engines import ENGINE_NAMES
from delta_ops.ops.registry import OPERATIONS, entries
from delta_ops.protocol.units import parse_duration_ms
from delta_ops.service.due import Action


class EngineName(StrEnum):
    """Where an action's heavy I/O runs (`delta_ops.ops.engines`)."""

    LOCAL = "local"  # this process (the run's worker)
    SPARK = "spark"  # Spark executors (the spark extra)


assert tuple(EngineName) == ENGINE_NAMES, "the engines the settings name are the engines"


def routine_actions() -> tuple[str, ...]:
    """The registered operations a schedule may run on its own (each needs no argument and
    undoes nothing: `Entry.routine`), in the registry's order."""
    return tuple(e.name for e in entries() if e.routine)


#: what maintenance runs when no setting says otherwise (today's daily schedule)
DEFAULT_ACTIONS = (Action.CHECKPOINT.value, Action.CLEANUP.value, Action.VACUUM.value)


def parse_actions(raw: Any, where: str = "actions") -> tuple[str, ...]:
    """Registered routine actions, in the order given (duplicates dropped); a name an
    operation had before (``log_cleanup``) is taken with a deprecation warning."""
    if isinstance(raw, (str, bytes)) or not isinstance(raw, Iterable):
        raise InvalidValue(f"{where}: {raw!r} is not a list of actions; accepted: {_accepted()}")
    by_name = {e.name: e for e in entries()}
    actions: list[str] = []
    for value in raw:
        try:
            name = OPERATIONS.canonical(str(value), where)
        except InvalidValue:
            raise InvalidValue(
                f"{where}: {value!r} is not a registered action; accepted: {_accepted()}"
            ) from None
        if not by_name[name].routine:
            why = by_name[name].unscheduled
            raise InvalidValue(f"{where}: {value!r} cannot be scheduled ({why})")
        if name not in actions:
            actions.append(name)
    return tuple(actions)


def _accepted() -> str:
    return ", ".join(routine_actions())


def parse_retention(raw: Any, where: str) -> str:
    """A duration as text (``7 days``, ``7d``, ``168h``, ``P7D``), checked; returned as given
    so the operation parses it as its own option."""
    if not isinstance(raw, str):
        raise InvalidValue(
            f"{where}: {raw!r} is not a duration; write it with a unit: '7 days', 7d, 168h, P7D"
        )
    try:
        parse_duration_ms(raw)
    except ValueError as exc:  # it names the value and the accepted forms
        raise InvalidValue(f"{where}: {exc}") from None
    return raw


def parse_engine(raw: Any, where: str = "engine") -> EngineName:
    try:
        return EngineName(raw)
    except ValueError:
        accepted = ", ".join(EngineName)
        raise InvalidValue(f"{where}: {raw!r} is not an engine; accepted: {accepted}") from None


@dataclass(frozen=True)
class MaintenanceSettings:
    """Retention, actions and engine for a table or a fleet; None inherits.

    Attributes:
        actions: the routine actions maintenance runs (`routine_actions`; default
            `DEFAULT_ACTIONS`); the schedule, the sensor and the asset run no other.
        log_retention: how long log cleanup keeps commits (default: the table's
            ``delta.logRetentionDuration``).
        file_retention: how long vacuum keeps files no version needs any more (default: the
            table's ``delta.deletedFileRetentionDuration``).
        vacuum_force: let vacuum use a `file_retention` shorter than the table's own.
        engine: where the actions' heavy I/O runs.
    """

    actions: tuple[str, ...] | None = None
    log_retention: str | None = None
    file_retention: str | None = None
    vacuum_force: bool | None = None
    engine: EngineName | None = None

    @classmethod
    def parse(cls, where: str = "", **raw: Any) -> MaintenanceSettings:
        """Settings from raw YAML values (None: not given); `where` prefixes error lines."""
        at = f"{where}: " if where else ""
        known = [f.name for f in fields(cls)]
        unknown = sorted(set(raw) - set(known))
        if unknown:
            raise InvalidValue(f"{at}unknown settings {unknown}; accepted: {', '.join(known)}")
        force = raw.get("vacuum_force")
        if force is not None and not isinstance(force, bool):
            raise InvalidValue(f"{at}vacuum_force: {force!r} is not true or false")

        def given(name: str, parse: Callable[[Any, str], Any]) -> Any:
            value = raw.get(name)
            return None if value is None else parse(value, f"{at}{name}")

        return cls(
            actions=given("actions", parse_actions),
            log_retention=given("log_retention", parse_retention),
            file_retention=given("file_retention", parse_retention),
            vacuum_force=force,
            engine=given("engine", parse_engine),
        )

    def over(self, base: MaintenanceSettings) -> MaintenanceSettings:
        """These settings, with the ones left out taken from `base`."""
        return MaintenanceSettings(
            **{
                f.name: base_value if (value := getattr(self, f.name)) is None else value
                for f in fields(self)
                for base_value in [getattr(base, f.name)]
            }
        )

    @property
    def chosen_actions(self) -> tuple[str, ...]:
        """The actions maintenance runs (`DEFAULT_ACTIONS` when none are set)."""
        return DEFAULT_ACTIONS if self.actions is None else self.actions

    @property
    def log_retention_ms(self) -> int | None:
        return None if self.log_retention is None else parse_duration_ms(self.log_retention)

    @property
    def file_retention_ms(self) -> int | None:
        return None if self.file_retention is None else parse_duration_ms(self.file_retention)

    def options_for(self, action: str) -> dict[str, Any]:
        """The operation options these settings give `action` (only the options the
        registered operation has: cleanup has no engine)."""
        names = {o.name for o in OPERATIONS[action].options if not o.cli_only}
        values: Mapping[str, Any] = {
            "retention": self.log_retention if action == Action.CLEANUP else self.file_retention,
            "force": self.vacuum_force if action == Action.VACUUM else None,
            "engine": None if self.engine is None else str(self.engine),
        }
        return {k: v for k, v in values.items() if k in names and v is not None}


__all__ = [
    "DEFAULT_ACTIONS",
    "EngineName",
    "MaintenanceSettings",
    "parse_actions",
    "parse_engine",
    "parse_retention",
    "routine_actions",
]
