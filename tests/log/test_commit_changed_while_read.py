"""A big local commit truncated or rewritten while it is being read (issue 52.3).

A commit file is never changed once written, but a user's tool, a restore from backup or a
broken sync can truncate or rewrite one while delta-ops reads it. A file mapped into memory
cannot survive that: on Linux a truncation takes away even the private (copy-on-write) pages of
a mapping, and the next touch kills the process with SIGBUS. So a commit is read into memory,
and what changes the file afterwards changes nothing that is being parsed.

Each case runs in a child process (a SIGBUS would kill the test run): the child loads a table
whose big commit (several pages, alone in its chunk) is changed on disk just before its bytes
are parsed, and must either read the version as it was read or fail with one error naming the
commit; never die of a signal.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import REPO
from tests.support import log_builder as lb

#: the child: load the table with every commit alone in its chunk, the commit `victim` changed
#: by `how` right before its bytes are parsed; print the live paths, or the error in one line
_CHILD = """
import sys
from delta_ops.errors import DeltaOpsError
from delta_ops.log import reader
from delta_ops.table.snapshot import load_snapshot

table, victim, how = sys.argv[1], sys.argv[2], sys.argv[3]
reader._chunks = lambda commits, limit=0: [commits[i : i + 1] for i in range(len(commits))]
real_parse = reader._parse_json
size = len(open(victim, "rb").read())
changed = []

def change_then_parse(data, options):
    if not changed and len(data) >= size:  # the victim's bytes
        changed.append(True)
        if how == "truncated-to-nothing":
            open(victim, "r+b").truncate(0)
        elif how == "truncated-mid-line":
            open(victim, "r+b").truncate(size // 2 + 7)
        else:  # rewritten: another, shorter commit in its place (truncated, then written)
            with open(victim, "wb") as f:
                f.write(b'{"add":{"path":"other.parquet","partitionValues":{},"size":1,'
                        b'"modificationTime":1,"dataChange":true}}\\n')
    return real_parse(data, options)

real_buffer = reader._commit_buffer

def truncate_then_read(storage, commits, scratch=None):
    if not changed and commits[0].size >= size:  # listed whole, torn before it is read
        changed.append(True)
        open(victim, "r+b").truncate(size // 2 + 7)
    return real_buffer(storage, commits, scratch)

if how == "torn-before-read":
    reader._commit_buffer = truncate_then_read
else:
    reader._parse_json = change_then_parse
try:
    snapshot = load_snapshot(table)
except DeltaOpsError as exc:
    print("error:", exc)
    sys.exit(3)
assert changed, "the commit was never parsed"
print(len(snapshot.files.column("path")))
"""

#: adds in the big commit: ~130 bytes each, over 1 MB (what the reader once mapped)
ADDS = 10_000


def _table(path: Path) -> Path:
    lb.write_commit(path, 0, [lb.commit_info(1_000), lb.protocol(), lb.metadata()])
    lb.write_commit(
        path, 1, [lb.commit_info(2_000), *[lb.add(f"a{i:05d}.parquet") for i in range(ADDS)]]
    )
    lb.write_commit(path, 2, [lb.commit_info(3_000), lb.add("b.parquet")])
    return path


@pytest.mark.parametrize(
    "how", ["truncated-to-nothing", "truncated-mid-line", "rewritten", "torn-before-read"]
)
def test_a_commit_changed_while_read_is_read_as_it_was_or_named_never_a_crash(
    tmp_path: Path, how: str
) -> None:
    table = _table(tmp_path / "t")
    victim = table / "_delta_log" / f"{1:020d}.json"
    assert victim.stat().st_size > 1 << 20
    child = subprocess.run(
        [sys.executable, "-c", _CHILD, str(table), str(victim), how],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert child.returncode >= 0, f"the reader died of signal {-child.returncode}: {child.stderr}"
    if child.returncode == 3:  # refused: one line naming the commit
        assert victim.name in child.stdout, child.stdout
    else:
        assert child.returncode == 0, child.stderr
        assert json.loads(child.stdout) == ADDS + 1  # the commit as it was read
