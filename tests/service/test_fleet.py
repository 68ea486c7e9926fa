"""The fleet planner (`delta-ops plan LAKE`): every table of a lake assessed from its log,
ranked by what maintenance would gain for its cost, chosen within a budget, each with why.

The lake holds one table per kind of work (a checkpoint overdue, small files, a removed file
past the retention, rows hidden by deletion vectors: delta-rs' own DV table) and one with
nothing to do; what the planner reads is checked against the disk and deltalake."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pyarrow as pa
import pytest

from delta_ops import clock
from delta_ops.cli.commands import main
from delta_ops.service.fleet import (
    FleetTable,
    assess,
    fleet_from_spec,
    fleet_from_warehouse,
    plan_fleet,
)
from delta_ops.table.snapshot import load_snapshot
from delta_ops.table.writer import write_arrow
from tests.support import copy_fixture, deltalake_rows

DAY_S = 86_400


def _commits(path: Path, n: int) -> Path:
    for i in range(n):
        write_arrow(path, pa.table({"id": pa.array([i], pa.int64())}))
    return path


@pytest.fixture
def lake(tmp_path: Path) -> Path:
    warehouse = tmp_path / "warehouse"
    _commits(warehouse / "lagging", 12)  # 12 commits, no checkpoint: due, and 12 small files
    _commits(warehouse / "quiet", 2)
    vacuumable = _commits(warehouse / "sales" / "vacuumable", 2)
    write_arrow(vacuumable, pa.table({"id": pa.array([9], pa.int64())}), mode="overwrite")
    old = time.time() - 10 * DAY_S
    removed = load_snapshot(vacuumable).tombstones
    for path in removed.column("path").to_pylist():
        os.utime(vacuumable / path, (old, old))
    log = vacuumable / "_delta_log"
    _age_removes(log, int(old * 1000))
    copy_fixture("delta-rs/table-with-dv-small", warehouse)  # rows hidden by a deletion vector
    return warehouse


def _age_removes(log: Path, when_ms: int) -> None:
    """Date the removes of the last commit back to `when_ms` (as if written then)."""
    last = max(log.glob("*.json"))
    lines = []
    for line in last.read_text().splitlines():
        action = json.loads(line)
        if "remove" in action:
            action["remove"]["deletionTimestamp"] = when_ms
        lines.append(json.dumps(action))
    last.write_text("\n".join(lines) + "\n")


def _plan_json(capsys, *args: str) -> dict:
    assert main(["plan", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_every_table_is_ranked_with_why_it_is_or_is_not_chosen(lake, capsys):
    plan = _plan_json(capsys, str(lake))
    by_name = {c["name"]: c for c in plan["choices"]}
    assert plan["tables"] == 4 and set(by_name) == {
        "lagging", "quiet", "sales__vacuumable", "delta-rs__table-with-dv-small"
    }  # fmt: skip
    lagging = by_name["lagging"]
    assert lagging["chosen"] and lagging["actions"] == ["compact", "checkpoint"]
    assert lagging["facts"]["commits_since_checkpoint"] == 12
    assert "checkpoint: 12 commits since the last (interval 10)" in lagging["why"]
    assert "compact: 12 small files" in lagging["why"]

    vacuumable = by_name["sales__vacuumable"]
    assert vacuumable["chosen"] and vacuumable["actions"] == ["vacuum"]
    gone = lake / "sales" / "vacuumable"
    removed = load_snapshot(gone).tombstones.column("path").to_pylist()
    on_disk = sum((gone / p).stat().st_size for p in removed)
    assert vacuumable["facts"]["reclaimable_bytes"] == on_disk > 0

    dv = by_name["delta-rs__table-with-dv-small"]
    hidden = dv["facts"]["hidden_rows"]
    assert dv["chosen"] and "purge" in dv["actions"]
    physical = load_snapshot(lake / "delta-rs__table-with-dv-small").num_records
    assert hidden == physical - len(deltalake_rows(lake / "delta-rs__table-with-dv-small")) > 0

    quiet = by_name["quiet"]
    assert not quiet["chosen"] and quiet["actions"] == []
    assert quiet["why"].startswith("nothing to do: ")
    assert "checkpoint: 2 commits since the last (interval 10)" in quiet["why"]
    # the chosen first, by priority
    ranks = [c["chosen"] for c in plan["choices"]]
    assert ranks == sorted(ranks, reverse=True)
    priorities = [c["priority"] for c in plan["choices"] if c["chosen"]]
    assert priorities == sorted(priorities, reverse=True)


def test_the_budget_chooses_the_highest_priorities_and_says_why_not_the_rest(lake, capsys):
    full = _plan_json(capsys, str(lake))
    best = next(c["name"] for c in full["choices"] if c["chosen"])
    plan = _plan_json(capsys, str(lake), "--max-tables", "1")
    chosen = [c for c in plan["choices"] if c["chosen"]]
    assert [c["name"] for c in chosen] == [best]
    over = [c for c in plan["choices"] if c["why"].startswith("over budget: 1 table(s)")]
    assert len(over) == len(full["choices"]) - 2  # all but the chosen and the quiet one
    capped = _plan_json(capsys, str(lake), "--max-per-action", "checkpoint=0")
    lagging = next(c for c in capped["choices"] if c["name"] == "lagging")
    assert lagging["chosen"] and lagging["actions"] == ["compact"]
    assert main(["plan", str(lake), "--max-per-action", "optimize=1"]) == 2
    assert "unknown actions ['optimize']" in capsys.readouterr().err
    assert main(["plan", str(lake), "--max-per-action", "vacuum"]) == 2
    assert "--max-per-action: 'vacuum' is not ACTION=N" in capsys.readouterr().err


def test_a_lake_file_lists_tables_with_settings_of_their_own(lake, tmp_path, capsys):
    spec = tmp_path / "lake.yaml"
    spec.write_text(
        f"warehouse: {lake}\n"
        "defaults: {actions: [checkpoint, vacuum]}\n"
        "tables:\n"
        f"  - {{name: lagging, url: {lake / 'lagging'}, weight: 0.5, actions: [checkpoint]}}\n"
        f"  - {{name: paused, url: {lake / 'quiet'}, enabled: false}}\n"
    )
    plan = _plan_json(capsys, str(spec))
    by_name = {c["name"]: c for c in plan["choices"]}
    assert by_name["lagging"]["actions"] == ["checkpoint"]  # its own actions: no compaction
    assert by_name["paused"]["why"] == "disabled in the lake file"
    assert by_name["delta-rs__table-with-dv-small"]["actions"] == []  # purge is not in defaults
    tables = fleet_from_spec({"tables": [{"url": "s3://lake/events", "weight": 2}]})
    assert tables == [FleetTable("events", "s3://lake/events", weight=2.0)]
    spec.write_text("tables:\n  - {url: /x, retention: 7d}\n")
    assert main(["plan", str(spec)]) == 2
    assert "unknown table settings ['retention']" in capsys.readouterr().err
    spec.write_text("tables:\n  - {url: /x, file_retention: 7 dayz}\n")
    assert main(["plan", str(spec)]) == 2
    assert "/x: file_retention: '7 dayz' is not a duration" in capsys.readouterr().err


def test_a_tables_file_retention_judges_its_vacuum(lake, tmp_path, capsys):
    """The quiet table has nothing for vacuum by its 7-day property; with a file retention of
    0 days its commits are past it (what the Dagster component's setting gives the planner)."""
    spec = tmp_path / "lake.yaml"
    quiet = lake / "quiet"
    for retention, chosen in (("7 days", []), ("0 days", ["vacuum"])):
        spec.write_text(
            f"tables:\n  - {{name: q, url: {quiet}, actions: [vacuum], file_retention: {retention}}}\n"
        )
        [choice] = _plan_json(capsys, str(spec))["choices"]
        assert choice["actions"] == chosen, choice["why"]


def test_a_table_that_cannot_be_read_is_listed_and_does_not_stop_the_plan(lake, capsys):
    broken = lake / "broken" / "_delta_log"
    broken.mkdir(parents=True)
    (broken / f"{0:020d}.json").write_text("not json\n")
    plan = plan_fleet(fleet_from_warehouse(str(lake)), clock.now_ms())
    choice = next(c for c in plan.choices if c.assessment.name == "broken")
    assert not choice.chosen and choice.why.startswith("cannot be assessed: CorruptLog")
    assert len(plan.chosen) == 3
    assert main(["plan", str(lake / "nowhere")]) == 2


def _old_commits_no_checkpoint(path: Path, commits: int, interval: str) -> Path:
    """`commits` commits dated 40 days back, past the 30-day log retention, then one today; no
    checkpoint, so cleanup has work only after one."""
    for i in range(commits):
        write_arrow(
            path,
            pa.table({"id": pa.array([i], pa.int64())}),
            configuration={"delta.checkpointInterval": interval},
        )
    old = time.time() - 40 * DAY_S
    for file in (path / "_delta_log").iterdir():
        os.utime(file, (old, old))
    return _commits(path, 1)


@pytest.mark.parametrize(("interval", "chosen"), [("2", True), ("50", False)])
def test_cleanup_that_needs_a_checkpoint_is_chosen_only_with_one(tmp_path, interval, chosen):
    table = _old_commits_no_checkpoint(tmp_path / "t", 3, interval)
    assessment = assess(FleetTable("t", str(table)), clock.now_ms())
    assert ("checkpoint" in assessment.gains) is chosen
    assert ("cleanup" in assessment.gains) is chosen
    waiting = [line for line in assessment.idle if "wait for a checkpoint" in line]
    assert bool(waiting) is not chosen, assessment.idle


def test_a_vacuum_chosen_for_commits_aged_past_the_retention_says_so(tmp_path, capsys):
    """Vacuum has work when commits aged past the file retention since the last vacuum, even
    with no expired tombstone left in the log (a checkpoint drops them): the reason says that,
    and offers no "0 bytes reclaimable" as a gain."""
    table = _commits(tmp_path / "warehouse" / "aged", 2)
    old = time.time() - 10 * DAY_S
    for file in (table / "_delta_log").iterdir():
        os.utime(file, (old, old))
    plan = _plan_json(capsys, str(tmp_path / "warehouse"))
    (choice,) = plan["choices"]
    assert "vacuum" in choice["actions"] and choice["facts"]["reclaimable_bytes"] == 0
    assert "reclaimable" not in choice["why"], choice["why"]
    assert "vacuum: commits aged past the file retention since the last vacuum" in choice["why"]
