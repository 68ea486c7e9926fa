"""Benchmark: checkpoint a table of millions of files, delta-ops (streamed) against delta-rs.

The table is made directly (no Delta library, untimed, once): a classic checkpoint at version 1
holding `--files` adds with full stats (the synthetic benchmark table's 5-column schema,
partitioned by `part`, 1,000 partitions), written a row group at a time, and `--commits`
commits after it that each remove `--churn` files of the checkpoint and add as many new ones
(the log before the checkpoint has been cleaned up, as on a long-lived table). Checkpointing
the head must therefore drop the files those commits removed and add theirs.

Each run is a fresh process on the same table, after the previous run's checkpoint and
`_last_checkpoint` are put back (untimed): ours is `delta_ops.ops.checkpoint.checkpoint(T)`
(which streams a checkpoint this big), theirs `DeltaTable(T).create_checkpoint()`. delta-rs
holds the whole state in memory, so it runs under an address-space limit (`--limit-gb`,
default 16 of this machine's 24 GB): its failure is recorded rather than the machine's.

With `--engine spark --parts N` ours writes an N-part checkpoint with each part a Spark task
(the session is started before the clock); ours then also prints the driver's own peak RSS
(the Python process: the JVM and the executors' Python workers are other processes).

Every run's result is checked (untimed) before the next: the checkpoint at the head (all its
parts) is put alone, with the `_last_checkpoint` the run wrote, into a scratch table, and
`deltalake` must load it with the state it loads from the table as made (the version-1
checkpoint and every commit after it; computed once per table and cached): the same version,
protocol, metaData and live files (path, size, modification time, `numRecords`). Read straight
from the parquet, both sides' checkpoints must also hold the same rows of each other action kind
and keep the same tombstones. A difference prints `MISMATCH: ...` and exits 1; a failed run
exits 3 (ours) or 1 (delta-rs, e.g. over its address-space limit).

    python benchmarks/bench_big_checkpoint.py --files 10000000 [--runs 1] [--limit-gb 16]
        [--engine local|spark] [--parts N] [--skip-theirs] [--from-own-checkpoint]
        [--commits 10 --churn 1000]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.harness import run_fresh
from benchmarks.synthetic import SCHEMA_STRING, TABLE_ID
from benchmarks.verify import (
    CheckpointContents,
    Mismatch,
    TableState,
    checkpoint_contents,
    checkpoint_only_copy,
    contents_difference,
    load_state,
    read_state,
    report_mismatch,
    state_difference,
)

DATA = ROOT / "benchmarks" / ".data"
ROW_GROUP = 100_000
PARTITIONS = 1_000
VERSION = 1  # the checkpoint's version; commits follow it

OURS = """
import resource, sys, time
from delta_ops.ops.checkpoint import execute_checkpoint, load_for_checkpoint, plan_checkpoint
table, engine, parts = sys.argv[1], sys.argv[2], int(sys.argv[3]) or None
if engine == "spark":
    from delta_ops.spark import get_spark
    get_spark()  # started before the clock, as in a Dagster run with a PySparkResource
started = time.monotonic()
plan = plan_checkpoint(load_for_checkpoint(table), int(time.time() * 1000), parts=parts,
                       engine=engine)
result = execute_checkpoint(plan)
driver_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(result.kind, result.num_add_files, f"{time.monotonic() - started:.2f}s",
      f"driver {driver_mb:.0f}MB")
"""

THEIRS = """
import resource, sys
limit = int(float(sys.argv[2]) * 1024**3)
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
from deltalake import DeltaTable
table = DeltaTable(sys.argv[1])
table.create_checkpoint()
print("checkpoint", table.version())
"""


def _add_rows(first: int, count: int, mtime: int):  # -> pa.StructArray
    """The `add` column of `count` checkpoint rows with stats (vectorised string building)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from delta_ops.log.actions import DELETION_VECTOR_TYPE, STRING_MAP

    ids = np.arange(first, first + count, dtype=np.int64)
    text = pc.cast(pa.array(ids), pa.string())
    part = pc.cast(pa.array(ids % PARTITIONS), pa.string())
    path = pc.binary_join_element_wise(
        "part=", part, "/part-", pc.utf8_lpad(text, 10, "0"), "-c000.snappy.parquet", ""
    )
    rows = 1000
    low = pc.cast(pa.array(ids * rows), pa.string())
    high = pc.cast(pa.array(ids * rows + rows - 1), pa.string())
    stats = pc.binary_join_element_wise(
        '{"numRecords":1000,"minValues":{"id":',
        low,
        ',"value":0.5,"name":"name-',
        pc.utf8_lpad(low, 10, "0"),
        '","ts":"2024-01-01T00:00:00.000Z"},"maxValues":{"id":',
        high,
        ',"value":999.5,"name":"name-',
        pc.utf8_lpad(high, 10, "0"),
        '","ts":"2024-01-02T00:00:00.000Z"},"nullCount":{"id":0,"value":0,"name":76,"ts":0}}',
        "",
    )
    partition_values = pa.MapArray.from_arrays(
        pa.array(np.arange(count + 1, dtype=np.int32)),
        pa.array(["part"] * count, pa.string()),
        part,
    ).cast(STRING_MAP)
    add = pa.StructArray.from_arrays(
        [
            path,
            partition_values,
            pa.array(np.full(count, 40_000, dtype=np.int64)),
            pa.array(np.full(count, mtime, dtype=np.int64)),
            pa.array(np.zeros(count, dtype=bool)),
            pa.nulls(count, STRING_MAP),
            pa.nulls(count, DELETION_VECTOR_TYPE),
            stats,
        ],
        names=[
            "path",
            "partitionValues",
            "size",
            "modificationTime",
            "dataChange",
            "tags",
            "deletionVector",
            "stats",
        ],
    )
    return add


def prepare(files: int, commits: int, churn: int) -> Path:
    """The table (made once): a checkpoint of `files` adds at version 1, `commits` after it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = DATA / f"big-checkpoint-{files}-{commits}x{churn}"
    done = table / "_bench_ready"
    if done.exists():
        return table
    if table.exists():
        shutil.rmtree(table)
    log = table / "_delta_log"
    log.mkdir(parents=True)
    now = int(time.time() * 1000)
    protocol = {"minReaderVersion": 1, "minWriterVersion": 2}
    metadata = {
        "id": TABLE_ID,
        "format": {"provider": "parquet", "options": {}},
        "schemaString": SCHEMA_STRING,
        "partitionColumns": ["part"],
        "configuration": {},
        "createdTime": now,
    }
    started = time.monotonic()
    add_type = _add_rows(0, 1, now).type
    from delta_ops.log.checkpoint_content import METADATA_TYPE, to_arrow_value

    metadata_column = pa.array([to_arrow_value(metadata, METADATA_TYPE), None], METADATA_TYPE)
    protocol_column = pa.array(
        [None, protocol],
        pa.struct([("minReaderVersion", pa.int32()), ("minWriterVersion", pa.int32())]),
    )
    schema = pa.schema(
        [("add", add_type), ("metaData", metadata_column.type), ("protocol", protocol_column.type)]
    )
    name = log / f"{VERSION:020d}.checkpoint.parquet"
    with pq.ParquetWriter(name, schema, compression="snappy") as writer:
        writer.write_table(
            pa.table([pa.nulls(2, add_type), metadata_column, protocol_column], schema=schema)
        )
        for first in range(0, files, ROW_GROUP):
            count = min(ROW_GROUP, files - first)
            columns = [
                _add_rows(first, count, now),
                pa.nulls(count, metadata_column.type),
                pa.nulls(count, protocol_column.type),
            ]
            writer.write_table(pa.table(columns, schema=schema))
    size = name.stat().st_size
    (log / "_last_checkpoint").write_text(
        json.dumps({"version": VERSION, "size": files + 2, "sizeInBytes": size}) + "\n"
    )
    for i in range(commits):
        version = VERSION + 1 + i
        lines = [
            json.dumps({"commitInfo": {"timestamp": now, "operation": "WRITE"}}),
        ]
        for j in range(churn):
            old = (i * churn + j) * 7 % files
            lines.append(
                json.dumps(
                    {
                        "remove": {
                            "path": f"part={old % PARTITIONS}/part-{old:010d}-c000.snappy.parquet",
                            "deletionTimestamp": now,
                            "dataChange": True,
                            "size": 40_000,
                            "partitionValues": {"part": str(old % PARTITIONS)},
                        }
                    }
                )
            )
            new = files + i * churn + j
            lines.append(
                json.dumps(
                    {
                        "add": {
                            "path": f"part={new % PARTITIONS}/part-{new:010d}-c000.snappy.parquet",
                            "partitionValues": {"part": str(new % PARTITIONS)},
                            "size": 40_000,
                            "modificationTime": now,
                            "dataChange": True,
                            "stats": '{"numRecords":1000}',
                        }
                    }
                )
            )
        (log / f"{version:020d}.json").write_text("\n".join(lines) + "\n")
    done.write_text("")
    print(
        f"made {table.name}: checkpoint of {files:,} files ({size / 1e9:.2f} GB) and {commits}"
        f" commits in {time.monotonic() - started:.0f} s",
        flush=True,
    )
    return table


def reset(table: Path, base: int = VERSION) -> None:
    """Put the table back as made: checkpoints up to `base` only, the hint naming `base`."""
    log = table / "_delta_log"
    for path in log.iterdir():
        if ".checkpoint" in path.name and int(path.name.split(".")[0].lstrip(".") or 0) > base:
            path.unlink()
    base_file = log / f"{base:020d}.checkpoint.parquet"
    (log / "_last_checkpoint").write_text(
        json.dumps({"version": base, "sizeInBytes": base_file.stat().st_size}) + "\n"
    )


def from_own_checkpoint(table: Path) -> int:
    """Checkpoint the head with delta-ops (untimed) and add one commit after it: later runs
    then start from a checkpoint that delta-ops wrote (with `stats_parsed`, as a maintained
    table's would be). Returns that checkpoint's version."""
    from delta_ops.ops.checkpoint import checkpoint

    log = table / "_delta_log"
    base = max(int(p.name.split(".")[0]) for p in log.glob("*.json"))
    if not (log / f"{base:020d}.checkpoint.parquet").exists():
        checkpoint(str(table))
    head = log / f"{base + 1:020d}.json"
    if not head.exists():
        shutil.copyfile(log / f"{base:020d}.json", head)  # removes of removed files: no-ops
    return base


class Checker:
    """Checks each run's checkpoint at `head` against the table's state as deltalake loads it
    from the table as made, and the sides' checkpoints against each other."""

    def __init__(self, table: Path, head: int) -> None:
        self.table, self.head = table, head
        self.scratch = DATA / f"{table.name}-verify"
        self.expected = self._expected()
        self.contents: dict[str, CheckpointContents] = {}

    def _expected(self) -> TableState:
        """deltalake's state at `head` of the table as made: the version-1 checkpoint, a hint
        naming it, every commit (not a checkpoint written since). Cached per table build."""
        log = self.table / "_delta_log"
        base = log / f"{VERSION:020d}.checkpoint.parquet"
        cache = self.scratch / f"expected-{self.head}-{base.stat().st_mtime_ns}"
        if (cache / "state.json").exists():
            return load_state(cache)
        print("reading the expected state with deltalake (once per table) ...", flush=True)
        made = self.scratch / "as-made"
        shutil.rmtree(made, ignore_errors=True)
        (made / "_delta_log").mkdir(parents=True)
        os.link(base, made / "_delta_log" / base.name)
        for commit in log.glob("*.json"):
            os.link(commit, made / "_delta_log" / commit.name)
        hint = {"version": VERSION, "sizeInBytes": base.stat().st_size}
        (made / "_delta_log" / "_last_checkpoint").write_text(json.dumps(hint) + "\n")
        state = read_state(made, cache)
        shutil.rmtree(made)
        return state

    def check(self, label: str) -> None:
        """Raises Mismatch naming the first difference."""
        log = self.table / "_delta_log"
        copy = checkpoint_only_copy(log, self.head, self.scratch / f"{label}-table")
        got = read_state(copy, self.scratch / f"{label}-state")
        shutil.rmtree(copy)
        where = f"the checkpoint {label} wrote (read alone by deltalake)"
        difference = state_difference("the table as made", self.expected, where, got)
        if difference:
            raise Mismatch(difference)
        contents = checkpoint_contents(log, self.head)
        for other, theirs in self.contents.items():
            difference = contents_difference(label, contents, other, theirs)
            if difference:
                raise Mismatch(difference)
        self.contents[label] = contents


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=10_000_000)
    parser.add_argument("--commits", type=int, default=10)
    parser.add_argument("--churn", type=int, default=1_000)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--limit-gb", type=float, default=16.0)
    parser.add_argument("--skip-theirs", action="store_true")
    parser.add_argument("--engine", choices=("local", "spark"), default="local")
    parser.add_argument("--parts", type=int, default=0, help="multi-part with this many parts")
    parser.add_argument(
        "--from-own-checkpoint",
        action="store_true",
        help="start from a checkpoint delta-ops wrote (with stats_parsed), one commit behind",
    )
    args = parser.parse_args(argv)
    table = prepare(args.files, args.commits, args.churn)
    base = VERSION
    if args.from_own_checkpoint:
        reset(table)
        base = from_own_checkpoint(table)
    try:
        return run(args, table, base)
    except Mismatch as exc:
        return report_mismatch("bench_big_checkpoint", exc)
    finally:
        reset(table, base)


def run(args: argparse.Namespace, table: Path, base: int) -> int:
    """The runs, each checked; raises Mismatch. Exit status 3 if ours failed, 1 if theirs."""
    head = max(int(p.name.split(".")[0]) for p in (table / "_delta_log").glob("*.json"))
    checker = Checker(table, head)
    print(f"table {table.name}: head version {head}, {checker.expected.summary()}", flush=True)
    results: dict[str, list[dict[str, object]]] = {"delta-ops": [], "delta-rs": []}
    for _ in range(args.runs):
        ours = [sys.executable, "-c", OURS, str(table), args.engine, str(args.parts)]
        runs = [("delta-ops", ours)]
        if not args.skip_theirs:
            runs.append(
                ("delta-rs", [sys.executable, "-c", THEIRS, str(table), str(args.limit_gb)])
            )
        for label, cmd in runs:
            reset(table, base)
            result = run_fresh(cmd, timeout=3600)
            outcome = {
                "wall_s": round(result.wall_s, 2),
                "peak_rss_mb": round(result.max_rss_mb),
                "ok": result.ok,
                "output": (result.stdout.strip().splitlines() or [""])[-1]
                if result.ok
                else " ".join(result.stderr.strip().splitlines()[-2:])[:300],
            }
            if result.ok:
                checker.check(label)
            results[label].append(outcome)
            print(f"{label:9} {outcome}", flush=True)
    if all(o["ok"] for o in results["delta-ops"] + results["delta-rs"]):
        print(
            "same work: every checkpoint read back by deltalake as the table's state; "
            f"{next(iter(checker.contents.values())).rows['remove']} tombstones kept by each"
        )
    name = "bench_big_checkpoint" + ("_from_own" if args.from_own_checkpoint else "")
    name += f"_{args.engine}" + (f"_{args.parts}parts" if args.parts else "")
    out = DATA / "results" / f"{name}-{args.files}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"files": args.files, "base": base, **results}, indent=2) + "\n")
    for label, status in (("delta-ops", 3), ("delta-rs", 1)):
        failed = [o for o in results[label] if not o["ok"]]
        if failed:
            print(f"{label} failed: {failed[0]['output']}")
            return status
    return 0


if __name__ == "__main__":
    sys.exit(main())
