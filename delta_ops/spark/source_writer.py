"""`df.write.format("delta")`: the write half of the `delta` Python data source.

Each Spark task writes its rows as parquet files inside the table (one per partition value set,
with :func:`delta_ops.table.writer.write_data_files`) and reports them; the driver commits every
task's files as one version through the commit layer (conflict detection, per-file statistics,
row ids where row tracking is on), or deletes them if the job failed::

    df.write.format("delta").mode("append").save("/warehouse/events")
    df.write.format("delta").mode("overwrite").option("partitionBy", "day").save(path)

Options: ``partitionBy`` (comma-separated, for a new table; an existing table keeps its own),
``mergeSchema`` (``true`` adds the DataFrame's new columns to the table's schema in the same
commit), ``replaceWhere`` (an overwrite replaces only the partitions the predicate selects),
``storage.*`` (the table's storage options), and ``delta.*`` table properties for a
new table.
:func:`delta_ops.spark.write_delta` is the function form of the same write.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from delta_ops.errors import DeltaOpsError
from delta_ops.storage import Storage
from delta_ops.table.write_target import resolve_write_target
from delta_ops.table.writer import (
    DataFile,
    commit_data_files,
    discard_uncommitted,
    write_data_files,
)

if TYPE_CHECKING:
    from pyspark.sql.types import StructType as SparkStructType


@dataclass
class WrittenFiles(WriterCommitMessage):
    """What one task wrote (not yet committed)."""

    files: list[DataFile]


def table_properties(options: dict[str, str]) -> dict[str, str]:
    """The `delta.*` options as table properties, with their case restored: Spark hands a data
    source its options with lower-cased keys, while the log's property names are case-sensitive."""
    from delta_ops.protocol import properties

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
            raise DeltaOpsError(
                f"table property {key!r}: not one delta-ops knows, and Spark lower-cases option "
                "names, so its spelling is lost; create the table with write_delta("
                "configuration=...) instead"
            )
        out[known.get(key.lower(), key)] = value
    return out


class DeltaWriter(DataSourceArrowWriter):
    """Writes in the tasks, commits (or cleans up) on the driver."""

    def __init__(self, options: dict[str, str], schema: SparkStructType, overwrite: bool) -> None:
        from pyspark.sql.pandas.types import to_arrow_schema

        from delta_ops.spark.source import storage_options

        self.path = options["path"] if options.get("path") else ""
        if not self.path:
            raise DeltaOpsError("df.write.format('delta').save(PATH): the table path is missing")
        self.storage_options = storage_options(options)
        self.schema = to_arrow_schema(schema)
        self.mode = "overwrite" if overwrite else "append"
        self.configuration = table_properties(options)
        lowered = {k.lower(): v for k, v in options.items()}
        wanted = [c.strip() for c in lowered.get("partitionby", "").split(",") if c.strip()]
        # decided once, before any task writes a file: refusals, partitioning, column mapping
        self.target = resolve_write_target(
            self._storage(),
            self.schema,
            partition_by=wanted,
            mode=self.mode,
            configuration=self.configuration or None,
            merge_schema=lowered.get("mergeschema", "false").strip().lower() == "true",
            replace_where=lowered.get("replacewhere"),
        )

    def _storage(self) -> Storage:
        return Storage.open(self.path, self.storage_options or None)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WrittenFiles:
        from pyspark import TaskContext

        batches = list(iterator)
        if not batches:
            return WrittenFiles([])
        context = TaskContext.get()
        task = context.partitionId() if context is not None else 0
        data = pa.Table.from_batches(batches).cast(self.schema)
        return WrittenFiles(write_data_files(self._storage(), data, self.target, task=task))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        files = [f for m in messages if isinstance(m, WrittenFiles) for f in m.files]
        commit_data_files(self._storage(), files, self.target)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Delete what the tasks wrote, unless the log references it (a commit whose
        response was lost did land)."""
        written = [
            f.relative_path for m in messages if isinstance(m, WrittenFiles) for f in m.files
        ]
        discard_uncommitted(self._storage(), written)


__all__ = ["DeltaWriter", "WrittenFiles"]
