"""Writing a checkpoint: plan (pure) and execute (atomic, verified, idempotent). The checkpoint
operation (`delta_ops.ops.checkpoint`) and drop-feature (its barrier checkpoints) both write
with it.

Plan: decide the version, the layout (classic single file by default; V2 with sidecars when the
table's `delta.checkpointPolicy` is `v2`; multi-part only when asked), the file names, and what
expiry drops. Refuses tables whose writer features delta-ops does not support. A checkpoint
that already exists at the version makes the plan a no-op, but for removing other complete
checkpoints of the version that rank below it (left by concurrent runs).

Execute, in an order where a crash at any point leaves a table every reader reads:

1. write each checkpoint file under its final name atomically (local: temp file + `os.link`,
   first writer wins; object stores: one PUT). Multi-part: an incomplete set is ignored by
   readers. V2: sidecars first, the top-level file (which makes them reachable) last;
2. read the written checkpoint back and compare action and add counts with the snapshot;
3. only then write `_last_checkpoint` (with Spark's checksum), unless it already names a newer
   version: the hint never moves back.

Concurrent runs at one version leave exactly one complete V1 checkpoint (protocol sections
"Checkpoints", "Multi-part checkpoint", "Last Checkpoint File"): a reader that lists two, such
as DuckDB's delta extension, fails when `_last_checkpoint` names the other one. So:

* a run that finds another run's young partial multi-part set waits for it (bounded by
  `IN_PROGRESS_WAIT_MS`); once it completes there is nothing to do; a set that stays
  partial is presumed dead and ours is written (a stale set, older than the in-flight grace,
  never delays anyone);
* two runs with the same part count write the same names: each part goes to the first
  writer, and the parts another run wrote are checked to be valid parts of this set (same
  path partitioning, the non-file actions in part 1) before the set is used;
* after writing, the run keeps the complete classic and multi-part checkpoints at the version
  that Delta Spark would pick (multi-part over classic, more parts first) and deletes the
  others, before `_last_checkpoint` is written; after writing the hint it re-reads the version
  and repairs the hint if a concurrent run settled it differently meanwhile.

For example:

    plan = plan_checkpoint(load_snapshot(path), now_ms=now())
    print(plan.to_dict())            # dry run
    result = execute_checkpoint(plan)
"""

from __future__ import annotations

import contextvars
import functools
import json
import logging
import queue
import threading
import time
import uuid
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from delta_ops import clock
from delta_ops.errors import CheckpointInProgress, CorruptLog, InvalidValue
from delta_ops.log.checkpoint_content import (
    CheckpointState,
    ParsedColumns,
    Window,
    checkpoint_rows,
    checkpoint_schema,
    checkpoint_state,
    dictionary_columns,
    even_windows,
    parsed_columns,
    part_of_paths,
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
from delta_ops.log.last_checkpoint import (
    LastCheckpointInfo,
    parse_last_checkpoint,
    read_last_checkpoint,
    serialize_last_checkpoint,
)
from delta_ops.log.reader import checkpoint_file_names, parse_action_lines, verify_checkpoint
from delta_ops.log.segment import (
    CheckpointRef,
    LogSegment,
    build_log_segment,
    complete_checkpoints,
)
from delta_ops.log.state_stream import stream_state
from delta_ops.ops.engines import LOCAL, Engine
from delta_ops.ops.operation import (
    EnginePlan,
    Timed,
    timed,
)
from delta_ops.ops.results import fields_data
from delta_ops.protocol.features import Access
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
#: how long a run waits at most for another run's young partial multi-part set to complete
IN_PROGRESS_WAIT_MS = 30_000
IN_PROGRESS_POLL_MS = 250
V1_KINDS = frozenset({LogFileKind.CLASSIC_CHECKPOINT, LogFileKind.MULTI_PART_CHECKPOINT})
#: a previous checkpoint of this many actions (sidecars included) is streamed rather than
#: loaded: loading holds the whole state, about 1.5 KB per file with stats
STREAM_ABOVE_ACTIONS = 500_000


class CheckpointKind(StrEnum):
    """Which of the protocol's checkpoint formats a plan writes."""

    CLASSIC = "classic"  # one parquet file
    MULTI_PART = "multi-part"  # parquet parts of one version (deprecated by the protocol)
    V2 = "v2"  # a top-level file naming parquet sidecars (the v2Checkpoint feature)


@dataclass(frozen=True)
class CheckpointPlan(EnginePlan):
    """What a checkpoint run will write. Printing `to_dict()` is the dry run."""

    table: str
    version: int
    kind: CheckpointKind
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
    now_ms: int = 0  # the expiry clock used (never later than the wall clock)
    requested_now_ms: int | None = None  # what the caller asked for, when it was clamped
    #: other complete checkpoints at this version, ranked below `existing`: removed, so that
    #: readers see one (a reader listing two may pick the one `_last_checkpoint` does not name)
    redundant: tuple[str, ...] = ()
    in_progress: tuple[str, ...] = ()  # young parts of another run's set: waited for

    @property
    def nothing_to_do(self) -> bool:
        return self.existing is not None and not self.redundant

    @property
    def idle_reason(self) -> str:
        """Why the plan has nothing to do (when it has nothing to do)."""
        return f"version {self.version} already has a checkpoint ({self.existing})"

    def to_dict(self) -> dict[str, Any]:
        return fields_data(self, engine=self.engine.name)


@dataclass(frozen=True)
class CheckpointResult(Timed):
    """What a checkpoint run did."""

    table: str
    version: int
    kind: CheckpointKind
    written: tuple[str, ...]
    skipped_existing: str | None
    num_actions: int
    num_add_files: int
    size_in_bytes: int
    last_checkpoint_updated: bool
    removed: tuple[str, ...] = ()  # other checkpoints' files at this version, deleted
    waited_ms: int = 0  # time spent waiting for another run's checkpoint of this version

    def to_dict(self) -> dict[str, Any]:
        return fields_data(self)


@dataclass(frozen=True)
class ExistingCheckpoints:
    """What `_delta_log` already holds at one version: a readable checkpoint (then there is
    nothing to do but to remove the `redundant` complete ones ranked below it), the files of
    broken or abandoned ones, which a new checkpoint replaces (they are unreadable, so
    removing them loses nothing), and the young parts of a set another run may be writing."""

    readable: str | None
    broken: tuple[str, ...]
    in_progress: tuple[str, ...] = ()
    redundant: tuple[str, ...] = ()


def _checkpoint_files_at(
    storage: Storage, version: int, listing: Iterable[LogFile] | None = None
) -> list[LogFile]:
    """The checkpoint files at `version`, from `listing` (parsed names of `_delta_log`) or, when
    None, from one new listing."""
    if listing is None:
        parsed = (
            parse_log_file_name(e.name, e.size, e.modification_time)
            for e in storage.list_log(from_version=version)
        )
        listing = (f for f in parsed if f is not None)
    return [f for f in listing if f.version == version and f.is_checkpoint]


def _partial_sets(files: list[LogFile], complete: list[CheckpointRef]) -> dict[int, list[LogFile]]:
    """Parts of incomplete multi-part sets, by part count."""
    in_complete = {f.name for ref in complete for f in ref.files}
    sets: dict[int, list[LogFile]] = {}
    for f in files:
        if f.kind is LogFileKind.MULTI_PART_CHECKPOINT and f.name not in in_complete:
            sets.setdefault(f.num_parts or 0, []).append(f)
    return sets


def _young(parts: list[LogFile], now_ms: int) -> bool:
    """Whether a partial set may still be being written (its newest part is within the grace)."""
    return now_ms - max(f.modification_time for f in parts) < IN_PROGRESS_GRACE_MS


def _existing_checkpoints(
    storage: Storage, version: int, now_ms: int, files: list[LogFile] | None = None
) -> ExistingCheckpoints:
    """Classify the checkpoint files at `version`.

    A complete checkpoint is verified (footers, paths, sidecars); the first that reads is
    kept. Parts of an incomplete multi-part set (a run killed mid-write, a missing or 0-byte
    part) are abandoned once the newest is older than the in-flight grace. A younger set may
    be another process writing right now: it is left alone, and `execute_checkpoint` waits
    for it (a bounded time) rather than writing a second set beside it. `files` is a listing
    of the version's checkpoint files just taken, if any.
    """
    if files is None:
        files = _checkpoint_files_at(storage, version)
    broken: list[str] = []
    complete = complete_checkpoints(files)
    for ref in reversed(complete):  # the reader's preference first
        try:
            verify_checkpoint(storage, list(ref.files))
        except FileNotFoundError:
            continue  # removed since `files` was listed: not there (execute lists again)
        except CorruptLog as exc:
            logger.warning(
                "%s: checkpoint %s is unreadable (%s); it will be rewritten",
                storage.url,
                ref.name,
                exc,
            )
            broken.extend(f.name for f in ref.files)
            continue
        v1 = [r for r in complete if r.kind in V1_KINDS]
        losers = [r for r in v1 if r.sort_key < ref.sort_key] if ref.kind in V1_KINDS else v1[:-1]
        redundant = tuple(f.name for r in losers for f in r.files)
        return ExistingCheckpoints(ref.name, (), redundant=redundant)
    in_complete = {f.name for ref in complete for f in ref.files}
    sets = _partial_sets(files, complete)
    partial = {f.name for parts in sets.values() for f in parts}
    empty = [f for f in files if f.size == 0 and f.name not in in_complete | partial]
    in_progress: list[str] = []
    for parts in sets.values():
        if _young(parts, now_ms):
            in_progress.extend(f.name for f in parts)  # maybe a running checkpoint
        else:
            broken.extend(f.name for f in parts)
    busy = {count for count, parts in sets.items() if _young(parts, now_ms)}
    broken.extend(f.name for f in empty if (f.num_parts or 0) not in busy)
    return ExistingCheckpoints(None, tuple(broken), tuple(sorted(in_progress)))


def plan_checkpoint(
    snapshot: Snapshot | TableHead,
    now_ms: int,
    *,
    parts: int | None = None,
    stream_above: int | None = None,
    engine: Engine = LOCAL,
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
            (`delta_ops.clock.clamp`), so a later time never expires a tombstone or `txn`
            the real clock keeps.
        parts: write a multi-part V1 checkpoint with this many parts (classic tables only).
        engine: writes the parquet files: the local engine here, one after another; the
            Spark engine each part or sidecar in a task (each reads only its share of a
            streamed state); the files are the same.
    """
    snapshot.protocol.check_allows(Access.CHECKPOINT)
    props = snapshot.properties
    use_v2 = props.checkpoint_policy == "v2" and snapshot.protocol.supports("v2Checkpoint")
    if parts is not None and parts < 1:
        raise InvalidValue(f"--parts must be at least 1, got {parts}")
    if use_v2 and parts and parts > 1:
        raise InvalidValue(
            "multi-part checkpoints are not allowed on a table with the v2 checkpoint policy"
        )
    clamped = clock.clamp(now_ms)
    now_ms = clamped.now_ms
    if stream_above is None:
        stream_above = STREAM_ABOVE_ACTIONS
    snapshot, state = _checkpoint_state(snapshot, now_ms, stream_above)
    version = snapshot.version
    # The load's listing and hint are as fresh as the state the plan is made from; execute
    # lists again before it writes (`_await_other_run`), so the plan does not re-read them.
    segment = snapshot.segment
    existing = _existing_checkpoints(
        snapshot.storage,
        version,
        clock.now_ms(),
        files=_checkpoint_files_at(snapshot.storage, version, segment.listing),
    )
    if use_v2:
        kind, num_parts = (
            CheckpointKind.V2,
            max(1, -(-state.num_file_actions // V2_ACTIONS_PER_SIDECAR)),
        )
        token = uuid.uuid4()
        files = tuple(
            f"{SIDECARS_DIR}/{version:020d}.checkpoint.{i:010d}.{num_parts:010d}.{uuid.uuid4()}.parquet"
            for i in range(1, num_parts + 1)
        ) + (v2_checkpoint_name(version, str(token), "json"),)
    elif parts and parts > 1:
        kind, num_parts = CheckpointKind.MULTI_PART, parts
        files = tuple(
            multi_part_checkpoint_name(version, i, num_parts) for i in range(1, num_parts + 1)
        )
    else:
        kind, num_parts = CheckpointKind.CLASSIC, 1
        files = (classic_checkpoint_name(version),)
    hint = segment.last_checkpoint.info
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
        engine=engine,
        now_ms=now_ms,
        requested_now_ms=clamped.requested_ms,
        redundant=existing.redundant,
        in_progress=existing.in_progress,
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
            logger.warning(
                "%s: %s; checkpointing from the whole log instead", head.storage.url, exc
            )
    loaded = load_snapshot(head.storage, head.version)
    return loaded, checkpoint_state(loaded, now_ms)


def load_for_checkpoint(
    table: str | Storage,
    version: int | None = None,
    *,
    storage_options: Mapping[str, Any] | None = None,
) -> Snapshot | TableHead:
    """What a checkpoint plans from: the head when the table's latest checkpoint is big enough
    to stream (`STREAM_ABOVE_ACTIONS`), else the loaded snapshot; deciding takes a
    listing and the checkpoint's footers, so the log is read once either way."""
    storage = table if isinstance(table, Storage) else Storage.open(table, storage_options)
    segment = build_log_segment(storage, version)
    if _checkpoint_actions(storage, segment) >= STREAM_ABOVE_ACTIONS:
        return load_head(storage, version, segment=segment)
    return load_snapshot(storage, version, segment=segment)


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
    except (CorruptLog, pa.ArrowException, OSError, UnicodeDecodeError):
        # Arrow decodes a footer's column names as it opens the file: a name that is not
        # UTF-8 raises UnicodeDecodeError, not an ArrowException (found by the log fuzzer)
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
        with pq.ParquetWriter(
            sink, schema, compression="snappy", use_dictionary=dictionary_columns(schema)
        ) as writer:
            empty = True
            for group in built_ahead(row_groups):
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
        logger.info(
            "%s: %s already exists (a concurrent checkpoint won); keeping it", storage.url, name
        )
        entry = storage.stat(storage.log_file(name))
        size = entry.size if entry is not None else 0
    return created, size


#: how many built row groups `built_ahead` holds for the writer (one more may be in the
#: making): one is as fast as more, for the memory of one
ROW_GROUPS_AHEAD = 1


def built_ahead(groups: Iterable[pa.Table], ahead: int | None = None) -> Iterator[pa.Table]:
    """`groups` in their order, built by a thread of their own while the caller uses the ones
    before: up to `ahead` built groups wait for the caller, and one more may be in the making
    (default `ROW_GROUPS_AHEAD`; 0: built by the caller, one at a time).

    Writing a row group is one core's work in pyarrow, without the GIL; building the next one
    (parsing its stats, on the other core) need not wait for it: a 100k-action checkpoint
    builds the removes and its last adds while its first 65k adds are written. An error
    building a group is raised here, where that group was due; when the caller stops early,
    the thread stops after the group it is building.
    """
    ahead = ROW_GROUPS_AHEAD if ahead is None else ahead
    if ahead <= 0:
        yield from groups
        return
    handoff: queue.Queue[tuple[pa.Table | None, BaseException | None]] = queue.Queue(ahead)
    stop = threading.Event()

    def build() -> None:
        try:
            for group in groups:
                if stop.is_set():
                    return
                handoff.put((group, None))  # waits while `ahead` groups wait
            handoff.put((None, None))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller, raised there
            handoff.put((None, exc))

    context = contextvars.copy_context()  # the caller's progress reporter, if any
    builder = threading.Thread(target=context.run, args=(build,), daemon=True)
    _stop_builders_at_exit()
    _BUILDERS[builder] = (stop, handoff)
    builder.start()
    try:
        while True:
            group, error = handoff.get()
            if error is not None:
                raise error
            if group is None:
                return
            yield group
    finally:
        _stop_builder(builder, stop, handoff)
        _BUILDERS.pop(builder, None)


def _stop_builder(
    builder: threading.Thread,
    stop: threading.Event,
    handoff: queue.Queue[tuple[pa.Table | None, BaseException | None]],
    timeout_s: float | None = None,
) -> None:
    """Stop `builder` after the group it is building and wait for it (at most `timeout_s`)."""
    stop.set()
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while builder.is_alive():  # free a builder waiting to hand a group over
        if deadline is not None and time.monotonic() > deadline:
            return
        try:
            handoff.get_nowait()
        except queue.Empty:
            builder.join(0.01)


#: the row-group builders running now, with what stops them
_BUILDERS: dict[
    threading.Thread,
    tuple[threading.Event, queue.Queue[tuple[pa.Table | None, BaseException | None]]],
] = {}
#: how long the interpreter's exit waits for a builder to finish the group it is building
BUILDER_EXIT_WAIT_S = 30.0


@functools.cache
def _stop_builders_at_exit() -> None:
    """Stop every builder still running when the interpreter exits (a checkpoint interrupted
    by the exit, or a generator nobody closed), before the interpreter's teardown: a daemon
    thread still inside Arrow's C++ code when the interpreter finalizes is ended by
    ``pthread_exit``, whose unwinding through C++ frames can abort the process
    (apache/arrow#34314: "terminate called without an active exception"). Registered once
    (the cache)."""
    import atexit

    atexit.register(_stop_all_builders)


def _stop_all_builders() -> None:
    for builder, (stop, handoff) in list(_BUILDERS.items()):
        _stop_builder(builder, stop, handoff, BUILDER_EXIT_WAIT_S)


def _write_new(storage: Storage, name: str, data: bytes) -> bool:
    """Create a small log file atomically; False when another writer created it first. On a
    store without conditional writes a checkpoint file is last-writer-wins (as Delta Spark on
    S3 without a commit coordinator), never a refusal half-way through a V2 checkpoint."""
    created, _ = storage.create_new(storage.log_file(name), lambda sink: sink.write(data))
    if not created:
        logger.info(
            "%s: %s already exists (a concurrent checkpoint won); keeping it", storage.url, name
        )
    return created


@timed
def execute_checkpoint(plan: CheckpointPlan, *, wait_ms: int | None = None) -> CheckpointResult:
    """Write the planned checkpoint, verify it, then update `_last_checkpoint`.

    `wait_ms` bounds the wait for another run's young partial multi-part set at this version
    (default `IN_PROGRESS_WAIT_MS`; 0 does not wait): when it completes, it stands and
    nothing is written.
    """
    storage = plan.snapshot.storage
    existing, waited_ms = _await_other_run(
        plan, storage, IN_PROGRESS_WAIT_MS if wait_ms is None else wait_ms
    )
    if existing.readable is not None:
        logger.info(
            "%s: a checkpoint already exists at version %d (%s)",
            plan.table,
            plan.version,
            existing.readable,
        )
        return _keep_existing(plan, storage, waited_ms, verified=(existing.readable,))
    replaces = existing.broken
    # broken files under the names we write go first (unreadable: nothing readable is lost)
    colliding = [n for n in replaces if n in plan.files]
    storage.delete(storage.log_file(n) for n in colliding)
    writer = CheckpointFileWriter(
        storage.location,
        dict(storage.options),
        plan.state,
        checkpoint_schema(plan.snapshot),
        parsed_columns(plan.snapshot),
    )
    files = checkpoint_files(plan)
    # one file: no parallelism to gain, no task to start
    engine = plan.engine if len(files) > 1 else LOCAL
    # a file another writer created first ends the map: the files after it would be wasted
    outcomes = engine.map_ordered(writer.write, files, stop=lambda outcome: not outcome[0])
    removed: tuple[str, ...] = ()
    if plan.kind is CheckpointKind.V2:
        hint, written, sizes = _finish_v2(plan, storage, files, outcomes)
        _verify(plan, storage)
    else:
        if plan.kind is CheckpointKind.MULTI_PART:
            # a run with the same part count writes the same names: its parts count as ours
            # once checked, so the rest are written too and the set completes either way
            outcomes = outcomes + [writer.write(f) for f in files[len(outcomes) :]]
        written = [f.name for f, (created, _) in zip(files, outcomes) if created]
        foreign = [f for f, (created, _) in zip(files, outcomes) if not created]
        sizes = [size for _, size in outcomes]
        if foreign and plan.kind is CheckpointKind.CLASSIC:
            return _keep_existing(plan, storage, waited_ms, lost=foreign[0].name)
        if foreign:
            try:
                _check_foreign_parts(storage, foreign)
            except CorruptLog as exc:
                logger.warning("%s: %s; withdrawing our parts of the set", storage.url, exc)
                storage.delete(storage.log_file(n) for n in written)
                return _keep_existing(plan, storage, waited_ms, lost=foreign[0].name)
        try:
            rows = _verify(plan, storage, foreign={f.name for f in foreign})
        except CorruptLog:
            if _is_complete(storage, plan.version, plan.files):
                raise  # ours is there and does not read back: a real failure
            # a concurrent run kept another checkpoint of this version and removed ours
            return _keep_existing(plan, storage, waited_ms, lost=plan.files[0])
        winner, removed = _settle(storage, plan.version, verified=(plan.files[0],))
        if winner is None or winner.name != plan.files[0]:
            logger.info(
                "%s: a concurrent run wrote a checkpoint of version %d that readers prefer "
                "(%s); ours is withdrawn",
                plan.table,
                plan.version,
                winner.name if winner else None,
            )
            return _keep_existing(plan, storage, waited_ms, lost=plan.files[0], removed=removed)
        hint = {
            "version": plan.version,
            "size": rows,
            "parts": plan.num_parts if plan.kind is CheckpointKind.MULTI_PART else None,
            "sizeInBytes": sum(sizes),
            "numOfAddFiles": plan.num_add_files,
        }
        schema_json = spark_schema_json(writer.schema)
        if len(json.dumps(schema_json, separators=(",", ":"))) <= CHECKPOINT_SCHEMA_MAX_CHARS:
            hint["checkpointSchema"] = schema_json
    # the rest of the broken or abandoned files at this version, now that ours reads
    storage.delete(storage.log_file(n) for n in replaces if n not in colliding)
    updated = _update_last_checkpoint(storage, plan.version, hint)
    if plan.kind is not CheckpointKind.V2:
        # a run that finished after our settling may have kept another set: name that one
        # (starting from the hint just written, if we wrote it: any rewrite reads it again)
        written_hint = parse_last_checkpoint(serialize_last_checkpoint(hint)) if updated else None
        updated = _repair_hint_for_existing(plan, storage, written_hint) or updated
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
        removed=removed,
        waited_ms=waited_ms,
    )


def _await_other_run(
    plan: CheckpointPlan, storage: Storage, wait_ms: int
) -> tuple[ExistingCheckpoints, int]:
    """What is at the plan's version now, after waiting (at most `wait_ms`) while another run's
    young partial multi-part set is there and no complete checkpoint is; and how long we
    waited. A set still partial after the wait is presumed dead: ours is written (a set of the
    same part count is completed with its parts, another one stays partial and is ignored by
    readers, and removed by a later run once past the in-flight grace)."""
    began = time.monotonic()
    deadline = began + wait_ms / 1000
    waited = False
    while True:
        files = _checkpoint_files_at(storage, plan.version)
        complete = complete_checkpoints(files)
        now = clock.now_ms()
        busy = [p for p in _partial_sets(files, complete).values() if _young(p, now)]
        remaining = deadline - time.monotonic()
        if complete or not busy or remaining <= 0:
            break
        if not waited:
            logger.info(
                "%s: another run is writing a checkpoint of version %d (%s); waiting up to %d ms",
                plan.table,
                plan.version,
                busy[0][0].name,
                wait_ms,
            )
            waited = True
        time.sleep(min(IN_PROGRESS_POLL_MS / 1000, remaining))
    waited_ms = int((time.monotonic() - began) * 1000) if waited else 0
    existing = _existing_checkpoints(storage, plan.version, clock.now_ms(), files)
    if waited and existing.readable is None and existing.in_progress:
        logger.warning(
            "%s: the checkpoint being written at version %d (%s) is still incomplete after "
            "%d ms; its writer is presumed dead: writing ours",
            plan.table,
            plan.version,
            existing.in_progress[0],
            waited_ms,
        )
    return existing, waited_ms


def _settle(
    storage: Storage, version: int, verified: Collection[str] = ()
) -> tuple[CheckpointRef | None, tuple[str, ...]]:
    """Leave one complete classic or multi-part checkpoint at `version`: the one Delta Spark
    reads (`CheckpointRef.sort_key`: multi-part over classic, more parts first) among those
    that read (`verified` names ones known to), and delete those ranked below it. Returns it
    and the names deleted.

    Every run that sees two complete sets settles them the same way, whoever wrote them: a run
    that finished first cannot see a set that completes after it, so the later one settles. A
    better-ranked checkpoint that does not read is left alone (a transient read error must not
    make two runs delete each other's); V2 checkpoints are not touched.
    """
    refs = [
        r
        for r in complete_checkpoints(_checkpoint_files_at(storage, version))
        if r.kind in V1_KINDS
    ]
    if len(refs) < 2:
        return (refs[0] if refs else None), ()  # nothing to settle (the caller verifies it)
    winner = None
    for ref in reversed(refs):
        if ref.name in verified:
            winner = ref
            break
        try:
            verify_checkpoint(storage, list(ref.files))
        except CorruptLog as exc:
            logger.warning("%s: checkpoint %s is unreadable (%s)", storage.url, ref.name, exc)
            continue
        winner = ref
        break
    if winner is None:
        return None, ()
    doomed = tuple(f.name for r in refs if r.sort_key < winner.sort_key for f in r.files)
    if doomed:
        logger.info(
            "%s: %d complete checkpoints at version %d; keeping %s, removing the others",
            storage.url,
            len(refs),
            version,
            winner.name,
        )
        storage.delete(storage.log_file(n) for n in doomed)
    return winner, doomed


def _keep_existing(
    plan: CheckpointPlan,
    storage: Storage,
    waited_ms: int,
    *,
    verified: Collection[str] = (),
    lost: str | None = None,
    removed: tuple[str, ...] = (),
) -> CheckpointResult:
    """Another checkpoint of this version stands: settle the version (one complete checkpoint
    left), check the one that stands is readable and point `_last_checkpoint` at it. `lost`
    names the file another writer created first, or ours that a concurrent run withdrew; the
    other checkpoint may differ from ours (e.g. another clock expired other tombstones).
    `removed` names files the caller's settling deleted already."""
    removed += _settle(storage, plan.version, verified)[1]
    ref = _existing_ref(storage, plan.version)
    if ref is None:
        if lost is not None:
            raise CheckpointInProgress(
                f"{storage.url}: another process is writing {lost}; try again in a minute"
            )
        existing = plan.existing
    else:
        if ref.name not in verified:
            verify_checkpoint(storage, list(ref.files))
        existing = ref.name
    updated = _repair_hint_for_existing(plan, storage)
    return CheckpointResult(
        table=plan.table,
        version=plan.version,
        kind=plan.kind,
        written=(),
        skipped_existing=existing,
        num_actions=0,
        num_add_files=plan.num_add_files,
        size_in_bytes=0,
        last_checkpoint_updated=updated,
        removed=removed,
        waited_ms=waited_ms,
    )


def _check_foreign_parts(storage: Storage, files: Sequence[CheckpointFile]) -> None:
    """Check that parts another run created under our names are parts of the same set: every
    file action in part `i` of `n` is on a path of that part (`part_of_paths`, as we
    partition), and the non-file actions are all in part 1. A run of delta-ops at the same
    version writes exactly that (its tombstones may differ if its clock expired others: each
    path's tombstone is then one run's valid choice); another writer's partitioning would
    lose or double actions in a mixed set. Raises CorruptLog naming the first misfit."""
    for file in files:
        if file.part is None:
            continue
        index, count = file.part
        try:
            with storage.open_input(storage.log_file(file.name)) as handle:
                pf = pq.ParquetFile(handle)
                names = pf.schema_arrow.names
                file_kinds = [c for c in ("add", "remove") if c in names]
                non_file = [c for c in ("protocol", "metaData") if c in names]
                table = pf.read(columns=[f"{c}.path" for c in file_kinds] + non_file)
        except (pa.ArrowException, OSError) as exc:
            raise CorruptLog(file.name, f"unreadable checkpoint parquet: {exc}") from exc
        for kind in file_kinds:
            paths = pc.struct_field(table.column(kind), "path").drop_null()
            if len(paths) and bool((part_of_paths(paths, count) != index).any()):
                raise CorruptLog(
                    file.name, f"holds {kind} actions of other parts: not part of our set"
                )
        expected = 1 if index == 0 else 0
        for kind in ("protocol", "metaData"):
            column = table.column(kind) if kind in non_file else None
            found = len(column) - column.null_count if column is not None else 0
            if found != expected:
                raise CorruptLog(
                    file.name, f"holds {found} {kind} actions, {expected} expected in this part"
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
    if plan.kind is CheckpointKind.V2:
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
    now = clock.now_ms()
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


def _verify(plan: CheckpointPlan, storage: Storage, foreign: Collection[str] = ()) -> int:
    """Read the written files back: every row is one action; add and remove counts match.
    With parts another run wrote (`foreign`), only the adds must match (its clock may have
    expired other tombstones). Returns the number of actions read back."""
    totals = {"add": 0, "remove": 0, "rows": 0}
    for name in plan.files:
        counts = _count_actions(storage, name)
        for key in ("add", "remove"):
            totals[key] += counts.get(key, 0)
        totals["rows"] += counts.get("rows", sum(counts.values()))
    expected_rows = plan.state.num_actions + (
        1 + plan.num_parts if plan.kind is CheckpointKind.V2 else 0
    )
    problems = []
    if totals["add"] != plan.num_add_files:
        problems.append(f"{totals['add']} adds read back, {plan.num_add_files} expected")
    if totals["remove"] != plan.num_tombstones and not foreign:
        problems.append(f"{totals['remove']} removes read back, {plan.num_tombstones} expected")
    if totals["rows"] != expected_rows and not foreign:
        problems.append(f"{totals['rows']} actions read back, {expected_rows} expected")
    if problems:
        raise CorruptLog(plan.files[-1], "checkpoint verification failed: " + "; ".join(problems))
    return totals["rows"]


def _existing_ref(storage: Storage, version: int) -> CheckpointRef | None:
    refs = complete_checkpoints(_checkpoint_files_at(storage, version))  # all at `version`
    return refs[-1] if refs else None


def _is_complete(storage: Storage, version: int, names: Sequence[str]) -> bool:
    """Whether the checkpoint made of `names` is complete at `version` right now."""
    wanted = set(names)
    files = _checkpoint_files_at(storage, version)
    return any({f.name for f in ref.files} == wanted for ref in complete_checkpoints(files))


def _hint_names(info: LastCheckpointInfo, ref: CheckpointRef) -> bool:
    """Whether `_last_checkpoint` (at `ref`'s version) describes `ref`: its part count, as a
    reader that lists the version checks it against the parts it finds."""
    if ref.kind is LogFileKind.MULTI_PART_CHECKPOINT:
        return info.parts == len(ref.files)
    if ref.kind is LogFileKind.CLASSIC_CHECKPOINT:
        return info.parts in (None, 1) and info.v2_checkpoint_path is None
    return info.parts in (None, 1)


def _repair_hint_for_existing(
    plan: CheckpointPlan, storage: Storage, current: LastCheckpointInfo | None = None
) -> bool:
    """Point `_last_checkpoint` at the checkpoint of the plan's version when it names an older
    one or none (a run that crashed after writing the checkpoint, or another writer's
    checkpoint), or this version with another part count (a set a concurrent run removed).
    `current` is the hint as this run just wrote it (else it is read); the write, if one is
    needed, reads it again."""
    if current is None:
        current = read_last_checkpoint(storage).info
    if (
        current is not None
        and current.version > plan.version
        and _existing_ref(storage, current.version) is not None
    ):
        return False
    ref = _existing_ref(storage, plan.version)
    if ref is None:
        return False
    if current is not None and current.version == plan.version and _hint_names(current, ref):
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
                "%s: _last_checkpoint names version %d, newer than %d: left as is",
                storage.url,
                current.version,
                version,
            )
            return False
        logger.warning(
            "%s: _last_checkpoint names version %d, which has no checkpoint: repairing it",
            storage.url,
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
    wait_ms: int | None = None,
) -> CheckpointResult:
    """Plan and execute a checkpoint in one call, for Python callers (the CLI and Dagster go
    through `delta_ops.ops.checkpoint.OPERATION`): the file state streams from the table's latest
    checkpoint when that is big. `wait_ms` bounds
    the wait for another run's checkpoint of the same version (`execute_checkpoint`)."""
    loaded = load_for_checkpoint(table, version, storage_options=storage_options)
    plan = plan_checkpoint(loaded, clock.now_ms() if now_ms is None else now_ms, parts=parts)
    return execute_checkpoint(plan, wait_ms=wait_ms)
