"""Shared test support: where the real fixture tables are (tests/data/tables, copied with their README), and the independent peer readers.

Peers are `deltalake` (delta-rs) and DuckDB's `delta` extension (delta-kernel-rs), loaded
from the pip package `duckdb-extension-delta` by file path, so no download is needed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.parquet as pq

T = TypeVar("T")

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data"
TABLES = DATA / "tables"


def file_digests(root: Path) -> dict[str, str]:
    """Every file under `root` (relative path -> sha256 of its bytes): compare before and after
    an operation that must change nothing. Read afresh on every call, never cached: a cached
    answer would make every "before == after" hold whatever the operation did."""
    import hashlib

    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def peer_facts() -> dict[str, dict]:
    """PEER_FACTS.jsonl by table name ("delta-rs/simple_table", ...)."""
    lines = (TABLES / "PEER_FACTS.jsonl").read_text().splitlines()
    return {fact["table"]: fact for fact in map(json.loads, filter(None, lines))}


def fixture_names() -> list[str]:
    return sorted(peer_facts())


def readable_fixture_names() -> list[str]:
    """Fixtures that delta-rs reads (the ones maintenance ops are checked against)."""
    return [name for name, fact in sorted(peer_facts().items()) if "rs_error" not in fact]


def copy_fixture(name: str, dest: Path) -> Path:
    """Copy a fixture table to `dest/<last part of name>` and make it writable."""
    target = dest / name.replace("/", "__")
    shutil.copytree(TABLES / name, target)
    for root, dirs, files in os.walk(target):
        for entry in dirs + files:
            os.chmod(os.path.join(root, entry), 0o755 if entry in dirs else 0o644)
    os.chmod(target, 0o755)
    return target


def fresh_copy(name: str, dest: Path) -> Path:
    """A fixture copy whose files look written an hour ago (copies keep the fixtures' install
    times, which would drift past the retentions); log files keep their order in time."""
    table = copy_fixture(name, dest)
    start = time.time() - 3600
    for root, _, files in os.walk(table):
        for i, f in enumerate(sorted(files)):
            os.utime(os.path.join(root, f), (start + i, start + i))
    return table


# ----------------------------------------------------------------------------------- peers
def deltalake_files(path: Path | str) -> tuple[int, list[str]]:
    """(version, sorted live file paths relative to the table) as delta-rs sees them."""
    from deltalake import DeltaTable

    table = DeltaTable(str(path))
    adds = pa.table(table.get_add_actions(flatten=True))
    return table.version(), sorted(adds.column("path").to_pylist())


def deltalake_rows(
    path: Path | str, storage_options: dict[str, str] | None = None, version: int | None = None
) -> list[dict]:
    """Every row delta-rs returns (deletion vectors applied), sorted for comparison, at the
    latest version or `version`; on an object store, `storage_options` are delta-rs' own
    (AWS_ENDPOINT_URL, ...)."""
    from deltalake import DeltaTable

    table = DeltaTable(str(path), version=version, storage_options=storage_options)
    # to_pyarrow_table() refuses tables with deletion vectors; scan() applies them
    rows = pa.RecordBatchReader.from_stream(table.scan()).read_all().to_pylist()
    return sorted(rows, key=_row_key)


#: versions a reliability check reads at once (CI has two cores; deltalake reads outside the GIL)
READERS = 2


def read_each(read: Callable[[int], T], versions: Iterable[int]) -> list[T]:
    """`read(version)` of every version, in order, `READERS` at a time: each read is its own
    (a fresh table, nothing shared or reused), so they may overlap; the first error raised
    is raised here."""
    with ThreadPoolExecutor(max_workers=READERS) as pool:
        return list(pool.map(read, versions))


def duckdb_connection():
    import duckdb
    import duckdb_extension_delta

    ext = (
        Path(duckdb_extension_delta.__file__).parent
        / "extensions"
        / f"v{duckdb.__version__}"
        / "delta.duckdb_extension"
    )
    con = duckdb.connect()
    con.load_extension(str(ext))
    return con


def duckdb_rows(path: Path | str) -> list[dict]:
    """Every row DuckDB's delta extension returns, sorted for comparison."""
    con = duckdb_connection()
    try:
        rows = con.sql(f"SELECT * FROM delta_scan('{path}')").to_arrow_table().to_pylist()
    finally:
        con.close()
    return sorted(rows, key=_row_key)


def duckdb_count(path: Path | str) -> int:
    con = duckdb_connection()
    try:
        return con.sql(f"SELECT count(*) FROM delta_scan('{path}')").fetchone()[0]
    finally:
        con.close()


def _row_key(row: dict) -> str:
    return json.dumps(row, sort_keys=True, default=str)


def add_action(table: Path, name: str, n: int, start: int) -> dict:
    """A real parquet file of ids start..start+n-1 inside the table, and the `add` action
    that commits it (not committed yet)."""
    pq.write_table(pa.table({"id": pa.array(range(start, start + n), pa.int64())}), table / name)
    return {
        "add": {
            "path": name,
            "partitionValues": {},
            "size": (table / name).stat().st_size,
            "modificationTime": 1_700_000_000_000,
            "dataChange": True,
            "stats": json.dumps({"numRecords": n}),
        }
    }


def check_listing_from_each_version(storage: Any) -> int:
    """`storage.list_log(from_version=v)` for every version of the log and one past it: the
    version-named files (commits, checkpoints, checksums) of the whole listing at or after `v`,
    nothing else (no `_last_checkpoint`, no `_sidecars/` entry). Returns the versions checked."""
    whole = storage.list_log()
    versions = sorted({int(e.name.split(".")[0]) for e in whole if e.name[:1].isdigit()})
    assert versions, whole
    for v in [*versions, versions[-1] + 1]:
        expected = [e for e in whole if e.name[:1].isdigit() and int(e.name.split(".")[0]) >= v]
        assert storage.list_log(from_version=v) == expected, v
    return len(versions)


def is_hadoop_checksum(name: str) -> bool:
    """Whether `name` is a Hadoop checksum sidecar (``.<file>.crc``, written by Spark on local
    disk): it goes with its file and is no file of the table's (vacuum docs)."""
    return name.startswith(".") and name.endswith(".crc")


def module_from_file(name: str, path: Path) -> ModuleType:
    """The module at `path` (a script or hook outside the package), imported as `name`."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
