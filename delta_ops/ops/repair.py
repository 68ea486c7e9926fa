"""REPAIR (FSCK): remove from the table the live files that storage no longer has.

A data file deleted by hand, lost in a copy or removed by a tool that ignores the log makes
every reader of the table fail. `repair` finds the live files whose data file, or whose
deletion-vector file, is gone, and removes them from the table in one commit
(``dataChange=true``: their rows leave the table; a file whose deletion vector is gone is
removed whole, because reading it without the vector would bring its deleted rows back).

    plan = plan_repair(load_snapshot(path))
    for f in plan.missing: print(f.path, f.what, f.records, f.size)   # a dry run
    result = execute_repair(plan)

Safety:

* A wrong path, a missing credential or a store that lists nothing makes every file look
  missing. The plan refuses (`delta_ops.errors.NeedsForce`) when more than
  ``max_missing_ratio`` of the live files are missing (default 10%); ``force`` overrides it.
* Finding what is missing lists the table once (through the engine), as vacuum does; files
  outside the table root, absolute deletion vectors and, on a local disk, files the listing did
  not find (it never follows a symlink; a file read through one is there) are checked one by
  one.
* Execute checks the missing files again and removes only those still missing (a file restored
  from a backup meanwhile stays). The commit reads the removed files, so a concurrent commit that
  changed one of them is a conflict and nothing is written; a crash before the commit changes
  nothing, and running again finishes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from delta_ops import clock
from delta_ops.errors import InvalidValue, NeedsForce
from delta_ops.ops.engines import LOCAL, Engine, Spread
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
from delta_ops.protocol.deletion_vectors import DeletionVectorDescriptor, dv_relative_paths
from delta_ops.protocol.features import Access
from delta_ops.protocol.properties import uniform_iceberg_note
from delta_ops.protocol.units import format_bytes
from delta_ops.storage import Storage
from delta_ops.table.file_paths import relative_paths
from delta_ops.table.remove_lines import encode_removes
from delta_ops.table.snapshot import Snapshot, file_num_records
from delta_ops.table.transaction import Transaction

DEFAULT_MAX_MISSING_RATIO = 0.1


class Missing(StrEnum):
    """What of a live file storage does not have."""

    DATA_FILE = "data file"
    DELETION_VECTOR = "deletion vector"


@dataclass(frozen=True)
class MissingFile:
    """A live file the repair removes, and what the table loses with it."""

    path: str  # as the log writes it
    what: Missing
    records: int | None  # rows the file held (None: its stats do not say)
    size: int


@dataclass(frozen=True)
class RepairPlan(EnginePlan):
    table: str
    version: int
    num_files: int  # live files checked
    missing: tuple[MissingFile, ...]
    max_missing_ratio: float
    forced: bool
    snapshot: Snapshot = field(repr=False, compare=False)

    @property
    def nothing_to_do(self) -> bool:
        return not self.missing

    @property
    def idle_reason(self) -> str:
        """Why the plan has nothing to do (when it has nothing to do)."""
        return f"all {self.num_files:,} live files and their deletion vectors are on storage"

    @property
    def missing_records(self) -> int:
        return sum(f.records or 0 for f in self.missing)

    @property
    def missing_bytes(self) -> int:
        return sum(f.size for f in self.missing)

    def to_dict(self) -> dict[str, Any]:
        return fields_data(
            self,
            num_missing=len(self.missing),
            missing_records=self.missing_records,
            missing_bytes=self.missing_bytes,
            engine=self.engine.name,
        )


@dataclass(frozen=True)
class RepairResult(Timed):
    table: str
    version: int | None  # the repair's commit (None: nothing was missing any more)
    removed: tuple[str, ...]
    num_removed: int
    records_removed: int
    bytes_removed: int
    found_again: tuple[str, ...]  # missing when planned, present when executed: kept

    def to_dict(self) -> dict[str, Any]:
        return fields_data(self)


def plan_repair(
    snapshot: Snapshot,
    *,
    max_missing_ratio: float = DEFAULT_MAX_MISSING_RATIO,
    force: bool = False,
    engine: Engine = LOCAL,
) -> RepairPlan:
    """The live files of `snapshot` whose data file or deletion-vector file storage lacks.

    Raises NeedsForce when more than `max_missing_ratio` of the live files are missing and
    `force` is not set: such a repair more likely points at a wrong location than at lost
    files."""
    if not 0.0 <= max_missing_ratio <= 1.0:
        raise InvalidValue(
            f"--max-missing-ratio {max_missing_ratio}: a share of the files, from 0 to 1"
        )
    snapshot.protocol.check_allows(Access.RECOMMIT)
    storage = snapshot.storage
    files = snapshot.file_index
    missing_data, missing_dv = _missing(storage, files, engine)
    lost = pc.or_(missing_data, missing_dv)
    chosen = files.filter(lost)
    total = files.num_rows
    if chosen.num_rows and not force and chosen.num_rows > max_missing_ratio * total:
        raise NeedsForce(
            f"{storage.url}: {chosen.num_rows:,} of {total:,} live files"
            f" ({chosen.num_rows / total:.0%}) are missing from storage, more than"
            f" --max-missing-ratio {max_missing_ratio:.0%}: check the location and its"
            " credentials; --force removes them from the table anyway"
        )
    return RepairPlan(
        table=storage.url,
        version=snapshot.version,
        num_files=total,
        missing=_described(snapshot, chosen, missing_data.filter(lost)),
        max_missing_ratio=max_missing_ratio,
        forced=force,
        snapshot=snapshot,
        engine=engine,
    )


def missing_live_files(snapshot: Snapshot, engine: Engine = LOCAL) -> list[str]:
    """The live files (as the log writes their paths) whose data file or deletion-vector file
    storage does not have, found by one listing of the table (what `inspect --files` shows)."""
    files = snapshot.file_index
    data, dv = _missing(snapshot.storage, files, engine)
    return sorted(files.filter(pc.or_(data, dv)).column("path").to_pylist())


def _missing(storage: Storage, files: pa.Table, engine: Engine) -> tuple[pa.Array, pa.Array]:
    """Per live file: is its data file missing, is its deletion-vector file missing."""
    if files.num_rows == 0:
        empty = pa.array([], pa.bool_())
        return empty, empty
    listing = engine.list_unprotected(storage, lambda name: name == "_delta_log", set())
    present = pa.array(listing.paths, pa.string())
    relative = relative_paths(storage, files.column("path"))
    data_missing = pc.invert(pc.is_in(relative, value_set=present))
    dv = files.column("deletionVector")
    dv_relative = dv_relative_paths(dv)
    dv_missing = pc.and_(
        pc.is_valid(dv_relative), pc.invert(pc.is_in(dv_relative, value_set=present))
    )
    # outside the root, or an absolute DV: not in the listing; asked for one by one, as are,
    # on a local disk, files the listing left out (it never follows a symlink: a file read
    # through one is there)
    outside = pc.is_null(relative).to_pylist()
    if storage.is_local:
        outside = [o or bool(m) for o, m in zip(outside, data_missing.to_pylist(), strict=True)]
    absolute = pc.equal(pc.struct_field(dv, "storageType"), "p").to_pylist() if len(dv) else []
    checks = [
        (i, storage.table_path(path))
        for i, path in enumerate(files.column("path").to_pylist())
        if outside[i]
    ]
    dv_checks = [
        (i, _absolute_dv_path(storage, dv[i].as_py())) for i, flag in enumerate(absolute) if flag
    ]
    exists = engine.map_ordered(
        storage.exists,
        [path for _, path in checks + dv_checks],
        spread=Spread.THREADS,
        batch=200,
    )
    data_flags = data_missing.to_pylist()
    dv_flags = pc.fill_null(dv_missing, False).to_pylist()
    for (i, _), found in zip(checks, exists[: len(checks)], strict=True):
        data_flags[i] = not found
    for (i, _), found in zip(dv_checks, exists[len(checks) :], strict=True):
        dv_flags[i] = not found
    return pa.array(data_flags, pa.bool_()), pa.array(dv_flags, pa.bool_())


def _absolute_dv_path(storage: Storage, dv: Mapping[str, Any]) -> str:
    descriptor = DeletionVectorDescriptor.from_dict({k: v for k, v in dv.items() if v is not None})
    path = descriptor.absolute_path(storage.root)
    assert path is not None  # a 'p' descriptor names its file
    return storage.table_path(path)


def _described(
    snapshot: Snapshot, chosen: pa.Table, data_missing: pa.Array
) -> tuple[MissingFile, ...]:
    if chosen.num_rows == 0:
        return ()
    paths = chosen.column("path")
    with_stats = snapshot.files.filter(pc.is_in(snapshot.files.column("path"), value_set=paths))
    records = dict(
        zip(with_stats.column("path").to_pylist(), file_num_records(with_stats).to_pylist())
    )
    return tuple(
        MissingFile(
            path,
            Missing.DATA_FILE if data else Missing.DELETION_VECTOR,
            records.get(path),
            int(size or 0),
        )
        for path, size, data in zip(
            paths.to_pylist(), chosen.column("size").to_pylist(), data_missing.to_pylist()
        )
    )


@timed
def execute_repair(plan: RepairPlan) -> RepairResult:
    """Remove the files still missing in one commit."""
    snapshot = plan.snapshot
    storage = snapshot.storage
    if plan.nothing_to_do:
        return RepairResult(plan.table, None, (), 0, 0, 0, ())
    # a file restored meanwhile (from a backup) stays in the table
    planned = {f.path: f for f in plan.missing}
    rows = snapshot.file_index.filter(
        pc.is_in(snapshot.file_index.column("path"), value_set=pa.array(sorted(planned)))
    )
    still_data, still_dv = _missing(storage, rows, LOCAL)
    still = rows.filter(pc.or_(still_data, still_dv)).column("path").to_pylist()
    found_again = tuple(sorted(set(planned) - set(still)))
    if not still:
        return RepairResult(plan.table, None, (), 0, 0, 0, found_again)
    removed = snapshot.files.filter(
        pc.is_in(snapshot.files.column("path"), value_set=pa.array(sorted(still)))
    )
    removes = encode_removes(removed, deletion_timestamp=clock.now_ms(), data_change=True)
    gone = [planned[p] for p in still]
    txn = Transaction(
        snapshot,
        operation="FSCK",
        parameters={"missingFiles": len(gone), "forced": plan.forced},
        purpose=Access.RECOMMIT,
    )
    txn.read_files(removes.paths)
    txn.add_encoded_removes(removes)
    txn.metrics = {
        "numFilesRemoved": len(gone),
        "numMissingDataFiles": sum(f.what is Missing.DATA_FILE for f in gone),
        "numMissingDeletionVectors": sum(f.what is Missing.DELETION_VECTOR for f in gone),
    }
    version = txn.commit().version
    return RepairResult(
        table=plan.table,
        version=version,
        removed=tuple(sorted(still)),
        num_removed=len(gone),
        records_removed=sum(f.records or 0 for f in gone),
        bytes_removed=sum(f.size for f in gone),
        found_again=found_again,
    )


# ------------------------------------------------------------------------------ the operation
def describe_plan(plan: RepairPlan) -> str:
    head = (
        f"would remove {len(plan.missing):,} of {plan.num_files:,} live files from the table"
        f" ({plan.missing_records:,} rows, {format_bytes(plan.missing_bytes)})"
    )
    lines = [head]
    lines += [
        f"{f.path}\t{f.what} missing\t{f.records if f.records is not None else '?'} rows"
        f"\t{format_bytes(f.size)}"
        for f in plan.missing
    ]
    note = uniform_iceberg_note(plan.snapshot.metadata.configuration)
    lines += [f"note: {note}"] if note and plan.missing else []
    return "\n".join(lines)


def describe_result(result: RepairResult) -> str:
    if result.version is None:
        again = ": every planned file is on storage again" if result.found_again else ""
        return f"nothing removed{again}"
    kept = f"; {len(result.found_again)} found again and kept" if result.found_again else ""
    return (
        f"removed {result.num_removed:,} missing files ({result.records_removed:,} rows,"
        f" {format_bytes(result.bytes_removed)}) in version {result.version}{kept}"
    )


@dataclass(frozen=True)
class RepairOptions:
    """The repair operation's options (see its `OPERATION`)."""

    max_missing_ratio: float = DEFAULT_MAX_MISSING_RATIO
    force: bool = False
    engine: str = "local"


OPERATION: Operation[RepairOptions, RepairPlan, RepairResult] = Operation(
    name="repair",
    needs=Access.RECOMMIT,
    help="remove live files that storage no longer has from the table (FSCK REPAIR TABLE)",
    options=(
        Option(
            "max_missing_ratio",
            OptionKind.RATIO,
            "refuse when more than this share of the live files is missing (a wrong path?)",
            DEFAULT_MAX_MISSING_RATIO,
        ),
        Option("force", OptionKind.FLAG, "remove them even past --max-missing-ratio", False),
        ENGINE_OPTION,
    ),
    options_type=RepairOptions,
    plan_with=lambda snapshot, options, engine: plan_repair(
        snapshot,
        max_missing_ratio=options.max_missing_ratio,
        force=options.force,
        engine=engine,
    ),
    execute_with=lambda plan, progress: execute_repair(plan),
    describe_plan=describe_plan,
    describe_result=describe_result,
    touched=lambda result: (result.num_removed, result.bytes_removed),
)

__all__ = [
    "OPERATION",
    "Missing",
    "MissingFile",
    "RepairPlan",
    "RepairResult",
    "execute_repair",
    "missing_live_files",
    "plan_repair",
]
