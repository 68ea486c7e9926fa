"""What the object-store tests share: the same short history and the same forced vacuum,
run against each store's server with that store's storage options."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

import pyarrow as pa
import pytest

from delta_ops import cli
from delta_ops.table.writer import write_arrow


def write_history(url: str, options: Mapping[str, str], starts: tuple[int, ...]) -> None:
    """Appends of three ids from each start, then an overwrite leaving only id 99."""
    for start in starts:
        ids = pa.array(range(start, start + 3), pa.int64())
        write_arrow(url, pa.table({"id": ids}), storage_options=dict(options))
    only = pa.table({"id": pa.array([99], pa.int64())})
    write_arrow(url, only, mode="overwrite", storage_options=dict(options))


def storage_args(options: Mapping[str, str]) -> list[str]:
    """Storage options as the CLI takes them: repeated --storage-option KEY=VALUE."""
    return [arg for k, v in options.items() for arg in ("--storage-option", f"{k}={v}")]


def forced_vacuum(
    url: str, options: Mapping[str, str], capsys: pytest.CaptureFixture[str]
) -> dict[str, Any]:
    """`delta-ops vacuum` with zero retention and grace through the CLI; its JSON result."""
    time.sleep(0.01)  # the overwritten files are now strictly older than "now"
    args = ["vacuum", url, "--json", "--retention", "0h", "--force", "--in-flight-grace", "0s"]
    assert cli.main([*args, *storage_args(options)]) == 0
    result: dict[str, Any] = json.loads(capsys.readouterr().out)
    return result
