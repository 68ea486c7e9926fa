"""Fast generator of synthetic, valid Delta tables (benchmark and test fixtures).

The log is written directly as JSON lines from string templates, not through a Delta library,
so large logs are cheap to make: the default 2000 commits x 50 adds (100k adds, 20k removes)
takes a few seconds. The output is deterministic for a given ``seed`` (and, for timestamps,
``now_ms``): the same arguments give byte-identical commit files.

Table layout
------------
* Version 0 holds ``protocol`` (reader 1, writer 2), ``metaData`` (fixed table id, a 5-column
  schema ``id long, value double, name string, ts timestamp, part string`` partitioned by
  ``part``) and, like every commit, a ``commitInfo`` (WRITE / Append) and ``adds_per_commit``
  adds.
* Every ``remove_every``-th commit (the 5th, 10th, ... commit, i.e. versions 4, 9, ...) also
  removes every file of one earlier commit, picked at random (seeded) among the commits whose
  files are all still live. The default spec therefore leaves 80k live files and 20k tombstones.
* Add paths look like ``part=<k>/part-<5 digits>-<uuid>.c000.snappy.parquet``; ``stats`` carry
  ``numRecords`` and ``minValues``/``maxValues``/``nullCount`` of every data column (partition
  columns live in ``partitionValues``, as Spark and delta-rs write them).
* Each file's content is a pure function of its row range, so its stats are exact and its
  ``size`` is the true size of the parquet file ``--with-data-files`` writes (files are stored
  uncompressed and without dictionaries, so the size is known without writing them; the log is
  the same with or without data files).
* Commit timestamps are one ``commit_interval_ms`` apart and the last one is
  ``now_ms - age_days``; commit files, data files (their add's ``modificationTime``) and orphans
  (``now_ms - age_days``) get matching mtimes, which makes vacuum and log-retention benchmarks
  meaningful.

CLI::

    python benchmarks/synthetic.py OUT --commits 2000 --adds 50 --remove-every 5 \
        [--with-data-files] [--orphans N] [--age-days D] [--seed S] [--force]

Library::

    from benchmarks.synthetic import write_synthetic_table
    info = write_synthetic_table(tmp_path / "t", commits=50, adds_per_commit=5, remove_every=5,
                                 seed=1, with_data_files=True, now_ms=1_700_000_000_000)
    info.live_paths, info.tombstone_paths, info.version
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "SCHEMA_STRING",
    "TABLE_ID",
    "SyntheticTableInfo",
    "ensure_synthetic_table",
    "parquet_bytes",
    "write_synthetic_table",
]

#: Fixed ``metaData.id`` of every generated table.
TABLE_ID = "5f1c7c5e-0d1a-4c1e-9b5e-6d3e2a1b0c9d"
ENGINE_INFO = "delta-ops-synthetic/0.1"
DAY_MS = 86_400_000
#: Every ``NULL_EVERY``-th id has a null ``name`` (gives non-trivial nullCount stats).
NULL_EVERY = 13
#: Width of the zero-padded number in ``name`` values ("name-0000000042"); fixed width keeps
#: every file's size a function of its row count and null pattern only.
NAME_DIGITS = 10
#: Marker written by :func:`ensure_synthetic_table` (leading underscore: hidden from readers
#: and from vacuum).
SPEC_FILE = "_synthetic_spec.json"

_FIELDS = [
    ("id", "long"),
    ("value", "double"),
    ("name", "string"),
    ("ts", "timestamp"),
    ("part", "string"),
]
SCHEMA_STRING = json.dumps(
    {
        "type": "struct",
        "fields": [{"name": n, "type": t, "nullable": True, "metadata": {}} for n, t in _FIELDS],
    },
    separators=(",", ":"),
)


@dataclass
class SyntheticTableInfo:
    """What :func:`write_synthetic_table` wrote.

    ``live_paths``/``tombstone_paths``/``orphan_paths`` are table-relative paths exactly as they
    appear in the log (``part=3/part-00012-<uuid>.c000.snappy.parquet``).
    """

    live_paths: set[str]
    tombstone_paths: set[str]
    version: int
    orphan_paths: set[str] = field(default_factory=set)
    num_live_records: int = 0
    path: str = ""
    #: Timestamp (ms) of every commit, index = version.
    commit_timestamps: list[int] = field(default_factory=list)


# ---------------------------------------------------------------------------------------------
# File content: a pure function of (first id, row count, commit timestamp)


def _file_values(first_id: int, n: int, ts_end_s: int):
    """Column values of a data file holding ids ``first_id .. first_id + n - 1``."""
    ids = list(range(first_id, first_id + n))
    values = [(i - 500) * 0.25 for i in ids]
    names = [None if i % NULL_EVERY == 0 else f"name-{i:0{NAME_DIGITS}d}" for i in ids]
    # whole seconds, so the millisecond stats are exact; the last row is at ts_end_s
    ts = [(ts_end_s - (n - 1 - k)) * 1_000_000 for k in range(n)]
    return ids, values, names, ts


_PA = None


def _pyarrow():
    global _PA
    if _PA is None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        schema = pa.schema(
            [
                ("id", pa.int64()),
                ("value", pa.float64()),
                ("name", pa.string()),
                ("ts", pa.timestamp("us", tz="UTC")),
            ]
        )
        _PA = (pa, pq, schema)
    return _PA


def parquet_bytes(first_id: int, n: int, ts_end_s: int) -> bytes:
    """The parquet file (data columns only, no partition column) of one synthetic add."""
    pa, pq, schema = _pyarrow()
    ids, values, names, ts = _file_values(first_id, n, ts_end_s)
    table = pa.Table.from_arrays(
        [
            pa.array(ids, pa.int64()),
            pa.array(values, pa.float64()),
            pa.array(names, pa.string()),
            pa.array(ts, pa.timestamp("us", tz="UTC")),
        ],
        schema=schema,
    )
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="NONE", use_dictionary=False, write_statistics=True)
    return sink.getvalue().to_pybytes()


class _SizeCache:
    """File size by (row count, null pattern): computed once by serialising a representative."""

    def __init__(self) -> None:
        self._sizes: dict[tuple[int, int], int] = {}

    def size(self, first_id: int, n: int) -> int:
        key = (n, first_id % NULL_EVERY)
        s = self._sizes.get(key)
        if s is None:
            s = len(parquet_bytes(key[1] + NULL_EVERY, n, 1_700_000_000))
            self._sizes[key] = s
        return s


def _iso_ms(seconds: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(seconds))


def _stats_json(first_id: int, n: int, ts_end_s: int) -> str:
    last = first_id + n - 1
    nulls = last // NULL_EVERY - (first_id - 1) // NULL_EVERY
    name_min = first_id if first_id % NULL_EVERY else first_id + 1
    name_max = last if last % NULL_EVERY else last - 1
    w = NAME_DIGITS
    return (
        f'{{"numRecords":{n},'
        f'"minValues":{{"id":{first_id},"value":{(first_id - 500) * 0.25!r},'
        f'"name":"name-{name_min:0{w}d}","ts":"{_iso_ms(ts_end_s - n + 1)}"}},'
        f'"maxValues":{{"id":{last},"value":{(last - 500) * 0.25!r},'
        f'"name":"name-{name_max:0{w}d}","ts":"{_iso_ms(ts_end_s)}"}},'
        f'"nullCount":{{"id":0,"value":0,"name":{nulls},"ts":0}}}}'
    )


# ---------------------------------------------------------------------------------------------
# Log


def _prepare_dir(root: Path, force: bool) -> None:
    if root.exists():
        if not root.is_dir():
            raise FileExistsError(f"{root} exists and is not a directory")
        entries = list(root.iterdir())
        if entries:
            if not force:
                raise FileExistsError(f"{root} is not empty (pass force=True / --force)")
            if not (root / "_delta_log").is_dir():
                raise FileExistsError(f"refusing to delete {root}: not empty and not a Delta table")
            shutil.rmtree(root)
    (root / "_delta_log").mkdir(parents=True, exist_ok=True)


def _dumps(obj) -> str:
    return json.dumps(obj, separators=(",", ":"))


def write_synthetic_table(
    path: str | os.PathLike[str],
    commits: int = 2000,
    adds_per_commit: int = 50,
    remove_every: int = 5,
    seed: int = 0,
    *,
    partitions: int = 10,
    rows_per_file: tuple[int, int] = (16, 64),
    with_data_files: bool = False,
    orphans: int = 0,
    age_days: float = 0.0,
    now_ms: int | None = None,
    commit_interval_ms: int = 60_000,
    force: bool = False,
) -> SyntheticTableInfo:
    """Write a synthetic Delta table at ``path`` (local directory) and describe it.

    ``commits`` versions (0 .. commits-1) are written, each with ``adds_per_commit`` adds; every
    ``remove_every``-th commit (0 disables) also removes all files of one earlier, still fully
    live commit. ``with_data_files`` also writes the parquet files of every add (live and
    removed); ``orphans`` writes that many untracked parquet files into the partition
    directories. ``age_days`` moves every timestamp and mtime that many days into the past,
    relative to ``now_ms`` (default: the current time). ``force`` deletes an existing table at
    ``path`` first (a non-empty directory without ``_delta_log`` is never deleted).
    """
    if commits < 1:
        raise ValueError("commits must be >= 1")
    if adds_per_commit < 0 or remove_every < 0 or orphans < 0 or partitions < 1:
        raise ValueError("adds_per_commit, remove_every and orphans must be >= 0, partitions >= 1")
    rmin, rmax = rows_per_file
    if not 2 <= rmin <= rmax:
        raise ValueError("rows_per_file must be (min, max) with 2 <= min <= max")
    if (commits * adds_per_commit + 1) * rmax >= 10**NAME_DIGITS:
        raise ValueError("too many rows for the fixed-width name column")

    root = Path(path)
    _prepare_dir(root, force)
    log_dir = root / "_delta_log"
    if now_ms is None:
        now_ms = int(time.time() * 1000)
    end_ms = int(now_ms - age_days * DAY_MS)
    start_ms = end_ms - (commits - 1) * commit_interval_ms

    rng = random.Random(seed)
    sizes = _SizeCache()
    part_values = [str(k) for k in range(partitions)]

    # per commit: list of (rel_path, part, size); only for commits whose files are all live
    commit_files: dict[int, list[tuple[str, str, int]]] = {}
    live_commits: list[int] = []  # versions in commit_files, for O(1) random pick + swap-pop
    live_pos: dict[int, int] = {}
    tombstones: set[str] = set()
    data_jobs: list[tuple[str, int, int, int, int]] = []  # rel, first_id, n, ts_end_s, mtime_ms
    timestamps: list[int] = []
    next_id = 0
    live_records = 0
    records_by_commit: dict[int, int] = {}

    add_tpl = (
        '{"add":{"path":"%s","partitionValues":{"part":"%s"},"size":%d,'
        '"modificationTime":%d,"dataChange":true,"stats":%s}}'
    )
    remove_tpl = (
        '{"remove":{"path":"%s","deletionTimestamp":%d,"dataChange":true,'
        '"extendedFileMetadata":true,"partitionValues":{"part":"%s"},"size":%d}}'
    )

    for version in range(commits):
        ts_ms = start_ms + version * commit_interval_ms
        ts_s = ts_ms // 1000
        timestamps.append(ts_ms)
        removes: list[str] = []
        if remove_every and (version + 1) % remove_every == 0 and live_commits:
            victim = live_commits[rng.randrange(len(live_commits))]
            # swap-pop from live_commits
            i = live_pos.pop(victim)
            last = live_commits.pop()
            if last != victim:
                live_commits[i] = last
                live_pos[last] = i
            for rel, part, size in commit_files.pop(victim):
                removes.append(remove_tpl % (rel, ts_ms, part, size))
                tombstones.add(rel)
            live_records -= records_by_commit.pop(victim)

        commit_info = {
            "commitInfo": {
                "timestamp": ts_ms,
                "operation": "WRITE",
                "operationParameters": (
                    {"mode": "Append", "partitionBy": '["part"]'}
                    if version == 0
                    else {"mode": "Append"}
                ),
                **({"readVersion": version - 1} if version else {}),
                "isolationLevel": "Serializable",
                "isBlindAppend": not removes,
                "operationMetrics": {
                    "numFiles": str(adds_per_commit),
                    "numRemovedFiles": str(len(removes)),
                },
                "engineInfo": ENGINE_INFO,
                "txnId": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
            }
        }
        lines = [_dumps(commit_info)]
        if version == 0:
            lines.append('{"protocol":{"minReaderVersion":1,"minWriterVersion":2}}')
            lines.append(
                _dumps(
                    {
                        "metaData": {
                            "id": TABLE_ID,
                            "format": {"provider": "parquet", "options": {}},
                            "schemaString": SCHEMA_STRING,
                            "partitionColumns": ["part"],
                            "configuration": {},
                            "createdTime": ts_ms,
                        }
                    }
                )
            )
        lines.extend(removes)

        files: list[tuple[str, str, int]] = []
        commit_records = 0
        for task in range(adds_per_commit):
            part = part_values[rng.randrange(partitions)]
            n = rng.randint(rmin, rmax)
            file_uuid = uuid.UUID(int=rng.getrandbits(128), version=4)
            rel = f"part={part}/part-{task:05d}-{file_uuid}.c000.snappy.parquet"
            first_id = next_id
            next_id += n
            size = sizes.size(first_id, n)
            stats = _stats_json(first_id, n, ts_s)
            lines.append(add_tpl % (rel, part, size, ts_ms, json.dumps(stats)))
            files.append((rel, part, size))
            commit_records += n
            if with_data_files:
                data_jobs.append((rel, first_id, n, ts_s, ts_ms))
        if files:
            commit_files[version] = files
            live_pos[version] = len(live_commits)
            live_commits.append(version)
            records_by_commit[version] = commit_records
            live_records += commit_records

        commit_path = log_dir / f"{version:020d}.json"
        with open(commit_path, "w", encoding="utf-8") as f:
            f.write("\n".join(lines))
            f.write("\n")
        os.utime(commit_path, ns=(ts_ms * 1_000_000, ts_ms * 1_000_000))

    live_paths = {rel for files in commit_files.values() for rel, _, _ in files}

    made_dirs: set[str] = set()

    def _write(rel: str, data: bytes, mtime_ms: int) -> None:
        d = rel.rpartition("/")[0]
        if d not in made_dirs:
            (root / d).mkdir(parents=True, exist_ok=True)
            made_dirs.add(d)
        full = os.path.join(root, rel)
        with open(full, "wb") as f:
            f.write(data)
        os.utime(full, ns=(mtime_ms * 1_000_000, mtime_ms * 1_000_000))

    for rel, first_id, n, ts_s, mtime_ms in data_jobs:
        data = parquet_bytes(first_id, n, ts_s)
        expected = sizes.size(first_id, n)
        if len(data) != expected:  # pragma: no cover - would be a generator bug
            raise AssertionError(f"{rel}: wrote {len(data)} bytes, log says {expected}")
        _write(rel, data, mtime_ms)

    orphan_paths: set[str] = set()
    if orphans:
        orng = random.Random(f"{seed}/orphans")
        orphan_ms = end_ms
        for k in range(orphans):
            part = part_values[orng.randrange(partitions)]
            orphan_uuid = uuid.UUID(int=orng.getrandbits(128), version=4)
            rel = f"part={part}/part-{k % 100_000:05d}-{orphan_uuid}.c000.snappy.parquet"
            n = orng.randint(rmin, rmax)
            _write(rel, parquet_bytes(10**NAME_DIGITS // 2 + k, n, orphan_ms // 1000), orphan_ms)
            orphan_paths.add(rel)

    return SyntheticTableInfo(
        live_paths=live_paths,
        tombstone_paths=tombstones,
        version=commits - 1,
        orphan_paths=orphan_paths,
        num_live_records=live_records,
        path=str(root),
        commit_timestamps=timestamps,
    )


def ensure_synthetic_table(path: str | os.PathLike[str], **params) -> dict:
    """Generate the table unless ``path`` already holds one made with the same ``params``.

    Returns the summary stored in ``<path>/_synthetic_spec.json``: ``params``, ``version``,
    ``num_live``, ``num_tombstones``, ``num_orphans``, ``num_live_records``. ``now_ms`` is not
    part of the comparison unless given explicitly.
    """
    root = Path(path)
    spec_path = root / SPEC_FILE
    wanted = _normalise(params)
    if spec_path.is_file():
        try:
            spec = json.loads(spec_path.read_text())
            if spec.get("params") == wanted:
                return spec
        except (OSError, ValueError):
            pass
    t0 = time.perf_counter()
    info = write_synthetic_table(root, force=True, **params)
    spec = {
        "params": wanted,
        "version": info.version,
        "num_live": len(info.live_paths),
        "num_tombstones": len(info.tombstone_paths),
        "num_orphans": len(info.orphan_paths),
        "num_live_records": info.num_live_records,
        "generated_in_s": round(time.perf_counter() - t0, 3),
    }
    spec_path.write_text(json.dumps(spec, indent=2) + "\n")
    return spec


def _normalise(params: dict) -> dict:
    out = {}
    for k, v in sorted(params.items()):
        out[k] = list(v) if isinstance(v, tuple) else v
    return out


# ---------------------------------------------------------------------------------------------
# CLI


def main(argv: Iterable[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description="Write a synthetic Delta table (valid log, optional tiny data files)."
    )
    p.add_argument("out", help="table directory to create")
    p.add_argument("--commits", type=int, default=2000)
    p.add_argument("--adds", type=int, default=50, help="adds per commit")
    p.add_argument(
        "--remove-every",
        type=int,
        default=5,
        help="every N-th commit removes all files of an earlier commit (0: never)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--partitions", type=int, default=10)
    p.add_argument("--rows-min", type=int, default=16, help="min numRecords per file")
    p.add_argument("--rows-max", type=int, default=64, help="max numRecords per file")
    p.add_argument(
        "--with-data-files", action="store_true", help="also write the parquet file of every add"
    )
    p.add_argument("--orphans", type=int, default=0, help="untracked parquet files to write")
    p.add_argument(
        "--age-days",
        type=float,
        default=0.0,
        help="shift all timestamps and mtimes this many days into the past",
    )
    p.add_argument(
        "--now-ms",
        type=int,
        default=None,
        help="reference 'now' in epoch ms (default: current time)",
    )
    p.add_argument("--interval-ms", type=int, default=60_000, help="time between commits")
    p.add_argument("--force", action="store_true", help="replace an existing table at OUT")
    a = p.parse_args(None if argv is None else list(argv))

    t0 = time.perf_counter()
    try:
        info = write_synthetic_table(
            a.out,
            a.commits,
            a.adds,
            a.remove_every,
            a.seed,
            partitions=a.partitions,
            rows_per_file=(a.rows_min, a.rows_max),
            with_data_files=a.with_data_files,
            orphans=a.orphans,
            age_days=a.age_days,
            now_ms=a.now_ms,
            commit_interval_ms=a.interval_ms,
            force=a.force,
        )
    except (ValueError, FileExistsError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    elapsed = time.perf_counter() - t0
    print(
        json.dumps(
            {
                "path": info.path,
                "version": info.version,
                "live_files": len(info.live_paths),
                "tombstones": len(info.tombstone_paths),
                "orphans": len(info.orphan_paths),
                "live_records": info.num_live_records,
                "seconds": round(elapsed, 3),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
