"""Delta Spark's verdict on a table delta-ops changed: the rows it reads at every retained
version (by version, and by timestamp at the oldest and the newest), `DESCRIBE HISTORY` and
`DESCRIBE DETAIL`; and the tally the reference report prints.
"""

from __future__ import annotations

import datetime
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from delta_ops.ops.engines import LOCAL
from delta_ops.ops.registry import OPERATIONS
from delta_ops.service.runs import Run, run_operation
from delta_ops.table.snapshot import load_snapshot
from tests.reference.corpus import BuiltTable
from tests.reference.delta_spark import DeltaSpark, ReferenceError, same_rows, sorted_rows


@dataclass
class Tally:
    """Per operation: the corpus tables Delta Spark read back identically at every retained
    version (with history and detail working), and the ones it did not, with why."""

    passed: dict[str, list[str]] = field(default_factory=dict)
    failed: dict[str, dict[str, str]] = field(default_factory=dict)

    def record(self, operation: str, table: str, problem: str | None) -> None:
        self.passed.setdefault(operation, [])
        self.failed.setdefault(operation, {})
        if problem is None:
            self.passed[operation].append(table)
        else:
            self.failed[operation][table] = problem

    def lines(self) -> list[str]:
        out = []
        for operation in sorted(set(self.passed) | set(self.failed)):
            ok = len(self.passed.get(operation, []))
            bad = self.failed.get(operation, {})
            out.append(f"{operation}: {ok}/{ok + len(bad)} tables read back identically")
            out.extend(f"    {table}: {why.splitlines()[0][:200]}" for table, why in bad.items())
        return out


TALLY = Tally()


def run_op(
    name: str,
    path: Path,
    on_plan: Callable[[Any, tuple[str, ...]], None] | None = None,
    **options: Any,
) -> Run:
    """`name` on `path` through the registry, as the CLI runs it (a plan with nothing to do is
    not executed); `on_plan` is called between planning and executing."""
    operation = OPERATIONS.lookup(name)
    values = operation.parse({k: v for k, v in options.items() if v is not None})
    return run_operation(operation, str(path), values, LOCAL, skip_idle=True, on_plan=on_plan)


def log_versions(path: Path) -> list[int]:
    """The versions whose commit file is in the log."""
    names = os.listdir(path / "_delta_log")
    return sorted(int(n[:20]) for n in names if n.endswith(".json") and n[:20].isdigit())


def readable_from(path: Path) -> int:
    """The oldest version a reader can rebuild: 0 while its commit is kept, else the oldest
    checkpoint (log cleanup keeps every version from its boundary checkpoint on)."""
    names = os.listdir(path / "_delta_log")
    if "00000000000000000000.json" in names:
        return 0
    return min(int(n[:20]) for n in names if ".checkpoint." in n and n[:20].isdigit())


def expected_rows(
    built: BuiltTable, path: Path, new_rows: list[dict[str, Any]] | None = None
) -> dict[int, list[dict[str, Any]]]:
    """What Delta Spark must read at each retained version of `path`, a copy of `built` that
    an operation changed: the recorded rows up to the copy's original latest version, then
    `new_rows` (the original latest's by default: maintenance changes no row)."""
    after = built.rows[built.latest] if new_rows is None else new_rows
    versions = [v for v in log_versions(path) if v >= readable_from(path)]
    return {v: built.rows[v] if v <= built.latest else after for v in versions}


def verdict(spark: DeltaSpark, path: Path, expected: dict[int, list[dict[str, Any]]]) -> str | None:
    """None when Delta Spark reads `expected` at every version and its history and detail
    agree with the log; otherwise what went wrong."""
    try:
        tables = spark.read_versions(path, expected)
    except ReferenceError as exc:
        return f"read failed: {exc}"
    for version, rows in expected.items():
        got = sorted_rows(tables[version])
        if not same_rows(got, rows):
            return f"version {version}: Delta Spark read {got[:5]}... not {rows[:5]}..."
    try:
        history = spark.history(path)
        detail = spark.detail(path)
    except ReferenceError as exc:
        return f"history/detail failed: {exc}"
    latest = max(expected)
    if int(history[0]["version"]) != latest:
        return f"DESCRIBE HISTORY starts at {history[0]['version']}, not {latest}"
    problem = _time_travel(spark, path, expected, history)
    if problem is not None:
        return problem
    ours = load_snapshot(str(path))
    if (detail["numFiles"], detail["sizeInBytes"]) != (ours.num_files, ours.size_bytes):
        return (
            f"DESCRIBE DETAIL says {detail['numFiles']} files, {detail['sizeInBytes']} bytes; "
            f"the log {ours.num_files}, {ours.size_bytes}"
        )
    return None


def _time_travel(
    spark: DeltaSpark,
    path: Path,
    expected: dict[int, list[dict[str, Any]]],
    history: list[dict[str, Any]],
) -> str | None:
    """Time travel by timestamp: at the time `DESCRIBE HISTORY` gives the oldest and the
    newest promised versions (the window's two ends, where a cleanup or an operation's own
    commit moves them), Delta Spark reads those versions' rows (the commit times it resolves
    come from the files' modification times, or in-commit timestamps, which our operations
    write or keep)."""
    at = {int(h["version"]): h["timestamp"] for h in history}
    versions = sorted(expected)
    for version in sorted({versions[0], versions[-1]}):
        if version not in at:
            return f"DESCRIBE HISTORY has no version {version}, which the log keeps"
        when = at[version].astimezone(datetime.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
        try:
            got = sorted_rows(spark.read(path, timestamp=when))
        except ReferenceError as exc:
            return f"timestampAsOf {when} (version {version}) failed: {exc}"
        if not same_rows(got, expected[version]):
            return (
                f"timestampAsOf {when}: Delta Spark read {got[:5]}..., not version {version}'s rows"
            )
    return None


def age_log(path: Path, days: float) -> None:
    """Make the log's files look written `days` ago, in name order (log cleanup decides by
    modification times on tables without in-commit timestamps)."""
    log = path / "_delta_log"
    start = time.time() - days * 86400
    for i, name in enumerate(sorted(os.listdir(log))):
        if (log / name).is_file():
            os.utime(log / name, (start + i, start + i))
