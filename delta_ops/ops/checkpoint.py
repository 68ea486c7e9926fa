"""The checkpoint operation: plan (pure) and execute (atomic, verified, idempotent).

Plan: decide the version, the layout (classic single file by default; V2 with sidecars when the
table's `delta.checkpointPolicy` is `v2`; multi-part only when asked), the file names, and what
expiry drops. Refuses tables whose writer features delta-ops does not support. A checkpoint
that already exists at the version makes the plan a no-op.

Execute, in an order where a crash at any point leaves a table every reader reads:

1. write each checkpoint file under its final name atomically (local: temp file + `os.link`,
   first writer wins; object stores: one PUT). Multi-part: an incomplete set is ignored by
   readers. V2: sidecars first, the top-level file (which makes them reachable) last;
2. read the written checkpoint back and compare action and add counts with the snapshot;
3. only then write `_last_checkpoint` (with Spark's checksum), unless it already names a newer
   version: the hint never moves back.

Example::

    plan = plan_checkpoint(load_snapshot(path), now_ms=now())
    print(plan.to_dict())            # dry run
    result = execute_checkpoint(plan)
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from delta_ops import clock
from delta_ops.errors import CheckpointInProgress, CorruptLog, DeltaOpsError
from delta_ops.log.checkpoint_content import (
    CheckpointState,
    ParsedColumns,
    Window,
    checkpoint_rows,
    checkpoint_schema,
    checkpoint_state,
    even_windows,
    parsed_columns,
    spark_schema_json,
    streamed_checkpoint_state,
    v2_top_level_rows,
)
from delta_ops.log.file_names import (
    LAST_CHECKPOINT,
    SIDECARS_DIR,
    LogFile,
    LogFileKind,
    classic_checkpoint_name,
    multi_part_checkpoint_name,
    parse_log_file_name,
    v2_checkpoint_name,
)
from delta_ops.log.last_checkpoint import read_last_checkpoint, serialize_last_checkpoint
from delta_ops.log.reader import checkpoint_file_names, parse_action_lines, verify_checkpoint
from delta_ops.log.segment import (
    CheckpointRef,
    LogSegment,
    build_log_segment,
    complete_checkpoints,
)
from delta_ops.log.state_stream import stream_state
from delta_ops.ops.engines import engine_named
from delta_ops.ops.results import fields_data
from delta_ops.protocol.features import Operation
from delta_ops.storage import Storage
from delta_ops.table.snapshot import (
    Snapshot,
    TableHead,
    load_head,
    load_snapshot,
    partition_value_keys,
)

logger = logging.getLogger(__name__)

V2_ACTIONS_PER_SIDECAR = 50_000
CHECKPOINT_SCHEMA_MAX_CHARS = 20_000
LAST_CHECKPOINT_LIST_LIMIT = 30
IN_PROGRESS_GRACE_MS = 60_000  # parts younger than this may belong to a running checkpoint
#: a previous checkpoint of this many actions (sidecars included) is streamed rather than
#: loaded: loading holds the whole state, about 1.5 KB per file with stats
STREAM_ABOVE_ACTIONS = 500_000


@dataclass(frozen=True)
class CheckpointPlan:
    """What a checkpoint run will write. Printing `to_dict()` is the dry run."""

    table: str
    version: int
    kind: str  # "classic" | "multi-part" | "v2"
    num_parts: int
    files: tuple[str, ...]  # names in _delta_log (sidecars as "_sidecars/<name>")
    existing: str | None  # a readable checkpoint already at this version: nothing to do
    replaces: tuple[str, ...]  # broken or abandoned checkpoint files at this version
    num_add_files: int
    num_tombstones: int
    num_txns: int
    num_domains: int
    expired_tombstones: int
    expired_txns: int
    last_checkpoint_version: int | None  # what the hint names now
    will_update_last_checkpoint: bool
    snapshot: Snapshot | TableHead = field(repr=False, compare=False)
    state: CheckpointState = field(repr=False, compare=False)
    streamed: bool = False  # the file state is streamed from the previous checkpoint
    engine: str = "local"  # who writes the parquet files (`delta_ops.ops.engines`)
    now_ms: int = 0  # the expiry clock used (never later than the wall clock)
    requested_now_ms: int | None = None  # what the caller asked for, when it was clamped

    @property
    def nothing_to_do(self) -> bool:
        return self.existing is not None

    def to_dict(self) -> dict[str, Any]:
        return fields_data(self)


@dataclass(frozen=True)
class CheckpointResult:
    """What a checkpoint run did."""

    table: str
    version: int
    kind: str
    written: tuple[str, ...]
    skipped_existing: str | None
    num_actions: int
    num_add_files: int
    size_in_bytes: int
    last_checkpoint_updated: bool
    duration_ms: int

    def to_dict(self) -> dict[str, Any]:
        return fields_data(self)


@dataclass(frozen=True)
class ExistingCheckpoints:
    """What `_delta_log` already holds at one version: a readable checkpoint (then there is
    nothing to do), and the files of broken or abandoned ones, which a new checkpoint
    replaces (they are unreadable, so removing them loses nothing)."""

    readable: str | None
    broken: tuple[str, ...]
    busy_part_counts: frozenset[int] = frozenset()  # part counts of young partial sets


def _existing_checkpoints(storage: Storage, version: int, now_ms: int) -> ExistingCheckpoints:
    """Classify the checkpoint files at `version`.

    A complete checkpoint is verified (footers, paths, sidecars); the first that reads is
    kept. Parts of an incomplete multi-part set (a run killed mid-write, a missing or 0-byte
    part) are abandoned once the newest is older than the in-flight grace. A younger set may
    be another process writing right now, so it is left alone and a new multi-part checkpoint
    avoids its part count (its names): both sets are valid checkpoints once complete.
    """
    files = [
        f
        for f in (
            parse_log_file_name(e.name, e.size, e.modification_time) for e in storage.list_log()
        )
        if f is not None and f.version == version and f.is_checkpoint
    ]
    broken: list[str] = []
    complete = complete_checkpoints(files)
    for ref in reversed(complete):  # the reader's preference first
        try:
            verify_checkpoint(storage, list(ref.files))
        except CorruptLog as exc:
            logger.warning(
                "%s: checkpoint %s is unreadable (%s); it will be rewritten",
                storage.url,
                ref.name,
                exc,
            )
            broken.extend(f.name for f in ref.files)
            continue
        return ExistingCheckpoints(ref.name, ())
    in_complete = {f.name for ref in complete for f in ref.files}
    partial = [
        f
        for f in files
        if f.kind is LogFileKind.MULTI_PART_CHECKPOINT and f.name not in in_complete
    ]
    empty = [f for f in files if f.size == 0 and f.name not in in_complete and f not in partial]
    sets: dict[int, list[LogFile]] = {}
    for f in partial:
        sets.setdefault(f.num_parts or 0, []).append(f)
    busy: set[int] = set()
    for count, parts in sets.items():
        if now_ms - max(f.modification_time for f in parts) < IN_PROGRESS_GRACE_MS:
            busy.add(count)  # maybe a running checkpoint: leave it alone
        else:
            broken.extend(f.name for f in parts)
    broken.extend(f.name for f in empty if (f.num_parts or 0) not in busy)
    return ExistingCheckpoints(None, tuple(broken), frozenset(busy))


def plan_checkpoint(
    snapshot: Snapshot | TableHead,
    now_ms: int,
    *,
    parts: int | None = None,
    stream_above: int | None = None,
    engine: str = "local",
) -> CheckpointPlan:
    """Plan a checkpoint of `snapshot` as of `now_ms` (tombstone/txn expiry clock).

    Args:
        snapshot: the version to checkpoint. A loaded Snapshot is written from memory. A
            TableHead whose segment starts from a checkpoint is streamed from it (memory
            bounded by a batch whatever the table's size; the plan counts the actions in one
            pass over the checkpoint's key columns) when that checkpoint holds at least
            `stream_above` actions (default STREAM_ABOVE_ACTIONS); otherwise, without a
            checkpoint, or when it cannot be read, the snapshot is loaded (with its fallbacks).
        now_ms: the clock for expiry, epoch milliseconds; clamped to the wall clock
            (`delta_ops.clock.bounded`), so a later time never expires a tombstone or `txn`
            the real clock keeps.
        parts: write a multi-part V1 checkpoint with this many parts (classic tables only).
        engine: ``local`` writes the files here, one after another; ``spark`` writes each
            part or sidecar in a Spark task (each reads only its share of a streamed state);
            the files are the same.
    """
    snapshot.protocol.check_allows(Operation.CHECKPOINT)
    props = snapshot.properties
    use_v2 = props.checkpoint_policy == "v2" and snapshot.protocol.supports("v2Checkpoint")
    if parts is not None and parts < 1:
        raise DeltaOpsError(f"--parts must be at least 1, got {parts}")
    if use_v2 and parts and parts > 1:
        raise DeltaOpsError(
            "multi-part checkpoints are not allowed on a table with the v2 checkpoint policy"
        )
    requested_now = now_ms
    now_ms = clock.bounded(now_ms)
    if stream_above is None:
        stream_above = STREAM_ABOVE_ACTIONS
    snapshot, state = _checkpoint_state(snapshot, now_ms, stream_above)
    version = snapshot.version
    existing = _existing_checkpoints(snapshot.storage, version, clock.now_ms())
    if use_v2:
        kind, num_parts = (
            "v2",
            max(1, -(-state.num_file_actions // V2_ACTIONS_PER_SIDECAR)),
        )
        token = uuid.uuid4()
        files = tuple(
            f"{SIDECARS_DIR}/{version:020d}.checkpoint.{i:010d}.{num_parts:010d}.{uuid.uuid4()}.parquet"
            for i in range(1, num_parts + 1)
        ) + (v2_checkpoint_name(version, str(token), "json"),)
    elif parts and parts > 1:
        kind, num_parts = "multi-part", parts
        while num_parts in existing.busy_part_counts:
            num_parts += 1  # another set of this size is being written: use other names
        files = tuple(
            multi_part_checkpoint_name(version, i, num_parts) for i in range(1, num_parts + 1)
        )
    else:
        kind, num_parts = "classic", 1
        files = (classic_checkpoint_name(version),)
    hint = read_last_checkpoint(snapshot.storage).info
    hint_version = hint.version if hint is not None else None
    return CheckpointPlan(
        table=snapshot.storage.url,
        version=version,
        kind=kind,
        num_parts=num_parts,
        files=files,
        existing=existing.readable,
        replaces=existing.broken,
        num_add_files=state.num_adds,
        num_tombstones=state.num_tombstones,
        num_txns=len(state.txns),
        num_domains=len(state.domains),
        expired_tombstones=state.expired_tombstones,
        expired_txns=state.expired_txns,
        last_checkpoint_version=hint_version,
        will_update_last_checkpoint=hint_version is None
        or hint_version <= version
        or _existing_ref(snapshot.storage, hint_version) is None,
        snapshot=snapshot,
        state=state,
        streamed=isinstance(snapshot, TableHead),
        engine=engine_named(engine).name,
        now_ms=now_ms,
        requested_now_ms=requested_now if requested_now != now_ms else None,
    )


def _checkpoint_state(
    snapshot: Snapshot | TableHead, now_ms: int, stream_above: int
) -> tuple[Snapshot | TableHead, CheckpointState]:
    """The state to write: streamed from the head's checkpoint when that is big, else from a
    loaded snapshot (one read, and the plan then knows the table's bytes and rows too)."""
    if isinstance(snapshot, Snapshot):
        return snapshot, checkpoint_state(snapshot, now_ms)
    head = snapshot
    if (
        head.segment.checkpoint is not None
        and _checkpoint_actions(head.storage, head.segment) >= stream_above
    ):
        try:
            streamed = stream_state(head.storage, head.segment)
            state = streamed_checkpoint_state(
                streamed,
                protocol=head.protocol.to_action(),
                metadata=head.metadata.to_action(),
                properties=head.properties,
                partition_keys=partition_value_keys(head.metadata, head.schema),
                now_ms=now_ms,
            )
            return head, state
        except CorruptLog as exc:
            logger.warning("%s; checkpointing from the whole log instead", exc)
    loaded = load_snapshot(head.storage, head.version)
    return loaded, checkpoint_state(loaded, now_ms)


def load_for_checkpoint(
    table: str | Storage,
    version: int | None = None,
    *,
    storage_options: Mapping[str, Any] | None = None,
) -> Snapshot | TableHead:
    """What a checkpoint plans from: the head when the table's latest checkpoint is big enough
    to stream (:data:`STREAM_ABOVE_ACTIONS`), else the loaded snapshot; deciding takes a
    listing and the checkpoint's footers, so the log is read once either way."""
    storage = table if isinstance(table, Storage) else Storage.open(table, storage_options)
    segment = build_log_segment(storage, version)
    if _checkpoint_actions(storage, segment) >= STREAM_ABOVE_ACTIONS:
        return load_head(storage, version)
    return load_snapshot(storage, version)


def _checkpoint_actions(storage: Storage, segment: LogSegment) -> int:
    """How many actions the segment's checkpoint holds, from its parquet footers (and those of
    the sidecars a V2 checkpoint references); an unreadable one counts 0 (the loader's
    fallbacks deal with it)."""
    checkpoint = segment.checkpoint
    if checkpoint is None:
        return 0
    try:
        total = 0
        for name in checkpoint_file_names(storage, checkpoint.files):
            if name.endswith(".json"):
                continue  # a V2 top-level file: its actions are not file actions
            with storage.open_input(storage.log_file(name)) as handle:
                total += pq.ParquetFile(handle).metadata.num_rows
        return total
    except (CorruptLog, pa.ArrowException, OSError):
        return 0


def _write_parquet(
    storage: Storage, name: str, schema: pa.Schema, row_groups: Iterable[pa.Table]
) -> tuple[bool, int]:
    """Write one checkpoint parquet file (one row group per table, as they stream) atomically.

    Returns (created, size). When another writer created the file first, theirs is kept
    (first wins); a 0-byte file under the name, which every reader ignores, is replaced. A V2
    sidecar's name is unique (a UUID in it), so on an object store it is uploaded in parts as
    it is written rather than held whole.
    """

    def write(sink: Any) -> None:
        with pq.ParquetWriter(sink, schema, compression="snappy") as writer:
            empty = True
            for group in row_groups:
                writer.write_table(group)
                empty = False
            if empty:  # an empty part still has a (zero-row) row group, as Spark writes it
                writer.write_table(schema.empty_table())

    created, size = storage.create_new(
        storage.log_file(name),
        write,
        replace_empty=True,
        unique_name=name.startswith(f"{SIDECARS_DIR}/"),
    )
    if not created:
        logger.info("%s already exists (a concurrent checkpoint won); keeping it", name)
        entry = storage.stat(storage.log_file(name))
        size = entry.size if entry is not None else 0
    return created, size


def _write_new(storage: Storage, name: str, data: bytes) -> bool:
    """Create a small log file atomically; False when another writer created it first. On a
    store without conditional writes a checkpoint file is last-writer-wins (as Delta Spark on
    S3 without a commit coordinator), never a refusal half-way through a V2 checkpoint."""
    created, _ = storage.create_new(storage.log_file(name), lambda sink: sink.write(data))
    if not created:
        logger.info("%s already exists (a concurrent checkpoint won); keeping it", name)
    return created


def execute_checkpoint(plan: CheckpointPlan) -> CheckpointResult:
    """Write the planned checkpoint, verify it, then update `_last_checkpoint`."""
    started = time.monotonic()
    storage = plan.snapshot.storage
    if plan.nothing_to_do:
        logger.info(
            "%s: a checkpoint already exists at version %d (%s)",
            plan.table,
            plan.version,
            plan.existing,
        )
        updated = _repair_hint_for_existing(plan, storage)
        return CheckpointResult(
            plan.table,
            plan.version,
            plan.kind,
            (),
            plan.existing,
            0,
            plan.num_add_files,
            0,
            updated,
            0,
        )
    # broken files under the names we write go first (unreadable: nothing readable is lost)
    colliding = [n for n in plan.replaces if n in plan.files]
    storage.delete(storage.log_file(n) for n in colliding)
    writer = CheckpointFileWriter(
        storage.location,
        dict(storage.options),
        plan.state,
        checkpoint_schema(plan.snapshot),
        parsed_columns(plan.snapshot),
    )
    files = checkpoint_files(plan)
    outcomes = engine_named(plan.engine).write_checkpoint_files(writer, files)
    if plan.kind == "v2":
        hint, written, sizes = _finish_v2(plan, storage, files, outcomes)
    else:
        written, sizes = [], []
        for file, (created, size) in zip(files, outcomes):
            if created:
                written.append(file.name)
                sizes.append(size)
        lost = [f.name for f, (created, _) in zip(files, outcomes) if not created]
        if lost or len(outcomes) < len(files):
            storage.delete(storage.log_file(n) for n in written)  # our parts, not theirs
            return _lost_race(plan, storage, lost[0] if lost else files[-1].name)
        schema = writer.schema
        hint = {
            "version": plan.version,
            "size": plan.state.num_actions,
            "parts": plan.num_parts if plan.kind == "multi-part" else None,
            "sizeInBytes": sum(sizes),
            "numOfAddFiles": plan.num_add_files,
        }
        schema_json = spark_schema_json(schema)
        if len(json.dumps(schema_json, separators=(",", ":"))) <= CHECKPOINT_SCHEMA_MAX_CHARS:
            hint["checkpointSchema"] = schema_json
    _verify(plan, storage)
    # the rest of the broken or abandoned files at this version, now that ours reads
    storage.delete(storage.log_file(n) for n in plan.replaces if n not in colliding)
    updated = _update_last_checkpoint(storage, plan.version, hint)
    return CheckpointResult(
        table=plan.table,
        version=plan.version,
        kind=plan.kind,
        written=tuple(written),
        skipped_existing=None,
        num_actions=plan.state.num_actions,
        num_add_files=plan.num_add_files,
        size_in_bytes=sum(sizes),
        last_checkpoint_updated=updated,
        duration_ms=int((time.monotonic() - started) * 1000),
    )


@dataclass(frozen=True)
class CheckpointFile:
    """One parquet file of a checkpoint and its share of the rows: the non-file actions (the
    first part of a V1 checkpoint), a multi-part share by path, or a window of the file
    actions (a V2 sidecar)."""

    name: str  # relative to `_delta_log`
    non_file_actions: bool = False
    part: tuple[int, int] | None = None
    window: Window | None = None


@dataclass
class CheckpointFileWriter:
    """Writes the files of one checkpoint, each from its own pass over the state; picklable
    (the table travels as its location), so an engine may write the files in parallel."""

    location: str
    options: dict[str, Any]
    state: CheckpointState
    schema: pa.Schema
    parsed: ParsedColumns

    def write(self, file: CheckpointFile) -> tuple[bool, int]:
        """(created, size) of one file; False when another writer created it first."""
        storage = Storage.open(self.location, self.options or None)
        schema = self.schema
        if file.window is not None:  # a V2 sidecar holds only file actions
            schema = pa.schema([schema.field("add"), schema.field("remove")])
        rows = checkpoint_rows(
            self.state,
            schema,
            self.parsed,
            non_file_actions=file.non_file_actions,
            part=file.part,
            window=file.window,
        )
        return _write_parquet(storage, file.name, schema, rows)


def checkpoint_files(plan: CheckpointPlan) -> list[CheckpointFile]:
    """The parquet files a plan writes and what each holds (a V2 plan's last file, the JSON
    top-level one, is written afterwards and is not listed)."""
    if plan.kind == "v2":
        windows = even_windows(plan.state.num_file_actions, len(plan.files) - 1)
        return [CheckpointFile(name, window=w) for name, w in zip(plan.files[:-1], windows)]
    return [
        CheckpointFile(
            name,
            non_file_actions=index == 0,
            part=(index, plan.num_parts) if plan.num_parts > 1 else None,
        )
        for index, name in enumerate(plan.files)
    ]


def _finish_v2(
    plan: CheckpointPlan,
    storage: Storage,
    files: list[CheckpointFile],
    outcomes: list[tuple[bool, int]],
) -> tuple[dict[str, Any], list[str], list[int]]:
    """Write the V2 top-level file over the sidecars written, and the hint that names it."""
    top_name = plan.files[-1]
    now = int(time.time() * 1000)
    sidecars, written, sizes = [], [], []
    for file, (_, size) in zip(files, outcomes):  # UUID names: always ours
        sidecars.append(
            {"path": file.name.split("/", 1)[1], "sizeInBytes": size, "modificationTime": now}
        )
        written.append(file.name)
        sizes.append(size)
    sidecar_rows = plan.state.num_file_actions
    tags = {
        "sidecarNumActions": str(sidecar_rows),
        "sidecarSizeInBytes": str(sum(sizes)),
        "numOfAddFiles": str(plan.num_add_files),
    }
    top_rows = v2_top_level_rows(plan.state, sidecars, tags)
    top = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in top_rows).encode()
    _write_new(storage, top_name, top)
    written.append(top_name)
    sizes.append(len(top))
    non_file = [r for r in top_rows if "sidecar" not in r and "checkpointMetadata" not in r] + [
        {"checkpointMetadata": top_rows[0]["checkpointMetadata"]}
    ]
    v2_info: dict[str, Any] = {"path": top_name, "sizeInBytes": len(top), "modificationTime": now}
    if len(non_file) <= LAST_CHECKPOINT_LIST_LIMIT:
        v2_info["nonFileActions"] = non_file
    if len(sidecars) <= LAST_CHECKPOINT_LIST_LIMIT:
        v2_info["sidecarFiles"] = sidecars
    hint = {
        "version": plan.version,
        "size": sidecar_rows + len(top_rows),
        "sizeInBytes": sum(sizes),
        "numOfAddFiles": plan.num_add_files,
        "v2Checkpoint": v2_info,
    }
    return hint, written, sizes


def _count_actions(storage: Storage, name: str) -> dict[str, int]:
    """Non-null actions per kind in one written checkpoint file (parquet or V2 JSON)."""
    path = storage.log_file(name)
    if name.endswith(".json"):
        counts: dict[str, int] = {}
        for action in parse_action_lines(name, storage.read_bytes(path)):
            kind = next(iter(action))
            counts[kind] = counts.get(kind, 0) + 1
        return counts
    try:
        with storage.open_input(path) as f:
            pf = pq.ParquetFile(f)
            names = pf.schema_arrow.names
            counts = {"rows": pf.metadata.num_rows}
            wanted = [c for c in ("add", "remove") if c in names]
            for c in wanted:
                counts[c] = 0
            for batch in pf.iter_batches(columns=[f"{c}.path" for c in wanted]):
                for c in wanted:
                    column = pc.struct_field(batch.column(c), "path")  # null under a null parent
                    counts[c] += len(column) - column.null_count
    except (pa.ArrowException, OSError) as exc:
        raise CorruptLog(name, f"unreadable checkpoint parquet: {exc}") from exc
    return counts


def _verify(plan: CheckpointPlan, storage: Storage) -> None:
    """Read the written files back: every row is one action; add and remove counts match."""
    totals = {"add": 0, "remove": 0, "rows": 0}
    for name in plan.files:
        counts = _count_actions(storage, name)
        for key in ("add", "remove"):
            totals[key] += counts.get(key, 0)
        totals["rows"] += counts.get("rows", sum(counts.values()))
    expected_rows = plan.state.num_actions + (1 + plan.num_parts if plan.kind == "v2" else 0)
    problems = []
    if totals["add"] != plan.num_add_files:
        problems.append(f"{totals['add']} adds read back, {plan.num_add_files} expected")
    if totals["remove"] != plan.num_tombstones:
        problems.append(f"{totals['remove']} removes read back, {plan.num_tombstones} expected")
    if totals["rows"] != expected_rows:
        problems.append(f"{totals['rows']} actions read back, {expected_rows} expected")
    if problems:
        raise CorruptLog(plan.files[-1], "checkpoint verification failed: " + "; ".join(problems))


def _lost_race(plan: CheckpointPlan, storage: Storage, name: str) -> CheckpointResult:
    """Another writer created `name` first: its checkpoint stands (it may differ from ours, e.g.
    another clock expired other tombstones); check it is readable and report it as existing."""
    ref = _existing_ref(storage, plan.version)
    if ref is None:
        raise CheckpointInProgress(
            f"{storage.url}: another process is writing {name}; try again in a minute"
        )
    verify_checkpoint(storage, list(ref.files))
    updated = _repair_hint_for_existing(plan, storage)
    return CheckpointResult(
        plan.table, plan.version, plan.kind, (), ref.name, 0, plan.num_add_files, 0, updated, 0
    )


def _existing_ref(storage: Storage, version: int) -> CheckpointRef | None:
    files = [
        f
        for f in (
            parse_log_file_name(e.name, e.size, e.modification_time) for e in storage.list_log()
        )
        if f is not None
    ]
    refs = [r for r in complete_checkpoints(files) if r.version == version]
    return refs[-1] if refs else None


def _repair_hint_for_existing(plan: CheckpointPlan, storage: Storage) -> bool:
    """Point `_last_checkpoint` at an existing checkpoint when it names an older one or none
    (a run that crashed after writing the checkpoint, or another writer's checkpoint)."""
    current = read_last_checkpoint(storage).info
    if current is not None and current.version == plan.version:
        return False
    if (
        current is not None
        and current.version > plan.version
        and _existing_ref(storage, current.version) is not None
    ):
        return False
    ref = _existing_ref(storage, plan.version)
    if ref is None:
        return False
    rows = sum(
        _count_actions(storage, f.name).get("rows", 0)
        if f.format == "parquet"
        else sum(_count_actions(storage, f.name).values())
        for f in ref.files
    )
    hint: dict[str, Any] = {
        "version": plan.version,
        "size": rows,
        "parts": len(ref.files) if ref.kind is LogFileKind.MULTI_PART_CHECKPOINT else None,
        "sizeInBytes": sum(f.size for f in ref.files),
        "numOfAddFiles": plan.num_add_files,
    }
    if ref.kind is LogFileKind.V2_CHECKPOINT:
        f = ref.files[0]
        hint["v2Checkpoint"] = {
            "path": f.name,
            "sizeInBytes": f.size,
            "modificationTime": f.modification_time,
        }
    return _update_last_checkpoint(storage, plan.version, hint)


def _update_last_checkpoint(storage: Storage, version: int, hint: dict[str, Any]) -> bool:
    """Write `_last_checkpoint` unless it already names a newer checkpoint."""
    current = read_last_checkpoint(storage).info
    if current is not None and current.version > version:
        if _existing_ref(storage, current.version) is not None:
            logger.info(
                "_last_checkpoint names version %d, newer than %d: left as is",
                current.version,
                version,
            )
            return False
        logger.warning(
            "_last_checkpoint names version %d, which has no checkpoint: repairing it",
            current.version,
        )
    storage.write_atomic(storage.log_file(LAST_CHECKPOINT), serialize_last_checkpoint(hint))
    return True


def checkpoint(
    table: str | Storage,
    *,
    version: int | None = None,
    parts: int | None = None,
    now_ms: int | None = None,
    storage_options: dict[str, Any] | None = None,
) -> CheckpointResult:
    """Plan and execute a checkpoint in one call (the API behind `delta-ops checkpoint`): the
    file state streams from the table's latest checkpoint when that is big."""
    loaded = load_for_checkpoint(table, version, storage_options=storage_options)
    plan = plan_checkpoint(
        loaded, now_ms if now_ms is not None else int(time.time() * 1000), parts=parts
    )
    return execute_checkpoint(plan)


__all__ = [
    "CheckpointPlan",
    "CheckpointResult",
    "LogFileKind",
    "checkpoint",
    "execute_checkpoint",
    "plan_checkpoint",
]
