"""Inline deletion vectors in both writers' encodings, read at every version by delta-ops (the
scan, and the count `inspect` reports) and by the peers: DuckDB's delta extension and delta-rs
(both delta-kernel-rs / the z85 crate underneath). The tables come from tests/support/dv_tables.py,
which the Delta Spark reference tier builds as well."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from delta_ops.service.inspect import summarize
from delta_ops.table.scan import read_table
from delta_ops.table.snapshot import load_snapshot
from tests.support import deltalake_rows, duckdb_connection
from tests.support.dv_tables import (
    EXPECTED_VALUES,
    RUST_TAIL_DV,
    RUST_TAIL_VERSION,
    DvText,
    build_inline_dv_history,
)


def _duckdb_values(root: Path, version: int) -> list[int]:
    con = duckdb_connection()
    try:
        sql = f"SELECT value FROM delta_scan('{root}', version => {version})"
        return sorted(row[0] for row in con.sql(sql).fetchall())
    finally:
        con.close()


def _our_values(root: Path, version: int) -> list[int]:
    return sorted(read_table(load_snapshot(str(root), version=version)).column("value").to_pylist())


def _inspect_count(root: Path, version: int) -> int:
    """The rows `inspect` counts (numRecords less the DVs' cardinalities), once its check of
    the DVs against those counts found nothing wrong."""
    summary = summarize(load_snapshot(str(root), version=version))
    assert summary.num_records is not None and summary.deletion_vectors is not None
    assert summary.deletion_vectors["bad"] == [], summary.deletion_vectors
    return summary.num_records - summary.num_deleted_records


def test_the_rust_table_holds_the_kernel_tables_text(tmp_path):
    """The table built with the z85 crate's encoding carries delta-kernel-rs' own v5 text."""
    root = build_inline_dv_history(tmp_path / "t", DvText.Z85_CRATE)
    commit = root / "_delta_log" / f"{RUST_TAIL_VERSION:020d}.json"
    [add] = [json.loads(x)["add"] for x in commit.read_text().splitlines() if '"add"' in x]
    assert add["deletionVector"] == {
        "storageType": "i",
        "pathOrInlineDv": RUST_TAIL_DV,
        "sizeInBytes": 34,
        "cardinality": 1,
    }


@pytest.mark.parametrize("encoding", list(DvText))
def test_every_reader_sees_the_same_rows_at_every_version(tmp_path, encoding):
    """At v5 the DV deletes row 3: 9 of the 10 rows, in delta-ops' scan and count, in DuckDB
    and in delta-rs, whichever encoder wrote the DV's text."""
    root = build_inline_dv_history(tmp_path / encoding.value, encoding)
    for version, expected in EXPECTED_VALUES.items():
        assert _our_values(root, version) == expected, version
        assert _inspect_count(root, version) == len(expected), version
        assert _duckdb_values(root, version) == expected, version
        peer = [row["value"] for row in deltalake_rows(root, version=version)]
        assert sorted(peer) == expected, version
    assert len(EXPECTED_VALUES[RUST_TAIL_VERSION]) == 9
