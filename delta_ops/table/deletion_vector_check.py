"""Live deletion vectors checked against their data files: a corruption alarm, never a quiet read.

A deletion vector names row indexes of one data file, which has `numRecords` rows (its stats).
A DV naming a row at or past that count deletes a row the file does not have: readers skip
such an index, so the rows the writer meant to delete come back, and engines that decoded the
DV differently disagree on the table's rows without a word. (Decoding delta-kernel-rs' inline
DV `...##093` the way Delta Spark does gave row 28168 of a 10-row file.) A DV that cannot be
loaded at all (a wrong checksum or cardinality, a missing file) is as much an alarm.

`inspect` and the `checksum` operation run this check and report what it finds as a corruption
alarm. Inline DVs are decoded from the log (no I/O); DVs in files are read, the first
`DV_FILE_LIMIT` of them, a few at a time: the rest are counted as unchecked.

    check = check_deletion_vectors(load_snapshot(path))
    check.corrupt, check.problem      # True, "1 live file's deletion vector ...: part-0.parquet: ..."
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from delta_ops.errors import InvalidDeletionVector
from delta_ops.protocol.deletion_vectors import DeletionVectorDescriptor, load_deletion_vector
from delta_ops.table.snapshot import Snapshot

DV_FILE_LIMIT = 1000  # DVs stored in files that one check reads (inline ones cost no read)
READ_THREADS = 8  # DV reads in flight: each is one ranged request


class DeletionVectorFault(StrEnum):
    """What is wrong with a live file's deletion vector."""

    PAST_END = "past_end"  # it names a row at or past the file's numRecords
    UNREADABLE = "unreadable"  # it cannot be loaded (size, checksum, cardinality, file)


@dataclass(frozen=True)
class BadDeletionVector:
    """One live file whose deletion vector is corrupt, and why."""

    path: str  # the data file, as the log names it
    fault: DeletionVectorFault
    detail: str

    def describe(self) -> str:
        return f"{self.path}: {self.detail}"


@dataclass(frozen=True)
class DeletionVectorCheck:
    """The live deletion vectors of one version against their files' row counts."""

    version: int
    checked: int  # DVs loaded and compared
    unchecked: int  # DVs past DV_FILE_LIMIT, or of files whose stats lack numRecords
    bad: tuple[BadDeletionVector, ...] = ()

    @property
    def corrupt(self) -> bool:
        return bool(self.bad)

    @property
    def problem(self) -> str:
        """What is wrong, in one line naming up to three files ("" when nothing is)."""
        if not self.bad:
            return ""
        shown = "; ".join(b.describe() for b in self.bad[:3])
        more = f"; and {len(self.bad) - 3} more" if len(self.bad) > 3 else ""
        files = "file's deletion vector is" if len(self.bad) == 1 else "files' deletion vectors are"
        return f"{len(self.bad)} live {files} corrupt: {shown}{more}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "checked": self.checked,
            "unchecked": self.unchecked,
            "bad": [{"path": b.path, "fault": b.fault.value, "detail": b.detail} for b in self.bad],
        }


def check_deletion_vectors(
    snapshot: Snapshot, *, file_limit: int = DV_FILE_LIMIT
) -> DeletionVectorCheck:
    """Load each live file's deletion vector (inline ones all, those in files up to
    `file_limit`) and compare the highest row it names with the file's `numRecords`."""
    files = snapshot.file_index
    counts = snapshot.record_counts.to_pylist() if files.num_rows else []
    dvs = files.column("deletionVector").to_pylist() if files.num_rows else []
    paths = files.column("path").to_pylist() if files.num_rows else []
    todo: list[tuple[str, DeletionVectorDescriptor | None, int, str | None]] = []
    unchecked = stored = 0
    for path, dv, count in zip(paths, dvs, counts):
        if dv is None:
            continue
        if count is None:
            unchecked += 1
            continue
        try:
            descriptor = DeletionVectorDescriptor.from_dict(
                {k: v for k, v in dv.items() if v is not None}
            )
        except InvalidDeletionVector as exc:
            todo.append((path, None, count, str(exc)))
            continue
        if descriptor.storage_type != "i":
            stored += 1
            if stored > file_limit:
                unchecked += 1
                continue
        todo.append((path, descriptor, count, None))

    def judge(
        item: tuple[str, DeletionVectorDescriptor | None, int, str | None],
    ) -> BadDeletionVector | None:
        path, descriptor, count, refused = item
        if descriptor is None:
            return BadDeletionVector(path, DeletionVectorFault.UNREADABLE, str(refused))
        try:
            rows = load_deletion_vector(descriptor, snapshot.storage.root, snapshot.storage.reader)
        except InvalidDeletionVector as exc:
            if isinstance(exc.__cause__, OSError):
                # storage failed to read it (a missing file is no OSError here): an I/O error
                # for the caller to retry, not a corrupt vector to raise an alarm about
                raise exc.__cause__ from exc
            return BadDeletionVector(path, DeletionVectorFault.UNREADABLE, str(exc))
        if rows and rows.max() >= count:
            return BadDeletionVector(
                path,
                DeletionVectorFault.PAST_END,
                f"its deletion vector names row {rows.max():,}, but the file has {count:,} rows"
                " (numRecords)",
            )
        return None

    if any(d is not None and d.storage_type != "i" for _, d, _, _ in todo):
        with ThreadPoolExecutor(READ_THREADS) as pool:
            verdicts = list(pool.map(judge, todo))
    else:
        verdicts = [judge(item) for item in todo]
    return DeletionVectorCheck(
        version=snapshot.version,
        checked=len(todo),
        unchecked=unchecked,
        bad=tuple(v for v in verdicts if v is not None),
    )


__all__ = [
    "DV_FILE_LIMIT",
    "BadDeletionVector",
    "DeletionVectorCheck",
    "DeletionVectorFault",
    "check_deletion_vectors",
]
