"""Clustering: the rows of each partition rewritten in the order of a space-filling curve over
some columns, so that each new file covers a small box of their values and readers skip files
by their min/max statistics (Delta's `OPTIMIZE ZORDER BY` and liquid clustering's `OPTIMIZE`).

    columns = resolve_columns(snapshot, [("a",), ("b",)], "--zorder-by")  # layout.clustering
    plan = plan_cluster(snapshot, columns)
    result = execute_cluster(plan)

This module is compaction's clustering mode, and only `delta_ops.ops.compact` imports it. What
a table says of its clustering (its columns, which files a clustering wrote, how well they
separate) is in `delta_ops.layout.clustering`, which `cluster_by`, the health check and the
Spark writers read.

`delta-ops compact` plans this (`delta_ops.ops.compact.plan_optimize`) in two cases, as Delta
Spark's OPTIMIZE chooses its mode:

* ``--zorder-by a,b`` (mode ``zorder``): the Z-order curve over the columns;
* a table with the `clustering` feature (`liquid` before Delta named it) whose
  `delta.clustering` domain lists columns (mode ``clustering``): a Hilbert curve over two or
  more columns, Z-order over one (`delta_ops.layout.curves`), and every new file says so
  with ``clusteringProvider: "liquid"``.

The new files carry Delta's Z-cube tags: ``ZCUBE_ID`` (one id per cube: the files one run
wrote together), ``ZCUBE_ZORDER_BY`` (the columns' logical names, as JSON) and
``ZCUBE_ZORDER_CURVE`` (``zorder`` or ``hilbert``). They make the work incremental, with Delta
Spark's rule for clustered tables (`ClusteringStrategy`): per partition, files without a cube of
these columns are candidates, and so are the files of cubes smaller than ``min_cube_size``
(new data merges into small cubes); a cube at least that big is never rewritten, and neither
is a partition whose candidates are one single cube already (so a second run on an unchanged
table plans nothing). A small cube none of whose files' [min, max] boxes on the clustering
columns meets the box of the partition's new (unclustered) files is left alone as well: the
new rows would not land among its rows. ``full`` rewrites every file of the selected
partitions, as Delta's `OPTIMIZE FULL`. In clustering mode, files clustered by other columns or
by another provider are left alone (Delta: changing the clustering columns does not recluster
old data) unless ``full`` is given; `--zorder-by` takes them as candidates (the user asked for
this order).

Memory: each cube is rewritten in the curve's order without holding it. A cube of at most
IN_MEMORY_BYTES is read, sorted and cut into files in memory; a bigger one is range
partitioned: a first pass samples the clustering columns (only those columns, at most
SAMPLE_ROWS keys kept), which fixes the curve and the bounds of ranges of at most
SPILL_RANGE_BYTES (a SPILL_PARTS-th of a smaller cube); a second pass streams groups of input
files (deletion vectors applied, row ids materialized: see `delta_ops.ops.rewrite`) into
per-range spill files on local disk; each output file then takes a stretch of consecutive
ranges, each sorted on its own and written as a row group. Both passes run on threads of this
process, one per core (Arrow's decoding and writing and numpy's sorting release the GIL; one
thread below SERIAL_BELOW_BYTES); a cube of FORK_MIN_BYTES (1 GB) of local files or more runs
them on forked workers instead, one per core (as compaction's big rewrites), where a worker that dies leaves files the rewrite's name prefix finds and deletes. Below that
size a forked worker's copy of the process (~90 MB, counted again in the process tree's
memory) would cost more than the work it shares. Memory holds a group of input files or one
range per thread or process, never the cube, and each about once: a group's rows are taken
range by range into the spill files, a range's sorted column by column, the written files
keep small dictionaries (DICTIONARY_PAGE_BYTES), and the freed memory goes back to the OS
after each group and range (under the system allocator of the `delta-ops` process, a thread's
arena would keep it).

As in compaction, the new files have ``dataChange=false``, one commit removes the old ones and
adds the new ones, appends landing meanwhile never conflict, and a crash before the commit
leaves files no version references (vacuum removes them). On the Spark engine each cube is one
task (a big cube's passes run in it, one after the other).
"""

from __future__ import annotations

import itertools
import json
import math
import os
import tempfile
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from delta_ops.errors import InvalidValue, reading
from delta_ops.layout.clustering import (
    CLUSTERING_PROVIDER,
    ZCUBE_ID,
    ZCUBE_ZORDER_BY,
    ZCUBE_ZORDER_CURVE,
    ClusteringColumn,
    cube_of,
)
from delta_ops.layout.curves import (
    Curve,
    CurveKind,
    curve_for_clustering,
    fit_curve,
    range_bounds,
    range_ids,
)
from delta_ops.layout.write_order import curve_keys, stride_sample
from delta_ops.log.actions import from_numpy
from delta_ops.ops.engines import LOCAL, Engine, Spread
from delta_ops.ops.operation import EnginePlan, Timed, timed
from delta_ops.ops.results import fields_data
from delta_ops.protocol.features import Access
from delta_ops.protocol.partition_predicate import PartitionPredicate
from delta_ops.protocol.units import format_bytes
from delta_ops.table.parquet_format import DEFAULT_FORMAT, ParquetFormat
from delta_ops.table.snapshot import Snapshot

if TYPE_CHECKING:  # the rewriting stack is loaded by the commands that write
    from delta_ops.ops.rewrite import Rewriter

#: a cube this big takes no more new data (Delta Spark:
#: optimize.clustering.mergeStrategy.minCubeSize.threshold, 100 x its 1 GB max file size)
DEFAULT_MIN_CUBE_SIZE = 100 * 1024**3
#: a cube of files up to this size is sorted in memory; a bigger one is range partitioned
IN_MEMORY_BYTES = 8 * 1024 * 1024
#: a range partitioned cube: input files read (and spilled) at most this many bytes at a
#: time ...
SPILL_CHUNK_BYTES = 8 * 1024 * 1024
#: ... into ranges of about this many bytes of files at most, each sorted alone and written
#: as a row group of its own (an output file streams several consecutive ranges), at most
#: MAX_SPILL_RANGES of them (open spill files) ...
SPILL_RANGE_BYTES = 8 * 1024 * 1024
MAX_SPILL_RANGES = 512
#: ... a smaller cube in chunks and ranges of a SPILL_PARTS-th of it, at least MIN_SPILL_BYTES:
#: what a thread holds (a chunk, a range) then stays small beside the process's own ~90 MB
#: (a 51 MB cube: 2 MB, peak 120 MB against 140 MB with 4 MB and 170 MB with 8 MB; a 26 MB
#: cube: 1 MB, peak 100-101 MB against 102-103 MB with 2 MB, 10% more CPU)
SPILL_PARTS = 25
MIN_SPILL_BYTES = 1024 * 1024
#: the files a clustering writes: a column's dictionary grows to this many bytes before its
#: values go plain instead (Arrow's default, 1 MB, buffered a row group's pages and hash table
#: of a column of distinct values before giving up: a 300k-row range of ints, doubles and
#: short strings took 40 MB of the writer's memory and 3x its CPU, against 12 MB, and wrote a
#: bigger file; a column of a few thousand short values still gets its dictionary)
DICTIONARY_PAGE_BYTES = 64 * 1024
#: a range-partitioned cube of at least this many bytes of local files is worked on by forked
#: workers (`_spread`): below it a forked worker's copy of the process (~90 MB of
#: interpreter, Arrow and the table's state, counted again in the process tree's memory)
#: costs more than the work it shares
FORK_MIN_BYTES = 1024**3
#: a range-partitioned cube of fewer bytes runs its passes on one thread: two threads' chunks
#: and ranges would weigh more than the second core saves (1M rows, 26 MB: 120 -> 110 MB,
#: 0.80 -> 0.93 s, less CPU)
SERIAL_BELOW_BYTES = 32 * 1024 * 1024
_CORES = os.cpu_count() or 1
#: keys kept by the sampling pass of a range-partitioned cube (per clustering column)
SAMPLE_ROWS = 200_000
#: files up to this size are read whole by the sampling pass
_WHOLE_READ_BYTES = 8 * 1024 * 1024
#: the column carrying each row's curve value through the spill files
_CURVE_COLUMN = "__delta_ops_curve"


class Mode(StrEnum):
    """Which OPTIMIZE a clustering is: `ZORDER BY` columns, or a clustered table's own."""

    ZORDER = "zorder"
    CLUSTERING = "clustering"


# ------------------------------------------------------------------------------ the plan
@dataclass(frozen=True)
class Cube:
    """Files of one partition rewritten together, in curve order, into files near the
    target size, all tagged with one new ZCUBE_ID."""

    partition_values: tuple[tuple[str, str | None], ...]
    paths: tuple[str, ...]
    size: int

    def to_dict(self) -> dict[str, Any]:
        return fields_data(self, partition_values=dict(self.partition_values))


@dataclass(frozen=True)
class ClusterPlan(EnginePlan):
    """The cubes to write, and what is left alone."""

    table: str
    version: int
    mode: Mode
    columns: tuple[str, ...]  # logical names, dotted
    curve: CurveKind
    target_size: int
    min_cube_size: int
    full: bool
    where: str | None
    cubes: tuple[Cube, ...]
    files_before: int
    #: files already clustered by these columns that the plan leaves as they are
    files_kept: int
    #: files clustered by other columns or another provider, left as they are (clustering)
    files_clustered_otherwise: int
    snapshot: Snapshot = field(repr=False, compare=False)
    clustering: tuple[ClusteringColumn, ...] = field(repr=False, compare=False, default=())
    #: the codec and row-group size of the files written
    parquet: ParquetFormat = field(default=DEFAULT_FORMAT, repr=False, compare=False)

    @property
    def nothing_to_do(self) -> bool:
        return not self.cubes

    @property
    def idle_reason(self) -> str:
        if self.files_clustered_otherwise:
            return (
                f"{self.files_clustered_otherwise:,} files are clustered by other columns and"
                " stay so (--full clusters them again)"
            )
        if self.files_kept:
            return f"every file is already clustered by {', '.join(self.columns)}"
        return "no file to cluster"

    def describe(self) -> str:
        return describe_plan(self)

    def execute(self) -> ClusterResult:
        return execute_cluster(self)

    @property
    def files_to_rewrite(self) -> int:
        return sum(len(c.paths) for c in self.cubes)

    def to_dict(self) -> dict[str, Any]:
        return fields_data(
            self,
            files_to_rewrite=self.files_to_rewrite,
            num_cubes=len(self.cubes),
            engine=self.engine.name,
            parquet=self.parquet.to_dict(),
        )


@dataclass(frozen=True)
class ClusterResult(Timed):
    """What a clustering did."""

    table: str
    version: int | None
    mode: Mode
    columns: tuple[str, ...]
    curve: CurveKind
    files_removed: int
    files_added: int
    bytes_removed: int
    bytes_added: int
    cubes: int
    files_written: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return fields_data(self)

    def describe(self) -> str:
        return describe_result(self)


@dataclass
class _File:
    path: str
    size: int
    has_dv: bool
    cube: str | None  # the ZCUBE_ID of a file clustered by these columns
    stats: Any = None


def plan_cluster(
    snapshot: Snapshot,
    columns: Sequence[ClusteringColumn],
    *,
    mode: Mode = Mode.ZORDER,
    target_size: int,
    min_cube_size: int = DEFAULT_MIN_CUBE_SIZE,
    where: PartitionPredicate | None = None,
    full: bool = False,
    engine: Engine = LOCAL,
    parquet: ParquetFormat = DEFAULT_FORMAT,
) -> ClusterPlan:
    """The cubes each partition's candidate files form (see the module text); pure apart from
    reading the log (the stats of small cubes' files, to see whether new rows meet them)."""
    if target_size < 1:
        raise InvalidValue(f"--target-size {target_size}: a size such as 128MB")
    if min_cube_size < 0:
        raise InvalidValue(f"--min-cube-size {min_cube_size}: a size such as 100GB")
    if not columns:
        raise InvalidValue("clustering needs at least one column")
    snapshot.protocol.check_allows(Access.COMPACT)
    names = tuple(c.name for c in columns)
    logical = [".".join(c.logical) for c in columns]
    mode = Mode(mode)
    curve = CurveKind.ZORDER if mode is Mode.ZORDER else curve_for_clustering(len(columns))
    files = snapshot.file_index.select(
        ["path", "size", "partitionValues", "deletionVector", "tags", "clusteringProvider"]
    )
    if where is not None:
        files = files.filter(where.mask(files))
    partitions: dict[tuple[tuple[str, str | None], ...], list[_File]] = {}
    kept = otherwise = 0
    cube_ids, others = _file_cubes(files, logical, curve)
    group, group_values = _partition_groups(files, snapshot.partition_columns)
    paths = files.column("path").to_pylist()
    sizes = pc.fill_null(files.column("size"), 0).to_numpy().tolist()
    dvs = pc.is_valid(files.column("deletionVector")).to_numpy(zero_copy_only=False).tolist()
    for i, (mine, other) in enumerate(zip(cube_ids, others, strict=True)):
        if mode is Mode.CLUSTERING and mine is None and other and not full:
            otherwise += 1  # clustered by other columns or another provider: left (Delta)
            continue
        file = _File(paths[i], int(sizes[i]), bool(dvs[i]), mine)
        partitions.setdefault(group_values[group[i]], []).append(file)
    cubes: list[Cube] = []
    cube_size = max(min_cube_size + min_cube_size // 2, target_size)
    for values in sorted(partitions, key=str):
        chosen, left = _candidates(snapshot, partitions[values], columns, min_cube_size, full)
        kept += left
        cubes += [Cube(values, paths, size) for paths, size in _pack(chosen, cube_size)]
    return ClusterPlan(
        table=snapshot.storage.url,
        version=snapshot.version,
        mode=mode,
        columns=names,
        curve=curve,
        target_size=target_size,
        min_cube_size=min_cube_size,
        full=full,
        where=str(where) if where is not None else None,
        cubes=tuple(cubes),
        files_before=snapshot.num_files,
        files_kept=kept,
        files_clustered_otherwise=otherwise,
        snapshot=snapshot,
        clustering=tuple(columns),
        engine=engine,
        parquet=parquet,
    )


def _file_cubes(
    files: pa.Table, logical: list[str], curve: CurveKind
) -> tuple[list[str | None], list[bool]]:
    """Each file's ZCUBE_ID where its tags say it is clustered by these columns with this
    curve (`cube_of`), and whether it is clustered at all (a Z-cube, or a provider): read
    from the tags column by column, each distinct tag combination judged once."""
    n = files.num_rows
    tags = files.column("tags").combine_chunks()
    provider = files.column("clusteringProvider").combine_chunks()
    if not n:
        return [], []

    def tag(key: str) -> pa.Array:
        if not len(tags) or tags.null_count == n:
            return pa.nulls(n, pa.string())
        return pc.map_lookup(tags, pa.scalar(key, pa.string()), "first")

    cube, by, kind = tag(ZCUBE_ID), tag(ZCUBE_ZORDER_BY), tag(ZCUBE_ZORDER_CURVE)
    # the judgement depends on (by, curve, provider) only: one call per distinct combination
    combined = pc.binary_join_element_wise(
        pc.fill_null(by, "\x00"), pc.fill_null(kind, "\x00"), pc.fill_null(provider, "\x00"), "\x01"
    )
    encoded = pc.dictionary_encode(combined)
    verdict = []
    for text in encoded.dictionary.to_pylist():
        by_text, kind_text, provider_text = (None if v == "\x00" else v for v in text.split("\x01"))
        probe = {ZCUBE_ID: "x"} | ({ZCUBE_ZORDER_BY: by_text} if by_text is not None else {})
        if kind_text is not None:
            probe[ZCUBE_ZORDER_CURVE] = kind_text
        verdict.append(cube_of(probe, provider_text, logical, curve) is not None)
    matches = np.array(verdict, dtype=bool)[encoded.indices.to_numpy()]
    ids = cube.to_pylist()
    mine = [c if m and c is not None else None for c, m in zip(ids, matches.tolist(), strict=True)]
    clustered = pc.or_(pc.is_valid(cube), pc.is_valid(provider)).to_numpy(zero_copy_only=False)
    return mine, clustered.tolist()


def _partition_groups(
    files: pa.Table, partition_columns: Sequence[str]
) -> tuple[list[int], list[tuple[tuple[str, str | None], ...]]]:
    """Each file's partition (an index) and each partition's values, sorted by key."""
    n = files.num_rows
    if not partition_columns or not n:
        return [0] * n, [()]
    values = files.column("partitionValues").combine_chunks()
    # a key of the values in key order (null and missing apart from every text)
    keys = sorted({k for row in values.slice(0, 1).to_pylist() for k, _ in row or ()})
    if not keys:
        keys = list(partition_columns)
    parts = [
        pc.fill_null(pc.map_lookup(values, pa.scalar(k, pa.string()), "first"), "\x00")
        for k in keys
    ]
    joined = pc.binary_join_element_wise(*parts, "\x01") if len(parts) > 1 else parts[0]
    encoded = pc.dictionary_encode(joined)
    indices = encoded.indices.to_numpy()
    first = np.full(len(encoded.dictionary), -1, dtype=np.int64)
    first[indices[::-1]] = np.arange(n - 1, -1, -1)  # each group's first row
    group_values = [tuple(sorted(values[int(row)].as_py() or ())) for row in first.tolist()]
    return indices.tolist(), group_values


def _candidates(
    snapshot: Snapshot,
    files: list[_File],
    columns: Sequence[ClusteringColumn],
    min_cube_size: int,
    full: bool,
) -> tuple[list[_File], int]:
    """One partition's files to rewrite (new ones first, in path order, then small cubes'
    by cube), and how many clustered files stay."""
    if full:
        return sorted(files, key=lambda f: f.path), 0
    new = sorted((f for f in files if f.cube is None), key=lambda f: f.path)
    by_cube: dict[str, list[_File]] = {}
    for f in files:
        if f.cube is not None:
            by_cube.setdefault(f.cube, []).append(f)
    # Delta's rule (`ZCube.filterOutLargeZCubes`): every cube under the minimum size is merged
    # with the new files, wherever their rows land; leaving out the small cubes the new rows
    # miss (keys growing over time: appends of new days or ids) let a cube a run pile up
    small = {c: fs for c, fs in by_cube.items() if sum(f.size for f in fs) < min_cube_size}
    if not new and len(small) <= 1:
        small = {}  # one cube alone is as clustered as it gets
    chosen = new + [f for c in sorted(small) for f in sorted(small[c], key=lambda f: f.path)]
    return chosen, sum(1 for f in files if f.cube is not None) - sum(map(len, small.values()))


def _pack(files: list[_File], cube_size: int) -> Iterator[tuple[tuple[str, ...], int]]:
    """Consecutive files packed into cubes of at most `cube_size` bytes (at least one file
    each). A lone file without a deletion vector is still rewritten: it gets sorted."""
    paths: list[str] = []
    size = 0
    for f in files:
        if paths and size + f.size > cube_size:
            yield tuple(paths), size
            paths, size = [], 0
        paths.append(f.path)
        size += f.size
    if paths:
        yield tuple(paths), size


# ------------------------------------------------------------------------------ execution
@timed
def execute_cluster(plan: ClusterPlan) -> ClusterResult:
    """Write each cube's rows in curve order into files near the target size, then commit
    every new file and the removal of every old one as one version."""
    empty = ClusterResult(plan.table, None, plan.mode, plan.columns, plan.curve, 0, 0, 0, 0, 0, ())
    if plan.nothing_to_do:
        return empty
    # start-up cost: the rewriting stack is loaded by the commands that write
    from delta_ops.ops.rewrite import Rewriter, live_file_rows

    snapshot = plan.snapshot
    paths = {p for c in plan.cubes for p in c.paths}
    rows = {r["path"]: r for r in live_file_rows(snapshot, paths)}
    parquet = plan.parquet
    if parquet.dictionary_page_bytes is None:
        parquet = replace(parquet, dictionary_page_bytes=DICTIONARY_PAGE_BYTES)
    rewriter = Rewriter(snapshot, list(rows.values()), Access.COMPACT, parquet=parquet)
    adds: list[dict[str, Any]] = []
    layout = _Layout.of(plan)
    try:
        if plan.engine.name == LOCAL.name:
            for cube in plan.cubes:
                adds += _write_cube(rewriter, layout, [rows[p] for p in cube.paths], cube)
        else:  # one task per cube
            work = [(cube, [rows[p] for p in cube.paths]) for cube in plan.cubes]
            adds = _write_cubes_elsewhere(plan.engine, rewriter, layout, work)
        removes = rewriter.removes(rows)
    except BaseException:
        rewriter.discard()
        raise
    logical = [".".join(c.logical) for c in plan.clustering]
    order_by = json.dumps(logical, separators=(",", ":"))
    removed_bytes = sum(c.size for c in plan.cubes)
    added_bytes = sum(int(a["size"]) for a in adds)
    version = rewriter.commit(
        "OPTIMIZE",
        {
            "predicate": json.dumps([plan.where]) if plan.where else "[]",
            "zOrderBy": order_by if plan.mode is Mode.ZORDER else "[]",
            **({"clusterBy": order_by} if plan.mode is Mode.CLUSTERING else {}),
            "auto": False,
            **({"isFull": True} if plan.full else {}),
        },
        removes,
        adds,
        {
            "numRemovedFiles": len(rows),
            "numAddedFiles": len(adds),
            "numRemovedBytes": removed_bytes,
            "numAddedBytes": added_bytes,
        },
    )
    return ClusterResult(
        table=plan.table,
        version=version,
        mode=plan.mode,
        columns=plan.columns,
        curve=plan.curve,
        files_removed=len(rows),
        files_added=len(adds),
        bytes_removed=removed_bytes,
        bytes_added=added_bytes,
        cubes=len(plan.cubes),
        files_written=tuple(a["path"] for a in adds),
    )


@dataclass(frozen=True)
class _Layout:
    """What writing a cube needs of its plan (no snapshot: portable to a Spark task)."""

    mode: Mode
    curve: CurveKind
    target_size: int
    clustering: tuple[ClusteringColumn, ...]

    @classmethod
    def of(cls, plan: ClusterPlan) -> _Layout:
        return cls(plan.mode, plan.curve, plan.target_size, plan.clustering)


def _cube_task(
    rewriter: Rewriter, layout: _Layout, item: tuple[Cube, list[Mapping[str, Any]]]
) -> tuple[list[dict[str, Any]], list[str]]:
    """One cube written by a Spark task (a big cube's passes run in the task, one after the
    other): its adds, and the table-relative files it wrote."""
    cube, members = item
    return _write_cube(rewriter, layout, members, cube, fork=False), list(rewriter.written)


def _write_cubes_elsewhere(
    engine: Engine, rewriter: Rewriter, layout: _Layout, work: list[tuple[Cube, list[Any]]]
) -> list[dict[str, Any]]:
    """Every cube written by the engine's tasks, one cube each; the files they wrote are
    recorded on `rewriter` as results arrive (and, if the job fails, found by the rewrite's
    file prefix), so `discard()` removes them."""

    def finished(index: int, done: tuple[list[dict[str, Any]], list[str]]) -> None:
        rewriter.written.extend(done[1])

    try:
        written = engine.map_ordered(
            partial(_cube_task, rewriter.portable(), layout),
            work,
            spread=Spread.PROCESSES,
            on_done=finished,
        )
    except BaseException:
        rewriter.record_files_written_elsewhere(
            rewriter.directory_of(members[0]) for _, members in work if members
        )
        raise
    return [add for adds, _ in written for add in adds]


def _write_cube(
    rewriter: Rewriter,
    plan: _Layout,
    members: list[Mapping[str, Any]],
    cube: Cube,
    *,
    fork: bool = True,
) -> list[dict[str, Any]]:
    """One cube's rows in curve order, as files near the target size; their adds. A big
    cube's passes run on forked workers where `fork` allows and the files are local."""
    logical = [".".join(c.logical) for c in plan.clustering]
    keep: dict[str, Any] = {
        "tags": {
            ZCUBE_ID: str(uuid.uuid4()),
            ZCUBE_ZORDER_BY: json.dumps(logical, separators=(",", ":")),
            ZCUBE_ZORDER_CURVE: plan.curve.value,
        }
    }
    if plan.mode is Mode.CLUSTERING:
        keep["clusteringProvider"] = CLUSTERING_PROVIDER
    directory = rewriter.directory_of(members[0])
    values = dict(cube.partition_values)
    schema = rewriter.output_schema()
    files = max(1, math.ceil(cube.size / plan.target_size))
    physical = [c.physical for c in plan.clustering]
    adds = []
    if cube.size <= IN_MEMORY_BYTES:
        tables = [table for _, table in rewriter.read_all(members)]
        data = pa.concat_tables(tables) if tables else schema.empty_table()
        del tables
        keys = curve_keys(data, physical)
        curve = fit_curve(plan.curve, [stride_sample(k, SAMPLE_ROWS) for k in keys])
        data = data.take(pa.array(_curve_order(curve.values(keys))))
        if not data.num_rows:
            return []  # every row deleted (deletion vectors): the files go, none comes
        for start, stop in _slices(data.num_rows, files):
            piece = data.slice(start, stop - start)
            adds.append(rewriter.write([piece], schema, directory, values, keep))
        return adds
    range_bytes = _spill_bytes(cube.size, SPILL_RANGE_BYTES)
    ranges = min(MAX_SPILL_RANGES, max(files, math.ceil(cube.size / max(1, range_bytes))))
    groups = list(_groups(members, _spill_bytes(cube.size, SPILL_CHUNK_BYTES)))
    spread = _spread(cube, rewriter, fork)
    curve, bounds = _fit_ranges(rewriter, plan, groups, physical, ranges, spread)
    with tempfile.TemporaryDirectory(prefix="delta-ops-cluster-") as spill:
        spilled = LOCAL.map_ordered(
            partial(_spill_group, rewriter, curve, bounds, physical, Path(spill)),
            list(enumerate(groups)),
            spread=spread,
            threads=_CORES,
        )
        del curve, bounds  # every row has its curve value: the cut points (MBs) can go
        counts: dict[int, int] = {}
        for group_counts in spilled:
            for r, n in group_counts.items():
                counts[r] = counts.get(r, 0) + n
        write = partial(
            _write_stretch, rewriter, Path(spill), len(groups), schema, directory, values, keep
        )
        stretches = _stretches(counts, files)
        here = LOCAL.runs_here(spread) or len(stretches) < 2  # else forked workers write

        def finished(index: int, done: tuple[dict[str, Any], str]) -> None:
            if not here:  # a worker wrote it: record it, so a failure discards it
                rewriter.written.append(done[1])

        try:
            written = LOCAL.map_ordered(
                write, stretches, spread=spread, on_done=finished, threads=_CORES
            )
        except BaseException:
            if not here:  # a worker killed mid-write left a file only its name prefix finds
                rewriter.record_files_written_elsewhere([directory])
            raise
    return [add for add, _ in written]


def _spill_bytes(cube_size: int, most: int) -> int:
    """The bytes of files a range-partitioned cube reads at a time, or puts in one range: a
    SPILL_PARTS-th of the cube, at least MIN_SPILL_BYTES, at most `most`."""
    return min(most, max(MIN_SPILL_BYTES, cube_size // SPILL_PARTS))


def _spread(cube: Cube, rewriter: Rewriter, fork: bool) -> Spread:
    """How a big cube's passes run: one after the other where `fork` forbids more (a Spark
    task); on forked workers, one per core, for a cube of FORK_MIN_BYTES or more of local
    files; one after the other again for a cube under SERIAL_BELOW_BYTES; else on threads of
    this process, one per core (Arrow's decoding and writing and numpy's sorting release the
    GIL), so the process tree holds one copy of the process."""
    if not fork:
        return Spread.SERIAL
    if cube.size >= FORK_MIN_BYTES and rewriter.storage.is_local:
        return Spread.PROCESSES
    if cube.size < SERIAL_BELOW_BYTES:
        return Spread.SERIAL
    return Spread.THREADS


def _stretches(counts: Mapping[int, int], files: int) -> list[list[int]]:
    """The ranges that hold rows, in order, cut into at most `files` consecutive stretches of
    about equal row counts (none empty)."""
    ranges = sorted(r for r, n in counts.items() if n)
    total = sum(counts[r] for r in ranges)
    out: list[list[int]] = []
    done = 0
    for r in ranges:
        # the stretch a range belongs to: where the rows before its middle fall
        index = min(files - 1, (2 * done + counts[r]) * files // (2 * total))
        if not out or index > len(out) - 1:
            out.append([])
        out[-1].append(r)
        done += counts[r]
    return out


def _fit_ranges(
    rewriter: Rewriter,
    plan: _Layout,
    groups: list[list[Mapping[str, Any]]],
    physical: list[tuple[str, ...]],
    ranges: int,
    spread: Spread,
) -> tuple[Curve, np.ndarray]:
    """The curve of a big cube, and the bounds of `ranges` stretches of it holding about as
    many rows each: from a sample of the clustering columns (only they are read; deletion
    vectors ignored), each group of files sampled by a worker in proportion to its bytes, about
    SAMPLE_ROWS rows in all."""
    total = sum(int(m.get("size") or 0) for g in groups for m in g) or 1
    shares = [
        (group, max(1_000, SAMPLE_ROWS * sum(int(m.get("size") or 0) for m in group) // total))
        for group in groups
    ]
    sampled = LOCAL.map_ordered(
        partial(_sample_group, rewriter, physical), shares, spread=spread, threads=_CORES
    )
    # column by column, each group's sample let go once gathered: the sample is held about
    # once, not three times (the groups', their concatenation, its columns)
    samples = [np.zeros(0, np.uint64) for _ in physical]
    if sampled:
        for i in range(len(physical)):
            samples[i] = np.concatenate([rows[:, i] for rows in sampled])
        del sampled
    curve = fit_curve(plan.curve, samples)
    values = curve.values(samples)
    del samples  # only the sample's curve values are needed from here on
    return curve, range_bounds(values, ranges)


def _sample_group(
    rewriter: Rewriter,
    physical: list[tuple[str, ...]],
    item: tuple[list[Mapping[str, Any]], int],
) -> np.ndarray:
    """Keys of evenly spaced rows of a group of files (rows x clustering columns), at most
    about twice `limit` of them: only the clustering columns are read."""
    group, limit = item
    sample = _Sample(limit)
    for member in group:
        sample.add(curve_keys(_read_columns(rewriter, member, physical), physical))
    return np.stack(sample.columns(len(physical)), axis=1)


def _spill_file(spill: Path, r: int, group: int) -> Path:
    return spill / f"range-{r:06d}-{group:06d}.arrow"


def _spill_group(
    rewriter: Rewriter,
    curve: Curve,
    bounds: np.ndarray,
    physical: list[tuple[str, ...]],
    spill: Path,
    item: tuple[int, list[Mapping[str, Any]]],
) -> dict[int, int]:
    """One group of a big cube's input files (deletion vectors applied, row ids
    materialized), each row with its curve value, sent to its range's spill file of this
    group; the rows of each range. Runs in a worker process: memory holds the group."""
    from pyarrow import ipc  # the spill format: only big cubes need it

    index, group = item
    schema = rewriter.output_schema().append(pa.field(_CURVE_COLUMN, pa.uint64()))
    writers: dict[int, Any] = {}
    counts: dict[int, int] = {}
    try:
        for _, chunk in rewriter.read_all(group):
            values = curve.values(curve_keys(chunk, physical))
            ids = range_ids(values, bounds)
            # range ids fit 16 bits (MAX_SPILL_RANGES): numpy sorts those by radix, in one pass
            order = np.argsort(ids.astype(np.uint16), kind="stable")
            in_range = np.bincount(ids, minlength=len(bounds) + 1)
            del ids
            # each range's rows taken on their own: memory holds the chunk and one range's
            # copy of it, never a second copy of the whole chunk (a take from the chunk's
            # many file-sized chunks costs no more than from one)
            start = 0
            for r in np.flatnonzero(in_range).tolist():
                stop = start + int(in_range[r])
                rows = order[start:stop]
                piece = chunk.take(from_numpy(rows)).append_column(
                    _CURVE_COLUMN, from_numpy(values[rows])
                )
                counts[r] = counts.get(r, 0) + stop - start
                if r not in writers:
                    writers[r] = ipc.new_file(str(_spill_file(spill, r, index)), schema)
                writers[r].write_table(piece)
                del piece
                start = stop
            del chunk, values, order
            _release_memory()
    finally:
        for writer in writers.values():
            writer.close()
    return counts


def _write_stretch(
    rewriter: Rewriter,
    spill: Path,
    groups: int,
    schema: pa.Schema,
    directory: str,
    values: Mapping[str, str | None],
    keep: Mapping[str, Any],
    stretch: list[int],
) -> tuple[dict[str, Any], str]:
    """One output file: the ranges of `stretch`, each sorted alone and written as a row
    group of its own, in order (consecutive ranges are consecutive stretches of the curve).
    Its add and table-relative path. Runs in a worker process: memory holds one range."""
    pieces = (_sorted_range(spill, r, groups) for r in stretch)
    add = rewriter.write(pieces, schema, directory, values, keep, gather=False)
    return add, unquote(add["path"])  # not written[-1]: another thread may have written since


def _sorted_range(spill: Path, r: int, groups: int) -> pa.Table:
    """A spilled range's rows (every group's part of it) sorted along the curve; its spill
    files deleted."""
    from pyarrow import ipc  # the spill format: only big cubes need it

    parts = [_spill_file(spill, r, g) for g in range(groups)]
    tables = []
    for path in parts:
        if path.exists():
            with pa.OSFile(str(path)) as source:
                tables.append(ipc.open_file(source).read_all())
    data = pa.concat_tables(tables)
    del tables
    for path in parts:
        path.unlink(missing_ok=True)
    order = from_numpy(_curve_order(data.column(_CURVE_COLUMN).to_numpy()))
    data = data.drop_columns([_CURVE_COLUMN])
    # column by column, each read column let go once sorted: memory holds the range and
    # one column's sorted copy, not the range twice
    schema, columns = data.schema, data.columns
    del data
    for i, column in enumerate(columns):
        columns[i] = column.take(order)
        del column
    _release_memory()
    return pa.Table.from_arrays(columns, schema=schema)


def _release_memory() -> None:
    """Hand the freed memory of the allocator behind pyarrow back to the OS (`malloc_trim`
    under the system allocator the `delta-ops` process uses): a thread's freed range would
    otherwise stay in its arena, and two threads' arenas add up."""
    pa.default_memory_pool().release_unused()


def _groups(members: list[Mapping[str, Any]], limit: int) -> Iterator[list[Mapping[str, Any]]]:
    """Consecutive files of at most `limit` bytes together (a bigger file alone)."""
    group: list[Mapping[str, Any]] = []
    size = 0
    for member in members:
        grown = size + int(member.get("size") or 0)
        if group and grown > limit:
            yield group
            group, grown = [], int(member.get("size") or 0)
        group.append(member)
        size = grown
    if group:
        yield group


def _read_columns(
    rewriter: Rewriter, member: Mapping[str, Any], physical: list[tuple[str, ...]]
) -> pa.Table:
    """Only the clustering columns' top-level columns of a file, typed as the table types them
    (a missing one null)."""
    import pyarrow.parquet as pq  # deferred, as the rewrite defers it

    storage = rewriter.storage
    schema = rewriter.output_schema()
    tops = list(dict.fromkeys(p[0] for p in physical))
    path = member["path"]
    full = storage.table_path(path)
    with reading(path):
        if int(member.get("size") or 0) <= _WHOLE_READ_BYTES:
            # a small file in one read, decoded from memory (as the rewrite reads them): a
            # Python file handle's many reads leave the process's heap grown
            parquet = pq.ParquetFile(pa.py_buffer(storage.read_many([full])[0]))
            present = [t for t in tops if t in parquet.schema_arrow.names]
            data = parquet.read(columns=present)
        else:
            with storage.open_input(full) as handle:
                parquet = pq.ParquetFile(handle)
                present = [t for t in tops if t in parquet.schema_arrow.names]
                data = parquet.read(columns=present)
    columns = []
    for top in tops:
        typ = schema.field(top).type
        if top in data.column_names:
            columns.append(data.column(top).cast(typ))
        else:
            columns.append(pa.nulls(data.num_rows, typ))
    return pa.Table.from_arrays(columns, names=tops)


def _curve_order(values: np.ndarray) -> np.ndarray:
    """The positions of rows sorted by their curve values (ties in input order)."""
    order: np.ndarray = np.argsort(values, kind="stable")
    return order


class _Sample:
    """Rows' keys at every `stride`-th position of everything added, the stride doubling
    whenever more than twice `limit` rows are kept: a sample spread over the whole input in
    memory bounded by the limit."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.stride = 1
        self.seen = 0
        self.kept: list[np.ndarray] = []
        self.count = 0

    def add(self, keys: list[np.ndarray]) -> None:
        if not keys or not len(keys[0]):
            return
        rows = np.stack(keys, axis=1)
        first = (-self.seen) % self.stride
        self.seen += len(rows)
        picked = rows[first :: self.stride]
        self.kept.append(picked)
        self.count += len(picked)
        while self.count > 2 * self.limit:
            # kept rows sit at positions 0, stride, 2 * stride, ... in order: every other
            # one is the sample of the doubled stride
            merged = np.concatenate(self.kept)[::2]
            self.kept, self.count, self.stride = [merged], len(merged), self.stride * 2

    def columns(self, width: int) -> list[np.ndarray]:
        if not self.kept:
            return [np.zeros(0, dtype=np.uint64) for _ in range(width)]
        merged = np.concatenate(self.kept)
        return [merged[:, i].copy() for i in range(width)]


def _slices(rows: int, parts: int) -> Iterator[tuple[int, int]]:
    """`parts` consecutive row ranges of about equal length (none empty unless rows is 0)."""
    parts = max(1, min(parts, rows))
    bounds = [rows * i // parts for i in range(parts + 1)]
    yield from itertools.pairwise(bounds)


# ------------------------------------------------------------------------------ descriptions
def describe_plan(plan: ClusterPlan) -> str:
    by = f"{', '.join(plan.columns)} ({plan.curve})"
    if plan.nothing_to_do:
        return f"nothing to cluster by {by}: {plan.idle_reason}"
    kept = f"; {plan.files_kept:,} clustered files left as they are" if plan.files_kept else ""
    return (
        f"would cluster {plan.files_to_rewrite:,} files ({format_bytes(sum(c.size for c in plan.cubes))})"
        f" in {len(plan.cubes):,} cubes by {by} into files near {format_bytes(plan.target_size)}"
        f"{kept}; {plan.files_before:,} live files before"
    )


def describe_result(result: ClusterResult) -> str:
    if result.version is None:
        return "nothing to cluster"
    return (
        f"clustered {result.files_removed:,} files into {result.files_added:,} by"
        f" {', '.join(result.columns)} ({result.curve}) at version {result.version}"
        f" ({format_bytes(result.bytes_removed)} -> {format_bytes(result.bytes_added)})"
    )


__all__ = [
    "DEFAULT_MIN_CUBE_SIZE",
    "ClusterPlan",
    "ClusterResult",
    "Cube",
    "Mode",
    "describe_plan",
    "describe_result",
    "execute_cluster",
    "plan_cluster",
]
