"""Table properties: the `metaData.configuration` map, parsed once into typed values.

Every property delta-ops acts on is parsed here, with Delta Spark's defaults and Spark's parsing
rules (`DeltaConfig.scala`), so the rest of the code never reads a string property. A value
that does not parse is an `delta_ops.errors.InvalidTableProperty` naming the property:
never silently the default (delta-rs and kernel-rs fall back to the default, which is how a
table ends up with 30 days of log retention when its owner wrote `7 days`).

Intervals are Spark calendar intervals: case-insensitive, the `interval` prefix optional,
several `<number> <unit>` pairs (`'1 day 12 hours'`), units microsecond to week in singular or
plural, fractions only for seconds, months and years rejected, the total not negative.

For example:

    props = TableProperties.from_configuration({"delta.logRetentionDuration": "interval 7 days"})
    props.log_retention_ms            # 604800000
    props.deleted_file_retention_ms   # 604800000 (the default, 1 week)
    parse_interval_ms("INTERVAL 2 HOURS 30 minutes")   # 9000000
    props.validate_retention_compatibility()          # [] when log >= deleted-file retention
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal, TypeVar

from delta_ops.errors import InvalidTableProperty

__all__ = [
    "APPEND_ONLY",
    "CHANGE_DATA_CAPTURE_LEGACY",
    "CHECKPOINT_INTERVAL",
    "CHECKPOINT_POLICY",
    "CHECKPOINT_RETENTION_DURATION",
    "CHECKPOINT_WRITE_STATS_AS_JSON",
    "CHECKPOINT_WRITE_STATS_AS_STRUCT",
    "COLUMN_MAPPING_MAX_COLUMN_ID",
    "COLUMN_MAPPING_MODE",
    "CONSTRAINTS_PREFIX",
    "DATA_SKIPPING_NUM_INDEXED_COLS",
    "DATA_SKIPPING_STATS_COLUMNS",
    "DELETED_FILE_RETENTION_DURATION",
    "DROP_FEATURE_TRUNCATE_HISTORY_RETENTION_DURATION",
    "ENABLE_CHANGE_DATA_FEED",
    "ENABLE_DELETION_VECTORS",
    "ENABLE_EXPIRED_LOG_CLEANUP",
    "ENABLE_IN_COMMIT_TIMESTAMPS",
    "ENABLE_MATERIALIZE_PARTITION_COLUMNS",
    "ENABLE_ROW_TRACKING",
    "ENABLE_TYPE_WIDENING",
    "IN_COMMIT_TIMESTAMP_ENABLEMENT_TIMESTAMP",
    "IN_COMMIT_TIMESTAMP_ENABLEMENT_VERSION",
    "LOG_RETENTION_DURATION",
    "MATERIALIZED_ROW_COMMIT_VERSION_COLUMN_NAME",
    "MATERIALIZED_ROW_ID_COLUMN_NAME",
    "RANDOMIZE_FILE_PREFIXES",
    "RANDOM_PREFIX_LENGTH",
    "REQUIRE_CHECKPOINT_PROTECTION_BEFORE_VERSION",
    "ROW_TRACKING_SUSPENDED",
    "SET_TRANSACTION_RETENTION_DURATION",
    "TableProperties",
    "parse_interval_ms",
    "uniform_iceberg_note",
]

# --------------------------------------------------------------------------- property keys
LOG_RETENTION_DURATION = "delta.logRetentionDuration"
DELETED_FILE_RETENTION_DURATION = "delta.deletedFileRetentionDuration"
SET_TRANSACTION_RETENTION_DURATION = "delta.setTransactionRetentionDuration"
CHECKPOINT_RETENTION_DURATION = "delta.checkpointRetentionDuration"
ENABLE_EXPIRED_LOG_CLEANUP = "delta.enableExpiredLogCleanup"
CHECKPOINT_INTERVAL = "delta.checkpointInterval"
CHECKPOINT_WRITE_STATS_AS_JSON = "delta.checkpoint.writeStatsAsJson"
CHECKPOINT_WRITE_STATS_AS_STRUCT = "delta.checkpoint.writeStatsAsStruct"
CHECKPOINT_POLICY = "delta.checkpointPolicy"
ENABLE_ROW_TRACKING = "delta.enableRowTracking"
ROW_TRACKING_SUSPENDED = "delta.rowTrackingSuspended"
MATERIALIZED_ROW_ID_COLUMN_NAME = "delta.rowTracking.materializedRowIdColumnName"
MATERIALIZED_ROW_COMMIT_VERSION_COLUMN_NAME = (
    "delta.rowTracking.materializedRowCommitVersionColumnName"
)
ENABLE_DELETION_VECTORS = "delta.enableDeletionVectors"
COLUMN_MAPPING_MODE = "delta.columnMapping.mode"
COLUMN_MAPPING_MAX_COLUMN_ID = "delta.columnMapping.maxColumnId"
APPEND_ONLY = "delta.appendOnly"
ENABLE_CHANGE_DATA_FEED = "delta.enableChangeDataFeed"
#: The deprecated name of enableChangeDataFeed; Spark reads it when the new key is absent.
CHANGE_DATA_CAPTURE_LEGACY = "delta.enableChangeDataCapture"
ENABLE_IN_COMMIT_TIMESTAMPS = "delta.enableInCommitTimestamps"
IN_COMMIT_TIMESTAMP_ENABLEMENT_VERSION = "delta.inCommitTimestampEnablementVersion"
IN_COMMIT_TIMESTAMP_ENABLEMENT_TIMESTAMP = "delta.inCommitTimestampEnablementTimestamp"
ENABLE_TYPE_WIDENING = "delta.enableTypeWidening"
ENABLE_MATERIALIZE_PARTITION_COLUMNS = "delta.enableMaterializePartitionColumnsFeature"
UNIVERSAL_FORMAT_ENABLED_FORMATS = "delta.universalFormat.enabledFormats"
#: a CHECK constraint is the table property `delta.constraints.<name>` (its SQL expression)
CONSTRAINTS_PREFIX = "delta.constraints."
RANDOMIZE_FILE_PREFIXES = "delta.randomizeFilePrefixes"
RANDOM_PREFIX_LENGTH = "delta.randomPrefixLength"
DATA_SKIPPING_NUM_INDEXED_COLS = "delta.dataSkippingNumIndexedCols"
DATA_SKIPPING_STATS_COLUMNS = "delta.dataSkippingStatsColumns"
REQUIRE_CHECKPOINT_PROTECTION_BEFORE_VERSION = "delta.requireCheckpointProtectionBeforeVersion"
#: how much history DROP FEATURE ... TRUNCATE HISTORY keeps (Delta Spark's default: 24 hours)
DROP_FEATURE_TRUNCATE_HISTORY_RETENTION_DURATION = (
    "delta.dropFeatureTruncateHistory.retentionDuration"
)

_MS_PER_DAY = 86_400_000

# ------------------------------------------------------------------------ interval parsing
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
# Java's Character.isWhitespace for the ASCII range (no NBSP), which Spark's parser uses.
_WHITESPACE = frozenset(" \t\n\x0b\x0c\r\x1c\x1d\x1e\x1f")
# week and day add to the interval's days; the rest add microseconds.
_MICROS_PER: dict[str, int] = {
    "hour": 3_600_000_000,
    "minute": 60_000_000,
    "second": 1_000_000,
    "millisecond": 1_000,
    "microsecond": 1,
}
# Spark tries the units in this order at the unit's first letter ("m": month before minute
# before millisecond before microsecond); there are no abbreviations.
_UNITS_BY_LETTER = {
    "y": ("year",),
    "w": ("week",),
    "d": ("day",),
    "h": ("hour",),
    "s": ("second",),
    "m": ("month", "minute", "millisecond", "microsecond"),
}


def _java_trim(s: str) -> str:
    # java.lang.String.trim drops every char <= U+0020 at both ends.
    start, end = 0, len(s)
    while start < end and s[start] <= " ":
        start += 1
    while end > start and s[end - 1] <= " ":
        end -= 1
    return s[start:end]


def _checked(value: int, low: int, high: int, text: str) -> int:
    if not low <= value <= high:
        raise ValueError(f"interval {text!r} overflows")
    return value


def _calendar_interval(text: str) -> tuple[int, int, int]:
    """(months, days, microseconds) as Spark's `IntervalUtils.stringToInterval` parses `text`.

    `text` is already trimmed, lower-case and starts with "interval ".
    """
    n = len(text)
    i = len("interval ")
    months = days = micros = 0
    while True:
        while i < n and text[i] in _WHITESPACE:
            i += 1
        if i == n:
            break
        word = text[i:].split(None, 1)[0]
        # sign
        negative = False
        point_first = False
        if text[i] in "+-":
            negative = text[i] == "-"
            i += 1
            while i < n and text[i] in _WHITESPACE:
                i += 1
            if i == n:
                raise ValueError(f"expected a number after {word!r}")
        elif text[i] == ".":
            point_first = True
        elif not "0" <= text[i] <= "9":
            raise ValueError(f"unrecognized number {word!r}")
        # integral part
        value = 0
        while i < n and "0" <= text[i] <= "9":
            value = _checked(value * 10 + ord(text[i]) - 48, 0, _INT64_MAX, text)
            i += 1
        # fractional part: nanosecond precision at most, seconds only
        fraction_nanos = 0
        has_fraction = False
        if i < n and text[i] == ".":
            has_fraction = True
            i += 1
            digits = 0
            while i < n and "0" <= text[i] <= "9":
                digits += 1
                if digits > 9:
                    raise ValueError(f"{word!r}: intervals support nanosecond precision at most")
                fraction_nanos += (ord(text[i]) - 48) * 10 ** (9 - digits)
                i += 1
            if point_first and digits == 0:
                raise ValueError(f"invalid value {word!r}")
        if i == n:
            raise ValueError(f"expected a unit name after {word!r}")
        if text[i] not in _WHITESPACE:
            raise ValueError(f"invalid value {word!r}")
        while i < n and text[i] in _WHITESPACE:
            i += 1
        if i == n:
            raise ValueError(f"expected a unit name after {word!r}")
        unit_word = text[i:].split(None, 1)[0]
        if has_fraction and text[i] != "s":
            raise ValueError(f"{unit_word!r} cannot have a fractional value")
        unit = next((u for u in _UNITS_BY_LETTER.get(text[i], ()) if text.startswith(u, i)), None)
        if unit is None:
            raise ValueError(f"invalid unit {unit_word!r}")
        i += len(unit)
        # Spark truncates the fraction to microseconds before it applies the sign.
        fraction_micros = fraction_nanos // 1000
        if negative:
            value = -value
            fraction_micros = -fraction_micros
        if unit == "year":
            months = _checked(months + 12 * value, _INT32_MIN, _INT32_MAX, text)
        elif unit == "month":
            months = _checked(
                months + _checked(value, _INT32_MIN, _INT32_MAX, text), _INT32_MIN, _INT32_MAX, text
            )
        elif unit == "week":
            days = _checked(days + 7 * value, _INT32_MIN, _INT32_MAX, text)
        elif unit == "day":
            days = _checked(
                days + _checked(value, _INT32_MIN, _INT32_MAX, text), _INT32_MIN, _INT32_MAX, text
            )
        else:
            step = _checked(value * _MICROS_PER[unit], _INT64_MIN, _INT64_MAX, text)
            micros = _checked(micros + step, _INT64_MIN, _INT64_MAX, text)
            if unit == "second":
                micros = _checked(micros + fraction_micros, _INT64_MIN, _INT64_MAX, text)
        # an optional plural "s", then whitespace or the end
        if i < n and text[i] == "s":
            i += 1
        if i < n and text[i] not in _WHITESPACE:
            raise ValueError(f"invalid unit {unit_word!r}")
    return months, days, micros


def parse_interval_ms(value: str) -> int:
    """Milliseconds of a Delta interval property value, parsed exactly as Delta Spark does.

    Spark's rules (`DeltaConfigs.parseCalendarInterval`, `isValidIntervalConfigValue`,
    `getMilliSeconds`): the value is trimmed and lower-cased and gets an `interval ` prefix
    unless it has one; then pairs of `<number> <unit>` follow, separated by whitespace. Units
    are year, month, week, day, hour, minute, second, millisecond and microsecond, each
    optionally plural; a number may have a sign, and only seconds may have a fraction (up to 9
    digits). Months and years parse but are rejected (a month has no fixed length), as is a
    negative total; `1 day -1 hour` is fine. The result is `days * 86400000 + micros // 1000`.

    Examples:
        >>> parse_interval_ms("interval 1 week")
        604800000
        >>> parse_interval_ms("1 day 2 hours")
        93600000

    Raises:
        ValueError: the reason the value is not a valid interval.
        TypeError: the value is not a string.
    """
    if not isinstance(value, str):
        raise TypeError(f"an interval must be a string, got {value!r}")
    trimmed = _java_trim(value)
    if not trimmed:
        raise ValueError("the interval is empty")
    lowered = trimmed.lower()
    text = lowered if lowered.startswith("interval ") else "interval " + lowered
    months, days, micros = _calendar_interval(text)
    if months:
        raise ValueError(
            "months and years are not accepted (their length varies); "
            "use days instead, e.g. '365 days'"
        )
    total_micros = days * 86_400_000_000 + micros
    if total_micros < 0:
        raise ValueError("the interval is negative")
    if total_micros > _INT64_MAX:
        raise ValueError("the interval overflows")
    return total_micros // 1000


# ------------------------------------------------------------------------- value parsers
def _parse_bool(value: str) -> bool:
    # Scala's String.toBoolean: "true"/"false" in any letter case, nothing else (no spaces).
    folded = value.casefold()
    if folded == "true":
        return True
    if folded == "false":
        return False
    raise ValueError("expected true or false")


_INT_RE = re.compile(r"[+-]?[0-9]+", re.ASCII)


def _parse_int(value: str, low: int, high: int) -> int:
    # Java's Integer.parseInt / Long.parseLong: an optional sign and digits, nothing else.
    if not _INT_RE.fullmatch(value):
        raise ValueError("expected an integer")
    number = int(value)
    if not low <= number <= high:
        raise ValueError(f"out of range {low}..{high}")
    return number


def _int32(value: str) -> int:
    return _parse_int(value, _INT32_MIN, _INT32_MAX)


def _int64(value: str) -> int:
    return _parse_int(value, _INT64_MIN, _INT64_MAX)


def _positive_int32(value: str) -> int:
    number = _int32(value)
    if number <= 0:
        raise ValueError("needs to be a positive integer")
    return number


def _non_negative_int64(value: str) -> int:
    number = _int64(value)
    if number < 0:
        raise ValueError("needs to be greater than or equal to 0")
    return number


def _num_indexed_cols(value: str) -> int:
    number = _int32(value)
    if number < -1:
        raise ValueError("needs to be larger than or equal to -1")
    return number


def _checkpoint_policy(value: str) -> Literal["classic", "v2"]:
    # Spark's CheckpointPolicy.fromName compares names exactly (case-sensitive).
    if value == "classic":
        return "classic"
    if value == "v2":
        return "v2"
    raise ValueError("must be one of: classic, v2")


def _column_mapping_mode(value: str) -> Literal["none", "name", "id"]:
    # Spark's DeltaColumnMappingMode(name) lower-cases the name first.
    mode = value.lower()
    if mode == "none":
        return "none"
    if mode == "name":
        return "name"
    if mode == "id":
        return "id"
    raise ValueError("unsupported column mapping mode; must be one of: none, id, name")


_IDENT_CHARS = re.compile(r"[A-Za-z0-9_]+", re.ASCII)


def _stats_columns(value: str) -> tuple[tuple[str, ...], ...]:
    """Spark's `dataSkippingStatsColumns`: comma-separated, possibly nested, column names.

    Each name is dot-separated parts, a part being letters/digits/underscores or a
    backtick-quoted string (a doubled backtick inside stands for one). Returns the name parts.
    """
    columns: list[tuple[str, ...]] = []
    parts: list[str] = []
    i, n = 0, len(value)

    def skip_ws(j: int) -> int:
        while j < n and value[j].isspace():
            j += 1
        return j

    while True:
        i = skip_ws(i)
        if i < n and value[i] == "`":
            j, buf = i + 1, []
            while True:
                if j >= n:
                    raise ValueError("unclosed backtick")
                if value[j] == "`":
                    if j + 1 < n and value[j + 1] == "`":
                        buf.append("`")
                        j += 2
                        continue
                    break
                buf.append(value[j])
                j += 1
            parts.append("".join(buf))
            i = j + 1
        else:
            match = _IDENT_CHARS.match(value, i)
            if not match:
                where = value[i : i + 10] or "end of value"
                raise ValueError(f"expected a column name at {where!r}")
            parts.append(match.group())
            i = match.end()
        i = skip_ws(i)
        if i < n and value[i] == ".":
            i += 1
            continue
        columns.append(tuple(parts))
        parts = []
        if i == n:
            return tuple(columns)
        if value[i] != ",":
            raise ValueError(f"unexpected {value[i]!r}; separate column names with commas")
        i += 1


# ---------------------------------------------------------------------------- the object
_T = TypeVar("_T")


def _get(cfg: Mapping[str, str], key: str, parse: Callable[[str], _T], default: _T) -> _T:
    if key not in cfg:
        return default
    return _parse(key, cfg[key], parse)


def _get_optional(cfg: Mapping[str, str], key: str, parse: Callable[[str], _T]) -> _T | None:
    # Spark models these as Option[...] with a null default: a null value means unset.
    value = cfg.get(key)
    return None if value is None else _parse(key, value, parse)


def _parse(key: str, value: object, parse: Callable[[str], _T]) -> _T:
    if not isinstance(value, str):
        raise InvalidTableProperty(key, repr(value), "the value is not a string")
    try:
        return parse(value)
    except ValueError as exc:
        raise InvalidTableProperty(key, value, str(exc)) from None


def _text(value: str) -> str:
    return value


_EMPTY: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True)
class TableProperties:
    """The table properties delta-ops uses, typed, with Delta Spark's defaults.

    Durations are milliseconds. `raw` is the whole configuration map, for anything else.
    Build it with `from_configuration`; `TableProperties()` is a table with no properties.
    """

    log_retention_ms: int = 30 * _MS_PER_DAY
    deleted_file_retention_ms: int = 7 * _MS_PER_DAY
    #: None: set transactions never expire (Spark's default; the 2 days often quoted belong to
    #: checkpointRetentionDuration).
    set_transaction_retention_ms: int | None = None
    #: Only informational in OSS Delta: cleanup does not use it.
    checkpoint_retention_ms: int = 2 * _MS_PER_DAY
    enable_expired_log_cleanup: bool = True
    checkpoint_interval: int = 10
    checkpoint_write_stats_as_json: bool = True
    checkpoint_write_stats_as_struct: bool = True
    checkpoint_policy: Literal["classic", "v2"] = "classic"
    enable_row_tracking: bool = False
    row_tracking_suspended: bool = False
    materialized_row_id_column_name: str | None = None
    materialized_row_commit_version_column_name: str | None = None
    enable_deletion_vectors: bool = False
    column_mapping_mode: Literal["none", "name", "id"] = "none"
    column_mapping_max_column_id: int = 0
    append_only: bool = False
    enable_change_data_feed: bool = False
    enable_in_commit_timestamps: bool = False
    in_commit_timestamp_enablement_version: int | None = None
    in_commit_timestamp_enablement_timestamp: int | None = None
    enable_type_widening: bool = False
    randomize_file_prefixes: bool = False
    random_prefix_length: int = 2
    #: -1 means all columns.
    data_skipping_num_indexed_cols: int = 32
    #: Column names as tuples of name parts (`a.b` is ("a", "b")); None when unset.
    data_skipping_stats_columns: tuple[tuple[str, ...], ...] | None = None
    #: 0 when unset; only meaningful when the checkpointProtection feature is supported.
    require_checkpoint_protection_before_version: int = 0
    #: the log a history-truncating feature drop keeps (`delta-ops drop-feature --truncate-history`)
    drop_feature_truncate_history_retention_ms: int = _MS_PER_DAY
    raw: Mapping[str, str] = field(default_factory=lambda: _EMPTY, hash=False, repr=False)

    @classmethod
    def from_configuration(cls, cfg: Mapping[str, str] | None) -> TableProperties:
        """Parse a `metaData.configuration` map (None is an empty one).

        Keys are matched exactly, as Spark reads them (Spark normalises their case on write).

        Raises:
            InvalidTableProperty: a value does not parse or is out of range; names the property.
        """
        cfg = dict(cfg or {})
        cdf_key = (
            ENABLE_CHANGE_DATA_FEED
            if ENABLE_CHANGE_DATA_FEED in cfg
            else CHANGE_DATA_CAPTURE_LEGACY
        )
        return cls(
            log_retention_ms=_get(cfg, LOG_RETENTION_DURATION, parse_interval_ms, 30 * _MS_PER_DAY),
            deleted_file_retention_ms=_get(
                cfg, DELETED_FILE_RETENTION_DURATION, parse_interval_ms, 7 * _MS_PER_DAY
            ),
            set_transaction_retention_ms=_get_optional(
                cfg, SET_TRANSACTION_RETENTION_DURATION, parse_interval_ms
            ),
            checkpoint_retention_ms=_get(
                cfg, CHECKPOINT_RETENTION_DURATION, parse_interval_ms, 2 * _MS_PER_DAY
            ),
            enable_expired_log_cleanup=_get(cfg, ENABLE_EXPIRED_LOG_CLEANUP, _parse_bool, True),
            checkpoint_interval=_get(cfg, CHECKPOINT_INTERVAL, _positive_int32, 10),
            checkpoint_write_stats_as_json=_get(
                cfg, CHECKPOINT_WRITE_STATS_AS_JSON, _parse_bool, True
            ),
            checkpoint_write_stats_as_struct=_get(
                cfg, CHECKPOINT_WRITE_STATS_AS_STRUCT, _parse_bool, True
            ),
            checkpoint_policy=_get(cfg, CHECKPOINT_POLICY, _checkpoint_policy, "classic"),
            enable_row_tracking=_get(cfg, ENABLE_ROW_TRACKING, _parse_bool, False),
            row_tracking_suspended=_get(cfg, ROW_TRACKING_SUSPENDED, _parse_bool, False),
            materialized_row_id_column_name=_get_optional(
                cfg, MATERIALIZED_ROW_ID_COLUMN_NAME, _text
            ),
            materialized_row_commit_version_column_name=_get_optional(
                cfg, MATERIALIZED_ROW_COMMIT_VERSION_COLUMN_NAME, _text
            ),
            enable_deletion_vectors=_get(cfg, ENABLE_DELETION_VECTORS, _parse_bool, False),
            column_mapping_mode=_get(cfg, COLUMN_MAPPING_MODE, _column_mapping_mode, "none"),
            column_mapping_max_column_id=_get(cfg, COLUMN_MAPPING_MAX_COLUMN_ID, _int64, 0),
            append_only=_get(cfg, APPEND_ONLY, _parse_bool, False),
            enable_change_data_feed=_get(cfg, cdf_key, _parse_bool, False),
            enable_in_commit_timestamps=_get(cfg, ENABLE_IN_COMMIT_TIMESTAMPS, _parse_bool, False),
            in_commit_timestamp_enablement_version=_get_optional(
                cfg, IN_COMMIT_TIMESTAMP_ENABLEMENT_VERSION, _non_negative_int64
            ),
            in_commit_timestamp_enablement_timestamp=_get_optional(
                cfg, IN_COMMIT_TIMESTAMP_ENABLEMENT_TIMESTAMP, _int64
            ),
            enable_type_widening=_get(cfg, ENABLE_TYPE_WIDENING, _parse_bool, False),
            randomize_file_prefixes=_get(cfg, RANDOMIZE_FILE_PREFIXES, _parse_bool, False),
            random_prefix_length=_get(cfg, RANDOM_PREFIX_LENGTH, _positive_int32, 2),
            data_skipping_num_indexed_cols=_get(
                cfg, DATA_SKIPPING_NUM_INDEXED_COLS, _num_indexed_cols, 32
            ),
            data_skipping_stats_columns=_get_optional(
                cfg, DATA_SKIPPING_STATS_COLUMNS, _stats_columns
            ),
            require_checkpoint_protection_before_version=_get(
                cfg, REQUIRE_CHECKPOINT_PROTECTION_BEFORE_VERSION, _non_negative_int64, 0
            ),
            drop_feature_truncate_history_retention_ms=_get(
                cfg,
                DROP_FEATURE_TRUNCATE_HISTORY_RETENTION_DURATION,
                parse_interval_ms,
                _MS_PER_DAY,
            ),
            raw=MappingProxyType(cfg),
        )

    def validate_retention_compatibility(self) -> list[str]:
        """Problems with the two retentions under Spark's rule (empty list: none).

        When either `delta.logRetentionDuration` or `delta.deletedFileRetentionDuration` is set,
        Spark requires log retention >= deleted-file retention
        (`validateTombstoneAndLogRetentionDurationCompatibility`): otherwise the log could forget
        a `remove` while its file must still be kept, and time travel within the deleted-file
        retention would need commits that cleanup already deleted.
        """
        if (
            LOG_RETENTION_DURATION not in self.raw
            and DELETED_FILE_RETENTION_DURATION not in self.raw
        ):
            return []
        if self.log_retention_ms >= self.deleted_file_retention_ms:
            return []
        problem = (
            f"{LOG_RETENTION_DURATION} ({self.log_retention_ms} ms) is shorter than "
            f"{DELETED_FILE_RETENTION_DURATION} ({self.deleted_file_retention_ms} ms); Delta "
            "Spark requires the log retention to be at least the deleted-file retention"
        )
        return [problem]


def uniform_iceberg_note(configuration: Mapping[str, str]) -> str | None:
    """What a commit by delta-ops leaves of a UniForm table's Iceberg metadata (None when
    the table keeps none): Delta Spark converts the log into Iceberg metadata after its own
    commits, so Iceberg readers see the table as it was until its next conversion."""
    formats = configuration.get(UNIVERSAL_FORMAT_ENABLED_FORMATS, "")
    if "iceberg" not in {f.strip().lower() for f in formats.split(",")}:
        return None
    return (
        "UniForm: Iceberg readers keep seeing the table as before this commit until Delta"
        " Spark converts it again (its next commit, or MSCK REPAIR TABLE ... SYNC METADATA)"
    )
