"""The operation history: a row per operation run, in a Delta table DuckDB and deltalake read.

Runs go through `delta_ops.service.runs.run_operation`, the path every front end takes (the CLI
here; Dagster and Airflow in their own test files), and land in the history table written by
delta-ops' own writer: succeeded, skipped and failed runs alike; concurrent appends from
several processes all land; the table keeps itself bounded; and a history that cannot be
written never fails the operation.
"""

from __future__ import annotations

import datetime as dt
import logging
import multiprocessing
from pathlib import Path

import pyarrow as pa
import pytest

from delta_ops import clock
from delta_ops.cli.commands import main
from delta_ops.ops.engines import LOCAL
from delta_ops.ops.registry import OPERATIONS
from delta_ops.protocol.units import format_bytes
from delta_ops.service import history as history_module
from delta_ops.service.history import (
    HISTORY_ENV,
    OperationHistory,
    OperationRecord,
    Status,
    drop_expired_days,
    fleet_history,
    metrics_of,
)
from delta_ops.service.runs import run_operation
from delta_ops.storage import Storage
from delta_ops.storage.warehouse import find_tables, history_location
from delta_ops.table.snapshot import load_snapshot
from delta_ops.table.writer import write_arrow
from tests.support import deltalake_rows, duckdb_connection

DAY_MS = 86_400_000


def _table(path: Path, files: int = 3) -> Path:
    for start in range(0, files * 10, 10):
        write_arrow(path, pa.table({"id": pa.array(range(start, start + 10), pa.int64())}))
    return path


def _duckdb(sql: str) -> list[tuple]:
    con = duckdb_connection()
    try:
        return con.sql(sql).fetchall()
    finally:
        con.close()


def test_each_cli_run_appends_one_row_that_duckdb_and_deltalake_read(tmp_path, capsys):
    table = _table(tmp_path / "events")
    history = tmp_path / "_history"
    assert main(["compact", str(table), "--history", str(history)]) == 0
    assert main(["checkpoint", str(table), "--history", str(history)]) == 0
    assert main(["vacuum", str(table), "--dry-run", "--history", str(history)]) == 0  # not a run
    # a failing run: a retention below the table's minimum, refused while planning
    assert main(["vacuum", str(table), "--retention", "1h", "--history", str(history)]) == 1
    capsys.readouterr()

    rows = _duckdb(
        "SELECT operation, status, table_path, files_touched, bytes_touched,"
        " metrics['files_removed'], engine, front_end, error IS NULL, reason"
        f" FROM delta_scan('{history}') ORDER BY start_time"
    )
    assert [r[:3] for r in rows] == [
        ("compact", "succeeded", str(table)),
        ("checkpoint", "succeeded", str(table)),
        ("vacuum", "failed", str(table)),
    ]
    compact, checkpoint, vacuum = rows
    assert compact[3] == 4 and compact[4] > 0  # 3 files removed, 1 written
    assert compact[5] == "3"
    assert compact[6:9] == ("local", "cli", True)
    assert compact[9].startswith("compacted 3 files into 1")
    assert checkpoint[3] == 1 and checkpoint[4] > 0
    assert vacuum[8] is False
    assert [
        r["operation"] for r in sorted(deltalake_rows(history), key=lambda r: r["start_time"])
    ] == [
        "compact",
        "checkpoint",
        "vacuum",
    ]
    failed = next(r for r in deltalake_rows(history) if r["status"] == "failed")
    assert failed["error"].startswith("RetentionTooShort: ")
    assert failed["table_version"] == 3 and failed["metrics"] == []
    assert failed["day"] == failed["start_time"].date()
    assert failed["end_time"] >= failed["start_time"]
    # the history sits beside the tables, and discovery does not take it for one
    assert find_tables(str(tmp_path)) == [("events", str(table))]


def test_an_executed_runs_reason_is_what_it_did_in_one_line(tmp_path, capsys):
    """The reason of an executed run is its result in one line, past tense (the dry run's
    file list is no reason); bytes written and deleted are told apart there, while
    `bytes_touched` sums them."""
    import os

    table = _table(tmp_path / "t")
    old = clock.now_ms() / 1000 - 30 * 86_400
    for i in range(150):  # untracked files past the retention: vacuum lists each
        path = table / f"stray-{i:03}.parquet"
        path.write_bytes(b"x" * 10)
        os.utime(path, (old, old))
    history = tmp_path / "_history"
    assert main(["vacuum", str(table), "--history", str(history)]) == 0
    assert main(["compact", str(table), "--history", str(history)]) == 0
    capsys.readouterr()
    rows = sorted(deltalake_rows(history), key=lambda r: r["start_time"])
    vacuum, compact = (r["reason"] for r in rows)
    assert "\n" not in vacuum and "would" not in vacuum, vacuum
    assert vacuum.startswith("deleted 150 files (1.5 KB)"), vacuum
    assert "\n" not in compact and compact.startswith("compacted 3 files into 1"), compact
    metrics = dict(rows[1]["metrics"])
    removed, written = int(metrics["bytes_removed"]), int(metrics["bytes_added"])
    assert rows[1]["bytes_touched"] == removed + written
    assert f"({format_bytes(removed)} removed, {format_bytes(written)} written)" in compact


def test_the_environment_names_the_history_and_the_cli_records_nothing_without_it(
    tmp_path, monkeypatch, capsys
):
    table = _table(tmp_path / "t")
    assert main(["checkpoint", str(table)]) == 0
    assert not (tmp_path / "_delta_ops_history").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["t"]
    history = tmp_path / "from_env"
    monkeypatch.setenv(HISTORY_ENV, str(history))
    assert main(["cleanup", str(table)]) == 0
    assert main(["vacuum", str(tmp_path / "missing")]) == 2  # not a table: recorded, failed
    capsys.readouterr()
    rows = _duckdb(f"SELECT operation, status, error FROM delta_scan('{history}') ORDER BY 1")
    assert rows[0][:2] == ("cleanup", "skipped")  # executed, but its plan had nothing to do
    assert rows[1][:2] == ("vacuum", "failed") and rows[1][2].startswith("NotADeltaTable")


def test_a_plan_with_nothing_to_do_is_recorded_as_skipped_with_its_reason(tmp_path):
    table = _table(tmp_path / "t", files=1)
    history = OperationHistory(str(tmp_path / "h"))
    op = OPERATIONS["vacuum"]
    run = run_operation(
        op,
        str(table),
        op.parse({}),
        LOCAL,
        skip_idle=True,
        history=history,
        table_name="t",
        front_end="test",
    )
    assert not run.executed and run.plan.nothing_to_do
    (row,) = deltalake_rows(tmp_path / "h")
    assert (row["status"], row["table_name"], row["front_end"]) == ("skipped", "t", "test")
    assert row["reason"] == op.idle_reason(run.plan)
    assert row["table_version"] == 0 and row["files_touched"] is None


def test_a_history_that_cannot_be_written_never_fails_the_operation(tmp_path, caplog, capsys):
    table = _table(tmp_path / "t")
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with caplog.at_level(logging.WARNING, logger="delta_ops.service.history"):
        assert main(["compact", str(table), "--history", str(blocker / "history")]) == 0
    assert "could not record compact of" in caplog.text
    assert load_snapshot(table).num_files == 1  # the operation did its work


def test_metrics_are_the_results_plain_values_as_text():
    data = {
        "num_deleted": 3,
        "bytes": 10,
        "ok": True,
        "deleted": ["a", "b"],
        "mode": "full",
        "skipped": None,
        "reasons": {"orphan": {"files": 1}},
        "metrics": {"numFiles": 2},
    }
    assert metrics_of(data) == {
        "num_deleted": "3",
        "bytes": "10",
        "ok": "true",
        "mode": "full",
        "metrics.numFiles": "2",
    }


def _append_many(location: str, worker: int, count: int) -> None:
    history = OperationHistory(location)
    now = clock.now_ms()
    for i in range(count):
        record = OperationRecord(
            start_ms=now,
            end_ms=now,
            table=f"t{worker}",
            operation="vacuum",
            status=Status.SUCCEEDED,
            metrics={"i": str(i)},
        )
        assert history.append(record)


def test_concurrent_appends_from_two_processes_all_land(tmp_path):
    location = str(tmp_path / "h")  # both race to create it, too
    ctx = multiprocessing.get_context("spawn")
    workers = [ctx.Process(target=_append_many, args=(location, w, 12)) for w in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(120)
        assert w.exitcode == 0
    rows = _duckdb(f"SELECT table_path, metrics['i'] FROM delta_scan('{location}')")
    assert sorted(rows) == sorted((f"t{w}", str(i)) for w in range(2) for i in range(12))


def test_the_history_keeps_itself_bounded(tmp_path):
    location = tmp_path / "h"
    history = OperationHistory(str(location))
    start = clock.now_ms() - 200 * DAY_MS  # older than the 180 days the table keeps
    for i in range(21):
        when = start if i < 5 else clock.now_ms()
        history.append(
            OperationRecord(
                start_ms=when,
                end_ms=when,
                table="t",
                operation="checkpoint",
                status=Status.SUCCEEDED,
            )
        )
    snapshot = load_snapshot(location)
    # its upkeep (at versions 10 and 20) dropped the old days, compacted and checkpointed
    assert snapshot.segment.checkpoint_version > 20
    assert snapshot.num_records == 16
    assert snapshot.num_files <= 3
    days = {dict(v)["day"] for v in snapshot.file_index.column("partitionValues").to_pylist()}
    assert days == {dt.datetime.now(dt.UTC).date().isoformat()}
    assert not drop_expired_days(Storage.open(str(location)))


def test_fleet_history_lives_in_the_warehouse_or_beside_its_tables(tmp_path):
    assert fleet_history(True, str(tmp_path)) == f"{tmp_path}/_delta_ops_history"
    assert fleet_history(True, ["s3://lake/a/t1", "s3://lake/a/t2"]) == (
        "s3://lake/a/_delta_ops_history"
    )
    assert fleet_history(True, ["s3://lake/t1", "gs://other/t2"]) is None
    assert fleet_history("s3://lake/h", ["s3://lake/t1"]) == "s3://lake/h"
    assert fleet_history(False, str(tmp_path)) is None
    assert history_location([f"{tmp_path}/a/t1", f"{tmp_path}/t2"]) == (
        f"{tmp_path}/_delta_ops_history"
    )


def test_every_registered_operation_says_what_it_touched():
    missing = sorted(name for name, op in OPERATIONS.items() if op.touched is None)
    assert not missing, (
        f"operations without touched= (the files and bytes the history records): {missing}"
    )


@pytest.mark.parametrize("status", list(Status))
def test_a_record_is_one_row_of_the_schema(status):
    record = OperationRecord(start_ms=0, end_ms=1, table="t", operation="vacuum", status=status)
    table = record.to_arrow()
    assert table.schema == history_module.SCHEMA and table.num_rows == 1
    assert table.column("status")[0].as_py() == status.value
