"""Reading log files into normalized Arrow action batches.

Commits are read in bulk: the bytes of consecutive commit files are concatenated (in chunks
of about 16 MB, `CHUNK_BYTES`) and each chunk is parsed by one call to pyarrow's
(multi-threaded) JSON reader; each row is attributed to its version by a version marker line
before each file. `commitInfo` lines are blanked in place first, because their free-form maps
make type inference unstable across writers; they are parsed separately for the commit
timestamps. Should the bulk parse fail, each file is parsed on its own so that the error names
the file and the line.

Checkpoints (classic, multi-part, V2 with sidecars) are read with pyarrow's parquet reader,
projecting only the fields that state reconstruction needs; a V2 checkpoint's top-level file
may be JSON, which is parsed whole.

For example:

    commits = read_commits(storage, segment.commits, seq_start=0)
"""

from __future__ import annotations

import functools
import io
import json
import logging
import posixpath
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from delta_ops.errors import CorruptLog
from delta_ops.log.actions import (
    ADD_FIELDS,
    COMMIT_INFO_JSON_SCHEMA,
    COMMIT_JSON_SCHEMA,
    DELETION_VECTOR_TYPE,
    FILE_ACTION_SCHEMA,
    LOG_MEMORY_POOL,
    REMOVE_FIELDS,
    ActionBatch,
    SharedArrays,
    concat_batches,
    normalize_actions,
    valid_positions,
)
from delta_ops.log.file_names import SIDECARS_DIR, LogFile, LogFileKind, commit_file_name
from delta_ops.storage import Storage

logger = logging.getLogger(__name__)

_PARSE = pj.ParseOptions(explicit_schema=COMMIT_JSON_SCHEMA, unexpected_field_behavior="infer")
_INFER = pj.ParseOptions()
_PARSE_COMMIT_INFO = pj.ParseOptions(
    explicit_schema=COMMIT_INFO_JSON_SCHEMA, unexpected_field_behavior="ignore"
)
_COMMIT_INFO_PREFIX = b'{"commitInfo":'
#: log bytes to parse, read into memory
_Bytes = bytes | bytearray | memoryview


@dataclass
class CommitsRead:
    """Actions of a run of commits plus per-commit timing facts."""

    batch: ActionBatch
    versions: np.ndarray  # commit versions, ascending
    in_commit_timestamps: list[int | None]  # commitInfo.inCommitTimestamp per commit
    commit_info_timestamps: list[int | None]  # commitInfo.timestamp per commit


def _blank_commit_info(buffer: bytearray, start: int, end: int) -> bytes | None:
    """Overwrite the `commitInfo` line inside `buffer[start:end]` with spaces; return the line.

    The JSON reader skips whitespace-only lines, so blanking in place avoids copying the
    commit. commitInfo is taken out of the bulk parse because its free-form maps make type
    inference unstable across writers.
    """
    idx = buffer.find(_COMMIT_INFO_PREFIX, start, end)
    if idx < 0 or (idx > start and buffer[idx - 1] != 0x0A):
        return None
    line_end = buffer.find(b"\n", idx, end)
    if line_end < 0:
        line_end = end
    line = bytes(buffer[idx:line_end])
    buffer[idx:line_end] = b" " * (line_end - idx)
    return line


# Map-valued objects, by action: their keys are only known from the data, so the JSON reader
# infers them -- and it infers ISO-date-like strings ("2023-12-29") as timestamps.
_MAP_FIELDS = {
    "add": ("partitionValues", "tags"),
    "remove": ("partitionValues", "tags"),
    "cdc": ("partitionValues", "tags"),
    "metaData": ("configuration",),
    "checkpointMetadata": ("tags",),
    "sidecar": ("tags",),
}


def _all_strings(typ: pa.DataType) -> bool:
    return pa.types.is_struct(typ) and all(
        pa.types.is_string(f.type) or pa.types.is_null(f.type) for f in typ
    )


def _string_map_schema(inferred: pa.Schema) -> pa.Schema | None:
    """An explicit schema declaring every inferred map key as string, or None if all already are.

    The first (inferring) parse discovers the keys; a second parse with this schema keeps every
    value as the exact string written in the log.
    """
    changed = False
    fields = []
    for action in COMMIT_JSON_SCHEMA:
        typ = action.type
        if action.name in _MAP_FIELDS and inferred.get_field_index(action.name) >= 0:
            seen = inferred.field(action.name).type
            extra = []
            for name in _MAP_FIELDS[action.name]:
                if pa.types.is_struct(seen) and seen.get_field_index(name) >= 0:
                    found = seen.field(name).type
                    if not _all_strings(found):
                        changed = True
                    keys = [f.name for f in found] if pa.types.is_struct(found) else []
                    extra.append(pa.field(name, pa.struct([(k, pa.string()) for k in keys])))
            typ = pa.struct(list(typ) + extra)
        if action.name == "metaData" and inferred.get_field_index("metaData") >= 0:
            seen = inferred.field("metaData").type
            if pa.types.is_struct(seen) and seen.get_field_index("format") >= 0:
                fmt = seen.field("format").type
                options = (
                    fmt.field("options").type
                    if pa.types.is_struct(fmt) and fmt.get_field_index("options") >= 0
                    else None
                )
                if options is not None and not _all_strings(options):
                    changed = True
                opts = (
                    [(k.name, pa.string()) for k in options]
                    if options is not None and pa.types.is_struct(options)
                    else []
                )
                typ = pa.struct(
                    list(typ)
                    + [
                        pa.field(
                            "format",
                            pa.struct([("provider", pa.string()), ("options", pa.struct(opts))]),
                        )
                    ]
                )
        fields.append(pa.field(action.name, typ))
    return pa.schema(fields) if changed else None


def _conformed_type(seen: pa.DataType, wanted: pa.DataType) -> pa.DataType | None:
    """The type an explicit-schema parse would give a field inferred as `seen`, or None when
    only a parse with the explicit schema can give it (e.g. a number where a string is wanted,
    a date-like string inferred as a timestamp).

    Equal types and all-null fields conform; so do structs whose known children conform (the
    missing ones become null children, unknown ones are kept as inferred) and lists of
    conforming items.
    """
    if seen == wanted or pa.types.is_null(seen):
        return wanted
    if pa.types.is_integer(seen) and pa.types.is_integer(wanted):
        return wanted  # the cast checks the range, as the explicit parse does
    if pa.types.is_struct(seen) and pa.types.is_struct(wanted):
        fields = []
        for field in wanted:
            index = seen.get_field_index(field.name)
            if index < 0:
                fields.append(field)
                continue
            child = _conformed_type(seen.field(index).type, field.type)
            if child is None:
                return None
            fields.append(pa.field(field.name, child))
        fields += [field for field in seen if wanted.get_field_index(field.name) < 0]
        return pa.struct(fields)
    if pa.types.is_list(seen) and pa.types.is_list(wanted):
        item = _conformed_type(seen.value_type, wanted.value_type)
        return None if item is None else pa.list_(wanted.value_field.with_type(item))
    return None


def _conformed_table(table: pa.Table) -> pa.Table | None:
    """A table parsed with inferred types, cast to what the explicit commit schema would have
    given, or None when only a parse with that schema can give it."""
    fields = []
    for field in table.schema:
        index = COMMIT_JSON_SCHEMA.get_field_index(field.name)
        if index < 0:
            fields.append(field)
            continue
        conformed = _conformed_type(field.type, COMMIT_JSON_SCHEMA.field(index).type)
        if conformed is None:
            return None
        fields.append(pa.field(field.name, conformed))
    target = pa.schema(fields)
    if target != table.schema:
        try:
            table = table.cast(target)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return None  # e.g. an integer out of range: the explicit parse reports it
    missing = [field for field in COMMIT_JSON_SCHEMA if field.name not in table.column_names]
    if missing:
        # the fields of one null struct: its parts share one buffer (`pa.nulls`), where a
        # column each held its own (a 100k-line commit of adds: 9 of 0.8 MB, faulted in)
        shared = pa.nulls(table.num_rows, pa.struct(missing))
        for position, field in enumerate(missing):
            table = table.append_column(field, shared.field(position))
    return table


def _parse_inferred(data: _Bytes) -> pa.Table | None:
    """Parse commits with inferred types and conform them to the commit schema, or None when
    they do not conform (the caller then parses with the explicit schema).

    An explicit schema makes pyarrow's JSON reader build every declared field of every row,
    absent or not: a log of plain adds parses about three times slower with it. Inference
    builds only what the lines hold; a cast then adds the missing fields as null children.
    Map-valued objects whose values are not all inferred as strings (date-like partition
    values) are parsed once more with their keys declared as strings, as the slow path does.
    """
    try:
        table = _read_json(data, _INFER)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return None  # a type that changed across blocks, or a malformed line: the slow path
    exact = _string_map_schema(table.schema)
    if exact is not None:
        return _read_json(
            data, pj.ParseOptions(explicit_schema=exact, unexpected_field_behavior="infer")
        )
    return _conformed_table(table)


def _parse_json(data: _Bytes, options: pj.ParseOptions) -> pa.Table:
    # the JSON reader keeps a string's bytes as they are: invalid UTF-8 in a log line is
    # ArrowInvalid here (in a key, pyarrow's decoding of the field's name raises it), which the
    # callers turn into the error naming the file and line
    try:
        table = _parse_json_as_read(data, options)
    except UnicodeDecodeError as exc:
        raise pa.ArrowInvalid(f"a key is not UTF-8: {exc}") from exc
    table.validate(full=True)
    return table


def _parse_json_as_read(data: _Bytes, options: pj.ParseOptions) -> pa.Table:
    if options is _PARSE:
        inferred = _parse_inferred(data)
        if inferred is not None:
            return inferred
    table = _read_json(data, options)
    if options is _PARSE:
        exact = _string_map_schema(table.schema)
        if exact is not None:
            table = _read_json(
                data, pj.ParseOptions(explicit_schema=exact, unexpected_field_behavior="infer")
            )
    return table


#: the JSON reader's parallel parse blocks (a block must hold the longest line). Each block
#: becomes one record batch, and each batch one source of the replay, whose per-source work
#: (selecting a source's winners field by field) is fixed: 1 MB blocks made the 55 MB log of
#: 2,000 commits 54 sources, its replay 112 ms of CPU; 2 MB blocks make it 27 and 83 ms, with
#: the same parse time. 4 MB (74 ms) raised the peak of loading delta-kernel's 300k-file
#: table (15 MB commits) by ~8 MB: the parse holds more of a big commit at once.
JSON_BLOCK_BYTES = 2 << 20


def json_block_size(data: _Bytes) -> int:
    """A block size for pyarrow's JSON reader that holds the longest line of `data`.

    The reader refuses a line longer than its block ("straddling object"); Delta engines write
    lines of many megabytes (wide schemas, huge stats). The newline positions come from numpy
    in one pass, so finding the longest line costs a scan, not a Python loop per line.
    """
    if len(data) <= JSON_BLOCK_BYTES:
        return JSON_BLOCK_BYTES
    view = np.frombuffer(data, dtype=np.uint8)
    ends = np.flatnonzero(view == 0x0A)
    bounds = np.concatenate(([-1], ends, [len(data)]))
    longest = int(np.diff(bounds).max())
    return max(JSON_BLOCK_BYTES, 1 << (longest + 1).bit_length())


def _read_json(data: _Bytes, options: pj.ParseOptions) -> pa.Table:
    def parse(block_size: int) -> pa.Table:
        return pj.read_json(
            pa.BufferReader(pa.py_buffer(data)),
            read_options=pj.ReadOptions(block_size=block_size),
            parse_options=options,
            memory_pool=LOG_MEMORY_POOL,
        )

    try:
        return parse(JSON_BLOCK_BYTES)
    except pa.ArrowInvalid as exc:
        if "straddling" not in str(exc):
            raise
        # a line longer than a block: size the blocks to the longest line and parse again
        return parse(json_block_size(data))


def _locate_json_error(name: str, content: bytes) -> CorruptLog:
    """Find the first bad line of a commit file for an error message that names it."""
    for number, line in enumerate(content.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
            return CorruptLog(name, f"malformed JSON: {_json_problem(exc)}", line=number)
        if not isinstance(value, dict):
            return CorruptLog(name, "an action line must be a JSON object", line=number)
    return CorruptLog(name, "unreadable commit file")


def _json_problem(exc: Exception) -> str:
    """What is wrong with a JSON line, in words (a RecursionError says only that Python's
    stack ran out)."""
    return "nested too deeply" if isinstance(exc, RecursionError) else str(exc)


def _parse_commit_file(name: str, content: bytes, original: bytes | None = None) -> pa.Table:
    """Parse one file's actions; errors name the line in `original` (the file as stored)."""
    try:
        return _parse_json(content, _PARSE)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        located = _locate_json_error(name, original if original is not None else content)
        if located.line is None:
            # one line, whatever the file's keys hold (Arrow's message quotes them)
            located = CorruptLog(name, f"invalid action: {' '.join(str(exc).split())}")
        raise located from exc


# Commits are parsed in chunks of about this many bytes: big enough for the JSON reader to
# use every core, small enough that the raw bytes and the parser's scratch memory stay a
# fraction of the parsed result.
CHUNK_BYTES = 16 << 20


def _chunks(commits: Sequence[LogFile], limit: int = CHUNK_BYTES) -> list[Sequence[LogFile]]:
    """Runs of consecutive commits of at most `limit` bytes each (a bigger commit alone)."""
    chunks, start, size = [], 0, 0
    for i, commit in enumerate(commits):
        if size and size + commit.size > limit:
            chunks.append(commits[start:i])
            start, size = i, 0
        size += commit.size
    if start < len(commits):
        chunks.append(commits[start:])
    return chunks


def read_commits(storage: Storage, commits: Sequence[LogFile], seq_start: int) -> CommitsRead:
    """Read commit files (ascending versions) into one batch numbered from `seq_start`.

    Commits are read into one buffer per chunk and parsed by one multi-threaded pyarrow call
    per chunk. A marker line `{"_v": N}` precedes the actions of commit N, so every parsed row
    is attributed to its version without counting lines.
    """
    versions = np.array([c.version for c in commits], dtype=np.int64)
    batches: list[ActionBatch] = []
    info_lines: list[bytes | None] = []
    seq = seq_start
    chunks = _chunks(commits)
    scratch = _ChunkBuffer(max((_buffer_bytes(chunk) for chunk in chunks), default=0))
    for index, chunk in enumerate(chunks):
        batch, infos = _read_commit_chunk(storage, chunk, seq, scratch)
        if index == len(chunks) - 1:
            scratch.release()  # no later chunk is read into it: its memory goes back now
        batches.append(batch)
        info_lines.extend(infos)
        seq += batch.num_rows
    ict, ts = _commit_timestamps(info_lines)
    batch = (
        concat_batches(batches)
        if batches
        else normalize_actions(
            pa.table({"_v": pa.array([], pa.int64())}),
            versions=np.empty(0, dtype=np.int64),
            seq_start=seq_start,
        )
    )
    return CommitsRead(
        batch=batch, versions=versions, in_commit_timestamps=ict, commit_info_timestamps=ts
    )


@dataclass
class _ChunkBuffer:
    """One buffer for the bytes of every chunk of a read, made at the first chunk that needs it,
    as big as the biggest chunk (known from the listing). A new buffer per chunk had every page
    of every chunk faulted in anew (a 16 MB chunk: 4,096 faults, ~8 ms); the parse copies what
    it keeps, so the next chunk may overwrite the bytes."""

    size: int
    buffer: bytearray | None = None

    def get(self, size: int) -> bytearray:
        """The buffer, if it holds `size` bytes; else a new one for this chunk alone."""
        if size > self.size:
            return bytearray(size)
        if self.buffer is None:
            self.buffer = bytearray(self.size)
        return self.buffer

    def release(self) -> None:
        """Let the buffer go (the next `get` makes a new one)."""
        self.buffer = None


def _read_commit_chunk(
    storage: Storage,
    commits: Sequence[LogFile],
    seq_start: int,
    scratch: _ChunkBuffer | None = None,
) -> tuple[ActionBatch, list[bytes | None]]:
    # Read into memory, never mapped: a commit truncated while mapped takes the mapping's pages
    # away (even copy-on-write ones) and the next touch kills the process with SIGBUS
    # (tests/log/test_commit_changed_while_read.py); a copy costs ~3-8 ms for a 16 MB commit.
    buffer, length, regions = _commit_buffer(storage, commits, scratch)
    info_lines = [_blank_commit_info(buffer, start, end) for start, end in regions]
    try:
        data = buffer if length == len(buffer) else memoryview(buffer)[:length]
        table = _parse_json(data, _PARSE)
        versions = _versions_from_markers(table)
        return normalize_actions(table, versions=versions, seq_start=seq_start), info_lines
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        pass  # the per-file path below names the culprit (or copes with cross-file type clashes)
    del buffer, data
    contents = storage.read_many([storage.log_file(c.name) for c in commits])
    return _read_commits_one_by_one(commits, contents, seq_start), info_lines


def _marker(version: int) -> bytes:
    return b'{"_v":%d}\n' % version


def _buffer_bytes(commits: Sequence[LogFile]) -> int:
    """The bytes `_commit_buffer` needs for local `commits` as listed (each one's
    marker, content and a newline)."""
    return sum(c.size + 1 + len(_marker(c.version)) for c in commits)


def _commit_buffer(
    storage: Storage, commits: Sequence[LogFile], scratch: _ChunkBuffer | None = None
) -> tuple[bytearray, int, list[tuple[int, int]]]:
    """All commits in one buffer, each preceded by its marker line and ended by a newline.

    Returns the buffer, how many of its leading bytes hold the commits, and the (start, end)
    byte region of each commit's content. Local commits are read into `scratch`'s buffer when
    given (its bytes past the commits are left over from an earlier chunk).
    """
    markers = [_marker(c.version) for c in commits]
    if storage.is_local:
        capacity = _buffer_bytes(commits)
        buffer = scratch.get(capacity) if scratch is not None else bytearray(capacity)
        view = memoryview(buffer)
        regions = []
        pos = 0
        log_dir = storage.log_path + "/"
        for commit, marker in zip(commits, markers):
            view[pos : pos + len(marker)] = marker
            pos += len(marker)
            start = pos
            pos += storage.read_into(
                log_dir + commit.name, view[pos : pos + commit.size + 1], commit.size
            )
            if pos > start and buffer[pos - 1] != 0x0A:
                buffer[pos] = 0x0A
                pos += 1
            regions.append((start, pos))
        view.release()
        return buffer, pos, regions
    contents = storage.read_many([storage.log_file(c.name) for c in commits])
    buffer = bytearray()
    regions = []
    for marker, content in zip(markers, contents):
        buffer += marker
        start = len(buffer)
        buffer += content
        if content and not content.endswith(b"\n"):
            buffer += b"\n"
        regions.append((start, len(buffer)))
    return buffer, len(buffer), regions


def _versions_from_markers(table: pa.Table) -> np.ndarray:
    """Forward-fill the `_v` marker column into a version per row."""
    markers = table.column("_v").combine_chunks()
    positions = valid_positions(markers)
    values = markers.drop_null().to_numpy()
    lengths = np.diff(np.append(positions, table.num_rows))
    return np.repeat(values, lengths).astype(np.int64)


def parse_commit(version: int, content: bytes) -> CommitsRead:
    """One commit's actions from its bytes, as `read_commits` reads them (a commit just
    written, whose bytes are at hand: no read)."""
    info = _blank_commit_info(bytearray(content), 0, len(content))
    commit = LogFile(commit_file_name(version), LogFileKind.COMMIT, version, len(content))
    ict, ts = _commit_timestamps([info])
    return CommitsRead(
        batch=_read_commits_one_by_one([commit], [content], seq_start=0),
        versions=np.array([version], dtype=np.int64),
        in_commit_timestamps=ict,
        commit_info_timestamps=ts,
    )


def _read_commits_one_by_one(
    commits: Sequence[LogFile], contents: list[bytes], seq_start: int
) -> ActionBatch:
    batches = []
    seq = seq_start
    for commit, content in zip(commits, contents):
        body = bytearray(content)
        _blank_commit_info(body, 0, len(body))
        if body and not body.endswith(b"\n"):
            body += b"\n"
        table = (
            _parse_commit_file(commit.name, bytes(body), content) if body.strip() else pa.table({})
        )
        batch = normalize_actions(
            table, versions=np.full(table.num_rows, commit.version, dtype=np.int64), seq_start=seq
        )
        seq += table.num_rows
        batches.append(batch)
    return concat_batches(batches)


def _commit_timestamps(info_lines: list[bytes | None]) -> tuple[list[int | None], list[int | None]]:
    present = [line for line in info_lines if line is not None]
    ict: list[int | None] = [None] * len(info_lines)
    ts: list[int | None] = [None] * len(info_lines)
    if not present:
        return ict, ts
    try:
        table = _parse_json(b"\n".join(present) + b"\n", _PARSE_COMMIT_INFO)
        infos = table.column("commitInfo").to_pylist()
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        infos = []
        for line in present:
            try:
                parsed = json.loads(line)
            except (ValueError, RecursionError):  # malformed, or nested past Python's stack
                parsed = {}
            # a commitInfo that is no object, or times that are no integers, give no time
            obj = parsed.get("commitInfo") if isinstance(parsed, dict) else None
            obj = obj if isinstance(obj, dict) else {}
            infos.append(
                {
                    k: v if isinstance(v := obj.get(k), int) and not isinstance(v, bool) else None
                    for k in ("timestamp", "inCommitTimestamp")
                }
            )
    it = iter(infos)
    for i, info_line in enumerate(info_lines):
        if info_line is not None:
            info = next(it) or {}
            ict[i] = info.get("inCommitTimestamp")
            ts[i] = info.get("timestamp")
    return ict, ts


# ------------------------------------------------------------------------------- checkpoints
_CHECKPOINT_COLUMNS = {
    "add": ADD_FIELDS,
    "remove": REMOVE_FIELDS,
    "metaData": None,
    "protocol": None,
    "txn": None,
    "domainMetadata": None,
    "sidecar": None,
    "checkpointMetadata": None,
}


def _projection(schema: pa.Schema, wanted: Mapping[str, tuple[str, ...] | None]) -> list[str]:
    """Column paths to read from a checkpoint parquet file of `schema`: whole columns, or the
    named fields of `add` / `remove` (plus `stats_parsed` where a checkpoint written with
    writeStatsAsJson=false has no `stats`)."""
    paths = []
    for column, fields in wanted.items():
        if schema.get_field_index(column) < 0:
            continue
        typ = schema.field(column).type
        if fields is None or not pa.types.is_struct(typ):
            paths.append(column)
            continue
        paths.extend(f"{column}.{f}" for f in fields if typ.get_field_index(f) >= 0)
        if (
            column == "add"
            and "stats" in fields
            and typ.get_field_index("stats") < 0
            and typ.get_field_index("stats_parsed") >= 0
        ):
            paths.append("add.stats_parsed")
    return paths


def _largest_row_group(pf: Any) -> int:
    metadata = pf.metadata
    return max((metadata.row_group(g).num_rows for g in range(metadata.num_row_groups)), default=0)


def _assemble_actions(
    read: pa.Table,
    wanted: Mapping[str, tuple[str, ...] | None],
    nulls: SharedArrays | None = None,
) -> pa.Table:
    """The action columns of projected checkpoint rows, `add` / `remove` as structs of the wanted
    fields in their order; an action is absent exactly where its required `path` is null. Their
    all-null fields are built by `nulls` (pass one for all row groups of a file to share them).
    Rows whose strings are not UTF-8 (parquet's reader keeps their bytes as they are) raise
    ArrowInvalid, which the callers report as a corrupt checkpoint naming the file."""
    read.validate(full=True)
    columns: dict[str, pa.Array] = {}
    for column, fields in wanted.items():
        if column not in read.column_names:
            continue
        chunks = read.column(column)
        # a row group reads as one chunk: use it as decoded (combining would copy every field)
        col = chunks.chunk(0) if chunks.num_chunks == 1 else chunks.combine_chunks()
        if fields is None or not pa.types.is_struct(col.type):
            columns[column] = col
            continue
        columns[column] = _conformed_file_actions(col, fields, nulls or SharedArrays())
    return pa.table(columns) if columns else pa.table({"add": pa.nulls(read.num_rows)})


def _conformed_file_actions(
    col: pa.Array, fields: tuple[str, ...], nulls: SharedArrays
) -> pa.Array:
    """`add` / `remove` structs of one checkpoint file as structs of exactly `fields`, in
    their order: a field the file's schema lacks is null (Delta Spark writes each part of a
    multi-part checkpoint, and each sidecar, with the schema of the rows in it, so one part's
    `add` may have no `stats` and another's `remove` no `deletionVector`), as is a field of a
    deletion vector it lacks. Fields outside the action schema (`stats_parsed`) are kept only
    where present. An action is absent exactly where its required `path` is null. A field null
    in every row is one of `nulls`' shared arrays (equal values, no buffer of its own)."""
    names: list[str] = []
    arrays: list[pa.Array] = []
    for name in fields:
        if col.type.get_field_index(name) >= 0:
            # struct_field, not .field(): a child under a null parent may hold a value ("")
            child = pc.struct_field(col, name)
            if name == "deletionVector":
                child = _with_all_fields(child, DELETION_VECTOR_TYPE)
            child = nulls.shared(child)
        elif name == "stats" and col.type.get_field_index("stats_parsed") >= 0:
            child = stats_json_from_parsed(pc.struct_field(col, "stats_parsed"))
        elif FILE_ACTION_SCHEMA.get_field_index(name) >= 0:
            child = nulls(len(col), FILE_ACTION_SCHEMA.field(name).type)
        else:
            continue
        names.append(name)
        arrays.append(child)
    mask = arrays[names.index("path")].is_null() if "path" in names else None
    return pa.StructArray.from_arrays(arrays, names=names, mask=mask)


def _with_all_fields(struct: pa.Array, typ: pa.StructType) -> pa.Array:
    """A struct array with every field of `typ` (those it lacks null), its own fields as stored
    and in `typ`'s order; fields `typ` does not name are dropped."""
    if pa.types.is_null(struct.type):
        return pa.nulls(len(struct), typ)
    if not pa.types.is_struct(struct.type):
        return struct
    own = struct.type
    if [own.field(i).name for i in range(own.num_fields)] == [f.name for f in typ]:
        return struct
    children = [
        pc.struct_field(struct, f.name)
        if own.get_field_index(f.name) >= 0
        else pa.nulls(len(struct), f.type)
        for f in typ
    ]
    return pa.StructArray.from_arrays(children, names=[f.name for f in typ], mask=struct.is_null())


#: the same without `add.stats`, which a snapshot load defers (most of a checkpoint's bytes)
_CHECKPOINT_COLUMNS_WITHOUT_STATS = {
    **_CHECKPOINT_COLUMNS,
    "add": tuple(f for f in ADD_FIELDS if f != "stats"),
}


def _parquet_sources(storage: Storage, paths: Sequence[str]) -> list[bytes | str]:
    """What to read each checkpoint file from: a local file by its path (Arrow then reads only
    the column chunks it decodes, not the stats it skips), any other store's whole content in
    one concurrent request per file. An empty local file is its (empty) content; a missing one
    raises FileNotFoundError, as reading it would."""
    if not storage.is_local:
        return list(storage.read_many(paths))
    sources: list[bytes | str] = []
    for path in paths:
        entry = storage.stat(path)
        if entry is None:
            raise FileNotFoundError(path)
        sources.append(path if entry.size else b"")
    return sources


#: rows per batch when reading the non-file actions of a checkpoint: they are a few rows among
#: a row group's file actions, so nearly every batch decodes a struct of nulls per field and is
#: dropped; small batches reuse the same memory (a 200k-row row group of delta-rs decoded in
#: batches of 65,536 rows faulted in 50 MB of fresh pages for them, 30% of that read's time)
NON_FILE_BATCH_ROWS = 16_384


def _read_parquet_actions(
    name: str,
    data: bytes | str,
    wanted: Mapping[str, tuple[str, ...] | None] = _CHECKPOINT_COLUMNS,
    nulls: SharedArrays | None = None,
) -> list[pa.Table]:
    """Read the action columns of a checkpoint or sidecar parquet file (its bytes, or the path
    of a local file): a table of its file actions (`add`, `remove`), then tables holding only
    the rows of its other actions.

    `add` and `remove` are projected to the fields replay needs (`wanted`), which skips
    decoding `stats_parsed` / `partitionValues_parsed`; their all-null fields are built by
    `nulls` (pass one for all files of a checkpoint to share them across its parts).
    """
    import pyarrow.parquet as pq  # only logs with checkpoints need it

    try:
        pf = pq.ParquetFile(data if isinstance(data, str) else io.BytesIO(data))
        file_actions = {c: f for c, f in wanted.items() if c in _FILE_ACTIONS}
        others = {c: f for c, f in wanted.items() if c not in _FILE_ACTIONS}
        columns = _projection(pf.schema_arrow, file_actions)
        nulls = nulls or SharedArrays()
        nulls.reserve(_largest_row_group(pf))
        absent = _absent_actions(pf)
        # a row group at a time: decoding holds one group's pages, not the whole file's
        tables = [
            _assemble_actions(
                pf.read_row_group(group, columns=_present(columns, absent[group])),
                file_actions,
                nulls,
            )
            for group in range(pf.num_row_groups)
        ] or [_assemble_actions(pf.read(columns=columns), file_actions, nulls)]
        # the other actions are a few rows, read only from the row groups that hold any
        columns = _projection(pf.schema_arrow, others)
        for group in range(pf.num_row_groups):
            if present := _present(columns, absent[group]):
                tables += _non_file_rows(pf, group, present, others)
        return tables
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise CorruptLog(name, f"unreadable checkpoint parquet: {exc}") from exc


_FILE_ACTIONS = ("add", "remove")


def _non_file_rows(
    pf: Any, group: int, columns: list[str], wanted: Mapping[str, tuple[str, ...] | None]
) -> list[pa.Table]:
    """The rows of a row group holding any of the (non-file) action `columns`, as
    `_assemble_actions` gives them. Where each action is present is read first from one
    of its fields (see `_presence_leaf`), so only the actions present are decoded, a
    batch at a time and only up to the last row holding one: a checkpoint's few rows of
    protocol and metaData among its file actions do not cost the decoding of txn, domain and
    sidecar columns of nulls (delta-rs' of 200k files: 23 -> 13 ms)."""
    leaves = [_presence_leaf(pf, column) for column in columns]
    held = pf.read_row_group(group, columns=leaves)
    needed, first, last = [], held.num_rows, -1
    for column in columns:
        action = column.partition(".")[0]
        if action not in held.column_names:
            continue
        rows = valid_positions(held.column(action))
        if len(rows):
            needed.append(column)
            first, last = min(first, int(rows[0])), max(last, int(rows[-1]))
    tables: list[pa.Table] = []
    start = 0
    if needed:
        for batch in pf.iter_batches(
            batch_size=NON_FILE_BATCH_ROWS, columns=needed, row_groups=[group]
        ):
            start += batch.num_rows
            if start <= first:
                continue  # decoded (rows are read in order), but no row holds one
            rows = rows_with_actions(_assemble_actions(pa.Table.from_batches([batch]), wanted))
            if rows.num_rows:
                tables.append(rows)
            if start > last:
                break  # no later row holds one
    return tables


def _presence_leaf(pf: Any, column: str) -> str:
    """The path of a leaf column under `column` that is cheap to decode (fixed width) and
    under no list or map: its definition levels say in which rows `column` is present, null
    values or not. `column` itself when it has no such leaf."""
    schema = pf.metadata.schema
    leaves = [
        schema.column(index)
        for index in range(len(schema))
        if schema.column(index).path.startswith(column + ".")
    ]
    flat = [leaf for leaf in leaves if leaf.max_repetition_level == 0]
    fixed = [leaf for leaf in flat if leaf.physical_type != "BYTE_ARRAY"]
    return str((fixed or flat)[0].path) if flat else column


def _absent_actions(pf: Any) -> list[set[str]]:
    """Per row group, the column paths that need no decoding, by its column chunks'
    statistics: an action column no row holds, and a field of `add` / `remove` null in every
    row that reads as null whether decoded or not.

    * `add` / `remove` where their required `path` is null in every row (a checkpoint without
      tombstones would otherwise decode a struct of nulls per field for every one of its adds);
    * any other action where every one of its fields is (a checkpoint of a million files has a
      handful of protocol, metaData, txn and domain rows, which a writer such as ours puts in
      one row group);
    * `add.<field>` / `remove.<field>` (as `add.deletionVector`) of a file-action field holding
      no list or map (an empty map's entries count as nulls too, and an empty map is not a null
      one), other than the key `path` and `stats`, where every one of its values is: most
      tables have no deletion vectors, row ids, clustering provider, and a file action with
      a field missing reads it as null (see `_conformed_file_actions`).

    A chunk without a null count is never null. Only the chunks deciding these are looked at
    (a checkpoint's `stats_parsed` has hundreds).
    """
    metadata = pf.metadata
    prunable = _prunable_fields(pf.schema_arrow)
    deciding: list[tuple[int, str]] = []  # (leaf column index, what it decides)
    schema = metadata.schema
    for index in range(metadata.num_columns):
        action, _, rest = schema.column(index).path.partition(".")
        field = rest.partition(".")[0]
        if action not in _FILE_ACTIONS or field == "path":
            deciding.append((index, action))
        elif (key := f"{action}.{field}") in prunable:
            deciding.append((index, key))
    absent = []
    for group in range(metadata.num_row_groups):
        row_group = metadata.row_group(group)
        rows = row_group.num_rows
        null_everywhere: dict[str, bool] = {}
        for index, column in deciding:
            stats = row_group.column(index).statistics
            null = stats is not None and stats.has_null_count and stats.null_count == rows
            null_everywhere[column] = null_everywhere.get(column, True) and null
        absent.append({column for column, null in null_everywhere.items() if null})
    return absent


def _prunable_fields(schema: pa.Schema) -> set[str]:
    """`add.<field>` / `remove.<field>` paths of `schema` that `_absent_actions` may
    leave undecoded when null in every row."""
    out = set()
    for action in _FILE_ACTIONS:
        if schema.get_field_index(action) < 0 or not pa.types.is_struct(schema.field(action).type):
            continue
        for field in schema.field(action).type:
            if (
                field.name not in ("path", "stats")
                and FILE_ACTION_SCHEMA.get_field_index(field.name) >= 0
                and not _holds_repeats(field.type)
            ):
                out.add(f"{action}.{field.name}")
    return out


def _holds_repeats(typ: pa.DataType) -> bool:
    """Whether a type is or holds a list or a map."""
    if pa.types.is_struct(typ):
        return any(_holds_repeats(field.type) for field in typ)
    return bool(
        pa.types.is_list(typ)
        or pa.types.is_large_list(typ)
        or pa.types.is_fixed_size_list(typ)
        or pa.types.is_map(typ)
    )


def _present(columns: list[str], absent: set[str]) -> list[str]:
    """The column paths of `columns` neither in `absent` nor under an action in it."""
    return [c for c in columns if c not in absent and c.partition(".")[0] not in absent]


def checkpoint_file_batches(
    storage: Storage,
    name: str,
    wanted: Mapping[str, tuple[str, ...] | None],
    batch_rows: int,
    row_groups: Sequence[int] | None = None,
) -> Iterator[pa.Table]:
    """The actions of one checkpoint file (a part, a V2 top-level file or a sidecar, `name`
    relative to `_delta_log`) in tables of at most `batch_rows` rows, reading only the
    `wanted` columns and fields and (for parquet) only `row_groups` when given: memory stays
    bounded by one row group whatever the file's size. A row group that holds none of the
    wanted actions by its statistics is skipped. A JSON file is parsed whole (V2 top-level
    files are small). CorruptLog names the file."""
    for _, table in checkpoint_group_batches(storage, name, wanted, batch_rows, row_groups):
        yield table


def checkpoint_group_batches(
    storage: Storage,
    name: str,
    wanted: Mapping[str, tuple[str, ...] | None],
    batch_rows: int,
    row_groups: Sequence[int] | None = None,
) -> Iterator[tuple[int, pa.Table]]:
    """`checkpoint_file_batches` with the row group each batch came from (0 for a JSON
    file); the file is opened, and its footer parsed, once."""
    import pyarrow.parquet as pq

    path = storage.log_file(name)
    try:
        if name.endswith(".json"):
            data = storage.read_bytes(path)
            if not data.strip():
                raise CorruptLog(name, "empty checkpoint file")
            table = _read_json_actions(name, data)
            yield 0, table.select([c for c in wanted if c in table.column_names])
            return
        with storage.open_input(path) as handle:
            pf = pq.ParquetFile(handle)
            columns = _projection(pf.schema_arrow, wanted)
            if not columns:
                return
            groups = range(pf.num_row_groups) if row_groups is None else row_groups
            nulls = SharedArrays()
            nulls.reserve(_largest_row_group(pf))
            absent_by_group = _absent_actions(pf)
            for group in groups:
                absent = absent_by_group[group]
                if all(c.partition(".")[0] in absent for c in columns):
                    continue  # no row of the group holds a wanted action: nothing to yield
                table = _assemble_actions(pf.read_row_group(group, columns=columns), wanted, nulls)
                for start in range(0, table.num_rows, batch_rows):
                    yield group, table.slice(start, batch_rows)
    except FileNotFoundError:
        raise CorruptLog(name, "the file is missing") from None
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise CorruptLog(name, f"unreadable checkpoint parquet: {exc}") from exc


def rows_with_actions(table: pa.Table) -> pa.Table:
    """The rows of a table of action columns where any action is present."""
    present = [table.column(c).is_valid() for c in table.column_names]
    return table.filter(functools.reduce(pc.or_, present)) if present else table.slice(0, 0)


def non_file_action_rows(
    storage: Storage, name: str, wanted: Mapping[str, tuple[str, ...] | None]
) -> Iterator[pa.Table]:
    """The rows of one checkpoint file holding any of the `wanted` (non-file) actions, read
    a batch at a time: a checkpoint of millions of files has a handful of them, and reading
    those columns whole would decode a million null structs each."""
    for table in checkpoint_file_batches(storage, name, wanted, 65_536):
        rows = rows_with_actions(table)
        if rows.num_rows:
            yield rows


def checkpoint_row_groups(storage: Storage, name: str) -> int:
    """How many row groups a checkpoint parquet file has (1 for a JSON file): its footer."""
    import pyarrow.parquet as pq

    if name.endswith(".json"):
        return 1
    try:
        with storage.open_input(storage.log_file(name)) as handle:
            return int(pq.ParquetFile(handle).num_row_groups)
    except FileNotFoundError:
        raise CorruptLog(name, "the file is missing") from None
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise CorruptLog(name, f"unreadable checkpoint parquet: {exc}") from exc


def _stats_value(value: Any) -> Any:
    import datetime as dt

    if isinstance(value, dict):
        return {k: _stats_value(v) for k, v in value.items() if v is not None}
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC)
            return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"
        return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}"
    if isinstance(value, dt.date):
        return value.isoformat()
    return value


def stats_json_from_parsed(parsed: pa.Array) -> pa.Array:
    """`stats_parsed` structs as the JSON `stats` strings Spark would have written.

    Only checkpoints written with writeStatsAsJson=false need this, so a Python pass per file
    is acceptable here.
    """
    # lazy: protocol.stats imports pyarrow.parquet, which the CLI's start does not load
    from delta_ops.protocol.stats import stats_to_json

    return pa.array(
        [None if row is None else stats_to_json(_stats_value(row)) for row in parsed.to_pylist()],
        pa.string(),
    )


def _read_json_actions(name: str, data: bytes) -> pa.Table:
    if data and not data.endswith(b"\n"):
        data += b"\n"
    return _parse_commit_file(name, data)


def _one_version(version: int, rows: int) -> np.ndarray:
    """`version` for each of `rows` rows, as a read-only view of one number (a checkpoint's
    rows share its version: 80 MB at 10M files as an array of its own, beside the version
    column the snapshot keeps)."""
    return np.broadcast_to(np.int64(version), (rows,))


@dataclass
class CheckpointRead:
    batch: ActionBatch
    files_read: list[str]


def read_checkpoint(
    storage: Storage,
    files: Sequence[LogFile],
    version: int,
    seq_start: int,
    *,
    with_stats: bool = True,
) -> CheckpointRead:
    """Read a complete checkpoint (all parts, or a V2 top-level file and its sidecars);
    without `add.stats` unless `with_stats` (a JSON V2 top-level file keeps them).

    Raises CorruptLog naming the file when any part cannot be read.
    """
    wanted = _CHECKPOINT_COLUMNS if with_stats else _CHECKPOINT_COLUMNS_WITHOUT_STATS
    names = [f.name for f in files]
    datas = _parquet_sources(storage, [storage.log_file(n) for n in names])
    nulls = SharedArrays()  # the all-null fields of every part and sidecar over one buffer
    tables = []
    for f, data in zip(files, datas):
        if not data:
            raise CorruptLog(f.name, "empty checkpoint file")
        if f.format == "json":
            if isinstance(data, str):
                data = storage.read_bytes(data)
            tables.append(_read_json_actions(f.name, data))
        else:
            tables.extend(_read_parquet_actions(f.name, data, wanted, nulls))
    batches = []
    seq = seq_start
    for t in tables:
        batches.append(
            normalize_actions(t, versions=_one_version(version, t.num_rows), seq_start=seq)
        )
        seq += t.num_rows
    batch = concat_batches(batches)
    read = list(names)
    if batch.sidecars is not None and batch.sidecars.num_rows:
        sidecar_names = [
            posixpath.basename(p) if "/" in p else p
            for p in batch.sidecars.column("path").to_pylist()
        ]
        paths = [storage.log_file(f"{SIDECARS_DIR}/{s}") for s in sidecar_names]
        try:
            sidecar_datas = _parquet_sources(storage, paths)
        except FileNotFoundError as exc:
            raise CorruptLog(names[0], f"a sidecar file it references is missing: {exc}") from exc
        side_batches = []
        for sname, data in zip(sidecar_names, sidecar_datas):
            for t in _read_parquet_actions(f"{SIDECARS_DIR}/{sname}", data, wanted, nulls):
                side_batches.append(
                    normalize_actions(t, versions=_one_version(version, t.num_rows), seq_start=seq)
                )
                seq += t.num_rows
            read.append(f"{SIDECARS_DIR}/{sname}")
        batch = concat_batches([batch, *side_batches])
    if not batch.protocols or not batch.metadatas:
        raise CorruptLog(names[0], "checkpoint lacks a protocol or metaData action")
    return CheckpointRead(batch=batch, files_read=read)


# ------------------------------------------------------------------ protocol and metadata only
def _checkpoint_columns(storage: Storage, f: LogFile, columns: Sequence[str]) -> pa.Table:
    """Some top-level action columns of one checkpoint file: only those column chunks of a
    parquet file; a JSON (V2) file parsed whole. CorruptLog names an unreadable file."""
    import pyarrow.parquet as pq

    path = storage.log_file(f.name)
    try:
        if f.format == "json":
            return _read_json_actions(f.name, storage.read_bytes(path))
        with storage.open_input(path) as handle:
            pf = pq.ParquetFile(handle)
            present = [c for c in columns if pf.schema_arrow.get_field_index(c) >= 0]
            table = pf.read(columns=present) if present else pa.table({})
            table.validate(full=True)  # strings that are not UTF-8: a corrupt checkpoint
            return table
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise CorruptLog(f.name, f"unreadable checkpoint: {exc}") from exc


_HEAD_COLUMNS: dict[str, tuple[str, ...] | None] = {"protocol": None, "metaData": None}


def read_checkpoint_head(
    storage: Storage, files: Sequence[LogFile], version: int
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The `protocol` and `metaData` actions of a checkpoint, reading nothing else.

    Parquet parts are opened and only those two columns are read, a batch at a time keeping
    their few rows; JSON V2 checkpoints are parsed whole (their top-level file holds no file
    actions when it has sidecars). Raises CorruptLog naming the file when a part cannot be read
    or neither action is found.
    """
    protocols: list[tuple[int, dict[str, Any]]] = []
    metadatas: list[tuple[int, dict[str, Any]]] = []
    for f in files:
        for table in non_file_action_rows(storage, f.name, _HEAD_COLUMNS):
            batch = normalize_actions(
                table, versions=np.full(table.num_rows, version, dtype=np.int64), seq_start=0
            )
            protocols.extend(batch.protocols)
            metadatas.extend(batch.metadatas)
    if not protocols or not metadatas:
        raise CorruptLog(files[0].name, "checkpoint lacks a protocol or metaData action")
    return max(protocols, key=lambda p: p[0])[1], max(metadatas, key=lambda m: m[0])[1]


# ------------------------------------------------------------------ checkpoint structure
def sidecar_names(storage: Storage, files: Sequence[LogFile]) -> list[str]:
    """Names (under ``_sidecars``) of the sidecar files a checkpoint references, read
    through the same decoding as the log (JSON lines or parquet structs alike)."""
    names: list[str] = []
    for f in files:
        table = _checkpoint_columns(storage, f, ("sidecar",))
        if "sidecar" not in table.column_names or not pa.types.is_struct(
            table.schema.field("sidecar").type
        ):
            continue
        column = table.column("sidecar").combine_chunks()
        paths = pc.struct_field(column.filter(column.is_valid()), "path").drop_null()
        names.extend(posixpath.basename(p) for p in paths.to_pylist())
    return names


def checkpoint_file_names(storage: Storage, files: Sequence[LogFile]) -> list[str]:
    """Every file holding a checkpoint's actions, relative to `_delta_log`: its parts (or V2
    top-level file), then each sidecar the top-level file references."""
    return [f.name for f in files] + [f"{SIDECARS_DIR}/{n}" for n in sidecar_names(storage, files)]


def verify_checkpoint(storage: Storage, files: Sequence[LogFile]) -> None:
    """Prove a checkpoint can be read without materializing it: every part's (and every
    referenced sidecar's) parquet footer parses and its `add`/`remove` paths decode; JSON
    parts parse. Raises CorruptLog naming the first file that fails."""
    import pyarrow.parquet as pq

    def check_parquet(name: str, path: str) -> None:
        try:
            with storage.open_input(path) as handle:
                pf = pq.ParquetFile(handle)
                wanted = [f"{c}.path" for c in ("add", "remove") if c in pf.schema_arrow.names]
                if wanted:
                    pf.read(columns=wanted)
        except FileNotFoundError:
            raise CorruptLog(name, "the file is missing") from None
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise CorruptLog(name, f"unreadable checkpoint parquet: {exc}") from exc

    for f in files:
        if f.format == "json":
            data = storage.read_bytes(storage.log_file(f.name))
            if not data.strip():
                raise CorruptLog(f.name, "empty checkpoint file")
            _read_json_actions(f.name, data)
        else:
            check_parquet(f.name, storage.log_file(f.name))
    for name in sidecar_names(storage, files):
        check_parquet(f"{SIDECARS_DIR}/{name}", storage.log_file(f"{SIDECARS_DIR}/{name}"))


# ------------------------------------------------------------------ small files, one action a line
def parse_action_lines(name: str, data: bytes) -> tuple[dict[str, Any], ...]:
    """The actions of a small log file (a winning commit, a V2 top-level checkpoint) as dicts,
    one per line; CorruptLog names the file and line of malformed JSON. Big logs go through
    the columnar readers above."""
    actions = []
    for number, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            action = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
            raise CorruptLog(name, f"malformed JSON: {_json_problem(exc)}", line=number) from exc
        if not isinstance(action, dict):
            raise CorruptLog(name, "an action must be a JSON object", line=number)
        actions.append(action)
    return tuple(actions)


def read_commit_actions(storage: Storage, version: int) -> tuple[dict[str, Any], ...]:
    """The actions of one commit (winners are few and small: parsed as dicts)."""
    name = commit_file_name(version)
    return parse_action_lines(name, storage.read_bytes(storage.log_file(name)))
