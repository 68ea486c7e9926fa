"""The `remove` actions of live files, encoded as commit lines straight from the files table.

    removes = encode_removes(snapshot.files.filter(mask), deletion_timestamp=now, data_change=False)
    txn.add_encoded_removes(removes)        # see delta_ops.table.transaction

A rewrite of 10,000 small files commits 10,000 removes. Building a dict per file and handing it
to the JSON encoder cost more than the rest of the commit; this writes each line from the
columns (strings through the JSON module's own escaping, so the bytes are the ones
``json.dumps(action, separators=(",", ":"))`` gives). The fields, in Delta Spark's order:
``path``, ``deletionTimestamp``, ``dataChange``, ``extendedFileMetadata`` (true),
``partitionValues``, ``size``, then the carried fields that are set: the deletion vector (the
file and its DV are removed as a pair; without the transient ``maxRowIndex``), ``stats``,
``tags``, ``baseRowId`` and ``defaultRowCommitVersion``.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from json.encoder import encode_basestring_ascii as _quoted
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from delta_ops.log.actions import deletion_vector_in_log, from_numpy, partition_groups
from delta_ops.protocol.string_bytes import data_buffer

#: optional fields a remove carries over from the file's add, in the order they are written
CARRIED_FIELDS = ("deletionVector", "stats", "tags", "baseRowId", "defaultRowCommitVersion")

_ENCODE = json.JSONEncoder(separators=(",", ":")).encode


@dataclass(frozen=True)
class EncodedRemoves:
    """Remove actions ready for a commit: the removed paths (for conflict checks) and their
    lines, one per path, each ending in a newline; `keys`, where the encoder kept them, the
    removed files' `path` and `deletionVector` columns (what the commit's checksum needs of
    them, instead of parsing the lines back)."""

    paths: tuple[str, ...]
    lines: bytes
    keys: pa.Table | None = field(default=None, compare=False, repr=False)

    def __len__(self) -> int:
        return len(self.paths)


def encode_removes(
    files: pa.Table,
    *,
    deletion_timestamp: int,
    data_change: bool,
    carried: Sequence[str] = CARRIED_FIELDS,
) -> EncodedRemoves:
    """One `remove` line per row of `files` (a snapshot's files table, or rows of it), in row
    order; `carried` chooses which of CARRIED_FIELDS are copied from the add where set."""
    unknown = set(carried) - set(CARRIED_FIELDS)
    if unknown:
        raise ValueError(f"cannot carry {sorted(unknown)} into a remove; known: {CARRIED_FIELDS}")
    paths: list[str] = files.column("path").to_pylist()
    head = (
        f',"deletionTimestamp":{int(deletion_timestamp)},'
        f'"dataChange":{"true" if data_change else "false"},"extendedFileMetadata":true,'
        '"partitionValues":'
    )
    keys = files.select([c for c in ("path", "deletionVector") if c in files.column_names])
    lines = _columnar_lines(files, head, carried)
    if lines is not None:
        return EncodedRemoves(tuple(paths), lines, keys)
    partitions = _partition_values_column(files).to_pylist()
    sizes = ["null" if s is None else str(int(s)) for s in files.column("size").to_pylist()]
    extras = [_extra_field(files, name) for name in CARRIED_FIELDS if name in carried]
    present = [values for values in extras if values is not None]
    out: list[str] = []
    append = out.append
    if not present:
        for path, values, size in zip(paths, partitions, sizes, strict=True):
            append(f'{{"remove":{{"path":{_quoted(path)}{head}{values},"size":{size}}}}}\n')
    else:
        tails = ["".join(parts) for parts in zip(*present, strict=True)]
        for path, values, size, tail in zip(paths, partitions, sizes, tails, strict=True):
            append(f'{{"remove":{{"path":{_quoted(path)}{head}{values},"size":{size}{tail}}}}}\n')
    return EncodedRemoves(tuple(paths), "".join(out).encode(), keys)


#: carried fields the columnar encoding writes (the others, maps and structs, only line by line)
_COLUMNAR_CARRIED = ("stats", "baseRowId", "defaultRowCommitVersion")


def _columnar_lines(files: pa.Table, head: str, carried: Sequence[str]) -> bytes | None:
    """`encode_removes`' lines joined by Arrow, column by column, where every path and
    stats text is printable ASCII (then JSON escapes only quotes and backslashes) and no
    carried deletion vector or tag is set; None otherwise. 10,000 removes of a compaction
    took ~30 ms line by line (every path and stats text a Python string, each line formatted
    and joined), while the workers rewriting those files wait for a core."""
    rows = files.num_rows
    if not rows:
        return b""
    names = files.column_names
    for name in ("deletionVector", "tags"):
        if name in carried and name in names and files.column(name).null_count < rows:
            return None
    texts = ["path"] + (["stats"] if "stats" in carried and "stats" in names else [])
    for name in texts:
        column = files.column(name)
        printable = pc.and_(pc.string_is_ascii(column), pc.ascii_is_printable(column))
        if pc.all(printable).as_py() is False:  # (None: no text at all, nothing to escape)
            return None

    def quoted(name: str) -> pa.ChunkedArray | pa.Array:
        text = pc.cast(files.column(name), pa.large_string())
        text = pc.replace_substring(text, "\\", "\\\\")
        text = pc.replace_substring(text, '"', '\\"')
        return pc.binary_join_element_wise(_text('"'), text, _text('"'), _text(""))

    size = pc.fill_null(pc.cast(files.column("size"), pa.large_string()), "null")
    parts: list[Any] = [
        _text('{"remove":{"path":'),
        quoted("path"),
        _text(head),
        _partition_values_column(files),
        _text(',"size":'),
        size,
    ]
    for name in _COLUMNAR_CARRIED:
        if name not in carried or name not in names or files.column(name).null_count == rows:
            continue
        value = quoted(name) if name == "stats" else pc.cast(files.column(name), pa.large_string())
        field = pc.binary_join_element_wise(_text(f",{_quoted(name)}:"), value, _text(""))
        parts.append(pc.fill_null(field, _text("")))  # "" where the file has none
    parts.append(_text("}}\n"))
    lines = pc.binary_join_element_wise(*parts, _text(""))
    chunks = lines.chunks if isinstance(lines, pa.ChunkedArray) else [lines]
    # each chunk's values back to back, a view of its data: the join is the only copy
    return b"".join(memoryview(data_buffer(chunk)) for chunk in chunks if len(chunk))


def _partition_values_column(files: pa.Table) -> pa.Array:
    """Each row's partitionValues as a JSON object ({} where absent), as an Arrow column: each
    distinct map (the same pairs in the same order) encoded once, and taken for its rows
    without a Python object per row."""
    if "partitionValues" not in files.column_names:
        return pa.array(["{}"] * files.num_rows, pa.large_string())
    group, values = partition_groups(files.column("partitionValues"))
    texts = pa.array([_ENCODE(dict(pairs)) for pairs in values], pa.large_string())
    return texts.take(from_numpy(group))


@functools.cache
def _text(value: str) -> pa.Scalar:
    """`value` as a large_string scalar (made on first use: a conversion from Python loads
    pyarrow's pandas shims, start-up cost for the commands that never encode removes)."""
    return pa.scalar(value, pa.large_string())


def _extra_field(files: pa.Table, name: str) -> list[str] | None:
    """`,"name":value` for each row where the field is set ("" where not); None when no row
    has it."""
    if name not in files.column_names:
        return None
    column = files.column(name)
    if column.null_count == len(column):
        return None
    prefix = f",{_quoted(name)}:"
    values: list[Any] = column.to_pylist()
    if name == "stats":
        return ["" if v is None else prefix + _quoted(v) for v in values]
    if name in ("baseRowId", "defaultRowCommitVersion"):
        return ["" if v is None else prefix + str(int(v)) for v in values]
    if name == "tags":  # a map: Arrow gives a list of pairs
        return ["" if v is None else prefix + _ENCODE(dict(v)) for v in values]
    return ["" if v is None else prefix + _ENCODE(deletion_vector_in_log(v)) for v in values]


__all__ = ["CARRIED_FIELDS", "EncodedRemoves", "encode_removes"]
