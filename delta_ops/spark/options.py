"""The options of the `delta` data source, parsed: what a read or a write asks for.

Spark hands a Python data source its options as strings, with lower-cased keys. The reader
(`delta_ops.spark.source`) and the writer (`delta_ops.spark.source_writer`) parse
them here, so a bad option is refused in one line (`delta_ops.errors.InvalidValue`)
before any table is opened. This module needs no PySpark and imports no other module of
``delta_ops.spark``:

    read = read_options({"path": "s3://lake/t", "versionasof": "3", "storage.anon": "true"})
    read.version, read.storage_options                     # (3, {'anon': 'true'})
    write = write_options({"path": "/t", "partitionby": "day, region"})
    write.partition_by                                     # ['day', 'region']

Options starting with ``storage.`` are the table's storage options; ``delta.*`` options are
table properties for a new table (their spelling restored, see `table_properties`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from delta_ops.errors import InvalidValue
from delta_ops.protocol import properties
from delta_ops.protocol.units import parse_time_ms

STORAGE_PREFIX = "storage."


@dataclass(frozen=True)
class ReadOptions:
    """`spark.read.format("delta")`'s options: the table, and which version of it."""

    path: str
    storage_options: dict[str, str]
    version: int | None = None  # versionAsOf
    timestamp: str | None = None  # timestampAsOf, as given


@dataclass(frozen=True)
class WriteOptions:
    """`df.write.format("delta")`'s options."""

    path: str
    storage_options: dict[str, str]
    partition_by: list[str]
    merge_schema: bool
    replace_where: str | None
    configuration: dict[str, str]  # `delta.*` table properties, spelled as the log spells them
    #: Delta's idempotent-write options `txnAppId` and `txnVersion`: the write is skipped when
    #: the table has recorded this version (or a later one) for this application
    app_transaction: tuple[str, int] | None = None


def storage_options(options: Mapping[str, str]) -> dict[str, str]:
    """The ``storage.*`` options, without their prefix: the table's storage options."""
    return {k[len(STORAGE_PREFIX) :]: v for k, v in options.items() if k.startswith(STORAGE_PREFIX)}


def table_properties(options: Mapping[str, str]) -> dict[str, str]:
    """The `delta.*` options as table properties, with their case restored: Spark hands a data
    source its options with lower-cased keys, while the log's property names are case-sensitive."""
    known = {
        value.lower(): value
        for name, value in vars(properties).items()
        if name.isupper() and isinstance(value, str) and value.startswith("delta.")
    }
    out = {}
    for key, value in options.items():
        if not key.lower().startswith("delta."):
            continue
        if key.lower() not in known and key == key.lower():
            raise InvalidValue(
                f"table property {key!r}: not one delta-ops knows, and Spark lower-cases option "
                "names, so its spelling is lost; create the table with write_delta("
                "configuration=...) instead"
            )
        out[known.get(key.lower(), key)] = value
    return out


def read_options(options: Mapping[str, str]) -> ReadOptions:
    """Parse a read's options: `path`, `versionAsOf` or `timestampAsOf`, `storage.*`."""
    path = options.get("path")
    if not path:
        raise InvalidValue("spark.read.format('delta').load(PATH): the table path is missing")
    lowered = {k.lower(): v for k, v in options.items()}
    version_text, timestamp_text = lowered.get("versionasof"), lowered.get("timestampasof")
    if version_text is not None and timestamp_text is not None:
        raise InvalidValue("pass versionAsOf or timestampAsOf, not both")
    version = None
    if version_text is not None:
        try:
            version = int(version_text)
        except ValueError:
            raise InvalidValue(
                f"versionAsOf={version_text!r}: a table version is a whole number"
            ) from None
    return ReadOptions(path, storage_options(options), version, timestamp_text)


def timestamp_as_of_ms(timestamp_text: str, now_ms: int) -> int:
    """A `timestampAsOf` value in epoch milliseconds: ISO 8601 or Spark's
    ``yyyy-MM-dd HH:mm:ss``, a date (its start), or ``now``; no zone means UTC, the session
    zone delta-ops uses."""
    text = timestamp_text.strip()
    if text.lower() == "now":
        return now_ms
    if " " in text and "T" not in text:  # Spark's 'yyyy-MM-dd HH:mm:ss' form
        text = text.replace(" ", "T", 1)
    if len(text) == 10:  # a date: its start
        text += "T00:00:00"
    if not text.endswith("Z") and "+" not in text[10:] and "-" not in text[10:]:
        text += "Z"  # no zone: the session zone delta-ops uses, UTC
    try:
        return parse_time_ms(text, now_ms=now_ms)
    except ValueError as exc:
        raise InvalidValue(f"timestampAsOf={timestamp_text!r}: {exc}") from None


def write_options(options: Mapping[str, str]) -> WriteOptions:
    """Parse a write's options: `path`, `partitionBy`, `mergeSchema`, `replaceWhere`,
    `txnAppId` with `txnVersion`, `storage.*` and `delta.*`."""
    path = options["path"] if options.get("path") else ""
    if not path:
        raise InvalidValue("df.write.format('delta').save(PATH): the table path is missing")
    lowered = {k.lower(): v for k, v in options.items()}
    return WriteOptions(
        path=path,
        storage_options=storage_options(options),
        partition_by=[c.strip() for c in lowered.get("partitionby", "").split(",") if c.strip()],
        merge_schema=lowered.get("mergeschema", "false").strip().lower() == "true",
        replace_where=lowered.get("replacewhere"),
        configuration=table_properties(options),
        app_transaction=app_transaction(lowered.get("txnappid"), lowered.get("txnversion")),
    )


def app_transaction(app_id: str | None, version_text: str | None) -> tuple[str, int] | None:
    """`txnAppId` and `txnVersion` (both or neither, as Delta asks) as (app id, version)."""
    if app_id is None and version_text is None:
        return None
    if not app_id or version_text is None:
        raise InvalidValue("an idempotent write needs both options txnAppId and txnVersion")
    try:
        version = int(version_text)
    except ValueError:
        version = -1
    if version < 0:
        raise InvalidValue(f"txnVersion={version_text!r}: a whole number, 0 or more")
    return app_id, version


__all__ = [
    "STORAGE_PREFIX",
    "ReadOptions",
    "WriteOptions",
    "app_transaction",
    "read_options",
    "storage_options",
    "table_properties",
    "timestamp_as_of_ms",
    "write_options",
]
