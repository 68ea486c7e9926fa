"""The hand-made mutants of scripts/mutation_check.py still apply to the code they break.

A mutant whose text no longer occurs (a refactor moved or reworded the code) would stop the
mutation run at that mutant, or, worse, be quietly aimed at nothing; this keeps every edit of
every mutant, the reliability suite's and the races', matching its file exactly once, so the
score the closing notes report is measured on the code as it is.
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

import pytest

from tests.support import REPO


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "mutation_check", REPO / "scripts" / "mutation_check.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


SCRIPT = _script()
ALL = (*SCRIPT.MUTANTS, *SCRIPT.RACE_MUTANTS)


@pytest.mark.parametrize("mutant", ALL, ids=[m.name for m in ALL])
def test_every_edit_of_the_mutant_matches_its_file_once(mutant: object) -> None:
    for path, old, new in mutant.edits:  # type: ignore[attr-defined]
        text = (REPO / path).read_text()
        assert text.count(old) == 1, f"{path}: the edit's text occurs {text.count(old)} times"
        assert old != new


def test_mutant_names_are_unique_and_race_targets_are_scenarios() -> None:
    from tests.reference.test_races import SCENARIOS

    names = [m.name for m in ALL]
    assert len(names) == len(set(names))
    scenarios = {s.name for s in SCENARIOS}
    aimed = {race for m in SCRIPT.RACE_MUTANTS for race in m.races}
    assert aimed <= scenarios
    assert aimed == scenarios, f"no race mutant aims at {sorted(scenarios - aimed)}"
