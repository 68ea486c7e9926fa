"""The goals of issue 35 (where users wait), each beside the figure the latest run measured.

Every row reads one benchmark's JSON result in `benchmarks/.data/results` (what that
benchmark wrote on its last run). `run_all.py` prints the table after its summary, for the
results written during that run; on its own this prints the latest results with their dates:

    python benchmarks/goals.py

| path | benchmark | goal |
|---|---|---|
| `inspect --json`, kernel 300k table | `bench_inspect.py` | <= 0.5x delta-rs' load, peak RSS <= our load's |
| load, kernel 300k table | `bench_kernel_300k.py` | <= 0.4x |
| load, 10k files | `bench_small.py` | <= 1.0x |
| cleanup, fresh process | `bench_cleanup.py` | <= 0.5x |
| checkpoint (JSON log) | `bench_checkpoint.py` | <= 0.3x |
| full vacuum 101k | `bench_vacuum.py` | <= 0.4x |
| compaction of 10k small files | `bench_compact.py` | <= 0.5x |
| 10M-file load, peak memory | `bench_growth.py --sizes ... 10000000` | <= 1.5 GB |
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / ".data" / "results"


@dataclass(frozen=True)
class Goal:
    """One row of the issue's table: where its figure is read, and the limit it must meet."""

    path: str
    result: str  # the JSON file a benchmark writes in RESULTS
    figure: Callable[[Any], float | None]  # the figure out of that file (None: not measured)
    limit: float
    unit: str = "x"  # "x": ours / delta-rs; "MB": peak RSS
    today: str = ""  # where the issue started
    #: whether the result is of the goal's table, not of a quick check at a small size
    full_size: Callable[[Any], bool] = lambda data: True
    resolution: float = 0.0  # a figure this far over the limit is within measurement noise


def _get(*keys: str | int) -> Callable[[Any], float | None]:
    def figure(data: Any) -> float | None:
        for key in keys:
            try:
                data = data[key]
            except (KeyError, IndexError, TypeError):
                return None
        return float(data) if isinstance(data, (int, float)) else None

    return figure


def _growth_peak(files: int) -> Callable[[Any], float | None]:
    def figure(rows: Any) -> float | None:
        for row in rows if isinstance(rows, list) else []:
            if row.get("files") == files:
                return float(row["ours_mb"])
        return None

    return figure


def _equals(value: Any, *keys: str) -> Callable[[Any], bool]:
    def check(data: Any) -> bool:
        for key in keys:
            if not isinstance(data, dict) or key not in data:
                return False
            data = data[key]
        return bool(data == value)

    return check


_KERNEL = _equals("4 300000", "expected_output")
_TWO_THOUSAND_COMMITS = _equals(80_000, "table", "num_live")

GOALS: tuple[Goal, ...] = (
    Goal(
        "inspect --json, kernel 300k table (time / delta-rs' load)",
        "bench_inspect.json",
        _get("json", "wall_ratio"),
        0.5,
        today="1.11x",
        full_size=_KERNEL,
    ),
    Goal(
        "inspect --json, kernel 300k table (peak RSS / our load's)",
        "bench_inspect.json",
        _get("json", "rss_vs_load"),
        1.0,
        today="1.62x (353 / 218 MB)",
        full_size=_KERNEL,
        resolution=0.01,  # the same load peaks a few hundred KB apart in two processes
    ),
    Goal(
        "load, kernel 300k table (JSON commits)",
        "bench_kernel_300k.json",
        _get("json", "comparison", "wall_ratio"),
        0.4,
        today="0.43-0.54x",
        full_size=_KERNEL,
    ),
    Goal(
        "load, kernel 300k table (delta-rs' checkpoint)",
        "bench_kernel_300k.json",
        _get("rs-checkpoint", "comparison", "wall_ratio"),
        0.4,
        today="0.49x",
        full_size=_KERNEL,
    ),
    Goal(
        "load, kernel 300k table (our checkpoint)",
        "bench_kernel_300k.json",
        _get("own-checkpoint", "comparison", "wall_ratio"),
        0.4,
        today="0.49x",
        full_size=_KERNEL,
    ),
    Goal(
        "load, 10k files",
        "bench_small.json",
        _get("load", "wall_ratio"),
        1.0,
        today="2.7x",
        full_size=_equals(10_000, "files"),
    ),
    Goal(
        "cleanup, fresh process",
        "bench_cleanup.json",
        _get("comparison", "wall_ratio"),
        0.5,
        today="0.8x",
        full_size=_TWO_THOUSAND_COMMITS,
    ),
    Goal(
        "checkpoint (JSON log)",
        "bench_checkpoint.json",
        _get("comparison", "wall_ratio"),
        0.3,
        today="0.33-0.47x",
        full_size=_TWO_THOUSAND_COMMITS,
    ),
    Goal(
        "full vacuum 101k",
        "bench_vacuum.json",
        _get("comparison", "wall_ratio"),
        0.4,
        today="0.41-0.53x",
        full_size=_equals(101_000, "table", "data_files"),
    ),
    Goal(
        "compaction of 10k small files",
        "bench_compact.json",
        _get("comparison", "wall_ratio"),
        0.5,
        today="0.54-0.60x",
        full_size=_equals(10_000, "files"),
    ),
    Goal(
        "10M-file load, peak memory",
        "bench_growth.json",
        _growth_peak(10_000_000),
        1536.0,
        unit="MB",
        today="2,750 MB",
    ),
)


def _shown(value: float, unit: str) -> str:
    return f"{value:,.0f} MB" if unit == "MB" else f"{value:.2f}x"


def _measured(goal: Goal, results: Path, since: float | None) -> tuple[str, float | None]:
    """The figure as shown (with its date when `since` is None) and its value (None: not
    measured at the goal's size)."""
    path = results / goal.result
    if not path.exists() or (since is not None and path.stat().st_mtime < since):
        return "not run", None
    try:
        data = json.loads(path.read_text())
    except ValueError:
        return "unreadable result", None
    figure = goal.figure(data)
    if figure is None:
        return "not run", None
    if not goal.full_size(data):
        return "not run (only a smaller table)", None
    stamp = dt.datetime.fromtimestamp(path.stat().st_mtime, dt.UTC)
    when = f" ({stamp:%Y-%m-%d %H:%M} UTC)" if since is None else ""
    return _shown(figure, goal.unit) + when, figure


def goal_lines(results: Path = RESULTS, since: float | None = None) -> list[str]:
    """The table: each goal beside its figure, read from the results written at or after
    `since` (a time.time(); None: the latest results, dated)."""
    rows = [("path", "measured", "goal", "", "issue began at")]
    for goal in GOALS:
        shown, figure = _measured(goal, results, since)
        met = figure is not None and figure <= goal.limit + goal.resolution
        verdict = "" if figure is None else ("met" if met else "NOT MET")
        limit = f"<= {_shown(goal.limit, goal.unit)}"
        rows.append((goal.path, shown, limit, verdict, goal.today))
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    return [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows
    ]


def main(argv: Sequence[str] | None = None) -> int:
    del argv
    print("\n".join(goal_lines()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
