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

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from delta_ops.ops.operation import ENGINE_OPTION, Operation, Option, OptionKind


@dataclass(frozen=True)
class Entry:
    """Where an operation lives: its CLI name, its module under `delta_ops.ops` (which ends
    with its ``OPERATION``), its Dagster action name (asset output and job name part), and the
    function that imports the module (a plain import, so the import graph shows it)."""

    name: str
    module: str
    action: str
    load: Callable[[], Operation]


def _checkpoint() -> Operation:
    # lazily, when the operation is first looked up (start-up cost)
    from delta_ops.ops import checkpoint

    return checkpoint.OPERATION


def _cleanup() -> Operation:
    # lazily, when the operation is first looked up (start-up cost)
    from delta_ops.ops import cleanup

    return cleanup.OPERATION


def _vacuum() -> Operation:
    # lazily, when the operation is first looked up (start-up cost)
    from delta_ops.ops import vacuum

    return vacuum.OPERATION


def _row_tracking() -> Operation:
    # lazily, when the operation is first looked up (start-up cost)
    from delta_ops.ops import row_tracking

    return row_tracking.OPERATION


def _purge() -> Operation:
    # lazily, when the operation is first looked up (start-up cost)
    from delta_ops.ops import purge

    return purge.OPERATION


def _compact() -> Operation:
    # lazily, when the operation is first looked up (start-up cost)
    from delta_ops.ops import compact

    return compact.OPERATION


def _cluster_by() -> Operation:
    # lazily, when the operation is first looked up (start-up cost)
    from delta_ops.ops import cluster_by

    return cluster_by.OPERATION


def _repair() -> Operation:
    # lazily, when the operation is first looked up (start-up cost)
    from delta_ops.ops import repair

    return repair.OPERATION


def _restore() -> Operation:
    # lazily, when the operation is first looked up (start-up cost)
    from delta_ops.ops import restore

    return restore.OPERATION


def _checksum() -> Operation:
    # lazily, when the operation is first looked up (start-up cost)
    from delta_ops.ops import checksum

    return checksum.OPERATION


def _drop_feature() -> Operation:
    # lazily, when the operation is first looked up (start-up cost)
    from delta_ops.ops import drop_feature

    return drop_feature.OPERATION


def _recompute_stats() -> Operation:
    # lazily, when the operation is first looked up (start-up cost)
    from delta_ops.ops import recompute_stats

    return recompute_stats.OPERATION


#: every operation, in the order front ends list them
ENTRIES: tuple[Entry, ...] = (
    Entry("checkpoint", "checkpoint", "checkpoint", _checkpoint),
    Entry("cleanup", "cleanup", "log_cleanup", _cleanup),
    Entry("vacuum", "vacuum", "vacuum", _vacuum),
    Entry("enable-row-tracking", "row_tracking", "row_tracking", _row_tracking),
    Entry("purge", "purge", "purge", _purge),
    Entry("compact", "compact", "compact", _compact),
    Entry("cluster-by", "cluster_by", "cluster_by", _cluster_by),
    Entry("repair", "repair", "repair", _repair),
    Entry("restore", "restore", "restore", _restore),
    Entry("checksum", "checksum", "checksum", _checksum),
    Entry("drop-feature", "drop_feature", "drop_feature", _drop_feature),
    Entry("recompute-stats", "recompute_stats", "recompute_stats", _recompute_stats),
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
