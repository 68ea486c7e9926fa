"""Remove actions encoded from the files table (`encode_removes`) are byte for byte what
encoding a dict per file gives, on real tables' files and on generated rows (unicode and
quotes in paths, null partition values, deletion vectors, tags, row ids); a transaction commits
them like any remove: in order, checked for conflicts, and read back by peers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from delta_ops.errors import ConcurrentModification, DeltaOpsError
from delta_ops.log.actions import FILE_ACTION_SCHEMA, file_rows_as_actions
from delta_ops.table.remove_lines import CARRIED_FIELDS, encode_removes
from delta_ops.table.snapshot import load_snapshot
from delta_ops.table.transaction import Transaction
from delta_ops.table.writer import write_arrow
from tests.support import TABLES, deltalake_files

NOW = 1_764_000_000_123


def reference_lines(files: pa.Table, data_change: bool, carried=CARRIED_FIELDS) -> bytes:
    """The removes built the obvious way: a dict per file, then the JSON encoder."""
    columns = ("path", "partitionValues", "size", *carried)
    out = []
    for row in file_rows_as_actions(files, columns=columns):
        body: dict[str, Any] = {
            "path": row["path"],
            "deletionTimestamp": NOW,
            "dataChange": data_change,
            "extendedFileMetadata": True,
            "partitionValues": dict(row.get("partitionValues") or {}),
            "size": row.get("size"),
        }
        for name in carried:
            if row.get(name) is not None:
                body[name] = row[name]
        out.append(json.dumps({"remove": body}, separators=(",", ":")) + "\n")
    return "".join(out).encode()


REAL_TABLES = sorted(
    str(p.parent.relative_to(TABLES))
    for p in TABLES.glob("*/*/_delta_log")
    if (p.parent / "_delta_log").is_dir()
)


def test_real_tables_files_encode_as_the_reference():
    """Every loadable table in tests/data (a few are broken on purpose); between them they
    have deletion vectors, tags, row ids and partition values."""
    seen: set[str] = set()
    loaded = 0
    for name in REAL_TABLES:
        files = _files_or_none(name)
        if files is None:
            continue
        loaded += 1
        for data_change in (False, True):
            encoded = encode_removes(files, deletion_timestamp=NOW, data_change=data_change)
            assert encoded.lines == reference_lines(files, data_change), name
            assert encoded.paths == tuple(files.column("path").to_pylist())
        for field in ("deletionVector", "tags", "baseRowId"):
            if field in files.column_names and files.column(field).null_count < files.num_rows:
                seen.add(field)
        if any(pv for pv in files.column("partitionValues").to_pylist()):
            seen.add("partitionValues")
    assert loaded > 0.8 * len(REAL_TABLES)
    assert seen == {"deletionVector", "tags", "baseRowId", "partitionValues"}


def _files_or_none(name: str) -> pa.Table | None:
    try:
        return load_snapshot(TABLES / name).files
    except DeltaOpsError:  # a fixture broken on purpose
        return None


TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
MAYBE_INT = st.none() | st.integers(-(2**62), 2**62)
DV = st.none() | st.fixed_dictionaries(
    {
        "storageType": st.sampled_from(["u", "i", "p"]),
        "pathOrInlineDv": TEXT,
        "offset": st.none() | st.integers(0, 2**31 - 1),
        "sizeInBytes": st.integers(0, 2**31 - 1),
        "cardinality": st.integers(0, 2**40),
        "maxRowIndex": st.none() | st.integers(0, 2**40),
    }
)
PAIRS = st.none() | st.lists(
    st.tuples(TEXT, st.none() | TEXT), max_size=3, unique_by=lambda p: p[0]
)
ROW = st.fixed_dictionaries(
    {
        "path": TEXT.filter(bool),
        "partitionValues": PAIRS,
        "size": st.none() | st.integers(0, 2**50),
        "stats": st.none() | TEXT,
        "tags": PAIRS,
        "deletionVector": DV,
        "baseRowId": MAYBE_INT,
        "defaultRowCommitVersion": MAYBE_INT,
    }
)
# the generated rows typed as a snapshot's files table types them
SCHEMA = pa.schema(
    [
        FILE_ACTION_SCHEMA.field(name)
        for name in ("path", "partitionValues", "size", "stats", "tags", "deletionVector")
        + ("baseRowId", "defaultRowCommitVersion")
    ]
)


@settings(max_examples=150, deadline=None)
@given(
    rows=st.lists(ROW, max_size=6),
    data_change=st.booleans(),
    carried=st.lists(st.sampled_from(CARRIED_FIELDS), unique=True),
)
def test_generated_rows_encode_as_the_reference(rows, data_change, carried):
    files = pa.Table.from_pylist(rows, schema=SCHEMA)
    carried = tuple(c for c in CARRIED_FIELDS if c in carried)
    encoded = encode_removes(
        files, deletion_timestamp=NOW, data_change=data_change, carried=carried
    )
    assert encoded.lines == reference_lines(files, data_change, carried)
    assert [json.loads(line)["remove"]["path"] for line in encoded.lines.splitlines()] == [
        r["path"] for r in rows
    ]


ASCII = st.text(st.characters(min_codepoint=0, max_codepoint=0x7F), max_size=12)
#: rows the columnar encoding may take (no deletion vector or tags to carry): printable ASCII
#: with quotes and backslashes, or control characters and DEL (which send it line by line)
PLAIN_ROW = st.fixed_dictionaries(
    {
        "path": ASCII.filter(bool),
        "partitionValues": PAIRS,
        "size": st.none() | st.integers(-(2**62), 2**62),
        "stats": st.none() | ASCII | st.just('{"numRecords":3,"minValues":{"s":"a\\"b"}}'),
        "baseRowId": MAYBE_INT,
        "defaultRowCommitVersion": MAYBE_INT,
    }
)


@settings(max_examples=300, deadline=None)
@given(
    rows=st.lists(PLAIN_ROW, max_size=6),
    data_change=st.booleans(),
    carried=st.lists(st.sampled_from(CARRIED_FIELDS), unique=True),
    chunked=st.booleans(),
)
def test_rows_joined_by_arrow_encode_as_the_reference(rows, data_change, carried, chunked):
    """The columnar encoding (Arrow joins each line's parts) gives the reference's bytes, and
    takes every table whose paths and stats are printable ASCII."""
    from delta_ops.table import remove_lines

    files = pa.Table.from_pylist(rows, schema=SCHEMA)
    if chunked and rows:  # a snapshot's files table comes in chunks (a checkpoint's row groups)
        files = pa.concat_tables([files.slice(0, 1), files.slice(1)])
    carried = tuple(c for c in CARRIED_FIELDS if c in carried)
    encoded = encode_removes(
        files, deletion_timestamp=NOW, data_change=data_change, carried=carried
    )
    assert encoded.lines == reference_lines(files, data_change, carried)
    texts = [r["path"] for r in rows] + [r["stats"] or "" for r in rows if "stats" in carried]
    printable = all(c.isprintable() and c.isascii() for t in texts for c in t)
    columnar = remove_lines._columnar_lines(files, ",", carried)
    assert (columnar is not None) == printable


@pytest.mark.parametrize(
    "char", ["\x7f", "\x1f", "\n", "\u00e9", "\U0001f600", '"', "\\", "~", " "]
)
def test_each_character_a_json_string_escapes_encodes_as_the_reference(char):
    """Where the columnar encoding stops: DEL, control and non-ASCII characters go line by
    line (the JSON module writes them as \\u escapes), quotes and backslashes are escaped."""
    from delta_ops.table import remove_lines

    for field in ("path", "stats"):
        row = {"path": "p", "stats": "{}", "size": 1, field: f"a{char}b"}
        files = pa.Table.from_pylist([row], schema=SCHEMA)
        encoded = encode_removes(files, deletion_timestamp=NOW, data_change=False)
        assert encoded.lines == reference_lines(files, False), (field, char)
        columnar = remove_lines._columnar_lines(files, ",", CARRIED_FIELDS)
        assert (columnar is None) == (not (char.isascii() and char.isprintable())), (field, char)


def test_many_removes_are_joined_by_arrow(tmp_path):
    """A compaction's removes (ASCII paths, stats) take the columnar encoding."""
    from delta_ops.table import remove_lines

    table = _table_with_files(tmp_path, 3)
    files = load_snapshot(table).files
    joined = remove_lines._columnar_lines(files, ",", CARRIED_FIELDS)
    assert joined is not None and joined.count(b"\n") == 3


def test_an_unknown_carried_field_is_refused():
    with pytest.raises(ValueError, match="cannot carry \\['modificationTime'\\]"):
        encode_removes(
            pa.Table.from_pylist([], schema=SCHEMA),
            deletion_timestamp=NOW,
            data_change=False,
            carried=("modificationTime",),
        )


# ------------------------------------------------------------------ through a transaction
def _table_with_files(tmp_path: Path, batches: int) -> Path:
    table = tmp_path / "t"
    for i in range(batches):
        write_arrow(table, pa.table({"id": [i]}), mode="append")
    return table


def test_encoded_removes_commit_in_order_and_peers_see_them_gone(tmp_path):
    table = _table_with_files(tmp_path, 3)
    snapshot = load_snapshot(table)
    first, *rest = sorted(snapshot.files.column("path").to_pylist())
    kept = snapshot.files.filter(pa.compute.equal(snapshot.files.column("path"), first))
    removes = encode_removes(kept, deletion_timestamp=NOW, data_change=True)
    txn = Transaction(snapshot, operation="DELETE")
    txn.add_action({"add": {**_add_of(snapshot, rest[0]), "path": rest[0]}})  # re-add: rank last
    txn.add_encoded_removes(removes)
    result = txn.commit()
    assert result.num_actions == 2
    lines = (table / "_delta_log" / f"{result.version:020d}.json").read_bytes().splitlines()
    assert [next(iter(json.loads(line))) for line in lines] == ["commitInfo", "remove", "add"]
    assert lines[1] + b"\n" == removes.lines
    assert json.loads(lines[0])["commitInfo"]["isBlindAppend"] is False
    assert deltalake_files(table)[1] == sorted(rest)
    assert sorted(load_snapshot(table).files.column("path").to_pylist()) == sorted(rest)


def test_a_winner_removing_an_encoded_remove_path_is_a_conflict(tmp_path):
    table = _table_with_files(tmp_path, 2)
    snapshot = load_snapshot(table)
    path = min(snapshot.files.column("path").to_pylist())
    one = snapshot.files.filter(pa.compute.equal(snapshot.files.column("path"), path))
    winner = Transaction(snapshot, operation="DELETE")
    winner.add_encoded_removes(encode_removes(one, deletion_timestamp=NOW, data_change=True))
    winner.commit()
    loser = Transaction(snapshot, operation="OPTIMIZE", max_attempts=3)
    loser.add_encoded_removes(encode_removes(one, deletion_timestamp=NOW, data_change=False))
    with pytest.raises(ConcurrentModification, match=path):
        loser.commit()
    assert not (table / "_delta_log" / f"{snapshot.version + 2:020d}.json").exists()


def _add_of(snapshot, path: str) -> dict[str, Any]:
    [row] = file_rows_as_actions(
        snapshot.files.filter(pa.compute.equal(snapshot.files.column("path"), path)),
        columns=("path", "partitionValues", "size", "modificationTime", "dataChange", "stats"),
    )
    return row
