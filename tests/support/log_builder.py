"""Writing small Delta logs by hand for tests: JSON commits from plain action dicts.

Tests use this to build histories that exercise the reader (and, through hypothesis,
thousands of them); it deliberately bypasses delta-ops' own writers so that a bug in those
cannot hide a bug in the reader.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SCHEMA_STRING = json.dumps(
    {
        "type": "struct",
        "fields": [
            {"name": "id", "type": "long", "nullable": True, "metadata": {}},
            {"name": "part", "type": "string", "nullable": True, "metadata": {}},
        ],
    },
    separators=(",", ":"),
)


def protocol(reader: int = 1, writer: int = 2, **features: list[str]) -> dict[str, Any]:
    p: dict[str, Any] = {"minReaderVersion": reader, "minWriterVersion": writer}
    if "reader_features" in features:
        p["readerFeatures"] = features["reader_features"]
    if "writer_features" in features:
        p["writerFeatures"] = features["writer_features"]
    return {"protocol": p}


def metadata(
    configuration: dict[str, str] | None = None,
    partition_columns: list[str] | None = None,
    table_id: str = "test-table",
) -> dict[str, Any]:
    return {
        "metaData": {
            "id": table_id,
            "format": {"provider": "parquet", "options": {}},
            "schemaString": SCHEMA_STRING,
            "partitionColumns": partition_columns or [],
            "configuration": configuration or {},
            "createdTime": 1_700_000_000_000,
        }
    }


def add(
    path: str,
    *,
    size: int = 100,
    num_records: int | None = 10,
    dv: dict | None = None,
    part: str | None = None,
    mtime: int = 1_700_000_000_000,
) -> dict[str, Any]:
    a: dict[str, Any] = {
        "path": path,
        "partitionValues": {"part": part} if part is not None else {},
        "size": size,
        "modificationTime": mtime,
        "dataChange": True,
    }
    if num_records is not None:
        a["stats"] = json.dumps({"numRecords": num_records})
    if dv is not None:
        a["deletionVector"] = dv
    return {"add": a}


def remove(
    path: str,
    *,
    deletion_timestamp: int = 1_700_000_000_000,
    dv: dict | None = None,
    size: int = 100,
) -> dict[str, Any]:
    r: dict[str, Any] = {
        "path": path,
        "deletionTimestamp": deletion_timestamp,
        "dataChange": True,
        "size": size,
    }
    if dv is not None:
        r["deletionVector"] = dv
    return {"remove": r}


def commit_info(timestamp: int = 1_700_000_000_000, operation: str = "WRITE") -> dict[str, Any]:
    return {
        "commitInfo": {
            "timestamp": timestamp,
            "operation": operation,
            "operationParameters": {"mode": "Append"},
        }
    }


def write_commit(table: Path, version: int, actions: list[dict[str, Any]]) -> Path:
    log = table / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    path = log / f"{version:020d}.json"
    path.write_text("".join(json.dumps(a) + "\n" for a in actions))
    return path


def inline_dv(rows_tag: int, cardinality: int = 1) -> dict[str, Any]:
    """A syntactically distinct inline DV descriptor (keys only matter for reconciliation)."""
    return {
        "storageType": "i",
        "pathOrInlineDv": f"wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi{rows_tag:03d}",
        "sizeInBytes": 36,
        "cardinality": cardinality,
    }
