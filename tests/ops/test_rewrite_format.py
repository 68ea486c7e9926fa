"""The parquet format of every rewrite (issue 50.8): compaction, Z-order clustering and purge
write the codec ``--compression`` names (zstd by default) in row groups of at most about
``--row-group-size``, name their files as Spark names them for that codec, and peers read
the same rows back; a codec or size the option does not take is refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from delta_ops import cli
from delta_ops.table.snapshot import load_snapshot
from delta_ops.table.writer import write_arrow
from tests.support import deltalake_rows, duckdb_rows
from tests.support.rewrite_support import dv_table

ROWS = 4_000


def _appends(table: Path, files: int = 4) -> None:
    """`files` appends of ROWS // files rows: ids, random ints and strings (a few MB of Arrow
    in all, so a small row-group size cuts the rewritten file into several groups)."""
    rng = np.random.default_rng(50)
    per = ROWS // files
    for i in range(files):
        write_arrow(
            table,
            pa.table(
                {
                    "id": pa.array(np.arange(i * per, (i + 1) * per)),
                    "a": pa.array(rng.integers(0, 10_000, per)),
                    "s": pa.array([f"value-{v:08d}" for v in rng.integers(0, 10**8, per)]),
                }
            ),
        )


def _written(table: Path, result: dict[str, object]) -> list[pq.ParquetFile]:
    """The files a run's result says it wrote, opened."""
    names = result["files_written"]
    assert isinstance(names, list) and names
    return [pq.ParquetFile(table / name) for name in names]


def _codecs(files: list[pq.ParquetFile]) -> set[str]:
    """Every column chunk's codec in `files`."""
    return {
        f.metadata.row_group(g).column(c).compression
        for f in files
        for g in range(f.metadata.num_row_groups)
        for c in range(f.metadata.num_columns)
    }


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, object]:
    assert cli.main([*args, "--json"]) == 0
    result: dict[str, object] = json.loads(capsys.readouterr().out)
    return result


def test_compaction_writes_zstd_by_default_named_as_spark_names_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = tmp_path / "t"
    _appends(table)
    rows = duckdb_rows(table)
    plan = _run(capsys, "compact", str(table), "--dry-run")
    assert plan["parquet"] == {"compression": "zstd", "row_group_size": 64 * 1024**2}
    result = _run(capsys, "compact", str(table))
    files = _written(table, result)
    assert _codecs(files) == {"ZSTD"}
    assert all(str(name).endswith(".c000.zstd.parquet") for name in result["files_written"])  # type: ignore[union-attr]
    assert [f.metadata.num_row_groups for f in files] == [1]  # a few MB: one row group
    assert duckdb_rows(table) == rows and deltalake_rows(table) == rows


@pytest.mark.parametrize(
    ("codec", "parquet_name", "suffix"),
    [
        ("snappy", "SNAPPY", ".c000.snappy.parquet"),
        ("gzip", "GZIP", ".c000.gz.parquet"),
        ("lz4", "LZ4", ".c000.lz4raw.parquet"),  # pyarrow names parquet's LZ4_RAW "LZ4"
        ("uncompressed", "UNCOMPRESSED", ".c000.parquet"),
    ],
)
def test_compaction_writes_the_codec_and_row_groups_asked_for(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    codec: str,
    parquet_name: str,
    suffix: str,
) -> None:
    table = tmp_path / "t"
    _appends(table)
    rows = duckdb_rows(table)
    args = ["compact", str(table), "--compression", codec, "--row-group-size", "32KB"]
    result = _run(capsys, *args)
    files = _written(table, result)
    assert _codecs(files) == {parquet_name}
    assert all(str(name).endswith(suffix) for name in result["files_written"])  # type: ignore[union-attr]
    (meta,) = [f.metadata for f in files]
    # ~100 KB of Arrow data in row groups of at most about 32 KB each
    assert meta.num_row_groups >= 3
    groups = [meta.row_group(g) for g in range(meta.num_row_groups)]
    assert sum(g.num_rows for g in groups) == ROWS
    assert max(g.num_rows for g in groups) <= ROWS // 2
    assert duckdb_rows(table) == rows and deltalake_rows(table) == rows


def test_zorder_clustering_writes_the_codec_asked_for(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = tmp_path / "t"
    _appends(table)
    rows = duckdb_rows(table)
    result = _run(capsys, "compact", str(table), "--zorder-by", "a", "--compression", "snappy")
    assert _codecs(_written(table, result)) == {"SNAPPY"}
    assert duckdb_rows(table) == rows
    # and by default zstd, on a clustered rewrite too (--full rewrites the clustered files)
    result = _run(capsys, "compact", str(table), "--zorder-by", "a", "--full")
    assert _codecs(_written(table, result)) == {"ZSTD"}
    assert deltalake_rows(table) == rows


def test_purge_writes_the_codec_asked_for(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = dv_table(tmp_path)
    rows = duckdb_rows(table)
    result = _run(capsys, "purge", str(table), "--compression", "gzip")
    assert _codecs(_written(table, result)) == {"GZIP"}
    assert duckdb_rows(table) == rows and deltalake_rows(table) == rows
    assert all(
        f["path"].endswith(".c000.gz.parquet") for f in load_snapshot(table).files.to_pylist()
    )


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--compression", "brotli", "--compression: 'brotli' is not one of zstd, snappy"),
        ("--row-group-size", "0", "--row-group-size: '0' is not a size of at least 1 byte"),
        ("--row-group-size", "big", "--row-group-size:"),
    ],
)
def test_a_codec_or_size_the_options_do_not_take_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str, value: str, message: str
) -> None:
    table = tmp_path / "t"
    _appends(table, files=2)
    before = load_snapshot(table).version
    for op in ("compact", "purge"):
        with pytest.raises(SystemExit) as exited:
            code = cli.main([op, str(table), flag, value])
            raise SystemExit(code)
        assert exited.value.code == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and message in err, err
    assert load_snapshot(table).version == before


def test_a_clustering_keeps_dictionaries_small_and_a_compaction_as_arrow_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A clustering writes with 64 KB dictionaries (`cluster.DICTIONARY_PAGE_BYTES`): a column
    of distinct values goes plain early instead of buffering 1 MB of dictionary and its pages
    (issue 50.4); bin-packing keeps Arrow's default."""
    from delta_ops.ops import rewrite

    limits: list[object] = []
    writer = rewrite.pq.ParquetWriter

    def recorded(*args: object, **kwargs: object) -> object:
        limits.append(kwargs.get("dictionary_pagesize_limit"))
        return writer(*args, **kwargs)

    monkeypatch.setattr(rewrite.pq, "ParquetWriter", recorded)
    table = tmp_path / "t"
    _appends(table)
    rows = duckdb_rows(table)
    _run(capsys, "compact", str(table), "--zorder-by", "a")
    assert limits and set(limits) == {64 * 1024}
    limits.clear()
    _appends(table)
    _run(capsys, "compact", str(table))
    assert limits and set(limits) == {None}
    assert len(duckdb_rows(table)) == 2 * len(rows)


def test_a_parquet_format_passes_its_dictionary_size_to_the_writer() -> None:
    from delta_ops.table.parquet_format import ParquetFormat

    assert "dictionary_pagesize_limit" not in ParquetFormat().writer_options()
    options = ParquetFormat(dictionary_page_bytes=65536).writer_options()
    assert options["dictionary_pagesize_limit"] == 65536
