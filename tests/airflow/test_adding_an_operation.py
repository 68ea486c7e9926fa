"""Adding an operation is one module and one registry line: Airflow's part (its own process,
as every Airflow test). The toy of `tests/support/toy_operation.py`, registered with its one
line, is an operator with its option as a keyword, runs in a DAG, and is a row of the history."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from delta_ops.ops.registry import OPERATIONS
from delta_ops.service.history import OperationHistory
from delta_ops.table.writer import write_arrow
from tests.support import toy_operation
from tests.support.airflow_support import airflow_home, dag_module, task_states, xcom


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return airflow_home(tmp_path_factory.getbasetemp())


@pytest.fixture
def toy() -> Iterator[None]:
    OPERATIONS.extend(toy_operation.ENTRY)
    try:
        yield
    finally:
        OPERATIONS.remove("toy_count")
        # the operator made for it, so the other tests see the registry's operators only
        from delta_ops.airflow import operators

        made = operators.OPERATORS.pop("toy_count", None)
        if made is not None:
            delattr(operators, made.__name__)


def test_the_toy_is_an_operator_that_runs_and_is_recorded(
    home: Path, tmp_path: Path, toy: None
) -> None:
    from delta_ops.airflow.operators import operator_for

    cls = operator_for("toy_count")
    assert cls is operator_for("toy-count")  # made once, found by either spelling
    assert cls.__name__ == "DeltaToyCountOperator" and "at_least" in cls.template_fields
    table = tmp_path / "t"
    for i in range(3):
        write_arrow(table, pa.table({"id": pa.array([i], pa.int64())}))
    history = tmp_path / "history"
    module = dag_module(
        home,
        "toy",
        f"""
        from airflow.sdk import DAG
        from delta_ops.airflow.operators import operator_for

        with DAG("toy", schedule=None) as dag:
            operator_for("toy_count")(task_id="count", table={str(table)!r}, at_least=2,
                                      history=True, history_location={str(history)!r})
        """,
    )
    run = module.dag.test()
    assert task_states(run) == {"count": "success"}
    assert xcom(run, "count")["counted"] == 3
    rows = OperationHistory(str(history)).read(["operation", "status", "front_end"])
    assert rows.to_pylist() == [
        {"operation": "toy_count", "status": "succeeded", "front_end": "airflow"}
    ]
