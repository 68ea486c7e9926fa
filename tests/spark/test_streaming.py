"""`df.writeStream.format("delta")`: each micro-batch committed exactly once (issue 32).

A file source feeds the sink one input file per micro-batch. The query is killed (its commit's
process ends itself, :mod:`tests.support.stream_faults`) at four points of batch 1's commit: after the
tasks wrote, just before the Delta commit's put, just after it, and after the Delta commit but
before Spark's own commit log; restarted from the same checkpoint location, every batch is
one version recording the query's `txn`, and deltalake and DuckDB read each row exactly once.
Vacuum (with its in-flight grace, deleting real orphans so that its START/END commits land
between batches) and checkpoint run beside a live query and lose nothing: every version
reads as whole batches.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.errors import StreamingQueryException

from delta_ops.errors import DeltaOpsError
from delta_ops.ops.checkpoint import checkpoint
from delta_ops.ops.compact import execute_compact, plan_compact
from delta_ops.ops.vacuum import execute_vacuum, plan_vacuum
from delta_ops.storage import Storage
from delta_ops.table.snapshot import load_snapshot
from delta_ops.table.writer import write_arrow
from tests.support import deltalake_rows, duckdb_rows, file_digests, stream_faults

pytestmark = pytest.mark.spark


@pytest.fixture
def spark(any_spark):
    """Each test here runs on the classic session, then on Spark Connect (the same JVM)."""
    return any_spark


SCHEMA = "id long, name string, ts timestamp"
ROWS_PER_FILE = 5
EPOCH = dt.datetime(2024, 11, 3, 8, 30, tzinfo=dt.UTC)


def add_input(inputs: Path, index: int, *, null_id: bool = False) -> None:
    """Input file `index`: ids index*100 .. +ROWS_PER_FILE (one micro-batch)."""
    inputs.mkdir(parents=True, exist_ok=True)
    ids: list[int | None] = list(range(index * 100, index * 100 + ROWS_PER_FILE))
    if null_id:
        ids[-1] = None
    rows = pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "name": [f"row-{i}" for i in range(ROWS_PER_FILE)],
            "ts": pa.array(
                [EPOCH + dt.timedelta(seconds=i) for i in range(ROWS_PER_FILE)],
                pa.timestamp("us", tz="UTC"),
            ),
        }
    )
    path = inputs / f"part-{index:03d}.parquet"
    pq.write_table(rows, inputs / f".{path.name}.tmp")
    (inputs / f".{path.name}.tmp").rename(path)  # the file source never sees half a file


def ids_of(indexes: range | list[int]) -> list[int]:
    return sorted(i * 100 + k for i in indexes for k in range(ROWS_PER_FILE))


def start(
    spark: Any,
    inputs: Path,
    checkpoint_location: Path,
    table: Path,
    *,
    fmt: str = "delta",
    available_now: bool = True,
    **options: str,
) -> Any:
    """The query: one input file per micro-batch into `table`."""
    stream = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(str(inputs))
    writer = (
        stream.writeStream.format(fmt)
        .option("checkpointLocation", str(checkpoint_location))
        .options(**options)
    )
    if available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime="100 milliseconds")
    return writer.start(str(table))


def commits(table: Path) -> list[dict[str, Any]]:
    """Each commit's operation, its `txn` actions and how many files it adds, in order."""
    out = []
    for path in sorted((table / "_delta_log").glob("*.json")):
        actions = [json.loads(line) for line in path.read_text().splitlines() if line]
        info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
        out.append(
            {
                "version": int(path.stem),
                "operation": info["operation"],
                "parameters": info.get("operationParameters", {}),
                "txns": [a["txn"] for a in actions if "txn" in a],
                "adds": sum(1 for a in actions if "add" in a),
            }
        )
    return out


def batches_committed(table: Path) -> list[int]:
    """The batch ids the table's commits record, one entry per commit that records one."""
    return [t["version"] for c in commits(table) for t in c["txns"]]


def data_files(table: Path) -> set[str]:
    return {
        p.relative_to(table).as_posix()
        for p in table.rglob("*.parquet")
        if "_delta_log" not in p.parts
    }


def referenced(table: Path) -> set[str]:
    storage = Storage.open(table)
    return {
        storage.relative_inside_root(p)
        for p in load_snapshot(table).file_index.column("path").to_pylist()
    }


def assert_each_row_once(table: Path, ids: list[int]) -> None:
    assert sorted(r["id"] for r in deltalake_rows(table)) == ids
    assert sorted(r["id"] for r in duckdb_rows(table)) == ids


def vacuum_orphans(table: Path) -> None:
    """Vacuum with no retention and no in-flight grace: every unreferenced file goes."""
    plan = plan_vacuum(
        load_snapshot(table),
        now_ms=int(time.time() * 1000),
        retention_ms=0,
        force=True,
        in_flight_grace_ms=0,
    )
    execute_vacuum(plan)


@pytest.fixture
def faulty(spark: Any) -> str:
    stream_faults.register(spark)
    return stream_faults.NAME


# ------------------------------------------------------------------------------ exactly once
@pytest.mark.parametrize("point", stream_faults.POINTS)
def test_a_query_killed_in_a_commit_restarts_and_holds_each_row_once(
    spark, faulty, tmp_path, point
) -> None:
    inputs, ck, table = tmp_path / "in", tmp_path / "checkpoint", tmp_path / "t"
    for index in range(3):
        add_input(inputs, index)
    query = start(spark, inputs, ck, table, fmt=faulty, dieAt=f"1:{point}")
    with pytest.raises(StreamingQueryException):
        query.awaitTermination()
    landed = point in ("landed", "committed")
    assert batches_committed(table) == ([0, 1] if landed else [0])
    assert not (ck / "commits" / "1").exists()  # Spark never recorded batch 1

    before_restart = data_files(table)
    query = start(spark, inputs, ck, table)
    query.awaitTermination()
    assert query.exception() is None
    assert batches_committed(table) == [0, 1, 2]  # each batch one version, none twice
    assert_each_row_once(table, ids_of(range(3)))
    history = commits(table)
    assert {c["operation"] for c in history} == {"STREAMING UPDATE"}
    assert history[0]["operation"] == "STREAMING UPDATE"  # the commit that created the table
    assert {c["txns"][0]["appId"] for c in history} == {str(query.id)}
    assert [c["parameters"]["epochId"] for c in history] == ["0", "1", "2"]
    assert all(c["parameters"]["outputMode"] == "Append" for c in history)
    if landed:
        # batch 1 ran again after the restart and its files were deleted, not committed
        assert data_files(table) == referenced(table)
    else:
        # the killed attempt's files are orphans at most (a killed driver deletes nothing)
        assert data_files(table) - referenced(table) <= before_restart
        vacuum_orphans(table)
        assert data_files(table) == referenced(table)
        assert_each_row_once(table, ids_of(range(3)))


def test_a_batch_spark_did_not_record_runs_again_and_is_not_committed_twice(
    spark, tmp_path
) -> None:
    """Spark's commit log lost its last entry (the query died after our commit): the batch
    re-runs, finds its version in the table, and deletes the files it wrote."""
    inputs, ck, table = tmp_path / "in", tmp_path / "checkpoint", tmp_path / "t"
    for index in range(2):
        add_input(inputs, index)
    start(spark, inputs, ck, table).awaitTermination()
    assert batches_committed(table) == [0, 1]
    files = data_files(table)
    (ck / "commits" / "1").unlink()
    (ck / "commits" / ".1.crc").unlink(missing_ok=True)
    query = start(spark, inputs, ck, table)
    query.awaitTermination()
    assert query.lastProgress["batchId"] == 1  # it did run again
    assert (ck / "commits" / "1").exists()
    assert batches_committed(table) == [0, 1]
    assert data_files(table) == files == referenced(table)
    assert_each_row_once(table, ids_of(range(2)))


def test_a_task_refusal_fails_the_query_in_one_line_and_leaves_the_table(spark, tmp_path) -> None:
    from deltalake import write_deltalake

    inputs, ck, table = tmp_path / "in", tmp_path / "checkpoint", tmp_path / "t"
    schema = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            ("name", pa.string()),
            ("ts", pa.timestamp("us", tz="UTC")),
        ]
    )
    write_deltalake(str(table), pa.table({"id": [1], "name": ["a"], "ts": [EPOCH]}, schema))
    before = file_digests(table)
    add_input(inputs, 0, null_id=True)
    query = start(spark, inputs, ck, table)
    with pytest.raises(DeltaOpsError) as caught:
        query.awaitTermination()
    text = str(caught.value)
    assert "column 'id' is NOT NULL" in text and "\n" not in text, text
    assert file_digests(table) == before


def test_complete_mode_replaces_the_table_with_each_batch(spark, tmp_path) -> None:
    inputs, ck, table = tmp_path / "in", tmp_path / "checkpoint", tmp_path / "t"

    def run() -> None:
        counts = spark.readStream.schema(SCHEMA).parquet(str(inputs)).groupBy("name").count()
        query = (
            counts.writeStream.format("delta")
            .outputMode("complete")
            .option("checkpointLocation", str(ck))
            .trigger(availableNow=True)
            .start(str(table))
        )
        query.awaitTermination()

    add_input(inputs, 0)
    run()
    add_input(inputs, 1)
    run()
    rows = sorted((r["name"], r["count"]) for r in deltalake_rows(table))
    assert rows == [(f"row-{i}", 2) for i in range(ROWS_PER_FILE)]
    assert [c["parameters"]["outputMode"] for c in commits(table)] == ["Complete", "Complete"]
    assert batches_committed(table) == [0, 1]


def test_idempotent_batch_writes_with_txn_app_id_and_version(spark, tmp_path) -> None:
    """Delta's txnAppId/txnVersion write options (the foreachBatch pattern): a version the
    table has recorded for the application is not written again."""
    table = tmp_path / "t"
    df = spark.range(3)
    write = df.write.format("delta").mode("append").option("txnAppId", "loader")
    write.option("txnVersion", "0").save(str(table))
    files = data_files(table)
    write.option("txnVersion", "0").save(str(table))  # again: skipped, its files deleted
    assert data_files(table) == files
    write.option("txnVersion", "1").save(str(table))
    assert batches_committed(table) == [0, 1]
    assert sorted(r["id"] for r in deltalake_rows(table)) == [0, 0, 1, 1, 2, 2]
    with pytest.raises(DeltaOpsError, match="both options txnAppId and txnVersion"):
        df.write.format("delta").mode("append").option("txnAppId", "x").save(str(table))


# --------------------------------------------------------------------- maintenance alongside
@pytest.fixture
def maintenance(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """A thread checkpointing and vacuuming the table (retention 0, the default in-flight
    grace) for as long as the test runs, with an old orphan to delete before each vacuum
    (so each one commits VACUUM START and END between the stream's batches)."""
    table = tmp_path / "t"
    state: dict[str, Any] = {"table": table, "stop": threading.Event(), "errors": []}
    state.update(checkpoints=0, vacuums=0)

    def run() -> None:
        orphan = 0
        while not state["stop"].is_set():
            try:
                # from the first commit on (before it, the log holds at most a temporary file
                # of the commit being written, and the table is not one yet)
                if any(p.stem.isdigit() for p in (table / "_delta_log").glob("*.json")):
                    orphan += 1
                    old = table / f"orphan-{orphan}.parquet"
                    pq.write_table(pa.table({"x": [1]}), old)
                    an_hour_ago = time.time() - 3600
                    os.utime(old, (an_hour_ago, an_hour_ago))
                    checkpoint(table)
                    state["checkpoints"] += 1
                    plan = plan_vacuum(
                        load_snapshot(table),
                        now_ms=int(time.time() * 1000),
                        retention_ms=0,
                        force=True,
                    )
                    execute_vacuum(plan)
                    state["vacuums"] += 1
            except Exception as exc:  # noqa: BLE001 - collected, the test fails on any
                state["errors"].append(repr(exc))
            time.sleep(0.05)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    yield state
    state["stop"].set()
    thread.join(timeout=60)


def test_vacuum_and_checkpoint_beside_a_live_stream_lose_nothing(
    spark, faulty, tmp_path, maintenance
) -> None:
    """Each batch's files wait half a second for their commit, while vacuum runs every few
    tens of milliseconds: with no in-flight grace, vacuum deletes them and the commit fails."""
    inputs, ck, table = tmp_path / "in", tmp_path / "checkpoint", maintenance["table"]
    batches = 6
    add_input(inputs, 0)
    query = start(
        spark, inputs, ck, table, fmt=faulty, available_now=False, pauseBeforeCommit="0.5"
    )
    try:
        for index in range(1, batches):
            query.processAllAvailable()
            add_input(inputs, index)
        query.processAllAvailable()
        deadline = time.monotonic() + 30
        while maintenance["vacuums"] < 3 and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        query.stop()
    maintenance["stop"].set()
    assert maintenance["errors"] == []
    assert query.exception() is None
    assert maintenance["checkpoints"] >= 3 and maintenance["vacuums"] >= 3
    assert (table / "_delta_log" / "_last_checkpoint").exists()

    assert batches_committed(table) == list(range(batches))
    history = commits(table)
    operations = [c["operation"] for c in history]
    assert "VACUUM START" in operations and "VACUUM END" in operations
    # every version reads as whole batches, in order, each row once
    done = 0
    for version in range(len(history)):
        done += sum(1 for _ in history[version]["txns"])
        ids = sorted(r["id"] for r in deltalake_rows(table, version=version))
        assert ids == ids_of(range(done)), version
    assert_each_row_once(table, ids_of(range(batches)))
    assert referenced(table) <= data_files(table)


# ------------------------------------------------------------------------------ the source
def append_ids(table: Path, ids: range, **kwargs: Any) -> None:
    write_arrow(
        table, pa.table({"id": pa.array(ids, pa.int64()), "day": ["d"] * len(ids)}), **kwargs
    )


def stream_copy(spark: Any, source: Path, ck: Path, target: Path, **options: str) -> Any:
    """Every batch of `source`'s stream appended to `target`, as far as `source` goes now."""
    stream = spark.readStream.format("delta").options(**options).load(str(source))
    query = (
        stream.writeStream.format("delta")
        .option("checkpointLocation", str(ck))
        .trigger(availableNow=True)
        .start(str(target))
    )
    query.awaitTermination()
    return query


def ids_in(table: Path) -> list[int]:
    return sorted(r["id"] for r in deltalake_rows(table))


def test_a_tables_appends_stream_into_another_table_once_each(spark, tmp_path) -> None:
    source, ck, target = tmp_path / "source", tmp_path / "checkpoint", tmp_path / "target"
    append_ids(source, range(3))
    append_ids(source, range(3, 5))
    stream_copy(spark, source, ck, target)  # the first batch: the table as it is
    assert ids_in(target) == list(range(5))
    append_ids(source, range(5, 8))
    append_ids(source, range(8, 9))
    execute_compact(plan_compact(load_snapshot(source)))  # dataChange=false: nothing new
    stream_copy(spark, source, ck, target)
    assert ids_in(target) == list(range(9))
    stream_copy(spark, source, ck, target)  # nothing committed since: nothing read
    assert ids_in(target) == list(range(9)) == sorted(r["id"] for r in duckdb_rows(target))
    assert batches_committed(target) == [0, 1]


def test_a_stream_from_a_starting_version_and_over_changes(spark, tmp_path) -> None:
    source, target = tmp_path / "source", tmp_path / "target"
    for start in range(0, 9, 3):
        append_ids(source, range(start, start + 3))  # versions 0, 1, 2
    stream_copy(spark, source, tmp_path / "ck1", target, startingVersion="1")
    assert ids_in(target) == list(range(3, 9))

    append_ids(source, range(100, 101), mode="overwrite")  # version 3 removes rows
    with pytest.raises(DeltaOpsError) as caught:
        stream_copy(spark, source, tmp_path / "ck1", target)
    text = str(caught.value)
    assert "version 3 (WRITE) removed or changed rows" in text and "\n" not in text, text
    skipping = tmp_path / "skipping"
    stream_copy(
        spark, source, tmp_path / "ck2", skipping, startingVersion="1", skipChangeCommits="true"
    )
    assert ids_in(skipping) == list(range(3, 9))
    append_ids(source, range(200, 202))
    stream_copy(spark, source, tmp_path / "ck2", skipping, skipChangeCommits="true")
    assert ids_in(skipping) == [*range(3, 9), 200, 201]
