"""`delta-ops inspect`: JSON fields, human output, exit codes and one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from delta_ops.cli import main
from tests.support import TABLES, peer_facts


def run(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_inspect_json_has_every_documented_field(capsys):
    code, out, _ = run(
        capsys,
        "inspect",
        str(TABLES / "delta-spark/dv-partitioned-with-checkpoint"),
        "--json",
        "--files",
    )
    assert code == 0
    doc = json.loads(out)
    fact = peer_facts()["delta-spark/dv-partitioned-with-checkpoint"]
    assert doc["version"] == fact["rs_version"] == 15
    assert set(doc["protocol"]) == {
        "minReaderVersion",
        "minWriterVersion",
        "readerFeatures",
        "writerFeatures",
    }
    assert doc["protocol"]["readerFeatures"] == ["deletionVectors"]
    assert set(doc["metadata"]) >= {"id", "partitionColumns", "configuration"}
    assert doc["num_files"] == len(fact["rs_files"]) == len(doc["files"])
    assert sorted(doc["files"]) == sorted(fact["rs_files"])
    assert doc["num_records"] - doc["num_deleted_records"] == fact["kernel_rows"]
    assert doc["num_deleted_records"] > 0
    assert doc["last_checkpoint_version"] == 10
    assert doc["commits_since_checkpoint"] == 5
    assert doc["row_tracking"] == "off"
    assert doc["size_bytes"] > 0
    assert isinstance(doc["num_tombstones"], int)


def test_inspect_json_num_records_null_without_stats(capsys):
    code, out, _ = run(capsys, "inspect", str(TABLES / "delta-rs/simple_table"), "--json")
    doc = json.loads(out)
    assert code == 0 and doc["num_records"] is None
    assert doc["last_checkpoint_version"] is None and doc["commits_since_checkpoint"] == 5
    assert "files" not in doc


def test_inspect_time_travel(capsys):
    _, out, _ = run(
        capsys, "inspect", str(TABLES / "delta-rs/simple_table"), "--version", "0", "--json"
    )
    assert json.loads(out)["version"] == 0


def test_inspect_human_output(capsys):
    code, out, _ = run(capsys, "inspect", str(TABLES / "delta-rs/table-with-dv-small"))
    assert code == 0
    assert "version:          1" in out
    assert "2 deleted by deletion vectors" in out


@pytest.mark.parametrize(
    ("table", "message"),
    [
        (
            "delta-spark/versions-not-contiguous",
            "00000000000000000002.json: log versions are not contiguous",
        ),
        ("delta-spark/deltalog-invalid-protocol-version", "unsupported reader protocol version 99"),
        ("kernel/crc-malformed", "not a Delta table"),
    ],
)
def test_inspect_failure_is_one_line_on_stderr_with_nonzero_exit(capsys, table, message):
    code, out, err = run(capsys, "inspect", str(TABLES / table))
    assert code != 0
    assert out == ""
    assert err.count("\n") == 1 and message in err


def test_console_script_runs_as_a_process(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "delta_ops.cli", "inspect", str(tmp_path), "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2  # the user's input: not a table
    assert result.stderr.startswith("delta-ops: error: not a Delta table")


def test_process_exit_delivers_the_whole_output_and_the_exit_code(capsys, tmp_path):
    """The command ends without interpreter teardown (`exit_now`): what it printed must still
    arrive whole, through a pipe and into a file, with the command's exit code."""
    table = str(TABLES / "kernel/v2-checkpoints-json-with-sidecars")
    code, expected, _ = run(capsys, "inspect", table, "--json", "--files")
    assert code == 0 and len(json.loads(expected)["files"]) == 101
    command = [sys.executable, "-m", "delta_ops.cli", "inspect", table, "--json", "--files"]
    piped = subprocess.run(command, capture_output=True, text=True, check=False)
    assert piped.returncode == 0
    assert json.loads(piped.stdout) == json.loads(expected)
    out_file = tmp_path / "out.json"
    with out_file.open("w") as sink:
        to_file = subprocess.run(command, stdout=sink, check=False)
    assert to_file.returncode == 0
    assert json.loads(out_file.read_text()) == json.loads(expected)
    failed = subprocess.run(
        [sys.executable, "-m", "delta_ops.cli", "vacuum", table, "--retention-hours", "-1"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert failed.returncode == 2 and failed.stderr.count("\n") == 1


def test_process_started_with_stdout_closed_exits_cleanly():
    import os

    closed = subprocess.run(
        [sys.executable, "-m", "delta_ops.cli", "--version"],
        preexec_fn=lambda: os.close(1),  # the child starts without a stdout
        capture_output=False,
        stderr=subprocess.PIPE,
        text=True,
        check=False,
    )
    # argparse sends the version to stderr when there is no stdout; nothing else is printed
    assert closed.returncode == 0 and "Traceback" not in closed.stderr


def _age_everything(table, days: float) -> None:
    import os
    import time

    when = time.time() - days * 86400
    for root, _, files in os.walk(table):
        for i, name in enumerate(sorted(files)):
            os.utime(os.path.join(root, name), (when + i, when + i))


def _advice(capsys, table) -> dict[str, str]:
    code, out, _ = run(capsys, "inspect", str(table), "--json")
    assert code == 0
    return {
        a["command"].split()[1]: a["problem"] for a in json.loads(out)["advice"] if a["command"]
    }


def test_inspect_says_what_needs_doing_and_each_command_clears_its_item(capsys, tmp_path):
    from tests.support import copy_fixture

    table = copy_fixture("delta-spark/dv-partitioned-with-checkpoint", tmp_path)
    _age_everything(table, 40)  # past the 30-day log and 7-day file retentions
    todo = _advice(capsys, table)
    assert set(todo) == {"compact", "cleanup", "vacuum"}, todo  # 12 small files, as plan says
    _, out, _ = run(capsys, "inspect", str(table))
    assert f"delta-ops cleanup {table}" in out and f"delta-ops vacuum {table} --dry-run" in out
    assert f"delta-ops compact {table} --dry-run" in out
    for command in ("compact", "cleanup", "vacuum"):
        assert main([command, str(table)]) == 0
        capsys.readouterr()
    assert _advice(capsys, table) == {}
    assert "to do:            nothing needs doing now" in run(capsys, "inspect", str(table))[1]


def test_inspect_asks_for_a_checkpoint_once_the_interval_is_reached(capsys, tmp_path):
    import pyarrow as pa

    from delta_ops.table.writer import write_arrow

    table = tmp_path / "t"
    for i in range(10):
        write_arrow(table, pa.table({"id": pa.array([i], pa.int64())}))
    assert "checkpoint" in _advice(capsys, table)
    assert main(["checkpoint", str(table)]) == 0
    capsys.readouterr()
    assert "checkpoint" not in _advice(capsys, table)


def test_the_log_files_past_retention_are_counted_among_the_log_files(capsys, tmp_path):
    """On a table with V2 sidecars, log cleanup deletes sidecars with the commits: the count
    of log files past retention is a part of the log's files, sidecars counted in both."""
    from tests.support import copy_fixture

    table = copy_fixture("kernel/v2-checkpoints-json-with-sidecars", tmp_path)
    _age_everything(table, 40)
    code, out, _ = run(capsys, "inspect", str(table), "--json")
    assert code == 0
    doc = json.loads(out)
    sidecars = [
        p.name for p in (table / "_delta_log" / "_sidecars").iterdir() if p.suffix == ".parquet"
    ]
    in_log = [p for p in (table / "_delta_log").iterdir() if p.is_file() and p.name[0] != "."]
    assert doc["log_files"] == len(in_log) + len(sidecars)
    assert 0 < doc["expired_log_files"] <= doc["log_files"]
    assert f"{doc['log_files']} files" in run(capsys, "inspect", str(table))[1]


def test_inspect_and_cleanup_agree_on_a_missing_last_checkpoint(capsys, tmp_path):
    """Without `_last_checkpoint` log cleanup deletes nothing (as Delta Spark's); inspect says
    so next to the checkpoint the listing holds, and advises the command that writes the
    hint, after which cleanup runs."""
    from tests.support import copy_fixture

    table = copy_fixture("delta-rs/simple_table_with_checkpoint", tmp_path)
    (table / "_delta_log" / "_last_checkpoint").unlink()
    _age_everything(table, 40)
    code, out, _ = run(capsys, "cleanup", str(table), "--dry-run")
    assert code == 0
    assert "no readable _last_checkpoint" in out
    code, out, _ = run(capsys, "inspect", str(table))
    assert code == 0
    (line,) = [line for line in out.splitlines() if line.startswith("last checkpoint:")]
    assert line.startswith("last checkpoint:  10") and "_last_checkpoint: missing" in line, line
    todo = _advice(capsys, table)
    assert "_last_checkpoint" in todo["checkpoint"], todo
    assert "cleanup" not in todo  # it would delete nothing
    assert main(["checkpoint", str(table)]) == 0
    said = capsys.readouterr().out  # version 10 has its checkpoint: the run writes the hint
    assert "nothing written" not in said and "wrote _last_checkpoint" in said, said
    assert (table / "_delta_log" / "_last_checkpoint").exists()
    code, out, _ = run(capsys, "inspect", str(table))
    assert code == 0
    assert "_last_checkpoint" not in out
    assert "cleanup" in _advice(capsys, table)
