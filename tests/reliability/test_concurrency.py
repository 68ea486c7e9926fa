"""Concurrency in real processes: writers committing while our maintenance runs (issue 11).

Appender processes commit through our Transaction API while other processes run vacuum (forced
zero retention, the most aggressive setting), checkpoints and log cleanup in a loop, and while
two of the same op run at once. Afterwards every committed append is in the table, every file
the latest version references exists (`deltalake` reads it), and no process failed.

The second test gives vacuum real work throughout the race (tombstones and orphans two days
old, more old orphans dropped while it runs) and adds `deltalake` appenders: another engine,
whose commits never check for a VACUUM START, so only the in-flight grace protects their fresh
files. Every version since the race began must keep its files, and every old candidate must be
gone at the end (the vacuums did delete).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable, PostCommitHookProperties, write_deltalake

from delta_ops.clock import now_ms
from delta_ops.ops.vacuum import DEFAULT_IN_FLIGHT_GRACE_MS, plan_vacuum
from delta_ops.table.snapshot import load_snapshot
from delta_ops.table.writer import write_arrow
from tests.support import REPO, deltalake_rows

# deltalake is another engine here: no checkpoints or log cleanup of its own
_NO_HOOKS = PostCommitHookProperties(create_checkpoint=False, cleanup_expired_logs=False)

_APPEND = """
import sys, time
import pyarrow as pa
from delta_ops.table.writer import write_arrow
table, worker, n, start = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
while time.time() < start:
    time.sleep(0.001)
for i in range(n):
    write_arrow(table, pa.table({"id": pa.array([worker * 1000 + i], pa.int64())}))
print("ok")
"""

_MAINTAIN = """
import sys, time
from delta_ops.clock import now_ms
from delta_ops.ops.checkpoint import checkpoint
from delta_ops.ops.cleanup import execute_cleanup, plan_cleanup
from delta_ops.ops.vacuum import execute_vacuum, plan_vacuum
from delta_ops.table.snapshot import load_snapshot
table, op, until = sys.argv[1], sys.argv[2], float(sys.argv[3])
runs = 0
while runs < 2 or time.time() < until:  # twice at least, however late a loaded machine starts it
    if op == "vacuum":
        plan = plan_vacuum(load_snapshot(table), now_ms(), retention_ms=0, force=True)
        execute_vacuum(plan)
    elif op == "checkpoint":
        checkpoint(table)
    else:
        execute_cleanup(plan_cleanup(load_snapshot(table), now_ms(), retention_ms=0))
    runs += 1
print(runs)
"""


def _spawn(code: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_appends_land_and_read_while_vacuum_checkpoint_and_cleanup_run_twice_each(
    tmp_path: Path,
) -> None:
    table = tmp_path / "t"
    write_arrow(table, pa.table({"id": pa.array([-1], pa.int64())}))
    start = time.time() + 2.0
    until = start + 6.0
    writers = [_spawn(_APPEND, str(table), str(w), "8", str(start)) for w in range(4)]
    maintainers = [
        _spawn(_MAINTAIN, str(table), op, str(until))
        for op in ("vacuum", "vacuum", "checkpoint", "checkpoint", "cleanup", "cleanup")
    ]
    outputs = [(p, *p.communicate(timeout=240)) for p in writers + maintainers]
    failed = [(p.args[3:], err[-1500:]) for p, _, err in outputs if p.returncode != 0]
    assert failed == []
    runs = [int(out.strip()) for p, out, _ in outputs[len(writers) :]]
    assert all(r > 0 for r in runs), runs
    expected = sorted([-1] + [w * 1000 + i for w in range(4) for i in range(8)])
    assert sorted(r["id"] for r in deltalake_rows(table)) == expected
    snapshot = load_snapshot(table)
    missing = [p for p in snapshot.files.column("path").to_pylist() if not (table / p).exists()]
    assert missing == []


# ------------------------------------------------------------ another engine against vacuum
# (issue item 27.e) Vacuum has real candidates from the first moment of the race: tombstones
# and orphans dated two days back, and more orphans of that age dropped while it runs. Beside
# our appenders, `deltalake` appends: another engine, whose commits know nothing of VACUUM
# START, so only vacuum's in-flight grace (at its default) keeps its fresh, not yet committed
# files from being taken. The race is far shorter than that grace.

_AGE_S = 2 * 86_400  # the history's age: past the grace, the retention (0) and the day cutoff
_RACE_S = 8.0
_GRACE_MS = DEFAULT_IN_FLIGHT_GRACE_MS  # 0 here must turn the test red

# Each process imports what it needs, says it is ready, then waits for the go file, which holds
# when the race ends: the race starts once every process is up, however long a loaded machine
# takes to start them.
_READY = """
table, go = sys.argv[1], sys.argv[2]
print("ready", flush=True)
while not os.path.exists(go):
    time.sleep(0.005)
with open(go) as f:
    until = float(f.read())
"""

_OUR_APPENDS = (
    """
import json, os, sys, time
import pyarrow as pa
from delta_ops.table.writer import write_arrow
"""
    + _READY
    + """
worker = int(sys.argv[3])
committed = []
while time.time() < until and len(committed) < 300:
    value = worker * 1000 + len(committed)
    write_arrow(table, pa.table({"id": pa.array([value], pa.int64())}))
    committed.append(value)
print(json.dumps({"committed": committed, "refused": []}))
"""
)

_DELTALAKE_APPENDS = (
    """
import json, os, sys, time
import pyarrow as pa
from deltalake import PostCommitHookProperties, write_deltalake
from deltalake.exceptions import CommitFailedError
"""
    + _READY
    + """
worker = int(sys.argv[3])
no_hooks = PostCommitHookProperties(create_checkpoint=False, cleanup_expired_logs=False)
committed, refused = [], []
for i in range(300):
    if time.time() >= until:
        break
    value = worker * 1000 + i
    data = pa.table({"id": pa.array([value], pa.int64())})
    try:
        write_deltalake(table, data, mode="append", post_commithook_properties=no_hooks)
    except CommitFailedError as exc:  # lost the commit race: allowed, and must not be visible
        refused.append([value, str(exc)[:300]])
    else:
        committed.append(value)
print(json.dumps({"committed": committed, "refused": refused}))
"""
)

_MAINTAINS = (
    """
import json, os, sys, time
from delta_ops.clock import now_ms
from delta_ops.ops.checkpoint import checkpoint
from delta_ops.ops.cleanup import execute_cleanup, plan_cleanup
from delta_ops.ops.vacuum import execute_vacuum, plan_vacuum
from delta_ops.table.snapshot import load_snapshot
"""
    + _READY
    + """
op, grace = sys.argv[3], int(sys.argv[4])
runs, deleted = 0, []
while time.time() < until:
    if op == "vacuum":
        plan = plan_vacuum(
            load_snapshot(table), now_ms(), retention_ms=0, force=True, in_flight_grace_ms=grace
        )
        deleted += execute_vacuum(plan).deleted
    elif op == "checkpoint":
        checkpoint(table)
    else:
        execute_cleanup(plan_cleanup(load_snapshot(table), now_ms(), retention_ms=0))
    runs += 1
print(json.dumps({"runs": runs, "deleted": deleted}))
"""
)

_OLD_ORPHANS = (
    """
import json, os, sys, time, uuid
import pyarrow as pa
import pyarrow.parquet as pq
"""
    + _READY
    + """
stop, age = until - float(sys.argv[3]), float(sys.argv[4])  # stops this long before the end
names = []
while time.time() < stop:
    name = f"orphan-{uuid.uuid4().hex}.parquet"
    hidden = os.path.join(table, "." + name)  # a hidden name: no vacuum lists it while young
    pq.write_table(pa.table({"id": pa.array([-9], pa.int64())}), hidden)
    old = time.time() - age
    os.utime(hidden, (old, old))
    os.rename(hidden, os.path.join(table, name))
    names.append(name)
    time.sleep(0.2)
print(json.dumps(names))
"""
)


def _date_history(table: Path, when_ms: int) -> None:
    """Make every file of `table` `when_ms` old: data files and orphans a minute before the
    first commit, commit N a minute after commit N-1, with the times inside each commit
    (commitInfo.timestamp, add.modificationTime, remove.deletionTimestamp) to match."""
    for file in table.rglob("*"):
        if not file.is_file():
            continue
        when = when_ms - 60_000
        if file.parent.name == "_delta_log" and file.suffix == ".crc":
            file.unlink()  # a checksum describes its commit as written, not as redated here
            continue
        if file.parent.name == "_delta_log":
            assert file.name.endswith(".json") and file.name[:20].isdigit(), file.name
            when = when_ms + int(file.name[:20]) * 60_000
            actions = [json.loads(x) for x in file.read_text().splitlines() if x.strip()]
            for action in actions:
                for kind, key in (
                    ("commitInfo", "timestamp"),
                    ("add", "modificationTime"),
                    ("remove", "deletionTimestamp"),
                ):
                    if kind in action:
                        action[kind][key] = when
            file.write_text("".join(json.dumps(a) + "\n" for a in actions))
        os.utime(file, (when / 1000, when / 1000))


def _old_history(table: Path) -> tuple[list[int], set[str]]:
    """Appends, an overwrite, more appends and a delete (by us and by `deltalake`), plus
    orphans, all two days old: (the rows it holds, the files vacuum may delete)."""

    def ids(*values: range) -> pa.Table:
        return pa.table({"id": pa.array([v for r in values for v in r], pa.int64())})

    for k in range(4):
        write_arrow(table, ids(range(10 * k, 10 * k + 10)))
    write_arrow(table, ids(range(100, 110)), mode="overwrite")  # four tombstones
    write_arrow(table, ids(range(110, 120)))
    write_deltalake(
        str(table), ids(range(120, 130)), mode="append", post_commithook_properties=_NO_HOOKS
    )
    # rewrites both files: two more tombstones
    DeltaTable(str(table)).delete("id >= 115 AND id < 125", post_commithook_properties=_NO_HOOKS)
    (table / "stale").mkdir()
    orphans = {"orphan-a.parquet", "orphan-b.parquet", "stale/orphan-c.parquet"}
    for name in orphans:
        pq.write_table(ids(range(-5, -3)), table / name)  # written, never committed
    _date_history(table, int((time.time() - _AGE_S) * 1000))
    snapshot = load_snapshot(table)
    tombstoned = set(snapshot.tombstones.column("path").to_pylist())
    assert len(tombstoned) == 6
    rows = [*range(100, 115), *range(125, 130)]
    return rows, tombstoned | orphans


def _operation(log: Path, version: int) -> tuple[str, str]:
    """(operation, engineInfo) of a commit."""
    for line in (log / f"{version:020}.json").read_text().splitlines():
        info = json.loads(line).get("commitInfo") if line.strip() else None
        if info is not None:
            return info.get("operation", ""), info.get("engineInfo", "")
    return "", ""


def _committed(output: str) -> tuple[list[int], list[list[Any]]]:
    data = json.loads(output)
    return data["committed"], data["refused"]


def test_deltalake_and_our_appends_survive_vacuums_that_delete_old_files_meanwhile(
    tmp_path: Path,
) -> None:
    table = tmp_path / "t"
    old_rows, old_candidates = _old_history(table)
    # the setup is what it claims: vacuum, as the race runs it, would delete exactly these
    plan = plan_vacuum(
        load_snapshot(table), now_ms(), retention_ms=0, force=True, in_flight_grace_ms=_GRACE_MS
    )
    assert {c.path for c in plan.candidates} == old_candidates
    assert plan.directories == ("stale",)
    first_race_version = load_snapshot(table).version + 1

    go = tmp_path / "go"
    ours = [_spawn(_OUR_APPENDS, str(table), str(go), str(w)) for w in (1, 2)]
    theirs = [_spawn(_DELTALAKE_APPENDS, str(table), str(go), str(w)) for w in (11, 12, 13)]
    grace = str(_GRACE_MS)
    vacuums = [_spawn(_MAINTAINS, str(table), str(go), "vacuum", grace) for _ in range(2)]
    others = [_spawn(_MAINTAINS, str(table), str(go), op, "0") for op in ("checkpoint", "cleanup")]
    dropper = _spawn(_OLD_ORPHANS, str(table), str(go), str(_RACE_S / 2), str(_AGE_S))
    everyone = [*ours, *theirs, *vacuums, *others, dropper]
    ready = [p.stdout.readline() if p.stdout else "" for p in everyone]
    (tmp_path / "go.tmp").write_text(str(time.time() + _RACE_S))
    (tmp_path / "go.tmp").rename(go)
    outputs = [(p, *p.communicate(timeout=240)) for p in everyone]
    failed = [(p.args[3:], err[-1500:]) for p, _, err in outputs if p.returncode != 0]
    assert failed == []
    assert ready == ["ready\n"] * len(everyone)
    out = {p.pid: text for p, text, _ in outputs}

    # every committed append, ours and deltalake's, is in the table; no refused one is
    committed = list(old_rows)
    refused: list[list[Any]] = []
    for p in ours + theirs:
        values, lost = _committed(out[p.pid])
        committed += values
        refused += lost
    assert len(committed) > len(old_rows) + 10
    rows = sorted(r["id"] for r in deltalake_rows(table))
    assert rows == sorted(committed), refused
    assert not {value for value, _ in refused} & set(rows)
    snapshot = load_snapshot(table)
    missing = [p for p in snapshot.files.column("path").to_pylist() if not (table / p).exists()]
    assert missing == []

    # every version since the race began reads (while its log is there: cleanup may have
    # taken commits before its newest checkpoint): deltalake loads it and finds all its files,
    # and a sample of them reads back with the old rows and committed ones only
    log = table / "_delta_log"
    checkpoints = [int(f.name[:20]) for f in log.glob("*.checkpoint.parquet")]
    readable_from = 0 if (log / f"{0:020}.json").exists() else min(checkpoints)
    versions = range(max(first_race_version, readable_from), snapshot.version + 1)
    assert len(versions) > 10
    peer = DeltaTable(str(table), version=versions[0])
    for version in versions:
        peer.load_as_version(version)
        gone = [uri for uri in peer.file_uris() if not os.path.exists(uri)]
        assert gone == [], version
    for version in versions[:: max(1, len(versions) // 8)]:
        seen = {r["id"] for r in deltalake_rows(table, version=version)}
        assert set(old_rows) <= seen <= set(committed), version

    # liveness: the vacuums deleted every old candidate, and the orphans dropped meanwhile
    vacuumed = [json.loads(out[p.pid]) for p in vacuums]
    assert all(v["runs"] > 0 for v in vacuumed), vacuumed
    dropped = set(json.loads(out[dropper.pid]))
    assert dropped
    left = sorted(p for p in old_candidates | dropped if (table / p).exists())
    assert left == []
    assert not (table / "stale").exists()
    deleted = {p for v in vacuumed for p in v["deleted"]}
    assert old_candidates | dropped <= deleted

    # the race ran: deltalake committed between vacuums' first START and last END
    operations = {v: _operation(log, v) for v in versions}
    vacuum_starts = [v for v, (op, _) in operations.items() if op == "VACUUM START"]
    vacuum_ends = [v for v, (op, _) in operations.items() if op == "VACUUM END"]
    assert vacuum_starts and vacuum_ends
    theirs_meanwhile = [
        v
        for v, (_, engine) in operations.items()
        if engine.startswith("delta-rs") and vacuum_starts[0] < v < vacuum_ends[-1]
    ]
    assert theirs_meanwhile, (vacuum_starts, vacuum_ends)
