"""Action reconciliation: the table state a sequence of actions produces, vectorised.

Rules (protocol "Action Reconciliation", as Delta Spark's `InMemoryLogReplay` applies them):

* file actions are keyed by `(path, deletion vector unique id)`; the action with the highest
  `seq` (latest in the log) wins; a winning `add` is a live file, a winning `remove` a tombstone;
* protocol and metaData: the latest wins;
* txn: the latest per `appId`;
* domainMetadata: the latest per domain; `removed=true` makes it a tombstone (kept separately);
* the row-id high-water mark comes from the `delta.rowTracking` domain, or from the draft
  protocol's `rowIdHighWaterMark` action if that is the newer one.

Key columns are computed with pyarrow compute and dictionary-encoded to integers; the winner of
each key is its last occurrence (rows are in log order), found with one integer sort. The
winning rows are then copied out of the parsed sources once.

For example:

    state = reconcile(batch)
    state.files.num_rows, state.tombstones.num_rows
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from delta_ops.log.actions import (
    ADD_FIELDS,
    FILE_ACTION_SCHEMA,
    REMOVE_FIELDS,
    ActionBatch,
    ActionSource,
    SharedArrays,
    file_action_keys,
    file_action_paths,
    from_numpy,
    materialize_file_actions,
    to_bool_numpy,
    true_positions,
)

ROW_TRACKING_DOMAIN = "delta.rowTracking"

# the live-file and tombstone tables have the fields each action carries in the log
ADD_COLUMNS = ADD_FIELDS
TOMBSTONE_COLUMNS = REMOVE_FIELDS


@dataclass(frozen=True)
class DomainMetadata:
    domain: str
    configuration: str
    removed: bool = False


@dataclass(frozen=True, kw_only=True)
class Txn:
    app_id: str
    version: int
    last_updated: int | None


@dataclass
class ReconciledState:
    files: pa.Table
    tombstones: pa.Table
    protocol: dict[str, Any] | None
    metadata: dict[str, Any] | None
    txns: dict[str, Txn]
    domains: dict[str, DomainMetadata]
    removed_domains: dict[str, DomainMetadata]
    row_id_high_water_mark: int | None


def latest_per_key(table: pa.Table, keys: list[str]) -> pa.Table:
    """Rows of a small table whose `seq` is the highest among rows sharing the same key values."""
    if table.num_rows == 0:
        return table
    winners = table.group_by(keys, use_threads=False).aggregate([("seq", "max")]).column("seq_max")
    return table.filter(pc.is_in(table.column("seq"), value_set=winners))


def last_occurrence_mask(paths: pa.Array, dv_ids: pa.Array) -> np.ndarray:
    """Boolean mask of the rows that are the last occurrence of their (path, dvId) key.

    Rows with a null path (non-file actions) are never selected. The rows are put in key order
    by a stable sort, so each run of equal keys keeps log order and its last row wins: this
    holds only the row order and one copy of the paths (a hash of the keys held several times
    their size) and is faster than hashing the strings.
    """
    n = len(paths)
    mask = np.zeros(n, dtype=bool)
    file_rows = n - paths.null_count
    if file_rows == 0:
        return mask
    keys = {"path": paths}
    if dv_ids.null_count != len(dv_ids):  # without deletion vectors the path is the key
        keys["dv"] = pc.fill_null(dv_ids, "")
    table = pa.table(keys)
    order = pc.sort_indices(
        table, sort_keys=[(name, "ascending", "at_end") for name in keys]
    ).slice(0, file_rows)  # null paths sort last: they are no file action
    ordered = table.take(order)
    ends = np.ones(file_rows, dtype=bool)  # the last row of each run of equal keys
    if file_rows > 1:
        same = None
        for name in keys:
            column = _as_array(ordered.column(name))
            equal = pc.equal(column.slice(0, file_rows - 1), column.slice(1))
            same = equal if same is None else pc.and_(same, equal)
        ends[:-1] = ~to_bool_numpy(same)
    mask[order.to_numpy()[ends]] = True
    return mask


def winning_rows(paths: pa.Array, dv_ids: pa.Array, reconciled_rows: int = 0) -> np.ndarray:
    """Boolean mask of the rows whose file action wins: the last occurrence of its key.

    The first `reconciled_rows` rows are a checkpoint, whose keys are unique: such a row wins
    unless a later row has its key, so only the checkpoint rows whose path the later rows
    mention are replayed with them (a 1M-file checkpoint and a few commits replay a few keys,
    not a million).
    """
    n = len(paths)
    if reconciled_rows <= 0:
        return last_occurrence_mask(paths, dv_ids)
    winners = to_bool_numpy(pc.is_valid(paths)) if n else np.zeros(0, dtype=bool)
    if reconciled_rows >= n:
        return winners
    later = paths.slice(reconciled_rows).drop_null()
    if len(later) == 0:
        return winners
    touched = true_positions(pc.is_in(paths.slice(0, reconciled_rows), value_set=later))
    replayed = np.concatenate([touched, np.arange(reconciled_rows, n, dtype=np.int64)])
    rows = from_numpy(replayed)
    last = last_occurrence_mask(paths.take(rows), dv_ids.take(rows))
    winners[replayed] = last
    return winners


def reconcile_files(
    sources: list[ActionSource], *, reconciled_rows: int = 0
) -> tuple[pa.Table, pa.Table]:
    """The winning file actions of all sources (in log order) as (live adds, tombstones).
    The first `reconciled_rows` rows are one checkpoint (unique keys; see `winning_rows`)."""
    split = _checkpoint_sources(sources, reconciled_rows)
    if split:
        windows, add_rows = _checkpoint_winners(sources[:split], sources[split:])
    else:
        keys = [file_action_keys(src) for src in sources]
        paths = _concat_keys([k[0] for k in keys])
        dv_ids = _concat_keys([k[1] for k in keys])
        winners = winning_rows(paths, dv_ids, reconciled_rows)
        starts = np.cumsum([0] + [src.num_rows for src in sources])
        windows = [winners[start : start + src.num_rows] for start, src in zip(starts, sources)]
        add_rows = [to_bool_numpy(is_add) for _, _, is_add in keys]
    adds, tombstones = [], []
    shared = SharedArrays(max((src.num_rows for src in sources), default=0))
    for src, window, is_add in zip(sources, windows, add_rows):
        if not window.any():
            continue
        adds.append(materialize_file_actions(src, "add", window & is_add, ADD_COLUMNS, shared))
        tombstones.append(
            materialize_file_actions(src, "remove", window & ~is_add, TOMBSTONE_COLUMNS, shared)
        )
    return _concat_or_empty(adds, ADD_COLUMNS), _concat_or_empty(tombstones, TOMBSTONE_COLUMNS)


def _checkpoint_sources(sources: list[ActionSource], reconciled_rows: int) -> int:
    """How many leading sources hold exactly the checkpoint's `reconciled_rows` rows (0: none,
    or the checkpoint ends inside a source)."""
    rows = 0
    for count, src in enumerate(sources):
        if rows == reconciled_rows:
            return count
        rows += src.num_rows
    return len(sources) if rows == reconciled_rows > 0 else 0


def _checkpoint_winners(
    checkpoint: list[ActionSource], later: list[ActionSource]
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per source, which rows win and which are adds, for a checkpoint's sources followed by
    `later` ones: `winning_rows`, a checkpoint source at a time. A checkpoint row wins
    unless a later row has its key, so only the keys of the rows the later rows mention are
    kept for the replay; a checkpoint's keys are never put in one array (a million-file
    checkpoint's copy of its paths, and a second one concatenated, were the load's peak).
    The checkpoint's paths are looked up in the later ones with one hash of those (one per
    source cost a hash of 100k later paths per row group of the checkpoint: 4 of 5 of the
    replay of delta-kernel's 300k-file table from our checkpoint)."""
    later_keys = [file_action_keys(src) for src in later]
    later_paths = _concat_keys([k[0] for k in later_keys])
    later_dv_ids = _concat_keys([k[1] for k in later_keys])
    mentioned = later_paths.drop_null()
    windows: list[np.ndarray] = []
    add_rows: list[np.ndarray] = []
    probes: list[pa.Array] = []  # stored add and remove paths (views), looked up at once
    for src in checkpoint:
        is_add, add_path, remove_path = file_action_paths(src)
        add_valid, remove_valid = to_bool_numpy(add_path.is_valid()), None
        if remove_path.null_count < len(remove_path):
            remove_valid = to_bool_numpy(remove_path.is_valid())
        windows.append(add_valid if remove_valid is None else add_valid | ~is_add & remove_valid)
        add_rows.append(is_add)
        probes += [add_path, remove_path] if len(mentioned) else []
    touched: list[tuple[int, np.ndarray]] = []
    touched_paths: list[pa.Array] = []
    touched_dv_ids: list[pa.Array] = []
    if len(mentioned):
        found = true_positions(
            pc.is_in(
                pa.chunked_array([p for p in probes if p.null_count < len(p)], pa.string()),
                value_set=mentioned,
            )
        )
        offset = 0
        for index, src in enumerate(checkpoint):
            n = src.num_rows
            hits = [np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)]
            for side, probe in enumerate(probes[2 * index : 2 * index + 2]):
                if probe.null_count == len(probe):
                    continue
                lo, hi = np.searchsorted(found, [offset, offset + n])
                hits[side][found[lo:hi] - offset] = True
                offset += n
            hit = np.flatnonzero(np.where(add_rows[index], hits[0], hits[1]))
            if len(hit):
                path, dv_id, _ = file_action_keys(src)
                rows = from_numpy(hit)
                touched.append((index, hit))
                touched_paths.append(_as_array(path).take(rows))
                touched_dv_ids.append(_as_array(dv_id).take(rows))
    if not len(mentioned):  # no later file action: the checkpoint's rows all stand
        later_windows = np.zeros(len(later_paths), dtype=bool)
    else:
        last = last_occurrence_mask(
            _concat_keys([*touched_paths, later_paths]),
            _concat_keys([*touched_dv_ids, later_dv_ids]),
        )
        position = 0
        for index, hit in touched:
            windows[index][hit] = last[position : position + len(hit)]
            position += len(hit)
        later_windows = last[position:]
    starts = np.cumsum([0] + [src.num_rows for src in later])
    windows += [later_windows[start : start + src.num_rows] for start, src in zip(starts, later)]
    add_rows += [to_bool_numpy(is_add) for _, _, is_add in later_keys]
    return windows, add_rows


def _concat_keys(keys: list[pa.Array | pa.ChunkedArray]) -> pa.Array:
    """The keys as one array (one array itself: concatenating copies even one)."""
    if len(keys) == 1:
        return _as_array(keys[0])
    return pa.concat_arrays([_as_array(k) for k in keys]) if keys else pa.array([], pa.string())


def _as_array(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    """One array of the values (a single chunk itself: combining copies even one)."""
    if isinstance(values, pa.ChunkedArray):
        return values.chunk(0) if values.num_chunks == 1 else values.combine_chunks()
    return values


def _concat_or_empty(tables: list[pa.Table], columns: tuple[str, ...]) -> pa.Table:
    if tables:
        return pa.concat_tables(tables)
    fields = [FILE_ACTION_SCHEMA.field(c) for c in columns if c != "version"]
    return pa.schema([*fields, pa.field("version", pa.int64())]).empty_table()


def _latest_txns(txns: pa.Table | None) -> dict[str, Txn]:
    if txns is None or txns.num_rows == 0:
        return {}
    latest = latest_per_key(txns, ["appId"])
    return {
        r["appId"]: Txn(app_id=r["appId"], version=r["version"], last_updated=r["lastUpdated"])
        for r in latest.to_pylist()
        if r["appId"] is not None
    }


def _latest_domains(
    domains: pa.Table | None,
) -> tuple[dict[str, DomainMetadata], dict[str, DomainMetadata], int]:
    """(live domains, removed domains, seq of the row-tracking domain or -1)."""
    if domains is None or domains.num_rows == 0:
        return {}, {}, -1
    live: dict[str, DomainMetadata] = {}
    removed: dict[str, DomainMetadata] = {}
    hwm_seq = -1
    for r in latest_per_key(domains, ["domain"]).to_pylist():
        d = DomainMetadata(r["domain"], r["configuration"] or "", bool(r["removed"]))
        (removed if d.removed else live)[d.domain] = d
        if d.domain == ROW_TRACKING_DOMAIN and not d.removed:
            hwm_seq = r["seq"]
    return live, removed, hwm_seq


def high_water_mark_from_domain(domain: DomainMetadata | None) -> int | None:
    """The `rowIdHighWaterMark` of a `delta.rowTracking` domain configuration."""
    if domain is None:
        return None
    try:
        value = json.loads(domain.configuration).get("rowIdHighWaterMark")
    except (json.JSONDecodeError, AttributeError):
        return None
    return int(value) if isinstance(value, int) else None


def reconcile(batch: ActionBatch) -> ReconciledState:
    """The table state of a complete log segment's actions."""
    adds, tombstones = reconcile_files(batch.sources, reconciled_rows=batch.reconciled_rows)
    protocol = max(batch.protocols, key=lambda p: p[0])[1] if batch.protocols else None
    metadata = max(batch.metadatas, key=lambda m: m[0])[1] if batch.metadatas else None
    domains, removed_domains, domain_seq = _latest_domains(batch.domains)
    hwm = high_water_mark_from_domain(domains.get(ROW_TRACKING_DOMAIN))
    if batch.high_water_marks:
        draft_seq, draft_hwm = max(batch.high_water_marks)
        if draft_seq > domain_seq:
            hwm = draft_hwm
    return ReconciledState(
        files=adds,
        tombstones=tombstones,
        protocol=protocol,
        metadata=metadata,
        txns=_latest_txns(batch.txns),
        domains=domains,
        removed_domains=removed_domains,
        row_id_high_water_mark=hwm,
    )
