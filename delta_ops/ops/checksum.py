"""CHECKSUM: write a version's checksum (`N.crc`) when it has none; check the one it has.

Every commit delta-ops makes is followed by its checksum (`delta_ops.table.checksum`), but a
version committed by an engine that writes none (delta-rs), a crash between a commit and its
checksum, or a store that refused the write leave versions without one. `checksum` computes
the latest version's (or `--version N`'s) from the replayed state and writes it, put-if-absent:
a checksum is never overwritten (protocol, "Version Checksum File": writers MUST NOT).

A version that has a checksum is checked instead, field by field, against the replay (the
protocol's "State Validation"), on the fields it has: an older writer's checksum (Delta Spark's
and Databricks' first, with the counts but no metadata or protocol) is checked on its counts,
and what it lacks is reported as absent, as Delta Spark checks it. One that disagrees, or does
not parse, is a corruption alarm: the log or the checksum was changed after the commit. The dry
run reports it; a run fails on it (`delta_ops.errors.CorruptChecksum`, naming every
field that disagrees) and leaves the file for whoever investigates; once the cause is known,
deleting it and running `checksum` again writes a correct one. So is a live deletion vector
that names a row past its file's `numRecords`, or cannot be loaded (`delta_ops.table.deletion_vector_check`): the run fails
on it and writes no checksum of that state.

    plan = plan_checksum(load_snapshot(path))   # reads and computes, writes nothing
    plan.status, plan.mismatches                # missing / agrees / disagrees / unreadable
    result = execute_checksum(plan)             # writes N.crc, or raises CorruptChecksum

A crash before the write leaves the table as it was; after it, the checksum is whole (a temp
file linked into place, or one conditional PUT), and a re-run finds it and checks it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from delta_ops.errors import CorruptLog
from delta_ops.ops.operation import Operation, Timed, timed
from delta_ops.ops.results import fields_data
from delta_ops.protocol.features import Access
from delta_ops.protocol.units import format_bytes
from delta_ops.table.checksum import (
    ChecksumCheck,
    ChecksumStatus,
    VersionChecksum,
    check_checksum,
    checksum_of_snapshot,
    write_checksum,
)
from delta_ops.table.deletion_vector_check import DeletionVectorCheck, check_deletion_vectors
from delta_ops.table.snapshot import Snapshot


@dataclass(frozen=True)
class ChecksumPlan:
    """A version's checksum: whether it has one and how that compares with the replay, and the
    one computed from the replay (written when it has none)."""

    table: str
    version: int
    check: ChecksumCheck
    #: the live deletion vectors against their files' row counts (a bad one: corruption)
    deletion_vectors: DeletionVectorCheck
    computed: VersionChecksum = field(repr=False, compare=False)
    snapshot: Snapshot = field(repr=False, compare=False)

    @property
    def status(self) -> ChecksumStatus:
        return self.check.status

    @property
    def mismatches(self) -> tuple[str, ...]:
        return self.check.mismatches

    @property
    def nothing_to_do(self) -> bool:
        """A checksum is there (one that disagrees is reported, never overwritten), or the
        state is corrupt (reported, never written down)."""
        return self.check.status is not ChecksumStatus.MISSING or self.deletion_vectors.corrupt

    @property
    def idle_reason(self) -> str:
        name = self.check.file_name
        reasons = []
        if self.check.status is ChecksumStatus.AGREES:
            reasons.append(
                f"version {self.version} has its checksum ({name}), and it agrees with the log"
                + (
                    f" ({self.check.absent_note}: an older writer's checksum, checked on the fields"
                    " it has)"
                    if self.check.absent
                    else ""
                )
            )
        elif self.check.corrupt:
            reasons.append(
                f"version {self.version} has a checksum ({name}) that {self.check.problem}"
            )
        if self.deletion_vectors.corrupt:
            reasons.append(
                f"version {self.version}: {self.deletion_vectors.problem} (a corruption alarm)"
            )
        return "; ".join(reasons)

    def to_dict(self) -> dict[str, Any]:
        computed = self.computed
        return fields_data(
            self,
            file=self.check.file_name,
            status=self.check.status.value,
            mismatches=list(self.check.mismatches),
            deletion_vectors=self.deletion_vectors.to_dict(),
            num_files=computed.num_files,
            table_size_bytes=computed.table_size_bytes,
            num_deletion_vectors=computed.num_deletion_vectors,
            num_deleted_records=computed.num_deleted_records,
            lists_files=computed.all_files is not None,
        )


@dataclass(frozen=True)
class ChecksumResult(Timed):
    table: str
    version: int
    file: str
    status: ChecksumStatus  # as found: missing (then written, unless a writer came first) ...
    absent: tuple[str, ...]  # required fields the checksum found lacks (an older writer's)
    written: bool
    size_in_bytes: int  # of the checksum written (0 when none was)
    num_files: int
    table_size_bytes: int

    def to_dict(self) -> dict[str, Any]:
        return fields_data(self)


def plan_checksum(snapshot: Snapshot) -> ChecksumPlan:
    """Check the snapshot's version's checksum against the replay and compute the one the
    replay gives (reads only: the checksum, the version's commitInfo, and the stats of a
    small table's files)."""
    snapshot.protocol.check_allows(Access.CHECKPOINT)  # a state delta-ops can describe
    return ChecksumPlan(
        table=snapshot.storage.url,
        version=snapshot.version,
        check=check_checksum(snapshot),
        deletion_vectors=check_deletion_vectors(snapshot),
        computed=checksum_of_snapshot(snapshot),
        snapshot=snapshot,
    )


@timed
def execute_checksum(plan: ChecksumPlan) -> ChecksumResult:
    """Write the checksum when the version has none; raise CorruptChecksum (a CorruptLog)
    when the one it has disagrees with the log or does not parse, or CorruptLog when a live
    deletion vector is corrupt."""
    if plan.deletion_vectors.corrupt:
        raise CorruptLog(
            f"version {plan.version}",
            f"{plan.deletion_vectors.problem} (a corruption alarm: readers disagree on which rows"
            " such a file holds; no checksum is written of this state)",
        )
    if plan.check.corrupt:
        raise plan.check.alarm()
    written = False
    size = 0
    if plan.check.status is ChecksumStatus.MISSING:
        written = write_checksum(plan.snapshot.storage, plan.computed)
        size = len(plan.computed.to_json()) if written else 0
    return ChecksumResult(
        table=plan.table,
        version=plan.version,
        file=plan.check.file_name,
        status=plan.check.status,
        absent=plan.check.absent,
        written=written,
        size_in_bytes=size,
        num_files=plan.computed.num_files,
        table_size_bytes=plan.computed.table_size_bytes,
    )


# ------------------------------------------------------------------------------ the operation
def describe_plan(plan: ChecksumPlan) -> str:
    if plan.nothing_to_do:
        return plan.idle_reason
    computed = plan.computed
    return (
        f"would write {plan.check.file_name} for version {plan.version}: {computed.num_files:,}"
        f" live files ({format_bytes(computed.table_size_bytes)})"
        + (
            f", {computed.num_deletion_vectors:,} deletion vectors"
            f" ({computed.num_deleted_records:,} rows deleted)"
            if computed.num_deletion_vectors is not None
            else ""
        )
        + (", the files listed" if computed.all_files is not None else "")
    )


def describe_result(result: ChecksumResult) -> str:
    if result.written:
        return (
            f"wrote {result.file} for version {result.version}: {result.num_files:,} live files"
            f" ({format_bytes(result.table_size_bytes)})"
        )
    if result.status is ChecksumStatus.MISSING:
        return f"{result.file} was written by another writer meanwhile; it is left as it is"
    lacks = f" (it lacks {' and '.join(result.absent)})" if result.absent else ""
    return (
        f"version {result.version} has its checksum ({result.file}), and it agrees with the"
        f" log{lacks}"
    )


@dataclass(frozen=True)
class ChecksumOptions:
    """The checksum operation has no options."""


OPERATION: Operation[ChecksumOptions, ChecksumPlan, ChecksumResult] = Operation(
    name="checksum",
    needs=Access.CHECKPOINT,
    help="write a version's checksum (N.crc) when it has none; check the one it has against"
    " the log",
    options=(),
    options_type=ChecksumOptions,
    plan_with=lambda snapshot, options, engine: plan_checksum(snapshot),
    execute_with=lambda plan, progress: execute_checksum(plan),
    describe_plan=describe_plan,
    describe_result=describe_result,
    touched=lambda result: (int(result.written), result.size_in_bytes),
    at_version=True,
)

__all__ = [
    "OPERATION",
    "ChecksumPlan",
    "ChecksumResult",
    "execute_checksum",
    "plan_checksum",
]
