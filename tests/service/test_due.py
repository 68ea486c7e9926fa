"""One notion of "due": the rule (`delta_ops.service.due`) at its boundaries, and every front end
giving the same answer on a generated lake.

Before the rule, four front ends had four notions: the schedule checkpointed every table with
one commit past its checkpoint, the sensor and planner waited for delta.checkpointInterval,
inspect said "nothing needs doing" where the planner chose a compaction, and the checks
warned at 50 small files where the planner compacted at 10. Here each front end is asked
about the same tables and must name exactly the actions the rule calls due.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import time
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pytest

from delta_ops import clock
from delta_ops.cli import main
from delta_ops.dagster import (
    DeltaMaintenanceResource,
    DeltaTableTarget,
    MaintenanceSettings,
    build_delta_maintenance_defs,
)
from delta_ops.ops.checkpoint import checkpoint
from delta_ops.ops.engines import Spread
from delta_ops.service.due import (
    COMPACT_MIN_FILES,
    PURGE_MIN_SHARE,
    Action,
    DueFacts,
    checkpoint_due,
    judge,
)
from delta_ops.service.fleet import FleetTable, plan_fleet
from delta_ops.service.health import due_facts
from delta_ops.table.snapshot import load_snapshot
from delta_ops.table.writer import write_arrow
from tests.support.rewrite_support import dv_table, many_small_appends

DAY_S = 86_400


def _facts(**kwargs) -> DueFacts:  # type: ignore[no-untyped-def]
    base = {"version": 20, "commits_since_checkpoint": 0, "checkpoint_interval": 10}
    return DueFacts(**{**base, **kwargs})


@pytest.mark.parametrize(("since", "due"), [(9, False), (10, True), (0, False)])
def test_a_checkpoint_is_due_at_the_interval(since: int, due: bool) -> None:
    assert checkpoint_due(since, 10) is due
    assert judge(_facts(commits_since_checkpoint=since))[Action.CHECKPOINT].due is due


def test_a_missing_hint_makes_a_checkpoint_due_whatever_the_lag() -> None:
    verdict = judge(_facts(hint_problem="missing"))[Action.CHECKPOINT]
    assert verdict.due and "_last_checkpoint" in verdict.reason


@pytest.mark.parametrize(
    ("small", "due"), [(COMPACT_MIN_FILES - 1, False), (COMPACT_MIN_FILES, True)]
)
def test_a_compaction_is_due_from_the_minimum_of_small_files(small: int, due: bool) -> None:
    verdict = judge(_facts(small_files=small, files=small, table_bytes=small * 100))
    assert verdict[Action.COMPACT].due is due


@pytest.mark.parametrize(("hidden", "due"), [(99, False), (100, True)])
def test_a_purge_is_due_from_the_share_of_hidden_rows(hidden: int, due: bool) -> None:
    assert PURGE_MIN_SHARE == 0.1
    verdict = judge(_facts(hidden_rows=hidden, physical_rows=1000))[Action.PURGE]
    assert verdict.due is due


@pytest.mark.parametrize(("since", "due"), [(4, False), (10, True)])
def test_commits_waiting_for_a_checkpoint_are_cleaned_up_with_the_due_checkpoint(
    since: int, due: bool
) -> None:
    verdicts = judge(_facts(commits_since_checkpoint=since, cleanup_waits_for_checkpoint=True))
    assert verdicts[Action.CLEANUP].due is due
    assert verdicts[Action.CHECKPOINT].due is due
    if not due:
        assert "wait for a checkpoint" in verdicts[Action.CLEANUP].reason


def test_a_refusal_is_never_due() -> None:
    verdicts = judge(
        _facts(commits_since_checkpoint=50, refused={Action.CHECKPOINT: "feature x refuses"})
    )
    assert not verdicts[Action.CHECKPOINT].due
    assert verdicts[Action.CHECKPOINT].reason == "feature x refuses"


def test_each_action_is_ranked_on_its_own_gain_for_its_cost() -> None:
    """A due action's points and cost are its own: a costly compaction on one table does not
    make a cheap, more urgent checkpoint elsewhere rank lower."""
    heavy = judge(
        _facts(commits_since_checkpoint=10, small_files=5000, files=5000, table_bytes=5 * 2**30)
    )
    assert heavy[Action.CHECKPOINT].cost_s < 1 < heavy[Action.COMPACT].cost_s


# ---------------------------------------------------------------------------- the lake


def _age(table: Path, days: int) -> None:
    then = time.time() - days * DAY_S
    for path in table.rglob("*"):
        if path.is_file():
            os.utime(path, (then, then))


def _lake(root: Path) -> dict[str, Path]:
    """Tables in known states: quiet, lagging (under and over the interval), small files,
    deletion vectors, old commits with tombstones."""
    tables: dict[str, Path] = {}

    def one_row_commits(name: str, n: int) -> Path:
        table = root / name
        for i in range(n):
            write_arrow(table, pa.table({"id": pa.array([i], pa.int64())}))
        return table

    tables["quiet"] = one_row_commits("quiet", 2)
    checkpoint(str(tables["quiet"]))
    tables["under"] = one_row_commits("under", 4)  # 4 commits, no checkpoint: not due
    tables["lagging"] = one_row_commits("lagging", 11)  # and 11 small files
    tables["small"] = root / "small"
    many_small_appends(
        tables["small"], appends=12, configuration={"delta.checkpointInterval": "100"}
    )
    tables["dv"] = dv_table(root / "dv")
    old = root / "old"
    many_small_appends(old, appends=4)
    main(["compact", str(old)])  # removes past the file retention once aged
    _age(old, 40)
    tables["old"] = old
    return tables


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return _lake(tmp_path_factory.mktemp("lake"))


def _due(table: Path) -> set[str]:
    return {v.action.value for v in judge(due_facts(load_snapshot(table), clock.now_ms())).due}


#: the Dagster names of the actions
DAGSTER = {"compact": "compact", "purge": "purge", "checkpoint": "checkpoint",
           "cleanup": "cleanup", "vacuum": "vacuum"}  # fmt: skip


def test_the_lake_has_each_kind_of_table(lake: dict[str, Path]) -> None:
    """The lake is worth asking about: quiet tables and each action due somewhere."""
    due = {name: _due(path) for name, path in lake.items()}
    assert due["quiet"] == due["under"] == set(), due
    assert {"checkpoint", "compact"} <= due["lagging"], due
    assert due["small"] == {"compact"}, due
    assert "purge" in due["dv"], due
    assert {"vacuum", "cleanup"} & due["old"], due


def test_every_front_end_names_the_due_actions(
    lake: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    due = {name: _due(path) for name, path in lake.items()}

    # inspect: the advice's commands
    for name, path in lake.items():
        assert main(["inspect", str(path), "--json"]) == 0
        advice = json.loads(capsys.readouterr().out)["advice"]
        advised = {a["command"].split()[1] for a in advice if a["command"]}
        assert advised & set(DAGSTER) == due[name], (name, advice)

    # the fleet planner, without a budget
    plan = plan_fleet(
        [FleetTable(n, str(p)) for n, p in lake.items()], clock.now_ms(), spread=Spread.THREADS
    )
    planned = {c.assessment.name: set(c.actions) for c in plan.choices}
    assert planned == due

    # the Dagster schedule, every routine action asked
    settings = MaintenanceSettings(actions=tuple(DAGSTER.values()))
    targets = [DeltaTableTarget(n, str(p), settings=settings) for n, p in lake.items()]
    defs = build_delta_maintenance_defs(targets, name="lake")
    resources = {"lake_delta_maintenance": DeltaMaintenanceResource()}
    schedule = defs.resolve_schedule_def("lake_maintenance_schedule")
    tick = schedule.evaluate_tick(
        dg.build_schedule_context(
            resources=resources, scheduled_execution_time=dt.datetime.now(dt.UTC)
        )
    )
    scheduled = {
        r.tags["delta_ops/table"]: {k.path[-1] for k in r.asset_selection or []}
        for r in tick.run_requests
    }
    assert scheduled == {n: {DAGSTER[a] for a in d} for n, d in due.items() if d}

    # the commit sensor: a checkpoint exactly where one is due
    sensor = defs.resolve_sensor_def("lake_commit_sensor")
    result = sensor.evaluate_tick(dg.build_sensor_context(resources=resources))
    sensed = {r.tags["delta_ops/table"] for r in result.run_requests or []}
    assert sensed == {n for n, d in due.items() if "checkpoint" in d}


def test_the_checks_fail_exactly_where_the_rule_says_due(lake: dict[str, Path]) -> None:
    due = {name: _due(path) for name, path in lake.items()}
    targets = [DeltaTableTarget(n, str(p)) for n, p in lake.items()]
    defs = build_delta_maintenance_defs(targets, name="chk")
    result = dg.materialize(
        [*defs.assets, *defs.asset_checks],
        resources=defs.resources,
        selection=dg.AssetSelection.all_asset_checks(),
        instance=dg.DagsterInstance.ephemeral(),
        raise_on_error=False,
    )
    failed: dict[str, set[str]] = {}
    for evaluation in result.get_asset_check_evaluations():
        if not evaluation.passed:
            table = evaluation.asset_key.path[-1]
            failed.setdefault(table, set()).add(evaluation.check_name)
    judged = {"checkpoint_lag": "checkpoint", "small_files": "compact", "deleted_rows": "purge"}
    for name in lake:
        flagged = {judged[c] for c in failed.get(name, set()) if c in judged}
        assert flagged == due[name] & set(judged.values()), (name, failed.get(name))
