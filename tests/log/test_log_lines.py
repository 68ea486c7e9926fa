"""Every line delta-ops logs names the table it is about.

The library's log lines reach a Dagster step's log (`delta_ops.dagster.logs`) and the CLI's
stderr with ``-v``. A maintenance step may touch two tables (the one it maintains and the
operation history, which it creates on its first run), so a line that says only
"committed CREATE TABLE AS SELECT as version 0" reads as news of the user's table: each line
carries its table's URL.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pyarrow as pa

from delta_ops.cli.commands import main
from delta_ops.table.writer import write_arrow


def test_every_library_log_line_names_its_table(tmp_path: Path, caplog, capsys) -> None:
    table = tmp_path / "events"
    history = tmp_path / "_history"
    with caplog.at_level(logging.INFO, logger="delta_ops"):
        for i in range(3):
            write_arrow(table, pa.table({"id": pa.array([i], pa.int64())}))
        # a damaged checksum: the next commit's checksum is built from a full load, and says so
        (table / "_delta_log" / f"{2:020d}.crc").write_text("{not json")
        write_arrow(table, pa.table({"id": pa.array([3], pa.int64())}))
        # a hint naming a checkpoint that does not exist: the checkpoint repairs it
        (table / "_delta_log" / "_last_checkpoint").write_text(
            json.dumps({"version": 99, "size": 1})
        )
        for command in ("checkpoint", "cleanup", "compact", "vacuum"):
            assert main([command, str(table), "--history", str(history)]) == 0
    capsys.readouterr()
    lines = [r for r in caplog.records if r.name.startswith("delta_ops")]
    assert any("CREATE TABLE" in r.getMessage() for r in lines)  # the history's creation
    assert any("repairing" in r.getMessage() for r in lines)
    assert any("checksum" in r.getMessage() for r in lines)
    unnamed = [
        f"{r.name}: {r.getMessage()}"
        for r in lines
        if str(table) not in r.getMessage() and str(history) not in r.getMessage()
    ]
    assert unnamed == [], "\n".join(unnamed)
