"""The operators' how-to pages (docs/airflow/operators/) are what the registry says today:
regenerated in memory and compared, so a new operation or option reaches the docs."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import REPO
from tests.support.airflow_support import airflow_home

PAGES = REPO / "docs" / "airflow" / "operators"


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return airflow_home(tmp_path_factory.getbasetemp())


def test_every_operator_has_its_current_how_to_page(home: Path) -> None:
    from delta_ops.airflow.operator_docs import render
    from delta_ops.airflow.operators import OPERATORS

    stale = [
        name
        for name, cls in OPERATORS.items()
        if not (PAGES / f"{name}.md").exists()
        or (PAGES / f"{name}.md").read_text() != render(cls.operation)
    ]
    assert not stale, (
        f"stale or missing pages for {stale}: run"
        " python -m delta_ops.airflow.operator_docs docs/airflow/operators"
    )
    assert {p.stem for p in PAGES.glob("*.md")} == set(OPERATORS)
    page = (PAGES / "vacuum.md").read_text()
    for part in ("## Arguments", "## Templating", "## XCom and asset events", "`retention`"):
        assert part in page
