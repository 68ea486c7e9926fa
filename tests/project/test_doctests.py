"""Every `>>>` example in delta_ops' docstrings runs, and shows what it says it shows.

The modules are found by their text, so a new example is run without being listed here. An
example that cannot run cheaply (it needs a Spark session, a table on storage) is written as a
plain code block (``Example::`` and an indented block, no ``>>>``) rather than skipped, so a
module whose examples are all skipped fails here too.
"""

from __future__ import annotations

import doctest
import importlib
import io

import pytest

from tests.support import REPO

PACKAGE = REPO / "delta_ops"
# examples run when this was written (protocol.properties, protocol.schema, protocol.stats):
# fewer means examples were lost or are no longer found
MIN_EXAMPLES = 18
FLAGS = doctest.ELLIPSIS


def _modules_with_examples() -> list[str]:
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if ">>>" in path.read_text(encoding="utf-8"):
            parts = path.relative_to(REPO).with_suffix("").parts
            names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


MODULES = _modules_with_examples()


def _run(module_name: str) -> tuple[int, int, str]:
    """(examples run, failures, the report of the failures) for one module."""
    module = importlib.import_module(module_name)
    out = io.StringIO()
    runner = doctest.DocTestRunner(optionflags=FLAGS, verbose=False)
    for test in doctest.DocTestFinder(exclude_empty=True).find(module, module_name):
        runner.run(test, out=out.write)
    return runner.tries, runner.failures, out.getvalue()


@pytest.mark.parametrize("module_name", MODULES)
def test_the_examples_of_a_module_pass(module_name: str) -> None:
    attempted, failed, report = _run(module_name)
    assert failed == 0, report
    assert attempted > 0, (
        f"{module_name}: every `>>>` example is skipped; write one that cannot run as a plain"
        " code block (`Example::` and an indented block)"
    )


def test_the_examples_are_found() -> None:
    """A run that finds nothing (a moved package, a broken finder) must not pass silently."""
    assert MODULES, "no module of delta_ops has a `>>>` example"
    total = sum(_run(name)[0] for name in MODULES)
    assert total >= MIN_EXAMPLES, f"only {total} examples ran in {MODULES}"
