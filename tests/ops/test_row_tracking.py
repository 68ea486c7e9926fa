"""Acceptance tests for enabling row tracking (issue 5) and reading stable row ids.

Every check reads the result back independently of the code under test where it can: raw
commit JSON, pyarrow on the parquet footers, and the two peers (`deltalake`, DuckDB's delta
extension) for files and rows.
"""

from __future__ import annotations

import json
import math
import multiprocessing
import os
import random
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from delta_ops.cli import main as cli_main
from delta_ops.errors import DeltaOpsError
from delta_ops.ops import row_tracking as rt
from delta_ops.ops.checkpoint import checkpoint
from delta_ops.ops.cleanup import execute_cleanup, plan_cleanup
from delta_ops.ops.row_tracking import (
    enable_row_tracking,
    execute_enable_row_tracking,
    plan_enable_row_tracking,
    row_ids,
)
from delta_ops.ops.vacuum import execute_vacuum, plan_vacuum
from delta_ops.table.snapshot import load_snapshot
from delta_ops.table.transaction import Transaction
from delta_ops.table.writer import write_arrow
from tests.support import REPO, _row_key, copy_fixture, duckdb_connection, readable_fixture_names
from tests.support import log_builder as lb
from tests.support.faults import FaultPlan, InjectedCrash, faulty_options, faulty_url

UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
ROW_ID_NAME = re.compile(rf"_row-id-col-{UUID}")
COMMIT_VERSION_NAME = re.compile(rf"_row-commit-version-col-{UUID}")
BACKFILL = "ROW TRACKING BACKFILL"
DAY_MS = 86_400_000


# ----------------------------------------------------------------------------------- helpers
@pytest.fixture(scope="module")
def duck():
    con = duckdb_connection()
    yield con
    con.close()


def duck_rows(con, path: Path | str) -> list[dict]:
    rows = con.sql(f"SELECT * FROM delta_scan('{path}')").to_arrow_table().to_pylist()
    return sorted(rows, key=_row_key)


def rs_rows(path: Path | str) -> list[dict]:
    from deltalake import DeltaTable

    table = DeltaTable(str(path))
    rows = pa.RecordBatchReader.from_stream(table.scan()).read_all().to_pylist()
    return sorted(rows, key=_row_key)


def rs_rows_if_supported(path: Path | str) -> list[dict] | None:
    """delta-rs rows, or None when delta-rs refuses the table's reader features (vacuumProtocolCheck)."""
    from deltalake.exceptions import DeltaError, DeltaProtocolError

    try:
        return rs_rows(path)
    except (DeltaError, DeltaProtocolError) as exc:
        if (
            "unsupported table features" in str(exc).lower()
            or "not yet supported" in str(exc).lower()
        ):
            return None
        raise


def rs_adds(path: Path | str) -> tuple[int, dict[str, dict]]:
    """(version, path -> flattened add as delta-rs reports it: size, mtime, stats, partitions)."""
    from deltalake import DeltaTable

    table = DeltaTable(str(path))
    adds = pa.table(table.get_add_actions(flatten=True)).to_pylist()
    return table.version(), {a["path"]: a for a in adds}


def log_listing(path: Path) -> list[tuple[str, int]]:
    """Every file under _delta_log (recursively) with its size."""
    out = []
    for root, _, files in os.walk(path / "_delta_log"):
        for name in files:
            full = os.path.join(root, name)
            out.append((os.path.relpath(full, path), os.path.getsize(full)))
    return sorted(out)


def commit_actions(path: Path, version: int) -> list[dict]:
    text = (path / "_delta_log" / f"{version:020d}.json").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def operation(actions: list[dict]) -> str | None:
    return next((a["commitInfo"].get("operation") for a in actions if "commitInfo" in a), None)


def stats_of(stats: str | None) -> dict:
    return json.loads(stats) if stats else {}


def footer_rows(storage, path_in_log: str) -> int:
    return pq.ParquetFile(storage.table_path(path_in_log)).metadata.num_rows


def pairs(value) -> dict:
    if value is None:
        return {}
    return dict(value.items()) if isinstance(value, dict) else dict(value)


def normalized(add: dict) -> dict:
    """An add (snapshot row or raw JSON) in comparable form, without row-tracking fields."""
    dv = add.get("deletionVector")
    return {
        "partitionValues": pairs(add.get("partitionValues")),
        "size": add.get("size"),
        "modificationTime": add.get("modificationTime"),
        "tags": pairs(add.get("tags")),
        "deletionVector": {k: v for k, v in dv.items() if v is not None and k != "maxRowIndex"}
        if dv
        else None,
    }


def implied_writer_features(reader: int, writer: int) -> set[str]:
    """The legacy features a (reader, writer) protocol without feature lists implies."""
    out: set[str] = set()
    if writer >= 7:  # feature lists: nothing implied
        return out
    if writer >= 2:
        out |= {"appendOnly", "invariants"}
    if writer >= 3:
        out.add("checkConstraints")
    if writer >= 4:
        out |= {"changeDataFeed", "generatedColumns"}
    if writer >= 5 and reader >= 2:
        out.add("columnMapping")
    if writer >= 6:
        out.add("identityColumns")
    return out


def column_names(schema_string: str | None) -> set[str]:
    names = set()
    for f in json.loads(schema_string or '{"fields":[]}')["fields"]:
        names.add(f["name"].lower())
        physical = (f.get("metadata") or {}).get("delta.columnMapping.physicalName")
        if physical:
            names.add(physical.lower())
    return names


@dataclass
class Before:
    """A table's state before enabling, as we and the peers see it."""

    path: Path
    version: int
    protocol: dict
    metadata: dict
    files: dict[str, dict]  # path -> snapshot row
    listing: list[tuple[str, int]]
    rs_files: dict[str, dict]
    data_present: bool
    rs: list[dict] | None
    duck: list[dict] | None


def capture(path: Path, con) -> Before:
    snapshot = load_snapshot(path)
    files = {f["path"]: f for f in snapshot.files.to_pylist()}
    present = all(os.path.exists(snapshot.storage.table_path(p)) for p in files)
    _, adds = rs_adds(path)
    assert set(adds) == set(files), "our reader and delta-rs disagree on the live files"
    return Before(
        path=path,
        version=snapshot.version,
        protocol=snapshot.protocol.to_action(),
        metadata=snapshot.metadata.to_action(),
        files=files,
        listing=log_listing(path),
        rs_files=adds,
        data_present=present,
        rs=rs_rows_if_supported(path) if present else None,
        duck=duck_rows(con, path) if present else None,
    )


def ranges_of(snapshot) -> list[tuple[str, int, int]]:
    """(path, baseRowId, numRecords) of every live file; numRecords from the footer if absent."""
    out = []
    for f in snapshot.files.to_pylist():
        n = stats_of(f["stats"]).get("numRecords")
        if n is None:
            n = footer_rows(snapshot.storage, f["path"])
        out.append((f["path"], f["baseRowId"], n))
    return out


def check_id_invariants(snapshot) -> list[tuple[str, int, int]]:
    """Every live add has ids; ranges are disjoint; the high-water mark covers them."""
    files = snapshot.files.to_pylist()
    missing = [
        f["path"] for f in files if f["baseRowId"] is None or f["defaultRowCommitVersion"] is None
    ]
    assert not missing, f"live files without row ids: {missing[:5]}"
    ranges = ranges_of(snapshot)
    nonempty = sorted((b, n, p) for p, b, n in ranges if n > 0)
    for (b0, n0, p0), (b1, n1, p1) in pairwise(nonempty):
        assert b0 + n0 <= b1, (
            f"row id ranges overlap: {p0} [{b0}, {b0 + n0}) and {p1} [{b1}, {b1 + n1})"
        )
    assert all(b >= 0 for _, b, _ in ranges)
    if nonempty:
        largest = max(b + n - 1 for b, n, _ in nonempty)
        assert (
            snapshot.row_id_high_water_mark is not None
            and snapshot.row_id_high_water_mark >= largest
        )
    return ranges


def check_enabled(
    before: Before, con, *, batch_files: int | None = None, same_files: bool = True
) -> Any:
    """Everything test 1 promises about a table after enabling row tracking."""
    path = before.path
    after = load_snapshot(path)
    check_id_invariants(after)

    # properties: enabled, materialized column names set, well formed, not a column name
    config = after.metadata.configuration
    assert config.get("delta.enableRowTracking") == "true"
    row_id_col = config.get("delta.rowTracking.materializedRowIdColumnName")
    version_col = config.get("delta.rowTracking.materializedRowCommitVersionColumnName")
    old_config = before.metadata.get("configuration") or {}
    for key, name, pattern in (
        ("delta.rowTracking.materializedRowIdColumnName", row_id_col, ROW_ID_NAME),
        (
            "delta.rowTracking.materializedRowCommitVersionColumnName",
            version_col,
            COMMIT_VERSION_NAME,
        ),
    ):
        assert name, f"{key} not set"
        if key in old_config:
            assert name == old_config[key], f"{key} was already set and must be kept"
        else:
            assert pattern.fullmatch(name), f"{key}={name!r}"
        assert name.lower() not in column_names(after.metadata.schema_string)
    # the rest of the metadata is untouched
    new_meta = after.metadata.to_action()
    for key in ("id", "schemaString", "partitionColumns", "format"):
        assert new_meta.get(key) == before.metadata.get(key), key
    assert dict(config) == {
        **old_config,
        "delta.enableRowTracking": "true",
        "delta.rowTracking.materializedRowIdColumnName": row_id_col,
        "delta.rowTracking.materializedRowCommitVersionColumnName": version_col,
    }, "only the row-tracking properties may change"

    # protocol: writer 7 with rowTracking + domainMetadata + everything the old one implied
    old, new = before.protocol, after.protocol.to_action()
    assert new["minWriterVersion"] == 7
    old_features = set(old.get("writerFeatures") or ()) | implied_writer_features(
        old["minReaderVersion"], old["minWriterVersion"]
    )
    assert set(new["writerFeatures"]) == old_features | {"rowTracking", "domainMetadata"}, new
    assert new["minReaderVersion"] == old["minReaderVersion"]
    assert new.get("readerFeatures") == old.get("readerFeatures")

    # the commits made since: raw JSON
    reference = {p: normalized(f) for p, f in before.files.items()}
    ref_stats = {p: f["stats"] for p, f in before.files.items()}
    backfilled: dict[str, tuple[int, dict]] = {}
    assigned_elsewhere: dict[str, int] = {}  # fresh ids given by other commits (concurrent writers)
    for version in range(before.version + 1, after.version + 1):
        actions = commit_actions(path, version)
        op = operation(actions)
        adds = [a["add"] for a in actions if "add" in a]
        if op != BACKFILL:
            for a in adds:  # e.g. concurrent appends: their adds are the reference
                reference[a["path"]] = normalized(a)
                ref_stats[a["path"]] = a.get("stats")
                if a.get("baseRowId") is not None and a.get("defaultRowCommitVersion") == version:
                    assert a["path"] not in assigned_elsewhere and a["path"] not in backfilled
                    assigned_elsewhere[a["path"]] = version
            if op == "UPGRADE PROTOCOL":
                assert [next(iter(a)) for a in actions] == ["commitInfo", "protocol"]
            if op == "SET TBLPROPERTIES":
                assert [next(iter(a)) for a in actions] == ["commitInfo", "metaData"]
            continue
        info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
        assert isinstance(info["operationParameters"]["batchId"], str)
        assert not any("remove" in a for a in actions), "a backfill never removes"
        if batch_files is not None:
            assert len(adds) <= batch_files
        for a in adds:
            assert a["dataChange"] is False
            assert a["defaultRowCommitVersion"] == version
            assert a["baseRowId"] is not None
            assert a["path"] not in backfilled, (
                f"{a['path']} backfilled twice (v{backfilled[a['path']][0]} and v{version})"
            )
            assert a["path"] not in assigned_elsewhere, (
                f"{a['path']} already got ids at v{assigned_elsewhere[a['path']]}"
            )
            backfilled[a["path"]] = (version, a)
            assert normalized(a) == reference[a["path"]], a["path"]
            old_stats = stats_of(ref_stats[a["path"]])
            if "numRecords" in old_stats:
                assert a.get("stats") == ref_stats[a["path"]], "stats must be kept byte for byte"
            else:
                counted = footer_rows(after.storage, a["path"])
                assert stats_of(a["stats"]) == {**old_stats, "numRecords": counted}
        domains = [a["domainMetadata"] for a in actions if "domainMetadata" in a]
        nonempty = [a for a in adds if stats_of(a["stats"])["numRecords"] > 0]
        if nonempty:
            [domain] = domains
            assert domain["domain"] == "delta.rowTracking" and domain["removed"] is False
            mark = json.loads(domain["configuration"])["rowIdHighWaterMark"]
            assert mark == max(
                a["baseRowId"] + stats_of(a["stats"])["numRecords"] - 1 for a in nonempty
            )

    # files that had no ids got them from exactly one backfill commit, and kept them
    live = {f["path"]: f for f in after.files.to_pylist()}
    for p, f in before.files.items():
        if f["baseRowId"] is None and p in live:
            assert p in backfilled or p in assigned_elsewhere, (
                f"{p} got its row ids outside the commits since"
            )
        if f["baseRowId"] is not None and p in live:
            assert (live[p]["baseRowId"], live[p]["defaultRowCommitVersion"]) == (
                f["baseRowId"],
                f["defaultRowCommitVersion"],
            )
    for p, (version, a) in backfilled.items():
        if p in live:
            assert (live[p]["baseRowId"], live[p]["defaultRowCommitVersion"]) == (
                a["baseRowId"],
                version,
            )

    # peers: same files, same add metadata (numRecords may have been filled in), same rows
    _, adds = rs_adds(path)
    if same_files:
        assert set(adds) == set(before.rs_files)
        for p, a in adds.items():
            old_add = dict(before.rs_files[p])
            if old_add.get("num_records") is None:
                old_add["num_records"] = footer_rows(after.storage, p)
            assert a == old_add, p
        if before.data_present:
            if before.rs is not None:
                assert rs_rows(path) == before.rs
            assert duck_rows(con, path) == before.duck
    return after


def batch_table(start: int, n: int, **extra: Any) -> pa.Table:
    cols = {
        "id": pa.array(range(start, start + n), pa.int64()),
        "name": pa.array([f"r{i}" for i in range(start, start + n)]),
    }
    cols.update({k: pa.array([v] * n) for k, v in extra.items()})
    return pa.table(cols)


def make_table(path: Path, sizes: list[int], **kwargs: Any) -> Path:
    """A table with one file per append, `sizes[i]` rows each, ids counting up from 0."""
    start = 0
    for n in sizes:
        write_arrow(path, batch_table(start, n), **kwargs)
        start += n
    return path


def sorted_ids(snapshot) -> list[tuple[str, int, int]]:
    return sorted(
        zip(*(row_ids(snapshot).column(c).to_pylist() for c in ("path", "row_index", "row_id")))
    )


# ------------------------------------------------------------------ 1. every readable fixture
@pytest.mark.parametrize("name", readable_fixture_names())
def test_enable_on_fixture(name, tmp_path, duck):
    path = copy_fixture(name, tmp_path)
    before = capture(path, duck)
    snapshot = load_snapshot(path)
    uncountable = [
        p
        for p, f in before.files.items()
        if "numRecords" not in stats_of(f["stats"])
        and not os.path.exists(snapshot.storage.table_path(p))
    ]
    if uncountable:  # log-only fixture whose files lack numRecords: refused, nothing written
        with pytest.raises(DeltaOpsError) as err:
            enable_row_tracking(str(path), batch_files=3)
        assert any(p in str(err.value) for p in uncountable), str(err.value)
        assert log_listing(path) == before.listing
        return

    lacking = [p for p, f in before.files.items() if f["baseRowId"] is None]
    without_counts = [p for p in lacking if "numRecords" not in stats_of(before.files[p]["stats"])]
    supported = snapshot.protocol.supports("rowTracking")
    already = (
        supported
        and not lacking
        and snapshot.properties.enable_row_tracking
        and all(
            snapshot.metadata.configuration.get(k)
            for k in (rt.ROW_ID_COLUMN, rt.COMMIT_VERSION_COLUMN)
        )
    )
    result = enable_row_tracking(str(path), batch_files=3)
    if already:
        assert result.already_enabled and result.backfill_commits == ()
        assert log_listing(path) == before.listing
    else:
        assert result.protocol_upgrade_version == (None if supported else before.version + 1)
        assert len(result.backfill_commits) == math.ceil(len(lacking) / 3)
        assert result.files_backfilled == len(lacking)
        assert result.files_counted_from_footer == len(without_counts)
        assert result.property_commit_version == load_snapshot(path).version
    check_enabled(before, duck, batch_files=3)


def test_log_only_fixture_without_counts_is_refused(tmp_path):
    path = copy_fixture("delta-rs/checkpoint_with_partitions", tmp_path)
    listing = log_listing(path)
    snapshot = load_snapshot(path)
    paths = snapshot.files.column("path").to_pylist()
    assert paths and not any(os.path.exists(snapshot.storage.table_path(p)) for p in paths)
    with pytest.raises(DeltaOpsError, match="numRecords") as err:
        execute_enable_row_tracking(plan_enable_row_tracking(snapshot, batch_files=1))
    assert any(p in str(err.value) for p in paths)
    assert log_listing(path) == listing


def test_simple_table_counts_come_from_the_footers(tmp_path, duck):
    path = copy_fixture("delta-rs/simple_table", tmp_path)
    before = capture(path, duck)
    assert all(not f["stats"] for f in before.files.values())
    result = enable_row_tracking(str(path), batch_files=2)
    assert result.files_counted_from_footer == len(before.files) == 5
    after = check_enabled(before, duck, batch_files=2)
    for f in after.files.to_pylist():
        full = after.storage.table_path(f["path"])
        assert json.loads(f["stats"]) == {"numRecords": pq.read_table(full).num_rows}


@pytest.mark.parametrize(
    "reader,writer", [(1, 1), (1, 2), (1, 3), (1, 4), (1, 5), (2, 5), (1, 6), (2, 6)]
)
def test_protocol_upgrade_makes_implied_features_explicit(tmp_path, reader, writer):
    path = tmp_path / "t"
    lb.write_commit(
        path,
        0,
        [
            lb.commit_info(),
            lb.protocol(reader, writer),
            lb.metadata(),
            lb.add("a.parquet", num_records=3),
            lb.add("b.parquet", num_records=0),
        ],
    )
    result = enable_row_tracking(str(path))
    assert result.protocol_upgrade_version == 1
    protocol = load_snapshot(path).protocol.to_action()
    expected = implied_writer_features(reader, writer) | {"rowTracking", "domainMetadata"}
    assert protocol == {
        "minReaderVersion": reader,
        "minWriterVersion": 7,
        "writerFeatures": sorted(expected),
    }
    check_id_invariants(load_snapshot(path))


def test_footer_counting_decodes_escaped_paths(tmp_path, duck):
    """A file without numRecords whose log path is URL-encoded is still found and counted."""
    path = make_table(tmp_path / "t", [4])
    rel = "dir with space/we%ird #name.parquet"
    (path / "dir with space").mkdir()
    pq.write_table(batch_table(100, 6), path / rel)
    snapshot = load_snapshot(path)
    txn = Transaction(snapshot, operation="WRITE")
    txn.add_action(
        {
            "add": {
                "path": "dir%20with%20space/we%25ird%20%23name.parquet",
                "partitionValues": {},
                "size": os.path.getsize(path / rel),
                "modificationTime": 1,
                "dataChange": True,
            }
        }
    )
    txn.commit()
    before = capture(path, duck)
    assert len(before.rs) == 10
    result = enable_row_tracking(str(path), batch_files=1)
    assert result.files_counted_from_footer == 1
    check_enabled(before, duck, batch_files=1)


def test_partitioned_table_with_nulls_tags_and_stats(tmp_path, duck):
    path = tmp_path / "t"
    data = pa.table(
        {"id": pa.array(range(8), pa.int64()), "p": ["a", None, "b", None, "a", "c", None, "b"]}
    )
    write_arrow(path, data, partition_by=["p"])
    # one more file with tags, committed by hand
    pq.write_table(pa.table({"id": pa.array([50, 51], pa.int64())}), path / "extra.parquet")
    txn = Transaction(load_snapshot(path), operation="WRITE")
    txn.add_action(
        {
            "add": {
                "path": "extra.parquet",
                "partitionValues": {"p": "z"},
                "size": os.path.getsize(path / "extra.parquet"),
                "modificationTime": 7,
                "dataChange": True,
                "stats": '{"numRecords":2,"minValues":{"id":50},"maxValues":{"id":51},"nullCount":{"id":0}}',
                "tags": {"INSERTION_TIME": "1", "k": "v"},
            }
        }
    )
    txn.commit()
    before = capture(path, duck)
    enable_row_tracking(str(path), batch_files=2)
    check_enabled(before, duck, batch_files=2)


# ------------------------------------------- 2. row ids survive checkpoint, cleanup and vacuum
def age_log(path: Path, base_ms: int) -> None:
    """Give every log file an old, monotonic (by version, checkpoint < crc < json) mtime."""
    order = {"checkpoint": 0, "crc": 1, "json": 2}
    entries = []
    for root, _, files in os.walk(path / "_delta_log"):
        for name in files:
            m = re.match(r"(\d{20})\.(?:.*\.)?(checkpoint|crc|json)", name)
            if m:
                kind = "checkpoint" if "checkpoint" in name else m.group(2)
                entries.append((int(m.group(1)), order[kind], os.path.join(root, name)))
    for i, (_, _, full) in enumerate(sorted(entries)):
        t = (base_ms + i * 1000) / 1000
        os.utime(full, (t, t))


def age_data(path: Path, when_ms: int) -> None:
    for root, dirs, files in os.walk(path):
        dirs[:] = [d for d in dirs if d != "_delta_log"]
        for name in files:
            os.utime(os.path.join(root, name), (when_ms / 1000, when_ms / 1000))


def build_history_table(path: Path) -> Path:
    write_arrow(path, batch_table(0, 5, day="a"), partition_by=["day"])
    write_arrow(path, batch_table(5, 4, day="b"), partition_by=["day"])
    write_arrow(path, batch_table(9, 3, day="a"), partition_by=["day"])
    write_arrow(path, batch_table(100, 6, day="c"), mode="overwrite", partition_by=["day"])
    write_arrow(path, batch_table(106, 2, day="a"), partition_by=["day"])
    write_arrow(path, batch_table(108, 7, day="d"), partition_by=["day"])
    return path


@pytest.mark.parametrize("source", ["written", "delta-spark/dv-partitioned-with-checkpoint"])
def test_row_ids_survive_checkpoint_cleanup_and_vacuum(tmp_path, duck, source):
    path = (
        build_history_table(tmp_path / "t")
        if source == "written"
        else copy_fixture(source, tmp_path)
    )
    enable_row_tracking(str(path), batch_files=2)
    snapshot = load_snapshot(path)
    ids = sorted_ids(snapshot)
    mark = snapshot.row_id_high_water_mark
    assert len({i for _, _, i in ids}) == len(ids) > 0
    rows = rs_rows(path)
    assert duck_rows(duck, path) == rows

    cp = checkpoint(str(path))
    assert cp.version == snapshot.version
    after_cp = load_snapshot(path)
    assert after_cp.segment.checkpoint is not None and sorted_ids(after_cp) == ids
    assert after_cp.row_id_high_water_mark == mark
    # read the checkpoint with pyarrow: it carries the row-tracking fields itself
    cp_files = sorted(
        n
        for n, _ in log_listing(path)
        if f"{cp.version:020d}.checkpoint" in n and n.endswith(".parquet")
    )
    if cp_files:
        adds = (
            pa.concat_tables([pq.read_table(path / n, columns=["add"]) for n in cp_files])
            .column("add")
            .to_pylist()
        )
        in_cp = {a["path"]: (a["baseRowId"], a["defaultRowCommitVersion"]) for a in adds if a}
        live = {
            f["path"]: (f["baseRowId"], f["defaultRowCommitVersion"])
            for f in snapshot.files.to_pylist()
        }
        assert in_cp == live

    now = int(time.time() * 1000) + 400 * DAY_MS
    age_log(path, now - 1000 * DAY_MS)
    plan = plan_cleanup(load_snapshot(path), now, retention_ms=0)
    assert plan.deleted, plan.kept_reasons
    execute_cleanup(plan)
    after_cleanup = load_snapshot(path)
    assert sorted_ids(after_cleanup) == ids and after_cleanup.row_id_high_water_mark == mark
    assert rs_rows(path) == rows and duck_rows(duck, path) == rows

    age_data(path, now - 1000 * DAY_MS)
    vplan = plan_vacuum(load_snapshot(path), now, retention_ms=0, force=True)
    assert vplan.candidates
    execute_vacuum(vplan)
    after_vacuum = load_snapshot(path)
    assert all(
        os.path.exists(after_vacuum.storage.table_path(p))
        for p in after_vacuum.files.column("path").to_pylist()
    )
    assert sorted_ids(after_vacuum) == ids and after_vacuum.row_id_high_water_mark == mark
    assert rs_rows(path) == rows and duck_rows(duck, path) == rows
    check_id_invariants(after_vacuum)


# ----------------------------------------------------------------- 3. idempotent / resumable
def test_second_run_has_nothing_to_do(tmp_path):
    path = make_table(tmp_path / "t", [3, 4, 5])
    first = enable_row_tracking(str(path), batch_files=1)
    assert (
        first.protocol_upgrade_version == 3
        and first.backfill_commits == (4, 5, 6)
        and first.property_commit_version == 7
    )
    listing = log_listing(path)
    plan = plan_enable_row_tracking(load_snapshot(path), batch_files=1)
    assert (
        plan.nothing_to_do
        and plan.already_enabled
        and plan.files_to_backfill == 0
        and not plan.upgrade_protocol
    )
    second = execute_enable_row_tracking(plan)
    assert (
        second.already_enabled
        and second.backfill_commits == ()
        and second.property_commit_version is None
    )
    assert enable_row_tracking(str(path)).already_enabled
    assert log_listing(path) == listing


def test_re_enabling_keeps_the_materialized_names(tmp_path, duck):
    path = make_table(tmp_path / "t", [3, 4])
    enable_row_tracking(str(path))
    snapshot = load_snapshot(path)
    names = {
        k: snapshot.metadata.configuration[k] for k in (rt.ROW_ID_COLUMN, rt.COMMIT_VERSION_COLUMN)
    }
    txn = Transaction(snapshot, operation="SET TBLPROPERTIES")
    txn.add_action(
        {
            "metaData": {
                **snapshot.metadata.to_action(),
                "configuration": {
                    **snapshot.metadata.configuration,
                    "delta.enableRowTracking": "false",
                },
            }
        }
    )
    txn.commit()
    write_arrow(path, batch_table(7, 2))  # row tracking still supported: the append gets ids
    before = capture(path, duck)
    result = enable_row_tracking(str(path))
    assert result.protocol_upgrade_version is None and result.backfill_commits == ()
    assert result.property_commit_version == before.version + 1
    after = check_enabled(before, duck)
    assert {k: after.metadata.configuration[k] for k in names} == names


@pytest.mark.parametrize(
    "config,match",
    [({"delta.rowTrackingSuspended": "true"}, "suspended"), ({"delta.appendOnly": "true"}, None)],
)
def test_table_properties(tmp_path, duck, config, match):
    path = tmp_path / "t"
    write_arrow(path, batch_table(0, 3), configuration=config)
    write_arrow(path, batch_table(3, 3))
    before = capture(path, duck)
    if match:
        with pytest.raises(DeltaOpsError, match=match):
            enable_row_tracking(str(path))
        assert log_listing(path) == before.listing
    else:  # an append-only table: the backfill re-adds without removing, which it allows
        enable_row_tracking(str(path), batch_files=1)
        check_enabled(before, duck, batch_files=1)


@pytest.mark.parametrize("name", ["delta-rs/table-with-domain-metadata", "kernel/crc-full"])
def test_already_enabled_fixture_writes_nothing(tmp_path, name):
    path = copy_fixture(name, tmp_path)
    listing = log_listing(path)
    result = enable_row_tracking(str(path), batch_files=3)
    assert (
        result.already_enabled
        and result.protocol_upgrade_version is None
        and result.property_commit_version is None
    )
    assert log_listing(path) == listing


def test_enabling_on_a_table_created_with_row_tracking_writes_nothing(tmp_path):
    path = tmp_path / "t"
    write_arrow(path, batch_table(0, 3), configuration={"delta.enableRowTracking": "true"})
    write_arrow(path, batch_table(3, 3))
    listing = log_listing(path)
    result = enable_row_tracking(str(path))
    assert result.already_enabled
    assert log_listing(path) == listing


def test_interrupted_run_resumes(tmp_path, duck):
    """Stopped right after its second batch commit, a re-run finishes without new id ranges."""
    path = make_table(tmp_path / "t", [2, 3, 1, 4, 5, 2, 6])
    before = capture(path, duck)

    class Stop(Exception):
        pass

    calls = []

    def progress(message: str) -> None:
        calls.append(message)
        if len(calls) == 3:  # protocol upgrade, batch 1, batch 2
            raise Stop

    with pytest.raises(Stop):
        execute_enable_row_tracking(
            plan_enable_row_tracking(load_snapshot(path), batch_files=2), progress=progress
        )
    partial = {
        f["path"]: f["baseRowId"]
        for f in load_snapshot(path).files.to_pylist()
        if f["baseRowId"] is not None
    }
    assert len(partial) == 4
    result = enable_row_tracking(str(path), batch_files=2)
    assert result.protocol_upgrade_version is None and result.files_backfilled == 3
    after = check_enabled(before, duck, batch_files=2)
    assert {
        p: b
        for p, b in ((f["path"], f["baseRowId"]) for f in after.files.to_pylist())
        if p in partial
    } == partial


# -------------------------------------------------------------------------- 4. crash injection
CRASH_TABLES = {
    "written": lambda tmp: make_table(tmp / "base", [2, 5, 1, 3, 4, 6, 2]),
    "footer-counts": lambda tmp: copy_fixture("delta-rs/simple_table", tmp),
}


@pytest.mark.parametrize("when", ["before", "after"])
@pytest.mark.parametrize("table", sorted(CRASH_TABLES))
def test_crash_after_each_write_then_rerun(tmp_path, duck, table, when):
    base = CRASH_TABLES[table](tmp_path)
    reference = capture(base, duck)
    base_snapshot = load_snapshot(base)
    assert reference.data_present and len(reference.files) >= 5
    completed_at = None
    for n in range(1, 50):
        path = tmp_path / f"{when}-{n}"
        shutil.copytree(base, path)
        faults = FaultPlan(crash_on=n, when=when)
        try:
            enable_row_tracking(
                faulty_url(path), batch_files=2, storage_options=faulty_options(faults)
            )
        except InjectedCrash:
            assert faults.count == n
            stopped = True
        else:
            stopped = False
            if not faults.crashed:
                completed_at = n
                assert faults.count == n - 1, faults.writes
                break
            # a crash at a commit's checksum: written best-effort, the run went on
            assert faults.writes[n - 1][1].endswith(".crc"), faults.writes
        assert faults.crashed
        assert all(op == "open:xb" and "/_delta_log/" in p for op, p in faults.writes), (
            faults.writes
        )
        # each commit is followed by its checksum: the commits among the first n writes
        commits = sum(1 for _, p in faults.writes[:n] if p.endswith(".json"))
        before = Before(**{**reference.__dict__, "path": path})

        # (a) the crashed table reads the same rows and files everywhere
        crashed = load_snapshot(path)
        assert sorted(crashed.files.column("path").to_pylist()) == sorted(reference.files)
        counts = {p: n for p, _, n in ranges_of(crashed)}
        assert counts == {p: n for p, _, n in ranges_of(base_snapshot)}
        assert set(rs_adds(path)[1]) == set(reference.files)
        assert rs_rows(path) == reference.rs
        assert duck_rows(duck, path) == reference.duck
        committed = {
            f["path"]: (f["baseRowId"], f["defaultRowCommitVersion"])
            for f in crashed.files.to_pylist()
            if f["baseRowId"] is not None
        }
        if when == "after" and stopped:  # the crashed write itself is durable
            assert crashed.version == reference.version + commits

        # (b) a plain re-run completes, correctly, without a second id range for any file
        enable_row_tracking(str(path), batch_files=2)
        after = check_enabled(before, duck, batch_files=2)
        live = {
            f["path"]: (f["baseRowId"], f["defaultRowCommitVersion"])
            for f in after.files.to_pylist()
        }
        assert {p: live[p] for p in committed} == committed
    assert completed_at is not None and completed_at >= 4, "the run should need several writes"


def test_fault_filesystem_counts_every_kind_of_write(tmp_path):
    from delta_ops.storage import Storage

    faults = FaultPlan()
    storage = Storage.open(faulty_url(tmp_path), faulty_options(faults))
    assert not storage.is_local
    assert storage.put_if_absent(storage.join("a"), b"1") and not storage.put_if_absent(
        storage.join("a"), b"2"
    )
    storage.write_atomic(storage.join("b"), b"3")
    assert storage.move_new(storage.join("b"), "c")
    storage.delete([storage.join("c")])
    assert [op for op, _ in faults.writes] == ["open:xb", "open:xb", "pipe_file", "mv", "rm_file"]
    for when, exists in (("before", False), ("after", True)):
        faults = FaultPlan(crash_on=2, when=when)
        storage = Storage.open(faulty_url(tmp_path), faulty_options(faults))
        storage.write_atomic(storage.join(f"x-{when}"), b"")
        with pytest.raises(InjectedCrash):
            storage.put_if_absent(storage.join(f"y-{when}"), b"4")
        assert (tmp_path / f"y-{when}").exists() is exists
        storage.put_if_absent(storage.join(f"z-{when}"), b"5")  # only the Nth write crashes
        assert faults.count == 3


# ------------------------------------------------------------------- 5. a concurrent appender
APPEND_BASE = 1_000_000


def _appender(path: str, n: int, ready, go, appended, result) -> None:
    """Child process: append `n` small files, retrying commits that lose a conflict."""
    from delta_ops.errors import ConcurrentModification as Conflict
    from delta_ops.table.writer import write_arrow as write

    ready.set()
    go.wait(60)
    rng = random.Random(7)
    ids, retries = [], 0
    for i in range(n):
        data = pa.table(
            {
                "id": pa.array(range(APPEND_BASE + 10 * i, APPEND_BASE + 10 * i + 3), pa.int64()),
                "name": pa.array([f"a{i}"] * 3),
            }
        )
        while True:
            try:
                write(path, data)
                break
            except Conflict:
                retries += 1
        ids.extend(data.column("id").to_pylist())
        with appended.get_lock():
            appended.value += 1
        time.sleep(rng.uniform(0.0, 0.03))
    result.put((ids, retries))


def test_concurrent_appender_gets_no_duplicate_or_missing_ids(tmp_path, duck):
    path = make_table(tmp_path / "t", [5] * 10)
    initial_ids = list(range(50))
    start_version = load_snapshot(path).version
    ctx = multiprocessing.get_context("spawn")
    ready, go, appended, result = ctx.Event(), ctx.Event(), ctx.Value("i", 0), ctx.Queue()
    n_appends = 10
    child = ctx.Process(target=_appender, args=(str(path), n_appends, ready, go, appended, result))
    child.start()
    try:
        assert ready.wait(60), "appender did not start"
        seen = [0]

        def progress(message: str) -> None:
            # let at least one append land between our commits, so they interleave
            deadline = time.monotonic() + 10
            while (
                appended.value <= seen[0] < n_appends
                and time.monotonic() < deadline
                and child.is_alive()
            ):
                time.sleep(0.002)
            seen[0] = appended.value

        go.set()
        plan = plan_enable_row_tracking(load_snapshot(path), batch_files=1)
        res = execute_enable_row_tracking(plan, progress=progress)
        appended_ids, _retries = result.get(timeout=60)
        child.join(60)
    finally:
        if child.is_alive():
            child.kill()
    assert child.exitcode == 0
    assert res.property_commit_version is not None

    snapshot = load_snapshot(path)
    ranges = check_id_invariants(snapshot)
    assert len(ranges) == 10 + n_appends
    ids = row_ids(snapshot)
    total = sum(n for _, _, n in ranges)
    assert total == 50 + 3 * n_appends == ids.num_rows
    assert len(set(ids.column("row_id").to_pylist())) == ids.num_rows, "duplicate row ids"
    expected = sorted(initial_ids + appended_ids)
    assert sorted(r["id"] for r in rs_rows(path)) == expected
    assert sorted(r["id"] for r in duck_rows(duck, path)) == expected

    # the appends really interleaved with the enablement, and each got ids exactly once
    ops = {
        v: operation(commit_actions(path, v))
        for v in range(start_version + 1, snapshot.version + 1)
    }
    writes = [v for v, op in ops.items() if op == "WRITE"]
    upgrade = next(v for v, op in ops.items() if op == "UPGRADE PROTOCOL")
    assert any(upgrade < v < res.property_commit_version for v in writes), ops
    seen_paths: dict[str, int] = {}
    for v in ops:
        for a in commit_actions(path, v):
            if "add" in a and a["add"].get("baseRowId") is not None:
                assert a["add"]["path"] not in seen_paths, (
                    f"{a['add']['path']} got ids at v{seen_paths[a['add']['path']]} and v{v}"
                )
                seen_paths[a["add"]["path"]] = v
                assert a["add"]["defaultRowCommitVersion"] == v
    assert set(seen_paths) == {p for p, _, _ in ranges}


# --------------------------------------------------------------------------- 6. conflict hook
def test_file_removed_after_planning_is_not_backfilled(tmp_path, duck):
    path = make_table(tmp_path / "t", [3, 4, 5, 6])
    plan = plan_enable_row_tracking(load_snapshot(path), batch_files=2)
    victim = min(load_snapshot(path).files.column("path").to_pylist())
    txn = Transaction(load_snapshot(path), operation="DELETE")
    txn.add_action(
        {
            "remove": {
                "path": victim,
                "deletionTimestamp": int(time.time() * 1000),
                "dataChange": True,
            }
        }
    )
    txn.commit()
    before = capture(path, duck)
    result = execute_enable_row_tracking(plan)
    assert result.files_backfilled == 3
    check_enabled(before, duck, batch_files=2)


def test_file_added_after_planning_by_an_older_writer_is_backfilled_too(tmp_path, duck):
    """A writer that knew nothing of row tracking appended after the plan was made (before the
    protocol upgrade): the fresh load before the property commit finds its file and backfills
    it, so the property is only set when every live file has ids."""
    path = make_table(tmp_path / "t", [3, 4, 5])
    plan = plan_enable_row_tracking(load_snapshot(path), batch_files=2)
    write_arrow(path, batch_table(100, 7))  # the table has no rowTracking yet: no ids given
    before = capture(path, duck)
    result = execute_enable_row_tracking(plan)
    assert result.files_backfilled == 4
    after = load_snapshot(path)
    assert after.properties.enable_row_tracking
    check_id_invariants(after)
    assert result.row_id_high_water_mark == 3 + 4 + 5 + 7 - 1
    check_enabled(before, duck)


@pytest.mark.parametrize("where", ["this batch", "a later batch"])
@pytest.mark.parametrize("winner", ["remove", "re-add"])
@pytest.mark.parametrize("batch_files", [1, 2])
def test_winner_touching_a_batch_file_drops_it_from_the_batch(
    tmp_path, duck, monkeypatch, winner, batch_files, where
):
    """A commit lands between the batch's snapshot and its commit, touching a file of this
    batch or of one still to come (which must not re-add it: the table is loaded once)."""
    path = make_table(tmp_path / "t", [3, 4, 5, 6])
    fired = []

    class RacingTransaction(Transaction):
        def commit(self):
            if self.operation == BACKFILL and not fired:
                ours = sorted(a["add"]["path"] for a in self.actions if "add" in a)
                others = sorted(
                    set(load_snapshot(path).files.column("path").to_pylist()) - set(ours)
                )
                victim = ours[0] if where == "this batch" else others[-1]
                fresh = load_snapshot(path)
                row = next(f for f in fresh.files.to_pylist() if f["path"] == victim)
                race = Transaction(fresh, operation="DELETE" if winner == "remove" else "OPTIMIZE")
                if winner == "remove":
                    race.add_action(
                        {"remove": {"path": victim, "deletionTimestamp": 1, "dataChange": True}}
                    )
                else:
                    race.add_action(
                        {
                            "add": {
                                **normalized(row),
                                "path": victim,
                                "dataChange": False,
                                "stats": row["stats"],
                                "tags": {"re": "added"},
                            }
                        }
                    )
                fired.append((victim, race.commit().version, self.read_version))
            return super().commit()

    before = capture(path, duck)
    monkeypatch.setattr(rt, "Transaction", RacingTransaction)
    result = enable_row_tracking(str(path), batch_files=batch_files)
    [(victim, race_version, read_version)] = fired
    assert race_version == read_version + 1, "the race must land right after the batch's snapshot"
    first_batch = commit_actions(path, result.backfill_commits[0])
    assert victim not in {a["add"]["path"] for a in first_batch if "add" in a}
    expected_first = batch_files - 1 if where == "this batch" else batch_files
    assert len([a for a in first_batch if "add" in a]) == expected_first
    backfilled = {
        a["add"]["path"]
        for v in result.backfill_commits
        for a in commit_actions(path, v)
        if "add" in a
    }
    assert victim not in backfilled
    assert result.files_backfilled == 3
    snapshot = load_snapshot(path)
    check_id_invariants(snapshot)
    live = {f["path"]: f for f in snapshot.files.to_pylist()}
    if winner == "remove":
        assert victim not in live and len(live) == 3
        gone = pq.read_table(path / victim).to_pylist()
        rows = sorted((r for r in before.rs if r not in gone), key=_row_key)
        assert len(rows) == len(before.rs) - len(gone)
        check_enabled(
            Before(
                **{
                    **before.__dict__,
                    "files": {p: f for p, f in before.files.items() if p != victim},
                    "rs_files": {p: f for p, f in before.rs_files.items() if p != victim},
                    "rs": rows,
                    "duck": rows,
                }
            ),
            duck,
        )
    else:
        assert live[victim]["defaultRowCommitVersion"] == race_version  # ids from the winner, once
        assert pairs(live[victim]["tags"]) == {"re": "added"}
        check_enabled(before, duck)


def test_append_winning_against_a_batch_pushes_the_batch_ids_above_it(tmp_path, duck, monkeypatch):
    path = make_table(tmp_path / "t", [3, 4, 5, 6])
    fired = []

    class RacingTransaction(Transaction):
        def commit(self):
            if self.operation == BACKFILL and not fired:
                fired.append((write_arrow(path, batch_table(500, 4)).version, self.read_version))
            return super().commit()

    before = capture(path, duck)
    monkeypatch.setattr(rt, "Transaction", RacingTransaction)
    result = enable_row_tracking(str(path), batch_files=2)
    [(race_version, read_version)] = fired
    assert race_version == read_version + 1
    [appended] = [a["add"] for a in commit_actions(path, race_version) if "add" in a]
    assert appended["defaultRowCommitVersion"] == race_version
    first = [a["add"] for a in commit_actions(path, result.backfill_commits[0]) if "add" in a]
    assert result.backfill_commits[0] == race_version + 1 and len(first) == 2
    assert min(a["baseRowId"] for a in first) >= appended["baseRowId"] + 4
    snapshot = load_snapshot(path)
    check_id_invariants(snapshot)
    assert result.files_backfilled == 4 and snapshot.num_files == 5
    check_enabled(before, duck, batch_files=2, same_files=False)
    expected = sorted(before.rs + batch_table(500, 4).to_pylist(), key=_row_key)
    assert rs_rows(path) == expected and duck_rows(duck, path) == expected


@pytest.mark.parametrize("loser", ["append", "second-enabler"])
def test_losing_to_the_enablement_only_property_commit_is_resolved(tmp_path, monkeypatch, loser):
    path = make_table(tmp_path / "t", [3, 4, 5, 6])
    if loser == "append":

        class Stop(Exception):
            pass

        calls = []

        def progress(message: str) -> None:
            calls.append(message)
            if len(calls) == 2:  # after the upgrade and the (single) backfill batch
                raise Stop

        with pytest.raises(Stop):
            execute_enable_row_tracking(
                plan_enable_row_tracking(load_snapshot(path)), progress=progress
            )
        pq.write_table(batch_table(500, 4), path / "late.parquet")
        txn = Transaction(
            load_snapshot(path), operation="WRITE"
        )  # reads the table before the property commit
        txn.add_action(
            {
                "add": {
                    "path": "late.parquet",
                    "partitionValues": {},
                    "size": os.path.getsize(path / "late.parquet"),
                    "modificationTime": 1,
                    "dataChange": True,
                    "stats": '{"numRecords":4}',
                }
            }
        )
        assert enable_row_tracking(str(path)).property_commit_version is not None
        version = txn.commit().version  # loses to the property commit
        assert load_snapshot(path).version == version
    else:
        fired = []

        class RacingTransaction(Transaction):
            def commit(self):
                if self.operation == BACKFILL and not fired:
                    fired.append(None)  # the other run's own commits pass straight through
                    fired[0] = enable_row_tracking(str(path), batch_files=2)  # a whole other run
                return super().commit()

        monkeypatch.setattr(rt, "Transaction", RacingTransaction)
        enable_row_tracking(str(path), batch_files=2)
        assert fired and fired[0].property_commit_version is not None
    snapshot = load_snapshot(path)
    check_id_invariants(snapshot)
    assert snapshot.properties.enable_row_tracking


# ------------------------------------------------------------------------------- 7. row_ids()
def test_row_ids_skip_deletion_vector_rows(tmp_path, duck):
    path = copy_fixture("delta-rs/table-with-dv-small", tmp_path)
    enable_row_tracking(str(path))
    snapshot = load_snapshot(path)
    [f] = snapshot.files.to_pylist()
    ids = row_ids(snapshot).to_pylist()
    assert len(ids) == 8 == len(rs_rows(path))
    assert all(r["row_id"] == f["baseRowId"] + r["row_index"] for r in ids)
    values = pq.read_table(snapshot.storage.table_path(f["path"])).column("value").to_pylist()
    surviving = sorted(r["value"] for r in rs_rows(path))
    assert [values[r["row_index"]] for r in ids] == surviving
    assert sorted(r["value"] for r in duck_rows(duck, path)) == surviving


def test_materialized_row_ids_win_where_present(tmp_path):
    path = make_table(tmp_path / "t", [3])
    enable_row_tracking(str(path))
    snapshot = load_snapshot(path)
    column = snapshot.metadata.configuration[rt.ROW_ID_COLUMN]
    materialized = pa.array([900, None, 902, None, 904], pa.int64())
    pq.write_table(
        pa.table(
            {
                "id": pa.array([10, 11, 12, 13, 14], pa.int64()),
                "name": pa.array(list("abcde")),
                column: materialized,
            }
        ),
        path / "mat.parquet",
    )
    txn = Transaction(snapshot, operation="WRITE")
    txn.add_action(
        {
            "add": {
                "path": "mat.parquet",
                "partitionValues": {},
                "size": os.path.getsize(path / "mat.parquet"),
                "modificationTime": 1,
                "dataChange": True,
                "stats": '{"numRecords":5}',
                "baseRowId": 50,
            }
        }
    )
    version = txn.commit().version
    after = load_snapshot(path)
    mat = next(f for f in after.files.to_pylist() if f["path"] == "mat.parquet")
    assert (mat["baseRowId"], mat["defaultRowCommitVersion"]) == (50, version)
    ids = {(r["path"], r["row_index"]): r["row_id"] for r in row_ids(after).to_pylist()}
    assert [ids[("mat.parquet", i)] for i in range(5)] == [900, 51, 902, 53, 904]
    [(other, base)] = [
        (f["path"], f["baseRowId"]) for f in after.files.to_pylist() if f["path"] != "mat.parquet"
    ]
    assert [ids[(other, i)] for i in range(3)] == [base, base + 1, base + 2]


def test_row_ids_refuse_a_table_without_ids(tmp_path):
    path = make_table(tmp_path / "t", [2])
    with pytest.raises(DeltaOpsError, match="baseRowId"):
        row_ids(load_snapshot(path))


# ------------------------------------------------------------------------------------ 8. CLI
def test_cli_dry_run_then_run(tmp_path, capsys):
    path = make_table(tmp_path / "t", [1, 2, 3, 4, 5])
    listing = log_listing(path)
    assert (
        cli_main(["enable-row-tracking", str(path), "--batch-files", "2", "--dry-run", "--json"])
        == 0
    )
    plan = json.loads(capsys.readouterr().out)
    assert (
        plan["dry_run"] is True
        and plan["files_to_backfill"] == 5
        and plan["num_batches"] == 3
        and plan["upgrade_protocol"] is True
    )
    assert log_listing(path) == listing

    assert cli_main(["enable-row-tracking", str(path), "--batch-files", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["backfill_commits"] == [6, 7, 8] and out["property_commit_version"] == 9
    assert out["files_backfilled"] == 5 and out["protocol_upgrade_version"] == 5
    check_id_invariants(load_snapshot(path))

    listing = log_listing(path)
    assert cli_main(["enable-row-tracking", str(path), "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["already_enabled"] is True and again["files_backfilled"] == 0
    assert log_listing(path) == listing


@pytest.mark.parametrize("case", ["uncountable", "bad-batch"])
def test_cli_error_is_one_stderr_line(tmp_path, case):
    # a table we cannot maintain exits 1; a malformed option is a usage error, exit 2
    path = (
        copy_fixture("delta-rs/checkpoint_with_partitions", tmp_path)
        if case == "uncountable"
        else make_table(tmp_path / "t", [1])
    )
    listing = log_listing(path)
    args = ["enable-row-tracking", str(path)] + (
        ["--batch-files", "0"] if case == "bad-batch" else []
    )
    proc = subprocess.run(
        [sys.executable, "-m", "delta_ops.cli", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        check=False,
    )
    assert proc.returncode == (1 if case == "uncountable" else 2), proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("delta-ops: error: "), proc.stderr
    assert ("numRecords" in lines[0]) if case == "uncountable" else ("--batch-files" in lines[0])
    assert proc.stdout == ""
    assert log_listing(path) == listing
