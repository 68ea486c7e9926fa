"""The operator classes are the registry's, written out and checked in, and typed.

`delta_ops/airflow/operator_classes.py` is regenerated in memory and compared, so adding an
operation or an option (or changing a default) fails here until the file is rewritten; the
classes' signatures are read back against the registry; and mypy --strict, run on a small DAG
file, accepts the operators written right and refuses each mistake a user makes with the error
that names it (what `**kwargs: Any` let through before).
"""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from delta_ops.ops.registry import ENTRIES, OPERATIONS
from tests.support import REPO, toy_operation
from tests.support.airflow_support import airflow_home
from tests.support.type_check import mypy_strict


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return airflow_home(tmp_path_factory.getbasetemp())


def test_the_checked_in_classes_are_what_the_registry_says(home: Path) -> None:
    from delta_ops.airflow.operator_code import COMMAND, TARGET, render

    assert TARGET == REPO / "delta_ops" / "airflow" / "operator_classes.py"
    assert TARGET.read_text() == render(), f"stale operator classes: run {COMMAND}"


def test_a_new_operation_makes_the_checked_in_classes_stale(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the test above catches: the toy operation's one registry line is a class more."""
    from delta_ops.airflow import operator_code

    OPERATIONS.extend(toy_operation.ENTRY)
    try:
        monkeypatch.setattr(operator_code, "ENTRIES", (*ENTRIES, toy_operation.ENTRY))
        source = operator_code.render()
    finally:
        OPERATIONS.remove(toy_operation.ENTRY.name)
    assert source != operator_code.TARGET.read_text()
    assert "class DeltaToyCountOperator(DeltaOperationOperator):" in source
    assert "        at_least: int | str | XComArg = 1,\n" in source
    assert "    - `at_least` (count: a whole number; default `1`):" in source


def test_an_option_named_as_an_operators_own_argument_is_refused(home: Path) -> None:
    import dataclasses

    from delta_ops.airflow.operator_code import parameters

    vacuum = OPERATIONS["vacuum"]
    clash = dataclasses.replace(vacuum.options[0], name="history")
    options_type = dataclasses.make_dataclass("Clash", [("history", int, 0)], frozen=True)
    bad = dataclasses.replace(vacuum, options=(clash,), options_type=options_type)
    with pytest.raises(TypeError, match=r"vacuum: options named as an operator's own arguments"):
        parameters(bad)


def test_each_class_takes_the_registrys_options_with_their_defaults(home: Path) -> None:
    from delta_ops.airflow.operator_base import COMMON_ARGUMENTS, DeltaOperationOperator
    from delta_ops.airflow.operators import OPERATORS, operator_options

    own = [
        name
        for name in inspect.signature(DeltaOperationOperator.__init__).parameters
        if name not in ("self", "kwargs")
    ]
    # every argument of the base is said once, in the docstrings and the how-to pages
    assert {name for name, _ in COMMON_ARGUMENTS} == {"task_id", *own} - {"engine"}
    for name, cls in OPERATORS.items():
        operation = OPERATIONS[name]
        signature = inspect.signature(cls.__init__).parameters
        options = operator_options(operation)
        expected = ["self", "table", *(o.name for o in options)]
        expected += ["version"] if operation.at_version else []
        expected += [n for n in own if n != "table" and n not in expected]
        assert list(signature) == [*expected, "kwargs"], name
        for option in options:
            assert signature[option.name].default == option.default, (name, option.name)
            assert signature[option.name].kind is inspect.Parameter.KEYWORD_ONLY
        doc = cls.__doc__ or ""
        assert all(f"- `{o.name}` ({o.kind.value}: " in doc for o in options), name
        assert ":func:" not in doc and "``" not in doc  # Markdown, no reST


def test_airflows_own_keywords_are_all_typed(home: Path) -> None:
    """`BaseOperatorArguments` names what this Airflow's `BaseOperator` takes, no more, no
    less: an Airflow that adds one fails here until it is typed too."""
    from airflow.sdk import BaseOperator

    from delta_ops.airflow.operator_base import BaseOperatorArguments

    taken = set(inspect.signature(BaseOperator.__init__).parameters) - {"self", "kwargs"}
    assert set(BaseOperatorArguments.__annotations__) == taken


def test_airflow_reads_the_options_from_the_signature_too(home: Path) -> None:
    """In the signature, the options are Airflow's like any operator's arguments: a mapped
    task's `partial` takes them (it refused them when they arrived as `**kwargs`), and a DAG's
    `default_args` fill them."""
    from airflow.sdk import DAG

    from delta_ops.airflow.operators import DeltaVacuumOperator, operator_for

    with DAG("signature", schedule=None, default_args={"retention": "3d"}):
        task = DeltaVacuumOperator(task_id="vacuum", table="/data/t")
        mapped = (
            operator_for("checkpoint")
            .partial(task_id="checkpoint", table="/data/t", parts=2)
            .expand(version=[1, 2])
        )
    assert task.retention == "3d" and task.mode == "full"
    assert mapped.partial_kwargs["parts"] == 2
    # so the commit DAG's mapped checkpoint takes its options (a TypeError before)
    from delta_ops.airflow.dags import build_delta_commit_dag

    dag = build_delta_commit_dag(["/data/t"], options={"parts": 2})
    assert dag.get_task("checkpoint").partial_kwargs["parts"] == 2


#: a DAG file using the operators right: mypy --strict passes it
RIGHT = """\
from datetime import timedelta

from delta_ops.airflow.operators import (
    OPERATORS,
    DeltaCheckpointOperator,
    DeltaCleanupOperator,
    DeltaCompactOperator,
    DeltaVacuumOperator,
)


def dag_file() -> None:
    DeltaVacuumOperator(
        task_id="vacuum",
        table="s3://lake/events",
        delta_ops_conn_id="lake_s3",
        retention="7d",
        force=True,
        engine="spark",
        retries=3,
        retry_delay=timedelta(minutes=5),
        pool="delta_ops",
    )
    DeltaVacuumOperator(task_id="templated", table="/t", retention="{{ params.retention }}")
    DeltaCheckpointOperator(task_id="checkpoint", table="/t", version=4, parts=2)
    DeltaCleanupOperator(task_id="cleanup", table="/t", retention=0, engine="local")
    DeltaCompactOperator(task_id="compact", table="/t", target_size=4_194_304)
    OPERATORS["vacuum"](task_id="by_name", table="/t")
"""

#: DAG files written wrong, and the error mypy must report for each
WRONG = {
    "a misspelled option": (
        'DeltaVacuumOperator(task_id="v", table="/t", retension="7d")',
        'Unexpected keyword argument "retension" for "DeltaVacuumOperator"',
    ),
    "a misspelled Airflow keyword": (
        'DeltaVacuumOperator(task_id="v", table="/t", retires=3)',
        'Unexpected keyword argument "retires" for "DeltaVacuumOperator"',
    ),
    "a value of the wrong type": (
        'DeltaVacuumOperator(task_id="v", table="/t", mode=3)',
        'Argument "mode" to "DeltaVacuumOperator" has incompatible type "int"',
    ),
    "an engine the operation cannot run on": (
        'DeltaCleanupOperator(task_id="c", table="/t", engine="spark")',
        (
            'Argument "engine" to "DeltaCleanupOperator" has incompatible type'
            " \"Literal['spark']\"; expected \"Literal['local']\""
        ),
    ),
    "no table": (
        'DeltaVacuumOperator(task_id="v")',
        'Missing named argument "table" for "DeltaVacuumOperator"',
    ),
    "no task id": (
        'DeltaCompactOperator(table="/t")',
        'Missing named argument "task_id" for "DeltaCompactOperator"',
    ),
}


def _mypy(tmp_path: Path, source: str) -> tuple[str, int]:
    return mypy_strict(tmp_path / "dag_file.py", source)


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, int, dict[str, int]]:
    """RIGHT, then one function per mistake, in one mypy run; the line of each mistake."""
    source = RIGHT
    lines = {}
    for number, (mistake, (call, _)) in enumerate(sorted(WRONG.items())):
        source += f"\n\ndef mistake_{number}() -> None:\n    {call}\n"
        lines[mistake] = source.count("\n")  # the call is the last line
    out, status = _mypy(tmp_path_factory.mktemp("typed"), source)
    return out, status, lines


def test_a_dag_file_written_right_type_checks(tmp_path: Path) -> None:
    out, status = _mypy(tmp_path, RIGHT)
    assert status == 0, out


@pytest.mark.parametrize("mistake", sorted(WRONG))
def test_a_mistake_in_a_dag_file_fails_type_checking(
    checked: tuple[str, int, dict[str, int]], mistake: str
) -> None:
    out, status, lines = checked
    assert status == 1, out
    errors = [line for line in out.splitlines() if ": error: " in line]
    assert len(errors) == len(WRONG), out  # each mistake once, and nothing else
    [error] = [e for e in errors if f"dag_file.py:{lines[mistake]}: error:" in e]
    assert WRONG[mistake][1] in error, out
