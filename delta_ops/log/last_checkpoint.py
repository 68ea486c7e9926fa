"""The `_last_checkpoint` hint: reading it strictly, validating and computing its checksum.

The hint names the newest checkpoint so readers can skip listing the whole log. It is only a
hint: a missing, unparsable, checksum-mismatched or stale hint must never make a table
unreadable, so `read_last_checkpoint` reports problems instead of raising and the log
segment falls back to listing (as Delta Spark does).

The checksum follows Delta Spark (`LastCheckpointInfo.treeNodeToChecksum`): flatten the JSON
tree to `path=value` strings with percent-encoded keys and string values, drop the top-level
`checksum`, sort the whole `path=value` strings, join with ``,`` and take the MD5 hex digest.

For example:

    hint = read_last_checkpoint(storage)
    if hint.info is not None:
        print(hint.info.version)
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from delta_ops.log.file_names import LAST_CHECKPOINT
from delta_ops.storage import Storage

logger = logging.getLogger(__name__)

_SAFE = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~")


def _quote(text: str) -> str:
    return '"' + "".join(chr(b) if b in _SAFE else f"%{b:02X}" for b in text.encode()) + '"'


def _flatten(node: Any, path: list[str], out: list[str]) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            _flatten(value, path + [_quote(key)], out)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            _flatten(value, path + [str(i)], out)
    else:
        joined = "+".join(path)
        if joined == '"checksum"':
            return
        if isinstance(node, str):
            value_text = _quote(node)
        elif node is None:
            value_text = "null"
        elif isinstance(node, bool):
            value_text = "true" if node else "false"
        else:
            value_text = json.dumps(node)
        out.append(f"{joined}={value_text}")


def last_checkpoint_checksum(obj: Mapping[str, Any]) -> str:
    """Spark's MD5 checksum of a `_last_checkpoint` object (its own `checksum` key excluded)."""
    # start-up cost: hashlib loads OpenSSL's library (~2.5 ms): only reading a hint that
    # carries a checksum (delta-rs writes none), or writing one, needs it
    import hashlib

    pairs: list[str] = []
    _flatten(dict(obj), [], pairs)
    return hashlib.md5(",".join(sorted(pairs)).encode()).hexdigest()


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key!r}")
        result[key] = value
    return result


@dataclass(frozen=True)
class LastCheckpointInfo:
    """The fields of `_last_checkpoint` that readers use; `raw` keeps everything as written."""

    version: int
    size: int | None = None
    parts: int | None = None
    size_in_bytes: int | None = None
    num_of_add_files: int | None = None
    v2_checkpoint_path: str | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False)

    @classmethod
    def from_json_object(cls, obj: Mapping[str, Any]) -> LastCheckpointInfo:
        version = obj.get("version")
        if not isinstance(version, int) or isinstance(version, bool) or version < 0:
            raise ValueError(f"'version' must be a non-negative integer, got {version!r}")
        v2 = obj.get("v2Checkpoint") or {}
        return cls(
            version=version,
            size=obj.get("size"),
            parts=obj.get("parts"),
            size_in_bytes=obj.get("sizeInBytes"),
            num_of_add_files=obj.get("numOfAddFiles"),
            v2_checkpoint_path=v2.get("path") if isinstance(v2, dict) else None,
            raw=dict(obj),
        )


@dataclass(frozen=True)
class LastCheckpointRead:
    """Outcome of reading the hint: the parsed info, or why it could not be used."""

    info: LastCheckpointInfo | None
    problem: str | None = None


def parse_last_checkpoint(data: bytes) -> LastCheckpointInfo:
    """Parse and validate `_last_checkpoint` bytes; raises ValueError naming the problem."""
    text = data.decode("utf-8").strip()
    if not text:
        raise ValueError("empty file")
    obj = json.loads(text.splitlines()[0], object_pairs_hook=_reject_duplicates)
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object")  # noqa: TRY004 - a format error, reported as such
    expected = obj.get("checksum")
    if expected is not None:
        actual = last_checkpoint_checksum(obj)
        if actual != expected:
            raise ValueError(f"checksum mismatch: file says {expected}, content gives {actual}")
    return LastCheckpointInfo.from_json_object(obj)


def read_last_checkpoint(storage: Storage) -> LastCheckpointRead:
    """Read `_last_checkpoint`; a missing or invalid hint is reported, not raised."""
    path = storage.log_file(LAST_CHECKPOINT)
    try:
        data = storage.read_bytes(path)
    except FileNotFoundError:
        return LastCheckpointRead(None, "missing")
    try:
        return LastCheckpointRead(parse_last_checkpoint(data))
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        what = "nested too deeply" if isinstance(exc, RecursionError) else exc
        problem = f"{path}: unusable hint ({what}); falling back to listing the log"
        logger.warning(problem)
        return LastCheckpointRead(None, problem)


def serialize_last_checkpoint(obj: Mapping[str, Any], *, with_checksum: bool = True) -> bytes:
    """Serialize a `_last_checkpoint` object as one JSON line, adding Spark's checksum."""
    body = {k: v for k, v in obj.items() if k != "checksum" and v is not None}
    if with_checksum:
        body["checksum"] = last_checkpoint_checksum(body)
    return (json.dumps(body, separators=(",", ":")) + "\n").encode()
