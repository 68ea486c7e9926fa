"""Data writes lay files out as the table says (partitioning, column mapping, types) and refuse
what delta-ops cannot enforce, before any file is written.

Before this, an append that did not repeat `partition_by` went into an unpartitioned file whose
rows every reader dropped, and an append to a column-mapped table wrote logical names that
readers saw as nulls.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from delta_ops.errors import ConcurrentModification, DeltaOpsError
from delta_ops.log.file_names import commit_file_name
from delta_ops.storage import Storage
from delta_ops.table.scan import read_table
from delta_ops.table.snapshot import load_snapshot
from delta_ops.table.write_target import resolve_write_target
from delta_ops.table.writer import DataFile, commit_data_files, write_arrow
from tests.support import TABLES, deltalake_rows, duckdb_rows, file_digests

MAPPED_FIXTURE = TABLES / "delta-rs" / "table_with_column_mapping"


def _rows(table: Path) -> list[tuple]:
    return sorted(tuple(r.values()) for r in read_table(load_snapshot(table)).to_pylist())


def _last_adds(table: Path) -> list[dict]:
    commit = table / "_delta_log" / commit_file_name(load_snapshot(table).version)
    lines = [json.loads(line) for line in commit.read_text().splitlines()]
    return [a["add"] for a in lines if "add" in a]


def test_append_to_a_column_mapped_partitioned_fixture_reads_back_everywhere(
    tmp_path: Path,
) -> None:
    table = tmp_path / "mapped"
    shutil.copytree(MAPPED_FIXTURE, table)
    before = _rows(table)
    new = pa.table({"Company Very Short": ["ACME"], "Super Name": ["Road Runner"]})
    write_arrow(table, new)  # no partition_by: the table's own partitioning applies
    snapshot = load_snapshot(table)
    by_name = {f.name: f.physical_name for f in snapshot.schema.fields}
    [add] = _last_adds(table)
    assert add["partitionValues"] == {by_name["Company Very Short"]: "ACME"}
    stored = pq.read_table(table / add["path"])
    assert stored.column_names == [by_name["Super Name"]]
    assert stored.schema.field(0).metadata == {b"PARQUET:field_id": b"2"}
    assert json.loads(add["stats"])["minValues"] == {by_name["Super Name"]: "Road Runner"}
    assert _rows(table) == sorted([*before, ("ACME", "Road Runner")])
    # each peer has a column-mapping bug of its own on this table, so each checks what it
    # reads right: DuckDB the data column (duckdb-delta#343 nulls mapped partition columns),
    # delta-rs the partition column (it reads this fixture's data column as null)
    names = sorted(r["Super Name"] for r in duckdb_rows(table))
    assert names == sorted(r[1] for r in _rows(table))
    companies = sorted(r["Company Very Short"] for r in deltalake_rows(table))
    assert companies == sorted(r[0] for r in _rows(table))


def test_a_new_column_mapped_table_gets_ids_and_physical_names_nested_too(
    tmp_path: Path,
) -> None:
    table = tmp_path / "t"
    data = pa.table(
        {
            "id": pa.array([1, 2], pa.int64()),
            "who": pa.array([{"first": "a", "last": "b"}, {"first": "c", "last": None}]),
            "day": ["x", "y"],
        }
    )
    write_arrow(
        table, data, partition_by=["day"], configuration={"delta.columnMapping.mode": "name"}
    )
    write_arrow(table, data.slice(0, 1))
    snapshot = load_snapshot(table)
    assert snapshot.protocol.supports("columnMapping")
    fields = snapshot.schema.fields
    assert all(f.physical_name.startswith("col-") for f in fields)
    nested = fields[1].type.fields  # type: ignore[union-attr]
    assert all(f.physical_name.startswith("col-") for f in nested)
    ids = [f.metadata["delta.columnMapping.id"] for f in [*fields, *nested]]
    assert sorted(ids) == list(range(1, 6))
    assert snapshot.metadata.configuration["delta.columnMapping.maxColumnId"] == "5"
    expected = sorted(
        [(1, ("a", "b"), "x"), (2, ("c", None), "y"), (1, ("a", "b"), "x")],
        key=str,
    )
    got = [
        (r["id"], (r["who"]["first"], r["who"]["last"]), r["day"]) for r in deltalake_rows(table)
    ]
    assert sorted(got, key=str) == expected
    # DuckDB reads mapped partition columns as null (duckdb-delta#343): compare the rest
    duck = [(r["id"], (r["who"]["first"], r["who"]["last"])) for r in duckdb_rows(table)]
    assert sorted(duck, key=str) == sorted([e[:2] for e in expected], key=str)


def test_an_append_without_partition_by_uses_the_tables_partitions(tmp_path: Path) -> None:
    table = tmp_path / "t"
    first = pa.table({"id": pa.array([1], pa.int64()), "day": ["a"]})
    write_arrow(table, first, partition_by=["day"])
    write_arrow(table, pa.table({"id": pa.array([2], pa.int64()), "day": ["b"]}))
    [add] = _last_adds(table)
    assert add["partitionValues"] == {"day": "b"} and add["path"].startswith("day=b/")
    assert sorted((r["id"], r["day"]) for r in deltalake_rows(table)) == [(1, "a"), (2, "b")]


def test_narrower_types_are_written_as_the_table_declares_them(tmp_path: Path) -> None:
    table = tmp_path / "t"
    write_arrow(table, pa.table({"id": pa.array([1], pa.int64()), "v": [1.5]}))
    write_arrow(table, pa.table({"id": pa.array([2], pa.int32())}))  # v missing: null
    [add] = _last_adds(table)
    stored = pq.read_table(table / add["path"])
    assert stored.schema.field("id").type == pa.int64()
    assert stored.column("v").null_count == 1
    assert sorted((r["id"], r["v"]) for r in duckdb_rows(table)) == [(1, 1.5), (2, None)]


def _with_metadata(
    tmp_path: Path, *, configuration=None, field_metadata=None, nullable=True, field="id"
):
    """A table whose metaData carries a rule on column `field`, written by hand as Delta Spark
    would."""
    table = tmp_path / "ruled"
    write_arrow(table, pa.table({"id": pa.array([1], pa.int64()), "day": ["a"]}))
    snapshot = load_snapshot(table)
    metadata = snapshot.metadata.to_action()
    schema = json.loads(metadata["schemaString"])
    index = [f["name"] for f in schema["fields"]].index(field)
    schema["fields"][index]["metadata"].update(field_metadata or {})
    schema["fields"][index]["nullable"] = nullable
    metadata["schemaString"] = json.dumps(schema)
    metadata["configuration"] = {**metadata.get("configuration", {}), **(configuration or {})}
    commit = table / "_delta_log" / commit_file_name(snapshot.version + 1)
    info = {"commitInfo": {"timestamp": 1, "operation": "SET TBLPROPERTIES"}}
    commit.write_text(json.dumps(info) + "\n" + json.dumps({"metaData": metadata}) + "\n")
    return table


REFUSED = {
    "check constraint": (
        {"configuration": {"delta.constraints.positive": "id > 0"}},
        "append",
        r"CHECK constraints \(positive\)",
    ),
    "invariant": (
        {"field_metadata": {"delta.invariants": '{"expression":{"expression":"id > 0"}}'}},
        "append",
        "column id has an invariant",
    ),
    "generated column": (
        {"field_metadata": {"delta.generationExpression": "1"}},
        "append",
        "column id has a generation expression",
    ),
    "identity column": (
        {"field_metadata": {"delta.identity.start": 1, "delta.identity.step": 1}},
        "append",
        "column id has identity values",
    ),
    "column default": (
        {"field_metadata": {"CURRENT_DEFAULT": "'z'"}, "field": "day"},
        "append-without-day",
        "whose DEFAULT values delta-ops cannot evaluate",
    ),
    "append-only overwrite": (
        {"configuration": {"delta.appendOnly": "true"}},
        "overwrite",
        "is append-only",
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_rules_delta_ops_cannot_enforce_refuse_the_write_before_any_file(
    case: str, tmp_path: Path
) -> None:
    kwargs, mode, message = REFUSED[case]
    table = _with_metadata(tmp_path, **kwargs)
    before = file_digests(table)
    rows = pa.table({"id": pa.array([2], pa.int64()), "day": ["b"]})
    if mode == "append-without-day":
        rows, mode = rows.select(["id"]), "append"
    with pytest.raises(DeltaOpsError, match=message):
        write_arrow(table, rows, mode=mode)
    assert file_digests(table) == before


def test_append_only_tables_still_take_appends(tmp_path: Path) -> None:
    table = _with_metadata(tmp_path, configuration={"delta.appendOnly": "true"})
    write_arrow(table, pa.table({"id": pa.array([2], pa.int64()), "day": ["b"]}))
    assert sorted(r["id"] for r in duckdb_rows(table)) == [1, 2]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (pa.table({"id": pa.array([None], pa.int64()), "day": ["b"]}), "'id' is NOT NULL"),
        (pa.table({"day": ["b"]}), r"lacks NOT NULL columns \['id'\]"),
        (pa.table({"id": pa.array([2], pa.int64()), "zz": [1]}), r"columns the table does not"),
    ],
)
def test_rows_that_break_the_schema_are_refused_before_any_file(
    data: pa.Table, message: str, tmp_path: Path
) -> None:
    table = _with_metadata(tmp_path, nullable=False)
    before = file_digests(table)
    with pytest.raises(DeltaOpsError, match=message):
        write_arrow(table, data)
    assert file_digests(table) == before


@pytest.mark.parametrize("column", ["id", "day"])  # a number, and text (not fixed-width)
def test_another_engines_file_with_nulls_in_a_not_null_column_is_not_committed(
    tmp_path: Path, column: str
) -> None:
    table = _with_metadata(tmp_path, nullable=False, field=column)
    rows = {"id": pa.array([1, 3], pa.int64()), "day": pa.array(["x", "y"])}
    rows[column] = pa.array([None, rows[column][1].as_py()], rows[column].type)
    pq.write_table(pa.table(rows), table / "late.parquet")
    target = resolve_write_target(Storage.open(table), pa.table(rows).schema)
    version = load_snapshot(table).version
    with pytest.raises(DeltaOpsError, match=f"'{column}' is NOT NULL but late.parquet has 1 rows"):
        commit_data_files(table, [DataFile("late.parquet", {})], target)
    assert load_snapshot(table).version == version


def test_a_table_repartitioned_while_files_were_written_is_not_committed(tmp_path: Path) -> None:
    table = tmp_path / "t"
    data = pa.table({"id": pa.array([1], pa.int64()), "day": ["a"]})
    target = resolve_write_target(Storage.open(table), data.schema)  # a new table, unpartitioned
    write_arrow(table, data, partition_by=["day"])  # someone else creates it partitioned
    with pytest.raises(DeltaOpsError, match="changed while the data was written"):
        commit_data_files(table, [], target)
    assert load_snapshot(table).version == 0


def test_a_table_another_writer_created_meanwhile_is_a_retryable_conflict(
    tmp_path: Path,
) -> None:
    """Two writers racing to create a table: the one that finds it created before its commit
    gets a conflict (retryable: the operation history's appends retry it), not a refusal."""
    table = tmp_path / "t"
    data = pa.table({"id": pa.array([1], pa.int64())})
    target = resolve_write_target(Storage.open(table), data.schema)  # a new table
    write_arrow(table, data)  # another writer creates it first, laid out the same
    with pytest.raises(ConcurrentModification, match="another writer created it"):
        commit_data_files(table, [], target)
    assert load_snapshot(table).version == 0
    assert write_arrow(table, data).version == 1  # the retry appends


def test_partitioning_that_differs_from_the_tables_is_refused(tmp_path: Path) -> None:
    table = tmp_path / "t"
    write_arrow(
        table, pa.table({"id": pa.array([1], pa.int64()), "day": ["a"]}), partition_by=["day"]
    )
    before = file_digests(table)
    with pytest.raises(DeltaOpsError, match=r"partitioned by \['day'\], not \['id'\]"):
        write_arrow(
            table, pa.table({"id": pa.array([2], pa.int64()), "day": ["b"]}), partition_by=["id"]
        )
    assert file_digests(table) == before


@pytest.mark.parametrize("mapping", ["none", "name"])
def test_merge_schema_adds_new_columns_in_the_same_commit(tmp_path: Path, mapping: str) -> None:
    table = tmp_path / "t"
    config = {"delta.columnMapping.mode": mapping} if mapping != "none" else {}
    first = pa.table({"id": pa.array([1], pa.int64()), "day": ["a"]})
    write_arrow(table, first, partition_by=["day"], configuration=config)
    wider = pa.table(
        {"id": pa.array([2], pa.int64()), "day": ["b"], "note": ["new"], "n": pa.array([7])}
    )
    before = file_digests(table)
    with pytest.raises(DeltaOpsError, match=r"columns the table does not: \['note', 'n'\]"):
        write_arrow(table, wider)
    assert file_digests(table) == before
    result = write_arrow(table, wider, merge_schema=True)
    snapshot = load_snapshot(table)
    assert snapshot.version == result.version == 1  # schema and rows in one commit
    assert snapshot.schema.names == ["id", "day", "note", "n"]
    if mapping != "none":
        ids = [f.metadata["delta.columnMapping.id"] for f in snapshot.schema.fields]
        assert ids == [1, 2, 3, 4]
        assert snapshot.metadata.configuration["delta.columnMapping.maxColumnId"] == "4"
        [add] = _last_adds(table)
        stored = pq.read_schema(table / add["path"])
        assert stored.names == [snapshot.schema.fields[i].physical_name for i in (0, 2, 3)]
    got = sorted((r["id"], r["day"], r["note"], r["n"]) for r in deltalake_rows(table))
    assert got == [(1, "a", None, None), (2, "b", "new", 7)]
    if mapping == "none":  # DuckDB nulls mapped partition columns (duckdb-delta#343)
        assert sorted(r["note"] or "" for r in duckdb_rows(table)) == ["", "new"]


def test_merge_schema_refuses_a_table_whose_schema_changed_meanwhile(tmp_path: Path) -> None:
    table = tmp_path / "t"
    write_arrow(table, pa.table({"id": pa.array([1], pa.int64())}))
    wider = pa.table({"id": pa.array([2], pa.int64()), "note": ["x"]})
    target = resolve_write_target(Storage.open(table), wider.schema, merge_schema=True)
    other = pa.table({"id": pa.array([3], pa.int64()), "other": ["y"]})
    write_arrow(table, other, merge_schema=True)  # another writer changed the schema first
    with pytest.raises(DeltaOpsError, match="changed while the data was written"):
        commit_data_files(table, [], target)
    assert load_snapshot(table).schema.names == ["id", "other"]


def _days_table(tmp_path: Path) -> Path:
    table = tmp_path / "days"
    rows = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "day": ["a", "b", "c"]})
    write_arrow(table, rows, partition_by=["day"])
    return table


def _ids_by_day(table: Path) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for r in deltalake_rows(table):
        out.setdefault(r["day"], []).append(r["id"])
    return {k: sorted(v) for k, v in sorted(out.items())}


def test_replace_where_overwrites_only_the_partitions_it_selects(tmp_path: Path) -> None:
    table = _days_table(tmp_path)
    new = pa.table({"id": pa.array([20, 21], pa.int64()), "day": ["b", "b"]})
    write_arrow(table, new, mode="overwrite", replace_where="day = 'b'")
    assert _ids_by_day(table) == {"a": [1], "b": [20, 21], "c": [3]}
    assert sorted(r["id"] for r in duckdb_rows(table)) == [1, 3, 20, 21]
    info = json.loads((table / "_delta_log" / commit_file_name(1)).read_text().splitlines()[0])
    assert json.loads(info["commitInfo"]["operationParameters"]["predicate"]) == ["day = 'b'"]


def test_replace_where_refuses_rows_outside_it_and_leaves_nothing_behind(tmp_path: Path) -> None:
    table = _days_table(tmp_path)
    before = file_digests(table)
    stray = pa.table({"id": pa.array([20, 30], pa.int64()), "day": ["b", "c"]})
    with pytest.raises(DeltaOpsError, match=r"outside replaceWhere .day = 'b'."):
        write_arrow(table, stray, mode="overwrite", replace_where="day = 'b'")
    assert file_digests(table) == before  # the written files were deleted again
    with pytest.raises(DeltaOpsError, match="needs mode overwrite"):
        write_arrow(table, stray, replace_where="day = 'b'")
    with pytest.raises(DeltaOpsError, match="replaceWhere 'id = 1'.*not a partition column"):
        write_arrow(table, stray, mode="overwrite", replace_where="id = 1")
    assert file_digests(table) == before


def test_an_append_into_a_replaced_partition_while_committing_is_a_conflict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The overwrite replaces what the table holds when it commits; a commit that lands in
    the replaced partitions between that read and the put would survive it, so it is a
    conflict; one elsewhere is not."""
    from delta_ops.errors import ConcurrentModification
    from delta_ops.table import writer
    from delta_ops.table.transaction import Transaction

    table = _days_table(tmp_path)
    race_day: list[str] = []

    class Racing(Transaction):
        def commit(self):  # type: ignore[no-untyped-def]
            if race_day:
                day = race_day.pop()
                write_arrow(table, pa.table({"id": pa.array([22], pa.int64()), "day": [day]}))
            return super().commit()

    monkeypatch.setattr(writer, "Transaction", Racing)
    new = pa.table({"id": pa.array([20], pa.int64()), "day": ["b"]})
    race_day.append("b")
    with pytest.raises(ConcurrentModification, match="to partitions that replaceWhere"):
        write_arrow(table, new, mode="overwrite", replace_where="day = 'b'")
    assert _ids_by_day(table) == {"a": [1], "b": [2, 22], "c": [3]}
    race_day.append("c")
    write_arrow(table, new, mode="overwrite", replace_where="day = 'b'")
    assert _ids_by_day(table) == {"a": [1], "b": [20], "c": [3, 22]}
