"""DROP FEATURE begun by one engine and finished by the other (issue 44).

Delta Spark's drop that truncates the history (`ALTER TABLE t DROP FEATURE f TRUNCATE
HISTORY`, its legacy drop) runs in two goes: the first removes the feature's traces from the
latest version, checkpoints an empty commit and fails with
DELTA_FEATURE_DROP_WAIT_FOR_RETENTION_PERIOD; the second, once
`delta.dropFeatureTruncateHistory.retentionDuration` (24 hours) has passed, deletes the log
older than that and commits the downgrade. delta-ops' `drop-feature --truncate-history` runs
the same two goes (its first ends with `dropped: false`). Here each engine starts a drop and
the other finishes it, by truncating the history or with its fast drop (barrier checkpoints
and `checkpointProtection`, Delta 4's default without TRUNCATE HISTORY):

- Delta Spark starts, delta-ops finishes;
- delta-ops starts, Delta Spark finishes.

The retention passes by the log's age: its files are made to look three days old (the tables
have no in-commit timestamps, so both engines date commits by their files), as the judged
cleanup does; a zero retention would still leave the minute cutoff both apply.

Then Delta Spark reads every retained version with the rows it read before, `DESCRIBE
DETAIL`'s `tableFeatures` no longer lists the feature, and Delta Spark keeps writing (an append
of every row and a DELETE, which now writes no deletion vector): both engines read the rows
that leaves.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from delta_ops.ops.drop_feature import traces
from delta_ops.table.scan import read_table
from delta_ops.table.snapshot import load_snapshot
from tests.reference.corpus import Corpus, table_ref
from tests.reference.delta_spark import DeltaSpark, ReferenceError, row_key, same_rows, sorted_rows
from tests.reference.judge import age_log, expected_rows, run_op, verdict

#: (feature, the corpus table that has it): the features whose drop protects the history
DROPS = [("deletionVectors", "deletion_vectors"), ("typeWidening", "type_widening")]
#: Delta Spark's answer to the first go of a drop that truncates the history
WAIT = "DELTA_FEATURE_DROP_WAIT_FOR_RETENTION_PERIOD"
#: how old the log is made to look: past the drop's 24 hours
DAYS = 3


def _protocol_has(path: Path, feature: str) -> bool:
    return load_snapshot(str(path)).protocol.supports(feature)


def _spark_starts(spark: DeltaSpark, path: Path, feature: str) -> None:
    """Delta Spark's first go: the latest version without the feature's traces, the protocol
    still with it."""
    with pytest.raises(ReferenceError) as refused:
        spark.sql(f"ALTER TABLE {table_ref(path)} DROP FEATURE {feature} TRUNCATE HISTORY")
    assert refused.value.condition == WAIT, refused.value
    assert _protocol_has(path, feature)
    assert traces(feature, load_snapshot(str(path))) == []


def _ours_finishes(truncate: bool) -> Callable[[DeltaSpark, Path, str], None]:
    def finish(spark: DeltaSpark, path: Path, feature: str) -> None:
        if truncate:
            age_log(path, DAYS)
        result = run_op("drop-feature", path, feature=feature, truncate_history=truncate).result
        assert result is not None and result.dropped, result

    return finish


def _ours_starts(spark: DeltaSpark, path: Path, feature: str) -> None:
    """delta-ops' first go: the traces removed, and a wait for the retention."""
    result = run_op("drop-feature", path, feature=feature, truncate_history=True).result
    assert result is not None and not result.dropped, result
    assert _protocol_has(path, feature)
    assert traces(feature, load_snapshot(str(path))) == []


def _spark_finishes(truncate: bool) -> Callable[[DeltaSpark, Path, str], None]:
    def finish(spark: DeltaSpark, path: Path, feature: str) -> None:
        if truncate:
            age_log(path, DAYS)
        how = " TRUNCATE HISTORY" if truncate else ""
        spark.sql(f"ALTER TABLE {table_ref(path)} DROP FEATURE {feature}{how}")

    return finish


#: (who starts, who finishes and how)
HANDOVERS = {
    "spark-starts-ours-truncates": (_spark_starts, _ours_finishes(truncate=True)),
    "spark-starts-ours-fast": (_spark_starts, _ours_finishes(truncate=False)),
    "ours-starts-spark-truncates": (_ours_starts, _spark_finishes(truncate=True)),
    "ours-starts-spark-fast": (_ours_starts, _spark_finishes(truncate=False)),
}
CASES = [
    pytest.param(feature, table, handover, id=f"{feature}-{handover}")
    for feature, table in DROPS
    for handover in HANDOVERS
    # the fast finishes once, on deletion vectors: the truncating ones are the hand-over
    if feature == "deletionVectors" or handover.endswith("truncates")
]


@pytest.mark.parametrize(("feature", "table", "handover"), CASES)
def test_a_drop_one_engine_starts_the_other_finishes(
    feature: str,
    table: str,
    handover: str,
    corpus: Corpus,
    delta_spark: DeltaSpark,
    tmp_path: Path,
) -> None:
    built = corpus[table]
    path = built.copy_to(tmp_path)
    start, finish = HANDOVERS[handover]
    start(delta_spark, path, feature)
    finish(delta_spark, path, feature)

    assert not _protocol_has(path, feature)
    problem = verdict(delta_spark, path, expected_rows(built, path))
    assert problem is None, problem
    listed = delta_spark.detail(path)["tableFeatures"]
    assert feature not in listed, listed

    t = table_ref(path)
    rows = built.rows[built.latest]
    doomed = next(r["id"] for r in rows if r["id"] is not None)
    delta_spark.sql(f"INSERT INTO {t} SELECT * FROM {t}")
    delta_spark.sql(f"DELETE FROM {t} WHERE id = {doomed}")
    kept = [r for r in rows if r["id"] != doomed]
    expected = sorted(kept + kept, key=row_key)
    assert same_rows(sorted_rows(delta_spark.read(path)), expected)
    snapshot = load_snapshot(str(path))
    assert same_rows(sorted_rows(read_table(snapshot)), expected)
    assert not snapshot.protocol.supports(feature)
    assert traces(feature, snapshot) == []
