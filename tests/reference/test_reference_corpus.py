"""The corpus as Delta Spark wrote it: it has the features it is meant to exercise, and delta-ops
reads the rows Delta Spark reads at every version."""

from __future__ import annotations

import pytest

from delta_ops.log.file_names import LogFileKind
from delta_ops.table.scan import read_table
from delta_ops.table.snapshot import load_snapshot
from tests.reference.corpus import TABLES, Corpus
from tests.reference.delta_spark import same_rows, sorted_rows


@pytest.mark.parametrize("table", [spec.name for spec in TABLES])
def test_we_read_what_delta_spark_reads_at_every_version(table: str, corpus: Corpus) -> None:
    built = corpus[table]
    protocol = load_snapshot(str(built.path)).protocol
    listed = set(protocol.reader_features or ()) | set(protocol.effective_writer_features)
    assert built.spec.features <= listed, listed
    for version, rows in built.rows.items():
        ours = sorted_rows(read_table(load_snapshot(str(built.path), version=version)))
        assert same_rows(ours, rows), (version, ours, rows)


def test_the_multi_part_checkpoints_are_there(corpus: Corpus) -> None:
    """The table written with `checkpoint.partSize` 2 has classic checkpoints in parts (named
    `N.checkpoint.P.T.parquet`), and our snapshot is built from one of them."""
    built = corpus["column_mapping_id"]
    log = built.path / "_delta_log"
    parts = sorted(p.name for p in log.glob("*.checkpoint.*.*.parquet"))
    assert len(parts) >= 2 and parts[0].split(".")[3] == parts[1].split(".")[3], parts
    checkpoint = load_snapshot(str(built.path)).segment.checkpoint
    assert checkpoint is not None and checkpoint.kind is LogFileKind.MULTI_PART_CHECKPOINT
    assert len(checkpoint.files) > 1, checkpoint.files
