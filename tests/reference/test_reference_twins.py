"""Same question, same answer: on twin copies of a corpus table, Delta Spark and delta-ops are
asked the same thing and must answer alike (differences listed in docs/reference-tier.md).

- `VACUUM ... DRY RUN` and our vacuum's dry run list the same files, at the default retention
  (an old orphan) and at none (every file the latest version does not read).
- our `N.crc`, written where Delta Spark's was taken away, equals Delta Spark's field by field.
- `RESTORE` and our restore: the same rows, operation parameters and metrics.
- `OPTIMIZE` and our compaction: the same rows, and files with the same stats.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from delta_ops.ops.engines import LOCAL
from delta_ops.ops.registry import OPERATIONS
from delta_ops.ops.vacuum import VacuumPlan
from delta_ops.protocol.schema import ArrayType, MapType, stats_columns_of
from delta_ops.service.runs import run_operation
from delta_ops.table.snapshot import load_snapshot
from tests.reference.corpus import TABLES, Corpus, table_ref
from tests.reference.delta_spark import DeltaSpark, same_rows, sorted_rows, table_relative
from tests.reference.judge import run_op
from tests.support.dv_paths import dv_file

#: the crc fields Delta Spark writes that delta-ops leaves out, and why (docs/reference-tier.md)
CRC_ONLY_THEIRS: dict[str, str] = {}
#: the crc fields delta-ops writes that Delta Spark leaves out
CRC_ONLY_OURS: dict[str, str] = {}
#: the tables whose compaction's stats are compared with Delta Spark's OPTIMIZE's: one per kind
#: of column (the others hold longs and strings only), to keep the tier's time down
STATS_TWINS = ["plain", "partitioned", "column_mapping", "features", "variant"]


def _plant_orphans(path: Path) -> None:
    """An old data file no version references, at the root and in a subdirectory."""
    source = next(p for p in sorted(path.rglob("*.parquet")) if "_delta_log" not in p.parts)
    old = time.time() - 30 * 86400
    for orphan in (path / "orphan-0000.snappy.parquet", path / "stray" / "orphan-0001.parquet"):
        orphan.parent.mkdir(exist_ok=True)
        shutil.copy(source, orphan)
        os.utime(orphan, (old, old))


def _spark_dry_run(spark: DeltaSpark, path: Path, hours: int | None) -> set[str]:
    retain = "" if hours is None else f" RETAIN {hours} HOURS"
    listed = spark.query(f"VACUUM {table_ref(path)}{retain} DRY RUN").column(0).to_pylist()
    # files only: with no retention Delta Spark also names `_change_data` once its files go
    return {r for r in (table_relative(p, path) for p in listed) if not (path / r).is_dir()}


def _our_dry_run(path: Path, retention: str | None, grace: str | None = None) -> VacuumPlan:
    options: dict[str, Any] = {
        "retention": retention,
        "force": retention is not None,
        "in_flight_grace": grace,
    }
    vacuum = OPERATIONS["vacuum"]
    values = vacuum.parse({k: v for k, v in options.items() if v not in (None, False)})
    plan = run_operation(vacuum, str(path), values, LOCAL, dry_run=True).plan
    assert isinstance(plan, VacuumPlan)
    return plan


def _listed(plan: VacuumPlan) -> set[str]:
    return {c.path for c in plan.candidates}


@pytest.mark.parametrize("table", [spec.name for spec in TABLES])
def test_vacuum_dry_run_lists_what_delta_spark_lists(
    table: str, corpus: Corpus, delta_spark: DeltaSpark, tmp_path: Path
) -> None:
    path = corpus[table].copy_to(tmp_path)
    _plant_orphans(path)
    assert _listed(_our_dry_run(path, None)) == _spark_dry_run(delta_spark, path, None)
    delta_spark.sql("SET spark.databricks.delta.retentionDurationCheck.enabled = false")
    try:
        theirs = _spark_dry_run(delta_spark, path, 0)
    finally:
        delta_spark.sql("RESET spark.databricks.delta.retentionDurationCheck.enabled")
    # with no in-flight grace, exactly Delta Spark's list
    assert _listed(_our_dry_run(path, "0h", grace="0s")) == theirs
    # with our default grace (the corpus' files are minutes old), the one difference is files
    # no commit names that a running write may own: a tombstone's file or deletion vector and
    # change data a commit names go as in Delta Spark (docs/reference-tier.md)
    ours = _our_dry_run(path, "0h")
    named = _named_by_a_commit(path)
    assert _listed(ours) | set(ours.kept_in_flight) == theirs
    assert not set(ours.kept_in_flight) & named, "a file a commit names was held back"


def _named_by_a_commit(path: Path) -> set[str]:
    """Every file (data, deletion vector, change data) an action of a commit JSON names."""
    names: set[str] = set()
    for commit in (path / "_delta_log").glob("*.json"):
        for line in commit.read_text().splitlines():
            action = json.loads(line) if line.strip() else {}
            for kind in ("add", "remove", "cdc"):
                if kind in action:
                    names.add(table_relative(action[kind]["path"], path))
                    dv = action[kind].get("deletionVector") or {}
                    if dv.get("storageType") == "u":
                        names.add(dv_file(dv))
    return names


@pytest.mark.parametrize("table", [spec.name for spec in TABLES])
def test_our_checksum_equals_delta_sparks_field_by_field(
    table: str, corpus: Corpus, tmp_path: Path
) -> None:
    built = corpus[table]
    path = built.copy_to(tmp_path)
    crc = path / "_delta_log" / f"{built.latest:020d}.crc"
    theirs = json.loads(crc.read_text())
    crc.unlink()
    run_op("checksum", path)
    ours = json.loads(crc.read_text())
    assert {k: v for k, v in theirs.items() if k not in ours}.keys() <= CRC_ONLY_THEIRS.keys()
    assert {k: v for k, v in ours.items() if k not in theirs}.keys() <= CRC_ONLY_OURS.keys()
    differing = {
        key: (ours[key], theirs[key])
        for key in ours.keys() & theirs.keys()
        if _comparable(key, ours[key]) != _comparable(key, theirs[key])
    }
    assert differing == {}


def _comparable(key: str, value: Any) -> Any:
    """A crc field as both writers must agree on it: lists of actions in any order, feature
    lists as sets (Delta Spark keeps the order features were added in, delta-ops sorts them),
    an add's empty `tags` as no tags (Delta Spark writes `{}` on some tables, delta-ops leaves
    it out)."""
    if key == "protocol" and isinstance(value, dict):
        return {k: sorted(v) if k.endswith("Features") else v for k, v in value.items()}
    if key == "allFiles" and isinstance(value, list):
        value = [{k: v for k, v in f.items() if not (k == "tags" and not v)} for f in value]
    if key in ("setTransactions", "domainMetadata", "allFiles") and isinstance(value, list):
        return sorted(json.dumps(v, sort_keys=True) for v in value)
    return value


#: RESTORE's six metrics, as Delta Spark names them in its commit's `operationMetrics`
RESTORE_METRICS = (
    "tableSizeAfterRestore",
    "numOfFilesAfterRestore",
    "numRemovedFiles",
    "numRestoredFiles",
    "removedFilesSize",
    "restoredFilesSize",
)


@pytest.mark.parametrize("table", [spec.name for spec in TABLES])
def test_restore_gives_delta_sparks_rows_and_metrics(
    table: str, corpus: Corpus, delta_spark: DeltaSpark, tmp_path: Path
) -> None:
    """`RESTORE ... TO VERSION AS OF 1` by Delta Spark on one twin and ours on the other: the
    same rows, the same six metrics, the same operation name and parameters."""
    built = corpus[table]
    theirs = built.copy_to(tmp_path / "theirs")
    ours = built.copy_to(tmp_path / "ours")
    delta_spark.sql(f"RESTORE TABLE {table_ref(theirs)} TO VERSION AS OF 1")
    run_op("restore", ours, version="1")
    assert same_rows(sorted_rows(delta_spark.read(ours)), sorted_rows(delta_spark.read(theirs)))
    (spark_commit,) = delta_spark.history(theirs)[:1]
    (our_commit,) = delta_spark.history(ours)[:1]
    assert our_commit["operation"] == spark_commit["operation"] == "RESTORE"
    # DESCRIBE HISTORY gives its maps as lists of pairs
    assert dict(our_commit["operationParameters"]) == dict(spark_commit["operationParameters"])
    our_metrics = dict(our_commit["operationMetrics"])
    spark_metrics = dict(spark_commit["operationMetrics"])
    assert {k: our_metrics.get(k) for k in RESTORE_METRICS} == {
        k: spark_metrics.get(k) for k in RESTORE_METRICS
    }


def _file_stats(path: Path, *, lists_counted: bool) -> list[tuple[str, dict[str, Any]]]:
    """Each live file's partition values and stats, sorted: `tightBounds` aside (both write
    tight bounds on the files they write), and without the null counts of arrays and maps
    unless `lists_counted` (Delta Spark counts them, delta-ops leaves them out: a footer
    cannot tell a null array from a null element; docs/reference-tier.md)."""
    snapshot = load_snapshot(str(path))
    lists = [
        c.physical
        for c in stats_columns_of(snapshot.schema, snapshot.partition_columns)
        if isinstance(c.type, ArrayType | MapType)
    ]
    out = []
    for f in snapshot.files.to_pylist():
        stats = {k: v for k, v in json.loads(f["stats"]).items() if k != "tightBounds"}
        for names in [] if lists_counted else lists:
            *parents, leaf = names
            counts = stats.get("nullCount") or {}
            for name in parents:
                counts = counts.get(name) or {}
            counts.pop(leaf, None)
        out.append((json.dumps(f["partitionValues"] or {}, sort_keys=True), stats))
    return sorted(out, key=lambda pair: json.dumps(pair, sort_keys=True))


@pytest.mark.parametrize("table", STATS_TWINS)
def test_our_compaction_writes_delta_sparks_stats(
    table: str, corpus: Corpus, delta_spark: DeltaSpark, tmp_path: Path
) -> None:
    """`OPTIMIZE` by Delta Spark on one twin and our compaction on the other: the same rows,
    and files with the same stats (the same numRecords, min/max and null counts; variants
    have a null count and no min/max)."""
    built = corpus[table]
    theirs = built.copy_to(tmp_path / "theirs")
    ours = built.copy_to(tmp_path / "ours")
    delta_spark.sql(f"OPTIMIZE {table_ref(theirs)}")
    run_op("compact", ours)
    assert same_rows(sorted_rows(delta_spark.read(ours)), built.rows[built.latest])
    # compared as values: -0.0 == 0.0 (parquet footers keep a zero min's sign, Spark does not)
    assert _file_stats(ours, lists_counted=True) == _file_stats(theirs, lists_counted=False)
