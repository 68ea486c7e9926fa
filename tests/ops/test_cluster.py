"""Clustering (issue 36): `compact --zorder-by` and liquid clustering's `compact`, and
`cluster-by`. Peers read the same rows before and after; deletion vectors are applied and row
ids kept; the new files carry Delta's Z-cube tags; a second run plans nothing; clustered files
that new rows do not meet stay; big cubes go through the range-partitioned (spill) path; bad
columns are refused in one line; and readers skip far more files after clustering than before
(a rewrite that did not sort would fail that)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from delta_ops import cli
from delta_ops.errors import InvalidValue
from delta_ops.layout.clustering import (
    ZCUBE_ID,
    ZCUBE_ZORDER_BY,
    ZCUBE_ZORDER_CURVE,
    clustering_layout,
    parse_column_list,
)
from delta_ops.ops import cluster
from delta_ops.ops.cluster import execute_cluster, plan_cluster
from delta_ops.ops.cluster_by import execute_cluster_by, plan_cluster_by
from delta_ops.ops.compact import OPERATION as COMPACT
from delta_ops.protocol.schema import stats_columns_of
from delta_ops.table.snapshot import load_snapshot
from delta_ops.table.writer import write_arrow
from tests.support import TABLES, copy_fixture, deltalake_rows, duckdb_rows
from tests.support.rewrite_support import dv_table, ids_by_value

KB = 1024


def random_appends(
    table: Path,
    files: int = 12,
    rows: int = 400,
    seed: int = 3,
    configuration: dict[str, str] | None = None,
    partition_by: list[str] | None = None,
    start: int = 0,
    a_range: tuple[int, int] = (0, 10_000),
) -> None:
    """`files` appends of `rows` random rows (ids from `start`; `a` ints, `b` doubles, `s`
    strings, `flag` booleans): every file spans the whole range of each column."""
    rng = np.random.default_rng(seed)
    for i in range(files):
        ids = np.arange(start + i * rows, start + (i + 1) * rows)
        data = {
            "id": pa.array(ids),
            "a": pa.array(rng.integers(*a_range, rows)),
            "b": pa.array(rng.random(rows) * 1000),
            "s": pa.array([f"k{v:05d}" for v in rng.integers(0, 50_000, rows)]),
            "flag": pa.array(rng.random(rows) < 0.5),
        }
        if partition_by:
            data["day"] = pa.array(["d1" if i % 2 else "d2"] * rows)
        write_arrow(
            table,
            pa.table(data),
            partition_by=partition_by,
            configuration=configuration if i == 0 else None,
        )


def _plan(table: Path, **values: Any) -> Any:
    raw = {k: str(v) if not isinstance(v, bool) else v for k, v in values.items()}
    return COMPACT.plan(load_snapshot(table), COMPACT.parse(raw))


def _stats(table: Path) -> list[dict[str, Any]]:
    return [json.loads(s) for s in load_snapshot(table).files.column("stats").to_pylist()]


def unskippable_share(table: Path, columns: tuple[str, str], seed: int = 11) -> float:
    """Over 100 random predicates on the columns (half points `a = x AND b = y` with values
    from the data, half ranges `a BETWEEN ..` and `b BETWEEN ..` of a tenth of each range),
    the mean share of files whose min/max stats cannot exclude them: what a reader opens."""
    stats = _stats(table)
    lows = np.array([[f["minValues"][c] for c in columns] for f in stats], dtype=float)
    highs = np.array([[f["maxValues"][c] for c in columns] for f in stats], dtype=float)
    rng = np.random.default_rng(seed)
    span_low, span_high = lows.min(axis=0), highs.max(axis=0)
    shares = []
    for i in range(100):
        if i % 2:
            point = rng.uniform(span_low, span_high)
            low, high = point, point
        else:
            width = (span_high - span_low) / 10
            low = rng.uniform(span_low, span_high - width)
            high = low + width
        may_match = ((lows <= high) & (highs >= low)).all(axis=1)
        shares.append(may_match.mean())
    return float(np.mean(shares))


# ------------------------------------------------------------------------------ z-order
def test_zorder_by_keeps_the_rows_tags_the_files_and_a_second_run_does_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = tmp_path / "t"
    random_appends(table)
    rows = duckdb_rows(table)
    before = load_snapshot(table)
    assert (
        cli.main(["compact", str(table), "--zorder-by", "a,b", "--target-size", "8KB", "--dry-run"])
        == 0
    )
    out = capsys.readouterr().out
    assert "would cluster 12 files" in out and "by a, b (zorder)" in out
    assert load_snapshot(table).version == before.version  # a dry run writes nothing
    args = ["compact", str(table), "--zorder-by", "a,b", "--target-size", "8KB", "--json"]
    assert cli.main(args) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["files_removed"] == 12 and result["files_added"] > 1
    after = load_snapshot(table)
    assert after.version == before.version + 1
    assert duckdb_rows(table) == rows and deltalake_rows(table) == rows
    files = after.files.to_pylist()
    tags = [dict(f["tags"]) for f in files]
    assert len({t[ZCUBE_ID] for t in tags}) == 1  # one cube: one run over one partition
    assert {t[ZCUBE_ZORDER_BY] for t in tags} == {'["a","b"]'}
    assert {t[ZCUBE_ZORDER_CURVE] for t in tags} == {"zorder"}
    assert all(f["dataChange"] is False and f["clusteringProvider"] is None for f in files)
    commit = (table / "_delta_log" / f"{after.version:020d}.json").read_text().splitlines()
    info = json.loads(commit[0])["commitInfo"]
    assert info["operation"] == "OPTIMIZE"
    assert info["operationParameters"]["zOrderBy"] == '["a","b"]'
    # unchanged: nothing to plan, nothing committed
    assert cli.main(args) == 0
    assert json.loads(capsys.readouterr().out)["version"] is None
    assert load_snapshot(table).version == after.version


def test_clustering_lets_readers_skip_files(tmp_path: Path) -> None:
    """Random rows in 12 files: every file spans everything, so no predicate skips a file.
    Clustered into files of about the same count, most files are skipped."""
    table = tmp_path / "t"
    random_appends(table, files=12, rows=1000)
    before = unskippable_share(table, ("a", "b"))
    assert before > 0.95
    for kind in ("zorder", "hilbert"):
        copy = tmp_path / kind
        random_appends(copy, files=12, rows=1000)
        snapshot = load_snapshot(copy)
        columns = parse_column_list("a,b", snapshot, "--zorder-by")
        mode = "zorder" if kind == "zorder" else "clustering"
        plan = plan_cluster(snapshot, columns, mode=mode, target_size=16 * KB)
        execute_cluster(plan)
        assert load_snapshot(copy).num_files >= 8
        after = unskippable_share(copy, ("a", "b"))
        assert after < 0.4 * before, (kind, before, after)


def test_the_skipping_measure_fails_a_rewrite_that_does_not_sort(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The measure above sees a rewrite that only re-cuts the files: with the curve's order
    replaced by the input order, files still span everything."""
    table = tmp_path / "t"
    random_appends(table, files=12, rows=1000)
    monkeypatch.setattr(cluster, "_curve_order", lambda values: np.arange(len(values)))
    snapshot = load_snapshot(table)
    columns = parse_column_list("a,b", snapshot, "--zorder-by")
    execute_cluster(plan_cluster(snapshot, columns, target_size=16 * KB))
    assert unskippable_share(table, ("a", "b")) > 0.9


def test_big_cubes_are_range_partitioned_through_spill_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past IN_MEMORY_BYTES a cube is sampled, its rows sent to per-range spill files and each
    range sorted on its own: the same rows, and as well clustered as in memory."""
    shares = {}
    for name, limit in (("memory", 10**12), ("spill", 0)):
        table = tmp_path / name
        random_appends(table, files=12, rows=1000)
        rows = deltalake_rows(table)
        monkeypatch.setattr(cluster, "IN_MEMORY_BYTES", limit)
        monkeypatch.setattr(cluster, "SAMPLE_ROWS", 500)  # the sample's stride doubles
        snapshot = load_snapshot(table)
        columns = parse_column_list("a,b", snapshot, "--zorder-by")
        result = execute_cluster(plan_cluster(snapshot, columns, target_size=16 * KB))
        assert result.files_added >= 8
        assert deltalake_rows(table) == rows and duckdb_rows(table) == rows
        shares[name] = unskippable_share(table, ("a", "b"))
    assert shares["spill"] < 0.4 and shares["spill"] < shares["memory"] * 1.5


def test_spilled_ranges_stream_into_files_in_curve_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Many small ranges per output file: each file streams consecutive ranges, so by one
    column every file is sorted and the files follow each other without overlap."""
    table = tmp_path / "t"
    random_appends(table, files=12, rows=1000)
    rows = deltalake_rows(table)
    monkeypatch.setattr(cluster, "IN_MEMORY_BYTES", 0)
    monkeypatch.setattr(cluster, "SPILL_RANGE_BYTES", 2 * KB)
    monkeypatch.setattr(cluster, "SPILL_CHUNK_BYTES", 20 * KB)
    result = execute_cluster(_plan(table, zorder_by="s", target_size="40KB"))
    assert deltalake_rows(table) == rows and result.files_added >= 3
    spans = []
    for path in result.files_written:
        values = pq.read_table(table / path, columns=["s"]).column("s").to_pylist()
        assert values == sorted(values)
        spans.append((values[0], values[-1]))
    assert all(high <= low for (_, high), (low, _) in itertools.pairwise(spans))
    assert not list(Path(cluster.tempfile.gettempdir()).glob("delta-ops-cluster-*"))


def test_a_worker_killed_while_writing_a_range_leaves_no_file_and_no_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Forked workers write a big cube's files: one dying after its file is on disk (killed,
    out of memory) fails the run, and every file the run wrote is found by its name prefix
    and deleted; the table is as it was."""
    import os

    from delta_ops.errors import DeltaOpsError

    table = tmp_path / "t"
    random_appends(table, files=12, rows=1000)
    before = load_snapshot(table)
    rows = deltalake_rows(table)
    names = {p.name for p in table.rglob("*.parquet")}
    monkeypatch.setattr(cluster, "IN_MEMORY_BYTES", 0)
    monkeypatch.setattr(cluster, "FORK_MIN_BYTES", 0)  # small as it is, on forked workers
    monkeypatch.setattr(cluster, "SPILL_CHUNK_BYTES", 20 * KB)
    write_stretch = cluster._write_stretch
    parent = os.getpid()

    def write_then_die(*args: Any) -> Any:
        done = write_stretch(*args)
        if os.getpid() != parent and 0 in args[-1]:
            os._exit(9)  # in a forked worker: its file is written, its result never sent
        return done

    monkeypatch.setattr(cluster, "_write_stretch", write_then_die)
    with pytest.raises(DeltaOpsError, match="worker"):
        execute_cluster(_plan(table, zorder_by="a,b", target_size="16KB"))
    assert load_snapshot(table).version == before.version
    assert {p.name for p in table.rglob("*.parquet")} == names
    assert deltalake_rows(table) == rows


def test_stretches_cut_ranges_into_files_of_equal_rows() -> None:
    assert cluster._stretches({0: 10, 1: 10, 2: 10, 3: 10}, 2) == [[0, 1], [2, 3]]
    assert cluster._stretches({0: 10, 2: 0, 3: 10, 5: 10}, 3) == [[0], [3], [5]]
    assert cluster._stretches({0: 100, 1: 1, 2: 1}, 2) == [[0], [1, 2]]
    assert cluster._stretches({4: 7}, 5) == [[4]]
    assert cluster._stretches({}, 2) == []


@pytest.mark.parametrize("limit", [10**12, 0])
def test_a_cube_whose_rows_are_all_deleted_writes_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, limit: int
) -> None:
    from delta_ops.protocol.deletion_vectors import inline_descriptor
    from delta_ops.table.transaction import Transaction

    table = tmp_path / "t"
    config = {"delta.enableDeletionVectors": "true"}
    write_arrow(table, pa.table({"id": pa.array([0, 1, 2, 3])}), configuration=config)
    snapshot = load_snapshot(table)
    body = snapshot.files.to_pylist()[0]
    add = {k: v for k, v in body.items() if v is not None and k not in ("version", "tags")}
    add["partitionValues"] = {}
    txn = Transaction(snapshot, operation="DELETE")
    remove = {"path": add["path"], "deletionTimestamp": 1, "dataChange": True, "size": add["size"]}
    txn.add_action({"remove": remove})
    txn.add_action({"add": {**add, "deletionVector": inline_descriptor([0, 1, 2, 3]).to_dict()}})
    txn.commit()
    monkeypatch.setattr(cluster, "IN_MEMORY_BYTES", limit)
    result = execute_cluster(_plan(table, zorder_by="id"))
    assert (result.files_removed, result.files_added) == (1, 0)
    assert load_snapshot(table).num_files == 0 and deltalake_rows(table) == []


def test_the_sample_keeps_evenly_spaced_rows_within_its_limit() -> None:
    sample = cluster._Sample(100)
    for start in range(0, 10_000, 333):
        values = np.arange(start, min(start + 333, 10_000), dtype=np.uint64)
        sample.add([values, values * 2])
    first, second = sample.columns(2)
    assert 100 <= len(first) <= 200 and (second == first * 2).all()
    assert (np.diff(first) == sample.stride).all() and first[0] == 0


def test_zorder_within_partitions(tmp_path: Path) -> None:
    table = tmp_path / "t"
    random_appends(table, partition_by=["day"])
    rows = deltalake_rows(table)
    plan = _plan(table, zorder_by="a", target_size="8KB")
    assert len(plan.cubes) == 2 and plan.curve == "zorder"
    execute_cluster(plan)
    assert deltalake_rows(table) == rows == duckdb_rows(table)
    files = load_snapshot(table).files.to_pylist()
    cubes = {dict(f["partitionValues"])["day"]: dict(f["tags"])[ZCUBE_ID] for f in files}
    assert len(set(cubes.values())) == 2  # a cube per partition
    # one column: each partition's files are consecutive ranges of `a`
    for day in ("d1", "d2"):
        ranges = sorted(
            (json.loads(f["stats"])["minValues"]["a"], json.loads(f["stats"])["maxValues"]["a"])
            for f in files
            if dict(f["partitionValues"])["day"] == day
        )
        assert all(high <= low for (_, high), (low, _) in itertools.pairwise(ranges))


def test_deletion_vectors_are_applied_and_row_ids_kept(tmp_path: Path) -> None:
    table = dv_table(tmp_path, {"delta.enableRowTracking": "true"})
    before = ids_by_value(table)
    rows = duckdb_rows(table)
    execute_cluster(_plan(table, zorder_by="id"))
    after = load_snapshot(table)
    assert after.files.column("deletionVector").null_count == after.num_files
    assert duckdb_rows(table) == rows == deltalake_rows(table)
    assert ids_by_value(table) == before


def test_column_mapping_tables_cluster_by_physical_columns(tmp_path: Path) -> None:
    table = copy_fixture("delta-rs/table_with_column_mapping", tmp_path)
    snapshot = load_snapshot(table)
    assert snapshot.properties.column_mapping_mode == "name"
    rows = duckdb_rows(table)
    eligible = [
        c.name
        for c in stats_columns_of(snapshot.schema, snapshot.partition_columns)
        if c.has_min_max and c.type in ("long", "integer", "string", "double")
    ]
    name = eligible[0]
    assert snapshot.schema.field(name).physical_name != name  # mapped: files name it otherwise
    plan = _plan(table, zorder_by=f"`{name}`")
    assert plan.cubes
    execute_cluster(plan)
    assert duckdb_rows(table) == rows and deltalake_rows(table) == rows


@pytest.mark.parametrize(
    ("columns", "message"),
    [
        ("nope", "nope: no such column"),
        ("day", "day: a partition column"),
        ("flag", "flag: its type (boolean) has no min/max statistics"),
        ("a,a", "a: named twice"),
    ],
)
def test_columns_clustering_cannot_use_are_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], columns: str, message: str
) -> None:
    table = tmp_path / "t"
    random_appends(table, files=2, partition_by=["day"])
    version = load_snapshot(table).version
    assert cli.main(["compact", str(table), "--zorder-by", columns]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err, err
    assert load_snapshot(table).version == version


def test_a_column_without_collected_stats_is_refused(tmp_path: Path) -> None:
    table = tmp_path / "t"
    random_appends(table, files=2, configuration={"delta.dataSkippingNumIndexedCols": "2"})
    with pytest.raises(InvalidValue, match="b: the table collects no statistics for it"):
        _plan(table, zorder_by="a,b")


# ------------------------------------------------------------------------------ incremental
def test_new_files_merge_into_small_cubes_they_meet_and_big_cubes_stay(tmp_path: Path) -> None:
    table = tmp_path / "t"
    random_appends(table, files=6)
    execute_cluster(_plan(table, zorder_by="a,b", target_size="8KB"))
    clustered = set(load_snapshot(table).files.column("path").to_pylist())
    random_appends(table, files=2, seed=9, start=10_000)  # new rows all over the range
    new = set(load_snapshot(table).files.column("path").to_pylist()) - clustered
    # the cube is small (below 100GB): the new rows merge into it
    merged = _plan(table, zorder_by="a,b", target_size="8KB")
    assert {p for c in merged.cubes for p in c.paths} == clustered | new
    # a cube past min_cube_size is left alone: only the new files are clustered
    alone = _plan(table, zorder_by="a,b", target_size="8KB", min_cube_size="1KB")
    assert {p for c in alone.cubes for p in c.paths} == new and alone.files_kept == len(clustered)
    rows = deltalake_rows(table)
    execute_cluster(alone)
    assert deltalake_rows(table) == rows
    # two big cubes now: nothing to do
    assert _plan(table, zorder_by="a,b", target_size="8KB", min_cube_size="1KB").nothing_to_do
    # two small cubes merge into one, and then nothing is left to do
    again = _plan(table, zorder_by="a,b", target_size="8KB")
    assert again.files_to_rewrite == load_snapshot(table).num_files
    execute_cluster(again)
    assert _plan(table, zorder_by="a,b", target_size="8KB").nothing_to_do
    assert deltalake_rows(table) == rows == duckdb_rows(table)


def test_small_cubes_do_not_pile_up_under_appends_with_growing_keys(tmp_path: Path) -> None:
    """Three tiny appends, then `compact --zorder-by ts,id`, four times over, the keys growing
    each round (a pipeline appending new days): Delta's rule (`ZCube.filterOutLargeZCubes`)
    merges every cube under `minCubeSize` with the new files, so one live file stays. Merging
    only the small cubes the new rows land among kept 1, 2, 3, then 4 live files."""
    table = tmp_path / "t"
    expected: list[int] = []
    for round_ in range(4):
        for i in range(3):
            first = round_ * 300 + i * 100
            ids = pa.array(range(first, first + 100), pa.int64())
            write_arrow(table, pa.table({"id": ids, "ts": pc.add(ids, 1_700_000_000)}))
            expected += range(first, first + 100)
        assert cli.main(["compact", str(table), "--zorder-by", "ts,id"]) == 0
        snapshot = load_snapshot(table)
        assert snapshot.num_files == 1, f"round {round_}: {snapshot.num_files} live files"
        tags = snapshot.files.column("tags").to_pylist()
        assert all(dict(t)[ZCUBE_ZORDER_CURVE] == "zorder" and dict(t)[ZCUBE_ID] for t in tags)
    assert sorted(r["id"] for r in deltalake_rows(table)) == expected
    assert sorted(r["id"] for r in duckdb_rows(table)) == expected


def test_full_and_other_columns(tmp_path: Path) -> None:
    table = tmp_path / "t"
    random_appends(table, files=4)
    execute_cluster(_plan(table, zorder_by="a", target_size="8KB"))
    # Z-ordered by other columns: --zorder-by a,b takes every file
    assert _plan(table, zorder_by="a,b").files_to_rewrite == load_snapshot(table).num_files
    assert _plan(table, zorder_by="a").nothing_to_do
    assert _plan(table, zorder_by="a", full=True).files_to_rewrite == load_snapshot(table).num_files
    with pytest.raises(InvalidValue, match="--full: only with --zorder-by"):
        _plan(table, full=True)


# ------------------------------------------------------------------------------ liquid
def test_cluster_by_writes_the_domain_and_feature_as_delta_spark(tmp_path: Path) -> None:
    table = tmp_path / "t"
    random_appends(table, files=6)
    rows = deltalake_rows(table)
    before = load_snapshot(table)
    assert not before.protocol.supports("clustering")
    plan = plan_cluster_by(before, "a, b")
    result = execute_cluster_by(plan)
    assert result.protocol_upgraded and result.new_columns == ("a", "b")
    commit = (table / "_delta_log" / f"{result.version:020d}.json").read_text().splitlines()
    actions = [json.loads(line) for line in commit]
    info = actions[0]["commitInfo"]
    assert info["operation"] == "CLUSTER BY"
    assert info["operationParameters"] == {
        "oldClusteringColumns": "",
        "newClusteringColumns": "a,b",
    }
    protocol = next(a["protocol"] for a in actions if "protocol" in a)
    assert {"clustering", "domainMetadata"} <= set(protocol["writerFeatures"])
    domain = next(a["domainMetadata"] for a in actions if "domainMetadata" in a)
    assert domain == {
        "domain": "delta.clustering",
        "configuration": '{"clusteringColumns":[["a"],["b"]],"domainName":"delta.clustering"}',
        "removed": False,
    }
    # Delta Spark's form (its ClusteringMetadataDomain serializes the domain's name too; a
    # table Databricks clustered has the columns alone, which readers take the same way), and
    # the same compact JSON as the domain of a table Databricks clustered
    spark = json.loads((TABLES / "kernel/crc-full/_delta_log/00000000000000000000.crc").read_text())
    spark_domain = next(d for d in spark["domainMetadata"] if d["domain"] == "delta.clustering")
    config = spark_domain["configuration"]
    assert json.dumps(json.loads(config), separators=(",", ":")) == config
    # compact now clusters by them: Hilbert, liquid provider, Z-cube tags
    plan = _plan(table, target_size="8KB")
    assert plan.mode == "clustering" and plan.curve == "hilbert"
    execute_cluster(plan)
    files = load_snapshot(table).files.to_pylist()
    assert {f["clusteringProvider"] for f in files} == {"liquid"}
    assert {dict(f["tags"])[ZCUBE_ZORDER_BY] for f in files} == {'["a","b"]'}
    assert deltalake_rows(table) == rows == duckdb_rows(table)
    assert _plan(table, target_size="8KB").nothing_to_do
    # unchanged columns: nothing to commit; --zorder-by on a clustered table is refused
    assert plan_cluster_by(load_snapshot(table), "a,b").nothing_to_do
    with pytest.raises(InvalidValue, match="clustered by a, b"):
        _plan(table, zorder_by="a")
    # new columns: the old files stay as they are until --full
    execute_cluster_by(plan_cluster_by(load_snapshot(table), "s"))
    plan = _plan(table, target_size="8KB")
    assert plan.nothing_to_do and "clustered by other columns" in plan.idle_reason
    plan = _plan(table, target_size="8KB", full=True)
    assert plan.curve == "zorder" and plan.files_to_rewrite == len(files)  # one column
    # none: an empty list, and compact bin-packs again
    result = execute_cluster_by(plan_cluster_by(load_snapshot(table), "none"))
    snapshot = load_snapshot(table)
    assert (
        snapshot.domains["delta.clustering"].configuration
        == '{"clusteringColumns":[],"domainName":"delta.clustering"}'
    )
    assert not isinstance(_plan(table), cluster.ClusterPlan)


def test_cluster_by_refusals(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    partitioned = tmp_path / "p"
    random_appends(partitioned, files=2, partition_by=["day"])
    # asking to cluster a partitioned table is the user's mistake (Spark's too: an analysis
    # error), so the CLI's bad-input exit, with one line naming the columns and the way out
    with pytest.raises(InvalidValue, match="partitioned by day"):
        plan_cluster_by(load_snapshot(partitioned), "a")
    assert cli.main(["cluster-by", str(partitioned), "a"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1
    assert "cluster-by a:" in err and "compact --zorder-by" in err
    # none on a table that is not clustered: nothing (as Spark)
    assert plan_cluster_by(load_snapshot(partitioned), "none").nothing_to_do
    table = tmp_path / "t"
    write_arrow(table, pa.table({c: pa.array([1, 2]) for c in "vwxyz"} | {"f": [True, False]}))
    snapshot = load_snapshot(table)
    with pytest.raises(InvalidValue, match="at most 4"):
        plan_cluster_by(snapshot, "v,w,x,y,z")
    with pytest.raises(InvalidValue, match="f: its type"):
        plan_cluster_by(snapshot, "f")


def test_cluster_by_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = tmp_path / "t"
    random_appends(table, files=3)
    assert cli.main(["cluster-by", str(table), "a,b", "--dry-run"]) == 0
    assert "from none to a, b; adds the clustering table feature" in capsys.readouterr().out
    assert cli.main(["cluster-by", str(table), "a,b"]) == 0
    assert "clustering columns set to a, b" in capsys.readouterr().out
    assert cli.main(["compact", str(table), "--dry-run"]) == 0
    assert "would cluster 3 files" in capsys.readouterr().out


def test_the_layout_facts_follow_the_clustering(tmp_path: Path) -> None:
    """What the Dagster layout check reports: before clustering every file is unclustered and
    spans everything; after it, none is and a point on the columns skips most files."""
    from delta_ops.clock import now_ms
    from delta_ops.service.health import table_health

    table = tmp_path / "t"
    random_appends(table, files=12, rows=1000)
    assert clustering_layout(load_snapshot(table)) is None
    execute_cluster_by(plan_cluster_by(load_snapshot(table), "a,b"))
    before = table_health(load_snapshot(table), now_ms()).layout
    assert before is not None and before.columns == ("a", "b")
    assert before.unclustered_files == before.files == 12 and before.unskippable_share > 0.85
    execute_cluster(_plan(table, target_size="16KB"))
    after = clustering_layout(load_snapshot(table))
    assert after is not None and after.unclustered_files == 0 and after.files >= 8
    assert after.unskippable_share < 0.4


def test_cluster_by_under_column_mapping_names_physical_columns(tmp_path: Path) -> None:
    """Spark's domain lists physical names; the Z-cube tags and commit logical ones."""
    table = tmp_path / "t"
    random_appends(table, files=4, configuration={"delta.columnMapping.mode": "name"})
    snapshot = load_snapshot(table)
    physical = {f.name: f.physical_name for f in snapshot.schema.fields}
    assert physical["a"] != "a"
    rows = deltalake_rows(table)
    result = execute_cluster_by(plan_cluster_by(snapshot, "b,a"))
    domain = load_snapshot(table).domains["delta.clustering"].configuration
    assert json.loads(domain) == {
        "clusteringColumns": [[physical["b"]], [physical["a"]]],
        "domainName": "delta.clustering",
    }
    assert result.new_columns == ("b", "a")
    plan = _plan(table, target_size="8KB")
    assert plan.columns == ("b", "a") and plan.curve == "hilbert"
    execute_cluster(plan)
    files = load_snapshot(table).files.to_pylist()
    assert {dict(f["tags"])[ZCUBE_ZORDER_BY] for f in files} == {'["b","a"]'}
    assert deltalake_rows(table) == rows == duckdb_rows(table)
    assert _plan(table, target_size="8KB").nothing_to_do


def test_an_append_landing_meanwhile_does_not_conflict(tmp_path: Path) -> None:
    table = tmp_path / "t"
    random_appends(table, files=4)
    plan = _plan(table, zorder_by="a,b", target_size="8KB")
    random_appends(table, files=1, seed=8, start=50_000)
    appended = deltalake_rows(table)
    result = execute_cluster(plan)
    assert result.version == plan.version + 2
    assert deltalake_rows(table) == appended == duckdb_rows(table)
    # the appended file is not clustered yet: the next run takes it (and the small cube)
    assert _plan(table, zorder_by="a,b", target_size="8KB").files_to_rewrite > 1


def test_cluster_by_says_which_writers_stop_writing_and_it_is_true(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Adding the clustering feature stops deltalake 1.6 from appending: the dry run and the
    run say so, and the claim is checked against deltalake itself, and against our own
    writer, which still appends."""
    from deltalake import write_deltalake

    table = tmp_path / "t"
    random_appends(table, files=2)
    assert cli.main(["cluster-by", str(table), "a", "--dry-run"]) == 0
    assert "deltalake (delta-rs, 1.6) refuses to append" in capsys.readouterr().out
    assert cli.main(["cluster-by", str(table), "a"]) == 0
    out = capsys.readouterr().out
    assert "clustering feature added" in out and "delta-ops (write_delta" in out
    extra = pa.table({"id": pa.array([-1], pa.int64())})
    with pytest.raises(Exception, match="(?i)unsupported|feature"):
        write_deltalake(str(table), extra.select(["id"]), mode="append", schema_mode="merge")
    before = load_snapshot(table).num_records
    write_arrow(table, pa.table({"id": pa.array([-1]), "a": pa.array([1]), "b": pa.array([0.5]),
                                 "s": pa.array(["k"]), "flag": pa.array([True])}))  # fmt: skip
    assert load_snapshot(table).num_records == (before or 0) + 1


def test_a_table_clustered_with_the_pre_release_liquid_feature_is_clustered(
    tmp_path: Path,
) -> None:
    """Databricks wrote liquid clustering before Delta named it: the `liquid` writer feature
    and a `delta.liquid` domain whose columns are {"physicalName": [...]} objects. compact
    clusters such a table by its columns (it bin-packed it, reading only delta.clustering)."""
    table = tmp_path / "t"
    random_appends(table, files=6)
    version = load_snapshot(table).version + 1
    configuration = {"clusteringColumns": [{"physicalName": ["a"]}], "domainName": "delta.liquid"}
    (table / "_delta_log" / f"{version:020d}.json").write_text(
        json.dumps(
            {
                "protocol": {
                    "minReaderVersion": 1,
                    "minWriterVersion": 7,
                    "writerFeatures": ["liquid", "domainMetadata"],
                }
            }
        )
        + "\n"
        + json.dumps(
            {
                "domainMetadata": {
                    "domain": "delta.liquid",
                    "configuration": json.dumps(configuration),
                    "removed": False,
                }
            }
        )
        + "\n"
    )
    rows = deltalake_rows(table)
    plan = _plan(table, target_size="8KB")
    assert isinstance(plan, cluster.ClusterPlan) and plan.columns == ("a",)
    execute_cluster(plan)
    assert deltalake_rows(table) == rows
    tags = [dict(t) for t in load_snapshot(table).files.column("tags").to_pylist()]
    assert {t["ZCUBE_ZORDER_BY"] for t in tags} == {'["a"]'}
