"""Only the storage package touches the operating system's files.

import-linter (`make contracts`) keeps the layers pointing down and fsspec inside storage, but
it does not see standard-library modules; this test reads the core's imports itself so that
`os` and `shutil` stay in `delta_ops/storage` (front ends may read the environment).
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support import REPO

CORE = ("service", "ops", "table", "log", "protocol", "spark")
FORBIDDEN = {"os", "shutil", "fsspec"}
# the one place that sets the environment: Spark starts its Python workers from $PYSPARK_PYTHON
ALLOWED = {
    "delta_ops/spark/workers.py": {"os"},
    # os.cpu_count only: how many threads a cube's passes run on (no file is touched)
    "delta_ops/ops/cluster.py": {"os"},
}


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_the_core_leaves_files_to_storage() -> None:
    offenders = {
        str(path.relative_to(REPO)): sorted(found)
        for package in CORE
        for path in (REPO / "delta_ops" / package).rglob("*.py")
        if (
            found := _imports(path)
            & FORBIDDEN - ALLOWED.get(path.relative_to(REPO).as_posix(), set())
        )
    }
    assert offenders == {}


def test_the_check_sees_an_offender(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("import os.path\nfrom shutil import rmtree\nimport json\n")
    assert _imports(module) & FORBIDDEN == {"os", "shutil"}
