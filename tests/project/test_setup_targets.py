"""Installs live in set-up targets, and the benchmarks stand without the test package.

* ``make test`` installs nothing (no apt-get, pip, npm or go build in what it would run, every
  target remade), while ``make check`` runs the set-up first: a fresh machine still needs only
  ``make check``.
* No benchmark (nor the shared ``loopback`` package the benchmarks and tests both use) imports
  from ``tests``.
"""

from __future__ import annotations

import ast
import subprocess

from tests.support import REPO

INSTALLS = ("apt-get install", "pip install", "npm ci", "go build", "go mod download")


def _dry_run(target: str) -> str:
    """What `make TARGET` would run with every target out of date (`-B -n`: nothing runs)."""
    out = subprocess.run(
        ["make", "-B", "-n", "--no-print-directory", target],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout


def test_make_test_installs_nothing() -> None:
    commands = _dry_run("test")
    assert "pytest" in commands
    assert [i for i in INSTALLS if i in commands] == []


def test_make_check_runs_the_set_up_before_the_tests() -> None:
    commands = _dry_run("check")
    for install in ("apt-get install", "pip install", "npm ci"):
        assert install in commands, install
    last_install = max(commands.rindex(i) for i in ("apt-get install", "pip install", "npm ci"))
    assert last_install < commands.index("-m pytest")
    # the benchmarks' own set-up (SeaweedFS) is not the gates'
    assert "go build" not in commands


def test_no_benchmark_imports_the_test_package() -> None:
    offenders = []
    for folder in ("benchmarks", "loopback"):
        for path in sorted((REPO / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                names = []
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                for name in names:
                    if name == "tests" or name.startswith("tests."):
                        offenders.append(f"{path.relative_to(REPO)}:{node.lineno}: {name}")
    assert offenders == []
