"""Run mypy (strict, with the project's configuration) on a snippet a test writes: how the
tests prove that a front end's mistake is a type error (tests/ops/test_typed_contract.py,
tests/airflow/test_operator_code.py).

    out, status = mypy_strict(tmp_path / "front_end.py", source)
    assert status == 1 and 'Unexpected keyword argument "retension"' in out
"""

from __future__ import annotations

from pathlib import Path

from mypy import api

from tests.support import REPO


def mypy_strict(path: Path, source: str) -> tuple[str, int]:
    """Write `source` to `path`, type-check it; mypy's report and its exit status."""
    path.write_text(source)
    out, err, status = api.run(
        [
            "--config-file",
            str(REPO / "pyproject.toml"),
            "--cache-dir",
            str(REPO / ".mypy_cache"),
            "--strict",
            "--no-error-summary",
            "--hide-error-context",
            str(path),
        ]
    )
    return out + err, status
