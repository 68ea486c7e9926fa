"""Acceptance tests of the checkpoint operation (issue 3).

Every test asserts what ends up on disk and what independent readers make of it: the state
our reader reconstructs from the new checkpoint against the state replayed without it, the
bytes and schema of the files, and what `deltalake` (delta-rs) and DuckDB's `delta` extension
(delta-kernel-rs) read before and after, including after every older commit is deleted.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from deltalake import write_deltalake

from delta_ops import cli
from delta_ops.clock import fixed_wall_clock
from delta_ops.errors import DeltaOpsError, UnsupportedFeature
from delta_ops.log.file_names import LogFileKind, parse_log_file_name
from delta_ops.log.last_checkpoint import parse_last_checkpoint
from delta_ops.ops.checkpoint import checkpoint, execute_checkpoint, plan_checkpoint
from delta_ops.storage import Storage
from delta_ops.table.snapshot import Snapshot, load_snapshot
from tests.support import (
    TABLES,
    copy_fixture,
    deltalake_files,
    deltalake_rows,
    duckdb_connection,
    duckdb_rows,
    peer_facts,
    readable_fixture_names,
)
from tests.support import log_builder as lb

FAR_FUTURE_MS = 10**15  # year ~33658: every tombstone (and txn, with a retention) expires


@pytest.fixture(autouse=True)
def _wall_clock_far_ahead():
    """Plans clamp their clock to the wall clock; these tests judge expiry at fixed moments
    (NOW, FAR_FUTURE_MS), so the wall clock reads the far future while they run."""
    with fixed_wall_clock(FAR_FUTURE_MS, all_threads=True):
        yield


HOUR_MS = 3_600_000
TOP_LEVEL_COLUMNS = ["txn", "add", "remove", "metaData", "protocol", "domainMetadata"]
UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"


# ------------------------------------------------------------------------------ state facts
def _dv_id(dv: dict | None) -> str | None:
    if not dv:
        return None
    uid = dv["storageType"] + dv["pathOrInlineDv"]
    return uid + f"@{dv['offset']}" if dv.get("offset") is not None else uid


def _as_dict(value: Any) -> dict | None:
    return dict(value) if value is not None else None


def _dv(dv: dict | None) -> dict | None:
    # maxRowIndex is a transient field: never in JSON, a null column in Spark checkpoints
    return {k: v for k, v in dv.items() if k != "maxRowIndex"} if dv else None


ADD_FIELDS = (
    "path",
    "size",
    "modificationTime",
    "stats",
    "baseRowId",
    "defaultRowCommitVersion",
    "clusteringProvider",
)
REMOVE_FIELDS = (
    "path",
    "deletionTimestamp",
    "size",
    "extendedFileMetadata",
    "baseRowId",
    "defaultRowCommitVersion",
)


def file_facts(table: pa.Table) -> dict[tuple, dict]:
    out = {}
    for row in table.to_pylist():
        facts = {k: row.get(k) for k in ADD_FIELDS}
        facts["partitionValues"] = _as_dict(row.get("partitionValues"))
        facts["tags"] = _as_dict(row.get("tags"))
        facts["deletionVector"] = _dv(row.get("deletionVector"))
        out[(row["path"], _dv_id(row.get("deletionVector")))] = facts
    return out


def tombstone_facts(table: pa.Table) -> dict[tuple, dict]:
    out = {}
    for row in table.to_pylist():
        facts = {k: row.get(k) for k in REMOVE_FIELDS}
        facts["partitionValues"] = _as_dict(row.get("partitionValues"))
        facts["deletionVector"] = _dv(row.get("deletionVector"))
        out[(row["path"], _dv_id(row.get("deletionVector")))] = facts
    return out


def state_facts(snap: Snapshot) -> dict[str, Any]:
    return {
        "version": snap.version,
        "files": file_facts(snap.files),
        "tombstones": tombstone_facts(snap.tombstones),
        "txns": {k: (t.version, t.last_updated) for k, t in snap.txns.items()},
        "domains": {k: d.configuration for k, d in snap.domains.items()},
        "metadata": snap.metadata,
        "protocol": snap.protocol.to_action(),
        "row_id_high_water_mark": snap.row_id_high_water_mark,
    }


def expected_after_checkpoint(before: Snapshot, now_ms: int) -> dict[str, Any]:
    """The state a checkpoint written at `now_ms` must hold, by the protocol's "Action
    Reconciliation" and "Checkpoints" rules (Delta Spark's InMemoryLogReplay)."""
    facts = state_facts(before)
    props = before.properties
    cutoff = now_ms - props.deleted_file_retention_ms
    facts["tombstones"] = {
        k: t
        for k, t in facts["tombstones"].items()
        if t["deletionTimestamp"] is not None and t["deletionTimestamp"] > cutoff
    }
    if props.set_transaction_retention_ms is not None:
        txn_cutoff = now_ms - props.set_transaction_retention_ms
        facts["txns"] = {
            k: t for k, t in facts["txns"].items() if t[1] is not None and t[1] > txn_cutoff
        }
    return facts


def newest_deletion_timestamp(snap: Snapshot) -> int:
    values = [v for v in snap.tombstones.column("deletionTimestamp").to_pylist() if v is not None]
    return max(values) if values else 1_700_000_000_000


# --------------------------------------------------------------------------------- log files
def log_dir(table: Path) -> Path:
    return table / "_delta_log"


def checkpoints_at(table: Path, version: int) -> list[Path]:
    out = []
    for p in log_dir(table).iterdir():
        parsed = parse_log_file_name(p.name)
        if parsed is not None and parsed.is_checkpoint and parsed.version == version:
            out.append(p)
    return out


def delete_checkpoint_at(table: Path, version: int) -> None:
    """Remove the checkpoint(s) at `version`, and the hint if it names them."""
    found = checkpoints_at(table, version)
    for p in found:
        p.unlink()
    hint = log_dir(table) / "_last_checkpoint"
    if found and hint.exists():
        try:
            named = json.loads(hint.read_text().splitlines()[0]).get("version")
        except (ValueError, IndexError):
            named = None
        if named is None or named >= version:
            hint.unlink()


def delete_history_before(table: Path, version: int, keep: set[str]) -> list[str]:
    """Delete every commit (and compacted range) <= version and every other checkpoint <= version."""
    deleted = []
    for p in sorted(log_dir(table).iterdir()):
        parsed = parse_log_file_name(p.name)
        if parsed is None or p.name in keep:
            continue
        obsolete = (
            (parsed.kind is LogFileKind.COMMIT and parsed.version <= version)
            or (parsed.kind is LogFileKind.COMPACTED and (parsed.end_version or 0) <= version)
            or (parsed.is_checkpoint and parsed.version <= version)
        )
        if not obsolete:
            continue
        p.unlink()
        deleted.append(p.name)
    return deleted


def log_listing(table: Path) -> dict[str, tuple[int, int]]:
    """Every file under _delta_log (recursively) with size and mtime in ns."""
    out = {}
    for root, _, files in os.walk(log_dir(table)):
        for f in files:
            p = Path(root, f)
            st = p.stat()
            out[str(p.relative_to(log_dir(table)))] = (st.st_size, st.st_mtime_ns)
    return out


def write_table(table: Path, commits: list[list[dict]]) -> Path:
    for version, actions in enumerate(commits):
        lb.write_commit(table, version, actions)
    return table


def read_hint(table: Path) -> dict:
    return json.loads((log_dir(table) / "_last_checkpoint").read_text())


def written_parquet(table: Path, result) -> pa.Table:
    return pa.concat_tables(
        [
            pq.read_table(log_dir(table) / name)
            for name in result.written
            if name.endswith(".parquet")
        ],
        promote_options="default",
    )


# ------------------------------------------------------------------------------------- peers
def peer_view(path: Path) -> dict[str, Any]:
    """What each peer reads: delta-rs must read (these are readable fixtures); rows may fail."""
    view: dict[str, Any] = {"files": deltalake_files(path)}
    for key, reader in (("deltalake_rows", deltalake_rows), ("duckdb_rows", duckdb_rows)):
        # a peer that cannot read rows (log-only fixture, unsupported feature) is not compared
        with contextlib.suppress(Exception):
            view[key] = reader(path)
    return view


@lru_cache(maxsize=1)
def _pristine_duckdb():
    return duckdb_connection()


@cache
def pristine_peer_view(name: str) -> dict[str, Any]:
    """peer_view of an untouched fixture (never written to, so one DuckDB connection serves all)."""
    path = TABLES / name
    view: dict[str, Any] = {"files": deltalake_files(path)}
    with contextlib.suppress(Exception):
        view["deltalake_rows"] = deltalake_rows(path)
    with contextlib.suppress(Exception):
        rel = _pristine_duckdb().sql(f"SELECT * FROM delta_scan('{path}')")
        rows = (
            rel.to_arrow_table() if hasattr(rel, "to_arrow_table") else rel.fetch_arrow_table()
        ).to_pylist()
        view["duckdb_rows"] = sorted(rows, key=lambda r: json.dumps(r, sort_keys=True, default=str))
    return view


def assert_peers_agree(before: dict[str, Any], path: Path, when: str) -> None:
    after = {"files": deltalake_files(path)}
    assert after["files"] == before["files"], f"deltalake version/files changed {when}"
    if "deltalake_rows" in before:
        assert deltalake_rows(path) == before["deltalake_rows"], f"deltalake rows changed {when}"
    if "duckdb_rows" in before:
        assert duckdb_rows(path) == before["duckdb_rows"], f"DuckDB rows changed {when}"


# ============================================================ 1. every readable fixture
def _checkpoint_fixture_copy(name: str, dest: Path, now_ms_for) -> tuple[Path, Snapshot, Any, int]:
    table = copy_fixture(name, dest)
    snap = load_snapshot(table)
    snap.files  # noqa: B018 - read the stats while the checkpoint they are in still exists
    version = snap.version
    if checkpoints_at(table, version):
        delete_checkpoint_at(table, version)
        try:
            snap = load_snapshot(table)  # the state replayed without that checkpoint
        except DeltaOpsError:
            pass  # no commits to replay (only the checkpoint): keep the state read before deleting
    assert snap.version == version
    now_ms = now_ms_for(snap)
    plan = plan_checkpoint(snap, now_ms)
    assert plan.existing is None and not plan.nothing_to_do
    result = execute_checkpoint(plan)
    assert result.skipped_existing is None and result.written == plan.files
    return table, snap, result, now_ms


@pytest.mark.parametrize("name", readable_fixture_names())
def test_fixture_checkpoint_preserves_state_and_peer_reads(name, tmp_path):
    before_peers = pristine_peer_view(name)
    assert before_peers["files"][1] == sorted(peer_facts()[name]["rs_files"])
    if "kernel_rows" in peer_facts()[name]:
        assert len(before_peers.get("duckdb_rows", [])) == peer_facts()[name]["kernel_rows"]

    # (a) now = the newest deletionTimestamp: tombstones within the retention are kept
    table, before, result, now_ms = _checkpoint_fixture_copy(
        name, tmp_path / "newest", newest_deletion_timestamp
    )
    expected = expected_after_checkpoint(before, now_ms)
    after = load_snapshot(table)
    assert after.segment.checkpoint is not None and after.segment.checkpoint.name in result.written
    assert after.segment.checkpoint_version == before.version and not after.segment.commits
    assert state_facts(after) == expected
    assert after.removed_domains == {}
    assert result.num_add_files == before.num_files
    for name_ in result.written:
        if name_.endswith(".parquet"):
            data = pq.read_table(log_dir(table) / name_)
            assert all(
                sum(data.column(c)[i].is_valid for c in data.column_names) == 1
                for i in range(data.num_rows)
            )
            for kind in ("add", "remove"):
                assert all(a["dataChange"] is False for a in _non_null(data, kind)), (name_, kind)

    # (b) + (c) the peers read the same version, files and rows
    assert_peers_agree(before_peers, table, "after our checkpoint")

    # (d) delete every commit and older checkpoint up to the version: everyone still reads it
    deleted = delete_history_before(table, before.version, keep=set(result.written))
    assert not [n for n in deleted if n in result.written]
    pruned = load_snapshot(table)
    assert state_facts(pruned) == expected
    assert_peers_agree(before_peers, table, "after deleting commits <= the checkpoint version")

    # (a') a far-future clock: every tombstone expires, nothing else changes
    if before.tombstones.num_rows or before.properties.set_transaction_retention_ms is not None:
        table2, before2, result2, now2 = _checkpoint_fixture_copy(
            name, tmp_path / "future", lambda s: FAR_FUTURE_MS
        )
        expected2 = expected_after_checkpoint(before2, now2)
        assert expected2["tombstones"] == {}
        assert state_facts(load_snapshot(table2)) == expected2
        if result2.kind != "v2":
            assert _non_null(written_parquet(table2, result2), "remove") == []


# =============================================== 2. same add set as deltalake's checkpoint
def _add_set(table: pa.Table) -> set[tuple]:
    adds = [a for a in table.column("add").to_pylist() if a is not None]
    # a parquet map reads back as a list of (key, value) pairs
    return {(a["path"], a["size"], tuple(sorted(a["partitionValues"] or []))) for a in adds}


@pytest.mark.parametrize(
    "name",
    [
        "delta-spark/dv-partitioned-with-checkpoint",
        "delta-rs/simple_table",
        "delta-rs/checkpoints",
        "delta-rs/delta-0.8.0-partitioned",
    ],
)
def test_same_add_set_as_deltalake_checkpoint(name, tmp_path):
    from deltalake import DeltaTable

    theirs = copy_fixture(name, tmp_path / "rs")
    ours = copy_fixture(name, tmp_path / "ours")
    version = load_snapshot(ours).version
    assert not checkpoints_at(ours, version)
    DeltaTable(str(theirs)).create_checkpoint()
    result = checkpoint(ours, now_ms=0)
    [rs_file] = [
        p for p in checkpoints_at(theirs, version) if p.name.endswith(".checkpoint.parquet")
    ]
    [our_file] = [log_dir(ours) / n for n in result.written]
    assert rs_file.name == our_file.name
    rs_adds, our_adds = _add_set(pq.read_table(rs_file)), _add_set(pq.read_table(our_file))
    assert our_adds == rs_adds
    assert len(our_adds) == load_snapshot(ours).num_files


# ===================================================== 3. field-by-field schema vs Spark
def _normalize(t: pa.DataType) -> Any:
    """A comparable description of an Arrow type: map entry names do not matter to readers."""
    if pa.types.is_map(t):
        return ("map", _normalize(t.key_type), _normalize(t.item_type), t.item_field.nullable)
    if pa.types.is_struct(t):
        return ("struct", [(f.name, _normalize(f.type), f.nullable) for f in t])
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return ("list", _normalize(t.value_type), t.value_field.nullable)
    return str(t)


SPARK_CHECKPOINTS = {
    "delta-spark/dv-partitioned-with-checkpoint": "00000000000000000010.checkpoint.parquet",
    "delta-spark/multi-part-checkpoint": "00000000000000000001.checkpoint.0000000001.0000000002.parquet",
}


@pytest.mark.parametrize("name", sorted(SPARK_CHECKPOINTS))
def test_classic_schema_matches_spark_field_by_field(name, tmp_path):
    spark = pq.ParquetFile(TABLES / name / "_delta_log" / SPARK_CHECKPOINTS[name]).schema_arrow
    table = copy_fixture(name, tmp_path)
    snap = load_snapshot(table)
    delete_checkpoint_at(table, snap.version)
    result = execute_checkpoint(plan_checkpoint(snap, 0))
    assert result.kind == "classic"
    ours = pq.ParquetFile(log_dir(table) / result.written[0]).schema_arrow

    assert ours.names == spark.names == TOP_LEVEL_COLUMNS
    for column in TOP_LEVEL_COLUMNS:
        theirs_t, ours_t = spark.field(column).type, ours.field(column).type
        assert ours.field(column).nullable
        if column != "add":
            assert _normalize(ours_t) == _normalize(theirs_t), column
            continue
        # Delta 4.1 adds clusteringProvider (before stats) and stats_parsed (last) to Spark 3.4's add
        expected = [(f.name, _normalize(f.type), f.nullable) for f in theirs_t]
        names = [f[0] for f in expected]
        expected.insert(names.index("stats"), ("clusteringProvider", "string", True))
        got = [(f.name, _normalize(f.type), f.nullable) for f in ours_t]
        assert got[-1][0] == "stats_parsed"
        assert got[:-1] == expected, column

    # every field at every depth is nullable, as Spark's schema.asNullable makes it
    def walk(t: pa.DataType, where: str):
        if pa.types.is_struct(t):
            for f in t:
                assert f.nullable, f"{where}.{f.name}"
                walk(f.type, f"{where}.{f.name}")

    for f in ours:
        walk(f.type, f.name)


def test_partition_values_parsed_has_sparks_typed_fields(tmp_path):
    name = "delta-spark/dv-partitioned-with-checkpoint"
    spark = pq.ParquetFile(TABLES / name / "_delta_log" / SPARK_CHECKPOINTS[name]).schema_arrow
    table = copy_fixture(name, tmp_path)
    result = checkpoint(table, now_ms=0)
    ours = pq.ParquetFile(log_dir(table) / result.written[0]).schema_arrow
    spark_pv = spark.field("add").type.field("partitionValues_parsed").type
    ours_pv = ours.field("add").type.field("partitionValues_parsed").type
    assert _normalize(ours_pv) == _normalize(spark_pv) == ("struct", [("part", "int32", True)])


@pytest.mark.parametrize(
    ("rows", "keys"),
    [
        ([[("a", "1")], [("a", None)], [("a", "3")]], ["a"]),
        ([[("a", "1"), ("b", "x")], [("a", "2"), ("b", None)]], ["a", "b"]),
        ([[("a", "1"), ("b", "x")], [("b", "y"), ("a", "2")]], ["a", "b"]),  # order differs
        ([[("a", "1"), ("b", "x")], [("a", "2")]], ["a", "b"]),  # a key missing
        ([[("a", "1")], [("c", "2")]], ["a"]),  # another key
        ([[("a", "1")], None], ["a"]),  # a null map
    ],
)
def test_partition_values_in_key_order_are_what_a_lookup_finds(rows, keys):
    """The strided fast path of `partitionValues_parsed` gives each key's value as a map
    lookup does, on whole and sliced maps, and stands aside (None) when rows differ."""
    from delta_ops.log.checkpoint_content import _values_in_key_order

    whole = pa.array([[("z", "0")]] + rows, pa.map_(pa.string(), pa.string()))
    for pv in (whole.slice(1), pa.array(rows, pa.map_(pa.string(), pa.string()))):
        lookups = [pc.map_lookup(pv, pa.scalar(k, pa.string()), "first") for k in keys]
        columns = _values_in_key_order(pv, keys)
        uniform = all(r is not None and [k for k, _ in r] == keys for r in rows)
        assert (columns is not None) == uniform
        if columns is not None:
            assert [c.to_pylist() for c in columns] == [c.to_pylist() for c in lookups]


def test_only_repeating_file_fields_are_dictionary_encoded(tmp_path):
    """A dictionary for the per-file unique fields (path, sizes, times, stats) is built only to
    overflow (a fifth of the write): they are plain; partition values keep theirs. The
    encoding changes nothing a reader gets (the state tests above read these files)."""
    table = copy_fixture("delta-spark/dv-partitioned-with-checkpoint", tmp_path)
    result = checkpoint(table, now_ms=0)
    metadata = pq.ParquetFile(log_dir(table) / result.written[0]).metadata
    encodings: dict[str, set[str]] = {}
    for group in range(metadata.num_row_groups):
        for i in range(metadata.num_columns):
            column = metadata.row_group(group).column(i)
            encodings.setdefault(column.path_in_schema, set()).update(column.encodings)
    for plain in ("add.path", "add.size", "add.stats", "add.deletionVector.pathOrInlineDv"):
        assert "RLE_DICTIONARY" not in encodings[plain], plain
    assert "RLE_DICTIONARY" in encodings["add.partitionValues.key_value.value"]
    assert "RLE_DICTIONARY" in encodings["add.partitionValues_parsed.part"]


# ================================================================ 4. expiry rules
NOW = 1_800_000_000_000


def _expiry_table(table: Path, configuration: dict[str, str], *, domains: bool = True) -> Path:
    commits = [
        [
            lb.commit_info(),
            lb.protocol(1, 7, writer_features=["domainMetadata"]),
            lb.metadata(configuration),
        ],
        [lb.add(f"f{i}.parquet") for i in range(5)] + [lb.add("live.parquet")],
        [
            # older than the cutoff: dropped
            lb.remove("f0.parquet", deletion_timestamp=NOW - HOUR_MS - 1),
            # exactly at the cutoff: dropped (the comparison is strict)
            lb.remove("f1.parquet", deletion_timestamp=NOW - HOUR_MS),
            # just inside: kept
            lb.remove("f2.parquet", deletion_timestamp=NOW - HOUR_MS + 1),
            # no deletionTimestamp (counts as 0): dropped
            {"remove": {"path": "f3.parquet", "dataChange": True, "size": 100}},
            # in the future: kept
            lb.remove("f4.parquet", deletion_timestamp=NOW + 5),
        ],
        [
            {"txn": {"appId": "old", "version": 1, "lastUpdated": NOW - HOUR_MS}},
            {"txn": {"appId": "fresh", "version": 2, "lastUpdated": NOW - HOUR_MS + 1}},
            {"txn": {"appId": "ancient", "version": 3, "lastUpdated": 0}},
            {"txn": {"appId": "untimed", "version": 4}},
        ],
        [
            {
                "cdc": {
                    "path": "_change_data/c.parquet",
                    "partitionValues": {},
                    "size": 5,
                    "dataChange": False,
                }
            },
            lb.commit_info(),
        ],
    ]
    if domains:
        commits.append(
            [
                {
                    "domainMetadata": {
                        "domain": "keep",
                        "configuration": '{"a":1}',
                        "removed": False,
                    }
                },
                {
                    "domainMetadata": {
                        "domain": "gone",
                        "configuration": '{"b":2}',
                        "removed": False,
                    }
                },
            ]
        )
        commits.append(
            [{"domainMetadata": {"domain": "gone", "configuration": "", "removed": True}}]
        )
    return write_table(table, commits)


def _non_null(table: pa.Table, column: str) -> list[dict]:
    return [v for v in table.column(column).to_pylist() if v is not None]


def test_tombstone_expiry_boundary_and_kept_txns_without_retention(tmp_path):
    table = _expiry_table(tmp_path / "t", {"delta.deletedFileRetentionDuration": "interval 1 hour"})
    plan = plan_checkpoint(load_snapshot(table), NOW)
    assert (plan.num_tombstones, plan.expired_tombstones) == (2, 3)
    result = execute_checkpoint(plan)
    written = pq.read_table(log_dir(table) / result.written[0])
    assert written.column_names == TOP_LEVEL_COLUMNS  # no commitInfo, no cdc column
    assert sorted(r["path"] for r in _non_null(written, "remove")) == ["f2.parquet", "f4.parquet"]
    # without delta.setTransactionRetentionDuration no txn expires, with or without lastUpdated
    txns = {t["appId"]: (t["version"], t["lastUpdated"]) for t in _non_null(written, "txn")}
    assert txns == {
        "old": (1, NOW - HOUR_MS),
        "fresh": (2, NOW - HOUR_MS + 1),
        "ancient": (3, 0),
        "untimed": (4, None),
    }
    assert _non_null(written, "domainMetadata") == [
        {"domain": "keep", "configuration": '{"a":1}', "removed": False}
    ]
    assert sorted(a["path"] for a in _non_null(written, "add")) == ["live.parquet"]
    after = load_snapshot(table)
    assert sorted(after.tombstones.column("path").to_pylist()) == ["f2.parquet", "f4.parquet"]
    assert set(after.txns) == {"old", "fresh", "ancient", "untimed"}
    assert set(after.domains) == {"keep"} and after.removed_domains == {}


def test_tombstone_one_ms_later_expires(tmp_path):
    table = _expiry_table(
        tmp_path / "t", {"delta.deletedFileRetentionDuration": "interval 1 hour"}, domains=False
    )
    result = execute_checkpoint(plan_checkpoint(load_snapshot(table), NOW + 1))
    written = pq.read_table(log_dir(table) / result.written[0])
    assert sorted(r["path"] for r in _non_null(written, "remove")) == ["f4.parquet"]


def test_txn_retention_drops_old_and_untimed_txns(tmp_path):
    table = _expiry_table(
        tmp_path / "t",
        {
            "delta.deletedFileRetentionDuration": "interval 1 hour",
            "delta.setTransactionRetentionDuration": "interval 1 hour",
        },
    )
    plan = plan_checkpoint(load_snapshot(table), NOW)
    assert (plan.num_txns, plan.expired_txns) == (1, 3)
    result = execute_checkpoint(plan)
    written = pq.read_table(log_dir(table) / result.written[0])
    assert [(t["appId"], t["version"]) for t in _non_null(written, "txn")] == [("fresh", 2)]
    assert set(load_snapshot(table).txns) == {"fresh"}


def test_default_tombstone_retention_is_one_week(tmp_path):
    week = 7 * 24 * HOUR_MS
    table = write_table(
        tmp_path / "t",
        [
            [lb.protocol(), lb.metadata()],
            [lb.add("a.parquet"), lb.add("b.parquet")],
            [
                lb.remove("a.parquet", deletion_timestamp=NOW - week),
                lb.remove("b.parquet", deletion_timestamp=NOW - week + 1),
            ],
        ],
    )
    result = execute_checkpoint(plan_checkpoint(load_snapshot(table), NOW))
    written = pq.read_table(log_dir(table) / result.written[0])
    assert [r["path"] for r in _non_null(written, "remove")] == ["b.parquet"]


# ======================================== 5. dataChange=false, remove fields, parsed columns
def test_file_actions_and_parsed_columns(tmp_path):
    name = "delta-spark/dv-partitioned-with-checkpoint"
    table = copy_fixture(name, tmp_path)
    snap = load_snapshot(table)
    result = execute_checkpoint(plan_checkpoint(snap, newest_deletion_timestamp(snap)))
    written = pq.read_table(log_dir(table) / result.written[0])
    adds, removes = _non_null(written, "add"), _non_null(written, "remove")
    assert len(adds) == snap.num_files == 15 and len(removes) > 0
    assert all(a["dataChange"] is False for a in adds)
    assert all(r["dataChange"] is False for r in removes)
    remove_fields = [f.name for f in written.schema.field("remove").type]
    assert "tags" not in remove_fields and "stats" not in remove_fields

    # stats_parsed: exactly the JSON stats, typed from the table schema (tightBounds: DVs on)
    add_type = written.schema.field("add").type
    stats_type = add_type.field("stats_parsed").type
    min_max = pa.struct([("col1", pa.int32()), ("col2", pa.string())])
    assert _normalize(stats_type) == _normalize(
        pa.struct(
            [
                ("numRecords", pa.int64()),
                ("minValues", min_max),
                ("maxValues", min_max),
                ("nullCount", pa.struct([("col1", pa.int64()), ("col2", pa.int64())])),
                ("tightBounds", pa.bool_()),
            ]
        )
    )
    for a in adds:
        stats = json.loads(a["stats"])
        parsed = a["stats_parsed"]
        assert parsed == {
            k: stats.get(k)
            for k in ("numRecords", "minValues", "maxValues", "nullCount", "tightBounds")
        }
        assert a["partitionValues_parsed"] == {"part": int(dict(a["partitionValues"])["part"])}

    # and the same as the library's own parser of the stats JSON
    from delta_ops.protocol.schema import parse_stats

    add_col = written.column("add").combine_chunks()
    rows = add_col.filter(add_col.is_valid())
    stats_col = rows.field("stats")
    assert (
        parse_stats(stats_col, pa.schema(list(stats_type))).to_pylist()
        == rows.field("stats_parsed").to_pylist()
    )


def test_column_mapping_parsed_columns_use_physical_names(tmp_path):
    name = "delta-rs/table_with_column_mapping"
    table = copy_fixture(name, tmp_path)
    snap = load_snapshot(table)
    physical = {
        f.name: f.metadata.get("delta.columnMapping.physicalName") for f in snap.schema.fields
    }
    result = execute_checkpoint(plan_checkpoint(snap, 0))
    written = pq.read_table(log_dir(table) / result.written[0])
    add_type = written.schema.field("add").type
    stats_type = add_type.field("stats_parsed").type
    data_physical = {physical[c] for c in physical if c not in snap.partition_columns}
    null_count_names = {f.name for f in stats_type.field("nullCount").type}
    assert null_count_names and null_count_names <= data_physical
    if snap.partition_columns:
        pv_names = [f.name for f in add_type.field("partitionValues_parsed").type]
        assert pv_names == [physical[c] for c in snap.partition_columns]
    for a in _non_null(written, "add"):
        stats = json.loads(a["stats"])
        assert a["stats_parsed"]["numRecords"] == stats["numRecords"]
        assert {k for k, v in a["stats_parsed"]["nullCount"].items()} == null_count_names


# ====================================================================== 6. V2 checkpoints
def test_v2_checkpoint_layout_and_peer_reads(tmp_path):
    name = "delta-spark/v2-checkpoint-json"
    before_peers = pristine_peer_view(name)
    table = copy_fixture(name, tmp_path)
    snap = load_snapshot(table)
    version = snap.version
    assert snap.properties.checkpoint_policy == "v2"
    delete_checkpoint_at(table, version)
    plan = plan_checkpoint(snap, newest_deletion_timestamp(snap))
    assert plan.kind == "v2" and plan.existing is None
    result = execute_checkpoint(plan)

    [top] = [n for n in result.written if not n.startswith("_sidecars/")]
    assert re.fullmatch(rf"{version:020d}\.checkpoint\.{UUID}\.json", top)
    lines = [json.loads(line) for line in (log_dir(table) / top).read_text().splitlines()]
    assert (
        list(lines[0]) == ["checkpointMetadata"]
        and lines[0]["checkpointMetadata"]["version"] == version
    )
    kinds = [next(iter(line)) for line in lines]
    n_sidecars = kinds.count("sidecar")
    assert n_sidecars >= 1 and kinds[1 : 1 + n_sidecars] == ["sidecar"] * n_sidecars
    assert "add" not in kinds and "remove" not in kinds
    assert kinds.count("protocol") == 1 and kinds.count("metaData") == 1
    assert len([k for k in kinds if k == "txn"]) == len(snap.txns)
    assert len([k for k in kinds if k == "domainMetadata"]) == len(snap.domains)

    sidecar_names = [line["sidecar"]["path"] for line in lines if "sidecar" in line]
    assert sorted(f"_sidecars/{n}" for n in sidecar_names) == sorted(
        n for n in result.written if n.startswith("_sidecars/")
    )
    add_paths, remove_paths = [], []
    for line in lines[1 : 1 + n_sidecars]:
        sc = line["sidecar"]
        assert "/" not in sc["path"]
        assert re.fullmatch(
            rf"{version:020d}\.checkpoint\.\d{{10}}\.\d{{10}}\.{UUID}\.parquet", sc["path"]
        )
        path = log_dir(table) / "_sidecars" / sc["path"]
        assert path.stat().st_size == sc["sizeInBytes"]
        data = pq.read_table(path)
        assert data.column_names == ["add", "remove"]
        for row in data.to_pylist():
            assert (row["add"] is None) != (row["remove"] is None)
        add_paths += [a["path"] for a in _non_null(data, "add")]
        remove_paths += [r["path"] for r in _non_null(data, "remove")]
    assert sorted(add_paths) == sorted(snap.files.column("path").to_pylist())
    assert sorted(remove_paths) == sorted(snap.tombstones.column("path").to_pylist())

    hint = read_hint(table)
    assert hint["version"] == version and hint["v2Checkpoint"]["path"] == top
    assert hint["v2Checkpoint"]["sizeInBytes"] == (log_dir(table) / top).stat().st_size
    parse_last_checkpoint((log_dir(table) / "_last_checkpoint").read_bytes())

    assert state_facts(load_snapshot(table)) == expected_after_checkpoint(
        snap, newest_deletion_timestamp(snap)
    )
    delete_history_before(table, version, keep={top})
    after = load_snapshot(table)
    assert after.segment.checkpoint.name == top
    assert state_facts(after) == expected_after_checkpoint(snap, newest_deletion_timestamp(snap))
    assert_peers_agree(before_peers, table, "reading our V2 checkpoint without older commits")


def test_v2_checkpoint_of_table_with_tombstones_txns_and_domains(tmp_path):
    table = write_table(
        tmp_path / "t",
        [
            [
                lb.protocol(
                    3,
                    7,
                    reader_features=["v2Checkpoint"],
                    writer_features=["v2Checkpoint", "domainMetadata"],
                ),
                lb.metadata({"delta.checkpointPolicy": "v2"}),
            ],
            [lb.add(f"f{i}.parquet") for i in range(6)],
            [
                lb.remove("f0.parquet", deletion_timestamp=NOW),
                lb.remove("f1.parquet", deletion_timestamp=NOW - 30 * 24 * HOUR_MS),
            ],
            [
                {"txn": {"appId": "app", "version": 3, "lastUpdated": NOW}},
                {"txn": {"appId": "untimed", "version": 1}},
                {"domainMetadata": {"domain": "d", "configuration": "{}", "removed": False}},
                {"domainMetadata": {"domain": "gone", "configuration": "{}", "removed": False}},
            ],
            [{"domainMetadata": {"domain": "gone", "configuration": "", "removed": True}}],
        ],
    )
    snap = load_snapshot(table)
    result = execute_checkpoint(plan_checkpoint(snap, NOW))
    assert result.kind == "v2"
    [top] = [n for n in result.written if not n.startswith("_sidecars/")]
    lines = [json.loads(line) for line in (log_dir(table) / top).read_text().splitlines()]
    assert [next(iter(line)) for line in lines] == [
        "checkpointMetadata",
        "sidecar",
        "protocol",
        "metaData",
        "txn",
        "txn",
        "domainMetadata",
    ]
    assert {
        line["txn"]["appId"]: line["txn"].get("lastUpdated") for line in lines if "txn" in line
    } == {"app": NOW, "untimed": None}
    assert [line["domainMetadata"] for line in lines if "domainMetadata" in line] == [
        {"domain": "d", "configuration": "{}", "removed": False}
    ]
    tags = lines[0]["checkpointMetadata"]["tags"]
    assert tags["numOfAddFiles"] == "4" and tags["sidecarNumActions"] == "5"
    [sidecar] = [n for n in result.written if n.startswith("_sidecars/")]
    data = pq.read_table(log_dir(table) / sidecar)
    assert sorted(a["path"] for a in _non_null(data, "add")) == [
        "f2.parquet",
        "f3.parquet",
        "f4.parquet",
        "f5.parquet",
    ]
    assert [r["path"] for r in _non_null(data, "remove")] == [
        "f0.parquet"
    ]  # f1 expired (default 1 week)
    assert all(r["dataChange"] is False for r in _non_null(data, "remove"))
    assert "tags" not in [f.name for f in data.schema.field("remove").type]
    delete_history_before(table, snap.version, keep={top})
    after = load_snapshot(table)
    assert after.segment.checkpoint.name == top
    assert state_facts(after) == expected_after_checkpoint(snap, NOW)
    assert deltalake_files(table) == (4, ["f2.parquet", "f3.parquet", "f4.parquet", "f5.parquet"])


def test_multi_part_refused_on_v2_policy(tmp_path):
    table = copy_fixture("delta-spark/v2-checkpoint-json", tmp_path)
    with pytest.raises(DeltaOpsError, match="multi-part"):
        plan_checkpoint(load_snapshot(table), 0, parts=3)


# ================================================================= 7. multi-part parts=3
def test_multi_part_checkpoint_three_parts(tmp_path):
    name = "delta-spark/dv-partitioned-with-checkpoint"
    before_peers = pristine_peer_view(name)
    table = copy_fixture(name, tmp_path)
    snap = load_snapshot(table)
    version = snap.version
    assert snap.num_files >= 10
    now = newest_deletion_timestamp(snap)
    result = execute_checkpoint(plan_checkpoint(snap, now, parts=3))
    assert result.kind == "multi-part"
    assert list(result.written) == [
        f"{version:020d}.checkpoint.{i:010d}.0000000003.parquet" for i in (1, 2, 3)
    ]

    part_of: dict[str, set[int]] = {}
    non_file: dict[str, int] = {"txn": 0, "metaData": 0, "protocol": 0, "domainMetadata": 0}
    adds, removes, rows = [], [], 0
    for i, name_ in enumerate(result.written):
        data = pq.read_table(log_dir(table) / name_)
        assert data.column_names == TOP_LEVEL_COLUMNS
        rows += data.num_rows
        for a in _non_null(data, "add"):
            part_of.setdefault(a["path"], set()).add(i)
            adds.append(a["path"])
        for r in _non_null(data, "remove"):
            part_of.setdefault(r["path"], set()).add(i)
            removes.append(r["path"])
        for col in non_file:
            non_file[col] += len(_non_null(data, col))
    assert all(len(parts) == 1 for parts in part_of.values()), part_of
    # a path with both a remove and an add (a DV update) exists, so clustering was exercised
    assert set(adds) & set(removes)
    assert non_file == {
        "txn": len(snap.txns),
        "metaData": 1,
        "protocol": 1,
        "domainMetadata": len(snap.domains),
    }
    assert sorted(adds) == sorted(snap.files.column("path").to_pylist())
    hint = read_hint(table)
    assert hint["parts"] == 3 and hint["version"] == version and hint["size"] == rows
    assert state_facts(load_snapshot(table)) == expected_after_checkpoint(snap, now)
    assert_peers_agree(before_peers, table, "after a 3-part checkpoint")
    delete_history_before(table, version, keep=set(result.written))
    assert state_facts(load_snapshot(table)) == expected_after_checkpoint(snap, now)
    assert_peers_agree(before_peers, table, "reading only the 3-part checkpoint")


def test_multi_part_with_more_parts_than_files(tmp_path):
    """Empty parts are still written (as Spark does), and the set is complete for readers."""
    table = write_table(
        tmp_path / "t", [[lb.protocol(), lb.metadata()], [lb.add("a.parquet"), lb.add("b.parquet")]]
    )
    result = checkpoint(table, parts=4, now_ms=0)
    assert len(result.written) == 4
    assert all((log_dir(table) / n).stat().st_size > 0 for n in result.written)
    after = load_snapshot(table)
    assert after.segment.checkpoint_version == 1 and len(after.segment.checkpoint.files) == 4
    assert sorted(after.files.column("path").to_pylist()) == ["a.parquet", "b.parquet"]
    assert deltalake_files(table) == (1, ["a.parquet", "b.parquet"])


# ======================================================================= 8. _last_checkpoint
def _reference_checksum(obj: dict) -> str:
    """The protocol's "Last Checkpoint File Schema" checksum, written independently of
    delta_ops.log.last_checkpoint."""
    safe = set(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~")

    def q(s: str) -> str:
        return '"' + "".join(chr(b) if b in safe else f"%{b:02X}" for b in s.encode()) + '"'

    pairs: list[str] = []

    def walk(node, path):
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, path + [q(k)])
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, path + [str(i)])
        else:
            if isinstance(node, str):
                val = q(node)
            elif node is None:
                val = "null"
            elif isinstance(node, bool):
                val = "true" if node else "false"
            else:
                val = json.dumps(node)
            p = "+".join(path)
            if p != '"checksum"':
                pairs.append(f"{p}={val}")

    walk(obj, [])
    return hashlib.md5(",".join(sorted(pairs)).encode()).hexdigest()


def test_last_checkpoint_contents(tmp_path):
    table = copy_fixture("delta-spark/dv-partitioned-with-checkpoint", tmp_path)
    snap = load_snapshot(table)
    result = execute_checkpoint(plan_checkpoint(snap, newest_deletion_timestamp(snap)))
    raw = (log_dir(table) / "_last_checkpoint").read_bytes()
    assert raw.count(b"\n") == 1 and raw.endswith(b"\n")
    hint = json.loads(raw)
    assert {
        "version",
        "size",
        "sizeInBytes",
        "numOfAddFiles",
        "checkpointSchema",
        "checksum",
    } <= set(hint)
    assert "parts" not in hint and "v2Checkpoint" not in hint
    info = parse_last_checkpoint(raw)  # raises on a checksum mismatch
    assert hint["checksum"] == _reference_checksum(hint)
    [name] = result.written
    written = pq.read_table(log_dir(table) / name)
    per_row = [
        sum(written.column(c)[i].is_valid for c in written.column_names)
        for i in range(written.num_rows)
    ]
    assert set(per_row) == {1}  # one action per row
    assert info.version == hint["version"] == 15
    assert hint["size"] == written.num_rows == result.num_actions
    assert hint["sizeInBytes"] == (log_dir(table) / name).stat().st_size
    assert hint["numOfAddFiles"] == snap.num_files == len(_non_null(written, "add"))
    schema = hint["checkpointSchema"]
    assert [f["name"] for f in schema["fields"]] == written.column_names
    add_schema = next(f for f in schema["fields"] if f["name"] == "add")["type"]
    assert [f["name"] for f in add_schema["fields"]] == [
        f.name for f in written.schema.field("add").type
    ]


def test_last_checkpoint_never_moves_back(tmp_path):
    table = copy_fixture("delta-rs/simple_table", tmp_path)
    latest = checkpoint(table, now_ms=0)
    assert latest.version == 4 and latest.last_checkpoint_updated
    hint_path = log_dir(table) / "_last_checkpoint"
    before = hint_path.read_bytes()
    older = checkpoint(table, version=2, now_ms=0)
    assert older.written == ("00000000000000000002.checkpoint.parquet",)
    assert older.last_checkpoint_updated is False
    assert hint_path.read_bytes() == before
    assert json.loads(before)["version"] == 4
    # the older checkpoint is itself a valid one
    assert load_snapshot(table, version=2).segment.checkpoint_version == 2
    assert load_snapshot(table).segment.checkpoint_version == 4


# =========================================================================== 9. idempotent
def test_second_checkpoint_is_reported_and_changes_nothing(tmp_path):
    table = copy_fixture("delta-rs/simple_table", tmp_path)
    first = checkpoint(table, now_ms=0)
    listing = log_listing(table)
    data = (log_dir(table) / first.written[0]).read_bytes()
    hint = (log_dir(table) / "_last_checkpoint").read_bytes()
    second = checkpoint(table, now_ms=FAR_FUTURE_MS)  # another clock would expire every tombstone
    assert second.skipped_existing == first.written[0]
    assert second.written == () and not second.last_checkpoint_updated
    assert log_listing(table) == listing  # same sizes, same mtimes, no new files
    assert (log_dir(table) / first.written[0]).read_bytes() == data
    assert (log_dir(table) / "_last_checkpoint").read_bytes() == hint


def test_existing_spark_checkpoint_is_not_rewritten(tmp_path):
    table = copy_fixture("delta-spark/multi-part-checkpoint", tmp_path)
    listing = log_listing(table)
    plan = plan_checkpoint(load_snapshot(table), 0)
    assert (
        plan.nothing_to_do
        and plan.existing == "00000000000000000001.checkpoint.0000000001.0000000002.parquet"
    )
    result = execute_checkpoint(plan)
    assert result.skipped_existing == plan.existing and result.written == ()
    assert log_listing(table) == listing


# ========================================================================= 10. crash safety
def _state_and_peers(table: Path) -> tuple[dict, dict]:
    return state_facts(load_snapshot(table)), peer_view(table)


def test_crash_before_last_checkpoint_leaves_a_readable_table(tmp_path, monkeypatch):
    table = copy_fixture("delta-spark/dv-partitioned-with-checkpoint", tmp_path)
    hint_before = (log_dir(table) / "_last_checkpoint").read_bytes()
    state_before, peers_before = _state_and_peers(table)

    def crash(self, path, data):
        raise OSError("injected crash before _last_checkpoint")

    with monkeypatch.context() as m:
        m.setattr(Storage, "write_atomic", crash)
        with pytest.raises(OSError, match="injected"):
            checkpoint(table, now_ms=0)
    cp = log_dir(table) / "00000000000000000015.checkpoint.parquet"
    assert cp.exists()  # the checkpoint was complete; only the hint is stale
    assert (log_dir(table) / "_last_checkpoint").read_bytes() == hint_before
    after = load_snapshot(table)
    assert after.segment.checkpoint_version == 15
    facts = state_facts(after)
    assert facts["files"] == state_before["files"]
    assert_peers_agree(peers_before, table, "after a crash before _last_checkpoint")


def test_rerun_after_crash_writes_last_checkpoint(tmp_path, monkeypatch):
    table = copy_fixture("delta-spark/dv-partitioned-with-checkpoint", tmp_path)

    def crash(self, path, data):
        raise OSError("injected crash before _last_checkpoint")

    with monkeypatch.context() as m:
        m.setattr(Storage, "write_atomic", crash)
        with pytest.raises(OSError):
            checkpoint(table, now_ms=0)
    checkpoint(table, now_ms=0)
    hint = parse_last_checkpoint((log_dir(table) / "_last_checkpoint").read_bytes())
    assert hint.version == 15


def _fail_checkpoint_writes(monkeypatch, should_fail) -> None:
    """Make every creation of a log file for which `should_fail(path)` crash part-way.

    Covers both ways the writer creates files: `put_if_absent` (whole bytes) and
    `create_new` (a streaming writer), which is made to emit some bytes and then fail, as a
    process dying mid-write would.
    """
    original_put = Storage.put_if_absent
    original_create = getattr(Storage, "create_new", None)

    def put(self, path, data):
        if should_fail(path):
            raise OSError(f"injected crash writing {path}")
        return original_put(self, path, data)

    def create(self, path, write, **kwargs):
        if not should_fail(path):
            return original_create(self, path, write, **kwargs)

        def partial(sink):
            sink.write(b"PAR1 partial")
            raise OSError(f"injected crash writing {path}")

        return original_create(self, path, partial, **kwargs)

    monkeypatch.setattr(Storage, "put_if_absent", put)
    if original_create is not None:
        monkeypatch.setattr(Storage, "create_new", create)


def test_crash_while_writing_checkpoint_file(tmp_path, monkeypatch):
    table = copy_fixture("delta-rs/simple_table", tmp_path)
    state_before, peers_before = _state_and_peers(table)
    listing = log_listing(table)
    with monkeypatch.context() as m:
        _fail_checkpoint_writes(m, lambda path: "checkpoint" in os.path.basename(path))
        with pytest.raises(OSError, match="injected"):
            checkpoint(table, now_ms=0)
    assert log_listing(table) == listing  # no final name, no temp file left behind
    assert not checkpoints_at(table, 4)
    assert state_facts(load_snapshot(table)) == state_before
    assert_peers_agree(peers_before, table, "after a crash while writing the checkpoint")
    # and a clean re-run then completes
    result = checkpoint(table, now_ms=0)
    assert (
        parse_last_checkpoint((log_dir(table) / "_last_checkpoint").read_bytes()).version
        == result.version
        == 4
    )


def test_crash_in_second_part_of_multi_part(tmp_path, monkeypatch):
    """An incomplete multi-part set is ignored by every reader."""
    table = copy_fixture("delta-rs/simple_table", tmp_path)
    state_before, peers_before = _state_and_peers(table)
    with monkeypatch.context() as m:
        _fail_checkpoint_writes(m, lambda path: ".checkpoint.0000000002.0000000003." in path)
        with pytest.raises(OSError, match="injected"):
            checkpoint(table, parts=3, now_ms=0)
    assert [p.name for p in checkpoints_at(table, 4)] == [
        "00000000000000000004.checkpoint.0000000001.0000000003.parquet"
    ]
    assert not (log_dir(table) / "_last_checkpoint").exists()
    snap = load_snapshot(table)
    assert snap.segment.checkpoint is None
    assert state_facts(snap) == state_before
    assert_peers_agree(peers_before, table, "with an incomplete multi-part checkpoint")


def test_crash_at_the_final_link_leaves_no_file_under_a_final_name(tmp_path, monkeypatch):
    """The temp file is complete, but publishing it fails: no partial name, no temp left."""
    import delta_ops.storage.local_backend as storage_mod

    table = copy_fixture("delta-rs/simple_table", tmp_path)
    listing = log_listing(table)

    def failing_link(src, dst, *a, **k):
        raise OSError("injected failure at link")

    monkeypatch.setattr(storage_mod.os, "link", failing_link)
    with pytest.raises(OSError, match="injected"):
        checkpoint(table, now_ms=0)
    monkeypatch.undo()
    assert log_listing(table) == listing
    assert deltalake_files(table)[0] == 4


def test_v2_crash_after_sidecars_before_top_level(tmp_path, monkeypatch):
    name = "delta-spark/v2-checkpoint-json"
    table = copy_fixture(name, tmp_path)
    delete_checkpoint_at(table, 2)
    state_before, peers_before = _state_and_peers(table)
    with monkeypatch.context() as m:
        _fail_checkpoint_writes(
            m, lambda path: "/_sidecars/" not in path and ".checkpoint." in os.path.basename(path)
        )
        with pytest.raises(OSError, match="injected"):
            checkpoint(table, now_ms=0)
    assert not checkpoints_at(table, 2)
    assert state_facts(load_snapshot(table)) == state_before
    assert_peers_agree(peers_before, table, "with orphan sidecars from a crashed V2 checkpoint")
    result = checkpoint(table, now_ms=0)
    assert result.kind == "v2" and load_snapshot(table).segment.checkpoint_version == 2


# =============================================================================== 11. refusal
def _ict_table(table: Path) -> Path:
    return write_table(
        table,
        [
            [
                lb.protocol(
                    3, 7, reader_features=[], writer_features=["redirectWriterOnly-preview"]
                ),
                lb.metadata(),
            ],
            [lb.add("a.parquet")],
        ],
    )


def test_refuses_unsupported_writer_feature(tmp_path):
    table = _ict_table(tmp_path / "t")
    listing = log_listing(table)
    snap = load_snapshot(table)
    with pytest.raises(UnsupportedFeature, match="redirectWriterOnly-preview") as exc:
        plan_checkpoint(snap, 0)
    assert "redirectWriterOnly-preview" in exc.value.features
    with pytest.raises(UnsupportedFeature):
        checkpoint(table, now_ms=0)
    assert log_listing(table) == listing


# =================================================================================== 12. CLI
def test_cli_json_writes_and_reports(tmp_path, capsys):
    table = copy_fixture("delta-rs/simple_table", tmp_path)
    assert cli.main(["checkpoint", str(table), "--json", "--now", "0ms"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1
    data = json.loads(out)
    assert data["written"] == ["00000000000000000004.checkpoint.parquet"] and data["version"] == 4
    assert data["dry_run"] is False and data["skipped_existing"] is None
    assert (log_dir(table) / data["written"][0]).exists()
    assert read_hint(table)["version"] == 4
    # again: reported as existing, nothing written
    assert cli.main(["checkpoint", str(table), "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert (
        again["written"] == []
        and again["skipped_existing"] == "00000000000000000004.checkpoint.parquet"
    )


def test_cli_dry_run_writes_nothing(tmp_path, capsys):
    table = copy_fixture("delta-rs/simple_table", tmp_path)
    listing = log_listing(table)
    assert cli.main(["checkpoint", str(table), "--dry-run", "--json", "--parts", "2"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["dry_run"] is True and data["kind"] == "multi-part" and data["version"] == 4
    assert data["files"] == [
        f"00000000000000000004.checkpoint.{i:010d}.0000000002.parquet" for i in (1, 2)
    ]
    assert data["num_add_files"] == 5
    assert cli.main(["checkpoint", str(table), "--dry-run", "--version", "2"]) == 0
    human = capsys.readouterr().out
    assert "00000000000000000002.checkpoint.parquet" in human
    assert log_listing(table) == listing


@pytest.mark.parametrize(
    "args_for, needle",
    [
        (lambda tmp, t: ["checkpoint", str(tmp / "missing")], "not a Delta table"),
        (lambda tmp, t: ["checkpoint", str(t), "--parts", "0"], "--parts"),
        (lambda tmp, t: ["checkpoint", str(t), "--version", "99"], "99"),
        (lambda tmp, t: ["checkpoint", str(_ict_table(tmp / "ict"))], "redirectWriterOnly-preview"),
    ],
    ids=["missing", "parts0", "no-version", "unsupported-feature"],
)
def test_cli_errors_are_one_line(tmp_path, capsys, args_for, needle):
    table = write_table(tmp_path / "t", [[lb.protocol(), lb.metadata()], [lb.add("a.parquet")]])
    args = args_for(tmp_path, table)
    listing = log_listing(table)
    # the user's input is wrong (a malformed option, a path that is no table): exit 2, as
    # argparse's own errors; a table we cannot act on: 1
    usage_error = needle in ("--parts", "not a Delta table", "99")  # 99: a version it lacks
    assert cli.main(args) == (2 if usage_error else 1)
    captured = capsys.readouterr()
    assert captured.out == ""
    err = captured.err
    assert err.count("\n") == 1 and err.startswith("delta-ops: error:") and needle in err
    assert log_listing(table) == listing


# =========================================================== more layouts and edge cases
def _schema_string(fields: list[tuple[str, str]], physical: dict[str, str] | None = None) -> str:
    out = []
    for i, (name, typ) in enumerate(fields, start=1):
        meta = {}
        if physical:
            meta = {"delta.columnMapping.id": i, "delta.columnMapping.physicalName": physical[name]}
        out.append({"name": name, "type": typ, "nullable": True, "metadata": meta})
    return json.dumps({"type": "struct", "fields": out})


def _metadata(
    schema_string: str, partition_columns: list[str], configuration: dict | None = None
) -> dict:
    md = lb.metadata(configuration, partition_columns=partition_columns)
    md["metaData"]["schemaString"] = schema_string
    return md


def _add(path: str, partition_values: dict, stats: dict | None = None) -> dict:
    action = lb.add(path, num_records=None)
    action["add"]["partitionValues"] = partition_values
    if stats is not None:
        action["add"]["stats"] = json.dumps(stats)
    return action


def test_typed_partition_values_and_null(tmp_path):
    import datetime as dt
    import decimal

    fields = [
        ("i", "integer"),
        ("l", "long"),
        ("d", "date"),
        ("b", "boolean"),
        ("s", "string"),
        ("m", "decimal(10,2)"),
        ("x", "long"),
    ]
    parts = ["i", "l", "d", "b", "s", "m"]
    table = write_table(
        tmp_path / "t",
        [
            [lb.protocol(), _metadata(_schema_string(fields), parts)],
            [
                _add(
                    "f1.parquet",
                    {
                        "i": "7",
                        "l": "-9000000000",
                        "d": "2021-02-03",
                        "b": "true",
                        "s": "a b",
                        "m": "12.34",
                    },
                    {
                        "numRecords": 2,
                        "minValues": {"x": 1},
                        "maxValues": {"x": 5},
                        "nullCount": {"x": 0},
                    },
                ),
                _add(
                    "f2.parquet",
                    {"i": None, "l": None, "d": None, "b": None, "s": None, "m": None},
                    {"numRecords": 1},
                ),
            ],
        ],
    )
    result = checkpoint(table, now_ms=0)
    written = pq.read_table(log_dir(table) / result.written[0])
    pv_type = written.schema.field("add").type.field("partitionValues_parsed").type
    assert [(f.name, str(f.type)) for f in pv_type] == [
        ("i", "int32"),
        ("l", "int64"),
        ("d", "date32[day]"),
        ("b", "bool"),
        ("s", "string"),
        ("m", "decimal128(10, 2)"),
    ]
    parsed = {a["path"]: a["partitionValues_parsed"] for a in _non_null(written, "add")}
    assert parsed["f1.parquet"] == {
        "i": 7,
        "l": -9_000_000_000,
        "d": dt.date(2021, 2, 3),
        "b": True,
        "s": "a b",
        "m": decimal.Decimal("12.34"),
    }
    assert parsed["f2.parquet"] == dict.fromkeys(parts)
    stats = {a["path"]: a["stats_parsed"] for a in _non_null(written, "add")}
    assert stats["f1.parquet"] == {
        "numRecords": 2,
        "minValues": {"x": 1},
        "maxValues": {"x": 5},
        "nullCount": {"x": 0},
    }
    assert stats["f2.parquet"] == {
        "numRecords": 1,
        "minValues": None,
        "maxValues": None,
        "nullCount": None,
    }
    # the JSON partition values themselves are kept as the log has them (null stays null)
    pvs = {a["path"]: dict(a["partitionValues"]) for a in _non_null(written, "add")}
    assert pvs["f2.parquet"] == dict.fromkeys(parts)
    delete_history_before(table, 1, keep=set(result.written))
    assert deltalake_files(table) == (1, ["f1.parquet", "f2.parquet"])
    snap = load_snapshot(table)
    assert {r["path"]: dict(r["partitionValues"]) for r in snap.files.to_pylist()} == pvs


def test_column_mapping_partitioned_table_uses_physical_names(tmp_path):
    fields = [("Part Col", "integer"), ("Value", "long")]
    physical = {"Part Col": "col-5a1c", "Value": "col-77be"}
    table = write_table(
        tmp_path / "t",
        [
            [
                lb.protocol(2, 5),
                _metadata(
                    _schema_string(fields, physical),
                    ["Part Col"],
                    {"delta.columnMapping.mode": "name", "delta.columnMapping.maxColumnId": "2"},
                ),
            ],
            [
                _add(
                    "p/f1.parquet",
                    {"col-5a1c": "3"},
                    {
                        "numRecords": 4,
                        "minValues": {"col-77be": 1},
                        "maxValues": {"col-77be": 9},
                        "nullCount": {"col-77be": 0},
                    },
                )
            ],
        ],
    )
    result = checkpoint(table, now_ms=0)
    written = pq.read_table(log_dir(table) / result.written[0])
    [add] = _non_null(written, "add")
    assert add["partitionValues_parsed"] == {"col-5a1c": 3}
    assert add["stats_parsed"] == {
        "numRecords": 4,
        "minValues": {"col-77be": 1},
        "maxValues": {"col-77be": 9},
        "nullCount": {"col-77be": 0},
    }
    delete_history_before(table, 1, keep=set(result.written))
    assert deltalake_files(table) == (1, ["p/f1.parquet"])


def test_partition_values_written_as_the_log_has_them(tmp_path):
    fields = [("a", "string"), ("b", "string"), ("id", "long")]
    schema = _schema_string(fields)
    removed = lb.remove("a=1/f1.parquet", deletion_timestamp=NOW)
    removed["remove"]["partitionValues"] = {"a": "1"}
    table = write_table(
        tmp_path / "t",
        [
            [lb.protocol(), _metadata(schema, ["a"]), _add("a=1/f1.parquet", {"a": "1"})],
            [_metadata(schema, ["b"]), removed, _add("b=x/f2.parquet", {"b": "x"})],
        ],
    )
    result = checkpoint(table, now_ms=0)
    written = pq.read_table(log_dir(table) / result.written[0])
    assert [dict(a["partitionValues"]) for a in _non_null(written, "add")] == [{"b": "x"}]
    assert [dict(r["partitionValues"]) for r in _non_null(written, "remove")] == [{"a": "1"}]


def test_stats_as_struct_only_checkpoint(tmp_path):
    """delta.checkpoint.writeStatsAsJson=false: no `add.stats`, stats live in stats_parsed."""
    table = write_table(
        tmp_path / "t",
        [
            [lb.protocol(), lb.metadata({"delta.checkpoint.writeStatsAsJson": "false"})],
            [lb.add("a.parquet", num_records=7), lb.add("b.parquet", num_records=3)],
        ],
    )
    result = checkpoint(table, now_ms=0)
    written = pq.read_table(log_dir(table) / result.written[0])
    add_fields = [f.name for f in written.schema.field("add").type]
    assert "stats" not in add_fields and add_fields[-1] == "stats_parsed"
    assert {a["path"]: a["stats_parsed"]["numRecords"] for a in _non_null(written, "add")} == {
        "a.parquet": 7,
        "b.parquet": 3,
    }
    delete_history_before(table, 1, keep=set(result.written))
    from deltalake import DeltaTable

    rs = pa.table(DeltaTable(str(table)).get_add_actions(flatten=True))
    assert dict(zip(rs.column("path").to_pylist(), rs.column("num_records").to_pylist())) == {
        "a.parquet": 7,
        "b.parquet": 3,
    }


def test_snapshot_from_stats_struct_only_checkpoint_keeps_num_records(tmp_path):
    table = write_table(
        tmp_path / "t",
        [
            [lb.protocol(), lb.metadata({"delta.checkpoint.writeStatsAsJson": "false"})],
            [lb.add("a.parquet", num_records=7), lb.add("b.parquet", num_records=3)],
        ],
    )
    assert load_snapshot(table).num_records == 10
    checkpoint(table, now_ms=0)
    after = load_snapshot(table)
    assert after.segment.checkpoint_version == 1
    assert after.num_records == 10


def test_v2_checkpoint_with_several_sidecars(tmp_path, monkeypatch):
    import delta_ops.ops.checkpoint_writer as op

    name = "kernel/v2-checkpoints-json-with-sidecars"
    before_peers = pristine_peer_view(name)
    table = copy_fixture(name, tmp_path)
    snap = load_snapshot(table)
    delete_checkpoint_at(table, snap.version)
    monkeypatch.setattr(op, "V2_ACTIONS_PER_SIDECAR", 40)
    plan = plan_checkpoint(snap, newest_deletion_timestamp(snap))
    n_actions = snap.num_files + plan.num_tombstones
    expected_sidecars = -(-n_actions // 40)
    assert plan.kind == "v2" and plan.num_parts == expected_sidecars >= 3
    result = execute_checkpoint(plan)
    sidecars = [n for n in result.written if n.startswith("_sidecars/")]
    [top] = [n for n in result.written if not n.startswith("_sidecars/")]
    assert len(sidecars) == expected_sidecars
    rows = [pq.read_metadata(log_dir(table) / n).num_rows for n in sidecars]
    assert sum(rows) == n_actions and max(rows) <= 40
    for i, n in enumerate(sorted(sidecars), start=1):
        assert re.search(
            rf"\.checkpoint\.{i:010d}\.{expected_sidecars:010d}\.{UUID}\.parquet$", n
        ), n
    top_lines = (log_dir(table) / top).read_text().splitlines()
    hint = read_hint(table)
    # Spark: size = sidecar rows + every top-level row; sizeInBytes = sidecars + top-level file
    assert hint["size"] == n_actions + len(top_lines)
    assert hint["sizeInBytes"] == sum((log_dir(table) / n).stat().st_size for n in result.written)
    assert len(hint["v2Checkpoint"]["sidecarFiles"]) == expected_sidecars
    delete_history_before(table, snap.version, keep={top})
    assert state_facts(load_snapshot(table)) == expected_after_checkpoint(
        snap, newest_deletion_timestamp(snap)
    )
    assert_peers_agree(before_peers, table, "reading a V2 checkpoint with several sidecars")


# ====================================================================== concurrent writers
def test_concurrent_checkpoint_first_writer_wins(tmp_path):
    table = copy_fixture("delta-rs/simple_table", tmp_path)
    plan_a = plan_checkpoint(load_snapshot(table), 0)
    plan_b = plan_checkpoint(load_snapshot(table), 0)
    result_b = execute_checkpoint(plan_b)
    [name] = result_b.written
    stat = (log_dir(table) / name).stat()
    data = (log_dir(table) / name).read_bytes()
    result_a = execute_checkpoint(plan_a)  # finds B's file under the name: keeps it
    assert result_a.version == 4
    assert (log_dir(table) / name).read_bytes() == data
    assert (log_dir(table) / name).stat().st_mtime_ns == stat.st_mtime_ns
    assert parse_last_checkpoint((log_dir(table) / "_last_checkpoint").read_bytes()).version == 4
    assert not [p for p in log_dir(table).iterdir() if p.is_file() and p.name.endswith(".tmp")]


def test_concurrent_checkpoint_with_other_expiry_is_not_called_corrupt(tmp_path):
    table = copy_fixture("delta-rs/simple_table", tmp_path)
    ours = plan_checkpoint(load_snapshot(table), 0)  # keeps the 31 tombstones
    theirs = plan_checkpoint(load_snapshot(table), FAR_FUTURE_MS)  # expires them all
    [name] = execute_checkpoint(theirs).written
    data = (log_dir(table) / name).read_bytes()
    result = execute_checkpoint(ours)
    assert result.skipped_existing == name or result.written == (name,)
    assert (log_dir(table) / name).read_bytes() == data


def test_zero_byte_file_at_checkpoint_name(tmp_path, capsys):
    table = copy_fixture("delta-rs/simple_table", tmp_path)
    (log_dir(table) / "00000000000000000004.checkpoint.parquet").write_bytes(b"")
    code = cli.main(["checkpoint", str(table), "--now", "0ms"])
    err = capsys.readouterr().err
    if code == 0:
        assert load_snapshot(table).segment.checkpoint_version == 4
    else:
        assert code == 1 and err.count("\n") == 1 and err.startswith("delta-ops: error:")
    assert load_snapshot(table).version == 4 and deltalake_files(table)[0] == 4


def test_stats_columns_property_shapes_stats_parsed(tmp_path):
    # delta.dataSkippingStatsColumns names the columns with stats; the checkpoint's stats_parsed
    # carries exactly those (this property used to crash the checkpoint).
    table = tmp_path / "t"
    stats = {
        "numRecords": 2,
        "minValues": {"id": 1},
        "maxValues": {"id": 5},
        "nullCount": {"id": 0},
    }
    add = lb.add("a.parquet")
    add["add"]["stats"] = json.dumps(stats)
    lb.write_commit(
        table,
        0,
        [
            lb.protocol(),
            lb.metadata({"delta.dataSkippingStatsColumns": "id"}),
            add,
        ],
    )
    snap = load_snapshot(table)
    result = execute_checkpoint(plan_checkpoint(snap, newest_deletion_timestamp(snap)))
    written = pq.read_table(log_dir(table) / result.written[0])
    parsed = [a["stats_parsed"] for a in _non_null(written, "add")]
    assert parsed == [stats]


def test_a_checkpoint_reads_the_log_listing_and_hint_no_more_than_it_needs(tmp_path, monkeypatch):
    """On an object store every listing and `_last_checkpoint` read is a round trip, and a
    listing of the whole log is one per thousand files. A run lists all of `_delta_log` once,
    for the load; before writing and after it, it lists only from the checkpoint's version on.
    It reads the hint for the load and before its update (not after: it knows what it wrote);
    planning reuses the load's listing and hint."""
    table = tmp_path / "t"
    for i in range(3):
        write_deltalake(table, pa.table({"a": [i]}), mode="append")
    calls: list[str] = []
    list_log, read_bytes = Storage.list_log, Storage.read_bytes

    def counted_list_log(self: Storage, subdir: str = "", *, from_version: Any = None) -> Any:
        calls.append("list" if from_version is None else f"list from {from_version}")
        return list_log(self, subdir, from_version=from_version)

    def counted_read_bytes(self: Storage, path: str) -> bytes:
        if path.endswith("_last_checkpoint"):
            calls.append("hint")
        return read_bytes(self, path)

    monkeypatch.setattr(Storage, "list_log", counted_list_log)
    monkeypatch.setattr(Storage, "read_bytes", counted_read_bytes)
    result = checkpoint(str(table))
    assert list(result.written) == ["00000000000000000002.checkpoint.parquet"]
    assert calls.count("list") == 1 and calls.count("list from 2") == 3, calls
    assert calls.count("hint") == 2, calls
