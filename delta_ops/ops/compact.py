"""Compaction: many small files of a partition bin-packed into files near a target size
(Delta's and delta-rs's `OPTIMIZE`), the same rows in fewer files.

    snapshot = load_snapshot(path)
    plan = plan_compact(snapshot, target_size=128 * 1024**2, where=parse_where("day = '2026-11-01'", snapshot))
    result = execute_compact(plan)

Per partition, files smaller than the target are taken in path order and packed greedily into
bins of at most the target size; a bin of one file without a deletion vector is left alone
(rewriting it gains nothing). Each bin streams its files, one at a time, into one new file
(deletion vectors applied, row ids kept: see :mod:`delta_ops.ops.rewrite`), so memory holds one
small file, never a partition. One commit removes the old files and adds the new ones with
``dataChange=false``; appends that land meanwhile never conflict, while a concurrent change to a
compacted file does (re-run to compact what is left).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

import pyarrow.compute as pc

from delta_ops.errors import InvalidValue
from delta_ops.ops.engines import LOCAL, Engine
from delta_ops.ops.operation import ENGINE_OPTION, Operation, Option, OptionKind
from delta_ops.ops.results import fields_data
from delta_ops.ops.rewrite import Rewriter, RewriteUnit, live_file_rows, rewrite_with_removes
from delta_ops.protocol.features import Access
from delta_ops.protocol.partition_predicate import PartitionPredicate, parse_partition_predicate
from delta_ops.protocol.units import format_bytes
from delta_ops.table.snapshot import Snapshot

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
class CompactPlan:
    """The bins to write, and what the table looks like before."""

    table: str
    version: int
    target_size: int
    where: str | None  # the partition predicate, as given
    bins: tuple[Bin, ...]
    files_before: int
    snapshot: Snapshot = field(repr=False, compare=False)
    #: where the bins are rewritten (`delta_ops.ops.engines`)
    engine: Engine = field(default=LOCAL, repr=False, compare=False)

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
        )


@dataclass(frozen=True)
class CompactResult:
    """What a compaction did."""

    table: str
    version: int | None
    files_removed: int
    files_added: int
    bytes_removed: int
    bytes_added: int
    files_written: tuple[str, ...]
    duration_ms: int

    def to_dict(self) -> dict[str, Any]:
        return fields_data(self)


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
) -> CompactPlan:
    """Bin-pack each partition's small files (pure: reads only the log); `where` limits it
    to the partitions it selects; `engine` writes the bins (here, or one Spark task per
    bin)."""
    if target_size < 1:
        raise InvalidValue(f"--target-size {target_size}: a size such as 128MB")
    snapshot.protocol.check_allows(Access.COMPACT)
    files = snapshot.file_index  # sizes, partitions and DVs: no stats needed to plan
    small = files.filter(pc.less(pc.fill_null(files.column("size"), 0), target_size))
    if where is not None:
        small = small.filter(where.mask(small))
    paths: list[str] = small.column("path").to_pylist()
    sizes = [int(s or 0) for s in small.column("size").to_pylist()]
    has_dv: list[bool] = pc.is_valid(small.column("deletionVector")).to_pylist()
    rows_of: dict[tuple[tuple[str, str | None], ...], list[int]] = {}
    for i, entries in enumerate(small.column("partitionValues").to_pylist()):
        rows_of.setdefault(tuple(entries) if entries else (), []).append(i)
    by_partition: dict[tuple[tuple[str, str | None], ...], list[int]] = {}
    for entries, rows in rows_of.items():  # the same values in another key order: one partition
        by_partition.setdefault(tuple(sorted(entries)), []).extend(rows)
    bins: list[Bin] = []
    for values, rows in sorted(by_partition.items(), key=lambda item: str(item[0])):
        rows.sort(key=paths.__getitem__)
        start, filled = 0, 0
        for position, row in enumerate(rows):
            if position > start and filled + sizes[row] > target_size:
                bins.extend(_worth_it(values, rows[start:position], paths, sizes, has_dv))
                start, filled = position, 0
            filled += sizes[row]
        bins.extend(_worth_it(values, rows[start:], paths, sizes, has_dv))
    return CompactPlan(
        table=snapshot.storage.url,
        version=snapshot.version,
        target_size=target_size,
        where=str(where) if where is not None else None,
        bins=tuple(bins),
        files_before=snapshot.num_files,
        snapshot=snapshot,
        engine=engine,
    )


def _worth_it(
    values: tuple[tuple[str, str | None], ...],
    rows: list[int],
    paths: list[str],
    sizes: list[int],
    has_dv: list[bool],
) -> list[Bin]:
    """The bin of these rows' files, unless it is one file without a deletion vector (nothing
    to gain)."""
    if not rows or (len(rows) == 1 and not has_dv[rows[0]]):
        return []
    return [Bin(values, tuple(paths[r] for r in rows), sum(sizes[r] for r in rows))]


def execute_compact(plan: CompactPlan) -> CompactResult:
    """Write each bin as one file and commit all of them as one version."""
    started = time.monotonic()
    if plan.nothing_to_do:
        return CompactResult(plan.table, None, 0, 0, 0, 0, (), 0)
    snapshot = plan.snapshot
    rows = {r["path"]: r for r in live_file_rows(snapshot, {p for b in plan.bins for p in b.paths})}
    rewriter = Rewriter(snapshot, list(rows.values()), Access.COMPACT)
    units = [
        RewriteUnit(
            tuple(rows[p] for p in b.paths),
            rewriter.directory_of(rows[b.paths[0]]),
            dict(b.partition_values),
        )
        for b in plan.bins
    ]
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
        duration_ms=int((time.monotonic() - started) * 1000),
    )


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
        f" {result.version} ({format_bytes(result.bytes_removed)} -> {format_bytes(result.bytes_added)})"
    )


# ------------------------------------------------------------------------------ the operation
OPERATION = Operation(
    name="compact",
    needs=Access.COMPACT,
    action="compact",
    help="bin-pack small files of each partition into files near a target size (OPTIMIZE)",
    options=(
        Option("target_size", OptionKind.SIZE, "size of the files to write", "128MB"),
        Option(
            "where",
            OptionKind.TEXT,
            "only partitions this predicate on partition columns selects, e.g. "
            "\"day >= '2026-11-01'\" or day=2026-11-01,region=eu",
        ),
        ENGINE_OPTION,
    ),
    plan_with=lambda snapshot, values, engine: plan_compact(
        snapshot,
        target_size=values["target_size"],
        where=parse_where(values["where"], snapshot),
        engine=engine,
    ),
    execute_with=lambda plan, progress: execute_compact(plan),
    describe_plan=describe_plan,
    describe_result=describe_result,
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
    "parse_where",
    "plan_compact",
]
