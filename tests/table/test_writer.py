"""Tables written by delta-ops' Arrow writer read back identically in both peers."""

from __future__ import annotations

import datetime as dt
import json

import pyarrow as pa
import pytest

from delta_ops.errors import DeltaOpsError
from delta_ops.table.snapshot import load_snapshot
from delta_ops.table.writer import write_arrow
from tests.support import deltalake_rows, duckdb_rows


def batch(start: int, n: int, day: str) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(start, start + n), pa.int64()),
            "name": pa.array([f"n{i}" if i % 4 else None for i in range(start, start + n)]),
            "ts": pa.array(
                [
                    dt.datetime(2024, 1, 1, tzinfo=dt.UTC) + dt.timedelta(minutes=i)
                    for i in range(n)
                ],
                pa.timestamp("us", tz="UTC"),
            ),
            "day": pa.array([day] * n),
        }
    )


def _ids(rows):
    return sorted(r["id"] for r in rows)


def test_append_partitioned_then_overwrite(tmp_path):
    table = tmp_path / "t"
    write_arrow(table, batch(0, 10, "2024-01-01"), partition_by=["day"])
    write_arrow(
        table,
        pa.concat_tables([batch(10, 5, "2024-01-02"), batch(15, 5, "2024-01-03")]),
        partition_by=["day"],
    )
    snapshot = load_snapshot(table)
    assert snapshot.version == 1 and snapshot.num_files == 3
    assert snapshot.num_records == 20
    for reader in (deltalake_rows, duckdb_rows):
        rows = reader(table)
        assert _ids(rows) == list(range(20))
        assert {r["day"] for r in rows} == {"2024-01-01", "2024-01-02", "2024-01-03"}
    write_arrow(table, batch(100, 3, "2024-02-01"), mode="overwrite", partition_by=["day"])
    assert _ids(deltalake_rows(table)) == _ids(duckdb_rows(table)) == [100, 101, 102]
    after = load_snapshot(table)
    assert after.num_files == 1 and after.tombstones.num_rows == 3


def test_stats_come_from_the_footers(tmp_path):
    table = tmp_path / "t"
    write_arrow(table, batch(0, 8, "d"))
    [stats] = load_snapshot(table).files.column("stats").to_pylist()
    parsed = json.loads(stats)
    assert parsed["numRecords"] == 8
    assert parsed["minValues"]["id"] == 0 and parsed["maxValues"]["id"] == 7
    assert parsed["nullCount"]["name"] == 2


def test_row_tracking_table_gets_row_ids(tmp_path):
    table = tmp_path / "t"
    write_arrow(table, batch(0, 5, "d"), configuration={"delta.enableRowTracking": "true"})
    write_arrow(table, batch(5, 7, "d"))
    snapshot = load_snapshot(table)
    rows = sorted(
        snapshot.files.select(["baseRowId", "defaultRowCommitVersion"]).to_pylist(),
        key=lambda r: r["baseRowId"],
    )
    assert rows == [
        {"baseRowId": 0, "defaultRowCommitVersion": 0},
        {"baseRowId": 5, "defaultRowCommitVersion": 1},
    ]
    assert snapshot.row_id_high_water_mark == 11
    assert snapshot.protocol.supports("rowTracking") and snapshot.protocol.supports(
        "domainMetadata"
    )
    assert _ids(deltalake_rows(table)) == list(range(12))


def test_schema_mismatch_is_refused(tmp_path):
    table = tmp_path / "t"
    write_arrow(table, batch(0, 2, "d"))
    with pytest.raises(DeltaOpsError, match="columns the table does not"):
        write_arrow(table, batch(0, 2, "d").append_column("extra", pa.array([1, 2])))
    assert load_snapshot(table).version == 0


def test_timestamp_ntz_column_gets_its_table_feature(tmp_path):
    table = tmp_path / "t"
    data = pa.table(
        {"id": [1, 2], "at": pa.array([dt.datetime(2024, 1, 1), None], pa.timestamp("us"))}
    )
    write_arrow(table, data)
    snapshot = load_snapshot(table)
    assert snapshot.protocol.supports("timestampNtz")
    assert snapshot.protocol.min_reader_version == 3 and snapshot.protocol.min_writer_version == 7
    assert _ids(deltalake_rows(table)) == _ids(duckdb_rows(table)) == [1, 2]


def test_a_commit_that_landed_but_raised_keeps_its_data_files(tmp_path):
    """The commit's PUT is durable but the caller sees an error (a lost response): the clean-up
    of a failed write must not delete files the log now references."""
    import pyarrow as pa

    from delta_ops.table.snapshot import load_snapshot
    from delta_ops.table.writer import write_arrow
    from tests.support import deltalake_rows
    from tests.support.faults import FaultPlan, InjectedCrash, faulty_options, faulty_url

    table = tmp_path / "t"
    write_arrow(table, pa.table({"id": pa.array([1], pa.int64())}))
    counting = FaultPlan()
    probe = tmp_path / "probe"
    write_arrow(probe, pa.table({"id": pa.array([1], pa.int64())}))
    write_arrow(
        faulty_url(probe),
        pa.table({"id": pa.array([2], pa.int64())}),
        storage_options=faulty_options(counting),
    )
    commit_write = next(
        i for i, (_, path) in enumerate(counting.writes, 1) if path.endswith("01.json")
    )
    faults = FaultPlan(crash_on=commit_write, when="after")
    try:
        write_arrow(
            faulty_url(table),
            pa.table({"id": pa.array([2], pa.int64())}),
            storage_options=faulty_options(faults),
        )
    except InjectedCrash:
        pass
    assert faults.crashed and load_snapshot(table).version == 1
    assert sorted(r["id"] for r in deltalake_rows(table)) == [1, 2]  # every file still there
