"""What every version of a raced table must hold, rebuilt from its log alone.

The race (tests/reference/test_races.py) records each Delta Spark write attempt as data (its
tag and spec, tests/reference/race_workload.py) and each write of ours by the version it
committed. Walking the commits from version 0, a commit:
- tagged `race:...` applies that attempt's spec (append, delete, update, merge; OPTIMIZE,
  VACUUM: nothing);
- of Delta Spark's streaming sink applies the micro-batch its `txn` names;
- known to the test (the seed, our appends) applies what the test wrote;
- RESTORE (ours or Delta Spark's) returns to the rows of the version it names;
- anything else is maintenance and must change no data: an add or remove with
  `dataChange=true` there is reported, as is a commit whose tag no attempt has.

Commit files cleanup deleted are read from the race's archive (the race copies the log there
before each cleanup), so versions before the oldest retained one still chain.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Rows = dict[int, int]  # id -> v

#: per race, its counts (written into the reference report at the end of the run)
REPORT: list[str] = []


def rows_list(rows: Rows) -> list[dict[str, int]]:
    """The rows as records, sorted by id (the order `sorted_rows` gives Delta Spark's)."""
    return [{"id": i, "v": rows[i]} for i in sorted(rows)]


def apply_spec(rows: Rows, spec: Mapping[str, Any]) -> Rows:
    """The rows after one write described by `spec` (race_workload's kinds)."""
    kind = spec["kind"]
    out = dict(rows)
    if kind in ("append", "stream"):
        for i in spec["ids"]:
            if i in out:
                raise AssertionError(f"id {i} appended twice")
            out[i] = 0
    elif kind == "delete":
        out = {i: v for i, v in out.items() if i % spec["k"] != spec["r"]}
    elif kind == "update":
        out = {i: v + 1 if i % spec["k"] == spec["r"] else v for i, v in out.items()}
    elif kind == "merge":
        for i, v in spec["pairs"]:
            out[i] = v
    elif kind not in ("optimize", "vacuum", "checkpoint"):
        raise ValueError(f"unknown spec kind {kind!r}")
    return out


def read_commit(path: Path, archive: Path | None, version: int) -> list[dict[str, Any]] | None:
    """The actions of `version`'s commit, from the log or (deleted by cleanup) the archive."""
    name = f"{version:020d}.json"
    for folder in (path / "_delta_log", archive):
        if folder is not None and (folder / name).exists():
            lines = (folder / name).read_text().splitlines()
            return [json.loads(line) for line in lines if line.strip()]
    return None


def latest_version(path: Path) -> int:
    names = os.listdir(path / "_delta_log")
    return max(int(n[:20]) for n in names if n.endswith(".json") and n[:20].isdigit())


@dataclass
class Model:
    """The rows at every version, what each commit was, and what did not add up."""

    states: dict[int, Rows] = field(default_factory=dict)
    authors: Counter[str] = field(default_factory=Counter)
    problems: list[str] = field(default_factory=list)
    committed_tags: list[str] = field(default_factory=list)
    #: the rows of every write that removed nothing (dataChange), as a streaming read that
    #: skips change commits sees them: (id, v) -> how many times
    inserted: Counter[tuple[int, int]] = field(default_factory=Counter)


def build_model(
    path: Path,
    archive: Path | None,
    attempts: list[dict[str, Any]],
    batches: Mapping[str, list[int]],
    known: Mapping[int, Mapping[str, Any]],
) -> Model:
    """Walk versions 0..latest (`known`: specs of the test's own writes by version)."""
    by_tag = {a["tag"]: a for a in attempts}
    model = Model()
    rows: Rows = {}
    for version in range(latest_version(path) + 1):
        actions = read_commit(path, archive, version)
        if actions is None:
            model.problems.append(f"version {version}: commit neither in the log nor archived")
            return model
        info = next((a["commitInfo"] for a in actions if "commitInfo" in a), {})
        tag = info.get("userMetadata")
        operation = str(info.get("operation"))
        data_actions = [a.get("add") or a.get("remove") for a in actions]
        changes = [a for a in data_actions if a is not None and a.get("dataChange", True)]
        removes = any(a.get("remove", {}).get("dataChange", True) for a in actions if "remove" in a)
        before = rows
        if version in known:
            rows = apply_spec(rows, known[version])
            model.authors["test"] += 1
        elif isinstance(tag, str) and tag.startswith("race:"):
            if tag not in by_tag:
                model.problems.append(f"version {version}: tag {tag} of no attempt")
                continue
            model.committed_tags.append(tag)
            rows = apply_spec(rows, by_tag[tag]["spec"])
            spec = by_tag[tag]["spec"]
            model.authors[f"delta-spark {spec.get('via', spec['kind'])}"] += 1
        elif operation == "STREAMING UPDATE":
            txn = next((a["txn"] for a in actions if "txn" in a), None)
            batch = None if txn is None else batches.get(str(txn["version"]))
            if batch is None:
                model.problems.append(f"version {version}: a stream batch the race did not send")
            else:
                rows = apply_spec(rows, {"kind": "stream", "ids": batch})
                model.authors["delta-spark stream"] += 1
        elif operation == "RESTORE":
            target = int(info["operationParameters"]["version"])
            rows = dict(model.states[target])
            model.authors["restore"] += 1
        elif changes:
            model.problems.append(
                f"version {version} ({operation}) changed data without being a write: "
                f"{len(changes)} actions with dataChange=true"
            )
        else:
            model.authors[f"maintenance {operation}"] += 1
        model.states[version] = rows
        if not removes and operation != "RESTORE":
            model.inserted.update((i, v) for i, v in rows.items() if before.get(i) != v)
    committed = Counter(model.committed_tags)
    for attempt in attempts:
        seen = committed.get(attempt["tag"], 0)
        # Delta Spark's VACUUM commits twice (VACUUM START, VACUUM END), both tagged
        if seen > (2 if attempt["spec"]["kind"] == "vacuum" else 1):
            model.problems.append(f"{attempt['tag']} committed {seen} times")
        # OPTIMIZE, VACUUM and a checkpoint with nothing to do write no commit
        may_skip = attempt["spec"]["kind"] in ("optimize", "vacuum", "checkpoint")
        if attempt["outcome"] == "committed" and seen == 0 and not may_skip:
            model.problems.append(f"{attempt['tag']} ({attempt['spec']['kind']}) was lost")
    return model
