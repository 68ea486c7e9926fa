"""`spark.readStream.format("delta")`: a table's appends as a Structured Streaming source.

Offsets are table versions, ``{"version": v}`` meaning "read through version v". The first
micro-batch of a new query reads the table as of the latest version then (every live file, as
a batch read would), unless ``startingVersion`` says where to begin (``latest``: only what is
committed after the query starts). Each later micro-batch reads the files the commits after
the previous offset added (``dataChange`` adds), with the reader's scan (deletion vectors,
column mapping, typed partition values):

    stream = spark.readStream.format("delta").load("/warehouse/events")
    stream = spark.readStream.format("delta").option("startingVersion", 5).load(path)

Appends only, as Delta Spark's source by default: a commit that removes rows (a DELETE, an
overwrite, a MERGE) fails the query in one line, or is skipped whole with
``skipChangeCommits=true``; commits that only rearrange files (``dataChange=false``: compaction,
purge) are skipped. A commit that changes the schema, the partitioning or column mapping fails
the query (restart it to read the new schema), as does a version the log no longer has (log
cleanup ran past the query). No rate limit: each micro-batch reads everything available.

Spark keeps the offsets in the query's checkpoint, so a restarted query reads each version once;
the reader holds no other state.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

from delta_ops.errors import InvalidValue, OperationRefused
from delta_ops.log.file_names import commit_file_name
from delta_ops.log.reader import read_commit_actions
from delta_ops.protocol.features import Access, Protocol
from delta_ops.protocol.schema import parse_schema
from delta_ops.spark.options import read_options
from delta_ops.spark.scan_tasks import FilesPartition, group_files
from delta_ops.storage import Storage
from delta_ops.table.scan import FileToRead, plan_scan, read_batches, scan_spec
from delta_ops.table.snapshot import Snapshot, load_head, load_snapshot

#: the offset of a query that starts by reading the table as of its first batch's version
INITIAL_SNAPSHOT: dict[str, Any] = {"version": -1, "snapshot": True}


def starting_offset(options: Mapping[str, str], latest: int) -> dict[str, Any]:
    """Where a new query starts: `startingVersion` (a version, or ``latest``), else the
    snapshot as of its first batch."""
    lowered = {k.lower(): v for k, v in options.items()}
    text = lowered.get("startingversion")
    if text is None:
        return dict(INITIAL_SNAPSHOT)
    if text.strip().lower() == "latest":
        return {"version": latest}
    try:
        version = int(text)
    except ValueError:
        version = -1
    if version < 0:
        raise InvalidValue(f"startingVersion={text!r}: a table version (0 or more) or 'latest'")
    if version > latest + 1:
        raise InvalidValue(f"startingVersion={version}: the table's latest version is {latest}")
    return {"version": version - 1}


def _changes_data(action: Mapping[str, Any], kind: str) -> bool:
    """Whether `action` is an add or remove of `kind` that changes rows (not a rearrangement
    of them: compaction's and purge's are ``dataChange=false``)."""
    body = action.get(kind)
    return isinstance(body, Mapping) and body.get("dataChange", True) is not False


def _add_to_read(add: Mapping[str, Any]) -> FileToRead:
    dv = add.get("deletionVector")
    return FileToRead(
        path=add["path"],
        size=int(add.get("size") or 0),
        partition_values=tuple((add.get("partitionValues") or {}).items()),
        deletion_vector=tuple((k, v) for k, v in dv.items() if v is not None) if dv else None,
    )


class DeltaStreamReader(DataSourceStreamReader):
    """Plans each micro-batch on the driver from the log; reads files in the tasks."""

    def __init__(self, snapshot: Snapshot, options: dict[str, str], columns: list[str]) -> None:
        read = read_options(options)
        if read.version is not None or read.timestamp is not None:
            raise InvalidValue(
                "a streaming read takes startingVersion, not versionAsOf or timestampAsOf"
            )
        self.path = read.path
        self.storage_options = read.storage_options
        self.spec = scan_spec(snapshot, columns)
        self.start = starting_offset(options, snapshot.version)
        lowered = {k.lower(): v for k, v in options.items()}
        self.skip_change_commits = lowered.get("skipchangecommits", "").lower() == "true"
        self.until: int | None = None  # an availableNow query's last version

    def _storage(self) -> Storage:
        return Storage.open(self.path, self.storage_options or None)

    def initialOffset(self) -> dict[str, Any]:
        return dict(self.start)

    def prepareForTriggerAvailableNow(self) -> None:
        """`trigger(availableNow=True)`: read up to the version that is the latest now."""
        self.until = load_head(self._storage()).version

    def latestOffset(
        self, start: dict[str, Any] | None = None, limit: Any = None
    ) -> dict[str, Any]:
        """The newest version (checked by name from the start offset on: one request when
        nothing was committed), or an availableNow query's last one."""
        storage = self._storage()
        if start is None or start.get("snapshot"):
            version = load_head(storage).version
            floor = -1
        else:
            version = floor = int(start["version"])
            while storage.exists(storage.log_file(commit_file_name(version + 1))):
                version += 1
        if self.until is not None:
            version = max(min(version, self.until), floor)
        return {"version": version}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[FilesPartition]:
        last = int(end["version"])
        if start.get("snapshot"):
            snapshot = load_snapshot(self._storage(), last)
            self._check_same_table(snapshot.metadata.to_action(), last)
            return group_files(plan_scan(snapshot, self.spec.columns)[1])
        files = [
            file
            for version in range(int(start["version"]) + 1, last + 1)
            for file in self._appended(version)
        ]
        return group_files(files) if files else []

    def _appended(self, version: int) -> list[FileToRead]:
        """The files commit `version` added with new rows; refused or skipped when it also
        removed rows, refused when it changed the schema."""
        storage = self._storage()
        try:
            actions = read_commit_actions(storage, version)
        except FileNotFoundError:
            raise OperationRefused(
                f"{storage.url}: version {version} is no longer in the log (log cleanup); start"
                " the query again with a startingVersion the log still has"
            ) from None
        for action in actions:
            if "protocol" in action:
                Protocol.from_action(action["protocol"]).check_allows(Access.READ_ROWS)
            if "metaData" in action:
                self._check_same_table(action["metaData"], version)
        changes = [a["remove"] for a in actions if _changes_data(a, "remove")]
        if changes:
            if self.skip_change_commits:
                return []
            operation = next(
                (a["commitInfo"].get("operation") for a in actions if "commitInfo" in a), None
            )
            raise OperationRefused(
                f"{storage.url}: version {version} ({operation or 'a commit'}) removed or"
                f" changed rows ({changes[0].get('path')}); a streaming read takes appends"
                " only: set skipChangeCommits=true to skip such commits"
            )
        return [_add_to_read(a["add"]) for a in actions if _changes_data(a, "add")]

    def _check_same_table(self, metadata: Mapping[str, Any], version: int) -> None:
        """Refuse a version whose schema, partitioning or column mapping is not the query's."""
        configuration = metadata.get("configuration") or {}
        mapped = configuration.get("delta.columnMapping.mode", "none") != "none"
        same = (
            parse_schema(metadata["schemaString"]).to_json() == self.spec.schema_json
            and tuple(metadata.get("partitionColumns") or ()) == self.spec.partition_columns
            and mapped == self.spec.column_mapping
        )
        if not same:
            raise OperationRefused(
                f"{self.path}: version {version} changed the table's schema, partitioning or"
                " column mapping since the streaming query started; start the query again"
            )

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, FilesPartition)
        yield from read_batches(self._storage(), self.spec, partition.files)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to release: the offsets are Spark's to keep."""


def _declare_available_now() -> None:
    """Tell Spark the reader supports `trigger(availableNow=True)` (PySpark 4.2 and later
    ask; older ones run such a query as a single batch)."""
    try:
        from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow
    except ImportError:
        return
    SupportsTriggerAvailableNow.register(DeltaStreamReader)


_declare_available_now()

__all__ = [
    "INITIAL_SNAPSHOT",
    "DeltaStreamReader",
    "starting_offset",
]
