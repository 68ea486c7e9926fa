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
from urllib.parse import unquote

import pytest

from delta_ops.table.scan import read_table
from delta_ops.table.snapshot import load_snapshot
from tests.reference.corpus import TABLES, BuiltTable, Corpus, CorpusTable, table_ref
from tests.reference.delta_spark import (
    DeltaSpark,
    row_key,
    same_rows,
    sorted_rows,
    table_relative,
)
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
class Outcome:
    """What an operation that changes rows leaves: the rows of the versions it adds, and the
    older versions it deliberately made unreadable (a repair of a lost file)."""

    rows: list[dict[str, Any]]
    lost: frozenset[int] = frozenset()


@dataclass(frozen=True)
class Judged:
    """An operation as the corpus runs it: which tables it applies to, what it does to a copy
    (returning what it changed, None when it changed no row)."""

    name: str
    run: Callable[[BuiltTable, Path, DeltaSpark], Outcome | None]
    applies: Callable[[CorpusTable], bool] = lambda spec: True
    #: False: its new version holds other rows (the sequence of all operations leaves it out)
    keeps_rows: bool = True


def _checkpoint(built: BuiltTable, path: Path, spark: DeltaSpark) -> None:
    run_op("checkpoint", path)


def _cleanup(built: BuiltTable, path: Path, spark: DeltaSpark) -> None:
    # the log looks three days old, a checkpoint of the latest version is new: with a day's
    # retention everything before that checkpoint may go (tables with in-commit timestamps
    # keep it all: their commits say they are recent)
    age_log(path, 3)
    run_op("checkpoint", path)
    run_op("cleanup", path, retention="1d")


def _vacuum(mode: str) -> Callable[[BuiltTable, Path, DeltaSpark], None]:
    def run(built: BuiltTable, path: Path, spark: DeltaSpark) -> None:
        orphan = _orphan(path)
        run_op("vacuum", path, mode=mode)
        assert orphan.exists() == (mode == "lite"), "FULL deletes an old orphan, LITE never"

    return run


def _checksum(built: BuiltTable, path: Path, spark: DeltaSpark) -> None:
    _no_crc(path)
    run_op("checksum", path)
    assert (path / "_delta_log" / f"{load_snapshot(str(path)).version:020d}.crc").exists()


def _restore(built: BuiltTable, path: Path, spark: DeltaSpark) -> Outcome:
    run_op("restore", path, version="1")
    return Outcome(built.rows[1])


#: per corpus table, the columns a Z-order or a liquid clustering sorts it by (each with
#: min/max statistics, none a partition column)
_CURVE = {
    "plain": "id,name",
    "partitioned": "id,v",
    "column_mapping": "a_renamed,id",
    "column_mapping_id": "a_renamed,id",
    "type_widening": "id,v",
    "features": "amount,at",
    "clustered": "v,k",  # cluster-by changes its clustering columns (k)
}


def _curve(spec: CorpusTable) -> str:
    return _CURVE.get(spec.name, "id")


def _zorder(built: BuiltTable, path: Path, spark: DeltaSpark) -> None:
    run_op("compact", path, zorder_by=_curve(built.spec), full=True)


def _cluster_by(built: BuiltTable, path: Path, spark: DeltaSpark) -> None:
    """`cluster-by` then a compaction that clusters: Delta Spark reads the same rows and its
    `DESCRIBE DETAIL` names the new clustering columns."""
    run_op("cluster-by", path, columns=_curve(built.spec))
    run_op("compact", path, full=True)
    wanted = [c.strip() for c in _curve(built.spec).split(",")]
    columns = spark.detail(path)["clusteringColumns"]
    assert columns == wanted, f"DESCRIBE DETAIL's clusteringColumns {columns}, not {wanted}"


def _repair(built: BuiltTable, path: Path, spark: DeltaSpark) -> Outcome:
    """One data file of the latest version deleted, then `repair`: the new version holds
    exactly the rows Delta Spark read from the other files (asked before the deletion, by
    `_metadata.file_path`); the older versions that read the deleted file are no longer
    promised, every other one is."""
    marked = spark.query(f"SELECT *, _metadata.file_path AS `__file` FROM {table_ref(path)}")
    files = [table_relative(url, path) for url in marked.column("__file").to_pylist()]
    missing = min(files)
    lost = frozenset(
        v
        for v in range(built.latest + 1)
        if missing
        in {unquote(p) for p in load_snapshot(str(path), v).files.column("path").to_pylist()}
    )
    (path / missing).unlink()
    run_op("repair", path, force=True)
    kept = marked.drop_columns(["__file"]).to_pylist()
    rows = sorted_rows_of([row for row, name in zip(kept, files) if name != missing])
    return Outcome(rows, lost)


def _partitioned(spec: CorpusTable) -> bool:
    return any("PARTITIONED BY" in statement for statement in spec.statements)


def _just(name: str) -> Callable[[BuiltTable, Path, DeltaSpark], None]:
    """The operation `name` with its defaults."""

    def run(built: BuiltTable, path: Path, spark: DeltaSpark) -> None:
        run_op(name, path)

    return run


def _has(feature: str) -> Callable[[CorpusTable], bool]:
    return lambda spec: feature in spec.features


def _drop(*features: str) -> Callable[[BuiltTable, Path, DeltaSpark], None]:
    """Drop each of `features` the protocol still has, in order (domainMetadata after the
    rowTracking that requires it)."""

    def run(built: BuiltTable, path: Path, spark: DeltaSpark) -> None:
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
    Judged("recompute-stats", _just("recompute-stats")),
    Judged("compact", _just("compact")),
    Judged("purge", _just("purge"), _has("deletionVectors")),
    Judged(
        "enable-row-tracking",
        _just("enable-row-tracking"),
        lambda spec: "rowTracking" not in spec.features,
    ),
    Judged("restore", _restore, keeps_rows=False),
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
    # after the drops: the sequence of all operations (below) clusters a table last
    Judged("zorder", _zorder, lambda spec: "clustering" not in spec.features),
    Judged("cluster-by", _cluster_by, lambda spec: not _partitioned(spec)),
    Judged("repair", _repair, keeps_rows=False),
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
        outcome = judged.run(built, path, delta_spark) or Outcome(built.rows[built.latest])
        expected = expected_rows(built, path, outcome.rows)
        promised = {v: rows for v, rows in expected.items() if v not in outcome.lost}
        problem = verdict(delta_spark, path, promised)
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
        if judged.applies(built.spec) and judged.keeps_rows:
            judged.run(built, path, delta_spark)
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
