"""`recompute-stats` (issue 30): files without stats, or with stats for fewer columns than the
table asks for, get them from their data in a dataChange=false commit; the stats equal what
delta-rs writes for the same data (footers where they carry values, the columns where they do
not: INT96 timestamps, files written without statistics), deletion-vector files get wide
bounds, column mapping names columns physically; peers read the same rows after, and DuckDB's
data skipping still returns the right ones.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

from delta_ops import cli
from delta_ops.errors import InvalidValue
from delta_ops.ops.recompute_stats import (
    NO_STATS,
    execute_recompute_stats,
    plan_recompute_stats,
)
from delta_ops.ops.row_tracking import plan_enable_row_tracking
from delta_ops.protocol.stats import truncate_max_string, truncate_min_string
from delta_ops.table.snapshot import load_snapshot
from delta_ops.table.writer import write_arrow
from tests.support import (
    TABLES,
    copy_fixture,
    deltalake_rows,
    duckdb_connection,
    duckdb_rows,
    file_digests,
    readable_fixture_names,
)

LONG_MIN = "a" * 40  # longer than the 32 characters stats keep
LONG_MAX = "\u00e9" * 40 + "z"


def _data(start: int) -> pa.Table:
    """Rows of every type stats cover (and some they do not), nulls in each column."""
    base = dt.datetime(2024, 1, 1, 10, 0, 0, 123456)
    n = 6
    ids = list(range(start, start + n))
    return pa.table(
        {
            "l": pa.array([None if i % 4 == 3 else i for i in ids], pa.int64()),
            "i": pa.array([-i if i % 2 else i for i in ids], pa.int32()),
            "sh": pa.array([i % 7 for i in ids], pa.int16()),
            "s": pa.array(
                [
                    LONG_MIN if i == start else LONG_MAX if i == start + 1 else f"s-{i}"
                    for i in ids[:-1]
                ]
                + [None]
            ),
            "f": pa.array([1.5 * i if i % 3 else float("nan") for i in ids], pa.float32()),
            "d": pa.array([None if i % 5 == 0 else 0.1 * i for i in ids], pa.float64()),
            "dec": pa.array([decimal.Decimal(i) / 4 for i in ids], pa.decimal128(10, 2)),
            "day": pa.array([dt.date(1969, 12, 25) + dt.timedelta(days=3 * i) for i in ids]),
            "ts": pa.array(
                [
                    (base + dt.timedelta(days=i, microseconds=999 * i)).replace(tzinfo=dt.UTC)
                    for i in ids
                ],
                pa.timestamp("us", "UTC"),
            ),
            "ntz": pa.array(
                [None] + [dt.datetime(1960, 1, 1) + dt.timedelta(hours=i) for i in ids[1:]],
                pa.timestamp("us"),
            ),
            "flag": pa.array([i % 2 == 0 for i in ids]),
            "st": pa.array(
                [
                    None if i % 3 == 0 else {"x": i * 10, "y": None if i % 2 else f"y{i}"}
                    for i in ids
                ],
                pa.struct([("x", pa.int64()), ("y", pa.string())]),
            ),
            "arr": pa.array([None if i % 2 else [i, None] for i in ids], pa.list_(pa.int64())),
            "empty": pa.array([None] * n, pa.string()),
        }
    )


@pytest.fixture(scope="module")
def written_by_deltalake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two files written by delta-rs, with delta-rs' stats: the reference."""
    path = tmp_path_factory.mktemp("rs") / "t"
    write_deltalake(str(path), _data(0))
    write_deltalake(str(path), _data(100), mode="append")
    return path


def _strip_stats(table: Path) -> None:
    """Rewrite the commits without `add.stats`, as an old writer would have left them."""
    for commit in (table / "_delta_log").glob("*.json"):
        actions = [json.loads(x) for x in commit.read_text().splitlines() if x.strip()]
        for action in actions:
            action.get("add", {}).pop("stats", None)
        commit.write_text("".join(json.dumps(a) + "\n" for a in actions))


def _stats_by_path(table: Path) -> dict[str, dict[str, Any]]:
    files = load_snapshot(table).files
    return {
        path: json.loads(stats) if stats else None
        for path, stats in zip(
            files.column("path").to_pylist(), files.column("stats").to_pylist(), strict=True
        )
    }


def _rows(table: Path) -> list[str]:
    """delta-rs' rows as comparable text (NaN equals NaN)."""
    return [json.dumps(r, sort_keys=True, default=str) for r in deltalake_rows(table)]


def _instant(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace(" ", "T"))


def _same_value(ours: Any, theirs: Any, column: str, kind: str) -> None:
    """One min or max: ours (Delta Spark's form) against delta-rs' (its own forms)."""
    where = f"{kind} of {column}: ours {ours!r}, delta-rs {theirs!r}"
    if column in ("ts", "ntz"):
        # Spark's form: milliseconds, 'Z' for timestamp, none for timestamp_ntz
        assert ours.endswith("Z") == (column == "ts") and "." in ours, where
        assert _instant(ours) == _instant(theirs), where
    elif column == "dec":
        assert decimal.Decimal(str(ours)) == decimal.Decimal(str(theirs)), where
        assert isinstance(ours, float | int) or str(ours).count(".") == 1, where
    elif column == "s" and max(len(ours), len(theirs)) > 32:
        # delta-rs keeps parquet's 64-byte bounds; Delta Spark cuts to 32 characters
        true = LONG_MIN if kind == "min" else LONG_MAX
        cut = truncate_min_string(true) if kind == "min" else truncate_max_string(true)
        assert ours == cut, where
        for bound in (ours, theirs):  # both still bound the value
            assert (bound <= true) if kind == "min" else (bound >= true), where
    elif isinstance(theirs, float) and math.isnan(theirs):
        assert isinstance(ours, float) and math.isnan(ours), where
    else:
        assert ours == theirs, where


def _compare_with_deltalake(ours: dict[str, Any], theirs: dict[str, Any]) -> None:
    """Per column: numRecords, nullCount, min and max equal (values compared as values)."""
    assert ours["numRecords"] == theirs["numRecords"]
    # delta-rs also bounds booleans, which Delta Spark does not; arrays get no null count there
    for column, count in theirs["nullCount"].items():
        assert ours["nullCount"][column] == count, column
    assert ours["nullCount"]["arr"] == 3  # from the data: null arrays, not null elements
    for kind, key in (("min", "minValues"), ("max", "maxValues")):
        expected = {k: v for k, v in theirs[key].items() if k != "flag"}
        assert set(ours[key]) == set(expected), key
        for column, value in expected.items():
            if isinstance(value, dict):
                for inner, inner_value in value.items():
                    _same_value(ours[key][column][inner], inner_value, inner, kind)
            else:
                _same_value(ours[key][column], value, column, kind)


def _recompute(table: Path, **options: Any) -> Any:
    return execute_recompute_stats(plan_recompute_stats(load_snapshot(table), **options))


def test_stats_from_footers_equal_what_deltalake_wrote(
    written_by_deltalake: Path, tmp_path: Path
) -> None:
    reference = _stats_by_path(written_by_deltalake)
    table = tmp_path / "t"
    shutil.copytree(written_by_deltalake, table)
    _strip_stats(table)
    rows = _rows(table)
    plan = plan_recompute_stats(load_snapshot(table))
    assert {f.reason for f in plan.files} == {NO_STATS} and len(plan.files) == 2
    assert plan.columns[:4] == ("l", "i", "sh", "s") and "st.x" in plan.columns
    result = execute_recompute_stats(plan)
    assert result.files_recomputed == 2 and len(result.versions) == 1
    for path, stats in _stats_by_path(table).items():
        assert stats is not None and "tightBounds" not in stats  # no deletion vectors here
        _compare_with_deltalake(stats, reference[path])
    assert _rows(table) == rows
    assert plan_recompute_stats(load_snapshot(table)).nothing_to_do


def test_stats_from_the_data_where_footers_have_none(
    written_by_deltalake: Path, tmp_path: Path
) -> None:
    """The same files rewritten without footer statistics, timestamps as INT96 (Spark's
    encoding, whose footer bounds cannot be trusted) and two rows per row group: every value
    comes from reading the columns, and still equals delta-rs' stats."""
    reference = _stats_by_path(written_by_deltalake)
    table = tmp_path / "t"
    shutil.copytree(written_by_deltalake, table)
    sizes = {}
    for path in reference:
        data = pq.read_table(table / path)
        pq.write_table(
            data,
            table / path,
            write_statistics=False,
            use_deprecated_int96_timestamps=True,
            row_group_size=2,
        )
        sizes[path] = (table / path).stat().st_size
    for commit in (table / "_delta_log").glob("*.json"):
        actions = [json.loads(x) for x in commit.read_text().splitlines() if x.strip()]
        for action in actions:
            if "add" in action:
                action["add"].pop("stats", None)
                action["add"]["size"] = sizes[action["add"]["path"]]
        commit.write_text("".join(json.dumps(a) + "\n" for a in actions))
    meta = pq.read_metadata(table / next(iter(reference)))
    assert meta.num_row_groups == 3 and not meta.row_group(0).column(0).is_stats_set
    _recompute(table)
    for path, stats in _stats_by_path(table).items():
        assert stats is not None
        _compare_with_deltalake(stats, reference[path])
    assert _rows(table) == _rows(written_by_deltalake)


def _fixtures_with_their_data() -> list[str]:
    """Readable fixtures whose live files are all there (some are a log alone)."""
    names = []
    for name in readable_fixture_names():
        snapshot = load_snapshot(TABLES / name)
        paths = snapshot.file_index.column("path").to_pylist()
        if all((TABLES / name / p).exists() for p in paths):
            names.append(name)
    return names


@pytest.mark.parametrize("name", _fixtures_with_their_data())
def test_every_fixture_ends_with_stats_and_reads_the_same(name: str, tmp_path: Path) -> None:
    """Tables from tests/data: those without stats (delta-rs' simple tables, the 0.8.0
    writer's, Spark's vacuumed one) get them; the others have nothing to do. Peers read the
    same rows after, and every live file's numRecords is its footer's row count."""
    table = copy_fixture(name, tmp_path)
    snapshot = load_snapshot(table)
    storage = snapshot.storage
    rows = _peer_rows(table)
    plan = plan_recompute_stats(snapshot)
    before = file_digests(table)
    result = execute_recompute_stats(plan)
    if plan.nothing_to_do:
        assert result.versions == () and file_digests(table) == before
        return
    assert result.files_recomputed == len(plan.files)
    after = load_snapshot(table)
    assert after.version == snapshot.version + 1
    counts = dict(zip(after.files.column("path").to_pylist(), after.record_counts.to_pylist()))
    for path, count in counts.items():
        assert count == pq.read_metadata(storage.table_path(path)).num_rows, path
    assert _peer_rows(table) == rows
    assert plan_recompute_stats(load_snapshot(table)).nothing_to_do


def _peer_rows(table: Path) -> dict[str, list[str] | None]:
    """Each peer's rows as text (None where that peer refuses the table's features)."""

    out: dict[str, list[str] | None] = {}
    for peer in (deltalake_rows, duckdb_rows):
        try:
            out[peer.__name__] = sorted(
                json.dumps(r, sort_keys=True, default=str) for r in peer(table)
            )
        except Exception as exc:  # noqa: BLE001 - a peer refusing a feature is no failure
            out[peer.__name__] = (
                None
                if "ProtocolCheck" in str(exc) or "feature" in str(exc).lower()
                else [repr(exc)]
            )
    assert any(v is not None for v in out.values()), out
    return out


def test_the_commit_re_adds_the_same_files_with_only_stats_new(tmp_path: Path) -> None:
    """Delta Spark's COMPUTE STATS shape: adds only, dataChange=false, every other field kept."""
    table = copy_fixture("delta-rs/simple_table_with_checkpoint", tmp_path)
    before = {r["path"]: r for r in load_snapshot(table).files.to_pylist()}
    result = _recompute(table)
    [version] = result.versions
    lines = [
        json.loads(x)
        for x in (table / "_delta_log" / f"{version:020d}.json").read_text().splitlines()
    ]
    info = next(a["commitInfo"] for a in lines if "commitInfo" in a)
    assert info["operation"] == "COMPUTE STATS" and info["operationParameters"] == {
        "predicate": "[]"
    }
    assert not [a for a in lines if "remove" in a]
    adds = [a["add"] for a in lines if "add" in a]
    assert len(adds) == len(before)
    for add in adds:
        old = before[add["path"]]
        assert add["dataChange"] is False
        assert add["size"] == old["size"] and add["modificationTime"] == old["modificationTime"]
        assert add["partitionValues"] == dict(old["partitionValues"] or {})
        assert json.loads(add["stats"])["numRecords"] >= 0


def test_deletion_vector_files_get_wide_bounds_over_every_physical_row(tmp_path: Path) -> None:
    """numRecords counts the rows of the data file, not those left; the stats say they are
    wide bounds, and readers still read the rows left (the DV and row ids kept)."""
    table = copy_fixture("kernel/with-short-dv", tmp_path)
    reference = _stats_by_path(table)
    dvs = {r["path"]: r["deletionVector"] for r in load_snapshot(table).files.to_pylist()}
    rows = deltalake_rows(table)
    _strip_stats(table)
    _recompute(table)
    files = {r["path"]: r for r in load_snapshot(table).files.to_pylist()}
    for path, stats in _stats_by_path(table).items():
        assert stats is not None
        assert stats["tightBounds"] is (dvs[path] is None)
        assert stats == reference[path]  # exactly what Delta Spark wrote: INT96 read as data
        assert files[path]["deletionVector"] == dvs[path]
        assert stats["numRecords"] == pq.read_metadata(table / path).num_rows
    assert deltalake_rows(table) == rows
    assert len(duckdb_rows(table)) == len(rows)


def test_column_mapping_names_columns_physically(tmp_path: Path) -> None:
    table = copy_fixture("delta-rs/table_with_column_mapping", tmp_path)
    reference = _stats_by_path(table)
    rows = deltalake_rows(table)
    _strip_stats(table)
    plan = plan_recompute_stats(load_snapshot(table))
    assert plan.columns == ("Super Name",)  # logical names in the plan (the other partitions)
    execute_recompute_stats(plan)
    assert _stats_by_path(table) == reference  # physical names in the stats, as written
    assert deltalake_rows(table) == rows


def test_columns_the_table_now_asks_for_are_added_and_columns_narrows_the_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Files written while stats covered one column lack the others once the table asks for
    more; `--columns` checks only the columns it names."""
    table = tmp_path / "t"
    data = pa.table({"a": [1, 2], "b": ["x", "y"], "c": [3.0, None]})
    write_arrow(table, data, configuration={"delta.dataSkippingNumIndexedCols": "1"})
    write_arrow(table, data)
    stats = next(iter(_stats_by_path(table).values()))
    assert stats is not None and set(stats["nullCount"]) == {"a"}
    DeltaTable(str(table)).alter.set_table_properties({"delta.dataSkippingNumIndexedCols": "2"})

    assert plan_recompute_stats(load_snapshot(table), columns="a").nothing_to_do
    plan = plan_recompute_stats(load_snapshot(table), columns=[("B",)])
    assert [f.reason for f in plan.files] == ["lacks b", "lacks b"] and plan.checked == ("b",)
    with pytest.raises(InvalidValue, match="c gets no stats.*dataSkippingNumIndexedCols"):
        plan_recompute_stats(load_snapshot(table), columns="c")
    with pytest.raises(InvalidValue, match="has no column nope"):
        plan_recompute_stats(load_snapshot(table), columns="nope")

    assert cli.main(["recompute-stats", str(table), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.count("lacks b") == 2 and "stats columns: a, b" in out
    assert cli.main(["recompute-stats", str(table), "--columns", "c"]) == 2
    assert "--columns" in capsys.readouterr().err
    assert cli.main(["recompute-stats", str(table), "--json", "--batch-files", "1"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["files_recomputed"] == 2 and len(result["versions"]) == 2  # one per batch
    for stats in _stats_by_path(table).values():
        assert stats is not None
        assert stats["minValues"] == {"a": 1, "b": "x"} and stats["nullCount"] == {"a": 0, "b": 0}
    assert cli.main(["recompute-stats", str(table)]) == 0
    assert "nothing to recompute" in capsys.readouterr().out


def _duckdb_between(table: Path, low: int, high: int) -> tuple[list[int], str]:
    """The ids DuckDB returns for a range, and how many files it scanned ("2/5")."""
    query = f"SELECT id FROM delta_scan('{table}') WHERE id BETWEEN {low} AND {high}"
    con = duckdb_connection()
    try:
        ids = sorted(r[0] for r in con.sql(query).fetchall())
        profile = "\n".join(
            str(cell) for row in con.sql("EXPLAIN ANALYZE " + query).fetchall() for cell in row
        )
    finally:
        con.close()
    scanned = next(line for line in profile.splitlines() if "Scanning Files:" in line)
    return ids, scanned.split("Scanning Files:")[1].strip(" │")


def test_duckdb_returns_the_right_rows_and_skips_files_by_the_new_stats(tmp_path: Path) -> None:
    """Right rows throughout. delta-kernel (DuckDB) prunes adds before it replays them, so a
    pruned re-add does not hide the same file's older add without stats: it skips by the new
    stats once a checkpoint holds them (then only the re-adds are left)."""
    table = tmp_path / "t"
    for start in range(0, 50, 10):
        write_arrow(table, pa.table({"id": pa.array(range(start, start + 10), pa.int64())}))
    _strip_stats(table)
    assert _duckdb_between(table, 15, 24) == (list(range(15, 25)), "5/5")
    _recompute(table)
    assert _duckdb_between(table, 15, 24)[0] == list(range(15, 25))
    assert cli.main(["checkpoint", str(table)]) == 0
    assert _duckdb_between(table, 15, 24) == (list(range(15, 25)), "2/5")
    assert _duckdb_between(table, 50, 60) == ([], "0/5")


def test_row_tracking_reads_no_footer_once_stats_are_recomputed(tmp_path: Path) -> None:
    table = copy_fixture("delta-rs/simple_table", tmp_path)
    assert plan_enable_row_tracking(load_snapshot(table)).files_without_num_records == 5
    _recompute(table)
    assert plan_enable_row_tracking(load_snapshot(table)).files_without_num_records == 0


def test_a_file_changed_by_a_concurrent_commit_keeps_its_new_state(tmp_path: Path) -> None:
    """Between the plan and the commit, another writer removed one planned file: it is not
    re-added (the table would get its rows back); the others get their stats."""
    table = tmp_path / "t"
    for start in (0, 10, 20):
        write_arrow(table, pa.table({"id": pa.array(range(start, start + 3), pa.int64())}))
    _strip_stats(table)
    plan = plan_recompute_stats(load_snapshot(table))
    gone = plan.files[0].path
    DeltaTable(str(table)).delete(f"id = {pq.read_table(table / gone)['id'][0].as_py()}")
    result = execute_recompute_stats(plan)
    assert result.files_recomputed == 2 and result.files_skipped == 1
    assert gone not in load_snapshot(table).files.column("path").to_pylist()
    assert len(deltalake_rows(table)) == 8


def test_inspect_advises_recompute_stats_while_files_lack_num_records(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = copy_fixture("delta-rs/simple_table", tmp_path)
    assert cli.main(["inspect", str(table), "--json"]) == 0
    advice = json.loads(capsys.readouterr().out)["advice"]
    [item] = [a for a in advice if "recompute-stats" in a["command"]]
    assert item["problem"].startswith("5 live files have no numRecords")
    _recompute(table)
    assert cli.main(["inspect", str(table), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert not [a for a in summary["advice"] if "recompute-stats" in a["command"]]
    assert summary["num_records"] == len(deltalake_rows(table))
