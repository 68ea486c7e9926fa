"""The registry of operations: every op's description, gathered; every front end is built from it.

Each operation's module ends with its ``OPERATION`` (a `delta_ops.ops.operation.Operation`:
name, typed options, plan, execute, descriptions). The CLI generates its subcommands from
:data:`OPERATIONS`, the Dagster plugin its jobs, config and asset outputs, so adding an
operation is writing its module and adding a line to :data:`ENTRIES`::

    op = OPERATIONS["vacuum"]
    plan = op.plan(op.load(path), op.parse({"retention": "7d"}), LOCAL)
    print(op.describe_plan(plan))

The mappings are lazy: an operation's module is imported when the operation is first looked
up, so a process that runs one operation (the CLI's ``delta-ops vacuum``) imports only that
one. Names, actions and order are known without importing anything.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from delta_ops.ops.operation import ENGINE_OPTION, Operation, Option, OptionKind


@dataclass(frozen=True)
class Entry:
    """Where an operation lives: its CLI name, its module under `delta_ops.ops` (which ends
    with its ``OPERATION``), and its Dagster action name (asset output and job name part)."""

    name: str
    module: str
    action: str

    def load(self) -> Operation:
        operation = importlib.import_module(f"delta_ops.ops.{self.module}").OPERATION
        assert isinstance(operation, Operation)
        return operation


#: every operation, in the order front ends list them
ENTRIES: tuple[Entry, ...] = (
    Entry("checkpoint", "checkpoint", "checkpoint"),
    Entry("cleanup", "cleanup", "log_cleanup"),
    Entry("vacuum", "vacuum", "vacuum"),
    Entry("enable-row-tracking", "row_tracking", "row_tracking"),
    Entry("purge", "purge", "purge"),
    Entry("compact", "compact", "compact"),
    Entry("cluster-by", "cluster_by", "cluster_by"),
    Entry("repair", "repair", "repair"),
    Entry("restore", "restore", "restore"),
    Entry("checksum", "checksum", "checksum"),
    Entry("drop-feature", "drop_feature", "drop_feature"),
    Entry("recompute-stats", "recompute_stats", "recompute_stats"),
)


class _LazyOperations(Mapping[str, Operation]):
    """Operations by a key of their entry (name or action), each imported on first use."""

    def __init__(self, by: dict[str, Entry]) -> None:
        self._entries = by
        self._loaded: dict[str, Operation] = {}

    def __getitem__(self, key: str) -> Operation:
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


#: the operations by CLI name
OPERATIONS: Mapping[str, Operation] = _LazyOperations({e.name: e for e in ENTRIES})
#: the same operations by their Dagster action name (asset output and job name part)
BY_ACTION: Mapping[str, Operation] = _LazyOperations({e.action: e for e in ENTRIES})

__all__ = [
    "BY_ACTION",
    "ENGINE_OPTION",
    "ENTRIES",
    "OPERATIONS",
    "Entry",
    "Operation",
    "Option",
    "OptionKind",
]
