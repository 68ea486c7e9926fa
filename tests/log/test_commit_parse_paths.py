"""The fast commit parse (inferred types, conformed by a cast) must give what the explicit-schema
parse gives, on every real commit we hold, and must step aside where inference would change a
value (a date-like string read as a timestamp, a number where the protocol wants a string)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from delta_ops.log import reader

DATA = Path(__file__).resolve().parents[1] / "data" / "tables"


def _explicit(data: bytes) -> pa.Table:
    table = reader._read_json(data, reader._PARSE)
    exact = reader._string_map_schema(table.schema)
    if exact is not None:
        table = reader._read_json(
            data, reader.pj.ParseOptions(explicit_schema=exact, unexpected_field_behavior="infer")
        )
    return table


def _rows_by_column(table: pa.Table) -> dict[str, list[Any]]:
    return {name: table.column(name).to_pylist() for name in table.column_names}


def _without_commit_info(content: bytes) -> bytes:
    lines = content.splitlines(keepends=True)
    return b"".join(line for line in lines if not line.startswith(b'{"commitInfo"'))


# commits with more than a commitInfo line (the reader parses commitInfo apart)
COMMITS = [
    p
    for p in sorted(DATA.rglob("_delta_log/*.json"))
    if _without_commit_info(p.read_bytes()).strip()
]


def test_there_are_real_commits_to_compare() -> None:
    assert len(COMMITS) > 100


@pytest.mark.parametrize("path", COMMITS, ids=lambda p: str(p.relative_to(DATA)))
def test_fast_parse_equals_explicit_parse(path: Path) -> None:
    data = _without_commit_info(path.read_bytes())
    fast = reader._parse_inferred(data)
    explicit = _explicit(data)
    assert fast is not None, "every real commit we hold takes the fast path"
    # every column the explicit parse has, with equal values (struct child order may differ)
    assert set(explicit.column_names) <= set(fast.column_names)
    expected = _rows_by_column(explicit)
    got = _rows_by_column(fast)
    for name, values in expected.items():
        assert got[name] == values, name
    for name in set(fast.column_names) - set(explicit.column_names):
        assert fast.column(name).null_count == fast.num_rows, name


@pytest.mark.parametrize(
    "line",
    [
        # a date-like description would be inferred as a timestamp
        (
            b'{"metaData":{"id":"x","description":"2023-12-29","format":{"provider":"parquet"},'
            b'"schemaString":"{}","partitionColumns":[]}}'
        ),
        # an appId that looks like a timestamp
        b'{"txn":{"appId":"2024-01-01 00:00:00","version":3}}',
    ],
)
def test_inference_that_would_change_a_value_falls_back(line: bytes) -> None:
    assert reader._parse_inferred(line + b"\n") is None
    # and the public path still reads the value exactly as written
    parsed = reader._parse_json(line + b"\n", reader._PARSE)
    assert parsed.num_rows == 1


@pytest.mark.parametrize(
    "line",
    [
        # a partition value written as a JSON number (the protocol says string)
        (
            b'{"add":{"path":"a","partitionValues":{"p":1},"size":1,"modificationTime":1,'
            b'"dataChange":true}}'
        ),
        # a size written as a float is not a long
        (
            b'{"add":{"path":"a","partitionValues":{},"size":1.0,"modificationTime":1,'
            b'"dataChange":true}}'
        ),
        # a deletion vector offset beyond an int
        (
            b'{"add":{"path":"a","partitionValues":{},"size":1,"modificationTime":1,'
            b'"dataChange":true,"deletionVector":{"storageType":"u","pathOrInlineDv":"x",'
            b'"offset":99999999999,"sizeInBytes":1,"cardinality":1}}}'
        ),
    ],
)
def test_a_value_of_the_wrong_type_is_refused_by_both_paths(line: bytes) -> None:
    with pytest.raises(pa.ArrowInvalid):
        _explicit(line + b"\n")
    with pytest.raises(pa.ArrowInvalid):
        reader._parse_json(line + b"\n", reader._PARSE)


def test_a_date_like_partition_value_keeps_its_text() -> None:
    line = (
        b'{"add":{"path":"a","partitionValues":{"d":"2023-12-29"},"size":1,'
        b'"modificationTime":1,"dataChange":true}}\n'
    )
    parsed = reader._parse_json(line, reader._PARSE)
    add = parsed.column("add").to_pylist()[0]
    assert add["partitionValues"] == {"d": "2023-12-29"}
    assert add["size"] == 1 and add["dataChange"] is True


def test_the_fast_path_fills_every_declared_field() -> None:
    line = (
        b'{"add":{"path":"a","partitionValues":{},"size":7,"modificationTime":1,'
        b'"dataChange":true}}\n'
    )
    fast = reader._parse_inferred(line)
    assert fast is not None
    for field in reader.COMMIT_JSON_SCHEMA:
        assert field.name in fast.column_names
    add_type = fast.schema.field("add").type
    for child in reader.COMMIT_JSON_SCHEMA.field("add").type:
        assert add_type.field(child.name).type == child.type
    assert fast.column("add").to_pylist()[0]["stats"] is None
