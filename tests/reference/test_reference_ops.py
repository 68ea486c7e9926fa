"""Every operation on the Delta Spark corpus, judged by Delta Spark.

For each operation and each corpus table it applies to, on a copy: run the operation as the CLI
does, then Delta Spark must read every retained version with the rows it read before the
operation (new versions: the latest rows, or the restored version's), and `DESCRIBE HISTORY` /
`DESCRIBE DETAIL` must work. Then, per table, all the operations one after the other and Delta
Spark keeps writing (append, DELETE, its own OPTIMIZE and checkpoint) with the right rows.

The tally (per operation, the tables read back identically) is printed at the end of the run
(`pytest_terminal_summary` in conftest.py) and written to build/reference-report.txt.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from delta_ops.table.scan import read_table
from delta_ops.table.snapshot import load_snapshot
from tests.reference.corpus import TABLES, BuiltTable, Corpus, CorpusTable, table_ref
from tests.reference.delta_spark import DeltaSpark, row_key, same_rows, sorted_rows
from tests.reference.judge import TALLY, age_log, expected_rows, run_op, verdict


def _orphan(path: Path) -> Path:
    """A data file no version references, written 30 days ago: every vacuum FULL deletes it."""
    source = next(p for p in sorted(path.rglob("*.parquet")) if "_delta_log" not in p.parts)
    orphan = path / "orphan-0000.snappy.parquet"
    shutil.copy(source, orphan)
    old = time.time() - 30 * 86400
    os.utime(orphan, (old, old))
    return orphan


def _no_crc(path: Path) -> None:
    for crc in (path / "_delta_log").glob("*.crc"):
        crc.unlink()


@dataclass(frozen=True)
class Judged:
    """An operation as the corpus runs it: which tables it applies to, what it does to a copy
    (returning the rows of the versions it adds, None when they are the latest's)."""

    name: str
    run: Callable[[BuiltTable, Path], list[dict[str, Any]] | None]
    applies: Callable[[CorpusTable], bool] = lambda spec: True


def _checkpoint(built: BuiltTable, path: Path) -> None:
    run_op("checkpoint", path)


def _cleanup(built: BuiltTable, path: Path) -> None:
    # the log looks three days old, a checkpoint of the latest version is new: with a day's
    # retention everything before that checkpoint may go (tables with in-commit timestamps
    # keep it all: their commits say they are recent)
    age_log(path, 3)
    run_op("checkpoint", path)
    run_op("cleanup", path, retention="1d")


def _vacuum(mode: str) -> Callable[[BuiltTable, Path], None]:
    def run(built: BuiltTable, path: Path) -> None:
        orphan = _orphan(path)
        run_op("vacuum", path, mode=mode)
        assert orphan.exists() == (mode == "lite"), "FULL deletes an old orphan, LITE never"

    return run


def _checksum(built: BuiltTable, path: Path) -> None:
    _no_crc(path)
    run_op("checksum", path)
    assert (path / "_delta_log" / f"{load_snapshot(str(path)).version:020d}.crc").exists()


def _restore(built: BuiltTable, path: Path) -> list[dict[str, Any]]:
    run_op("restore", path, version="1")
    return built.rows[1]


def _has(feature: str) -> Callable[[CorpusTable], bool]:
    return lambda spec: feature in spec.features


def _drop(*features: str) -> Callable[[BuiltTable, Path], None]:
    """Drop each of `features` the protocol still has, in order (domainMetadata after the
    rowTracking that requires it)."""

    def run(built: BuiltTable, path: Path) -> None:
        for feature in features:
            if not load_snapshot(str(path)).protocol.supports(feature):
                continue  # an earlier operation of the sequence dropped it
            if feature == "deletionVectors":
                run_op("purge", path)
            run_op("drop-feature", path, feature=feature)

    return run


JUDGED: tuple[Judged, ...] = (
    Judged("checkpoint", _checkpoint),
    Judged("cleanup", _cleanup),
    Judged("vacuum-full", _vacuum("full")),
    Judged("vacuum-lite", _vacuum("lite")),
    Judged("checksum", _checksum),
    Judged("recompute-stats", lambda b, p: run_op("recompute-stats", p) and None),
    Judged("compact", lambda b, p: run_op("compact", p) and None),
    Judged("purge", lambda b, p: run_op("purge", p) and None, _has("deletionVectors")),
    Judged(
        "enable-row-tracking",
        lambda b, p: run_op("enable-row-tracking", p) and None,
        lambda spec: "rowTracking" not in spec.features,
    ),
    Judged("restore", _restore),
    Judged("drop-feature deletionVectors", _drop("deletionVectors"), _has("deletionVectors")),
    Judged("drop-feature v2Checkpoint", _drop("v2Checkpoint"), _has("v2Checkpoint")),
    Judged("drop-feature inCommitTimestamp", _drop("inCommitTimestamp"), _has("inCommitTimestamp")),
    Judged("drop-feature typeWidening", _drop("typeWidening"), _has("typeWidening")),
    Judged("drop-feature columnMapping", _drop("columnMapping"), _has("columnMapping")),
    Judged("drop-feature rowTracking", _drop("rowTracking"), _has("rowTracking")),
    Judged(
        "drop-feature domainMetadata",
        _drop("rowTracking", "domainMetadata"),
        lambda spec: "domainMetadata" in spec.features and "clustering" not in spec.features,
    ),
)

CASES = [
    pytest.param(judged, spec.name, id=f"{judged.name}-{spec.name}")
    for judged in JUDGED
    for spec in TABLES
    if judged.applies(spec)
]


@pytest.mark.parametrize(("judged", "table"), CASES)
def test_delta_spark_reads_every_retained_version_after(
    judged: Judged,
    table: str,
    corpus: Corpus,
    delta_spark: DeltaSpark,
    tmp_path: Path,
) -> None:
    built = corpus[table]
    path = built.copy_to(tmp_path)
    try:
        new_rows = judged.run(built, path)
        problem = verdict(delta_spark, path, expected_rows(built, path, new_rows))
    except Exception as exc:  # noqa: BLE001 - any failure is a verdict to tally
        problem = f"{type(exc).__name__}: {exc}"
    TALLY.record(judged.name, table, problem)
    assert problem is None, problem


#: columns Delta Spark computes itself: an INSERT leaves them out
_COMPUTED = {"features": ("id", "day")}
#: the column the continuation's DELETE matches on
_KEY = {"clustered": "k", "features": "amount"}


def _project(rows: list[dict[str, Any]], columns: list[str]) -> list[dict[str, Any]]:
    return sorted_rows_of([{c: r[c] for c in columns} for r in rows])


def sorted_rows_of(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=row_key)


@pytest.mark.parametrize("table", [spec.name for spec in TABLES])
def test_delta_spark_keeps_writing_after_every_operation(
    table: str, corpus: Corpus, delta_spark: DeltaSpark, tmp_path: Path
) -> None:
    """All the operations one after the other on a copy, then Delta Spark appends, deletes,
    optimizes and checkpoints: its rows are right, and ours read the same."""
    built = corpus[table]
    path = built.copy_to(tmp_path)
    for judged in JUDGED:
        if judged.applies(built.spec) and judged.name != "restore":
            judged.run(built, path)
    rows = built.rows[built.latest]
    assert same_rows(sorted_rows(delta_spark.read(path)), rows)
    t = table_ref(path)
    columns = [c for c in rows[0] if c not in _COMPUTED.get(table, ())]
    names = ", ".join(f"`{c}`" for c in columns)
    key = _KEY.get(table, "id")
    doomed = next(r[key] for r in rows if r[key] is not None)
    delta_spark.sql(f"INSERT INTO {t} ({names}) SELECT {names} FROM {t}")
    delta_spark.sql(f"DELETE FROM {t} WHERE `{key}` = {doomed!r}")
    delta_spark.sql(f"OPTIMIZE {t}")
    delta_spark.checkpoint(path)
    kept = [r for r in rows if r[key] != doomed]
    expected = _project(kept + kept, columns)
    assert same_rows(_project(delta_spark.read(path).to_pylist(), columns), expected)
    assert same_rows(_project(read_table(load_snapshot(str(path))).to_pylist(), columns), expected)
    assert load_snapshot(str(path)).version == delta_spark.history(path)[0]["version"]
