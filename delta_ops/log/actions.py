"""Log actions as Arrow: the canonical columnar form every log file is normalized into.

Commits (JSON) and checkpoints (parquet, V1 or V2) arrive with different physical layouts:
JSON objects such as `partitionValues` parse as Arrow structs, checkpoints store them as maps,
writers disagree on field order and on optional fields. `normalize_actions` turns any of
them into an `ActionBatch`:

* ``sources``: the parsed rows themselves (one `ActionSource` per parse), kept as they are
  so that file actions are copied only once, after reconciliation has picked the winners;
* the few non-file actions (protocol, metaData, txn, domainMetadata, the draft
  `rowIdHighWaterMark`, V2 `sidecar` / `checkpointMetadata`) in small tables or lists.

No Python object is created per file action.

For example:

    batch = normalize_actions(table_parsed_from_json, versions=version_per_row, seq_start=0)
    keys = file_action_keys(batch.sources[0])
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from delta_ops.protocol.deletion_vectors import dv_unique_ids

STRING_MAP = pa.map_(pa.string(), pa.string())

# Parsed log data and the reconciled state are allocated from the system allocator: it gives
# the JSON parser's large scratch buffers back to the OS, where pyarrow's default mimalloc pool
# keeps them, which would make peak memory grow with log size (measured in BENCHMARKS.md).
LOG_MEMORY_POOL = pa.system_memory_pool()


def release_scratch_memory() -> None:
    """Return the freed scratch memory of a log read to the OS (`malloc_trim` under the
    system allocator). Parsing leaves free holes in the heap that the allocator keeps; handing
    them back between the steps of a load keeps the next step from stacking its peak on top
    of them (a 300k-file load peaks ~30 MB lower, for a few milliseconds)."""
    LOG_MEMORY_POOL.release_unused()


def with_shared_null_columns(table: pa.Table) -> pa.Table:
    """`table` with the columns that are null in every row rebuilt over one shared zeroed
    buffer: equal values and types, less memory. A log's file state has several such columns
    on most tables (deletion vectors, row ids, tags, clustering), and a struct column of them
    otherwise holds a buffer per field: ~25 bytes a file of the file index. They are the
    fields of one null struct (`pa.nulls` gives all of a type's parts one buffer), not a
    buffer each: 10M files held 5 of 80 MB, and the load's peak all of them next to the
    columns they replace."""
    nulls = [
        index
        for index, name in enumerate(table.column_names)
        if len(column := table.column(name))
        and column.null_count == len(column)
        and column.num_chunks
    ]
    if not nulls:
        return table
    shared = pa.nulls(
        table.num_rows, pa.struct([pa.field(f"c{i}", table.field(i).type) for i in nulls])
    )
    for position, index in enumerate(nulls):
        table = table.set_column(index, table.field(index), shared.field(position))
    return table


class SharedArrays:
    """All-null arrays of any type, and int64 arrays of one repeated value, each a slice of one
    array of its type (or value; `pa.nulls` gives all of a type's parts one buffer). A
    checkpoint read a row group at a time builds the all-null fields of its file actions (tags,
    deletion vectors, row ids, clustering, on most tables) from one, not a buffer per field and
    row group as decoded (10M files: ~0.55 GB of nulls, a third of the load's peak); so does the
    replay for the fields it copies out of them, and for the version of a checkpoint's rows."""

    def __init__(self, rows: int = 0) -> None:
        self._rows = rows  # the length to allocate at least (e.g. a file's largest row group)
        self._arrays: dict[pa.DataType, pa.Array] = {}
        self._repeated: dict[int, pa.Array] = {}

    def reserve(self, rows: int) -> None:
        """Allocate at least `rows` rows from now on (arrays made before are kept while
        they are long enough)."""
        self._rows = max(self._rows, rows)

    def __call__(self, length: int, typ: pa.DataType) -> pa.Array:
        """An all-null array of `length` rows and type `typ`."""
        held = self._arrays.get(typ)
        if held is None or len(held) < length:
            held = self._arrays[typ] = pa.nulls(max(length, self._rows), typ)
        return held.slice(0, length)

    def repeated(self, value: int, length: int) -> pa.Array:
        """An int64 array of `length` rows, each `value`."""
        held = self._repeated.get(value)
        if held is None or len(held) < length:
            rows = max(length, self._rows)
            held = self._repeated[value] = from_numpy(np.full(rows, value, dtype=np.int64))
        return held.slice(0, length)

    def shared(self, values: pa.Array) -> pa.Array:
        """`values` itself, or an equal shared array when every value is null."""
        if len(values) and values.null_count == len(values):
            return self(len(values), values.type)
        return values


DELETION_VECTOR_TYPE = pa.struct(
    [
        ("storageType", pa.string()),
        ("pathOrInlineDv", pa.string()),
        ("offset", pa.int32()),
        ("sizeInBytes", pa.int32()),
        ("cardinality", pa.int64()),
        ("maxRowIndex", pa.int64()),
    ]
)

# The types of the flat columns of a snapshot's files and tombstones tables (each table has
# the subset its action carries, see ADD_FIELDS / REMOVE_FIELDS); `version` is the commit (or
# checkpoint) version that carried the winning action.
FILE_ACTION_SCHEMA = pa.schema(
    [
        ("path", pa.string()),
        ("version", pa.int64()),
        ("partitionValues", STRING_MAP),
        ("size", pa.int64()),
        ("modificationTime", pa.int64()),
        ("dataChange", pa.bool_()),
        ("stats", pa.string()),
        ("tags", STRING_MAP),
        ("deletionVector", DELETION_VECTOR_TYPE),
        ("baseRowId", pa.int64()),
        ("defaultRowCommitVersion", pa.int64()),
        ("clusteringProvider", pa.string()),
        ("deletionTimestamp", pa.int64()),
        ("extendedFileMetadata", pa.bool_()),
    ]
)

ADD_FIELDS = (
    "path",
    "partitionValues",
    "size",
    "modificationTime",
    "dataChange",
    "stats",
    "tags",
    "deletionVector",
    "baseRowId",
    "defaultRowCommitVersion",
    "clusteringProvider",
)
REMOVE_FIELDS = (
    "path",
    "deletionTimestamp",
    "dataChange",
    "extendedFileMetadata",
    "partitionValues",
    "size",
    "stats",
    "tags",
    "deletionVector",
    "baseRowId",
    "defaultRowCommitVersion",
)
MAP_FIELDS = frozenset({"partitionValues", "tags"})

_DV_JSON = pa.struct(
    [
        ("storageType", pa.string()),
        ("pathOrInlineDv", pa.string()),
        ("offset", pa.int32()),
        ("sizeInBytes", pa.int32()),
        ("cardinality", pa.int64()),
    ]
)

# Explicit schema for pyarrow's JSON reader. Map-valued objects (partitionValues, tags,
# configuration, format.options) are left out on purpose: the reader cannot produce maps, so
# they are type-inferred as structs and converted by `struct_to_map`.
COMMIT_JSON_SCHEMA = pa.schema(
    [
        (
            "add",
            pa.struct(
                [
                    ("path", pa.string()),
                    ("size", pa.int64()),
                    ("modificationTime", pa.int64()),
                    ("dataChange", pa.bool_()),
                    ("stats", pa.string()),
                    ("deletionVector", _DV_JSON),
                    ("baseRowId", pa.int64()),
                    ("defaultRowCommitVersion", pa.int64()),
                    ("clusteringProvider", pa.string()),
                ]
            ),
        ),
        (
            "remove",
            pa.struct(
                [
                    ("path", pa.string()),
                    ("deletionTimestamp", pa.int64()),
                    ("dataChange", pa.bool_()),
                    ("extendedFileMetadata", pa.bool_()),
                    ("size", pa.int64()),
                    ("stats", pa.string()),
                    ("deletionVector", _DV_JSON),
                    ("baseRowId", pa.int64()),
                    ("defaultRowCommitVersion", pa.int64()),
                ]
            ),
        ),
        (
            "metaData",
            pa.struct(
                [
                    ("id", pa.string()),
                    ("name", pa.string()),
                    ("description", pa.string()),
                    ("schemaString", pa.string()),
                    ("partitionColumns", pa.list_(pa.string())),
                    ("createdTime", pa.int64()),
                ]
            ),
        ),
        (
            "protocol",
            pa.struct(
                [
                    ("minReaderVersion", pa.int64()),
                    ("minWriterVersion", pa.int64()),
                    ("readerFeatures", pa.list_(pa.string())),
                    ("writerFeatures", pa.list_(pa.string())),
                ]
            ),
        ),
        (
            "txn",
            pa.struct(
                [("appId", pa.string()), ("version", pa.int64()), ("lastUpdated", pa.int64())]
            ),
        ),
        (
            "domainMetadata",
            pa.struct(
                [("domain", pa.string()), ("configuration", pa.string()), ("removed", pa.bool_())]
            ),
        ),
        (
            "rowIdHighWaterMark",
            pa.struct([("highWaterMark", pa.int64()), ("preservedRowIds", pa.bool_())]),
        ),
        (
            "sidecar",
            pa.struct(
                [
                    ("path", pa.string()),
                    ("sizeInBytes", pa.int64()),
                    ("modificationTime", pa.int64()),
                ]
            ),
        ),
        ("checkpointMetadata", pa.struct([("version", pa.int64())])),
        ("_v", pa.int64()),  # version marker injected by the bulk commit reader
        (
            "cdc",
            pa.struct([("path", pa.string()), ("size", pa.int64()), ("dataChange", pa.bool_())]),
        ),
    ]
)

COMMIT_INFO_JSON_SCHEMA = pa.schema(
    [("commitInfo", pa.struct([("timestamp", pa.int64()), ("inCommitTimestamp", pa.int64())]))]
)


@dataclass
class ActionSource:
    """Rows parsed from some log files, in log order, with the version of every row."""

    table: pa.Table
    versions: np.ndarray  # int64, one per row

    @property
    def num_rows(self) -> int:
        return int(self.table.num_rows)


@dataclass
class ActionBatch:
    """Actions of a run of log files in log order: parsed sources plus the non-file actions.

    `seq` numbers in the non-file lists are row positions in the concatenation of `sources`.
    """

    sources: list[ActionSource] = field(default_factory=list)
    protocols: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    metadatas: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    txns: pa.Table | None = None  # appId, version, lastUpdated, seq
    domains: pa.Table | None = None  # domain, configuration, removed, seq
    high_water_marks: list[tuple[int, int]] = field(default_factory=list)  # (seq, hwm), draft form
    sidecars: pa.Table | None = None  # path, sizeInBytes, modificationTime
    #: how many leading rows are one checkpoint, already reconciled: every file key appears
    #: in them once (the protocol's checkpoint content; delta-kernel relies on it too)
    reconciled_rows: int = 0

    @property
    def num_rows(self) -> int:
        return sum(src.num_rows for src in self.sources)


# ------------------------------------------------------------------------------- conversions
def valid_positions(arr: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Row positions where `arr` is not null, as int64."""
    return true_positions(arr.is_valid())


def true_positions(mask: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Row positions where a boolean array is true, as int64: numpy's nonzero of its
    unpacked bits (5-10 times faster than Arrow's `indices_nonzero` and its cast)."""
    positions: np.ndarray = np.flatnonzero(to_bool_numpy(mask))
    return positions


def _indices_nonzero(mask: pa.Array | pa.ChunkedArray) -> np.ndarray:
    positions: np.ndarray = pc.indices_nonzero(pc.fill_null(mask, False)).to_numpy()
    return positions.astype(np.int64, copy=False)


def to_bool_numpy(mask: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A boolean Arrow array as a numpy bool array (nulls as False): its bits unpacked, a
    byte per row (a position per true row, 8 bytes each, cost 8 times the memory)."""
    chunks = mask.chunks if isinstance(mask, pa.ChunkedArray) else [mask]
    if len(chunks) == 1:
        return _unpacked(chunks[0])
    if not chunks:
        return np.zeros(len(mask), dtype=bool)
    return np.concatenate([_unpacked(chunk) for chunk in chunks])


def _unpacked(mask: pa.Array) -> np.ndarray:
    if mask.null_count:
        mask = pc.fill_null(mask, False)
    data = mask.buffers()[1] if pa.types.is_boolean(mask.type) and len(mask) else None
    if data is None:  # empty, or not a boolean array: by the positions of its true rows
        out = np.zeros(len(mask), dtype=bool)
        out[_indices_nonzero(mask)] = True
        return out
    bits = np.frombuffer(data, dtype=np.uint8)
    unpacked = np.unpackbits(bits, count=mask.offset + len(mask), bitorder="little")
    return unpacked[mask.offset :].view(np.bool_)


def from_numpy(values: np.ndarray, type: pa.DataType | None = None) -> pa.Array:
    """``pa.array(values)`` of a 1-D numpy array of numbers or booleans (sharing its buffer
    where the layout allows). pyarrow's own conversion first asks whether the array is a
    masked one, which imports numpy.ma: 10 ms of CPU in a fresh process, a twentieth of a
    small table's load."""
    values = np.ascontiguousarray(values)
    if values.dtype == np.bool_:
        bits = np.packbits(values, bitorder="little")
        array = pa.Array.from_buffers(pa.bool_(), len(values), [None, pa.py_buffer(bits)])
    else:
        dtype = pa.from_numpy_dtype(values.dtype)
        array = pa.Array.from_buffers(dtype, len(values), [None, pa.py_buffer(values)])
    return array if type is None or array.type == type else array.cast(type)


def _combine(arr: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(arr, pa.ChunkedArray):
        return arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    return arr


def struct_to_map(arr: pa.Array | pa.ChunkedArray, *, keep_null_values: bool) -> pa.Array:
    """Convert a JSON-inferred struct of string values to `map<string,string>`, vectorised.

    The JSON reader unifies object keys across rows, so a key missing from a row shows up as
    null. `keep_null_values` keeps such entries (partition values, where null is meaningful and
    every partition column is present); otherwise they are dropped (tags).
    """
    arr = _combine(arr)
    n = len(arr)
    if pa.types.is_map(arr.type):
        return arr.cast(STRING_MAP)
    if pa.types.is_null(arr.type):
        return pa.nulls(n, STRING_MAP)
    names = [arr.type.field(i).name for i in range(arr.type.num_fields)]
    k = len(names)
    mask = arr.is_null()
    if k == 0 or n == 0:
        offsets = from_numpy(np.zeros(n + 1, dtype=np.int32))
        return pa.MapArray.from_arrays(
            offsets, pa.array([], pa.string()), pa.array([], pa.string()), mask=mask
        ).cast(STRING_MAP)
    children = [pc.cast(arr.field(i), pa.string()) for i in range(k)]
    if k == 1:  # one key (most partitioned tables): the child is the items, in row order
        items = _combine(children[0])
    else:
        # interleave children row-major: item (row i, key j) = children[j][i]
        stacked = pa.concat_arrays([_combine(c) for c in children])
        order = (
            np.arange(k, dtype=np.int64)[None, :] * n + np.arange(n, dtype=np.int64)[:, None]
        ).ravel()
        items = stacked.take(from_numpy(order))
    keys = pa.array(names, pa.string()).take(from_numpy(np.tile(np.arange(k, dtype=np.int64), n)))
    if keep_null_values:
        counts = np.full(n, k, dtype=np.int64)
    else:
        valid = items.is_valid()
        keys = keys.filter(valid)
        items = items.filter(valid)
        counts = to_bool_numpy(valid).reshape(n, k).sum(axis=1)
    # rows that are null themselves contribute no entries
    row_null = to_bool_numpy(mask)
    if row_null.any():
        entry_keep = np.repeat(~row_null, counts)
        keys = keys.filter(from_numpy(entry_keep))
        items = items.filter(from_numpy(entry_keep))
        counts = np.where(row_null, 0, counts)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    return pa.MapArray.from_arrays(from_numpy(offsets), keys, items, mask=mask).cast(STRING_MAP)


def _field_or_null(struct: pa.Array, name: str, typ: pa.DataType) -> pa.Array:
    """A child of a struct array cast to `typ`, or all-null if the struct lacks it."""
    if struct.type.get_field_index(name) < 0:
        return pa.nulls(len(struct), typ)
    child = pc.struct_field(struct, name)
    if name in MAP_FIELDS:
        return struct_to_map(child, keep_null_values=(name == "partitionValues"))
    if name == "deletionVector":
        return _normalize_dv(child)
    if child.type != typ:
        child = child.cast(typ)
    return child


def _normalize_dv(dv: pa.Array) -> pa.Array:
    if pa.types.is_null(dv.type):
        return pa.nulls(len(dv), DELETION_VECTOR_TYPE)
    children = [_field_or_null(dv, f.name, f.type) for f in DELETION_VECTOR_TYPE]
    return pa.StructArray.from_arrays(
        children, fields=list(DELETION_VECTOR_TYPE), mask=dv.is_null()
    )


def _struct_column(table: pa.Table, name: str) -> pa.Array | None:
    """A top-level action column as one array, or None when absent or all-null by type."""
    if name not in table.column_names or pa.types.is_null(table.schema.field(name).type):
        return None
    return _combine(table.column(name))


def file_action_keys(source: ActionSource) -> tuple[pa.Array, pa.Array, pa.Array]:
    """Per row of a source: (path, deletion-vector unique id, is_add).

    `path` is null on rows that are not file actions.
    """
    n = source.num_rows
    paths, dv_ids, valid = [], [], []
    for column in ("add", "remove"):
        struct = _struct_column(source.table, column)
        if struct is None:
            paths.append(pa.nulls(n, pa.string()))
            dv_ids.append(pa.nulls(n, pa.string()))
            valid.append(from_numpy(np.zeros(n, dtype=bool)))
            continue
        paths.append(_field_or_null(struct, "path", pa.string()))
        if struct.type.get_field_index("deletionVector") >= 0:
            dv = pc.struct_field(struct, "deletionVector")
            no_dvs = pa.types.is_null(dv.type) or dv.null_count == len(dv)
            dv_ids.append(pa.nulls(n, pa.string()) if no_dvs else dv_unique_ids(dv))
        else:
            dv_ids.append(pa.nulls(n, pa.string()))
        valid.append(struct.is_valid())
    is_add = valid[0]
    # an add's path and dv id are null where the row holds no add: without a remove in the
    # source (a checkpoint's adds, a commit of appends) they are the keys as they are
    path = paths[0] if paths[1].null_count == n else pc.if_else(is_add, paths[0], paths[1])
    dv_id = dv_ids[0] if dv_ids[1].null_count == n else pc.if_else(is_add, dv_ids[0], dv_ids[1])
    return path, dv_id, is_add


def file_action_paths(source: ActionSource) -> tuple[np.ndarray, pa.Array, pa.Array]:
    """Per row of a source: whether it is an `add`, and its `add` and `remove` paths as
    parsed (null where that action is absent; views of the parsed data, not a copy). A row's
    key path (`file_action_keys`) is its add path where it is an add, else its remove
    path: the paths of a big checkpoint can be looked up without copying them into a key
    column."""
    n = source.num_rows
    is_add = np.zeros(n, dtype=bool)
    paths = []
    for column in ("add", "remove"):
        struct = _struct_column(source.table, column)
        if struct is None:
            paths.append(pa.nulls(n, pa.string()))
            continue
        paths.append(_field_or_null(struct, "path", pa.string()))
        if column == "add":
            is_add = to_bool_numpy(struct.is_valid())
    return is_add, paths[0], paths[1]


def materialize_file_actions(
    source: ActionSource,
    column: str,
    mask: np.ndarray,
    fields: tuple[str, ...],
    shared: SharedArrays | None = None,
) -> pa.Table:
    """Flat rows (FILE_ACTION_SCHEMA columns named in `fields`, plus `version`) of the
    `add` or `remove` actions selected by a boolean row mask. A field outside that schema
    (a checkpoint's `stats_parsed`) is passed through as stored, or left out when absent.
    A field null in every selected row, and the version of rows that share one, are slices of
    `shared`'s arrays (pass one for all sources of a state)."""
    shared = shared or SharedArrays()
    struct = _struct_column(source.table, column)
    positions = np.flatnonzero(mask)
    count = len(positions)
    columns: dict[str, pa.Array | pa.ChunkedArray] = {}
    selected = None
    runs: list[tuple[int, int]] | None = None  # (offset, length) in `selected`, when sliced
    if struct is not None and count:
        first, span = int(positions[0]), int(positions[-1]) - int(positions[0]) + 1
        if span == count:  # one run of rows (a checkpoint's adds)
            selected = struct.slice(first, count)  # no copy
        else:
            runs = _runs_to_slice(positions, span)
            if runs is not None:  # a few runs (a commit's adds between marker lines)
                selected = struct.slice(first, span)
            else:
                selected = pc.filter(struct, from_numpy(mask), memory_pool=LOG_MEMORY_POOL)

    def select(values: pa.Array) -> pa.Array | pa.ChunkedArray:
        if runs is None:
            return values
        return pa.chunked_array([values.slice(start, length) for start, length in runs])

    for name in fields:
        if FILE_ACTION_SCHEMA.get_field_index(name) < 0:
            # a checkpoint-only field (stats_parsed, ...): passed through where the file has it
            if selected is not None and selected.type.get_field_index(name) >= 0:
                columns[name] = select(pc.struct_field(selected, name))
            continue
        typ = FILE_ACTION_SCHEMA.field(name).type
        if selected is None or selected.type.get_field_index(name) < 0:
            columns[name] = shared(count, typ)
        else:
            columns[name] = select(shared.shared(_field_or_null(selected, name, typ)))
    versions = source.versions
    if versions.strides == (0,) and count:  # one version for every row (a checkpoint's)
        columns["version"] = shared.repeated(int(versions[0]), count)
    else:
        columns["version"] = from_numpy(versions[mask], pa.int64())
    return pa.table(columns)


#: a selection of rows is sliced rather than copied when it is at most this many runs ...
MAX_SLICED_RUNS = 64
#: ... and covers at least this share of the rows between its first and last row, so a
#: snapshot never keeps much more of the parsed log alive than it uses
MIN_SLICED_SHARE = 0.9


def _runs_to_slice(positions: np.ndarray, span: int) -> list[tuple[int, int]] | None:
    """The runs of consecutive `positions` as (offset from the first, length), or None when
    copying the selected rows is the better choice (many runs, or many rows left out)."""
    if len(positions) < MIN_SLICED_SHARE * span:
        return None
    breaks = np.flatnonzero(np.diff(positions) != 1)
    if len(breaks) + 1 > MAX_SLICED_RUNS:
        return None
    starts = np.concatenate(([0], breaks + 1))
    stops = np.concatenate((breaks + 1, [len(positions)]))
    first = int(positions[0])
    return [
        (int(positions[start]) - first, int(stop - start)) for start, stop in zip(starts, stops)
    ]


def _non_null_rows(table: pa.Table, column: str) -> tuple[np.ndarray, pa.Array | None]:
    if column not in table.column_names:
        return np.empty(0, dtype=np.int64), None
    col = _combine(table.column(column))
    if pa.types.is_null(col.type):
        return np.empty(0, dtype=np.int64), None
    idx = valid_positions(col)
    return idx, (col.take(from_numpy(idx)) if len(idx) else None)


def _clean_mapping(value: Any) -> dict[str, str]:
    """A JSON-inferred struct (dict with None for absent keys) or a map (list of pairs) as a dict."""
    if value is None:
        return {}
    if isinstance(value, list):
        return {k: v for k, v in value if v is not None}
    return {k: v for k, v in value.items() if v is not None}


def _metadata_dicts(rows: pa.Array) -> list[dict[str, Any]]:
    out = []
    for m in rows.to_pylist():
        fmt = m.get("format") or {}
        out.append(
            {
                "id": m.get("id"),
                "name": m.get("name"),
                "description": m.get("description"),
                "format": {
                    "provider": fmt.get("provider") or "parquet",
                    "options": _clean_mapping(fmt.get("options")),
                },
                "schemaString": m.get("schemaString"),
                "partitionColumns": list(m.get("partitionColumns") or []),
                "configuration": _clean_mapping(m.get("configuration")),
                "createdTime": m.get("createdTime"),
            }
        )
    return out


def _protocol_dicts(rows: pa.Array) -> list[dict[str, Any]]:
    out = []
    for p in rows.to_pylist():
        d = {
            "minReaderVersion": p.get("minReaderVersion"),
            "minWriterVersion": p.get("minWriterVersion"),
        }
        if p.get("readerFeatures") is not None:
            d["readerFeatures"] = list(p["readerFeatures"])
        if p.get("writerFeatures") is not None:
            d["writerFeatures"] = list(p["writerFeatures"])
        out.append(d)
    return out


def _small_table(
    rows: pa.Array | None, names: tuple[str, ...], types: tuple[pa.DataType, ...], seqs: np.ndarray
) -> pa.Table | None:
    if rows is None:
        return None
    cols = {n: _field_or_null(rows, n, t) for n, t in zip(names, types)}
    cols["seq"] = from_numpy(seqs, pa.int64())
    return pa.table(cols)


def normalize_actions(table: pa.Table, *, versions: np.ndarray, seq_start: int) -> ActionBatch:
    """Wrap parsed log rows (JSON commits or checkpoint parquet) as an ActionBatch.

    File actions stay in the parsed table (see `file_action_keys`); the few non-file
    actions are extracted here.

    Args:
        table: one row per action, with top-level columns named after the action types.
        versions: the log version of each row (int64 array of the table's length).
        seq_start: the position of the first row in the whole log segment.
    """
    versions = np.asarray(versions, dtype=np.int64)
    # one source per record batch: the JSON reader returns many chunks, and combining them
    # would copy every action once more
    sources, offset = [], 0
    for record_batch in table.to_batches():
        length = record_batch.num_rows
        sources.append(
            ActionSource(pa.Table.from_batches([record_batch]), versions[offset : offset + length])
        )
        offset += length
    batch = ActionBatch(sources=sources)
    idx, rows = _non_null_rows(table, "protocol")
    if rows is not None:
        batch.protocols = list(zip((seq_start + idx).tolist(), _protocol_dicts(rows)))
    idx, rows = _non_null_rows(table, "metaData")
    if rows is not None:
        batch.metadatas = list(zip((seq_start + idx).tolist(), _metadata_dicts(rows)))
    idx, rows = _non_null_rows(table, "txn")
    batch.txns = _small_table(
        rows,
        ("appId", "version", "lastUpdated"),
        (pa.string(), pa.int64(), pa.int64()),
        seq_start + idx,
    )
    idx, rows = _non_null_rows(table, "domainMetadata")
    batch.domains = _small_table(
        rows,
        ("domain", "configuration", "removed"),
        (pa.string(), pa.string(), pa.bool_()),
        seq_start + idx,
    )
    idx, rows = _non_null_rows(table, "rowIdHighWaterMark")
    if rows is not None:
        hwm = _field_or_null(rows, "highWaterMark", pa.int64()).to_pylist()
        batch.high_water_marks = [
            (s, h) for s, h in zip((seq_start + idx).tolist(), hwm) if h is not None
        ]
    idx, rows = _non_null_rows(table, "sidecar")
    if rows is not None:
        batch.sidecars = pa.table(
            {
                "path": _field_or_null(rows, "path", pa.string()),
                "sizeInBytes": _field_or_null(rows, "sizeInBytes", pa.int64()),
                "modificationTime": _field_or_null(rows, "modificationTime", pa.int64()),
            }
        )
    return batch


def concat_batches(batches: list[ActionBatch]) -> ActionBatch:
    """Concatenate batches that were normalized with consecutive `seq` ranges."""

    def cat(tables: list[pa.Table | None]) -> pa.Table | None:
        present = [t for t in tables if t is not None and t.num_rows]
        return pa.concat_tables(present) if present else None

    return ActionBatch(
        sources=[src for b in batches for src in b.sources],
        protocols=[p for b in batches for p in b.protocols],
        metadatas=[m for b in batches for m in b.metadatas],
        txns=cat([b.txns for b in batches]),
        domains=cat([b.domains for b in batches]),
        high_water_marks=[h for b in batches for h in b.high_water_marks],
        sidecars=cat([b.sidecars for b in batches]),
    )


_MAP_COLUMNS = ("partitionValues", "tags")


def deletion_vector_in_log(descriptor: Mapping[str, Any]) -> dict[str, Any]:
    """A deletion vector descriptor (a row of the files table's struct) as the log carries it:
    its set fields, without the transient `maxRowIndex`."""
    return {k: v for k, v in descriptor.items() if v is not None and k != "maxRowIndex"}


def file_rows_as_actions(files: pa.Table, *, columns: tuple[str, ...]) -> list[dict[str, Any]]:
    """Rows of a snapshot's files/tombstones table as action bodies for a new commit.

    Maps (lists of pairs in Arrow) become dicts, absent optional fields are left out, and the
    deletion vector keeps only the fields the log carries (no transient maxRowIndex). Used when
    an operation re-commits existing files (row-tracking backfill, overwrite removes).
    """
    present: list[str] = []
    values_by_column: list[list[Any]] = []
    for key in columns:
        if key not in files.column_names:
            continue
        column = files.column(key)
        if column.null_count == len(column) and key != "partitionValues":
            continue  # absent in every row: left out of every body
        values: list[Any] = column.to_pylist()
        if key == "partitionValues":
            values = [{} if v is None else dict(v) for v in values]
        elif key in _MAP_COLUMNS:
            values = [None if v is None else dict(v) for v in values]
        elif key == "deletionVector":
            values = [None if v is None else deletion_vector_in_log(v) for v in values]
        present.append(key)
        values_by_column.append(values)
    if not present:
        return [{} for _ in range(files.num_rows)]
    return [
        {key: value for key, value in zip(present, row) if value is not None}
        for row in zip(*values_by_column)
    ]


def _kept_entries(column: pa.MapArray, wanted: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """Per entry of a map column's rows: whether it stays (a value, or a key in `wanted`),
    and the column's offsets. Offsets index the (unsliced) key/item children; slicing the
    children by them gives the entries of exactly these rows."""
    offsets = column.offsets.to_numpy().astype(np.int64)
    start, end = int(offsets[0]), int(offsets[-1])
    keys, items = column.keys.slice(start, end - start), column.items.slice(start, end - start)
    return pc.or_(pc.is_valid(items), pc.is_in(keys, value_set=wanted)), offsets


def _keeps_every_entry(column: pa.MapArray, wanted: pa.Array) -> bool:
    """Whether every entry of a map column's rows stays (see `_kept_entries`): at once
    when none is null (a checkpoint's partition values, parsed maps), which needs no lookup
    of every row's keys."""
    offsets = column.offsets
    if len(offsets) == 0:
        return True
    start, end = offsets[0].as_py(), offsets[-1].as_py()
    if column.items.slice(start, end - start).null_count == 0:
        return True
    return pc.all(_kept_entries(column, wanted)[0]).as_py() is not False


def restrict_partition_values(table: pa.Table, partition_keys: set[str]) -> pa.Table:
    """Drop `partitionValues` entries that are null and not a partition column.

    The JSON reader unifies object keys across the rows of a parse, so a row may show keys it
    never had (as null); real partition values of the table's columns may be null and stay.
    """
    if table.num_rows == 0 or "partitionValues" not in table.column_names:
        return table
    wanted = pa.array(sorted(partition_keys), pa.string())
    values = table.column("partitionValues")
    chunks = values.chunks if isinstance(values, pa.ChunkedArray) else [values]
    # chunk by chunk: a file state read from a checkpoint is one chunk per row group, and
    # combining them only to find nothing to drop copied all its partition values
    if all(_keeps_every_entry(chunk, wanted) for chunk in chunks):
        return table
    column = _combine(values)
    keep, offsets_in = _kept_entries(column, wanted)
    start, end = int(offsets_in[0]), int(offsets_in[-1])
    keys, items = column.keys.slice(start, end - start), column.items.slice(start, end - start)
    keep_np = to_bool_numpy(keep)
    parents = np.repeat(np.arange(len(column), dtype=np.int64), np.diff(offsets_in))
    counts = np.bincount(parents[keep_np], minlength=len(column))
    offsets = np.zeros(len(column) + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    restricted = pa.MapArray.from_arrays(
        from_numpy(offsets),
        keys.filter(from_numpy(keep_np)),
        items.filter(from_numpy(keep_np)),
        mask=column.is_null(),
    ).cast(STRING_MAP)
    return table.set_column(
        table.column_names.index("partitionValues"), "partitionValues", restricted
    )


def partition_groups(
    column: pa.ChunkedArray | pa.Array,
) -> tuple[np.ndarray, list[list[tuple[str, str | None]]]]:
    """Each row's group of equal partition values (the same pairs in the same order; groups
    numbered in order of first appearance), and each group's `(key, value)` pairs.

    Each pair is coded by its key's and value's positions in their dictionaries (a null
    value apart from every string) and each row by the codes of its pairs, padded to the
    longest row: equal codes are equal values, so the grouping is exact without turning
    every row into Python objects."""
    values = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    rows = len(values)
    if not pa.types.is_map(values.type):
        seen: dict[tuple[Any, ...], int] = {}
        numbered = [seen.setdefault(tuple(v) if v else (), len(seen)) for v in values.to_pylist()]
        return np.array(numbered, dtype=np.int64), [list(v) for v in seen]
    map_type = values.type
    lists = values.view(pa.list_(pa.struct([map_type.key_field, map_type.item_field])))
    pairs = pc.list_flatten(lists)
    if not len(pairs):  # no row has a value: one group, of none
        return np.zeros(rows, dtype=np.int64), [[]]
    owner = pc.list_parent_indices(lists).to_numpy().astype(np.int64, copy=False)
    keys = pc.dictionary_encode(pairs.field(0))
    items = pc.dictionary_encode(pairs.field(1))
    key_code = keys.indices.to_numpy().astype(np.int64)
    item_code = pc.fill_null(items.indices, -1).to_numpy().astype(np.int64) + 1
    codes = key_code * (len(items.dictionary) + 1) + item_code + 1  # >= 1: 0 pads a row
    lengths = np.bincount(owner, minlength=rows)
    first_pair = np.cumsum(lengths) - lengths
    signature = np.zeros((rows, int(lengths.max())), dtype=np.int64)
    signature[owner, np.arange(len(pairs)) - first_pair[owner]] = codes
    width = 8 * signature.shape[1]
    encoded = pc.dictionary_encode(
        pa.FixedSizeBinaryArray.from_buffers(
            pa.binary(width), rows, [None, pa.py_buffer(signature)]
        )
    )
    group = encoded.indices.to_numpy().astype(np.int64)
    example = np.empty(len(encoded.dictionary), dtype=np.int64)
    example[group] = np.arange(rows)  # any row of a group has its values
    return group, [values[int(row)].as_py() or [] for row in example.tolist()]
