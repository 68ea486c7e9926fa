"""Version checksums (`N.crc`, issue 30.4): ours equal Delta Spark's on every field it writes,
every commit of ours is followed by one that equals a from-scratch computation, a checksum that
disagrees with the log is reported (inspect, the `checksum` op, Dagster), and a crash between a
commit and its checksum leaves a table every reader reads, which `checksum` then finishes.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from delta_ops import cli
from delta_ops.errors import CorruptLog
from delta_ops.log.actions import file_rows_as_actions
from delta_ops.ops import checksum as checksum_op
from delta_ops.ops.checkpoint import checkpoint
from delta_ops.ops.cleanup import execute_cleanup, plan_cleanup
from delta_ops.ops.compact import execute_compact, plan_compact
from delta_ops.ops.purge import execute_purge, plan_purge
from delta_ops.ops.repair import execute_repair, plan_repair
from delta_ops.ops.restore import execute_restore, plan_restore
from delta_ops.ops.row_tracking import execute_enable_row_tracking, plan_enable_row_tracking
from delta_ops.ops.vacuum import execute_vacuum, plan_vacuum
from delta_ops.service.inspect import summarize
from delta_ops.table import checksum as checksums
from delta_ops.table import transaction as transaction_module
from delta_ops.table.checksum import (
    DEFAULT_FILE_SIZE_BINS,
    ChecksumStatus,
    FileSizeHistogram,
    VersionChecksum,
    check_checksum,
    checksum_of_snapshot,
    deleted_record_counts,
    read_checksum,
    write_checksum,
)
from delta_ops.table.remove_lines import encode_removes
from delta_ops.table.snapshot import load_snapshot
from delta_ops.table.transaction import Transaction
from delta_ops.table.writer import write_arrow
from tests.support import (
    TABLES,
    copy_fixture,
    deltalake_files,
    deltalake_rows,
    duckdb_count,
    duckdb_rows,
    fresh_copy,
    peer_facts,
    readable_fixture_names,
)
from tests.support import log_builder as lb
from tests.support.faults import FaultPlan, InjectedCrash, local_faults

DAY = 86_400_000

#: every checksum Delta Spark wrote in the fixtures; kernel/crc-full is left out: its log is a
#: stub with no file (its checksum disagrees with it, see the alarm tests)
SPARK_CHECKSUMS = sorted(
    (str(path.parent.parent.relative_to(TABLES)), int(path.stem))
    for path in TABLES.glob("*/*/_delta_log/*.crc")
    if path.stem.isdigit() and "crc-full" not in str(path) and "crc-malformed" not in str(path)
)


def _semantic(key: str, value: Any) -> Any:
    """A checksum field as compared: lists of actions as sets, stats as JSON values, feature
    lists as sets."""
    if key == "protocol":
        return {k: sorted(v) if isinstance(v, list) else v for k, v in value.items()}
    if key in ("setTransactions", "domainMetadata"):
        return sorted(json.dumps(v, sort_keys=True) for v in value)
    if key == "allFiles":
        return sorted(
            json.dumps(
                {**f, "stats": json.loads(f["stats"]) if f.get("stats") else None}, sort_keys=True
            )
            for f in value
        )
    return value


def _written(table: Path) -> list[int]:
    return sorted(int(p.stem) for p in (table / "_delta_log").glob("*.crc") if p.stem.isdigit())


def _assert_every_checksum_is_the_replays(table: Path, since: int = 0) -> list[int]:
    """Every `.crc` of a version from `since` on agrees with the replay of its version, and
    carries what a from-scratch computation gives on every field both have (an incremental one
    may leave out the optional lists a from-scratch one has); the versions checked."""
    versions = [v for v in _written(table) if v >= since]
    for version in versions:
        snapshot = load_snapshot(table, version)
        check = check_checksum(snapshot)
        assert check.status is ChecksumStatus.AGREES, (version, check.mismatches)
        written = read_checksum(snapshot.storage, version)
        assert written is not None
        ours, scratch = written.to_data(), checksum_of_snapshot(snapshot).to_data()
        for key in ours:
            assert _semantic(key, ours[key]) == _semantic(key, scratch.get(key)), (version, key)
        assert set(scratch) - set(ours) <= {"allFiles", "setTransactions", "domainMetadata"}
    return versions


# ------------------------------------------------------------------ Delta Spark's checksums
@pytest.mark.parametrize(("table", "version"), SPARK_CHECKSUMS)
def test_ours_equals_delta_sparks_on_every_field_it_writes(table: str, version: int) -> None:
    spark = json.loads((TABLES / table / "_delta_log" / f"{version:020d}.crc").read_text())
    if "histogramOpt" in spark:  # Delta Spark's older name of the field
        spark["fileSizeHistogram"] = spark.pop("histogramOpt")
    ours = checksum_of_snapshot(load_snapshot(TABLES / table, version)).to_data()
    differ = [k for k in spark if _semantic(k, spark[k]) != _semantic(k, ours.get(k))]
    assert differ == []
    # and read back, Delta Spark's checksum agrees with our replay field by field
    check = check_checksum(load_snapshot(TABLES / table, version))
    assert check.status is ChecksumStatus.AGREES, check.mismatches


def test_the_fixtures_cover_what_a_checksum_holds() -> None:
    """The Spark checksums compared above hold every field we write: lists of files, DV counts
    and their histogram, set transactions and domains; and one has an in-commit timestamp."""
    keys: set[str] = set()
    for table, version in [*SPARK_CHECKSUMS, ("kernel/crc-full", 0)]:
        keys |= set(json.loads((TABLES / table / "_delta_log" / f"{version:020d}.crc").read_text()))
    assert {
        "txnId",
        "tableSizeBytes",
        "numFiles",
        "numMetadata",
        "numProtocol",
        "metadata",
        "protocol",
        "setTransactions",
        "domainMetadata",
        "histogramOpt",
        "fileSizeHistogram",
        "numDeletedRecordsOpt",
        "numDeletionVectorsOpt",
        "deletedRecordCountsHistogramOpt",
        "inCommitTimestampOpt",
        "allFiles",
    } <= keys


def test_default_bins_are_delta_sparks() -> None:
    spark = json.loads((TABLES / "kernel/crc-full/_delta_log" / f"{0:020d}.crc").read_text())
    assert list(DEFAULT_FILE_SIZE_BINS) == spark["fileSizeHistogram"]["sortedBinBoundaries"]
    assert len(DEFAULT_FILE_SIZE_BINS) == 95


def test_histogram_bins_start_inclusive_and_skip_negative_sizes() -> None:
    sizes = np.array([0, 8191, 8192, 8193, 256 * 1024**3, 300 * 1024**3, -1], np.int64)
    h = FileSizeHistogram.of(sizes)
    assert h.file_counts[:3] == (2, 2, 0) and h.total_bytes[:2] == (8191, 16385)
    assert h.file_counts[-1] == 2 and h.total_bytes[-1] == 556 * 1024**3
    assert sum(h.file_counts) == 6  # the negative size is in no bin, as in Delta Spark
    assert h.combined(h, -1).file_counts == (0,) * 95


def test_deleted_record_counts_use_delta_sparks_ten_bins() -> None:
    cards = np.array([0, 1, 9, 10, 99, 100, 2**31 - 2, 2**31 - 1, 2**63 - 1], np.int64)
    assert deleted_record_counts(cards) == (1, 2, 2, 1, 0, 0, 0, 0, 1, 2)


def test_the_json_round_trips_and_the_old_histogram_name_reads() -> None:
    snapshot = load_snapshot(TABLES / "delta-rs/table_with_deletion_logs", 20)
    ours = checksum_of_snapshot(snapshot)
    assert VersionChecksum.from_json(ours.to_json(), 20) == ours
    spark = read_checksum(snapshot.storage, 20)
    assert spark is not None and spark.file_size_histogram == ours.file_size_histogram


def test_the_histogram_is_written_under_the_protocols_name_and_read_under_both(
    tmp_path: Path,
) -> None:
    """Issue 51.5: `fileSizeHistogram` is the protocol's name and what Delta Spark writes since
    4.2 (`histogramFollowsProtocol`); `histogramOpt`, its older name, is read too (Delta Spark
    reads both, `@JsonAlias`), also beside a null `fileSizeHistogram`, and checked as such."""
    table = tmp_path / "t"
    write_arrow(table, pa.table({"id": [1, 2]}))
    path = table / "_delta_log" / f"{0:020d}.crc"
    ours = json.loads(path.read_text())
    assert "fileSizeHistogram" in ours and "histogramOpt" not in ours
    histogram = ours["fileSizeHistogram"]
    for older in (
        {"histogramOpt": histogram},
        {"fileSizeHistogram": None, "histogramOpt": histogram},
    ):
        fields = {k: v for k, v in ours.items() if k != "fileSizeHistogram"}
        path.write_text(json.dumps({**fields, **older}))
        recorded = read_checksum(load_snapshot(table).storage, 0)
        assert recorded is not None and recorded.file_size_histogram is not None
        assert recorded.file_size_histogram.to_data() == histogram
        assert check_checksum(load_snapshot(table)).status is ChecksumStatus.AGREES
    wrong = {**histogram, "fileCounts": [0] * len(histogram["fileCounts"])}
    path.write_text(json.dumps({**fields, "histogramOpt": wrong}))
    check = check_checksum(load_snapshot(table))
    assert check.status is ChecksumStatus.DISAGREES
    assert check.mismatches[0].startswith("fileSizeHistogram.fileCounts: from 0 B")


def test_small_tables_list_their_files_and_big_ones_do_not(tmp_path: Path) -> None:
    table = tmp_path / "t"
    adds = [lb.add(f"f{i:03d}.parquet", size=100 + i) for i in range(51)]
    lb.write_commit(table, 0, [lb.protocol(), lb.metadata(), *adds[:50]])
    assert len(checksum_of_snapshot(load_snapshot(table)).all_files or ()) == 50
    lb.write_commit(table, 1, [adds[50]])
    big = checksum_of_snapshot(load_snapshot(table))
    assert big.all_files is None and big.num_files == 51
    assert big.table_size_bytes == sum(100 + i for i in range(51))


# ------------------------------------------------------------------ after our commits
def test_every_commit_of_ours_is_followed_by_its_checksum(tmp_path: Path) -> None:
    table = tmp_path / "t"
    for i in range(4):
        write_arrow(table, pa.table({"id": [i, i + 10], "p": [i % 2, i % 2]}), partition_by=["p"])
    assert _written(table) == [0, 1, 2, 3]
    assert _assert_every_checksum_is_the_replays(table) == [0, 1, 2, 3]
    first = read_checksum(load_snapshot(table).storage, 0)
    assert first is not None and first.all_files is not None and first.txn_id
    info = json.loads((table / "_delta_log" / f"{0:020d}.json").read_text().splitlines()[0])
    assert first.txn_id == info["commitInfo"]["txnId"]


def test_in_commit_timestamps_are_recorded_and_peers_read_the_table(tmp_path: Path) -> None:
    table = tmp_path / "t"
    write_arrow(
        table, pa.table({"id": [1]}), configuration={"delta.enableInCommitTimestamps": "true"}
    )
    write_arrow(table, pa.table({"id": [2]}))
    for version in (0, 1):
        commit = (table / "_delta_log" / f"{version:020d}.json").read_text().splitlines()[0]
        recorded = read_checksum(load_snapshot(table).storage, version)
        assert recorded is not None
        assert recorded.in_commit_timestamp == json.loads(commit)["commitInfo"]["inCommitTimestamp"]
    assert _assert_every_checksum_is_the_replays(table) == [0, 1]
    _tamper(table, 1, in_commit_timestamp=5)
    assert check_checksum(load_snapshot(table)).mismatches[0].startswith("inCommitTimestampOpt")
    # delta-kernel (DuckDB) reads the protocol and metadata from a checksum: it reads ours
    (table / "_delta_log" / f"{1:020d}.crc").unlink()
    write_arrow(table, pa.table({"id": [3]}))
    assert sorted(r["id"] for r in duckdb_rows(table)) == [1, 2, 3]


def test_set_transactions_and_domains_follow_the_commits(tmp_path: Path) -> None:
    table = tmp_path / "t"
    write_arrow(table, pa.table({"id": [1]}))
    for version, app in enumerate(["stream-a", "stream-b", "stream-a"], start=1):
        txn = Transaction(load_snapshot(table), operation="STREAMING UPDATE")
        txn.add_action({"txn": {"appId": app, "version": version, "lastUpdated": version}})
        txn.add_action(lb.add(f"s{version}.parquet", size=version))
        txn.commit()
    recorded = read_checksum(load_snapshot(table).storage, 3)
    assert recorded is not None and recorded.set_transactions == (
        {"appId": "stream-a", "version": 3, "lastUpdated": 3},
        {"appId": "stream-b", "version": 2, "lastUpdated": 2},
    )
    assert _assert_every_checksum_is_the_replays(table) == [0, 1, 2, 3]


def test_a_commit_builds_on_the_previous_checksum_without_loading_the_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = tmp_path / "t"
    write_arrow(table, pa.table({"id": [1, 2]}))

    def no_load(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("derived from N-1's checksum, not from a load")

    monkeypatch.setattr(checksums, "load_snapshot", no_load)
    # a stale snapshot: the transaction's is version 0, version 1 landed meanwhile
    stale = load_snapshot(table)
    write_arrow(table, pa.table({"id": [3]}))
    txn = Transaction(stale, operation="WRITE")
    txn.add_action(lb.add("x.parquet", size=7))
    assert txn.commit().version == 2
    monkeypatch.undo()
    assert _assert_every_checksum_is_the_replays(table) == [0, 1, 2]


def test_without_the_previous_checksum_a_stale_commit_loads_the_table(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger="delta_ops.table.checksum")
    table = tmp_path / "t"
    write_arrow(table, pa.table({"id": [1, 2]}))
    stale = load_snapshot(table)
    write_arrow(table, pa.table({"id": [3]}))
    (table / "_delta_log" / f"{1:020d}.crc").unlink()  # an engine that writes none
    txn = Transaction(stale, operation="WRITE")
    txn.add_action(lb.add("x.parquet", size=7))
    txn.commit()
    assert _assert_every_checksum_is_the_replays(table) == [0, 2]
    assert _full_loads(caplog) == [
        f"{table}: checksum of version 2 from a full load: version 1 has no usable checksum"
    ]


def _commit_one_file(table: Path, name: str = "x.parquet") -> Any:
    txn = Transaction(load_snapshot(table), operation="WRITE")
    txn.add_action(lb.add(name, size=7))
    return txn.commit()


def _alarms(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "corruption alarm" in r.getMessage()]


@pytest.mark.parametrize(
    ("tampered", "field"),
    [
        ({"num_files": 5}, "numFiles"),
        ({"file_size_histogram": FileSizeHistogram.of(np.array([1, 2, 3]))}, "fileSizeHistogram"),
        ({"num_deleted_records": 4, "num_deletion_vectors": 1}, "numDeletedRecordsOpt"),
        (
            {"domain_metadata": ({"domain": "x", "configuration": "{}", "removed": False},)},
            "domain",
        ),
        ({"set_transactions": ({"appId": "a", "version": 1},)}, "setTransactions"),
    ],
)
def test_a_previous_checksum_that_disagrees_is_an_alarm_and_not_built_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, tampered: dict[str, Any], field: str
) -> None:
    """Issue 51.5: before N.crc is derived from N-1's, N-1's is checked against the
    transaction's snapshot of N-1 on every field it has (not only the counts: a wrong histogram
    would otherwise carry on into N's). One that disagrees is a corruption alarm: the commit
    stands, N-1's checksum is kept, and N gets none (neither built on the suspect one nor
    certifying the log's state over it); the alarm is logged and in the commit's result."""
    table = tmp_path / "t"
    write_arrow(table, pa.table({"id": [1, 2]}))
    _tamper(table, 0, **tampered)
    before = (table / "_delta_log" / f"{0:020d}.crc").read_bytes()
    result = _commit_one_file(table)
    assert result.version == 1 and field in result.checksum_alarm
    assert result.checksum_alarm.startswith(f"{0:020d}.crc: this checksum disagrees with the log")
    assert (
        _written(table) == [0] and (table / "_delta_log" / f"{0:020d}.crc").read_bytes() == before
    )
    # (every library log line starts with its table)
    assert [a.split(": ")[1] for a in _alarms(caplog)] == [
        "committed version 1 without its checksum"
    ]
    assert load_snapshot(table).num_files == 2  # the commit stands
    # the next commit builds on the log (version 1 has no checksum) and writes its own
    assert _commit_one_file(table, "y.parquet").checksum_alarm == ""
    assert _assert_every_checksum_is_the_replays(table, since=1) == [2]


def test_a_previous_checksum_whose_listed_files_are_not_the_logs_is_an_alarm(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    table = tmp_path / "t"
    write_arrow(table, pa.table({"id": [1, 2]}))
    recorded = read_checksum(load_snapshot(table).storage, 0)
    assert recorded is not None and recorded.all_files
    moved = ({**recorded.all_files[0], "modificationTime": 1},)
    _tamper(table, 0, all_files=moved)
    assert "allFiles" in _commit_one_file(table).checksum_alarm
    assert _written(table) == [0] and len(_alarms(caplog)) == 1


def test_a_previous_checksum_that_agrees_raises_no_alarm(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Every field checked, the in-commit timestamp too."""
    table = tmp_path / "t"
    ict = {"delta.enableInCommitTimestamps": "true"}
    write_arrow(table, pa.table({"id": [1, 2]}), configuration=ict)
    assert _commit_one_file(table).checksum_alarm == ""
    assert _alarms(caplog) == [] and _written(table) == [0, 1]


def _full_loads(caplog: pytest.LogCaptureFixture) -> list[str]:
    """Checksums computed from a load of the table rather than derived from N-1's."""
    return [r.getMessage() for r in caplog.records if "from a full load" in r.getMessage()]


def test_re_added_files_are_not_counted_twice(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A row-tracking backfill re-adds live files (no remove): the count stays, its checksums
    agree, also for batches committed after a snapshot that is older than N-1."""
    caplog.set_level("INFO", logger="delta_ops.table.checksum")
    table = tmp_path / "t"
    for i in range(5):
        write_arrow(table, pa.table({"id": [i]}))
    execute_enable_row_tracking(plan_enable_row_tracking(load_snapshot(table), batch_files=2))
    versions = _assert_every_checksum_is_the_replays(table, since=5)
    assert len(versions) >= 4  # the protocol, three backfill batches, the property
    last = read_checksum(load_snapshot(table).storage, versions[-1])
    assert last is not None and last.num_files == 5
    assert any(d["domain"] == "delta.rowTracking" for d in last.domain_metadata or ())
    assert _full_loads(caplog) == []


@pytest.fixture
def dv_table(tmp_path: Path) -> Path:
    """Delta Spark's partitioned deletion-vector table (no checksums of its own)."""
    return fresh_copy("delta-spark/dv-partitioned-with-checkpoint", tmp_path)


def test_checksums_after_every_op_match_the_replay(
    dv_table: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Purge, compaction, a checkpoint, restore, repair, vacuum and cleanup on Delta Spark's
    deletion-vector table: every checksum they leave equals a from-scratch computation (and
    was derived from the one before, never from a load), and the peers read the table."""
    caplog.set_level("INFO", logger="delta_ops.table.checksum")
    table = dv_table
    start = load_snapshot(table).version
    execute_purge(plan_purge(load_snapshot(table)))
    purged = read_checksum(load_snapshot(table).storage, start + 1)
    assert purged is not None and purged.num_deletion_vectors == 0
    execute_compact(plan_compact(load_snapshot(table)))
    checkpoint(str(table))
    execute_restore(plan_restore(load_snapshot(table), version=start))
    restored = read_checksum(load_snapshot(table).storage, load_snapshot(table).version)
    then = checksum_of_snapshot(load_snapshot(table, start))
    assert restored is not None and restored.num_deletion_vectors == then.num_deletion_vectors
    assert (restored.num_files, restored.num_deleted_records) == (
        then.num_files,
        then.num_deleted_records,
    )
    snapshot = load_snapshot(table)
    lost = snapshot.file_index.column("path")[0].as_py()
    (table / lost).unlink()
    execute_repair(plan_repair(load_snapshot(table), force=True))
    now = int(time.time() * 1000)
    execute_vacuum(plan_vacuum(load_snapshot(table), now, retention_ms=0, force=True))
    versions = _assert_every_checksum_is_the_replays(table, since=start + 1)
    assert versions == list(range(start + 1, load_snapshot(table).version + 1))
    assert _full_loads(caplog) == []
    assert deltalake_rows(table) == duckdb_rows(table)
    execute_cleanup(plan_cleanup(load_snapshot(table), now + 40 * DAY))
    assert deltalake_rows(table) == duckdb_rows(table)


def _record_checksum_calls(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """What the transactions hand the checksum after each commit (their calls still run)."""
    calls: list[dict[str, Any]] = []
    real = transaction_module.write_checksum_after_commit

    def recording(*args: Any, **kwargs: Any) -> Any:
        calls.append({"args": args, **kwargs})
        return real(*args, **kwargs)

    monkeypatch.setattr(transaction_module, "write_checksum_after_commit", recording)
    return calls


def test_encoded_removes_are_not_parsed_back_and_change_nothing(
    dv_table: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rewrite's removes (with deletion vectors: purge; without: compaction) reach the
    checksum as the keys of their files, not parsed back from the commit: what it derives is
    what parsing the whole commit gives."""
    calls = _record_checksum_calls(monkeypatch)
    start = load_snapshot(dv_table).version
    execute_purge(plan_purge(load_snapshot(dv_table)))
    execute_compact(plan_compact(load_snapshot(dv_table)))
    assert len(calls) == 2
    for call in calls:
        storage, version, snapshot = call["args"]
        known, body = call["known_removes"], call["commit_bytes"]
        assert known is not None
        removed = body[known.start : known.end].decode().splitlines()
        assert removed and all(line.startswith('{"remove":') for line in removed)
        assert sum(k.num_rows for k in known.keys) == len(removed)
        assert checksums._change_with_known_removes(version, body, known) is not None
        common = {"txn_id": call["txn_id"], "commit_bytes": body}
        assert checksums.checksum_after_commit(
            storage, version, snapshot, known_removes=known, **common
        ) == checksums.checksum_after_commit(storage, version, snapshot, **common)
    assert any(
        k.column("deletionVector").null_count < k.num_rows for k in calls[0]["known_removes"].keys
    )
    assert _assert_every_checksum_is_the_replays(dv_table, since=start + 1) == [
        start + 1,
        start + 2,
    ]


def test_encoded_removes_of_files_the_commit_adds_again_are_parsed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A commit that removes a file through encoded lines and adds the same path again (its
    own reconciliation decides what stays): the checksum parses the whole commit."""
    table = tmp_path / "t"
    for i in range(3):
        write_arrow(table, pa.table({"id": [i]}))
    calls = _record_checksum_calls(monkeypatch)
    snapshot = load_snapshot(table)
    files = snapshot.files
    txn = Transaction(snapshot, operation="OPTIMIZE")
    txn.add_encoded_removes(encode_removes(files, deletion_timestamp=1, data_change=False))
    again = file_rows_as_actions(files.slice(0, 1), columns=("path", "partitionValues", "size"))
    txn.add_action({"add": {**again[0], "modificationTime": 1, "dataChange": False}})
    txn.commit()
    (call,) = calls
    known = call["known_removes"]
    assert known is not None
    assert (
        checksums._change_with_known_removes(call["args"][1], call["commit_bytes"], known) is None
    )
    assert _assert_every_checksum_is_the_replays(table, since=3) == [3]
    assert read_checksum(load_snapshot(table).storage, 3).num_files == 1


def test_a_commit_after_delta_sparks_checksums_builds_on_them(tmp_path: Path) -> None:
    table = copy_fixture("delta-rs/table_with_deletion_logs", tmp_path)
    checkpoint(str(table))  # no commit: nothing new
    txn = Transaction(load_snapshot(table), operation="SET TBLPROPERTIES")
    metadata = load_snapshot(table).metadata.to_action()
    metadata["configuration"] = {
        **metadata["configuration"],
        "delta.logRetentionDuration": "interval 60 days",
    }
    txn.add_action({"metaData": metadata})
    version = txn.commit().version
    assert _assert_every_checksum_is_the_replays(table, since=version) == [version]
    ours = read_checksum(load_snapshot(table).storage, version)
    assert ours is not None and ours.all_files is not None and ours.num_deleted_records == 2


# kernel/crc-full's checksum disagrees with its stub log (10 files it does not have): the
# alarm tests cover it
@pytest.mark.parametrize("name", [n for n in readable_fixture_names() if n != "kernel/crc-full"])
def test_the_checksum_op_on_every_fixture(name: str, tmp_path: Path) -> None:
    """On every table delta-rs reads: the op writes the latest version's checksum (or checks
    Delta Spark's), it agrees with the replay, and both peers read the table as before."""
    table = copy_fixture(name, tmp_path)
    fact = peer_facts()[name]
    plan = checksum_op.plan_checksum(load_snapshot(table))
    assert plan.status in (ChecksumStatus.MISSING, ChecksumStatus.AGREES)
    result = checksum_op.execute_checksum(plan)
    assert result.written == (plan.status is ChecksumStatus.MISSING)
    assert check_checksum(load_snapshot(table)).status is ChecksumStatus.AGREES
    version, files = deltalake_files(table)
    assert (version, files) == (fact["rs_version"], sorted(fact["rs_files"]))
    if "kernel_rows" in fact:
        assert duckdb_count(table) == fact["kernel_rows"]


# ------------------------------------------------------------------ the corruption alarm
def _tamper(table: Path, version: int, **changes: Any) -> None:
    path = table / "_delta_log" / f"{version:020d}.crc"
    recorded = VersionChecksum.from_json(path.read_bytes(), version)
    path.write_bytes(replace(recorded, **changes).to_json())


def test_spark_checksum_of_a_stub_log_disagrees() -> None:
    """kernel/crc-full: Delta Spark's checksum lists ten files its log (a stub) lacks."""
    check = check_checksum(load_snapshot(TABLES / "kernel/crc-full"))
    assert check.status is ChecksumStatus.DISAGREES
    fields = {m.split(":")[0] for m in check.mismatches}
    assert {"tableSizeBytes", "numFiles", "setTransactions", "domainMetadata"} <= fields
    assert "metadata" not in fields and "protocol" not in fields
    assert "inCommitTimestampOpt" not in fields  # the commit's in-commit timestamp matches


def test_inspect_reports_a_checksum_that_disagrees(tmp_path: Path, capsys: Any) -> None:
    table = tmp_path / "t"
    write_arrow(table, pa.table({"id": [1, 2]}))
    write_arrow(table, pa.table({"id": [3]}))
    _tamper(table, 1, table_size_bytes=1, num_deleted_records=4)
    summary = summarize(load_snapshot(table))
    assert summary.checksum is not None and summary.checksum["status"] == "disagrees"
    assert any("tableSizeBytes: the checksum says 1" in m for m in summary.checksum["mismatches"])
    alarm = [a for a in summary.advice if "checksum" in a["problem"]]
    assert alarm and "corruption" in alarm[0]["problem"]
    assert alarm[0]["command"].startswith("delta-ops checksum ")
    assert "numDeletedRecordsOpt" in alarm[0]["problem"]
    assert cli.main(["inspect", str(table)]) == 0
    assert "DISAGREES with the log" in capsys.readouterr().out
    # an older version's checksum agrees
    assert summarize(load_snapshot(table, 0)).checksum["status"] == "agrees"  # type: ignore[index]


def test_inspect_reports_an_unreadable_checksum(tmp_path: Path) -> None:
    table = tmp_path / "t"
    write_arrow(table, pa.table({"id": [1]}))
    malformed = TABLES / "kernel/crc-malformed/_delta_log" / f"{0:020d}.crc"
    shutil.copy(malformed, table / "_delta_log" / f"{0:020d}.crc")
    check = check_checksum(load_snapshot(table))
    assert check.status is ChecksumStatus.UNREADABLE and check.corrupt
    assert summarize(load_snapshot(table)).checksum["status"] == "unreadable"  # type: ignore[index]
    # the next commit does not build on it: an alarm, and no checksum of its own
    result = _commit_one_file(table)
    assert result.checksum_alarm.startswith(f"{0:020d}.crc: this checksum does not parse")
    assert _written(table) == [0]
    # also from a snapshot older than N-1 (whose state it cannot check), it is not built on
    stale = load_snapshot(table, 0)
    shutil.copy(malformed, table / "_delta_log" / f"{1:020d}.crc")
    txn = Transaction(stale, operation="WRITE")
    txn.add_action(lb.add("y.parquet", size=7))
    assert "does not parse" in txn.commit().checksum_alarm and _written(table) == [0, 1]
    # the commit after builds on the log (version 2 has no checksum) and writes its own
    assert _commit_one_file(table, "z.parquet").checksum_alarm == ""
    assert _written(table) == [0, 1, 3]
    assert _assert_every_checksum_is_the_replays(table, since=3) == [3]


def test_the_checksum_op_writes_a_missing_one_then_checks_it(tmp_path: Path, capsys: Any) -> None:
    table = copy_fixture("delta-rs/simple_table", tmp_path)  # delta-rs wrote no checksum
    assert cli.main(["checksum", str(table), "--dry-run"]) == 0
    assert "would write 00000000000000000004.crc" in capsys.readouterr().out
    assert _written(table) == []
    assert cli.main(["checksum", str(table), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["written"] and result["status"] == "missing" and result["num_files"] == 5
    assert _assert_every_checksum_is_the_replays(table) == [4]
    assert cli.main(["checksum", str(table)]) == 0
    assert "agrees with the log" in capsys.readouterr().out
    assert cli.main(["checksum", str(table), "--version", "2"]) == 0
    assert _written(table) == [2, 4]
    assert deltalake_rows(table) == duckdb_rows(table)


def test_the_checksum_op_fails_on_one_that_disagrees_and_keeps_it(
    tmp_path: Path, capsys: Any
) -> None:
    table = copy_fixture("kernel/crc-full", tmp_path)
    before = (table / "_delta_log" / f"{0:020d}.crc").read_bytes()
    plan = checksum_op.plan_checksum(load_snapshot(table))
    assert plan.nothing_to_do and plan.status is ChecksumStatus.DISAGREES
    assert "numFiles: the checksum says 10, the replay 0" in plan.idle_reason
    with pytest.raises(CorruptLog, match="corruption alarm"):
        checksum_op.execute_checksum(plan)
    assert cli.main(["checksum", str(table)]) == 1
    assert "disagrees with the log" in capsys.readouterr().err
    assert (table / "_delta_log" / f"{0:020d}.crc").read_bytes() == before  # never overwritten


def test_a_checksum_is_never_overwritten(tmp_path: Path) -> None:
    table = tmp_path / "t"
    write_arrow(table, pa.table({"id": [1]}))
    snapshot = load_snapshot(table)
    path = table / "_delta_log" / f"{0:020d}.crc"
    before = path.read_bytes()
    assert not write_checksum(
        snapshot.storage, replace(checksum_of_snapshot(snapshot), num_files=9)
    )
    assert path.read_bytes() == before


# ------------------------------------------------------------------ crashes and failures
def test_a_failed_checksum_write_never_fails_the_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = tmp_path / "t"
    write_arrow(table, pa.table({"id": [1]}))

    def refuse(*args: Any, **kwargs: Any) -> bool:
        raise OSError("the store refused the write")

    monkeypatch.setattr(checksums, "write_checksum", refuse)
    assert write_arrow(table, pa.table({"id": [2]})).version == 1
    monkeypatch.undo()
    assert _written(table) == [0]
    assert sorted(r["id"] for r in deltalake_rows(table)) == [1, 2]
    # the next commit has no N-1 checksum: it derives its own from the snapshot it read
    write_arrow(table, pa.table({"id": [3]}))
    assert _assert_every_checksum_is_the_replays(table) == [0, 2]


def _crc_writes(faults: FaultPlan) -> list[int]:
    """The write points of Delta checksums (`N.crc`), not of Hadoop's `.N.json.crc` sidecars,
    which a winning local commit drops (delta_ops.storage.local_backend)."""
    return [
        k
        for k, (_, path) in enumerate(faults.writes, start=1)
        if re.fullmatch(r"\d{20}\.crc", os.path.basename(path))
    ]


@pytest.mark.parametrize("when", ["before", "after", "torn"])
def test_a_crash_between_a_commit_and_its_checksum(tmp_path: Path, when: str) -> None:
    """A process killed at the checksum's write: the commit stands, the table reads in both
    peers, and `checksum` finishes the work."""
    pristine = tmp_path / "pristine"
    write_arrow(pristine, pa.table({"id": [1, 2]}))
    counting = FaultPlan()
    reference = tmp_path / "reference"
    shutil.copytree(pristine, reference)
    with local_faults(counting):
        write_arrow(reference, pa.table({"id": [3]}))
    points = _crc_writes(counting)
    assert points, counting.writes
    for k in points:
        table = tmp_path / f"k{k}"
        shutil.copytree(pristine, table)
        faults = FaultPlan(crash_on=k, when=when, dies=True)
        with local_faults(faults):
            try:
                write_arrow(table, pa.table({"id": [3]}))  # the crash is swallowed: best-effort
            except InjectedCrash:
                pass
        assert load_snapshot(table).version == 1
        assert sorted(r["id"] for r in deltalake_rows(table)) == [1, 2, 3]
        assert sorted(r["id"] for r in duckdb_rows(table)) == [1, 2, 3]
        if when != "after":
            assert _written(table) == [0]
        assert cli.main(["checksum", str(table)]) == 0
        assert _assert_every_checksum_is_the_replays(table) == [0, 1]


def test_rows_looked_up_by_path_are_the_rows_of_their_keys_where_no_file_has_a_dv(tmp_path):
    """Where neither the commit's keys nor the live rows at its paths have a deletion vector,
    the rows at those paths are the rows of its keys (what the checksum then takes without
    building keys); a deletion vector anywhere sends the lookup by key, which can differ."""
    from delta_ops.log.state_stream import file_keys
    from tests.support.rewrite_support import dv_table, many_small_appends

    def by_key(live, paths, ids):
        near = checksums._rows_at_paths(live, paths)
        touched = file_keys(paths, ids)
        return near.filter(pa.compute.is_in(checksums._keys(near), value_set=touched))

    plain = tmp_path / "plain"
    many_small_appends(plain)
    live = load_snapshot(plain).file_index
    paths = live.column("path").combine_chunks().slice(0, 5)
    ids = pa.nulls(5, pa.string())
    near = checksums._rows_at_paths(live, paths)
    assert checksums._no_deletion_vectors(ids, near)
    assert near.num_rows == 5 and near.equals(by_key(live, paths, ids))

    live = load_snapshot(dv_table(tmp_path)).file_index  # both files have a DV
    paths = live.column("path").combine_chunks()
    near = checksums._rows_at_paths(live, paths)
    assert not checksums._no_deletion_vectors(pa.nulls(2, pa.string()), near)
    # a key naming these paths without their DVs matches no live row
    assert by_key(live, paths, pa.nulls(2, pa.string())).num_rows == 0 < near.num_rows
