"""A table's file state streamed from its checkpoint, for tables too big to hold in memory.

A checkpoint is already reconciled: every file key (path, deletion-vector id) appears in it once.
The state at the segment's version is therefore the checkpoint's file actions whose key no later
commit mentions, followed by the winning file actions of the commits after it. Those commits and
every non-file action (protocol, metaData, txn, domainMetadata) are small and reconciled in memory
(`delta_ops.log.replay.reconcile`); the checkpoint's file actions (its parts, or a V2
checkpoint's top-level file and sidecars) are read in batches of bounded size, projecting only the
fields the caller asks for. Memory is one row group plus the commits after the checkpoint,
whatever the table's size: this is how a checkpoint of a ten-million-file table is written.

The stream is cut into units (a row group of a checkpoint file; the commits' winners last), so
that parallel writers (Spark tasks) can each read only the units their share of it needs, and
a StreamedState pickles by its table's location.

For example:

    state = stream_state(storage, segment)
    for unit, adds, tombstones in state.file_batches(("size",), ("deletionTimestamp",)):
        ...
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from delta_ops.log.actions import (
    FILE_ACTION_SCHEMA,
    ActionSource,
    concat_batches,
    file_action_keys,
    materialize_file_actions,
    normalize_actions,
    to_bool_numpy,
)
from delta_ops.log.reader import (
    checkpoint_file_names,
    checkpoint_group_batches,
    checkpoint_row_groups,
    non_file_action_rows,
    read_commits,
)
from delta_ops.log.replay import ReconciledState, reconcile
from delta_ops.log.segment import CheckpointRef, LogSegment
from delta_ops.storage import Storage

#: rows per batch read from a checkpoint file (a batch of adds with stats is tens of MB)
STREAM_BATCH_ROWS = 65_536
_NON_FILE_COLUMNS = {
    "protocol": None,
    "metaData": None,
    "txn": None,
    "domainMetadata": None,
    "rowIdHighWaterMark": None,
}
_KEY_FIELDS = ("path", "deletionVector")  # what a file action's key is computed from


#: a piece of the file-action stream: (file under `_delta_log`, row group); the commits'
#: winners after the checkpoint are the last piece, `COMMITS_UNIT`
Unit = tuple[str, int]
COMMITS_UNIT: Unit = ("", 0)


@dataclass
class StreamedState:
    """The state of `segment`'s version with the checkpoint's file actions left on storage.
    It pickles (to Spark executors) by location, reopening its storage where it lands.

    Attributes:
        replayed: the reconciled non-file actions of the checkpoint and the commits after it;
            its `files` and `tombstones` are the winning file actions of those commits only.
        overridden: the keys (see `file_keys`) of every file action in those commits;
            checkpoint rows with these keys are superseded.
    """

    storage: Storage
    segment: LogSegment
    replayed: ReconciledState
    overridden: pa.Array

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        storage = state.pop("storage")
        assert isinstance(storage, Storage)
        state["_location"] = (storage.location, dict(storage.options))
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        location, options = state.pop("_location")
        self.__dict__.update(state)
        self.storage = Storage.open(str(location), options or None)

    def _checkpoint(self) -> CheckpointRef:
        assert self.segment.checkpoint is not None
        return self.segment.checkpoint

    def units(self) -> list[Unit]:
        """The stream's pieces in order: every row group of every checkpoint file (from the
        footers), then the commits' winners."""
        return [
            (name, group)
            for name in checkpoint_file_names(self.storage, self._checkpoint().files)
            for group in range(checkpoint_row_groups(self.storage, name))
        ] + [COMMITS_UNIT]

    def file_batches(
        self,
        add_fields: Sequence[str],
        remove_fields: Sequence[str],
        *,
        units: Sequence[Unit] | None = None,
        batch_rows: int | None = None,
    ) -> Iterator[tuple[Unit, pa.Table, pa.Table]]:
        """Live files and tombstones as flat tables (the named fields, FILE_ACTION_SCHEMA
        types, plus `version`), each with the unit it came from: the checkpoint's surviving
        rows a batch at a time, then the commits' winners; only `units` when given. Raises
        CorruptLog naming a checkpoint file that cannot be read."""
        wanted = {
            "add": tuple(dict.fromkeys([*_KEY_FIELDS, *add_fields])),
            "remove": tuple(dict.fromkeys([*_KEY_FIELDS, *remove_fields])),
        }
        add_columns, remove_columns = tuple(add_fields), tuple(remove_fields)
        batch_rows = batch_rows or STREAM_BATCH_ROWS
        assert self.segment.checkpoint is not None
        version = self.segment.checkpoint.version
        # consecutive units of one file are read with one open (one footer parse)
        for name, run in itertools.groupby(
            self.units() if units is None else units, key=lambda unit: unit[0]
        ):
            if name == COMMITS_UNIT[0]:
                yield (
                    COMMITS_UNIT,
                    _select(self.replayed.files, add_columns),
                    _select(self.replayed.tombstones, remove_columns),
                )
                continue
            groups = [group for _, group in run]
            for group, table in checkpoint_group_batches(
                self.storage, name, wanted, batch_rows, groups
            ):
                if not any(c in table.column_names for c in ("add", "remove")):
                    continue
                source = ActionSource(table, np.full(table.num_rows, version, dtype=np.int64))
                path, dv_id, is_add = file_action_keys(source)
                keep = to_bool_numpy(pc.is_valid(path))
                if len(self.overridden):
                    keep &= ~to_bool_numpy(
                        pc.is_in(file_keys(path, dv_id), value_set=self.overridden)
                    )
                adds = to_bool_numpy(is_add)
                yield (
                    (name, group),
                    materialize_file_actions(source, "add", keep & adds, add_columns),
                    materialize_file_actions(source, "remove", keep & ~adds, remove_columns),
                )


def file_keys(paths: pa.Array, dv_ids: pa.Array) -> pa.Array:
    """One string per file action naming its reconciliation key (path and deletion-vector id;
    the separator cannot occur in either)."""
    return pc.binary_join_element_wise(paths, pc.fill_null(dv_ids, ""), "\x00")


def _select(table: pa.Table, columns: tuple[str, ...]) -> pa.Table:
    out = {}
    for name in (*columns, "version"):
        if name in table.column_names:
            out[name] = table.column(name)
        elif FILE_ACTION_SCHEMA.get_field_index(name) >= 0:
            out[name] = pa.nulls(table.num_rows, FILE_ACTION_SCHEMA.field(name).type)
    return pa.table(out)


def stream_state(storage: Storage, segment: LogSegment) -> StreamedState:
    """Read what a streamed state needs in memory: the checkpoint's non-file actions (only
    those columns, a batch at a time) and the commits after it, reconciled.

    The segment must start from a checkpoint. Raises CorruptLog naming an unreadable file.
    """
    checkpoint = segment.checkpoint
    if checkpoint is None:
        raise ValueError("a streamed state starts from a checkpoint")
    batches = []
    seq = 0
    for f in checkpoint.files:  # sidecars hold only file actions
        for rows in non_file_action_rows(storage, f.name, _NON_FILE_COLUMNS):
            versions = np.full(rows.num_rows, checkpoint.version, dtype=np.int64)
            batches.append(normalize_actions(rows, versions=versions, seq_start=seq))
            seq += rows.num_rows
    commits = read_commits(storage, segment.commits, seq_start=seq)
    batches.append(commits.batch)
    replayed = reconcile(concat_batches(batches))
    keys = [file_action_keys(src) for src in commits.batch.sources]
    overridden = (
        pc.unique(pa.concat_arrays([_combined(file_keys(p, d)).drop_null() for p, d, _ in keys]))
        if keys
        else pa.array([], pa.string())
    )
    return StreamedState(storage, segment, replayed, overridden)


def _combined(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    return values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
