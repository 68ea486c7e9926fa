"""Tests for delta_ops.protocol.stats: footer-only stats against what real writers logged, against
stats computed from the data with pyarrow.compute, and the missing-statistics rules."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import os
import re
import struct
from decimal import Decimal
from pathlib import Path
from urllib.parse import unquote

import fsspec
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from delta_ops.protocol.properties import TableProperties
from delta_ops.protocol.schema import (
    StructField,
    StructType,
    from_arrow_schema,
    parse_schema,
    parse_stats,
    stats_schema,
)
from delta_ops.protocol.stats import (
    num_records_from_parquet_file,
    stats_from_parquet_metadata,
    stats_json_from_parquet_file,
    stats_to_json,
    truncate_max_string,
    truncate_min_string,
)
from tests.support import TABLES

MISSING = object()
_COMMIT = re.compile(r"\d{20}\.json")


# --------------------------------------------------------------------------- helpers


def _leaves(obj: dict, prefix: tuple[str, ...] = ()):
    for key, value in obj.items():
        if isinstance(value, dict):
            yield from _leaves(value, prefix + (key,))
        else:
            yield prefix + (key,), value


def _lookup(obj: dict, path: tuple[str, ...]):
    for key in path:
        if not isinstance(obj, dict) or key not in obj:
            return MISSING
        obj = obj[key]
    return obj


def _footer_column(metadata: pq.FileMetaData, path: tuple[str, ...]) -> int:
    dotted = ".".join(path)
    for i in range(metadata.num_columns):
        if metadata.schema.column(i).path == dotted:
            return i
    raise KeyError(dotted)


def _footer_has_min_max(metadata: pq.FileMetaData, path: tuple[str, ...]) -> bool:
    i = _footer_column(metadata, path)
    for rg in range(metadata.num_row_groups):
        s = metadata.row_group(rg).column(i).statistics
        if s is None or not s.has_min_max:
            if (
                s is not None
                and s.has_null_count
                and s.null_count == metadata.row_group(rg).num_rows
            ):
                continue
            return False
    physical = metadata.schema.column(i).physical_type
    return physical != "INT96"


def _footer_has_null_counts(metadata: pq.FileMetaData, path: tuple[str, ...]) -> bool:
    try:
        i = _footer_column(metadata, path)
    except KeyError:  # not a leaf: a map or array as a whole (Delta Spark counts its nulls)
        return False
    return all(
        metadata.row_group(rg).column(i).statistics is not None
        and metadata.row_group(rg).column(i).statistics.has_null_count
        for rg in range(metadata.num_row_groups)
    )


def _fixture_adds():
    """(table, add, metaData in effect) for every logged add with stats whose file exists."""
    for table in sorted(p for p in TABLES.glob("*/*") if (p / "_delta_log").is_dir()):
        meta = None
        for commit in sorted((table / "_delta_log").iterdir()):
            if not _COMMIT.fullmatch(commit.name):
                continue
            for line in commit.read_text().splitlines():
                if not line.strip():
                    continue
                action = json.loads(line)
                meta = action.get("metaData", meta)
                add = action.get("add")
                if add and add.get("stats") and (table / unquote(add["path"])).exists():
                    yield table, add, meta


def _ours_for(table: Path, add: dict, meta: dict) -> tuple[dict, pq.FileMetaData, pa.Schema]:
    props = TableProperties.from_configuration(meta.get("configuration") or {})
    schema = parse_schema(meta["schemaString"])
    mapping = props.column_mapping_mode != "none"
    metadata = pq.ParquetFile(table / unquote(add["path"])).metadata
    kwargs = {
        "num_indexed_cols": props.data_skipping_num_indexed_cols,
        "stats_columns": props.data_skipping_stats_columns,
    }
    ours = stats_from_parquet_metadata(
        metadata, schema, meta["partitionColumns"], column_mapping=mapping, **kwargs
    )
    sschema = stats_schema(schema, meta["partitionColumns"], physical=mapping, **kwargs)
    return ours, metadata, sschema


def _eligible(sschema: pa.Schema, key: str, path: tuple[str, ...]) -> bool:
    if key not in sschema.names:
        return False
    t = sschema.field(key).type
    for name in path:
        if not pa.types.is_struct(t) or t.get_field_index(name) < 0:
            return False
        t = t.field(name).type
    return True


# --------------------------------------------------------------------------- (1) fixtures


def test_fixture_stats_match_the_log():
    compared = {"numRecords": 0, "nullCount": 0, "minValues": 0, "maxValues": 0}
    for table, add, meta in _fixture_adds():
        ours, metadata, sschema = _ours_for(table, add, meta)
        # numbers as their text writes them: a decimal's (a Decimal in the footer) to the digit
        log = json.loads(add["stats"], parse_float=Decimal)
        where = f"{table.name}/{add['path']}"
        assert ours["numRecords"] == log["numRecords"], where
        compared["numRecords"] += 1

        for path, value in _leaves(log.get("nullCount", {})):
            got = _lookup(ours.get("nullCount", {}), path)
            if got is MISSING:
                # Only when the footer has no null count for the column.
                assert not _footer_has_null_counts(metadata, path), (where, path)
            else:
                assert got == value, (where, path)
                compared["nullCount"] += 1

        for key in ("minValues", "maxValues"):
            for path, value in _leaves(log.get(key, {})):
                if not _eligible(sschema, key, path):
                    # delta-rs also logs booleans' min/max; Spark (and stats_schema) do not.
                    continue
                got = _lookup(ours.get(key, {}), path)
                if got is MISSING:
                    # Documented: the footer has no usable min/max. Photon files
                    # ("parquet-mr compatible Photon version 0.2") have them only where
                    # pyarrow does not trust them (it reads that created_by as a parquet-mr
                    # too old for correct statistics); INT96 timestamps (Spark's default)
                    # have no defined order in parquet.
                    assert not _footer_has_min_max(metadata, path), (where, key, path)
                else:
                    if isinstance(value, Decimal) and not isinstance(got, Decimal):
                        value = float(value)  # a float column's value
                    assert got == value, (where, key, path)
                    compared[key] += 1
            # Nothing beyond what the writer logged (same column selection rules).
            for path, _ in _leaves(ours.get(key, {})):
                assert _lookup(log.get(key, {}), path) is not MISSING, (where, key, path)
        for path, _ in _leaves(ours.get("nullCount", {})):
            assert _lookup(log.get("nullCount", {}), path) is not MISSING, (where, path)

    assert compared["numRecords"] >= 200
    assert compared["nullCount"] >= 200
    assert compared["minValues"] >= 200 and compared["maxValues"] >= 200


def test_fixture_legacy_parquet_rs_zero_null_count_is_read_as_zero():
    # parquet-rs < 53.1 omitted null_count when it was 0 (apache/arrow-rs#6490); delta-rs
    # logged 0 for these files, and so do we.
    table = TABLES / "delta-rs" / "table_failed_last_checkpoint_update"
    adds = [(t, a, m) for t, a, m in _fixture_adds() if t == table]
    assert adds
    for t, add, meta in adds:
        ours, metadata, _ = _ours_for(t, add, meta)
        assert metadata.created_by.startswith("parquet-rs version 50.")
        assert not metadata.row_group(0).column(0).statistics.has_null_count
        assert ours["nullCount"] == {"id": 0, "price": 0, "sold": 0, "deleted": 0}


def test_fixture_column_mapping_uses_physical_names():
    table = TABLES / "delta-rs" / "table_with_column_mapping"
    (t, add, meta), *_ = [x for x in _fixture_adds() if x[0] == table]
    ours, _, _ = _ours_for(t, add, meta)
    assert list(ours["nullCount"]) == ["col-3877fd94-0973-4941-ac6b-646849a1ff65"]


# --------------------------------------------------------------------------- (2) pyarrow files

_LONG_TEXT = "Grüße aus Köln, schöne Grüße! " * 3  # > 32 characters, not ASCII
_EMOJI = "\U0001f600" * 40  # beyond the BMP: 2 UTF-16 units each
_UTC = dt.UTC


def _every_type_table() -> pa.Table:
    n = 10
    ts = [
        dt.datetime(2021, 1, 1, 10, 0, 0, 123456, tzinfo=_UTC) + dt.timedelta(days=i)
        for i in range(n)
    ]
    ts[3] = dt.datetime(1969, 12, 31, 23, 59, 59, 999500, tzinfo=_UTC)  # floors to .999
    ts[5] = None
    ntz = [None if t is None else t.replace(tzinfo=None) + dt.timedelta(hours=1) for t in ts]
    strings = ["m", None, _LONG_TEXT, "a" * 33, "zz" + _EMOJI, "b", "ß" * 40, None, "abc", "z"]
    struct_rows = [
        {"a": i, "b": {"c": None if i % 3 else f"c{i}"}} if i % 4 else None for i in range(n)
    ]
    return pa.table(
        {
            "long": pa.array([5, None, -7, 2**40, 0, 3, None, 9, 1, 2], pa.int64()),
            "int": pa.array(range(n), pa.int32()),
            "short": pa.array([-(2**15), 2**15 - 1] + [0] * (n - 2), pa.int16()),
            "byte": pa.array([1, -128, 127] + [None] * (n - 3), pa.int8()),
            "float": pa.array([0.1, -2.5, 3.25, None] + [1.0] * (n - 4), pa.float32()),
            "double": pa.array([1e-300, -1.5, 2.0**60, None, 0.1] + [0.0] * (n - 5)),
            "dec5": pa.array(
                [decimal.Decimal("1.50"), None, decimal.Decimal("-999.99")]
                + [decimal.Decimal("0.01")] * (n - 3),
                pa.decimal128(5, 2),
            ),
            "dec18": pa.array(
                [decimal.Decimal(f"{i * 12345}.0001") for i in range(n)], pa.decimal128(18, 4)
            ),
            "dec25": pa.array(
                [decimal.Decimal("-12345678901234567890.123")]
                + [decimal.Decimal(f"{i}.500") for i in range(n - 1)],
                pa.decimal128(25, 3),
            ),
            "string": pa.array(strings),
            "date": pa.array([dt.date(2020, 1, 1) + dt.timedelta(days=7 * i) for i in range(n)]),
            "ts": pa.array(ts, pa.timestamp("us", tz="UTC")),
            "ts_ntz": pa.array(ntz, pa.timestamp("us")),
            "ts_ns": pa.array(ts, pa.timestamp("us", tz="UTC")).cast(pa.timestamp("ns", tz="UTC")),
            "ts_ms": pa.array(ntz, pa.timestamp("us")).cast(pa.timestamp("ms"), safe=False),
            "bool": pa.array([True, None] + [False] * (n - 2)),
            "bin": pa.array([b"\x00\xff", None] + [b"x"] * (n - 2)),
            "sparse": pa.array([None] * 8 + [4, 2], pa.int64()),  # first row groups all null
            "empty": pa.array([None] * n, pa.int64()),
            "nested": pa.array(
                struct_rows,
                pa.struct([("a", pa.int64()), ("b", pa.struct([("c", pa.string())]))]),
            ),
            "list": pa.array(
                [[1, None], None, []] + [[i] for i in range(n - 3)], pa.list_(pa.int64())
            ),
            "map": pa.array([[("k", 1)], None] + [[]] * (n - 2), pa.map_(pa.string(), pa.int64())),
        }
    )


def _flat_leaves(table: pa.Table):
    """(path, array) of every non-nested column, struct parents' nulls applied (like Spark's
    `parent.child` which is null when the parent is)."""

    def walk(name_path, array):
        if pa.types.is_struct(array.type):
            for f, child in zip(array.type, array.flatten(), strict=True):
                yield from walk(name_path + (f.name,), child)
        else:
            yield name_path, array

    for name in table.column_names:
        yield from walk((name,), table.column(name).combine_chunks())


def _iso_millis(value: dt.datetime) -> str:
    epoch = dt.datetime(1970, 1, 1, tzinfo=value.tzinfo)
    micros = (value - epoch) // dt.timedelta(microseconds=1)
    floored = epoch + dt.timedelta(milliseconds=micros // 1000)
    return floored.replace(tzinfo=None).isoformat(timespec="milliseconds")


def _expected_stats(table: pa.Table) -> dict:
    """Spark's stats for `table`, computed from the data with pyarrow.compute."""
    mins: dict = {}
    maxs: dict = {}
    nulls: dict = {}
    for path, array in _flat_leaves(table):
        t = array.type
        if pa.types.is_list(t) or pa.types.is_map(t):
            continue  # arrays and maps: no stats from a footer
        _put(nulls, path, array.null_count)
        if pa.types.is_boolean(t) or pa.types.is_binary(t) or array.null_count == len(array):
            continue
        bounds = pc.min_max(array)
        low, high = bounds["min"].as_py(), bounds["max"].as_py()
        if pa.types.is_timestamp(t):
            suffix = "Z" if t.tz else ""
            low, high = _iso_millis(low) + suffix, _iso_millis(high) + suffix
        elif pa.types.is_date(t):
            low, high = low.isoformat(), high.isoformat()
        elif pa.types.is_string(t):
            low = low[:32]
        _put(mins, path, low)
        _put(maxs, path, high)
    return {"numRecords": table.num_rows, "minValues": mins, "maxValues": maxs, "nullCount": nulls}


def _put(target: dict, path: tuple[str, ...], value) -> None:
    for key in path[:-1]:
        target = target.setdefault(key, {})
    target[path[-1]] = value


@pytest.fixture
def every_type_file(tmp_path):
    table = _every_type_table()
    path = tmp_path / "every_type.parquet"
    pq.write_table(table, path, row_group_size=4, store_decimal_as_integer=True)
    metadata = pq.ParquetFile(path).metadata
    assert metadata.num_row_groups == 3
    physical = {
        metadata.schema.column(i).path: metadata.schema.column(i).physical_type
        for i in range(metadata.num_columns)
    }
    assert (physical["dec5"], physical["dec18"], physical["dec25"]) == (
        "INT32",
        "INT64",
        "FIXED_LEN_BYTE_ARRAY",
    )
    return table, path, metadata


def test_every_type_matches_stats_computed_from_the_data(every_type_file):
    table, _, metadata = every_type_file
    schema = from_arrow_schema(table.schema)
    ours = stats_from_parquet_metadata(metadata, schema, [], num_indexed_cols=-1)
    expected = _expected_stats(table)

    # The string max is cut with Spark's tie-breaker when longer than 32: checked below.
    ours_max_string = ours["maxValues"].pop("string")
    actual_max_string = expected["maxValues"].pop("string")
    assert actual_max_string == "ß" * 40
    assert ours_max_string == "ß" * 32 + "\ufffd"

    # float32: equal as float32 (Spark writes Float.toString, the shortest text).
    for key in ("minValues", "maxValues"):
        assert struct.pack("<f", ours[key].pop("float")) == struct.pack(
            "<f", expected[key].pop("float")
        )
    assert ours == expected
    assert ours["minValues"]["ts"] == "1969-12-31T23:59:59.999Z"
    assert ours["maxValues"]["ts_ntz"] == "2021-01-10T11:00:00.123"
    assert ours["minValues"]["dec5"] == decimal.Decimal("-999.99")
    assert ours["minValues"]["string"] == "Grüße aus Köln, schöne Grüße! Gr"


def test_every_type_json_is_spark_shaped_and_reads_back(every_type_file):
    table, path, metadata = every_type_file
    schema = from_arrow_schema(table.schema)
    text = stats_json_from_parquet_file(
        fsspec.filesystem("file"), str(path), schema, [], num_indexed_cols=-1
    )
    assert text == stats_to_json(
        stats_from_parquet_metadata(metadata, schema, [], num_indexed_cols=-1)
    )
    assert text.startswith('{"numRecords":10,"minValues":{"long":-7,"int":0,')
    assert '"float":-2.5' in text and '"dec5":-999.99' in text and '"dec18":0.0001' in text
    assert '"dec25":-12345678901234567890.123' in text  # exact, not a float
    assert '"ts_ns":"1969-12-31T23:59:59.999Z"' in text and '"date":"2020-01-01"' in text
    assert " " not in text.replace(_LONG_TEXT[:32], "")  # compact separators
    assert "\\u" not in text  # non-ASCII written as is, like Jackson
    assert '"nullCount":{' in text and '"list"' not in text and '"map"' not in text

    decoded = json.loads(text, parse_float=decimal.Decimal)
    assert decoded["maxValues"]["dec25"] == decimal.Decimal("8.500")
    parsed = parse_stats(
        pa.array([text]), stats_schema(schema, [], num_indexed_cols=-1), strict=True
    )
    row = parsed[0].as_py()
    assert row["numRecords"] == 10
    assert row["maxValues"]["ts"] == dt.datetime(2021, 1, 10, 10, 0, 0, 123000, tzinfo=_UTC)
    assert row["nullCount"]["nested"] == {"a": 3, "b": {"c": 7}}  # null parents count too


def test_float32_is_written_like_java_float_to_string(tmp_path):
    path = tmp_path / "f.parquet"
    pq.write_table(pa.table({"f": pa.array([0.1, 0.3], pa.float32())}), path)
    schema = from_arrow_schema(pq.read_schema(path))
    text = stats_json_from_parquet_file(fsspec.filesystem("file"), str(path), schema, [])
    assert (
        text == '{"numRecords":2,"minValues":{"f":0.1},"maxValues":{"f":0.3},"nullCount":{"f":0}}'
    )


def test_selection_partitions_mapping_and_missing_columns(tmp_path):
    # Data files hold physical names; the table has a column the file lacks and a partition.
    data = pa.table(
        {
            "col-a": pa.array([3, 1, None], pa.int64()),
            "col-s": pa.array(
                [{"col-x": "q"}, None, {"col-x": "r"}], pa.struct([("col-x", pa.string())])
            ),
            "col-b": pa.array(["x", "y", "z"]),
        }
    )
    path = tmp_path / "m.parquet"
    pq.write_table(data, path)
    metadata = pq.ParquetFile(path).metadata

    def mapped(name, physical, t):
        return StructField(name, t, True, {"delta.columnMapping.physicalName": physical})

    schema = StructType(
        (
            mapped("part", "col-p", "string"),
            mapped("A", "col-a", "long"),
            mapped("S", "col-s", StructType((mapped("X", "col-x", "string"),))),
            mapped("B", "col-b", "string"),
            mapped("New", "col-new", "date"),
        )
    )
    ours = stats_from_parquet_metadata(metadata, schema, ["part"], column_mapping=True)
    assert ours == {
        "numRecords": 3,
        "minValues": {"col-a": 1, "col-s": {"col-x": "q"}, "col-b": "x"},
        "maxValues": {"col-a": 3, "col-s": {"col-x": "r"}, "col-b": "z"},
        "nullCount": {"col-a": 1, "col-s": {"col-x": 1}, "col-b": 0, "col-new": 3},
    }
    first_two = stats_from_parquet_metadata(
        metadata, schema, ["part"], column_mapping=True, num_indexed_cols=2
    )
    assert first_two["nullCount"] == {"col-a": 1, "col-s": {"col-x": 1}}
    named = stats_from_parquet_metadata(
        metadata, schema, ["part"], column_mapping=True, stats_columns="B, s.x", tight_bounds=True
    )
    assert named == {
        "numRecords": 3,
        "minValues": {"col-s": {"col-x": "q"}, "col-b": "x"},
        "maxValues": {"col-s": {"col-x": "r"}, "col-b": "z"},
        "nullCount": {"col-s": {"col-x": 1}, "col-b": 0},
        "tightBounds": True,
    }
    as_paths = stats_from_parquet_metadata(
        metadata, schema, ["part"], column_mapping=True, stats_columns=(("b",), ("S", "X"))
    )
    assert as_paths["nullCount"] == named["nullCount"]


def test_only_boolean_columns_have_no_min_max_objects(tmp_path):
    path = tmp_path / "b.parquet"
    pq.write_table(pa.table({"b": [True, None]}), path)
    schema = from_arrow_schema(pq.read_schema(path))
    assert stats_from_parquet_metadata(pq.ParquetFile(path).metadata, schema, []) == {
        "numRecords": 2,
        "nullCount": {"b": 1},
    }


# --------------------------------------------------------------------------- (3) missing stats


def test_row_group_without_min_max_drops_the_columns_min_max(tmp_path):
    # Arrow drops a row group's min/max over 4 KB (its max_statistics_size), keeping the
    # null count: the other row groups' bounds no longer cover the file.
    table = pa.table({"id": [1, 2, 3, 4], "s": ["a", None, "x" * 5000, "c"]})
    path = tmp_path / "big.parquet"
    pq.write_table(table, path, row_group_size=2)
    metadata = pq.ParquetFile(path).metadata
    stats = [metadata.row_group(i).column(1).statistics for i in range(2)]
    assert stats[0].has_min_max and not stats[1].has_min_max and stats[1].has_null_count

    ours = stats_from_parquet_metadata(metadata, from_arrow_schema(table.schema), [])
    assert ours == {
        "numRecords": 4,
        "minValues": {"id": 1},
        "maxValues": {"id": 4},
        "nullCount": {"id": 0, "s": 1},
    }


def test_column_without_statistics_has_no_stats(tmp_path):
    table = pa.table({"id": [1, 2, 3], "s": ["a", None, "c"]})
    path = tmp_path / "nostats.parquet"
    pq.write_table(table, path, row_group_size=2, write_statistics=["id"])
    ours = stats_from_parquet_metadata(
        pq.ParquetFile(path).metadata, from_arrow_schema(table.schema), []
    )
    assert ours == {
        "numRecords": 3,
        "minValues": {"id": 1},
        "maxValues": {"id": 3},
        "nullCount": {"id": 0},
    }


def test_int96_timestamps_get_no_min_max(tmp_path):
    # INT96 has no defined order in parquet; Arrow writes no statistics for it at all (the
    # parquet-mr files of kernel/with-short-dv carry null counts only, see the fixture test).
    ts = pa.array([dt.datetime(2021, 1, 1), None], pa.timestamp("us", tz="UTC"))
    path = tmp_path / "int96.parquet"
    pq.write_table(pa.table({"ts": ts}), path, use_deprecated_int96_timestamps=True)
    metadata = pq.ParquetFile(path).metadata
    assert metadata.schema.column(0).physical_type == "INT96"
    schema = parse_schema(
        '{"type":"struct","fields":[{"name":"ts","type":"timestamp","nullable":true,"metadata":{}}]}'
    )
    assert stats_from_parquet_metadata(metadata, schema, []) == {
        "numRecords": 2,
        "minValues": {},
        "maxValues": {},
        "nullCount": {},
    }


# --------------------------------------------------------------------------- helpers and JSON


def test_num_records_reads_only_the_footer_on_any_fsspec_filesystem(tmp_path):
    table = pa.table({"id": list(range(7))})
    fs = fsspec.filesystem("memory")
    with fs.open("/t/part-0.parquet", "wb") as f:
        pq.write_table(table, f, row_group_size=3)
    try:
        assert num_records_from_parquet_file(fs, "/t/part-0.parquet") == 7
        text = stats_json_from_parquet_file(
            fs, "/t/part-0.parquet", from_arrow_schema(table.schema), []
        )
        assert (
            text
            == '{"numRecords":7,"minValues":{"id":0},"maxValues":{"id":6},"nullCount":{"id":0}}'
        )
    finally:
        fs.rm("/t", recursive=True)


def test_stats_to_json_writes_decimals_exactly_and_non_finite_quoted():
    stats = {
        "numRecords": 1,
        "minValues": {
            "d": decimal.Decimal("0E-8"),
            "f": float("-inf"),
            "big": decimal.Decimal("1.000000000000000000"),
        },
        "maxValues": {"d": decimal.Decimal("12.50"), "f": float("nan"), "s": 'a"\u00e9\n'},
    }
    assert stats_to_json(stats) == (
        '{"numRecords":1,"minValues":{"d":0E-8,"f":"-Infinity","big":1.000000000000000000},'
        '"maxValues":{"d":12.50,"f":"NaN","s":"a\\"\u00e9\\n"}}'
    )
    assert json.loads(stats_to_json(stats))["maxValues"]["d"] == 12.5


def test_string_truncation_follows_spark():
    assert truncate_min_string("a" * 40) == "a" * 32
    assert truncate_max_string("a" * 32) == "a" * 32
    assert truncate_max_string("a" * 33) == "a" * 32 + "\ufffd"
    # Characters not below the tie-breaker are kept, then the tie-breaker is appended.
    assert truncate_max_string("a" * 32 + "\uffff\ufffdb") == "a" * 32 + "\uffff\ufffd\ufffd"
    assert truncate_max_string("a" * 31 + _EMOJI) == "a" * 31 + _EMOJI + "\ufffd"


_text = st.text(st.characters(exclude_categories=("Cs",)), max_size=50)


@given(_text, _text)
def test_truncated_bounds_still_bound_every_value(value, other):
    low, high = sorted([value, other], key=lambda s: s.encode())
    assert truncate_min_string(low).encode() <= low.encode()
    assert truncate_max_string(high).encode() >= high.encode() >= low.encode()


# --------------------------------------------------------------------------- another writer


def test_agrees_with_delta_rs_up_to_its_formats(tmp_path):
    import deltalake

    table = _every_type_table().drop_columns(["ts_ms", "ts_ns", "sparse", "list", "map"])
    deltalake.write_deltalake(str(tmp_path / "t"), table)
    (commit,) = (tmp_path / "t" / "_delta_log").glob("*.json")
    add = next(
        json.loads(line)["add"] for line in commit.read_text().splitlines() if '"add"' in line
    )
    log = json.loads(add["stats"])
    metadata = pq.ParquetFile(os.path.join(tmp_path / "t", unquote(add["path"]))).metadata
    ours = stats_from_parquet_metadata(metadata, from_arrow_schema(table.schema), [])

    assert ours["numRecords"] == log["numRecords"]
    # delta-rs writes no stats at all for binary columns; Spark counts their nulls.
    assert {k: v for k, v in ours["nullCount"].items() if k != "bin"} == log["nullCount"]
    for key in ("minValues", "maxValues"):
        for path, value in _leaves(ours[key]):
            theirs = _lookup(log[key], path)
            if path[0] in ("ts", "ts_ntz"):
                # delta-rs: "2021-01-01T10:00:00Z" or "... 10:00:00.123" (space, no zone)
                as_instant = dt.datetime.fromisoformat(theirs.replace(" ", "T"))
                assert dt.datetime.fromisoformat(value) == as_instant
            elif path[0] == "string":
                # delta-rs keeps parquet-rs' 64-byte cuts (max: last char incremented);
                # ours are Spark's 32-character ones. Both bound the data.
                if key == "minValues":
                    assert theirs.startswith(value) and len(value) == 32
                else:
                    assert value.encode() >= pc.max(table["string"]).as_py().encode()
            elif isinstance(value, decimal.Decimal):
                assert float(value) == pytest.approx(theirs)  # delta-rs writes f64
            elif path[0] == "float":
                assert struct.pack("<f", value) == struct.pack("<f", theirs)
            else:
                assert value == theirs, (key, path)


_VARIANT = pa.struct(
    [pa.field("value", pa.binary(), nullable=False), pa.field("metadata", pa.binary(), False)]
)


def test_variant_null_count_comes_from_its_value_leaf(tmp_path):
    """A variant's null count, as Delta Spark writes it (a null struct above it counts), from
    the footer alone: its `value` leaf is null exactly where the variant is. No min/max."""
    some = {"value": b"\x0c\x01", "metadata": b"\x01\x00\x00"}
    data = pa.table(
        {
            "id": pa.array([1, 2, 3, 4], pa.int64()),
            "v": pa.array([some, None, some, None], _VARIANT),
            "s": pa.array(
                [{"n": 1, "w": some}, None, {"n": 3, "w": None}, {"n": 4, "w": some}],
                pa.struct([("n", pa.int32()), ("w", _VARIANT)]),
            ),
        }
    )
    path = tmp_path / "variant.parquet"
    pq.write_table(data, path, row_group_size=2)
    schema = parse_schema(
        '{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{}},'
        '{"name":"v","type":"variant","nullable":true,"metadata":{}},'
        '{"name":"s","type":{"type":"struct","fields":['
        '{"name":"n","type":"integer","nullable":true,"metadata":{}},'
        '{"name":"w","type":"variant","nullable":true,"metadata":{}}]},'
        '"nullable":true,"metadata":{}}]}'
    )
    expected = {
        "numRecords": 4,
        "minValues": {"id": 1, "s": {"n": 1}},
        "maxValues": {"id": 4, "s": {"n": 4}},
        "nullCount": {"id": 0, "v": 2, "s": {"n": 1, "w": 2}},
    }
    assert stats_from_parquet_metadata(pq.ParquetFile(path).metadata, schema, []) == expected
    fs = fsspec.filesystem("file")
    text = stats_json_from_parquet_file(fs, str(path), schema, [], read_data=True)
    assert json.loads(text) == expected
