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

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from json.encoder import encode_basestring_ascii as _quoted
from typing import Any

import pyarrow as pa

from delta_ops.log.actions import deletion_vector_in_log

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
    partitions = _partition_values_json(files)
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
    keys = files.select([c for c in ("path", "deletionVector") if c in files.column_names])
    return EncodedRemoves(tuple(paths), "".join(out).encode(), keys)


def _partition_values_json(files: pa.Table) -> list[str]:
    """Each row's partitionValues as a JSON object ({} where absent); a table's files share a
    few distinct maps, so each is encoded once."""
    if "partitionValues" not in files.column_names:
        return ["{}"] * files.num_rows
    encoded: dict[tuple[tuple[str, str | None], ...], str] = {}
    out = []
    for entries in files.column("partitionValues").to_pylist():
        key = tuple(entries) if entries else ()
        text = encoded.get(key)
        if text is None:
            text = encoded[key] = _ENCODE(dict(key))
        out.append(text)
    return out


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
