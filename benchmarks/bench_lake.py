"""The fleet planner on a lake of 1,000 small tables (issue 31): `delta-ops plan` must decide
for all of them in under 10 s.

The lake is made directly, in a temporary folder: each table's commits are written as JSON
(protocol, metadata, one `add` per commit) and its data files are hard links of one small
parquet file, so making it takes seconds. The tables differ as a real lake's do: 1 to 25
commits (a checkpoint is due from 10), every seventh has a file removed ten days ago (vacuum
has work), every fifth has 12 small files (compaction has work).

    python benchmarks/bench_lake.py [--tables 1000] [--goal 10]

Exit 0 when the plan took less than the goal, 1 when not.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent
if str(HERE.parent) not in sys.path:
    sys.path.insert(0, str(HERE.parent))

from delta_ops import clock
from delta_ops.service.fleet import fleet_from_warehouse, plan_fleet

DAY_MS = 86_400_000
SCHEMA = json.dumps(
    {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}
)


def _commit(table: Path, version: int, actions: list[dict], when_ms: int) -> None:
    info = {"commitInfo": {"timestamp": when_ms, "operation": "WRITE", "engineInfo": "bench"}}
    lines = [json.dumps(a) for a in [info, *actions]]
    path = table / "_delta_log" / f"{version:020d}.json"
    path.write_text("\n".join(lines) + "\n")
    os.utime(path, (when_ms / 1000, when_ms / 1000))


def _add(name: str, size: int, when_ms: int) -> dict:
    stats = json.dumps({"numRecords": 10, "minValues": {"id": 0}, "maxValues": {"id": 9},
                        "nullCount": {"id": 0}})  # fmt: skip
    return {"add": {"path": name, "partitionValues": {}, "size": size, "modificationTime": when_ms,
                    "dataChange": True, "stats": stats}}  # fmt: skip


def _link(template: Path, dest: Path) -> None:
    """A hard link to the template (the lake's data files are all alike), a copy once the
    template has as many links as the filesystem allows (ext4: 65,000; 10,000 tables need
    more)."""
    try:
        os.link(template, dest)
    except OSError as exc:
        if exc.errno != errno.EMLINK:
            raise
        shutil.copyfile(template, dest)


def make_lake(root: Path, tables: int) -> Path:
    """`tables` small tables under `root/warehouse` (see the module's doc)."""
    warehouse = root / "warehouse"
    template = root / "template.parquet"
    pq.write_table(pa.table({"id": pa.array(range(10), pa.int64())}), template)
    size = template.stat().st_size
    now = clock.now_ms()
    for i in range(tables):
        table = warehouse / f"t{i:04d}"
        (table / "_delta_log").mkdir(parents=True)
        commits = 1 + i % 25 if i % 5 else 12
        start = now - (commits + 10) * 60_000
        metadata = {"metaData": {"id": str(uuid.uuid4()), "format": {"provider": "parquet",
                    "options": {}}, "schemaString": SCHEMA, "partitionColumns": [],
                    "configuration": {}, "createdTime": start}}  # fmt: skip
        protocol = {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}
        for version in range(commits):
            name = f"part-{version:05d}-{uuid.uuid4()}.snappy.parquet"
            _link(template, table / name)
            when = start + version * 60_000
            setup = [protocol, metadata] if version == 0 else []
            _commit(table, version, [*setup, _add(name, size, when)], when)
        if i % 7 == 0:  # a file removed ten days ago, still on disk: vacuum has work
            old = now - 10 * DAY_MS
            gone = f"part-old-{uuid.uuid4()}.snappy.parquet"
            _link(template, table / gone)
            os.utime(table / gone, (old / 1000, old / 1000))
            remove = {"remove": {"path": gone, "deletionTimestamp": old, "dataChange": True,
                                 "size": size}}  # fmt: skip
            _commit(table, commits, [remove], now - 60_000)
    return warehouse


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=1000)
    parser.add_argument("--goal", type=float, default=10.0, help="seconds")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench_lake_") as tmp:
        started = time.perf_counter()
        warehouse = make_lake(Path(tmp), args.tables)
        made = time.perf_counter() - started
        started = time.perf_counter()
        tables = fleet_from_warehouse(str(warehouse))
        plan = plan_fleet(tables, clock.now_ms())
        seconds = time.perf_counter() - started
    chosen = plan.chosen
    by_action: dict[str, int] = {}
    for choice in chosen:
        for action in choice.actions:
            by_action[action] = by_action.get(action, 0) + 1
    print(f"lake: {args.tables} tables made in {made:.1f} s")
    print(f"plan: {len(plan.choices)} tables decided in {seconds:.2f} s (goal < {args.goal} s);"
          f" {len(chosen)} chosen: {json.dumps(by_action, sort_keys=True)}")  # fmt: skip
    print(f"cpus: {os.cpu_count()}")
    return 0 if seconds < args.goal and len(plan.choices) == args.tables else 1


if __name__ == "__main__":
    sys.exit(main())
