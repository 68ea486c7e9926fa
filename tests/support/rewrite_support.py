"""Tables for the rewrite tests (purge, compaction): deletion vectors made the way a DELETE
makes them, and row ids read back by the id column's value."""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from delta_ops.ops.row_tracking import row_ids
from delta_ops.protocol.deletion_vectors import inline_descriptor
from delta_ops.table.snapshot import load_snapshot
from delta_ops.table.transaction import Transaction
from delta_ops.table.writer import write_arrow


def dv_table(tmp_path: Path, configuration: dict[str, str] | None = None) -> Path:
    """Two files of 4 rows (ids 0-3, 10-13); a DELETE gives the first 1 deleted row, the second
    3, by deletion vectors."""
    table = tmp_path / "t"
    config = {"delta.enableDeletionVectors": "true", **(configuration or {})}
    write_arrow(table, pa.table({"id": pa.array([0, 1, 2, 3], pa.int64())}), configuration=config)
    write_arrow(table, pa.table({"id": pa.array([10, 11, 12, 13], pa.int64())}))
    snapshot = load_snapshot(table)
    txn = Transaction(snapshot, operation="DELETE")
    for body in snapshot.files.to_pylist():
        first = pq.read_table(table / body["path"]).column("id")[0].as_py()
        deleted = [1] if first == 0 else [0, 2, 3]
        add = {k: v for k, v in body.items() if v is not None and k != "version"}
        add["partitionValues"] = dict(add.get("partitionValues") or {})
        add.pop("tags", None)
        remove = {
            "path": add["path"],
            "deletionTimestamp": int(time.time() * 1000),
            "dataChange": True,
            "extendedFileMetadata": True,
            "partitionValues": add["partitionValues"],
            "size": add["size"],
        }
        for key in ("baseRowId", "defaultRowCommitVersion"):
            if key in add:
                remove[key] = add[key]
        txn.add_action({"remove": remove})
        txn.add_action({"add": {**add, "deletionVector": inline_descriptor(deleted).to_dict()}})
    txn.commit()
    return table


def ids_by_value(table: Path) -> dict[int, int]:
    """id column value -> row id, for every live row."""
    snapshot = load_snapshot(table)
    out = {}
    for row in row_ids(snapshot).to_pylist():
        values = pq.read_table(table / row["path"], columns=["id"]).column("id")
        out[values[row["row_index"]].as_py()] = row["row_id"]
    return out


def many_small_appends(table: Path, appends: int = 12, configuration: dict | None = None) -> None:
    """`appends` writes of 2 rows (ids 0, 1, 2, ...) alternating between partitions day=b and
    day=a: small files for compaction to pack."""
    for i in range(appends):
        ids = pa.array([2 * i, 2 * i + 1], pa.int64())
        write_arrow(
            table,
            pa.table({"id": ids, "day": pa.array(["a" if i % 2 else "b"] * 2)}),
            partition_by=["day"],
            configuration=configuration if i == 0 else None,
        )


def corrupt_a_file(table: Path, partition: str = "day=a") -> tuple[str, bytes]:
    """Overwrite one live file of `partition` with bytes that are not parquet; returns its
    path and its original bytes (to restore it)."""
    paths = load_snapshot(table).files.column("path").to_pylist()
    corrupt = next(p for p in paths if p.startswith(f"{partition}/"))
    original = (table / corrupt).read_bytes()
    (table / corrupt).write_bytes(b"not parquet")
    return corrupt, original
