"""`engine="spark"`: vacuum's listing and deletes run as Spark tasks, with the same plan and the
same table afterwards as the local engine (issue 14).

Each case vacuums two copies of one table, one per engine: the plans must list the same
candidates (path, size, age, reason) and empty directories, and after executing, the two
copies must hold the same files and read the same rows in delta-rs.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from delta_ops import cli
from delta_ops.ops.engines import LOCAL, Engine
from delta_ops.ops.vacuum import execute_vacuum, plan_vacuum
from delta_ops.table.snapshot import load_snapshot
from tests.support import TABLES, deltalake_rows, file_digests

DAY_S = 86_400


def _aged_copy(name: str, dest: Path) -> Path:
    """A fixture copy whose files are all 30 days old, plus untracked files: old orphans at the
    root and in a partition, a young one, and an old empty directory."""
    table = dest / name.replace("/", "__")
    shutil.copytree(TABLES / name, table)
    (table / "orphan-root.parquet").write_bytes(b"o" * 11)
    sub = next((p for p in table.iterdir() if p.is_dir() and "=" in p.name), None)
    if sub is not None:
        (sub / "orphan-in-partition.parquet").write_bytes(b"p" * 13)
    (table / "empty=dir").mkdir()
    old = time.time() - 30 * DAY_S
    for path in table.rglob("*"):
        os.utime(path, (old, old))
    (table / "orphan-young.parquet").write_bytes(b"y" * 7)
    return table


def _engine(name: str, session: object = None) -> Engine:
    """The engine a front end builds for ``--engine name``, on `session` (classic or Spark
    Connect; the running one when None)."""
    from delta_ops.spark.engine import SparkEngine

    return SparkEngine(session) if name == "spark" else LOCAL  # type: ignore[arg-type]


def _plan(table: Path, engine: str, session: object = None):  # type: ignore[no-untyped-def]
    return plan_vacuum(
        load_snapshot(table),
        int(time.time() * 1000),
        retention_ms=7 * DAY_S * 1000,
        engine=_engine(engine, session),
    )


@pytest.mark.spark
@pytest.mark.parametrize(
    "name", ["delta-spark/dv-partitioned-with-checkpoint", "delta-rs/simple_table"]
)
def test_spark_engine_plans_and_vacuums_as_the_local_engine(any_spark, tmp_path, name):
    local = _aged_copy(name, tmp_path / "local")
    remote = _aged_copy(name, tmp_path / "spark")
    local_plan, spark_plan = _plan(local, "local"), _plan(remote, "spark", any_spark)
    assert spark_plan.engine.name == "spark" and local_plan.engine.name == "local"
    key = sorted((c.path, c.size, c.reason) for c in local_plan.candidates)
    assert sorted((c.path, c.size, c.reason) for c in spark_plan.candidates) == key
    assert "orphan-root.parquet" in {c.path for c in spark_plan.candidates}
    assert "orphan-young.parquet" not in {c.path for c in spark_plan.candidates}
    if "partitioned" in name:  # found by a task walking a partition directory
        assert any(c.path.endswith("/orphan-in-partition.parquet") for c in spark_plan.candidates)
    assert "empty=dir" in spark_plan.directories
    assert spark_plan.directories == local_plan.directories
    rows = deltalake_rows(local)
    local_result, spark_result = execute_vacuum(local_plan), execute_vacuum(spark_plan)
    assert sorted(spark_result.deleted) == sorted(local_result.deleted)
    assert spark_result.bytes == local_result.bytes > 0
    # the same files remain (the log differs only in commit timestamps and ids)
    data = {k for k in file_digests(local) if not k.startswith("_delta_log")}
    assert {k for k in file_digests(remote) if not k.startswith("_delta_log")} == data
    assert deltalake_rows(remote) == deltalake_rows(local) == rows


@pytest.mark.spark
def test_cli_engine_flag_gives_the_same_dry_run(spark, tmp_path, capsys):
    table = _aged_copy("delta-spark/dv-partitioned-with-checkpoint", tmp_path)
    before = file_digests(table)
    outputs = {}
    for engine in ("local", "spark"):
        assert cli.main(["vacuum", str(table), "--dry-run", "--json", "--engine", engine]) == 0
        outputs[engine] = json.loads(capsys.readouterr().out)
    assert outputs["spark"]["engine"] == "spark"
    assert outputs["spark"]["deleted"] == outputs["local"]["deleted"] != []
    assert file_digests(table) == before  # a dry run on either engine changes nothing


@pytest.mark.spark
def test_row_tracking_footer_counts_on_spark_match_the_local_engine(any_spark, tmp_path):
    """delta-rs' simple_table has no numRecords in its stats: every file's rows are counted
    from its footer, by threads here and by Spark tasks there; the ids must come out equal."""
    from delta_ops.ops.row_tracking import (
        execute_enable_row_tracking,
        plan_enable_row_tracking,
    )

    results = {}
    for engine in ("local", "spark"):
        table = tmp_path / engine
        shutil.copytree(TABLES / "delta-rs" / "simple_table", table)
        plan = plan_enable_row_tracking(load_snapshot(table), engine=_engine(engine, any_spark))
        assert plan.files_without_num_records > 0 and plan.engine.name == engine
        result = execute_enable_row_tracking(plan)
        assert result.files_counted_from_footer == plan.files_without_num_records
        files = load_snapshot(table).files
        results[engine] = (
            sorted(
                zip(
                    files.column("path").to_pylist(),
                    files.column("baseRowId").to_pylist(),
                    strict=True,
                )
            ),
            result.row_id_high_water_mark,
        )
    assert results["spark"] == results["local"]


@pytest.mark.spark
def test_purge_and_compact_on_spark_keep_rows_and_row_ids_as_the_local_engine(any_spark, tmp_path):
    """Both rewrites on a deletion-vector table with row tracking: each unit is one Spark task;
    the rows, the row ids and the shape of the commits equal the local engine's."""
    from delta_ops.ops.compact import execute_compact, plan_compact
    from delta_ops.ops.purge import execute_purge, plan_purge
    from tests.support.rewrite_support import dv_table, ids_by_value

    outcome = {}
    for engine in ("local", "spark"):
        table = dv_table(tmp_path / engine, {"delta.enableRowTracking": "true"})
        ids_before = ids_by_value(table)
        purged = execute_purge(plan_purge(load_snapshot(table), engine=_engine(engine, any_spark)))
        assert purged.files_rewritten == 2 and purged.rows_dropped == 4
        snapshot = load_snapshot(table)
        assert snapshot.files.column("deletionVector").null_count == snapshot.num_files
        compacted = execute_compact(
            plan_compact(load_snapshot(table), engine=_engine(engine, any_spark))
        )
        assert compacted.files_removed == 2 and compacted.files_added == 1
        assert ids_by_value(table) == ids_before  # every remaining row keeps its row id
        outcome[engine] = (
            sorted(r["id"] for r in deltalake_rows(table)),
            ids_by_value(table),
            purged.rows_kept,
            load_snapshot(table).num_files,
        )
    assert outcome["spark"] == outcome["local"]
    assert outcome["local"][0] == [0, 2, 3, 11]


@pytest.mark.spark
def test_work_on_another_thread_uses_the_running_session_and_makes_it_active(spark, tmp_path):
    """A Dagster or pipeline worker thread has no active session of its own (PySpark pins
    each Python thread to its own JVM thread): the writers and the engine take the running
    session, leave its options alone, and make it active there, so `spark.read` and the SQL
    functions on that thread find it."""
    from concurrent.futures import ThreadPoolExecutor

    from pyspark.sql import SparkSession

    from delta_ops.spark import write_delta
    from delta_ops.spark.engine import SparkEngine

    table = tmp_path / "t"
    df = spark.createDataFrame([(1, "a"), (2, "b")], "id long, s string")
    spark.conf.set("spark.sql.shuffle.partitions", "3")  # a user's option, not ours (2)
    seen: dict[str, object] = {}

    def work() -> None:
        seen["active_before"] = SparkSession.getActiveSession()
        seen["engine_session"] = SparkEngine().session()
        write_delta(df, str(table))
        seen["active_after"] = SparkSession.getActiveSession()
        seen["rows"] = sorted(
            tuple(r) for r in spark.read.format("delta").load(str(table)).collect()
        )

    try:
        with ThreadPoolExecutor(1) as worker:  # a thread of its own; its errors re-raise here
            worker.submit(work).result(timeout=120)
        assert seen["active_before"] is None  # the premise: nothing active on a new thread
        assert seen["engine_session"] is spark
        assert seen["active_after"] is spark
        assert seen["rows"] == [(1, "a"), (2, "b")]
        assert spark.conf.get("spark.sql.shuffle.partitions") == "3"  # not re-applied
        assert sorted(tuple(r.values()) for r in deltalake_rows(table)) == [(1, "a"), (2, "b")]
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", "2")


@pytest.mark.spark
@pytest.mark.parametrize("layout,parts", [("v2", None), ("classic", 3)], ids=["v2", "3-part"])
def test_spark_engine_writes_the_checkpoint_the_local_engine_writes(
    spark, tmp_path, monkeypatch, layout, parts
):
    """Each sidecar or part is written by a Spark task from its share of a streamed state
    (the tasks read the previous checkpoint themselves); the files hold the same rows as the
    local engine's, and the table reads the same."""
    from delta_ops.ops import checkpoint as checkpoint_op
    from delta_ops.ops import checkpoint_writer
    from delta_ops.table.snapshot import load_head
    from tests.ops.test_checkpoint import expected_after_checkpoint, state_facts
    from tests.ops.test_checkpoint_streaming import NOW, _plan_numbers, _written_rows, build_history
    from tests.support import deltalake_files

    monkeypatch.setattr(checkpoint_writer, "V2_ACTIONS_PER_SIDECAR", 10)  # several sidecars
    src = tmp_path / "src"
    build_history(src, layout)
    before = load_snapshot(src)
    copies = {engine: tmp_path / engine for engine in ("local", "spark")}
    plans = {}
    for engine, table in copies.items():
        shutil.copytree(src, table)
        plans[engine] = checkpoint_op.plan_checkpoint(
            load_head(table), NOW, parts=parts, stream_above=0, engine=_engine(engine)
        )
    assert plans["spark"].streamed and plans["spark"].engine.name == "spark"
    assert _plan_numbers(plans["spark"]) == _plan_numbers(plans["local"])
    assert len(plans["spark"].files) >= 3
    context = spark.sparkContext
    context.setJobGroup("checkpoint-engine-test", "checkpoint files in tasks")
    try:
        for engine in copies:
            checkpoint_op.execute_checkpoint(plans[engine])
        assert context.statusTracker().getJobIdsForGroup("checkpoint-engine-test")
    finally:
        context.setJobGroup("", "")
    assert _written_rows(copies["spark"], plans["spark"]) == _written_rows(
        copies["local"], plans["local"]
    )
    assert state_facts(load_snapshot(copies["spark"])) == expected_after_checkpoint(before, NOW)
    assert deltalake_files(copies["spark"]) == deltalake_files(copies["local"])


@pytest.mark.spark
def test_a_failed_spark_rewrite_task_leaves_no_new_file_and_no_commit(any_spark, tmp_path):
    """One partition's file is unreadable: its task fails, the other partition's task has
    written its file already. The driver finds that file by the rewrite's file prefix and
    deletes it; no commit, and the table reads as before."""
    from delta_ops.errors import DeltaOpsError
    from delta_ops.ops.compact import execute_compact, plan_compact
    from tests.support.rewrite_support import corrupt_a_file, many_small_appends

    table = tmp_path / "t"
    many_small_appends(table)
    rows = deltalake_rows(table)
    corrupt, original = corrupt_a_file(table)
    before = load_snapshot(table)
    files_before = sorted(p.relative_to(table) for p in table.rglob("*.parquet"))
    plan = plan_compact(before, engine=_engine("spark", any_spark))
    assert len(plan.bins) == 2  # one task per partition
    with pytest.raises(DeltaOpsError, match=f"{corrupt}: unreadable data file"):
        execute_compact(plan)
    assert load_snapshot(table).version == before.version
    assert sorted(p.relative_to(table) for p in table.rglob("*.parquet")) == files_before
    (table / corrupt).write_bytes(original)
    assert deltalake_rows(table) == rows


class PythonException(Exception):  # named as pyspark's, which _collect recognises
    """Stands for pyspark's report of a failed Python task: only its name and text matter."""


class _FailingJob:
    def __init__(self, report: str) -> None:
        self.report = report

    def collect(self) -> list[object]:
        raise PythonException(self.report)


_WORKER = """An exception was thrown from the Python worker:
Traceback (most recent call last):
  File "/x/rewrite.py", line 141, in decode
    data = decode_parquet_bytes(content)
pyarrow.lib.ArrowInvalid: Parquet magic bytes not found in footer.

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "/x/worker.py", line 4327, in invoke_udf
    run_process()
{final}
"""


@pytest.mark.parametrize(
    ("final", "translated"),
    [
        ("delta_ops.errors.DeltaOpsError: day=a/f.parquet: unreadable data file: bad", True),
        ("FileNotFoundError: [Errno 2] No such file or directory: 'day=a/f.parquet'", True),
        ("TypeError: unsupported operand type(s) for +: 'int' and 'str'", False),
    ],
)
def test_a_task_failure_is_one_line_only_for_our_errors_and_os_errors(final, translated):
    """The exception a task died of decides: one of ours or an OSError becomes a one-line
    DeltaOpsError; anything else (a bug) keeps Spark's whole report, even when it happened
    while handling an OSError."""
    from delta_ops.errors import DeltaOpsError
    from delta_ops.spark.engine import _collect

    report = _WORKER.format(final=final)
    if "TypeError" in final:  # a bug raised while handling an OSError
        report = report.replace(
            "pyarrow.lib.ArrowInvalid: Parquet magic bytes not found in footer.",
            "OSError: the store refused",
        )
    if translated:
        with pytest.raises(DeltaOpsError) as caught:
            _collect(_FailingJob(report))
        assert str(caught.value) == f"a Spark task failed: {final.split(': ', 1)[1]}"
    else:
        with pytest.raises(PythonException):
            _collect(_FailingJob(report))


@pytest.mark.spark
def test_zorder_on_spark_writes_the_files_the_local_engine_writes(any_spark, tmp_path):
    """Each cube is one Spark task: two partitions, two tasks; the files hold the same rows in
    the same curve order as the local engine's (the curve is fitted from the same samples),
    and deltalake reads the rows written."""
    from delta_ops.ops.compact import OPERATION as COMPACT
    from tests.ops.test_cluster import random_appends

    def clustered(engine: str) -> list[list[int]]:
        table = tmp_path / engine
        random_appends(table, files=6, rows=300, partition_by=["day"])
        rows = deltalake_rows(table)
        values = COMPACT.parse({"zorder_by": "a,b", "target_size": "4KB", "engine": engine})
        plan = COMPACT.plan(load_snapshot(table), values, _engine(engine, any_spark))
        assert len(plan.cubes) == 2  # one per partition
        result = COMPACT.execute(plan)
        assert result.files_removed == 6 and result.files_added > 2
        assert deltalake_rows(table) == rows
        snapshot = load_snapshot(table)
        assert all(
            dict(t)["ZCUBE_ZORDER_CURVE"] == "zorder" for t in snapshot.files["tags"].to_pylist()
        )
        ids = []
        for path in snapshot.files.column("path").to_pylist():
            ids.append(pq.read_table(table / path, columns=["id"]).column("id").to_pylist())
        return sorted(ids)

    assert clustered("spark") == clustered("local")


@pytest.mark.spark
def test_a_failed_spark_clustering_task_leaves_no_new_file_and_no_commit(any_spark, tmp_path):
    """One partition's cube reads an unreadable file: its task fails, the other partition's
    task may have written its files already; the driver deletes them, nothing is committed."""
    from delta_ops.errors import DeltaOpsError
    from delta_ops.ops.compact import OPERATION as COMPACT
    from tests.ops.test_cluster import random_appends
    from tests.support.rewrite_support import corrupt_a_file

    table = tmp_path / "t"
    random_appends(table, files=6, rows=300, partition_by=["day"])
    rows = deltalake_rows(table)
    corrupt, original = corrupt_a_file(table, "day=d1")
    before = load_snapshot(table)
    files_before = sorted(p.relative_to(table) for p in table.rglob("*.parquet"))
    values = COMPACT.parse({"zorder_by": "a,b", "target_size": "4KB", "engine": "spark"})
    plan = COMPACT.plan(before, values, _engine("spark", any_spark))
    with pytest.raises(DeltaOpsError, match="unreadable data file"):
        COMPACT.execute(plan)
    assert load_snapshot(table).version == before.version
    assert sorted(p.relative_to(table) for p in table.rglob("*.parquet")) == files_before
    (table / corrupt).write_bytes(original)
    assert deltalake_rows(table) == rows


def _fail_fast_or_write_late(marker: str, item: int) -> int:
    if item == 0:
        time.sleep(0.3)  # the other task has started by now
        raise OSError("the store refused")
    time.sleep(1.5)  # still running when the job fails (under Python's 2 s kill timeout)
    Path(marker).write_text("written after the job failed")
    return item


@pytest.mark.spark
def test_a_failed_map_is_raised_once_its_other_tasks_have_ended(any_spark, tmp_path):
    """Spark fails a job as soon as one task fails, while its other tasks still run: a
    rewrite that then lists its files to delete them would miss what they write after (the
    CI run of 2026-11-27 left a cube's file behind this way under load). A task returns what
    its function raised as data, so the job ends with every task done, and the engine raises
    the failure then; the caller's operation tags (and, classic, its job group) stay its own."""
    from functools import partial

    from delta_ops.errors import DeltaOpsError
    from delta_ops.spark.engine import SparkEngine
    from delta_ops.spark.workers import is_connect

    marker = tmp_path / "late"
    context = None if is_connect(any_spark) else any_spark.sparkContext
    if context is not None:
        context.setJobGroup("the-callers-group", "the caller's own")
    any_spark.addTag("the-callers-tag")
    try:
        with pytest.raises(DeltaOpsError, match="the store refused"):
            SparkEngine(any_spark).map_ordered(
                partial(_fail_fast_or_write_late, str(marker)), [0, 1]
            )
        assert marker.read_text() == "written after the job failed"
        assert any_spark.getTags() == {"the-callers-tag"}
        if context is not None:
            assert context.getLocalProperty("spark.jobGroup.id") == "the-callers-group"
    finally:
        any_spark.removeTag("the-callers-tag")
        if context is not None:
            context.setLocalProperty("spark.jobGroup.id", None)
            context.setLocalProperty("spark.job.description", None)


def _partition_of(item: int) -> tuple[int, int]:
    from pyspark import TaskContext

    return item, TaskContext.get().partitionId()


@pytest.mark.spark
def test_each_share_of_the_items_is_a_task_of_its_own(any_spark):
    """`batch` items per task, exactly: the shares are placed by hash partitioning on keys
    whose Spark hash we compute here (checked against Spark's own `hash`), never two shares
    in one task (which would halve a rewrite's parallelism) nor one share split."""
    from delta_ops.spark.engine import SparkEngine, partition_keys, spark_hash_int

    hashed = any_spark.range(-40, 40).selectExpr(
        "cast(id as int) as k", "hash(cast(id as int)) as h"
    )
    assert {r.k: r.h for r in hashed.collect()} == {k: spark_hash_int(k) for k in range(-40, 40)}
    for slices in (1, 2, 7):
        assert sorted(spark_hash_int(k) % slices for k in partition_keys(slices)) == list(
            range(slices)
        )
    placed = SparkEngine(any_spark).map_ordered(_partition_of, list(range(10)), batch=3)
    tasks: dict[int, list[int]] = {}
    for item, task in placed:
        tasks.setdefault(task, []).append(item)
    assert sorted(tasks.values()) == [[0, 1], [2, 3, 4], [5, 6], [7, 8, 9]]  # as parallelize
