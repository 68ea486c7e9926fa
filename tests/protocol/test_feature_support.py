"""Per-operation feature support (issue 17): on a table whose protocol carries a feature, every
operation the feature allows runs and leaves the same rows; every one it refuses fails with one
line naming the feature and the operation, and the table's bytes stay exactly as they were."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from delta_ops import cli
from delta_ops.errors import UnsupportedFeature
from delta_ops.log.file_names import commit_file_name
from delta_ops.ops.checkpoint import checkpoint
from delta_ops.protocol.features import FEATURES, Access, Protocol
from delta_ops.table.scan import read_table
from delta_ops.table.snapshot import load_snapshot
from delta_ops.table.writer import write_arrow
from tests.support import deltalake_rows, duckdb_rows, file_digests

OPS = {
    "checkpoint": (Access.CHECKPOINT, ["checkpoint"]),
    "cleanup": (Access.CLEANUP, ["cleanup"]),
    "vacuum": (
        Access.VACUUM,
        ["vacuum", "--retention", "0h", "--force", "--in-flight-grace", "0s"],
    ),
    "row-tracking": (Access.ENABLE_ROW_TRACKING, ["enable-row-tracking"]),
    "recompute-stats": (Access.RECOMMIT, ["recompute-stats"]),
}
# feature -> operations it allows (the rest must be refused)
EXPECTED = {
    # commits of existing files keep their writer rules (issue 51, item 7)
    "icebergCompatV2": {"checkpoint", "cleanup", "vacuum", "read rows", "recompute-stats"},
    "collations": {"checkpoint", "cleanup", "vacuum", "read rows"},
    "variantShredding": {"checkpoint", "cleanup", "vacuum", "recompute-stats"},
    "geospatial": {"checkpoint", "cleanup", "vacuum"},
    "catalogManaged": {"checkpoint", "read rows"},
    "deletionVectors": {
        "checkpoint",
        "cleanup",
        "vacuum",
        "row-tracking",
        "recompute-stats",
        "write",
        "read rows",
    },
}
#: features delta-rs and DuckDB (delta-kernel) read; they refuse the others outright
PEERS_READ = {"icebergCompatV2", "deletionVectors"}


def _table_with(tmp_path: Path, feature: str) -> Path:
    """Two appends and an overwrite (so vacuum has work), then a commit adding `feature` to the
    protocol, written by hand as another engine would."""
    table = tmp_path / feature
    for start in (0, 10):
        write_arrow(table, pa.table({"id": pa.array(range(start, start + 3), pa.int64())}))
    write_arrow(table, pa.table({"id": pa.array([99], pa.int64())}), mode="overwrite")
    snapshot = load_snapshot(table)
    spec = FEATURES[feature]
    names = {feature, *spec.requires}
    reader = [n for n in names if FEATURES[n].is_reader_writer]
    action = {
        "minReaderVersion": 3 if reader else 1,
        "minWriterVersion": 7,
        **({"readerFeatures": sorted(reader)} if reader else {}),
        "writerFeatures": sorted(names | set(snapshot.protocol.effective_writer_features)),
    }
    Protocol.from_action(action)  # a protocol every reader accepts
    commit = table / "_delta_log" / commit_file_name(snapshot.version + 1)
    info = {"commitInfo": {"timestamp": 1, "operation": "UPGRADE PROTOCOL"}}
    commit.write_text(json.dumps(info) + "\n" + json.dumps({"protocol": action}) + "\n")
    return table


@pytest.mark.parametrize("feature", sorted(EXPECTED))
def test_each_operation_runs_or_is_refused_as_the_feature_says(
    feature: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = _table_with(tmp_path, feature)
    allowed = EXPECTED[feature]
    rows = (
        sorted(read_table(load_snapshot(table))["id"].to_pylist())
        if "read rows" in allowed
        else None
    )
    for name, (operation, args) in OPS.items():
        before = file_digests(table)
        code = cli.main([args[0], str(table), *args[1:]])
        out, err = capsys.readouterr()
        if name in allowed:
            assert code == 0, (feature, name, err)
        else:
            assert code != 0, (feature, name, out)
            lines = err.strip().splitlines()
            assert len(lines) == 1 and feature in lines[0], (feature, name, err)
            assert f"cannot {operation.value} this table" in lines[0], lines[0]
            assert file_digests(table) == before, (feature, name)
    before = file_digests(table)
    if "write" in allowed:
        write_arrow(table, pa.table({"id": pa.array([5], pa.int64())}))
    else:
        with pytest.raises(UnsupportedFeature, match=feature):
            write_arrow(table, pa.table({"id": pa.array([5], pa.int64())}))
        assert file_digests(table) == before
    if rows is not None:
        now = sorted(read_table(load_snapshot(table))["id"].to_pylist())
        assert now == sorted(rows + ([5] if "write" in allowed else []))
        if feature in PEERS_READ:  # the other features are refused by the peers themselves
            for peer in (deltalake_rows, duckdb_rows):
                assert sorted(r["id"] for r in peer(table)) == now, peer.__name__
    else:
        with pytest.raises(UnsupportedFeature, match=f"cannot read the rows of.*{feature}"):
            read_table(load_snapshot(table))


def test_inspect_lists_what_the_table_allows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = _table_with(tmp_path, "icebergCompatV2")
    assert cli.main(["inspect", str(table), "--json"]) == 0
    operations = json.loads(capsys.readouterr().out)["operations"]
    assert operations["vacuum"] == operations["checkpoint"] == "allowed"
    assert operations["write"] == "refused: icebergCompatV2"
    assert cli.main(["inspect", str(table)]) == 0
    assert "write: refused: icebergCompatV2" in capsys.readouterr().out


def _geospatial_table(tmp_path: Path, configuration: dict[str, str] | None = None) -> Path:
    """A geometry column as Delta 4 writes it: WKB values, WKT bounding-box corners as its
    min/max stats, the `geospatial` reader-writer feature; stats also kept as structs."""
    table = tmp_path / "geo"
    (table / "_delta_log").mkdir(parents=True)
    wkb = bytes.fromhex("0101000000000000000000f03f0000000000000040")  # POINT (1 2)
    schema = {
        "type": "struct",
        "fields": [
            {"name": "id", "type": "long", "nullable": True, "metadata": {}},
            {"name": "geom", "type": "geometry(OGC:CRS84)", "nullable": True, "metadata": {}},
        ],
    }
    lines = [
        {"commitInfo": {"timestamp": 1, "operation": "CREATE TABLE"}},
        {
            "protocol": {
                "minReaderVersion": 3,
                "minWriterVersion": 7,
                "readerFeatures": ["geospatial"],
                "writerFeatures": ["geospatial"],
            }
        },
        {
            "metaData": {
                "id": "geo",
                "format": {"provider": "parquet", "options": {}},
                "schemaString": json.dumps(schema),
                "partitionColumns": [],
                "configuration": {
                    "delta.checkpoint.writeStatsAsStruct": "true",
                    **(configuration or {}),
                },
            }
        },
    ]
    for n in range(2):
        name = f"part-{n}.parquet"
        pa_table = pa.table({"id": pa.array([n], pa.int64()), "geom": pa.array([wkb])})
        pq.write_table(pa_table, table / name)
        stats = {
            "numRecords": 1,
            "minValues": {"id": n, "geom": "POINT (1 2)"},
            "maxValues": {"id": n, "geom": "POINT (1 2)"},
            "nullCount": {"id": 0, "geom": 0},
        }
        add = {
            "path": name,
            "partitionValues": {},
            "size": (table / name).stat().st_size,
            "modificationTime": 1,
            "dataChange": True,
            "stats": json.dumps(stats),
        }
        lines.append({"add": add})
    (table / "_delta_log" / commit_file_name(0)).write_text(
        "".join(json.dumps(a) + "\n" for a in lines)
    )
    return table


@pytest.mark.parametrize("write_stats_as_json", [None, "false"])
def test_geospatial_checkpoint_keeps_json_stats_and_types_what_it_can(
    tmp_path: Path, write_stats_as_json: str | None
) -> None:
    """The bounding boxes live only in the JSON stats, so the checkpoint keeps them even
    where the table asks for struct stats alone (`writeStatsAsJson=false`)."""
    configuration = {}
    if write_stats_as_json is not None:
        configuration["delta.checkpoint.writeStatsAsJson"] = write_stats_as_json
    table = _geospatial_table(tmp_path, configuration)
    before = load_snapshot(table).files.select(["path", "size", "stats"]).sort_by("path")
    checkpoint(str(table))
    written = table / "_delta_log" / "00000000000000000000.checkpoint.parquet"
    adds = [r for r in pq.read_table(written).column("add").to_pylist() if r]
    parsed = adds[0]["stats_parsed"]
    assert set(parsed["minValues"]) == {"id"}  # the geometry bounding box is not typed
    assert set(parsed["nullCount"]) == {"id", "geom"}
    assert sorted(a["stats"] for a in adds) == sorted(before.column("stats").to_pylist())
    after = load_snapshot(table)
    assert after.segment.checkpoint_version == 0
    assert after.files.select(["path", "size", "stats"]).sort_by("path").equals(before)
    with pytest.raises(UnsupportedFeature, match="cannot read the rows of.*geospatial"):
        read_table(after)
