"""Names of the files in `_delta_log` and what they mean.

Every file the protocol defines is recognised from its name alone: commits `N.json`, classic
checkpoints `N.checkpoint.parquet`, multi-part checkpoints `N.checkpoint.i.n.parquet`, V2
checkpoints `N.checkpoint.<uuid>.json|parquet`, version checksums `N.crc`, compacted commit
ranges `x.y.compacted.json`, plus `_last_checkpoint`. Anything else (temp files, unknown names)
is classified as ``None`` and ignored by readers.

For example:

    parsed = parse_log_file_name("00000000000000000010.checkpoint.0000000001.0000000002.parquet")
    assert parsed.kind is LogFileKind.MULTI_PART_CHECKPOINT and parsed.num_parts == 2
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Any

from delta_ops.storage import FileEntry

LAST_CHECKPOINT = "_last_checkpoint"
SIDECARS_DIR = "_sidecars"

_PATTERN = re.compile(
    r"^(?P<version>\d{20})\."
    r"(?:(?P<json>json)"
    r"|(?P<crc>crc)"
    r"|checkpoint\.parquet(?P<classic>)"
    r"|checkpoint\.(?P<part>\d{10})\.(?P<parts>\d{10})\.parquet"
    r"|checkpoint\.(?P<uuid>[0-9a-fA-F-]{36})\.(?P<v2fmt>json|parquet)"
    r"|(?P<end>\d{20})\.compacted\.json)$"
)


class LogFileKind(enum.Enum):
    COMMIT = "commit"
    CHECKSUM = "crc"
    CLASSIC_CHECKPOINT = "classic_checkpoint"
    MULTI_PART_CHECKPOINT = "multi_part_checkpoint"
    V2_CHECKPOINT = "v2_checkpoint"
    COMPACTED = "compacted"


CHECKPOINT_KINDS = frozenset(
    {LogFileKind.CLASSIC_CHECKPOINT, LogFileKind.MULTI_PART_CHECKPOINT, LogFileKind.V2_CHECKPOINT}
)


@dataclass(frozen=True)
class LogFile:
    """A recognised `_delta_log` file with what its name says."""

    name: str
    kind: LogFileKind
    version: int
    size: int = 0
    modification_time: int = 0
    part: int | None = None
    num_parts: int | None = None
    end_version: int | None = None  # compacted files only
    format: str | None = None  # V2 checkpoints: "json" or "parquet"

    @property
    def is_checkpoint(self) -> bool:
        return self.kind in CHECKPOINT_KINDS


def parse_log_file_name(name: str, size: int = 0, modification_time: int = 0) -> LogFile | None:
    """Classify a `_delta_log` file name; None for names the protocol does not define."""
    if len(name) == 25 and name.endswith(".json") and name[:20].isdecimal():
        # a commit, what a log holds most of (thousands to list): what the pattern's `json`
        # branch gives (its \d is isdecimal), without the match and keyword arguments
        return LogFile(name, LogFileKind.COMMIT, int(name[:20]), size, modification_time)
    m = _PATTERN.match(name)
    if m is None:
        return None
    version = int(m["version"])
    common: dict[str, Any] = {
        "name": name,
        "version": version,
        "size": size,
        "modification_time": modification_time,
    }
    if m["json"]:
        return LogFile(kind=LogFileKind.COMMIT, **common)
    if m["crc"]:
        return LogFile(kind=LogFileKind.CHECKSUM, **common)
    if m["classic"] is not None:
        return LogFile(kind=LogFileKind.CLASSIC_CHECKPOINT, format="parquet", **common)
    if m["parts"]:
        return LogFile(
            kind=LogFileKind.MULTI_PART_CHECKPOINT,
            part=int(m["part"]),
            num_parts=int(m["parts"]),
            format="parquet",
            **common,
        )
    if m["uuid"]:
        return LogFile(kind=LogFileKind.V2_CHECKPOINT, format=m["v2fmt"], **common)
    return LogFile(kind=LogFileKind.COMPACTED, end_version=int(m["end"]), **common)


def parse_listing(entries: list[FileEntry]) -> list[LogFile]:
    """Recognised log files of a directory listing, in name order."""
    out = []
    for e in entries:
        parsed = parse_log_file_name(e.name, e.size, e.modification_time)
        if parsed is not None:
            out.append(parsed)
    return out


def commit_file_name(version: int) -> str:
    return f"{version:020d}.json"


def checksum_file_name(version: int) -> str:
    """The version checksum of `version` (protocol: "Version Checksum File")."""
    return f"{version:020d}.crc"


def classic_checkpoint_name(version: int) -> str:
    return f"{version:020d}.checkpoint.parquet"


def multi_part_checkpoint_name(version: int, part: int, num_parts: int) -> str:
    return f"{version:020d}.checkpoint.{part:010d}.{num_parts:010d}.parquet"


def v2_checkpoint_name(version: int, uuid_text: str, fmt: str = "json") -> str:
    return f"{version:020d}.checkpoint.{uuid_text}.{fmt}"
