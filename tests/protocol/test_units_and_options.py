"""One vocabulary for durations and times, and front ends generated from the ops registry.

The same duration written any accepted way means the same milliseconds; malformed values are
one line naming the option, the value and the accepted forms, exit 2, and nothing is written.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from delta_ops import cli
from delta_ops.ops.registry import OPERATIONS
from delta_ops.ops.results import to_data
from delta_ops.ops.vacuum import VacuumOptions
from delta_ops.protocol.units import (
    format_bytes,
    format_duration,
    format_time_ms,
    parse_duration_ms,
    parse_size_bytes,
    parse_time_ms,
)
from delta_ops.table.snapshot import load_snapshot
from delta_ops.version import __version__
from tests.support import REPO, copy_fixture

WEEK_MS = 7 * 86_400_000


@pytest.mark.parametrize(
    "text",
    [
        "7d",
        "168h",
        "10080m",
        "1w",
        "P7D",
        "PT168H",
        "P1W",
        "7 days",
        "interval 7 days",
        "6d24h",
        " 7 D ",
    ],
)
def test_every_form_of_a_week_is_a_week(text: str) -> None:
    assert parse_duration_ms(text) == WEEK_MS


@pytest.mark.parametrize(
    "text",
    ["168", "7", "00", "0.0", "-0", "+0", "7x", "P", "PT", "", "-1d", "soon", "1 month"],
)
def test_malformed_durations_name_the_value_and_the_forms(text: str) -> None:
    with pytest.raises(ValueError, match="7d, 168h") as info:
        parse_duration_ms(text)
    assert repr(text) in str(info.value)


@pytest.mark.parametrize("text", ["0", " 0 ", "0s", "0d", "PT0S", "0 days"])
def test_zero_needs_no_unit(text: str) -> None:
    """Zero is zero in every unit (as Go's ParseDuration says); any other bare number stays
    refused."""
    assert parse_duration_ms(text) == 0


def test_retention_0_is_accepted_by_the_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = copy_fixture("delta-rs/simple_table", tmp_path)
    code = cli.main(["vacuum", str(table), "--retention", "0", "--force", "--dry-run", "--json"])
    plan = json.loads(capsys.readouterr().out)
    assert code == 0 and plan["retention_ms"] == 0


def test_times() -> None:
    assert parse_time_ms("now", now_ms=42) == 42
    assert parse_time_ms("1700000000s", now_ms=0) == 1_700_000_000_000
    assert parse_time_ms("1700000000000ms", now_ms=0) == 1_700_000_000_000
    assert parse_time_ms("2023-11-14T22:13:20Z", now_ms=0) == 1_700_000_000_000
    assert parse_time_ms("2023-11-14T23:13:20+01:00", now_ms=0) == 1_700_000_000_000
    for bad in ("1700000000", "next week", "2024-13-45", "2023-11-14T22:13:20"):
        with pytest.raises(ValueError, match="ISO 8601"):
            parse_time_ms(bad, now_ms=0)


@pytest.mark.parametrize(
    ("text", "printed"),
    [
        ("2023-08-07T16:45:35.372+00:00", "2023-08-07T16:45:35.372Z"),
        ("2023-08-07T18:45:35.005+02:00", "2023-08-07T16:45:35.005Z"),
        ("2023-11-14T22:13:20.123Z", "2023-11-14T22:13:20.123Z"),  # not .123000
        ("2023-08-07T16:45:35Z", "2023-08-07T16:45:35Z"),  # whole seconds print as such
        ("2023-08-07", "2023-08-07T00:00:00Z"),
        ("-1ms", "1969-12-31T23:59:59.999Z"),
    ],
)
def test_times_print_with_their_milliseconds(text: str, printed: str) -> None:
    """Issue 51.6: a time given to the millisecond is echoed to the millisecond, and reads
    back as the same time."""
    ms = parse_time_ms(text, now_ms=0)
    assert format_time_ms(ms) == printed
    assert parse_time_ms(printed, now_ms=0) == ms


@pytest.mark.parametrize(
    ("text", "size"),
    [("4194304", 4_194_304), (" 1 ", 1), ("4MB", 4_194_304), ("4194304 bytes", 4_194_304)],
)
def test_a_bare_whole_number_is_a_size_in_bytes(text: str, size: int) -> None:
    """Issue 50.5: as delta-rs' `target_size` and Spark's `maxFileSize` take it."""
    assert parse_size_bytes(text) == size


@pytest.mark.parametrize("text", ["1.5", "-4", "0", "4194304.0", "4 194 304", "big", ""])
def test_a_size_that_is_no_whole_number_of_bytes_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="size") as info:
        parse_size_bytes(text)
    assert repr(text) in str(info.value)


def test_a_bare_size_is_bytes_in_the_cli_and_dagster_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from delta_ops.dagster.jobs import config_for

    table = copy_fixture("delta-rs/simple_table", tmp_path)
    code = cli.main(["compact", str(table), "--target-size", "4194304", "--dry-run", "--json"])
    assert code == 0 and json.loads(capsys.readouterr().out)["target_size"] == 4_194_304
    compact = OPERATIONS["compact"]
    for given in (4_194_304, "4194304", "4MB"):  # YAML's 4194304 is a number
        config = config_for("compact")(target_size=given).model_dump()
        values = compact.parse({o.name: config[o.name] for o in compact.options if not o.cli_only})
        assert values.target_size == 4_194_304


def test_human_units() -> None:
    assert [format_bytes(n) for n in (10, 1536, 300 * 2**20, 5 * 2**30)] == [
        "10 bytes",
        "1.5 KB",
        "300 MB",
        "5.0 GB",
    ]
    assert [format_duration(ms) for ms in (WEEK_MS, 36 * 3_600_000, 90 * 60_000, 1500)] == [
        "7 days",
        "36 hours",
        "90 minutes",
        "1500 ms",
    ]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["vacuum", "{t}", "--retention", "168"], "--retention: '168'"),
        (["vacuum", "{t}", "--retention", "99999999999999999999d"], "--retention"),
        (["vacuum", "{t}", "--now", "next week"], "--now: 'next week'"),
        (["vacuum", "{t}", "--now", "1700000000"], "--now: '1700000000' has no unit"),
        (["vacuum", "{t}", "--in-flight-grace", "soon"], "--in-flight-grace: 'soon'"),
        (["vacuum", "{t}", "--mode", "fast"], "--mode: 'fast' is not one of full, lite"),
        (["checkpoint", "{t}", "--now", "2024-13-45"], "--now: '2024-13-45'"),
        (["cleanup", "{t}", "--retention", "7x"], "--retention: '7x'"),
        (["enable-row-tracking", "{t}", "--batch-files", "many"], "--batch-files: 'many'"),
        (["checkpoint", "{t}", "--parts", "0"], "--parts: must be at least 1"),
        (["purge", "{t}", "--min-deleted-ratio", "2"], "--min-deleted-ratio: '2'"),
        (["purge", "{t}", "--min-deleted-ratio", "half"], "--min-deleted-ratio: 'half'"),
        (["compact", "{t}", "--target-size", "12.5"], "--target-size: '12.5' is not a size"),
        (["compact", "{t}", "--target-size", "0"], "--target-size: '0' is not a size of at"),
        (["compact", "{t}", "--target-size", "big"], "--target-size: 'big'"),
        (["compact", "{t}", "--where", "id=3"], "--where 'id=3'"),
        (
            ["inspect", "s3://lake/t", "--storage-option", "use_listings_cache=maybe"],
            "use_listings",
        ),
        (["vacuum", "{t}", "--retention", ""], "--retention: '' is not a duration"),
        (["vacuum", "{t}", "--retention", "-7d"], "argument --retention: expected one argument"),
        (["vacuum", "{t}", "--mode"], "argument --mode: expected one argument"),
        (["checkpoint", "{t}", "--version", "abc"], "--version: invalid int value: 'abc'"),
        (["checkpoint", "{t}", "--version", "99"], "version 99 does not exist (latest is 4)"),
        (["inspect", "{t}", "--storage-option", "novalue"], "'novalue' is not KEY=VALUE"),
        (["inspect", "{t}", "--storage-option", "retries:=two"], "retries:=two: not JSON"),
        (["frobnicate", "{t}"], "invalid choice: 'frobnicate'"),
        (["inspect", "{missing}"], "not a Delta table"),
        (["vacuum", "{file}"], "not a Delta table"),
        (["cleanup", "{empty}"], "no _delta_log directory"),
        (["inspect", ""], "table location '' is empty"),
        (["inspect", "foo://bar/t"], "unknown storage scheme 'foo'"),
        (["inspect", "hdfs://namenode/t"], "cannot open the hdfs:// store"),
    ],
)
def test_bad_option_values_are_one_line_exit_2_and_change_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], needle: str
) -> None:
    table = copy_fixture("delta-rs/simple_table", tmp_path)
    (tmp_path / "a-file").write_text("not a table")
    (tmp_path / "empty").mkdir()
    paths = {
        "t": table,
        "missing": tmp_path / "missing",
        "file": tmp_path / "a-file",
        "empty": tmp_path / "empty",
    }
    before = sorted((p.name, p.stat().st_mtime_ns) for p in tmp_path.rglob("*"))
    code = cli.main([a.format(**paths) for a in args])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("delta-ops: error: ") and needle in lines[0]
    assert sorted((p.name, p.stat().st_mtime_ns) for p in tmp_path.rglob("*")) == before


def test_version_flag() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "delta_ops.cli", "--version"],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=True,
    )
    assert out.stdout.strip() == f"delta-ops {__version__}"


def test_a_closed_pipe_is_quiet(tmp_path: Path) -> None:
    table = copy_fixture("delta-rs/simple_table", tmp_path)
    proc = subprocess.run(
        f"{sys.executable} -m delta_ops.cli inspect {table} --files | head -c 1",
        shell=True,
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    assert proc.stderr == ""


def test_every_plan_and_result_is_plain_json(tmp_path: Path) -> None:
    table = copy_fixture("delta-rs/simple_table", tmp_path)
    for name in ("checkpoint", "cleanup", "vacuum"):
        op = OPERATIONS[name]
        plan = op.plan(load_snapshot(table), op.parse({}))
        result = op.execute(plan)
        for data in (to_data(plan), to_data(result)):
            assert json.loads(json.dumps(data)) == data and data["table"]
        assert op.describe_plan(plan) and op.describe_result(result)


def test_dagster_run_config_is_generated_from_the_registry() -> None:
    from delta_ops.dagster.jobs import config_for

    for op in OPERATIONS.values():
        fields = set(config_for(op.name).model_fields) - {"tables", "dry_run"}
        assert fields == {o.name for o in op.options if not o.cli_only}
    vacuum = config_for("vacuum")(retention="7d", mode="lite", force=True)
    assert OPERATIONS["vacuum"].parse(
        {k: v for k, v in vacuum.model_dump().items() if k not in ("tables", "dry_run")}
    ) == VacuumOptions(retention=WEEK_MS, mode="lite", force=True)
