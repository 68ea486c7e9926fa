"""The registry of operations: every op's description, gathered; every front end is built from it.

Each operation's module ends with its ``OPERATION`` (a `delta_ops.ops.operation.Operation`:
its one name, typed options, plan, execute, descriptions). The CLI generates its subcommands
from `OPERATIONS`, the Dagster plugin its jobs, config, asset outputs and the actions
a schedule may run, the Airflow provider its operators, the docs their reference pages, so
adding an operation is writing its module and adding one line to `ENTRIES`:

    op = OPERATIONS["vacuum"]
    plan = op.plan(op.load(path), op.parse({"retention": "7d"}), LOCAL)
    print(op.describe_plan(plan))

The mapping is lazy: an operation's module is imported when the operation is first looked
up, so a process that runs one operation (the CLI's ``delta-ops vacuum``) imports only that
one. Names and order are known without importing anything. The registry is the one place
that imports a module by a name it holds as data (`Entry.module`): the import-graph test
reads `ENTRIES` for those edges.

`lookup` also takes an operation's CLI spelling (``drop-feature``) and the names it
had before it had one (``log_cleanup``, ``row_tracking``: in users' Dagster YAML and
Airflow arguments), the latter with a deprecation warning naming the name to use.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from delta_ops.errors import InvalidValue
from delta_ops.ops.operation import ENGINE_OPTION, AnyOperation, Operation, Option, OptionKind


@dataclass(frozen=True)
class Entry:
    """Where an operation lives.

    Attributes:
        name: the operation's one name (its ``OPERATION.name``).
        module: the module ending with its ``OPERATION`` (default:
            ``delta_ops.ops.<name>``).
        unscheduled: why a schedule may not run it on its own (it needs an argument, or
            undoes something); empty for a routine action.
        aliases: names it had before (accepted, with a deprecation warning).
    """

    name: str
    module: str = ""
    unscheduled: str = ""
    aliases: tuple[str, ...] = ()

    @property
    def module_path(self) -> str:
        return self.module or f"{__package__}.{self.name}"

    @property
    def command(self) -> str:
        """The CLI's spelling of the name (``drop-feature``)."""
        return self.name.replace("_", "-")

    @property
    def routine(self) -> bool:
        """Whether a schedule may run it on its own."""
        return not self.unscheduled

    def load(self) -> AnyOperation:
        """The module's ``OPERATION``, imported now."""
        # lazily, when the operation is first looked up (start-up cost); the import-graph
        # test reads ENTRIES for these edges
        operation: AnyOperation = importlib.import_module(self.module_path).OPERATION
        if operation.name != self.name:
            raise TypeError(f"{self.module_path} describes {operation.name!r}, not {self.name!r}")
        return operation


#: every operation, in the order front ends list them
ENTRIES: tuple[Entry, ...] = (
    Entry("checkpoint"),
    Entry("cleanup", aliases=("log_cleanup",)),
    Entry("vacuum"),
    Entry(
        "enable_row_tracking",
        "delta_ops.ops.row_tracking",
        "it changes the table's semantics once: set enable_row_tracking: true",
        aliases=("row_tracking",),
    ),
    Entry("purge"),
    Entry("compact"),
    Entry("cluster_by", unscheduled="it needs clustering columns: run it on purpose"),
    Entry("repair", unscheduled="it drops missing files from the table: run it when one is lost"),
    Entry("restore", unscheduled="it needs a version and undoes commits: run it on purpose"),
    Entry("checksum"),
    Entry("drop_feature", unscheduled="it needs a feature name: run it on purpose"),
    Entry("recompute_stats"),
)


class Registry(Mapping[str, AnyOperation]):
    """Operations by name, each imported on first use; `extend` adds entries (a
    plugin's, a test's toy operation) after the built-in ones."""

    def __init__(self, entries: tuple[Entry, ...]) -> None:
        self._entries = {e.name: e for e in entries}
        self._loaded: dict[str, AnyOperation] = {}

    def __getitem__(self, key: str) -> AnyOperation:
        operation = self._loaded.get(key)
        if operation is None:
            operation = self._loaded[key] = self._entries[key].load()
        return operation

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    @property
    def entries(self) -> tuple[Entry, ...]:
        return tuple(self._entries.values())

    def extend(self, *entries: Entry) -> None:
        """Register more operations, listed after these."""
        for entry in entries:
            if entry.name in self._entries:
                raise ValueError(f"an operation named {entry.name!r} is registered already")
            self._entries[entry.name] = entry

    def remove(self, name: str) -> None:
        """Take an operation added by `extend` out again."""
        self._entries.pop(name)
        self._loaded.pop(name, None)

    def canonical(self, name: str, where: str = "operation") -> str:
        """The one name of the operation `name` names: its name, its CLI spelling, or a name
        it had before (with a deprecation warning).

        Raises:
            InvalidValue: no operation has that name.
        """
        if name in self._entries:
            return name
        spelled = name.replace("-", "_")
        if spelled in self._entries:
            return spelled
        for entry in self._entries.values():
            if name in entry.aliases:
                warnings.warn(
                    f"{where}: {name!r} is deprecated; the operation is named {entry.name!r}",
                    FutureWarning,
                    stacklevel=3,
                )
                return entry.name
        raise InvalidValue(f"{where}: {name!r} is not an operation; known: {', '.join(self)}")

    def lookup(self, name: str, where: str = "operation") -> AnyOperation:
        """The operation `name` names (see `canonical`)."""
        return self[self.canonical(name, where)]


#: the operations by name
OPERATIONS: Registry = Registry(ENTRIES)


def entries() -> tuple[Entry, ...]:
    """Every registered entry, built-in and added, in order."""
    return OPERATIONS.entries


__all__ = [
    "ENGINE_OPTION",
    "ENTRIES",
    "OPERATIONS",
    "Entry",
    "Operation",
    "Option",
    "OptionKind",
    "Registry",
    "entries",
    "lookup",
]


def lookup(name: str, where: str = "operation") -> AnyOperation:
    """The operation `name` names in `OPERATIONS` (see `Registry.canonical`)."""
    return OPERATIONS.lookup(name, where)
