"""Compaction: many small files of a partition bin-packed into files near a target size
(Delta's and delta-rs's `OPTIMIZE`), the same rows in fewer files.

    snapshot = load_snapshot(path)
    plan = plan_compact(snapshot, target_size=128 * 1024**2, where=parse_where("day = '2026-11-01'", snapshot))
    result = execute_compact(plan)

Per partition, files smaller than the target are taken in path order and packed greedily into
bins of at most the target size; a bin of one file without a deletion vector is left alone
(rewriting it gains nothing). Each bin streams its files, one at a time, into one new file
(deletion vectors applied, row ids kept: see `delta_ops.ops.rewrite`), so memory holds one
small file, never a partition. One commit removes the old files and adds the new ones with
``dataChange=false``; appends that land meanwhile never conflict, while a concurrent change to a
compacted file does (re-run to compact what is left).

The `compact` operation plans what Delta Spark's OPTIMIZE would do (`plan_optimize`):
bin-packing, or with ``--zorder-by a,b`` or on a table clustered by columns (liquid
clustering) a clustering rewrite, `delta_ops.ops.cluster`; both rewrite through
`delta_ops.ops.rewrite` and commit the same way.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from delta_ops.errors import InvalidValue
from delta_ops.log.actions import from_numpy, partition_groups
from delta_ops.ops.engines import LOCAL, Engine
from delta_ops.ops.operation import (
    ENGINE_OPTION,
    EnginePlan,
    Operation,
    Option,
    OptionKind,
    Timed,
    timed,
)
from delta_ops.ops.results import fields_data
from delta_ops.ops.write_options import WRITE_OPTIONS, parquet_format
from delta_ops.protocol.features import Access
from delta_ops.protocol.partition_predicate import PartitionPredicate, parse_partition_predicate
from delta_ops.protocol.units import format_bytes
from delta_ops.table.parquet_format import DEFAULT_FORMAT, ParquetFormat
from delta_ops.table.snapshot import Snapshot

if TYPE_CHECKING:
    from delta_ops.ops import cluster

DEFAULT_TARGET_SIZE = 128 * 1024 * 1024


@dataclass(frozen=True)
class Bin:
    """Files of one partition that become one file."""

    partition_values: tuple[tuple[str, str | None], ...]
    paths: tuple[str, ...]
    size: int

    def to_dict(self) -> dict[str, Any]:
        return fields_data(self, partition_values=dict(self.partition_values))


@dataclass(frozen=True)
class CompactPlan(EnginePlan):
    """The bins to write, and what the table looks like before."""

    table: str
    version: int
    target_size: int
    where: str | None  # the partition predicate, as given
    bins: tuple[Bin, ...]
    files_before: int
    snapshot: Snapshot = field(repr=False, compare=False)
    #: the codec and row-group size of the files written
    parquet: ParquetFormat = field(default=DEFAULT_FORMAT, repr=False, compare=False)

    @property
    def nothing_to_do(self) -> bool:
        return not self.bins

    @property
    def idle_reason(self) -> str:
        """Why the plan has nothing to do (when it has nothing to do)."""
        return "no partition has small files to pack"

    @property
    def files_to_rewrite(self) -> int:
        return sum(len(b.paths) for b in self.bins)

    def to_dict(self) -> dict[str, Any]:
        return fields_data(
            self,
            files_to_rewrite=self.files_to_rewrite,
            num_bins=len(self.bins),
            engine=self.engine.name,
            parquet=self.parquet.to_dict(),
        )

    def describe(self) -> str:
        return describe_plan(self)

    def execute(self) -> CompactResult:
        return execute_compact(self)


@dataclass(frozen=True)
class CompactResult(Timed):
    """What a compaction did."""

    table: str
    version: int | None
    files_removed: int
    files_added: int
    bytes_removed: int
    bytes_added: int
    files_written: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return fields_data(self)

    def describe(self) -> str:
        return describe_result(self)


def parse_where(text: str | None, snapshot: Snapshot) -> PartitionPredicate | None:
    """`--where` as a predicate on the table's partition columns (None when not given);
    see `delta_ops.protocol.partition_predicate` for the forms."""
    if text is None or not text.strip():
        return None
    return parse_partition_predicate(
        text,
        snapshot.schema,
        snapshot.partition_columns,
        mapped=snapshot.properties.column_mapping_mode != "none",
        option="--where",
    )


def plan_compact(
    snapshot: Snapshot,
    *,
    target_size: int = DEFAULT_TARGET_SIZE,
    where: PartitionPredicate | None = None,
    engine: Engine = LOCAL,
    parquet: ParquetFormat = DEFAULT_FORMAT,
) -> CompactPlan:
    """Bin-pack each partition's small files (pure: reads only the log); `where` limits it
    to the partitions it selects; `engine` writes the bins (here, or one Spark task per
    bin) in the `parquet` format."""
    packing = _packing(snapshot, target_size, where)
    paths: list[str] = packing.paths.take(packing.order).to_pylist() if packing.bins else []
    bins = tuple(
        Bin(packing.partitions[partition], tuple(paths[start:stop]), size)
        for partition, start, stop, size in packing.bins
    )
    return CompactPlan(
        table=snapshot.storage.url,
        version=snapshot.version,
        target_size=target_size,
        where=str(where) if where is not None else None,
        bins=bins,
        files_before=snapshot.num_files,
        snapshot=snapshot,
        engine=engine,
        parquet=parquet,
    )


def files_to_compact(snapshot: Snapshot, *, target_size: int = DEFAULT_TARGET_SIZE) -> int:
    """How many files `plan_compact` would rewrite (its `files_to_rewrite`), from the
    same packing without building the bins' path lists: what `inspect` and the asset checks
    report. Raises what the plan raises (UnsupportedFeature, InvalidValue)."""
    return sum(stop - start for _, start, stop, _ in _packing(snapshot, target_size, None).bins)


@dataclass(frozen=True)
class Packing:
    """The small files' paths, `order` (their positions in bin order: by partition, then
    path) and the bins as (partition, first position, position after the last, bytes) in
    that order; `partitions` holds each partition's values, sorted by key."""

    paths: pa.Array
    order: pa.Array
    partitions: list[tuple[tuple[str, str | None], ...]]
    bins: list[tuple[int, int, int, int]]


def _packing(snapshot: Snapshot, target_size: int, where: PartitionPredicate | None) -> Packing:
    """Per partition (in the order of its values' text), the files smaller than the target in
    path order, packed greedily into bins of at most the target size; a bin of one file
    without a deletion vector is left out (rewriting it gains nothing).

    Columnar: rows are grouped by codes of their partition values and sorted by Arrow, and
    only the bins' boundaries are walked in Python (as Python lists, a 300k-file table took
    0.8 s, most of it turning every file's partition values into tuples)."""
    if target_size < 1:
        raise InvalidValue(f"--target-size {target_size}: a size such as 128MB")
    snapshot.protocol.check_allows(Access.COMPACT)
    # sizes, partitions and DVs: no stats needed to plan
    files = snapshot.file_index.select(["path", "size", "partitionValues", "deletionVector"])
    small = pc.less(pc.fill_null(files.column("size"), 0), target_size)
    if where is not None:
        small = pc.and_(small, where.mask(files))
    if not pc.all(small).as_py():
        files = files.filter(small)
    return pack(files, target_size)


def pack(files: pa.Table, target_size: int) -> Packing:
    """`_packing` of these files (`path`, `size`, `partitionValues`, `deletionVector`),
    every one of them taken as small."""
    paths = files.column("path").combine_chunks()
    if not files.num_rows:
        return Packing(paths, pa.array([], pa.int64()), [], [])
    group, group_values = partition_groups(files.column("partitionValues"))
    # the same values in another key order are one partition
    numbers: dict[tuple[tuple[str, str | None], ...], int] = {}
    partition_of_group = np.array(
        [numbers.setdefault(tuple(sorted(values)), len(numbers)) for values in group_values],
        dtype=np.int64,
    )
    partitions = sorted(numbers, key=str)
    rank = np.empty(len(partitions), dtype=np.int64)
    rank[[numbers[values] for values in partitions]] = np.arange(len(partitions))
    row_rank = rank[partition_of_group[group]]
    order = _partition_path_order(row_rank, paths, group, len(group_values) > len(partitions))
    ranks = row_rank[order]
    stops = np.append(np.flatnonzero(np.diff(ranks)) + 1, len(ranks))
    starts = np.concatenate(([0], stops[:-1]))
    sizes = pc.fill_null(files.column("size"), 0).to_numpy().astype(np.int64, copy=False)[order]
    has_dv = pc.is_valid(files.column("deletionVector")).to_numpy(zero_copy_only=False)[order]
    spans = np.array(greedy_bins(sizes, starts, stops, target_size), dtype=np.int64)
    spans = spans.reshape(-1, 3)
    first, after = spans[:, 1], spans[:, 2]
    spans = spans[(after - first > 1) | has_dv[first]]  # a lone file without a DV stays
    running = np.concatenate(([0], np.cumsum(sizes)))
    bytes_of = running[spans[:, 2]] - running[spans[:, 1]]
    bins = [
        (partition, start, stop, size)
        for (partition, start, stop), size in zip(spans.tolist(), bytes_of.tolist())
    ]
    return Packing(paths, from_numpy(order), partitions, bins)


def _partition_path_order(
    rank: np.ndarray, paths: pa.Array, group: np.ndarray, regrouped: bool
) -> np.ndarray:
    """Positions of the rows sorted by partition rank, then path. Equal paths (not in a valid
    log) keep the order a grouping row by row gave them: by `group` when a partition's values
    came in more than one key order (`regrouped`), then by the log's order."""
    if regrouped:
        table = pa.table({"rank": from_numpy(rank), "path": paths, "group": from_numpy(group)})
        keys = [("rank", "ascending"), ("path", "ascending"), ("group", "ascending")]
        ordered: np.ndarray = pc.sort_indices(table, sort_keys=keys).to_numpy()
        return ordered
    by_path: np.ndarray = pc.sort_indices(paths).to_numpy()  # stable, as is the rank's below
    return by_path[np.argsort(rank[by_path], kind="stable")]


def greedy_bins(
    sizes: np.ndarray, starts: np.ndarray, stops: np.ndarray, target_size: int
) -> list[tuple[int, int, int]]:
    """(partition, first row, row after the last) of each bin when each partition's rows
    (`starts[i]` to `stops[i]`, consecutive) are packed in order: a bin takes rows while
    their sizes add up to at most `target_size`, and always at least one.

    Each bin's end is found by a binary search of the running total (one step per bin, not
    per file), which needs sizes >= 0; a log with a negative size is packed row by row."""
    bins: list[tuple[int, int, int]] = []
    if len(sizes) and int(sizes.min()) < 0:
        size_list = sizes.tolist()
        for partition, (start, stop) in enumerate(zip(starts.tolist(), stops.tolist())):
            first, filled = start, 0
            for row in range(start, stop):
                if row > first and filled + size_list[row] > target_size:
                    bins.append((partition, first, row))
                    first, filled = row, 0
                filled += size_list[row]
            bins.append((partition, first, stop))
        return bins
    running = np.cumsum(sizes)
    # the first row past the target counted from each row (never the row itself: a row's own
    # size fits, or it is the bin's only row)
    ends = np.searchsorted(running, running - sizes + target_size, side="right")
    ends = np.maximum(ends, np.arange(1, len(sizes) + 1))
    ends = np.minimum(ends, np.repeat(stops, stops - starts)).tolist()
    for partition, (start, stop) in enumerate(zip(starts.tolist(), stops.tolist())):
        row = start
        while row < stop:
            end = ends[row]
            bins.append((partition, row, end))
            row = end
    return bins


@timed
def execute_compact(plan: CompactPlan) -> CompactResult:
    """Write each bin as one file and commit all of them as one version."""
    if plan.nothing_to_do:
        return CompactResult(plan.table, None, 0, 0, 0, 0, ())
    # start-up cost: the rewriting stack (parquet writer, transaction) is loaded by the
    # commands that write, not by every command that imports the registry or plans
    from delta_ops.ops.rewrite import (
        Rewriter,
        RewriteUnit,
        file_rows_in_order,
        rewrite_with_removes,
    )

    snapshot = plan.snapshot
    # what reading needs of each file, in bin order (a bin carries no tags over)
    rows = file_rows_in_order(snapshot, [p for b in plan.bins for p in b.paths])
    rewriter = Rewriter(snapshot, rows, Access.COMPACT, parquet=plan.parquet)
    units = []
    start = 0
    for b in plan.bins:
        members = tuple(rows[start : start + len(b.paths)])
        start += len(b.paths)
        units.append(
            RewriteUnit(members, rewriter.directory_of(members[0]), dict(b.partition_values))
        )
    written, removes = rewrite_with_removes(rewriter, units, plan.engine, "compact: rewriting")
    added_bytes = sum(int(new.add["size"]) for new in written)
    version = rewriter.commit(
        "OPTIMIZE",
        {
            "predicate": json.dumps([plan.where]) if plan.where else "[]",
            "targetSize": plan.target_size,
        },
        removes,
        [new.add for new in written],
        {
            "numRemovedFiles": len(rows),
            "numAddedFiles": len(plan.bins),
            "numRemovedBytes": sum(b.size for b in plan.bins),
            "numAddedBytes": added_bytes,
        },
    )
    return CompactResult(
        table=plan.table,
        version=version,
        files_removed=len(rows),
        files_added=len(plan.bins),
        bytes_removed=sum(b.size for b in plan.bins),
        bytes_added=added_bytes,
        files_written=tuple(new.add["path"] for new in written),
    )


@dataclass(frozen=True)
class CompactOptions:
    """The compact operation's options (see its `OPERATION`)."""

    target_size: int = DEFAULT_TARGET_SIZE
    where: str | None = None
    zorder_by: str | None = None
    full: bool = False
    min_cube_size: int | None = None
    compression: str = DEFAULT_FORMAT.codec.value
    row_group_size: int = DEFAULT_FORMAT.row_group_bytes
    engine: str = "local"


def plan_optimize(
    snapshot: Snapshot, options: CompactOptions, engine: Engine = LOCAL
) -> CompactPlan | cluster.ClusterPlan:
    """What Delta Spark's OPTIMIZE does with these options: a table clustered by columns
    (the `clustering` feature and columns in its `delta.clustering` domain) is clustered by
    them; ``zorder_by`` Z-orders the files of each partition by those columns (refused on a
    clustered table, as Delta refuses it); otherwise small files are bin-packed."""
    where = parse_where(options.where, snapshot)
    zorder_by = (options.zorder_by or "").strip()
    if not zorder_by and not snapshot.protocol.supports("clustering"):
        # no clustering columns to use (what `table_clustering_columns` says of a
        # table without the feature): bin-packing, without loading the clustering module
        if options.full:
            raise InvalidValue("--full: only with --zorder-by, or on a table clustered by columns")
        return plan_compact(snapshot, where=where, engine=engine, **_writing(options))
    # start-up cost: the clustering module (~10 ms with tempfile and the layout curves) is
    # loaded by the plans that may cluster, not by every compaction
    from delta_ops.layout.clustering import parse_column_list, table_clustering_columns
    from delta_ops.ops import cluster

    clustered = table_clustering_columns(snapshot)
    common: dict[str, Any] = {
        "where": where,
        "full": options.full,
        "engine": engine,
        **_writing(options),
    }
    min_cube_size = options.min_cube_size
    if min_cube_size is not None:
        common["min_cube_size"] = min_cube_size
    if zorder_by:
        if clustered:
            names = ", ".join(c.name for c in clustered)
            raise InvalidValue(
                f"--zorder-by: the table is clustered by {names} (liquid clustering), which"
                " compact uses: leave --zorder-by out, or change the columns with cluster-by"
            )
        columns = parse_column_list(zorder_by, snapshot, "--zorder-by")
        return cluster.plan_cluster(snapshot, columns, mode=cluster.Mode.ZORDER, **common)
    if clustered:
        return cluster.plan_cluster(snapshot, clustered, mode=cluster.Mode.CLUSTERING, **common)
    if common["full"]:
        raise InvalidValue("--full: only with --zorder-by, or on a table clustered by columns")
    return plan_compact(snapshot, where=where, engine=engine, **_writing(options))


def _writing(options: CompactOptions) -> dict[str, Any]:
    """What the options say of the files to write: their size and format."""
    return {"target_size": options.target_size, "parquet": parquet_format(options)}


def describe_plan(plan: CompactPlan) -> str:
    if plan.nothing_to_do:
        return f"nothing to compact: no partition has small files to pack (target {format_bytes(plan.target_size)})"
    return (
        f"would compact {plan.files_to_rewrite:,} small files into {len(plan.bins):,}"
        f" (target {format_bytes(plan.target_size)}); {plan.files_before:,} live files before"
    )


def describe_result(result: CompactResult) -> str:
    if result.version is None:
        return "nothing to compact"
    return (
        f"compacted {result.files_removed:,} files into {result.files_added:,} at version"
        f" {result.version} ({format_bytes(result.bytes_removed)} removed,"
        f" {format_bytes(result.bytes_added)} written)"
    )


# ------------------------------------------------------------------------------ the operation
OPERATION: Operation[
    CompactOptions, CompactPlan | cluster.ClusterPlan, CompactResult | cluster.ClusterResult
] = Operation(
    name="compact",
    needs=Access.COMPACT,
    help="bin-pack small files of each partition into files near a target size (OPTIMIZE);"
    " with --zorder-by, or on a clustered table, cluster the rows (OPTIMIZE ZORDER BY, liquid)",
    options=(
        Option("target_size", OptionKind.SIZE, "size of the files to write", "128MB"),
        Option(
            "where",
            OptionKind.TEXT,
            "only partitions this predicate on partition columns selects, e.g. "
            "\"day >= '2026-11-01'\" or day=2026-11-01,region=eu",
        ),
        Option(
            "zorder_by",
            OptionKind.TEXT,
            "Z-order the rows of each partition by these data columns (OPTIMIZE ZORDER BY);"
            " a clustered table is clustered by its own columns without it",
            example="e.g. a,b",
        ),
        Option(
            "full",
            OptionKind.FLAG,
            "cluster every file again, clustered or not (OPTIMIZE FULL)",
            False,
        ),
        Option(
            "min_cube_size",
            OptionKind.SIZE,
            "clustering: a cube of files clustered together this big takes no new rows",
            "100GB",
        ),
        *WRITE_OPTIONS,
        ENGINE_OPTION,
    ),
    options_type=CompactOptions,
    plan_with=plan_optimize,
    # a bin-packing or a clustering: each plan executes and describes itself
    execute_with=lambda plan, progress: plan.execute(),
    describe_plan=lambda plan: plan.describe(),
    describe_result=lambda result: result.describe(),
    touched=lambda result: (
        result.files_removed + result.files_added,
        result.bytes_removed + result.bytes_added,
    ),
)


__all__ = [
    "OPERATION",
    "Bin",
    "CompactPlan",
    "CompactResult",
    "describe_plan",
    "describe_result",
    "execute_compact",
    "files_to_compact",
    "parse_where",
    "plan_compact",
    "plan_optimize",
]
