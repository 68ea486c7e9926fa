"""Random Delta histories for property tests, and the naive replay they are checked against.

A history is a list of commits, each a list of action dicts; `naive_state` replays it with
plain Python dicts, exactly as the protocol's reconciliation rules read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from tests.support import log_builder as lb


def dv_id(dv: dict | None) -> str | None:
    if not dv:
        return None
    uid = dv["storageType"] + dv["pathOrInlineDv"]
    return uid + f"@{dv['offset']}" if dv.get("offset") is not None else uid


@dataclass
class NaiveState:
    files: dict[tuple[str, str | None], dict] = field(default_factory=dict)
    tombstones: dict[tuple[str, str | None], dict] = field(default_factory=dict)
    txns: dict[str, int] = field(default_factory=dict)
    domains: dict[str, str] = field(default_factory=dict)
    protocol: dict | None = None
    metadata: dict | None = None


def naive_state(commits: list[list[dict[str, Any]]], upto: int) -> NaiveState:
    state = NaiveState()
    for actions in commits[: upto + 1]:
        for action in actions:
            ((kind, body),) = action.items()
            if kind in ("add", "remove"):
                key = (body["path"], dv_id(body.get("deletionVector")))
                state.files.pop(key, None)
                state.tombstones.pop(key, None)
                (state.files if kind == "add" else state.tombstones)[key] = body
            elif kind == "txn":
                state.txns[body["appId"]] = body["version"]
            elif kind == "domainMetadata":
                if body["removed"]:
                    state.domains.pop(body["domain"], None)
                else:
                    state.domains[body["domain"]] = body["configuration"]
            elif kind == "protocol":
                state.protocol = body
            elif kind == "metaData":
                state.metadata = body
    return state


@st.composite
def histories(draw, max_commits: int = 12, with_dvs: bool = True) -> list[list[dict[str, Any]]]:
    """Commits: version 0 creates the table; later ones mix appends, deletes, re-adds, DV
    updates, txns, domains and metadata / protocol changes."""
    dv_protocol = lb.protocol(
        3,
        7,
        reader_features=["deletionVectors"],
        writer_features=["deletionVectors", "domainMetadata"],
    )
    commits = [[lb.commit_info(), dv_protocol if with_dvs else lb.protocol(1, 2), lb.metadata()]]
    live: dict[str, dict | None] = {}  # path -> current dv
    removed: list[str] = []
    counter = 0
    n = draw(st.integers(1, max_commits))
    for version in range(1, n + 1):
        actions: list[dict[str, Any]] = [lb.commit_info(timestamp=1_700_000_000_000 + version)]
        touched: set[str] = set()
        for _ in range(draw(st.integers(0, 5))):
            op = draw(
                st.sampled_from(
                    ["add", "add", "remove", "readd", "dv", "txn", "domain", "undomain", "meta"]
                )
            )
            if op == "add":
                counter += 1
                path = f"part={counter % 3}/file-{counter:04d}%20x.parquet"
                actions.append(
                    lb.add(path, num_records=draw(st.integers(0, 50)), part=str(counter % 3))
                )
                live[path] = None
                touched.add(path)
            elif op == "remove" and live:
                path = draw(st.sampled_from(sorted(set(live) - touched) or [None]))
                if path is None:
                    continue
                actions.append(
                    lb.remove(
                        path, dv=live.pop(path), deletion_timestamp=1_700_000_000_000 + version
                    )
                )
                removed.append(path)
                touched.add(path)
            elif op == "readd" and removed:
                path = draw(st.sampled_from(sorted(set(removed) - touched - set(live)) or [None]))
                if path is None:
                    continue
                actions.append(lb.add(path))
                live[path] = None
                touched.add(path)
            elif op == "dv" and with_dvs and live:
                path = draw(st.sampled_from(sorted(set(live) - touched) or [None]))
                if path is None:
                    continue
                old = live[path]
                counter += 1
                new = lb.inline_dv(counter, cardinality=draw(st.integers(1, 3)))
                actions.append(lb.remove(path, dv=old))
                a = lb.add(path, dv=new)
                actions.append(a)
                live[path] = new
                touched.add(path)
            elif op == "txn":
                actions.append(
                    {
                        "txn": {
                            "appId": draw(st.sampled_from(["app-a", "app-b"])),
                            "version": version,
                            "lastUpdated": 1_700_000_000_000,
                        }
                    }
                )
            elif op == "domain":
                actions.append(
                    {
                        "domainMetadata": {
                            "domain": draw(st.sampled_from(["d1", "d2"])),
                            "configuration": json.dumps({"v": version}),
                            "removed": False,
                        }
                    }
                )
            elif op == "undomain":
                actions.append(
                    {
                        "domainMetadata": {
                            "domain": draw(st.sampled_from(["d1", "d2"])),
                            "configuration": "",
                            "removed": True,
                        }
                    }
                )
            elif op == "meta":
                actions.append(
                    lb.metadata(
                        configuration={"delta.checkpointInterval": str(draw(st.integers(1, 20)))}
                    )
                )
        # one action per kind of singleton per commit, as the protocol requires
        seen_kinds: set[str] = set()
        deduped = []
        for a in reversed(actions):
            ((kind, body),) = a.items()
            key = (
                kind
                if kind in ("metaData", "protocol", "commitInfo")
                else (kind, body.get("appId") or body.get("domain") or id(a))
            )
            if key in seen_kinds:
                continue
            seen_kinds.add(key)
            deduped.append(a)
        commits.append(list(reversed(deduped)))
    return commits
