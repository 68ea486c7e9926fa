"""Every operation has one shape: one module ending with its OPERATION, gathered by the
registry; a plan with `nothing_to_do`, `idle_reason` and `to_dict`; plain data out.

Adding an operation is writing its module and one registry line: the first test finds every
module under delta_ops/ops that defines OPERATION and requires the registry to hold exactly
those, so a module the registry forgets (or a description left in the registry) fails.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pyarrow as pa
import pytest

from delta_ops import clock
from delta_ops.errors import InvalidValue
from delta_ops.ops import registry
from delta_ops.ops.engines import LOCAL
from delta_ops.ops.operation import ENGINE_OPTION, Plan
from delta_ops.ops.vacuum import plan_vacuum
from delta_ops.service.due import Action
from delta_ops.table.snapshot import load_snapshot
from delta_ops.table.writer import write_arrow
from tests.support import REPO

OPS = REPO / "delta_ops" / "ops"
#: the values an operation cannot plan without
NEEDED = {
    "restore": {"version": 1},
    "drop_feature": {"feature": "inCommitTimestamp"},
    "cluster_by": {"columns": "id"},
}


def _modules_defining_operation() -> set[str]:
    found = set()
    for path in OPS.glob("*.py"):
        for node in ast.parse(path.read_text()).body:
            targets = node.targets if isinstance(node, ast.Assign) else []
            if isinstance(node, ast.AnnAssign):  # OPERATION: Operation[...] = Operation(...)
                targets = [node.target]
            if any(isinstance(t, ast.Name) and t.id == "OPERATION" for t in targets):
                found.add(f"delta_ops.ops.{path.stem}")
    return found


def test_the_registry_gathers_exactly_the_modules_that_describe_an_operation() -> None:
    described = _modules_defining_operation()
    assert len(described) >= 6
    gathered = {op.plan_with.__module__ for op in registry.OPERATIONS.values()}
    assert gathered == described
    # the registry describes nothing itself: no Operation(...) is built there
    source = (OPS / "registry.py").read_text()
    assert "Operation(" not in source
    assert len(registry.OPERATIONS) == len(described)  # one entry per module, no duplicates


@pytest.fixture
def table(tmp_path: Path) -> Path:
    path = tmp_path / "t"
    # in-commit timestamps: a feature to drop
    config = {"delta.enableInCommitTimestamps": "true"}
    for start in range(0, 30, 10):  # three small files: something to compact
        data = pa.table({"id": pa.array(range(start, start + 10), pa.int64())})
        write_arrow(path, data, configuration=config if start == 0 else None)
    return path


@pytest.mark.parametrize("name", sorted(registry.OPERATIONS))
def test_every_plan_has_the_plan_shape_and_is_plain_data(table: Path, name: str) -> None:
    op = registry.OPERATIONS[name]
    plan = op.plan(op.load(table), op.parse(NEEDED.get(name, {})), LOCAL)
    assert isinstance(plan, Plan)
    assert isinstance(plan.nothing_to_do, bool)
    assert isinstance(op.idle_reason(plan), str) and op.idle_reason(plan)
    data = plan.to_dict()
    assert json.loads(json.dumps(data)) == data  # plain data: no enum, engine or snapshot
    if ENGINE_OPTION in op.options:
        assert data["engine"] == "local"
    assert isinstance(op.describe_plan(plan), str)


def test_a_plan_reports_a_clamped_now_only_when_the_clock_lowered_it(table: Path) -> None:
    snapshot = load_snapshot(table)
    now = clock.now_ms()
    as_asked = plan_vacuum(snapshot, now - 1000)
    assert (as_asked.now_ms, as_asked.requested_now_ms) == (now - 1000, None)
    future = now + 86_400_000
    clamped = plan_vacuum(snapshot, future)
    assert clamped.requested_now_ms == future and clamped.now_ms <= clock.now_ms()


def test_each_operation_has_one_name_and_old_names_still_work_with_a_warning() -> None:
    """An operation's one name serves the history, Dagster and Airflow; the CLI spells it with
    ``-``; the names Dagster gave two of them before are accepted, with a deprecation line."""
    ops = registry.OPERATIONS
    for name, op in ops.items():
        assert op.name == name and name.isidentifier()
        assert ops.canonical(op.command) == name  # the CLI's spelling, silently
    for old, new in (("log_cleanup", "cleanup"), ("row_tracking", "enable_row_tracking")):
        with pytest.warns(FutureWarning, match=f"'{old}' is deprecated.*'{new}'"):
            assert ops.lookup(old) is ops[new]
    with pytest.raises(InvalidValue, match="'vacum' is not an operation; known: checkpoint,"):
        ops.canonical("vacum")


def test_the_actions_judged_due_are_registered_operations() -> None:
    """The due rule, the fleet planner, inspect and the Dagster schedule name the actions they
    judge by the operations' names."""
    assert {a.value for a in Action} <= set(registry.OPERATIONS)


def test_the_package_docstring_lists_every_operation() -> None:
    import delta_ops.ops

    doc = delta_ops.ops.__doc__ or ""
    for entry in registry.ENTRIES:
        assert f"`{entry.module_path}`" in doc, entry.name
