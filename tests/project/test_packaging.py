"""The repository stands on its own, and the core works without any extra installed.

* A copy of exactly what a clone holds (tracked files plus untracked, unignored ones), with no
  ``shared/`` folder beside it, collects every test and passes the fixture tests.
* A virtualenv with only the core dependencies (no Dagster, PySpark or store packages) runs
  inspect, checkpoint, cleanup and vacuum on a real fixture through the `delta-ops` command, and
  missing extras are one-line errors naming the extra to install.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from tests.support import REPO, copy_fixture


def _clone_like_copy(dest: Path) -> Path:
    """What `git clone` of the current work tree would hold (as if committed)."""
    names = (
        subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=REPO,
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .split("\0")
    )
    root = dest / "delta-ops"
    for name in filter(None, names):
        src = REPO / name
        if not src.is_file():
            continue  # deleted in the work tree, not yet committed
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target)
    return root


def _collected(cwd: Path) -> int:
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    last = [line for line in out.stdout.splitlines() if "collected" in line][-1]
    return int(last.split()[0])


def test_a_clean_clone_collects_every_test_and_reads_its_own_fixtures(tmp_path: Path) -> None:
    clone = _clone_like_copy(tmp_path)
    assert not any(p.name == "shared" for p in clone.parent.iterdir())
    assert _collected(clone) == _collected(REPO)
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/table/test_snapshot_fixtures.py",
        ],
        cwd=clone,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout[-3000:]
    assert " passed" in run.stdout and "skipped" not in run.stdout


def test_no_test_or_script_reaches_outside_the_repository() -> None:
    # the patterns are assembled here so that this file does not contain them itself
    dots, share, root = "..", "shared", "work"
    needles = (f"{dots}/{share}", f'"/{root}/', f'parent / "{share}"')
    offenders = []
    for folder in ("tests", "scripts", "benchmarks"):
        for path in (REPO / folder).rglob("*.py"):
            text = path.read_text()
            if any(needle in text for needle in needles):
                offenders.append(str(path.relative_to(REPO)))
    assert offenders == []


def test_no_code_or_doc_cites_notes_the_repository_lacks() -> None:
    """Docstrings and comments cite the Delta protocol's sections or the reference's source,
    never the team's notes that live outside the repository."""
    notes = ("PROTOCOL" + "_NOTES", "DESIGN" + ".md", "STYLE" + ".md")
    offenders = []
    for folder in ("delta_ops", "tests", "scripts", "benchmarks", "loopback"):
        for path in (REPO / folder).rglob("*.py"):
            if any(note in path.read_text() for note in notes):
                offenders.append(str(path.relative_to(REPO)))
    for doc in ("README.md", "ARCHITECTURE.md", "BENCHMARKS.md"):
        if any(note in (REPO / doc).read_text() for note in notes):
            offenders.append(doc)
    assert offenders == []


@pytest.fixture(scope="module")
def core_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtualenv with delta-ops and its core dependencies only."""
    where = tmp_path_factory.mktemp("core-venv")
    clone = _clone_like_copy(where)
    env_dir = where / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", str(clone)],
        check=True,
        capture_output=True,
        timeout=900,
    )
    return env_dir


def _run(env_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run(
        [str(env_dir / "bin" / args[0]), *args[1:]],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        env=env,
        cwd=env_dir,
    )


def test_core_only_install_has_no_extras(core_venv: Path) -> None:
    listed = _run(core_venv, "python", "-m", "pip", "list", "--format=json")
    installed = {p["name"].lower() for p in json.loads(listed.stdout)}
    assert {"pyarrow", "fsspec", "pyroaring", "delta-ops"} <= installed
    assert not installed & {"dagster", "pyspark", "s3fs", "adlfs", "gcsfs", "deltalake"}


def test_core_only_cli_maintains_a_real_table(core_venv: Path, tmp_path: Path) -> None:
    table = copy_fixture("delta-rs/simple_table", tmp_path)
    inspect = _run(core_venv, "delta-ops", "inspect", str(table), "--json")
    assert inspect.returncode == 0, inspect.stderr
    before = json.loads(inspect.stdout)
    assert before["version"] == 4

    checkpoint = _run(core_venv, "delta-ops", "checkpoint", str(table), "--json")
    assert checkpoint.returncode == 0, checkpoint.stderr
    assert (table / "_delta_log" / "00000000000000000004.checkpoint.parquet").stat().st_size > 0

    cleanup = _run(core_venv, "delta-ops", "cleanup", str(table), "--json", "--dry-run")
    assert cleanup.returncode == 0, cleanup.stderr

    vacuum = _run(core_venv, "delta-ops", "vacuum", str(table), "--json", "--dry-run")
    assert vacuum.returncode == 0, vacuum.stderr
    assert json.loads(vacuum.stdout)["dry_run"] is True

    after = json.loads(_run(core_venv, "delta-ops", "inspect", str(table), "--json").stdout)
    assert after["version"] == before["version"] and after["num_files"] == before["num_files"]


@pytest.mark.parametrize(
    ("code", "extra"),
    [
        ("import delta_ops.dagster", "dagster"),
        ("import delta_ops.spark", "spark"),
        ("from delta_ops import load_snapshot; load_snapshot('s3://bucket/table')", "s3"),
        ("from delta_ops import load_snapshot; load_snapshot('gs://bucket/table')", "gcs"),
        ("from delta_ops import load_snapshot; load_snapshot('az://container/table')", "azure"),
    ],
)
def test_missing_extras_name_the_extra_to_install(core_venv: Path, code: str, extra: str) -> None:
    out = _run(core_venv, "python", "-c", code)
    assert out.returncode != 0
    assert f"pip install 'delta-ops[{extra}]'" in out.stderr


def test_core_only_cli_names_the_missing_extra_in_one_line(core_venv: Path) -> None:
    out = _run(core_venv, "delta-ops", "inspect", "s3://bucket/table")
    assert out.returncode != 0
    assert out.stderr.strip().splitlines() == [
        (
            "delta-ops: error: s3:// tables: the 's3' extra is not installed:"
            " pip install 'delta-ops[s3]'"
        )
    ]
