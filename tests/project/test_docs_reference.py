"""The API reference names every module of the package, so a new module is documented when it
lands (the strict docs build, `make docs`, already fails for a page naming a module that is gone).
"""

from __future__ import annotations

import re
from types import ModuleType

from tests.support import REPO, module_from_file

#: modules that hold no API: the version string and the CLI's `python -m` entry
NOT_DOCUMENTED = {"delta_ops.version", "delta_ops.cli.__main__"}


def _modules() -> set[str]:
    names = set()
    for path in (REPO / "delta_ops").rglob("*.py"):
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names.add(".".join(parts))
    return names - NOT_DOCUMENTED


def docs_hooks() -> ModuleType:
    """docs/hooks.py, the MkDocs hook that writes the operations' pages from the registry."""
    return module_from_file("docs_hooks", REPO / "docs" / "hooks.py")


def _documented() -> set[str]:
    pages = [p.read_text() for p in (REPO / "docs" / "reference").rglob("*.md")]
    pages += docs_hooks().reference_pages().values()  # the generated ones
    return {m for page in pages for m in re.findall(r"^::: (\S+)", page, re.MULTILINE)}


def test_every_module_has_a_reference_entry() -> None:
    missing = _modules() - _documented()
    assert missing == set(), f"add them to a page under docs/reference: {sorted(missing)}"


def test_the_check_reads_the_pages() -> None:
    documented = _documented()
    assert {"delta_ops.ops.vacuum", "delta_ops.errors"} <= documented
    assert "delta_ops.version" not in documented
