"""Proof that both sides of a benchmark did the same work, checked before any ratio is printed.

A benchmark that finds a difference prints one line, ``MISMATCH: <benchmark>: <what differed>``
(:func:`report_mismatch`), and exits 1; ``run_all.py`` reports that benchmark as MISMATCH and
exits 1 even with ``--no-fail``.

Pieces:

* :func:`read_state` -- a table's state as one reader sees it (``deltalake``, the reference, or
  ``delta-ops``): version, protocol, metaData, the live files (path, size, modification time,
  ``numRecords``) as a digest and a sorted parquet file, totals. It runs in a child process
  (``python benchmarks/verify.py READER TABLE OUT [--version V]``), so the state of a 10M-file
  table never stays in the benchmark process. :func:`state_difference` names the first
  difference of two states, with an example file.
* :func:`readers_agree` -- both readers load a table with equal states (what a load benchmark's
  two sides must each have produced); :func:`outputs_agree` -- each side printed the expected
  line (version and file count) in its timed runs.
* :func:`checkpoint_only_copy` -- a scratch table holding only a checkpoint (its parts and
  sidecars, hard-linked) and the ``_last_checkpoint`` written beside it: no JSON commit, so a
  reader gets every fact from the checkpoint. Read with ``deltalake``, it shows what state the
  checkpoint encodes.
* :func:`checkpoint_contents` -- what a checkpoint holds beyond the live state, read straight
  from its parquet: rows per action kind and the tombstones (removes) it keeps.
* :func:`set_difference` -- names the difference of two sets of names (files deleted, kept).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

__all__ = [
    "CheckpointContents",
    "Mismatch",
    "TableState",
    "checkpoint_contents",
    "checkpoint_only_copy",
    "contents_difference",
    "load_state",
    "outputs_agree",
    "printed",
    "read_state",
    "readers_agree",
    "report_mismatch",
    "set_difference",
    "state_difference",
]

MISMATCH_PREFIX = "MISMATCH:"
READERS = ("deltalake", "delta-ops")
#: columns of a state's sorted file list
FILE_COLUMNS = ("path", "size", "modification_time", "num_records")
#: action kinds counted in a checkpoint, each with a field every such action has
ACTION_KINDS = {
    "add": "path",
    "remove": "path",
    "metaData": "id",
    "protocol": "minReaderVersion",
    "txn": "appId",
    "domainMetadata": "domain",
}


class Mismatch(Exception):
    """The two sides (or a side and the table's true state) differ; ``str()`` says how."""


def report_mismatch(benchmark: str, what: str | Mismatch) -> int:
    """Print the one MISMATCH line and return the exit status for it (1)."""
    print(f"{MISMATCH_PREFIX} {benchmark}: {what}", flush=True)
    return 1


# --------------------------------------------------------------------------------------------
# table states


@dataclass(frozen=True)
class TableState:
    """A table's state at one version as one reader saw it (see :func:`read_state`)."""

    reader: str
    version: int
    protocol: dict[str, Any]
    metadata: dict[str, Any]
    num_files: int
    size_bytes: int
    num_records: int
    files_without_records: int
    files_digest: str
    files_path: Path = field(compare=False)

    def summary(self) -> str:
        """Version and totals, for a report line."""
        return (
            f"version {self.version}, {self.num_files} files, {self.size_bytes} bytes, "
            f"{self.num_records} records"
        )


def read_state(
    table: str | os.PathLike[str], out: Path, reader: str = "deltalake", version: int | None = None
) -> TableState:
    """`table`'s state as `reader` loads it (in a child process), kept under `out`.

    Raises:
        Mismatch: the reader could not load the table (its last error line is quoted).
    """
    if reader not in READERS:
        raise ValueError(f"unknown reader {reader!r}")
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    cmd = [sys.executable, str(Path(__file__).resolve()), reader, str(table), str(out)]
    if version is not None:
        cmd += ["--version", str(version)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        raise Mismatch(f"{reader} cannot load {table}: {last[:300]}")
    return load_state(out)


def load_state(out: Path) -> TableState:
    """A state written by :func:`read_state` (or this module's command line) to `out`."""
    data = json.loads((out / "state.json").read_text())
    return TableState(**data, files_path=out / "files.parquet")


def state_difference(
    expected_label: str, expected: TableState, label: str, got: TableState
) -> str | None:
    """The first way `got` differs from `expected`, named; None when they are the same."""
    for key in ("version", "protocol", "metadata"):
        want, have = getattr(expected, key), getattr(got, key)
        if want != have:
            if isinstance(want, dict) and isinstance(have, dict):
                keys = sorted(k for k in want.keys() | have.keys() if want.get(k) != have.get(k))
                detail = "; ".join(f"{k}: {have.get(k)!r} vs {want.get(k)!r}" for k in keys[:3])
                return f"{label} has another {key} than {expected_label} ({detail})"
            return f"{label} has {key} {have!r}, {expected_label} {want!r}"
    if expected.files_digest != got.files_digest:
        return (
            f"{label} has {got.num_files} live files, {expected_label} {expected.num_files}: "
            + (_files_difference(expected.files_path, got.files_path))
        )
    for key in ("num_files", "size_bytes", "num_records", "files_without_records"):
        if getattr(expected, key) != getattr(got, key):  # implied by the digest; belt and braces
            return (
                f"{label} has {key} {getattr(got, key)}, {expected_label} {getattr(expected, key)}"
            )
    return None


def readers_agree(table: str | os.PathLike[str], scratch: Path) -> TableState:
    """Load `table` with both readers (untimed, child processes); their states must be equal.
    Returns deltalake's. Raises Mismatch naming the first difference."""
    theirs = read_state(table, scratch / "deltalake", "deltalake")
    ours = read_state(table, scratch / "delta-ops", "delta-ops")
    difference = state_difference("deltalake", theirs, "delta-ops", ours)
    if difference:
        raise Mismatch(f"loading {table}: {difference}")
    return theirs


def outputs_agree(expected: str, outputs: dict[str, Iterable[str]], what: str) -> None:
    """Every line each side printed (label -> first line of each of its runs) must be
    `expected`. Raises Mismatch."""
    for label, lines in outputs.items():
        for line in lines:
            if line != expected:
                raise Mismatch(f"{label} printed {line!r}, expected {expected!r} ({what})")


def printed(measurement: Any) -> list[str]:  # a harness.Measurement
    """The first output line of a measurement's warm-up and of each of its timed runs."""
    return [measurement.output] + [run.first_line for run in measurement.runs]


def _files_difference(expected_path: Path, got_path: Path) -> str:
    """An example of a file only one side has, or of one whose facts differ."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    want, have = pq.read_table(expected_path), pq.read_table(got_path)
    missing = want.filter(pc.invert(pc.is_in(want["path"], value_set=have["path"])))
    extra = have.filter(pc.invert(pc.is_in(have["path"], value_set=want["path"])))
    parts = []
    if missing.num_rows:
        parts.append(f"{missing.num_rows} missing (e.g. {missing['path'][0].as_py()})")
    if extra.num_rows:
        parts.append(f"{extra.num_rows} extra (e.g. {extra['path'][0].as_py()})")
    if parts:
        return ", ".join(parts)
    # the same paths (both lists are sorted): the first row whose facts differ
    for start in range(0, want.num_rows, 65_536):
        a, b = want.slice(start, 65_536).to_pylist(), have.slice(start, 65_536).to_pylist()
        for x, y in zip(a, b):
            if x != y:
                keys = [k for k in FILE_COLUMNS if x[k] != y[k]]
                facts = ", ".join(f"{k} {y[k]!r} vs {x[k]!r}" for k in keys)
                return f"same paths, but {x['path']} has {facts}"
    return "same files, different digest (duplicate paths?)"


def _digest(files: Any) -> str:  # files: pa.Table sorted by path, FILE_COLUMNS
    """SHA-256 over the sorted file list: every path's bytes and every number."""
    import numpy as np
    import pyarrow as pa

    h = hashlib.sha256()
    paths = files["path"].combine_chunks().cast(pa.large_string())
    if len(paths):
        _, offsets_buffer, data = paths.buffers()[:3]
        offsets = np.frombuffer(
            offsets_buffer, dtype=np.int64, count=len(paths) + 1, offset=paths.offset * 8
        )
        h.update(np.diff(offsets).tobytes())  # each path's length, then all their bytes
        h.update(memoryview(data)[offsets[0] : offsets[-1]] if data is not None else b"")
    for name in FILE_COLUMNS[1:]:
        column = files[name].combine_chunks().fill_null(-1).cast(pa.int64())
        h.update(column.to_numpy(zero_copy_only=False).tobytes())
    return h.hexdigest()


def _write_state(
    out: Path,
    reader: str,
    version: int,
    protocol: dict[str, Any],
    metadata: dict[str, Any],
    files: Any,  # pa.Table of FILE_COLUMNS
) -> None:
    """Sort the file list, digest it, write state.json and files.parquet under `out`."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    files = files.take(pc.sort_indices(files, sort_keys=[("path", "ascending")]))
    records = files["num_records"]
    state = {
        "reader": reader,
        "version": version,
        "protocol": protocol,
        "metadata": metadata,
        "num_files": files.num_rows,
        "size_bytes": int(pc.sum(files["size"]).as_py() or 0),
        "num_records": int(pc.sum(records).as_py() or 0),
        "files_without_records": records.null_count,
        "files_digest": _digest(files),
    }
    pq.write_table(files, out / "files.parquet")
    (out / "state.json").write_text(json.dumps(state, indent=1) + "\n")


def _features(values: Iterable[str] | None) -> list[str] | None:
    return None if values is None else sorted(values)


def _read_with_deltalake(table: str, version: int | None, out: Path) -> None:
    import pyarrow as pa
    from deltalake import DeltaTable

    dt = DeltaTable(table) if version is None else DeltaTable(table, version=version)
    actions = pa.table(dt.get_add_actions(flatten=False))
    files = pa.table(
        [
            actions["path"],
            actions["size_bytes"],
            actions["modification_time"],
            actions["num_records"],
        ],
        names=list(FILE_COLUMNS),
    )
    p, m = dt.protocol(), dt.metadata()
    protocol = _protocol_facts(p)
    metadata = _metadata_facts(m, json.loads(dt.schema().to_json()))
    _write_state(out, "deltalake", dt.version(), protocol, metadata, files)


def _protocol_facts(p: Any) -> dict[str, Any]:
    """A protocol as both readers describe it (deltalake's and ours have the same fields)."""
    return {
        "min_reader_version": p.min_reader_version,
        "min_writer_version": p.min_writer_version,
        "reader_features": _features(p.reader_features),
        "writer_features": _features(p.writer_features),
    }


def _metadata_facts(m: Any, schema: Any) -> dict[str, Any]:
    """Table metadata as both readers describe it, with the schema each one parsed."""
    return {
        "id": m.id,
        "name": m.name,
        "description": m.description,
        "partition_columns": list(m.partition_columns),
        "configuration": dict(m.configuration),
        "created_time": m.created_time,
        "schema": schema,
    }


def _read_with_delta_ops(table: str, version: int | None, out: Path) -> None:
    import pyarrow as pa

    from delta_ops.table.snapshot import load_snapshot

    s = load_snapshot(table, version)
    index = s.file_index
    files = pa.table(
        [index["path"], index["size"], index["modificationTime"], s.record_counts],
        names=list(FILE_COLUMNS),
    )
    p, m = s.protocol, s.metadata
    protocol = _protocol_facts(p)
    metadata = _metadata_facts(m, json.loads(m.schema_string) if m.schema_string else None)
    _write_state(out, "delta-ops", s.version, protocol, metadata, files)


# --------------------------------------------------------------------------------------------
# checkpoints


def _checkpoint_names(log: Path, version: int) -> list[str]:
    prefix = f"{version:020d}.checkpoint"
    return sorted(n for n in os.listdir(log) if n.startswith(prefix) and n.endswith(".parquet"))


def checkpoint_only_copy(log: Path, version: int, scratch: Path) -> Path:
    """A table at `scratch` whose log holds only the checkpoint at `version` in `log` (parts
    and sidecars hard-linked) and `log`'s `_last_checkpoint`. Returns `scratch`.

    Raises:
        Mismatch: `log` has no checkpoint at `version`.
    """
    names = _checkpoint_names(log, version)
    if not names:
        raise Mismatch(f"no checkpoint at version {version} in {log}")
    if scratch.exists():
        shutil.rmtree(scratch)
    target = scratch / "_delta_log"
    target.mkdir(parents=True)
    for name in names:
        os.link(log / name, target / name)
    if (log / "_sidecars").is_dir():
        shutil.copytree(log / "_sidecars", target / "_sidecars", copy_function=os.link)
    if (log / "_last_checkpoint").exists():
        shutil.copyfile(log / "_last_checkpoint", target / "_last_checkpoint")
    return scratch


@dataclass(frozen=True)
class CheckpointContents:
    """Rows per action kind in a checkpoint, and the tombstones it keeps."""

    rows: dict[str, int]
    tombstones: frozenset[str]


def checkpoint_contents(log: Path, version: int) -> CheckpointContents:
    """Read the checkpoint at `version` in `log` (every part and sidecar) a batch at a time,
    one leaf of each action kind (so a 10M-row checkpoint's stats are never decoded)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    paths = [log / n for n in _checkpoint_names(log, version)]
    if (log / "_sidecars").is_dir():
        paths += sorted((log / "_sidecars").glob("*.parquet"))
    rows = dict.fromkeys(ACTION_KINDS, 0)
    tombstones: set[str] = set()
    for path in paths:
        parquet = pq.ParquetFile(path)
        present = [k for k in ACTION_KINDS if k in parquet.schema_arrow.names]
        columns = [f"{kind}.{ACTION_KINDS[kind]}" for kind in present]
        for batch in parquet.iter_batches(batch_size=65_536, columns=columns):
            for kind in present:
                column = batch.column(kind)
                rows[kind] += len(column) - column.null_count
                if kind == "remove" and column.null_count < len(column):
                    removed = pc.struct_field(column.filter(column.is_valid()), "path")
                    tombstones.update(removed.to_pylist())
    return CheckpointContents(rows=rows, tombstones=frozenset(tombstones))


def contents_difference(
    label_a: str, a: CheckpointContents, label_b: str, b: CheckpointContents
) -> str | None:
    """How two checkpoints of one version differ beyond the live state; None when they agree."""
    for kind in ACTION_KINDS:
        if kind != "remove" and a.rows[kind] != b.rows[kind]:
            return f"{label_a} holds {a.rows[kind]} {kind} rows, {label_b} {b.rows[kind]}"
    return set_difference(f"tombstones kept by {label_a}", a.tombstones, label_b, b.tombstones)


def set_difference(label_a: str, a: Iterable[str], label_b: str, b: Iterable[str]) -> str | None:
    """Names how two sets differ (sizes and an example each way); None when equal."""
    a, b = set(a), set(b)
    if a == b:
        return None
    only_a, only_b = sorted(a - b), sorted(b - a)
    parts = [f"{label_a}: {len(a)}, {label_b}: {len(b)}"]
    if only_a:
        parts.append(f"{len(only_a)} only in the first (e.g. {only_a[0]})")
    if only_b:
        parts.append(f"{len(only_b)} only in the second (e.g. {only_b[0]})")
    return "; ".join(parts)


# --------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="write a table's state as READER loads it")
    parser.add_argument("reader", choices=READERS)
    parser.add_argument("table")
    parser.add_argument("out", type=Path)
    parser.add_argument("--version", type=int)
    args = parser.parse_args(argv)
    read = _read_with_deltalake if args.reader == "deltalake" else _read_with_delta_ops
    read(args.table, args.version, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
