"""A compact, JSON-ready description of a snapshot: what `delta-ops inspect` prints.

For example:

    summary = summarize(load_snapshot(path), include_files=True)
    print(json.dumps(summary.to_dict()))
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from typing import Any

from delta_ops import clock
from delta_ops.log.file_names import SIDECARS_DIR
from delta_ops.ops.leftovers import find_leftovers
from delta_ops.ops.repair import missing_live_files
from delta_ops.ops.results import fields_data
from delta_ops.protocol.features import Protocol
from delta_ops.protocol.units import format_bytes
from delta_ops.service.health import RowTracking, health, row_tracking_state
from delta_ops.storage import LOG_DIR, FileEntry
from delta_ops.table.snapshot import Snapshot


@dataclass(frozen=True)
class TableSummary:
    """The facts `inspect` reports, as plain data."""

    table: str
    version: int
    protocol: dict[str, Any]
    metadata: dict[str, Any]
    num_files: int
    size_bytes: int
    num_records: int | None
    num_deleted_records: int
    num_tombstones: int
    last_checkpoint_version: int | None
    commits_since_checkpoint: int
    row_tracking: RowTracking
    row_id_high_water_mark: int | None
    num_txns: int
    domains: list[str]
    # files of writes in progress or crashed ones (`delta_ops.ops.leftovers`); vacuum removes
    # them once they are old
    num_leftovers: int = 0
    leftover_bytes: int = 0
    log_files: int = 0
    log_bytes: int = 0
    expired_log_files: int = 0
    reclaimable_files: int = 0
    reclaimable_bytes: int = 0
    # the version's checksum (`N.crc`) against the replay: status (missing, agrees, disagrees,
    # unreadable) and what disagrees; one that disagrees is a corruption alarm (in `advice`)
    checksum: dict[str, Any] | None = None
    # the live deletion vectors against their files' numRecords: checked, unchecked (past the
    # limit of DV files read), and the bad ones (a corruption alarm, in `advice`)
    deletion_vectors: dict[str, Any] | None = None
    # what needs doing and the command that does it: [{"problem": ..., "command": ...}]
    advice: list[dict[str, str]] = field(default_factory=list)
    # each operation: "allowed", or the features refusing it ("refused: f1, f2")
    operations: dict[str, str] = field(default_factory=dict)
    # why `_last_checkpoint` cannot be used ("missing", or what is wrong with it), when a
    # checkpoint stands: log cleanup deletes nothing without it (None: it can be used)
    last_checkpoint_hint_problem: str | None = None
    files: list[str] | None = None
    # live files storage lacks (looked for only with `include_files`: one listing)
    missing_files: list[str] | None = None

    def to_dict(self) -> dict[str, Any]:
        out = fields_data(self)
        if self.files is None:
            out.pop("files")
            out.pop("missing_files")
        return out


def summarize(
    snapshot: Snapshot, *, include_files: bool = False, now_ms: int | None = None
) -> TableSummary:
    """Describe a snapshot; `include_files` adds the live file paths as written in the log.
    Its health (what needs doing, as of `now_ms`, default now) comes with it."""
    protocol = snapshot.protocol
    checkpoint_version = snapshot.segment.checkpoint_version
    # one walk of `_delta_log` gives the leftovers (hidden names, also under `_sidecars/`) and
    # the log's own files, which the load's listing (recognised names only) does not hold
    log_tree = snapshot.storage.list_tree(LOG_DIR)
    leftovers = find_leftovers(snapshot.storage, log_tree)
    commits_since = (
        snapshot.version - checkpoint_version
        if checkpoint_version is not None
        else snapshot.version + 1
    )
    # the live files storage lacks: looked for only when the files are listed (one listing)
    missing = missing_live_files(snapshot) if include_files else None
    needs = health(
        snapshot,
        now_ms if now_ms is not None else clock.now_ms(),
        len(leftovers),
        log=_log_files(log_tree),
        missing_files=missing or (),
    )
    return TableSummary(
        table=snapshot.storage.url,
        version=snapshot.version,
        protocol={
            "minReaderVersion": protocol.min_reader_version,
            "minWriterVersion": protocol.min_writer_version,
            "readerFeatures": sorted(protocol.reader_features)
            if protocol.reader_features is not None
            else None,
            "writerFeatures": sorted(protocol.writer_features)
            if protocol.writer_features is not None
            else None,
        },
        metadata={
            "id": snapshot.metadata.id,
            "name": snapshot.metadata.name,
            "partitionColumns": list(snapshot.metadata.partition_columns),
            "configuration": dict(snapshot.metadata.configuration),
        },
        num_files=snapshot.num_files,
        size_bytes=snapshot.size_bytes,
        num_records=snapshot.num_records,
        num_deleted_records=snapshot.num_deleted_records,
        num_tombstones=snapshot.tombstones.num_rows,
        last_checkpoint_version=checkpoint_version,
        commits_since_checkpoint=commits_since,
        row_tracking=row_tracking_state(snapshot),
        row_id_high_water_mark=snapshot.row_id_high_water_mark,
        num_txns=len(snapshot.txns),
        domains=sorted(snapshot.domains),
        num_leftovers=len(leftovers),
        leftover_bytes=sum(item.size for item in leftovers),
        log_files=needs.log_files,
        log_bytes=needs.log_bytes,
        expired_log_files=needs.expired_log_files,
        reclaimable_files=needs.reclaimable_files,
        reclaimable_bytes=needs.reclaimable_bytes,
        checksum=needs.checksum.to_dict() if needs.checksum is not None else None,
        deletion_vectors=(
            needs.deletion_vectors.to_dict() if needs.deletion_vectors is not None else None
        ),
        advice=needs.advice,
        operations={
            op.name.lower(): "allowed"
            if not refusing
            else "refused: " + ", ".join(sorted(refusing))
            for op, refusing in protocol.allowed_operations().items()
        },
        last_checkpoint_hint_problem=(
            snapshot.segment.last_checkpoint.problem if checkpoint_version is not None else None
        ),
        files=sorted(snapshot.file_index.column("path").to_pylist()) if include_files else None,
        missing_files=missing,
    )


def _log_files(log_tree: list[FileEntry]) -> list[FileEntry]:
    """The log's files as log cleanup sees them (`delta_ops.service.health.log_files`), out of a
    walk of `_delta_log` (names relative to it): those directly in it and the sidecars in
    `_sidecars/`, no hidden name (Hadoop's `.<name>.crc` beside each)."""
    return [
        e
        for e in log_tree
        if not posixpath.basename(e.name).startswith(".")
        and ("/" not in e.name or posixpath.dirname(e.name) == SIDECARS_DIR)
    ]


def format_summary(summary: TableSummary) -> str:
    """Human-readable multi-line rendering of a summary."""
    protocol = Protocol.from_action(summary.protocol)
    records = (
        "unknown (a file lacks stats)"
        if summary.num_records is None
        else f"{summary.num_records:,}"
    )
    lines = [
        f"table:            {summary.table}",
        f"version:          {summary.version}",
        f"protocol:         {protocol}",
        f"table id:         {summary.metadata['id']}",
        f"partitioned by:   {', '.join(summary.metadata['partitionColumns']) or '-'}",
        f"live files:       {summary.num_files:,} ({summary.size_bytes:,} bytes)",
        f"records:          {records}, {summary.num_deleted_records:,} deleted by deletion vectors",
        f"tombstones:       {summary.num_tombstones:,}",
        (
            f"leftovers:        {summary.num_leftovers:,} files of unfinished writes"
            f" ({summary.leftover_bytes:,} bytes; vacuum removes them once old)"
        ),
        (
            f"last checkpoint:  {summary.last_checkpoint_version if summary.last_checkpoint_version is not None else 'none'}"
            f" ({summary.commits_since_checkpoint} commits since)"
            + (
                f"; _last_checkpoint: {summary.last_checkpoint_hint_problem} (log cleanup"
                " deletes nothing without it)"
                if summary.last_checkpoint_hint_problem is not None
                else ""
            )
        ),
        f"row tracking:     {summary.row_tracking}"
        + (
            f" (high-water mark {summary.row_id_high_water_mark})"
            if summary.row_id_high_water_mark is not None
            else ""
        ),
    ]
    refused = {op: why for op, why in summary.operations.items() if why != "allowed"}
    if refused:
        allowed = [op for op, why in summary.operations.items() if why == "allowed"]
        lines.append(f"operations:       allowed: {', '.join(allowed) or 'none'}")
        lines.extend(f"                  {op}: {why}" for op, why in refused.items())
    lines.append(
        f"log:              {summary.log_files:,} files ({format_bytes(summary.log_bytes)}),"
        f" {summary.expired_log_files:,} past retention"
    )
    lines.append(
        f"reclaimable:      {summary.reclaimable_files:,} removed files"
        f" ({format_bytes(summary.reclaimable_bytes)})"
    )
    if summary.checksum is not None:
        lines.append(f"checksum:         {_checksum_line(summary.checksum)}")
    if summary.deletion_vectors is not None and (
        summary.deletion_vectors["checked"] or summary.deletion_vectors["unchecked"]
    ):
        lines.append(f"deletion vectors: {_deletion_vectors_line(summary.deletion_vectors)}")
    for key, value in sorted(summary.metadata["configuration"].items()):
        lines.append(f"property:         {key} = {value}")
    if summary.advice:
        lines.append("to do:")
        for item in summary.advice:
            lines.append(f"  - {item['problem']}")
            if item["command"]:
                lines.append(f"      {item['command']}")
    else:
        lines.append("to do:            nothing needs doing now")
    if summary.files is not None:
        gone = set(summary.missing_files or ())
        lines.append("files:")
        lines.extend(
            f"  {f}" + ("  (missing from storage)" if f in gone else "") for f in summary.files
        )
    return "\n".join(lines)


def _deletion_vectors_line(check: dict[str, Any]) -> str:
    unchecked = f", {check['unchecked']:,} not checked" if check["unchecked"] else ""
    if not check["bad"]:
        return f"{check['checked']:,} checked against their files' row counts{unchecked}"
    return (
        f"{len(check['bad']):,} of {check['checked']:,} checked are CORRUPT{unchecked} (see to do)"
    )


def _checksum_line(checksum: dict[str, Any]) -> str:
    status = checksum["status"]
    if status == "missing":
        return f"none for version {checksum['version']} (delta-ops checksum writes it)"
    if status == "agrees":
        absent = checksum.get("absent") or []
        lacks = f" (it lacks {' and '.join(absent)})" if absent else ""
        return f"{checksum['file']} agrees with the log{lacks}"
    what = "does not parse" if status == "unreadable" else "DISAGREES with the log"
    return f"{checksum['file']} {what} (see to do)"
