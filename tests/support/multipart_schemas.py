"""A table whose multi-part checkpoint has parts of different, minimal schemas, as Delta Spark
3.5 writes them: each part with the schema of the rows in it.

The protocol ("Checkpoints", "Multi-part checkpoint") asks every part to hold a subset of the
actions; it does not ask the parts to share one parquet schema, and Spark writes each part with
only the columns (and struct fields) its rows use. :func:`build_multipart_schema_table` makes
such a table from a real Databricks-written table with deletion vectors:

* version 0 and 1 of ``delta-rs/table-with-dv-small`` (an add given a deletion vector);
* version 2: ``deltalake`` appends rows in a new file;
* version 3: a hand-written commit with a ``txn`` action (an application's progress);
* version 4: a hand-written commit giving the file with the deletion vector a larger, inline
  one (the old descriptor becomes a tombstone with a deletion vector);
* version 5-7: ``deltalake`` appends and the removal of one appended file;
* a 5-part checkpoint at the last version, then commits after it.

The parts: part 1 holds only ``txn``; part 2 ``protocol`` and ``metaData``; part 3 adds whose
``add`` struct lacks ``stats``, ``tags`` and
``deletionVector``; part 4 adds with every field and the
tombstones without a deletion vector (a ``remove`` struct without ``deletionVector``); part 5
the tombstone with a deletion vector and nothing else.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from delta_ops.protocol.deletion_vectors import inline_descriptor
from tests.support import copy_fixture
from tests.support.log_builder import write_commit

PARTS = 5
#: the optional `add` fields part 3 lacks; `partitionValues` is required (delta-kernel refuses
#: a part without it), so it stays
LEAN_ADD_DROPS = frozenset({"stats", "stats_parsed", "tags", "deletionVector", "baseRowId"})


def _drop_fields(typ: pa.StructType, drop: set[str]) -> pa.StructType:
    return pa.struct([typ.field(i) for i in range(typ.num_fields) if typ.field(i).name not in drop])


def _write_part(path: Path, rows: list[dict[str, Any]], fields: list[pa.Field]) -> None:
    """One part holding `rows` with exactly the top-level columns `fields`."""
    schema = pa.schema(fields)
    names = set(schema.names)
    kept = [{k: v for k, v in row.items() if k in names} for row in rows]
    table = pa.Table.from_pylist(kept, schema=schema)
    pq.write_table(table, path)


def _last_version(table: Path) -> int:
    return max(int(p.name[:20]) for p in (table / "_delta_log").glob("*.json"))


def _commit(table: Path, actions: list[dict[str, Any]]) -> int:
    version = _last_version(table) + 1
    info = {"commitInfo": {"timestamp": int(time.time() * 1000), "operation": "WRITE"}}
    write_commit(table, version, [info, *actions])
    return version


def _append(table: Path, ids: range) -> None:
    from deltalake import write_deltalake

    data = pa.table({"value": pa.array(list(ids), pa.int32())})
    write_deltalake(str(table), data, mode="append")


def build_multipart_schema_table(dest: Path) -> Path:
    """The table described in the module docstring, under `dest`; returns its path."""
    table = copy_fixture("delta-rs/table-with-dv-small", dest)
    _append(table, range(100, 105))
    _commit(table, [{"txn": {"appId": "pipeline-7", "version": 41, "lastUpdated": 1}}])
    log0 = (table / "_delta_log" / "00000000000000000001.json").read_text().splitlines()
    dv_add = next(json.loads(line)["add"] for line in log0 if '"add"' in line)
    now = int(time.time() * 1000)
    remove = {
        "path": dv_add["path"],
        "deletionTimestamp": now,
        "dataChange": True,
        "extendedFileMetadata": True,
        "partitionValues": {},
        "size": dv_add["size"],
        "deletionVector": dv_add["deletionVector"],
    }
    # the file's deletion vector grows by one row (an inline DV now): its old descriptor is
    # a tombstone with a deletion vector, and purge has a file to rewrite
    grown = inline_descriptor([0, 4, 9]).to_dict()
    _commit(table, [{"remove": remove}, {"add": {**dv_add, "deletionVector": grown}}])
    _append(table, range(200, 203))
    _remove_newest_file(table, now)
    _append(table, range(300, 304))
    version = _last_version(table)
    _split_into_parts(table, version)
    _append(table, range(400, 402))
    return table


def _remove_newest_file(table: Path, now: int) -> None:
    """Commit the removal of the file the last commit added (a tombstone without a DV)."""
    last = (table / "_delta_log" / f"{_last_version(table):020d}.json").read_text()
    add = next(json.loads(line)["add"] for line in last.splitlines() if '"add"' in line)
    keys = ("path", "partitionValues", "size")
    _commit(
        table,
        [{"remove": {**{k: add[k] for k in keys}, "deletionTimestamp": now, "dataChange": True}}],
    )


def _classic_checkpoint_rows(table: Path, version: int) -> tuple[pa.Schema, list[dict]]:
    """The rows and schema of a classic checkpoint of `version`, written by delta-ops into a
    scratch copy (the parts are cut from it)."""
    from delta_ops.ops.checkpoint import checkpoint

    scratch = table.parent / (table.name + "-scratch")
    shutil.copytree(table, scratch)
    try:
        checkpoint(str(scratch), version=version)
        data = pq.read_table(scratch / "_delta_log" / f"{version:020d}.checkpoint.parquet")
    finally:
        shutil.rmtree(scratch)
    return data.schema, data.to_pylist()


def _split_into_parts(table: Path, version: int) -> None:
    schema, rows = _classic_checkpoint_rows(table, version)
    field = {name: schema.field(name) for name in schema.names}
    add_type: pa.StructType = field["add"].type
    remove_type: pa.StructType = field["remove"].type
    adds = [r for r in rows if r.get("add")]
    removes = [r for r in rows if r.get("remove")]
    with_dv = [r for r in removes if r["remove"].get("deletionVector")]
    without_dv = [r for r in removes if not r["remove"].get("deletionVector")]
    assert adds and with_dv and without_dv, "the table must have all three kinds of rows"
    lean_adds = adds[: len(adds) // 2]
    full_adds = adds[len(adds) // 2 :]
    lean_add = pa.field("add", _drop_fields(add_type, LEAN_ADD_DROPS))
    for row in lean_adds:
        for name in LEAN_ADD_DROPS:
            row["add"].pop(name, None)
    lean_remove = pa.field("remove", _drop_fields(remove_type, {"deletionVector"}))
    for row in without_dv:
        row["remove"].pop("deletionVector", None)
    dv_remove = pa.field(
        "remove",
        pa.struct(
            [
                remove_type.field(n)
                for n in ("path", "deletionTimestamp", "dataChange", "deletionVector")
            ]
        ),
    )
    for row in with_dv:
        row["remove"] = {
            k: row["remove"][k]
            for k in ("path", "deletionTimestamp", "dataChange", "deletionVector")
        }
    parts: list[tuple[list[dict], list[pa.Field]]] = [
        ([r for r in rows if r.get("txn")], [field["txn"]]),
        (
            [r for r in rows if r.get("protocol") or r.get("metaData")],
            [field["protocol"], field["metaData"]],
        ),
        (lean_adds, [lean_add]),
        (full_adds + without_dv, [field["add"], lean_remove]),
        (with_dv, [dv_remove]),
    ]
    log = table / "_delta_log"
    total = sum(len(p[0]) for p in parts)
    assert total == len(rows), "every checkpoint row goes into exactly one part"
    for number, (part_rows, fields) in enumerate(parts, start=1):
        name = f"{version:020d}.checkpoint.{number:010d}.{PARTS:010d}.parquet"
        _write_part(log / name, part_rows, fields)
    hint = {"version": version, "size": total, "parts": PARTS}
    (log / "_last_checkpoint").write_text(json.dumps(hint))
