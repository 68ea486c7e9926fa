"""Log lines of any length the reference engines write are read (issue 11).

pyarrow's JSON reader refuses a line longer than its block; a 1 MB block refused lines of
about 2 MB (wide schemas, huge stats), so a table another engine wrote could not be read.
"""

from __future__ import annotations

import json
from pathlib import Path

from delta_ops.table.snapshot import load_snapshot
from tests.support import log_builder as lb


def test_a_64_mb_line_is_read(tmp_path: Path) -> None:
    table = tmp_path / "t"
    lb.write_commit(table, 0, [lb.protocol(), lb.metadata()])
    big = lb.add("big.parquet", size=123)
    big["add"]["tags"] = {"blob": "x" * (64 << 20)}
    lb.write_commit(table, 1, [big, lb.add("small.parquet", size=7)])
    snapshot = load_snapshot(table)
    sizes = dict(
        zip(snapshot.files.column("path").to_pylist(), snapshot.files.column("size").to_pylist())
    )
    assert sizes == {"big.parquet": 123, "small.parquet": 7}


def test_a_3_mb_stats_line_among_many_commits(tmp_path: Path) -> None:
    table = tmp_path / "t"
    lb.write_commit(table, 0, [lb.protocol(), lb.metadata()])
    for v in range(1, 40):
        lb.write_commit(table, v, [lb.add(f"f{v}.parquet")])
    wide = lb.add("wide.parquet")
    wide["add"]["stats"] = json.dumps(
        {"numRecords": 5, "minValues": {f"c{i}": "v" * 300 for i in range(10_000)}}
    )
    lb.write_commit(table, 40, [wide])
    snapshot = load_snapshot(table)
    assert snapshot.num_files == 40 and snapshot.num_records == 39 * 10 + 5
