"""One vocabulary for durations, points in time and sizes, shared by the CLI and Dagster config
(the operations' options), which also accepts the table properties' interval syntax.

Durations (`parse_duration_ms`): ``7d``, ``168h``, ``90m``, ``30s``, ``500ms``, ``2w``
(units may combine: ``1d12h``), ISO 8601 ``P7D`` / ``PT168H`` / ``P1DT12H``, and Delta's
table-property syntax ``7 days`` / ``interval 7 days``, and ``0`` (zero needs no unit, as in Go's
`ParseDuration`). Any other bare number (``168``, ``00``, ``0.0``) is refused: nobody can tell
whether ``168`` means hours or seconds.

Times (`parse_time_ms`): ``now``, ISO 8601 with a zone (``2026-11-25T10:00:00Z``,
``...+01:00``; a date alone is midnight UTC), or epoch seconds / milliseconds with an explicit
unit (``1700000000s``, ``1700000000000ms``).

Sizes (`parse_size_bytes`): a number with a unit, ``128MB``, ``1 GB``, ``512k`` (powers
of 1024), or a bare whole number of bytes, ``4194304``, as delta-rs' `target_size` and Spark's
`maxFileSize` take it (a size has one natural unit; a duration has none, so a bare duration
stays refused).

Sizes print with `format_bytes` (``1.5 MB``), durations with `format_duration`
(``7 days``, ``36 hours``) and times with `format_time_ms` (ISO 8601 UTC, to the
millisecond when it has one: ``2023-08-07T16:45:35.372Z``, ``2023-08-07T16:45:35Z``):

    parse_duration_ms("7d") == parse_duration_ms("P7D") == parse_duration_ms("7 days")
"""

from __future__ import annotations

import datetime as dt
import re

from delta_ops.protocol.properties import parse_interval_ms

_UNIT_MS = {
    "w": 7 * 86_400_000,
    "d": 86_400_000,
    "h": 3_600_000,
    "m": 60_000,
    "s": 1_000,
    "ms": 1,
}
_SHORT = re.compile(r"^(?:(\d+)(ms|w|d|h|m|s))+$")
_SHORT_PART = re.compile(r"(\d+)(ms|w|d|h|m|s)")
_ISO = re.compile(
    r"^P(?:(\d+)W)?(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$", re.IGNORECASE
)
_EPOCH = re.compile(r"^(-?\d+)(s|ms)$")
_MAX_MS = 2**63 // 1_000_000 - 1  # what fits as nanoseconds, far beyond any real retention

DURATION_FORMS = "7d, 168h, 90m, 30s, P7D, PT168H, '7 days', 'interval 7 days' or 0"
TIME_FORMS = "now, ISO 8601 with a zone (2026-11-25T10:00:00Z) or epoch 1700000000s / ...ms"


def parse_duration_ms(text: str) -> int:
    """Milliseconds of a duration in any of the accepted forms.

    Raises:
        ValueError: naming the value and the accepted forms.
    """
    value = text.strip()
    if value == "0":  # zero is zero in every unit
        return 0
    lowered = value.lower().replace(" ", "") if _looks_short(value) else value.lower()
    try:
        if _SHORT.match(lowered):
            total = sum(int(n) * _UNIT_MS[u] for n, u in _SHORT_PART.findall(lowered))
        elif (iso := _ISO.match(value)) and any(iso.groups()) and not value.upper().endswith("T"):
            weeks, days, hours, minutes, seconds = iso.groups()
            total = (
                int(weeks or 0) * _UNIT_MS["w"]
                + int(days or 0) * _UNIT_MS["d"]
                + int(hours or 0) * _UNIT_MS["h"]
                + int(minutes or 0) * _UNIT_MS["m"]
                + round(float(seconds or 0) * 1000)
            )
        elif re.fullmatch(r"[+-]?\d+(\.\d+)?", value):
            raise ValueError("a bare number has no unit")
        else:
            total = parse_interval_ms(value)
    except ValueError as exc:
        raise ValueError(f"{text!r} is not a duration ({exc}); use {DURATION_FORMS}") from None
    if total > _MAX_MS:
        raise ValueError(f"{text!r} is too long a duration; use {DURATION_FORMS}")
    return total


def _looks_short(value: str) -> bool:
    return bool(re.fullmatch(r"(\d+\s*(ms|w|d|h|m|s)\s*)+", value.lower()))


def parse_time_ms(text: str, *, now_ms: int) -> int:
    """Epoch milliseconds of a point in time in any of the accepted forms.

    Raises:
        ValueError: naming the value and the accepted forms.
    """
    value = text.strip()
    if value.lower() == "now":
        return now_ms
    epoch = _EPOCH.match(value.lower())
    if epoch:
        number, unit = int(epoch.group(1)), epoch.group(2)
        ms = number * 1000 if unit == "s" else number
        if abs(ms) > _MAX_MS:
            raise ValueError(f"{text!r} is out of range; use {TIME_FORMS}")
        return ms
    if re.fullmatch(r"[+-]?\d+", value):
        raise ValueError(f"{text!r} has no unit; use {TIME_FORMS}")
    try:
        parsed = dt.datetime.fromisoformat(value.replace("z", "Z"))
    except ValueError:
        raise ValueError(f"{text!r} is not a time; use {TIME_FORMS}") from None
    if parsed.tzinfo is None:
        if len(value) > 10:  # a date and a time without a zone: ambiguous
            raise ValueError(f"{text!r} has no time zone; use {TIME_FORMS}")
        parsed = parsed.replace(tzinfo=dt.UTC)
    return int(parsed.timestamp() * 1000)


def format_time_ms(ms: int) -> str:
    """Epoch milliseconds as ISO 8601 UTC, with the milliseconds unless they are 0: what
    `parse_time_ms` reads back to the same value (integer arithmetic, no float)."""
    seconds, millis = divmod(ms, 1000)
    moment = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=seconds)
    text = moment.strftime("%Y-%m-%dT%H:%M:%S")
    return f"{text}.{millis:03d}Z" if millis else f"{text}Z"


def format_duration(ms: int) -> str:
    """A duration in the largest whole unit that keeps it exact (``7 days``, ``90 minutes``)."""
    for unit, size in (("day", 86_400_000), ("hour", 3_600_000), ("minute", 60_000)):
        if ms and ms % size == 0:
            n = ms // size
            return f"{n} {unit}{'s' if n != 1 else ''}"
    if ms % 1000 == 0:
        n = ms // 1000
        return f"{n} second{'s' if n != 1 else ''}"
    return f"{ms} ms"


def format_bytes(size: int) -> str:
    """Bytes in KB / MB / GB / TB (powers of 1024), one decimal when under 100."""
    value = float(size)
    for unit in ("bytes", "KB", "MB", "GB", "TB"):
        if value < 1024 or unit == "TB":
            if unit == "bytes":
                return f"{size:,} bytes"
            return f"{value:.1f} {unit}" if value < 100 else f"{value:,.0f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


_SIZE = re.compile(
    r"^\s*(\d+(?:\.\d+)?)\s*(b|bytes?|k|kb|kib|m|mb|mib|g|gb|gib|t|tb|tib)\s*$", re.IGNORECASE
)
_BYTES = re.compile(r"^\s*(\d+)\s*$")
SIZE_FORMS = (
    "a size with a unit, e.g. 128MB, 1GB, 512KB (powers of 1024), or whole bytes, e.g. 4194304"
)


def parse_size_bytes(text: str) -> int:
    """`128MB`, `1 GB`, `512k`, `1000 bytes` as bytes (K/M/G/T are powers of 1024), and a bare
    whole number as bytes (`4194304`); a bare fraction (`1.5`) is refused: bytes are whole."""
    value = str(text)
    if (bare := _BYTES.match(value)) is not None:
        size = int(bare.group(1))
    elif (match := _SIZE.match(value)) is not None:
        number, unit = match.group(1), match.group(2).lower()
        scale = 1024 ** {"b": 0, "k": 1, "m": 2, "g": 3, "t": 4}[unit[0]]
        size = int(float(number) * scale) if "." in number else int(number) * scale
    else:
        raise ValueError(f"{text!r} is not a size; use {SIZE_FORMS}")
    if size < 1:
        raise ValueError(f"{text!r} is not a size of at least 1 byte")
    return size
