"""A toy operation, written as a real one is: this one module (plan, execute, describe, its
``OPERATION``) plus one registry line (:data:`ENTRY`, which a test adds with
`Registry.extend`), to prove that every front end follows from the registry alone.

``toy_count`` counts the table's live files and changes nothing; with ``--at-least N`` it has
nothing to do below N files.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from delta_ops.ops.engines import Engine
from delta_ops.ops.operation import Operation, Option, OptionKind, Progress
from delta_ops.ops.registry import Entry
from delta_ops.protocol.features import Access
from delta_ops.table.snapshot import Snapshot


@dataclass(frozen=True)
class ToyOptions:
    at_least: int = 1


@dataclass(frozen=True)
class ToyPlan:
    table: str
    files: int
    at_least: int

    @property
    def nothing_to_do(self) -> bool:
        return self.files < self.at_least

    @property
    def idle_reason(self) -> str:
        return f"{self.files} files, fewer than {self.at_least}"

    def to_dict(self) -> dict[str, Any]:
        return {"table": self.table, "files": self.files, "at_least": self.at_least}


@dataclass(frozen=True)
class ToyResult:
    table: str
    counted: int


def plan_toy(snapshot: Snapshot, options: ToyOptions, engine: Engine) -> ToyPlan:
    return ToyPlan(snapshot.storage.url, snapshot.num_files, options.at_least)


def execute_toy(plan: ToyPlan, progress: Progress) -> ToyResult:
    return ToyResult(plan.table, plan.files)


OPERATION: Operation[ToyOptions, ToyPlan, ToyResult] = Operation(
    name="toy_count",
    needs=Access.READ_LOG,
    help="count the live files (a toy that proves the registry builds every front end)",
    options=(Option("at_least", OptionKind.COUNT, "nothing to do below this many files", 1),),
    options_type=ToyOptions,
    plan_with=plan_toy,
    execute_with=execute_toy,
    describe_plan=lambda plan: f"would count {plan.files} files",
    describe_result=lambda result: f"counted {result.counted} files",
    touched=lambda result: (0, None),
)

#: the one registry line
ENTRY = Entry("toy_count", "tests.support.toy_operation")
