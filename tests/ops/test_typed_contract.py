"""mypy --strict checks every front end against every operation: the contract is typed.

An operation is ``Operation[OptionsT, PlanT, ResultT]`` (`delta_ops.ops.operation`): its
options are one frozen dataclass, parsed once from CLI text, Dagster config or Airflow
arguments, and its plan and result have their own types. So a front end that misspells an
option, hands one operation's options or plan to another, or reads an option that does not
exist fails type-checking. This test runs mypy's API, with the project's own configuration,
on small front ends: one written right must pass, each written wrong must fail with the error
that names its mistake.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.type_check import mypy_strict

#: what every snippet starts with
HEADER = """\
from delta_ops.ops import compact, vacuum
from delta_ops.ops.engines import LOCAL
from delta_ops.service.runs import Run, run_operation
from delta_ops.table.snapshot import load_snapshot
"""

#: a front end written right: options parsed or built, planned, executed, all typed
RIGHT = """\
def front_end(path: str) -> int:
    options = vacuum.OPERATION.parse({"retention": "7d"})
    run: Run[vacuum.VacuumPlan, vacuum.VacuumResult] = run_operation(
        vacuum.OPERATION, path, vacuum.VacuumOptions(retention=options.retention), LOCAL
    )
    plan = vacuum.OPERATION.plan(load_snapshot(path), options, LOCAL)
    result = vacuum.OPERATION.execute(plan)
    return result.num_deleted + len(run.plan.candidates)
"""

#: front ends written wrong, and the error mypy must report for each
WRONG = {
    "a misspelled option": (
        """\
def front_end(path: str) -> None:
    run_operation(vacuum.OPERATION, path, vacuum.VacuumOptions(retension=1))
""",
        'Unexpected keyword argument "retension" for "VacuumOptions"',
    ),
    "a misspelled option read back": (
        """\
def front_end() -> object:
    return vacuum.OPERATION.parse({}).retension
""",
        '"VacuumOptions" has no attribute "retension"',
    ),
    "another operation's options": (
        """\
def front_end(path: str) -> None:
    vacuum.OPERATION.plan(load_snapshot(path), compact.CompactOptions(), LOCAL)
""",
        (
            'Argument 2 to "plan" of "Operation" has incompatible type "CompactOptions";'
            ' expected "VacuumOptions"'
        ),
    ),
    "another operation's options, run": (
        """\
def front_end(path: str) -> None:
    run_operation(vacuum.OPERATION, path, compact.CompactOptions())
""",
        'Cannot infer value of type parameter "OptionsT" of "run_operation"',
    ),
    "another operation's plan": (
        """\
def front_end(plan: compact.CompactPlan) -> None:
    vacuum.OPERATION.execute(plan)
""",
        (
            'Argument 1 to "execute" of "Operation" has incompatible type "CompactPlan";'
            ' expected "VacuumPlan"'
        ),
    ),
    "a result of the wrong type": (
        """\
def front_end(plan: vacuum.VacuumPlan) -> compact.CompactResult:
    return vacuum.OPERATION.execute(plan)
""",
        'Incompatible return value type (got "VacuumResult", expected "CompactResult")',
    ),
}


def _mypy(tmp_path: Path, body: str) -> tuple[str, int]:
    return mypy_strict(tmp_path / "front_end.py", HEADER + "\n\n" + body)


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, int]]:
    """Every snippet checked in one mypy run each (the package's cache is shared)."""
    tmp = tmp_path_factory.mktemp("typed")
    found = {"right": _mypy(tmp, RIGHT)}
    for name, (body, _) in WRONG.items():
        found[name] = _mypy(tmp, body)
    return found


def test_a_front_end_written_right_type_checks(checked: dict[str, tuple[str, int]]) -> None:
    out, status = checked["right"]
    assert status == 0, out


@pytest.mark.parametrize("mistake", sorted(WRONG))
def test_a_front_end_written_wrong_fails_type_checking(
    checked: dict[str, tuple[str, int]], mistake: str
) -> None:
    out, status = checked[mistake]
    expected = WRONG[mistake][1]
    assert status == 1, out
    assert expected in out, out
    assert out.count(": error:") == 1, out  # that mistake, and nothing else
