"""The files each Spark task of a scan reads: the batch reader's and the streaming reader's
partitions (`delta_ops.spark.source`, `delta_ops.spark.stream_reader`).

    partitions = group_files(files)      # consecutive files, about 128 MB per task
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql.datasource import InputPartition

from delta_ops.table.scan import FileToRead

BYTES_PER_TASK = 128 * 1024 * 1024


class FilesPartition(InputPartition):
    """The files one Spark task reads."""

    def __init__(self, index: int, files: list[FileToRead]) -> None:
        super().__init__(index)
        self.files = files


def group_files(
    files: Sequence[FileToRead], bytes_per_task: int = BYTES_PER_TASK
) -> list[FilesPartition]:
    """Consecutive files in tasks of about `bytes_per_task` each (one empty task when there
    are no files)."""
    groups: list[list[FileToRead]] = [[]]
    size = 0
    for file in files:
        if groups[-1] and size + file.size > bytes_per_task:
            groups.append([])
            size = 0
        groups[-1].append(file)
        size += file.size
    return [FilesPartition(i, g) for i, g in enumerate(groups)]


__all__ = ["BYTES_PER_TASK", "FilesPartition", "group_files"]
