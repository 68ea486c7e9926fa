"""Multi-part checkpoints whose parts have different schemas (Delta Spark 3.5 writes each part
with the schema of its rows): every operation reads them, and the peers (`deltalake`, DuckDB's
`delta` extension) read what the operations leave. The table is built by
:mod:`tests.support.multipart_schemas`."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from delta_ops import cli
from delta_ops.ops.checkpoint import execute_checkpoint, plan_checkpoint
from delta_ops.table.snapshot import load_head, load_snapshot
from tests.support import deltalake_files, deltalake_rows, duckdb_rows
from tests.support.multipart_schemas import PARTS, build_multipart_schema_table

DAY_MS = 86_400_000


@pytest.fixture
def table(tmp_path: Path) -> Path:
    built = build_multipart_schema_table(tmp_path)
    assert deltalake_rows(built) == duckdb_rows(built)  # the peers agree on the fixture
    return built


def _parts(table: Path) -> list[Path]:
    return sorted((table / "_delta_log").glob(f"*.checkpoint.*.{PARTS:010d}.parquet"))


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> dict:
    assert cli.main([*args, "--json"]) == 0, capsys.readouterr().err
    out: dict = json.loads(capsys.readouterr().out)
    return out


def _age_everything(table: Path, days: int) -> None:
    """Date every file of the table `days` ago (the log keeps its order in time)."""
    start = time.time() - days * 86_400
    for root, _, files in os.walk(table):
        for i, name in enumerate(sorted(files)):
            os.utime(os.path.join(root, name), (start + i, start + i))


def test_the_parts_really_have_different_minimal_schemas(table: Path) -> None:
    schemas = [pq.read_schema(p) for p in _parts(table)]
    assert [s.names for s in schemas] == [
        ["txn"],
        ["protocol", "metaData"],
        ["add"],
        ["add", "remove"],
        ["remove"],
    ]
    lean_add = schemas[2].field("add").type
    assert lean_add.get_field_index("stats") < 0 and lean_add.get_field_index("tags") < 0
    assert schemas[3].field("remove").type.get_field_index("deletionVector") < 0
    assert schemas[4].field("remove").type.get_field_index("deletionVector") >= 0
    assert schemas[4].field("remove").type.get_field_index("size") < 0


def test_inspect_reports_the_state_peers_read(
    table: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    summary = _run(["inspect", str(table), "--files"], capsys)
    version, files = deltalake_files(table)
    assert summary["version"] == version
    assert sorted(summary["files"]) == files
    assert summary["num_tombstones"] == 2
    assert summary["num_txns"] == 1
    assert summary["num_deleted_records"] == 3  # the inline DV's rows
    assert summary["last_checkpoint_version"] == version - 1
    assert cli.main(["inspect", str(table)]) == 0  # the text rendering too
    assert f"live files:       {len(files)} (" in capsys.readouterr().out


@pytest.mark.parametrize("streamed", [False, True], ids=["loaded", "streamed"])
def test_checkpoint_from_the_multi_part_checkpoint(table: Path, streamed: bool) -> None:
    rows = deltalake_rows(table)
    files = deltalake_files(table)
    before = load_snapshot(table)
    source = load_head(table) if streamed else before
    plan = plan_checkpoint(source, int(time.time() * 1000), stream_above=0 if streamed else None)
    result = execute_checkpoint(plan)
    assert result.version == before.version
    # the new checkpoint alone now rebuilds the state: hide the old parts from every reader
    for part in _parts(table):
        part.unlink()
    after = load_snapshot(table)
    assert after.segment.checkpoint_version == before.version and not after.segment.commits
    assert after.txns == before.txns
    assert after.tombstones.num_rows == before.tombstones.num_rows
    assert deltalake_files(table) == files
    assert deltalake_rows(table) == rows == duckdb_rows(table)


def test_cleanup_deletes_the_commits_the_checkpoint_replaces(
    table: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = deltalake_rows(table)
    _age_everything(table, days=40)
    checkpoint = load_snapshot(table).segment.checkpoint_version
    assert checkpoint is not None
    result = _run(["cleanup", str(table), "--retention", "1d"], capsys)
    left = sorted(p.name for p in (table / "_delta_log").glob("*.json"))
    assert result["deleted"] and left[0] == f"{checkpoint:020d}.json"  # older ones went
    assert len(_parts(table)) == PARTS
    assert deltalake_rows(table) == rows == duckdb_rows(table)


def test_vacuum_deletes_only_what_no_version_needs(
    table: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = deltalake_rows(table)
    _age_everything(table, days=40)
    snapshot = load_snapshot(table)
    tombstones = set(snapshot.tombstones.column("path").to_pylist())
    live = set(snapshot.files.column("path").to_pylist())
    # one tombstone's file is still live under a new deletion vector; the other is gone
    expected = {p for p in tombstones if p not in live}
    old_dv = [p.name for p in table.glob("deletion_vector_*.bin")]
    assert len(expected) == 1 and len(old_dv) == 1
    _run(["vacuum", str(table), "--retention", "0h", "--force"], capsys)
    for path in expected | set(old_dv):
        assert not (table / path).exists(), path
    for path in live:
        assert (table / path).exists(), path
    assert deltalake_rows(table) == rows == duckdb_rows(table)


@pytest.mark.parametrize("op", ["purge", "compact", "enable-row-tracking"])
def test_rewrites_and_backfill_keep_the_rows(
    table: Path, op: str, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = deltalake_rows(table)
    before = load_snapshot(table).version
    _run([op, str(table)], capsys)
    after = load_snapshot(table)
    assert after.version > before
    assert deltalake_rows(table) == rows == duckdb_rows(table)
    if op == "enable-row-tracking":
        assert after.files.column("baseRowId").null_count == 0
    if op == "purge":
        assert after.files.column("deletionVector").null_count == after.files.num_rows


@pytest.mark.spark
def test_spark_reads_the_rows_peers_read(table: Path, spark) -> None:  # type: ignore[no-untyped-def]
    ours = spark.read.format("delta").load(str(table)).collect()
    assert sorted(r.value for r in ours) == sorted(r["value"] for r in duckdb_rows(table))
