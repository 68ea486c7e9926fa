"""Adding an operation is one module and one registry line: the rest follows.

`tests/support/toy_operation.py` is written as a real operation is; the fixture adds its one
registry line (`Registry.extend`, the registry's extension point) and takes it out again. With
nothing else, the toy is a CLI subcommand with its option, a Dagster job with its run config and a
routine action a table's settings may choose, a row of the operation history from each, and a
reference page, a nav entry and a row of the table of operations on the docs site. The Airflow
operator is proven in `tests/airflow/test_adding_an_operation.py` (Airflow's own process).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pytest

from delta_ops import cli
from delta_ops.dagster import DeltaTableTarget, build_delta_maintenance_defs
from delta_ops.dagster.settings import MaintenanceSettings, routine_actions
from delta_ops.ops.operation import AnyOperation
from delta_ops.ops.registry import OPERATIONS
from delta_ops.service.history import OperationHistory
from delta_ops.table.writer import write_arrow
from tests.project.test_docs_reference import docs_hooks
from tests.support import toy_operation


@pytest.fixture
def toy() -> Iterator[AnyOperation]:
    OPERATIONS.extend(toy_operation.ENTRY)
    try:
        yield OPERATIONS["toy_count"]
    finally:
        OPERATIONS.remove("toy_count")
    assert "toy_count" not in OPERATIONS


@pytest.fixture
def table(tmp_path: Path) -> Path:
    path = tmp_path / "lake" / "t"
    for i in range(3):
        write_arrow(path, pa.table({"id": pa.array([i], pa.int64())}))
    return path


def _history(location: Path) -> list[dict[str, object]]:
    rows = OperationHistory(str(location)).read(["operation", "status", "front_end", "reason"])
    return rows.to_pylist()


def test_the_cli_has_its_subcommand_and_the_history_its_row(
    toy: AnyOperation, table: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    history = tmp_path / "history"
    argv = ["toy-count", str(table), "--at-least", "2", "--json", "--history", str(history)]
    assert cli.main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["counted"], data["dry_run"]) == (3, False)
    assert cli.main(["--help"]) == 0
    assert "toy-count" in capsys.readouterr().out
    assert cli.main(["toy-count", str(table), "--at-least", "0"]) == 2  # its option's parser
    assert "--at-least: must be at least 1, got 0" in capsys.readouterr().err
    assert _history(history) == [
        {
            "operation": "toy_count",
            "status": "succeeded",
            "front_end": "cli",
            "reason": "counted 3 files",
        }
    ]


def test_dagster_has_its_job_config_and_action(toy: AnyOperation, table: Path) -> None:
    assert "toy_count" in routine_actions()  # it needs no argument: a schedule may run it
    settings = MaintenanceSettings.parse(actions=["checkpoint", "toy_count"])
    defs = build_delta_maintenance_defs(
        [DeltaTableTarget("t", str(table), settings=settings)], name="lake"
    )
    job = defs.resolve_job_def("lake_toy_count_job")
    result = job.execute_in_process(
        run_config={"ops": {"lake_toy_count": {"config": {"at_least": 5}}}},
        instance=dg.DagsterInstance.ephemeral(),
    )
    assert result.success
    # the table's maintenance asset has an output for the action its settings chose
    keys = {k.to_user_string() for k in defs.resolve_all_asset_keys()}
    assert "delta_maintenance/lake/t/toy_count" in keys
    # 3 files, fewer than 5: skipped, and recorded so
    assert _history(table.parent / "_delta_ops_history") == [
        {
            "operation": "toy_count",
            "status": "skipped",
            "front_end": "dagster",
            "reason": "3 files, fewer than 5",
        }
    ]


def test_the_docs_have_its_reference_page_nav_entry_and_row(toy: AnyOperation) -> None:
    hooks = docs_hooks()
    page = hooks.reference_pages()["reference/ops/toy_operation.md"]
    assert "::: tests.support.toy_operation" in page
    assert {"Toy count": "reference/ops/toy_operation.md"} in hooks.reference_nav()
    table = hooks.operations_table()
    assert (
        "| [toy count](../reference/ops/toy_operation.md) | `delta-ops toy-count` | `toy_count` |"
        f" {toy.help} |" in table.splitlines()
    )


def test_without_its_line_the_toy_is_nowhere() -> None:
    """The other tests' toy comes from the fixture's registry line, not from elsewhere."""
    assert "toy_count" not in OPERATIONS
    assert "toy_count" not in docs_hooks().operations_table()
    assert cli.main(["toy-count", "--help"]) == 2
