"""Tests of delta_ops.protocol.schema against the real fixture tables and hand-made cases."""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from delta_ops.errors import DeltaOpsError
from delta_ops.protocol import string_bytes
from delta_ops.protocol.schema import (
    ArrayType,
    MapType,
    StructField,
    StructType,
    from_arrow_schema,
    from_arrow_type,
    parse_partition_values,
    parse_schema,
    parse_stats,
    partition_schema,
    physical_name,
    stats_schema,
    to_arrow_schema,
    to_arrow_type,
)
from delta_ops.protocol.string_bytes import any_holds
from tests.support import TABLES

COMMIT = re.compile(r"^\d{20}\.json$")
UTC = dt.UTC


def _json_actions(path: Path):
    for line in path.read_text().splitlines():
        if line.strip():
            yield json.loads(line)


def _log_json_files() -> list[Path]:
    return sorted(TABLES.glob("*/*/_delta_log/*.json"))


def _fixture_schema_strings() -> dict[str, str]:
    """Every distinct schemaString in the fixtures' JSON log files, keyed by one source."""
    found: dict[str, str] = {}
    for path in _log_json_files():
        for action in _json_actions(path):
            text = (action.get("metaData") or {}).get("schemaString")
            if text and text not in found.values():
                found[f"{path.relative_to(TABLES)}#{len(found)}"] = text
    return found


def _checkpoint_files() -> list[Path]:
    return sorted(TABLES.glob("*/*/_delta_log/**/*.parquet"))


def _table_metadata(table: Path) -> dict:
    """The latest metaData of a table whose log starts at version 0 in JSON."""
    meta = None
    for path in sorted(p for p in (table / "_delta_log").iterdir() if COMMIT.match(p.name)):
        for action in _json_actions(path):
            meta = action.get("metaData", meta)
    assert meta is not None
    return meta


# --------------------------------------------------------------------------- schema JSON


SCHEMA_STRINGS = _fixture_schema_strings()


def test_fixtures_hold_schema_strings():
    assert len(SCHEMA_STRINGS) >= 15


@pytest.mark.parametrize("source", sorted(SCHEMA_STRINGS))
def test_fixture_schema_round_trips_byte_for_byte(source):
    text = SCHEMA_STRINGS[source]
    schema = parse_schema(text)
    assert isinstance(schema, StructType)
    assert schema.to_json() == text
    assert parse_schema(schema.to_json()) == schema
    to_arrow_schema(schema)
    to_arrow_schema(schema, physical=True)


def test_checkpoint_and_data_file_schemas_round_trip():
    texts = set()
    for path in _checkpoint_files():
        table = pq.read_table(path)
        if "metaData" in table.column_names:
            for meta in table.column("metaData").to_pylist():
                if meta and meta.get("schemaString"):
                    texts.add(meta["schemaString"])
    for path in TABLES.glob("*/*/**/*.parquet"):
        if "_delta_log" not in path.parts:
            spark = (pq.read_schema(path).metadata or {}).get(
                b"org.apache.spark.sql.parquet.row.metadata"
            )
            if spark:
                texts.add(spark.decode())
    assert len(texts) > 10
    for text in texts:
        assert parse_schema(text).to_json() == text


def test_spark_written_data_files_match_to_arrow_schema():
    """Spark's own schema of a data file, converted by us, names and types its columns."""
    checked = 0
    for path in TABLES.glob("*/*/**/*.parquet"):
        if "_delta_log" in path.parts:
            continue
        actual = pq.read_schema(path)
        spark = (actual.metadata or {}).get(b"org.apache.spark.sql.parquet.row.metadata")
        if not spark:
            continue
        ours = to_arrow_schema(parse_schema(spark.decode()))
        assert ours.names == actual.names
        for mine, theirs in zip(ours, actual):
            if pa.types.is_timestamp(mine.type):  # INT96 / units vary by writer
                assert pa.types.is_timestamp(theirs.type)
            else:
                assert mine.type == theirs.type, path
        checked += 1
    assert checked > 20


def test_column_mapping_physical_names_match_data_files():
    table = TABLES / "delta-rs/table_with_column_mapping"
    meta = _table_metadata(table)
    schema = parse_schema(meta["schemaString"])
    partition = set(meta["partitionColumns"])
    physical = to_arrow_schema(
        StructType(tuple(f for f in schema if f.name not in partition)), physical=True
    )
    data_files = sorted(table.glob("*/*.parquet"))
    assert data_files
    for path in data_files:
        actual = pq.read_schema(path)
        assert physical.names == actual.names
        assert physical.field(0).metadata == actual.field(0).metadata  # PARQUET:field_id
    assert to_arrow_schema(schema).names == ["Company Very Short", "Super Name"]
    assert {f.name: physical_name(f) for f in schema.fields} == {
        "Company Very Short": "col-173b4db9-b5ad-427f-9e75-516aae37fbbb",
        "Super Name": "col-3877fd94-0973-4941-ac6b-646849a1ff65",
    }


PROTOCOL_EXAMPLE = (
    '{"type":"struct","fields":['
    '{"name":"a","type":"integer","nullable":false,"metadata":{}},'
    '{"name":"b","type":{"type":"struct","fields":[{"name":"d","type":"integer",'
    '"nullable":false,"metadata":{}}]},"nullable":true,"metadata":{}},'
    '{"name":"c","type":{"type":"array","elementType":"integer","containsNull":false},'
    '"nullable":true,"metadata":{}},'
    '{"name":"e","type":{"type":"array","elementType":{"type":"struct","fields":[{"name":"d",'
    '"type":"integer","nullable":false,"metadata":{"delta.columnMapping.id":5,'
    '"delta.columnMapping.physicalName":"col-d"}}]},"containsNull":true},"nullable":true,'
    '"metadata":{"delta.columnMapping.id":4,"delta.columnMapping.physicalName":"col-e"}},'
    '{"name":"f","type":{"type":"map","keyType":"string","valueType":"string",'
    '"valueContainsNull":true},"nullable":true,"metadata":{}},'
    '{"name":"g","type":"decimal(10,2)","nullable":true,"metadata":{"comment":"ünïcode \\"q\\""}},'
    '{"name":"h","type":"timestamp_ntz","nullable":true,"metadata":{}},'
    '{"name":"v","type":"variant","nullable":true,"metadata":{}}]}'
)


def test_nested_schema_parses_and_serializes_in_spark_order():
    schema = parse_schema(PROTOCOL_EXAMPLE)
    assert schema.names == ["a", "b", "c", "e", "f", "g", "h", "v"]
    assert schema.field("a") == StructField("a", "integer", False, {})
    assert schema.field("c").type == ArrayType("integer", False)
    assert schema.field("f").type == MapType("string", "string", True)
    element = schema.field("e").type.element_type
    assert physical_name(element.field("d")) == "col-d"
    assert schema.field("g").metadata == {"comment": 'ünïcode "q"'}
    assert schema.to_json() == PROTOCOL_EXAMPLE


def test_parse_schema_is_lenient_where_spark_is():
    schema = parse_schema(
        '{"type":"struct","fields":[{"name":"x","type":"decimal"},'
        '{"name":"y","type":"decimal( 5 , 1 )","nullable":false},'
        '{"name":"z","type":{"type":"array","elementType":"long"}}]}'
    )
    assert schema.field("x") == StructField("x", "decimal(10,0)", True, {})
    assert schema.field("y").type == "decimal(5,1)"
    assert schema.field("z").type == ArrayType("long", True)
    assert '"metadata":{}' in schema.to_json()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "not valid JSON"),
        ('"long"', "must describe a struct"),
        ('{"type":"struct","fields":[{"name":"a","type":"uuid"}]}', "'uuid' (column a)"),
        (
            (
                '{"type":"struct","fields":[{"name":"a","type":{"type":"struct","fields":'
                '[{"name":"b","type":{"type":"array","elementType":"interval"}}]}}]}'
            ),
            "'interval' (column a.b.element)",
        ),
        ('{"type":"struct","fields":[{"name":"a","type":"decimal(40,2)"}]}', "decimal(40,2)"),
        (
            '{"type":"struct","fields":[{"name":"a","type":{"type":"map","keyType":"string"}}]}',
            "without 'valueType'",
        ),
    ],
)
def test_parse_schema_errors_name_the_problem(text, message):
    with pytest.raises(DeltaOpsError, match=re.escape(message)):
        parse_schema(text)


# --------------------------------------------------------------------------- Arrow


@pytest.mark.parametrize(
    ("delta", "arrow"),
    [
        ("string", pa.string()),
        ("long", pa.int64()),
        ("integer", pa.int32()),
        ("short", pa.int16()),
        ("byte", pa.int8()),
        ("float", pa.float32()),
        ("double", pa.float64()),
        ("boolean", pa.bool_()),
        ("binary", pa.binary()),
        ("date", pa.date32()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("timestamp_ntz", pa.timestamp("us")),
        ("decimal(10,2)", pa.decimal128(10, 2)),
        ("decimal(38,0)", pa.decimal128(38, 0)),
        ("void", pa.null()),
        (
            "variant",
            pa.struct(
                [pa.field("value", pa.binary(), False), pa.field("metadata", pa.binary(), False)]
            ),
        ),
    ],
)
def test_primitive_to_arrow(delta, arrow):
    assert to_arrow_type(delta) == arrow


def test_nested_to_arrow_logical_and_physical():
    schema = parse_schema(PROTOCOL_EXAMPLE)
    logical = to_arrow_schema(schema)
    assert logical.field("a") == pa.field("a", pa.int32(), nullable=False)
    assert logical.field("c").type == pa.list_(pa.field("element", pa.int32(), nullable=False))
    assert logical.field("f").type == pa.map_(pa.string(), pa.string())
    assert logical.field("e").type == pa.list_(
        pa.field("element", pa.struct([pa.field("d", pa.int32(), nullable=False)]))
    )
    physical = to_arrow_schema(schema, physical=True)
    assert physical.names == ["a", "b", "c", "col-e", "f", "g", "h", "v"]
    element = physical.field("col-e").type.value_type
    assert element.field(0).name == "col-d"
    assert element.field(0).metadata == {b"PARQUET:field_id": b"5"}
    assert physical.field("col-e").metadata == {b"PARQUET:field_id": b"4"}


def test_unknown_type_to_arrow_is_an_error():
    with pytest.raises(DeltaOpsError, match="uuid"):
        to_arrow_type("uuid")


def test_from_arrow_widens_and_defaults_to_nullable():
    schema = pa.schema(
        [
            pa.field("u8", pa.uint8(), nullable=False),
            pa.field("u16", pa.uint16()),
            pa.field("u32", pa.uint32()),
            pa.field("u64", pa.uint64()),
            pa.field("ls", pa.large_string()),
            pa.field("lb", pa.large_binary()),
            pa.field("ts_ns", pa.timestamp("ns", tz="Europe/Berlin")),
            pa.field("ts_ms", pa.timestamp("ms")),
            pa.field("d64", pa.date64()),
            pa.field("dict", pa.dictionary(pa.int32(), pa.string())),
            pa.field("ll", pa.large_list(pa.field("x", pa.int64(), nullable=False))),
            pa.field("h", pa.float16()),
        ]
    )
    delta = from_arrow_schema(schema)
    assert [f.type for f in delta] == [
        "short",
        "integer",
        "long",
        "decimal(20,0)",
        "string",
        "binary",
        "timestamp",
        "timestamp_ntz",
        "date",
        "string",
        ArrayType("long", True),
        "float",
    ]
    assert all(f.nullable for f in delta)
    kept = from_arrow_schema(schema, keep_nullability=True)
    assert not kept.field("u8").nullable
    assert kept.field("ll").type == ArrayType("long", False)
    with pytest.raises(DeltaOpsError, match="duration"):
        from_arrow_type(pa.duration("s"))


_LEAVES = st.sampled_from(
    [
        pa.string(),
        pa.int64(),
        pa.int32(),
        pa.int16(),
        pa.int8(),
        pa.float32(),
        pa.float64(),
        pa.bool_(),
        pa.binary(),
        pa.date32(),
        pa.timestamp("us", tz="UTC"),
        pa.timestamp("us"),
        pa.decimal128(10, 2),
        pa.decimal128(38, 18),
    ]
)
_NAMES = st.text(min_size=1, max_size=8)


def _arrow_types(nullable: bool):
    def extend(children):
        fields = st.lists(
            st.tuples(_NAMES, children, st.booleans()),
            min_size=1,
            max_size=4,
            unique_by=lambda t: t[0],
        )
        return st.one_of(
            st.tuples(children, st.booleans()).map(
                lambda c: pa.list_(pa.field("element", c[0], nullable=nullable or c[1]))
            ),
            st.tuples(_LEAVES, children, st.booleans()).map(
                lambda c: pa.map_(
                    pa.field("key", c[0], nullable=False),
                    pa.field("value", c[1], nullable=nullable or c[2]),
                )
            ),
            fields.map(
                lambda fs: pa.struct([pa.field(n, t, nullable=nullable or b) for n, t, b in fs])
            ),
        )

    return st.recursive(_LEAVES, extend, max_leaves=8)


def _arrow_schemas(nullable: bool):
    return st.lists(
        st.tuples(_NAMES, _arrow_types(nullable), st.booleans()),
        min_size=1,
        max_size=5,
        unique_by=lambda t: t[0],
    ).map(lambda fs: pa.schema([pa.field(n, t, nullable=nullable or b) for n, t, b in fs]))


@settings(max_examples=150, deadline=None)
@given(_arrow_schemas(nullable=True))
def test_from_arrow_round_trips_nullable_schemas(schema):
    delta = from_arrow_schema(schema)
    assert to_arrow_schema(delta) == schema
    assert parse_schema(delta.to_json()) == delta


@settings(max_examples=100, deadline=None)
@given(_arrow_schemas(nullable=False))
def test_from_arrow_keeps_nullability_when_asked(schema):
    assert to_arrow_schema(from_arrow_schema(schema, keep_nullability=True)) == schema


# --------------------------------------------------------------------------- partition values


def _utc(*args) -> dt.datetime:
    return dt.datetime(*args, tzinfo=UTC)


@pytest.mark.parametrize(
    ("delta_type", "values", "expected"),
    [
        ("string", ["a", "", None, " b "], ["a", None, None, " b "]),
        ("long", ["1", "-9223372036854775808", "", None], [1, -(2**63), None, None]),
        ("integer", ["2147483647", "0"], [2**31 - 1, 0]),
        ("short", ["-32768"], [-32768]),
        ("byte", ["127"], [127]),
        (
            "double",
            ["1.5", "NaN", "Infinity", "-Infinity", "1.0E10"],
            [1.5, math.nan, math.inf, -math.inf, 1e10],
        ),
        ("float", ["0.25"], [0.25]),
        ("boolean", ["true", "false", "", None], [True, False, None, None]),
        (
            "date",
            ["1970-01-01", "2024-02-29", ""],
            [dt.date(1970, 1, 1), dt.date(2024, 2, 29), None],
        ),
        (
            "timestamp",
            [
                "1970-01-01 00:00:00",
                "2021-07-30 18:11:24.594",
                "1970-01-01T00:00:00.123456Z",
                "2021-01-01T01:00:00+01:00",
                "",
            ],
            [
                _utc(1970, 1, 1),
                _utc(2021, 7, 30, 18, 11, 24, 594000),
                _utc(1970, 1, 1, 0, 0, 0, 123456),
                _utc(2021, 1, 1),
                None,
            ],
        ),
        (
            "timestamp_ntz",
            ["2021-07-30 18:11:24.123456", "2021-07-30 18:11:24"],
            [dt.datetime(2021, 7, 30, 18, 11, 24, 123456), dt.datetime(2021, 7, 30, 18, 11, 24)],
        ),
        (
            "decimal(10,2)",
            ["1.5", "-12345678.99", "7"],
            [Decimal("1.50"), Decimal("-12345678.99"), Decimal("7.00")],
        ),
        ("binary", ["\u0001\u0002", "abc", ""], [b"\x01\x02", b"abc", None]),
    ],
)
def test_parse_partition_values(delta_type, values, expected):
    result = parse_partition_values(pa.array(values, pa.string()), delta_type)
    assert result.type == to_arrow_type(delta_type)
    got = result.to_pylist()
    for g, e in zip(got, expected, strict=True):
        if isinstance(e, float) and math.isnan(e):
            assert math.isnan(g)
        else:
            assert g == e


def test_partition_timestamps_in_session_time_zone():
    result = parse_partition_values(
        pa.chunked_array([["2021-01-01 01:00:00", "2021-01-01T00:00:00Z", None]]),
        "timestamp",
        timezone="Europe/Berlin",
    )
    assert result.to_pylist() == [_utc(2021, 1, 1), _utc(2021, 1, 1), None]
    # 02:30 happens twice on 2021-10-31 in Berlin: the earlier instant (CEST), like java.time.
    overlap = parse_partition_values(
        pa.array(["2021-10-31 02:30:00"]), "timestamp", timezone="Europe/Berlin"
    )
    assert overlap.to_pylist() == [_utc(2021, 10, 31, 0, 30)]


@pytest.mark.parametrize(
    ("delta_type", "value"),
    [("integer", "abc"), ("byte", "300"), ("boolean", "yes"), ("date", "2021-13-01")],
)
def test_bad_partition_values_are_errors(delta_type, value):
    with pytest.raises(DeltaOpsError, match=delta_type):
        parse_partition_values(pa.array([value]), delta_type)


def test_fixture_partition_values_match_checkpoint_parsed_values():
    checked = 0
    for path in _checkpoint_files():
        table = pq.read_table(path)
        if "add" not in table.column_names:
            continue
        add = table.column("add").combine_chunks()
        if "partitionValues_parsed" not in [f.name for f in add.type]:
            continue
        meta = next(m for m in table.column("metaData").to_pylist() if m)
        schema = parse_schema(meta["schemaString"])
        expected_schema = partition_schema(schema, meta["partitionColumns"])
        rows = [r for r in add.to_pylist() if r]
        parsed = add.field("partitionValues_parsed").type
        assert pa.schema(list(parsed)) == expected_schema
        for f in expected_schema:
            strings = pa.array([dict(r["partitionValues"]).get(f.name) for r in rows], pa.string())
            ours = parse_partition_values(strings, schema.field(f.name).type).to_pylist()
            assert ours == [r["partitionValues_parsed"][f.name] for r in rows]
        checked += 1
    assert checked >= 2


def test_partition_schema_uses_physical_names():
    meta = _table_metadata(TABLES / "delta-rs/table_with_column_mapping")
    schema = parse_schema(meta["schemaString"])
    assert partition_schema(schema, ["Company Very Short"]).names == [
        "col-173b4db9-b5ad-427f-9e75-516aae37fbbb"
    ]
    assert partition_schema(schema, ["Company Very Short"], physical=False).names == [
        "Company Very Short"
    ]
    with pytest.raises(DeltaOpsError, match="nope"):
        partition_schema(schema, ["nope"])


# --------------------------------------------------------------------------- stats schema

NESTED = StructType(
    (
        StructField("p", "string"),
        StructField("id", "long"),
        StructField(
            "s",
            StructType(
                (
                    StructField("flag", "boolean"),
                    StructField(
                        "ts", "timestamp", metadata={"delta.columnMapping.physicalName": "col-ts"}
                    ),
                    StructField("bin", "binary"),
                )
            ),
            metadata={"delta.columnMapping.physicalName": "col-s"},
        ),
        StructField("arr", ArrayType("long")),
        StructField("m", MapType("string", "long")),
        StructField("dec", "decimal(5,2)"),
        StructField("d", "date"),
        StructField("v", "variant"),
    )
)


def test_stats_schema_follows_spark_rules():
    schema = stats_schema(NESTED, ["P"], physical=False)
    assert schema.names == ["numRecords", "minValues", "maxValues", "nullCount", "tightBounds"]
    min_values = schema.field("minValues").type
    assert min_values == pa.struct(
        [
            ("id", pa.int64()),
            ("s", pa.struct([("ts", pa.timestamp("us", tz="UTC"))])),
            ("dec", pa.decimal128(5, 2)),
            ("d", pa.date32()),
        ]
    )
    assert schema.field("maxValues").type == min_values
    assert schema.field("nullCount").type == pa.struct(
        [
            ("id", pa.int64()),
            ("s", pa.struct([("flag", pa.int64()), ("ts", pa.int64()), ("bin", pa.int64())])),
            ("arr", pa.int64()),
            ("m", pa.int64()),
            ("dec", pa.int64()),
            ("d", pa.int64()),
            ("v", pa.int64()),
        ]
    )
    physical = stats_schema(NESTED, ["p"], tight_bounds=False)
    assert physical.names == ["numRecords", "minValues", "maxValues", "nullCount"]
    assert physical.field("minValues").type.field("col-s").type.field(0).name == "col-ts"


def test_stats_schema_counts_leaves_across_structs():
    two = stats_schema(NESTED, ["p"], num_indexed_cols=2, physical=False)
    assert two.field("nullCount").type == pa.struct(
        [("id", pa.int64()), ("s", pa.struct([("flag", pa.int64())]))]
    )
    # s.flag is boolean: s has no min/max leaf, so it is dropped from minValues.
    assert two.field("minValues").type == pa.struct([("id", pa.int64())])
    zero = stats_schema(NESTED, ["p"], num_indexed_cols=0, tight_bounds=False)
    assert zero.names == ["numRecords"]
    everything = stats_schema(NESTED, [], num_indexed_cols=-1, physical=False)
    assert everything.field("nullCount").type.names[0] == "p"


def test_stats_schema_with_named_stats_columns():
    schema = stats_schema(NESTED, ["p"], stats_columns=" D, `S`.ts ,m", physical=False)
    assert schema.field("nullCount").type == pa.struct(
        [("s", pa.struct([("ts", pa.int64())])), ("m", pa.int64()), ("d", pa.int64())]
    )
    assert schema.field("minValues").type.names == ["s", "d"]
    quoted = StructType((StructField("a.b", "long"), StructField("c`d", "long")))
    assert stats_schema(quoted, [], stats_columns="`a.b`", physical=False).field(
        "nullCount"
    ).type.names == ["a.b"]
    assert stats_schema(quoted, [], stats_columns=["`c``d`"], physical=False).field(
        "nullCount"
    ).type.names == ["c`d"]


def test_stats_schema_matches_spark_checkpoints():
    """Databricks/Spark-written stats_parsed columns have exactly our names and types."""
    cases = {
        "delta-rs/table_with_deletion_logs": True,  # Databricks, deletion vectors
        "delta-rs/table-with-domain-metadata": True,
        "kernel/app-txn-checkpoint": False,
    }
    for name, tight in cases.items():
        for path in (TABLES / name / "_delta_log").glob("*.checkpoint.parquet"):
            table = pq.read_table(path)
            meta = next(m for m in table.column("metaData").to_pylist() if m)
            expected = stats_schema(
                parse_schema(meta["schemaString"]), meta["partitionColumns"], tight_bounds=tight
            )
            actual = table.column("add").type.field("stats_parsed").type
            assert pa.schema(list(actual)) == expected, path


# --------------------------------------------------------------------------- parse stats


def test_parse_stats_keeps_rows_aligned_and_types_values():
    schema = stats_schema(NESTED, ["p"], physical=False)
    stats = pa.array(
        [
            (
                '{"numRecords":3,"minValues":{"id":1,"s":{"ts":"2021-01-01T00:00:00.000Z"},'
                '"dec":1.25,"d":"2020-02-29"},"maxValues":{"id":9,"s":{"ts":'
                '"2021-01-01T01:00:00.000+01:00"}},"nullCount":{"id":0,"s":{"flag":3},"arr":1},'
                '"tightBounds":true,"extra":{"x":[1,2]}}'
            ),
            None,
            "",
            '{\n"numRecords": 7\n}',
            "{}",
        ]
    )
    parsed = parse_stats(stats, schema)
    assert parsed.type == pa.struct(list(schema))
    rows = parsed.to_pylist()
    assert rows[1] is None and rows[2] is None
    assert rows[0]["numRecords"] == 3
    assert rows[0]["minValues"]["s"]["ts"] == _utc(2021, 1, 1)
    assert rows[0]["maxValues"]["s"]["ts"] == _utc(2021, 1, 1)
    assert rows[0]["minValues"]["dec"] == Decimal("1.25")
    assert rows[0]["minValues"]["d"] == dt.date(2020, 2, 29)
    assert rows[0]["nullCount"]["s"] == {"flag": 3, "ts": None, "bin": None}
    assert rows[0]["tightBounds"] is True
    assert rows[3]["numRecords"] == 7 and rows[3]["minValues"] is None
    assert rows[4]["numRecords"] is None


def test_parse_stats_accepts_quoted_non_finite_floats_and_nulls_bad_rows():
    schema = pa.schema(
        [
            ("numRecords", pa.int64()),
            ("minValues", pa.struct([("x", pa.float64()), ("s", pa.string())])),
        ]
    )
    stats = pa.chunked_array(
        [
            ['{"numRecords":1,"minValues":{"x":"NaN","s":"NaN"}}', "not json"],
            ['{"numRecords":"many"}', '{"numRecords":2,"minValues":{"x":-Infinity}}'],
        ]
    )
    parsed = parse_stats(stats, schema).to_pylist()
    assert math.isnan(parsed[0]["minValues"]["x"]) and parsed[0]["minValues"]["s"] == "NaN"
    assert parsed[1] is None and parsed[2] is None
    assert parsed[3] == {"numRecords": 2, "minValues": {"x": -math.inf, "s": None}}
    with pytest.raises(DeltaOpsError, match="row 1"):
        parse_stats(stats, schema, strict=True)


@pytest.mark.parametrize("blank_first", [True, False])
def test_parse_stats_never_shifts_rows(blank_first):
    """A blank row (no record) and two concatenated objects (two records) must not cancel
    out into a shifted but equally long result."""
    schema = pa.schema([("numRecords", pa.int64())])
    odd = ["   ", '{"numRecords":2}{"numRecords":3}']
    rows = (odd if blank_first else odd[::-1]) + ['{"numRecords":4}', "null"]
    assert parse_stats(pa.array(rows), schema).to_pylist() == [None, None, {"numRecords": 4}, None]


@pytest.mark.parametrize("typ", [pa.string(), pa.large_string()])
def test_byte_search_looks_only_at_the_rows_bytes(typ):
    """Pretty-printed stats make the JSON reader serial, and vacuum decodes paths one by one,
    only when a row needs it: a slice of an array sees its own rows' bytes, not its
    neighbours'."""
    docs = pa.array(['{"a":1}', '{\n"a":2}', '{"a":3}', None], typ)
    assert any_holds(docs, b"\n") and any_holds(docs.slice(1, 1), b"\n")
    assert not any_holds(docs.slice(0, 1), b"\n") and not any_holds(docs.slice(2, 2), b"\n")
    assert any_holds(docs.slice(2, 1), b"%", b"3")
    assert not any_holds(pa.array(['{"s":"a\\nb"}'], typ), b"\n")  # escaped: no line break
    assert not any_holds(pa.array([], typ), b"\n")
    assert not any_holds(pa.array([None, None], typ), b"\n")


@pytest.mark.parametrize("scan_bytes", [1, 2, 3, 5, 64])
def test_byte_search_in_pieces_finds_what_a_whole_search_finds(monkeypatch, scan_bytes):
    """The bytes are searched a piece at a time: a needle across two pieces is found, and
    the answer is the whole buffer's, for every place a needle can start."""
    monkeypatch.setattr(string_bytes, "SCAN_BYTES", scan_bytes)
    base = "abcdefghijklmnopq"
    for needle in (b"\n", b"..", b"://"):
        for at in range(len(base) - len(needle) + 1):
            text = base[:at] + needle.decode() + base[at + len(needle) :]
            docs = pa.array([text[:4], text[4:9], None, text[9:]], pa.large_string())
            assert any_holds(docs, needle) == (needle in text.encode())
            assert any_holds(docs, b"#", needle)
        assert not any_holds(pa.array([base[:7], base[7:]]), needle)


def test_parse_stats_of_empty_input():
    schema = stats_schema(NESTED, [])
    assert len(parse_stats(pa.array([], pa.string()), schema)) == 0


def test_parse_stats_matches_checkpoint_stats_parsed():
    checked = 0
    for path in _checkpoint_files():
        table = pq.read_table(path)
        if "add" not in table.column_names:
            continue
        add = table.column("add").combine_chunks()
        if "stats_parsed" not in [f.name for f in add.type]:
            continue
        add = add.filter(add.is_valid())
        expected_type = add.field("stats_parsed").type
        schema = pa.schema([pa.field(f.name, _us(f.type)) for f in expected_type])
        ours = parse_stats(add.field("stats"), schema)
        theirs = add.field("stats_parsed").cast(pa.struct(list(schema)))
        assert ours.to_pylist() == theirs.to_pylist(), path
        checked += 1
    assert checked >= 5


def _us(t: pa.DataType) -> pa.DataType:
    """Checkpoint writers store stats timestamps as ns; compare at Delta's microseconds."""
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _us(f.type)) for f in t])
    if pa.types.is_timestamp(t):
        return pa.timestamp("us", tz="UTC")
    return t


def _replay_adds(table: Path) -> list[dict] | None:
    """Live add actions of a JSON-only log starting at version 0; None if it has DVs."""
    commits = sorted(p for p in (table / "_delta_log").iterdir() if COMMIT.match(p.name))
    if not commits or commits[0].name != f"{0:020d}.json":
        return None
    live: dict[str, dict] = {}
    for path in commits:
        for action in _json_actions(path):
            if "add" in action:
                if action["add"].get("deletionVector"):
                    return None
                live[action["add"]["path"]] = action["add"]
            elif "remove" in action:
                live.pop(action["remove"]["path"], None)
    return list(live.values())


def test_num_records_match_peer_row_counts():
    facts = [json.loads(line) for line in (TABLES / "PEER_FACTS.jsonl").read_text().splitlines()]
    checked = []
    for fact in facts:
        if "kernel_rows" not in fact:
            continue
        table = TABLES / fact["table"]
        adds = _replay_adds(table)
        if adds is None or not adds or any(not a.get("stats") for a in adds):
            continue
        meta = _table_metadata(table)
        schema = stats_schema(parse_schema(meta["schemaString"]), meta["partitionColumns"])
        parsed = parse_stats(pa.array([a["stats"] for a in adds]), schema)
        total = sum(r["numRecords"] for r in parsed.to_pylist())
        assert total == fact["kernel_rows"], fact["table"]
        checked.append(fact["table"])
    assert "delta-rs/table-without-dv-small" in checked
    assert len(checked) >= 4
