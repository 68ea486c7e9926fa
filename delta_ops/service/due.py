"""When a maintenance action is due: the one rule every front end asks.

The commit sensor and the maintenance schedule (Dagster), the triggers (Airflow), the fleet
planner, `delta-ops inspect` and the asset checks all ask the same question of a table:
which actions are due now, and why (or why not)? They all ask `judge`, so a table
`inspect` calls healthy is one no schedule runs, and one the planner chooses is one the
checks flag. The rules, per action:

* **checkpoint**: the commits since the last checkpoint reached ``delta.checkpointInterval``
  (Delta Spark's rule, `checkpoint_due`), or the table has a checkpoint but no readable
  ``_last_checkpoint`` (log cleanup trusts only the hint, as Delta Spark's: a checkpoint run
  writes it);
* **cleanup**: log files are past the log retention. Commits past it that only a newer
  checkpoint lets go wait for that checkpoint to be due, as Delta Spark cleans the log up
  after its checkpoints: a quiet table costs no run until its interval of commits is reached;
* **vacuum**: files of removes past the file retention are still on storage, or commits aged
  past it since the last vacuum looked (they may hold removes a checkpoint no longer shows);
* **compact**: a compaction to the default target would rewrite at least
  `COMPACT_MIN_FILES` small files;
* **purge**: deletion vectors hide at least `PURGE_MIN_SHARE` of the rows in the live
  files.

Each verdict carries what doing the action would gain, in points (`POINTS` says what one
point is), and what it would cost (object-store requests and bytes), so the planner ranks
actions with the same facts that decided them due. The facts come from
`delta_ops.service.health.due_facts` (a loaded snapshot), or, for the checkpoint alone, from
a probe of the newest commits. This module reads no storage.

For example:

    verdicts = judge(due_facts(snapshot, clock.now_ms()))
    [v.action for v in verdicts.due]          # [Action.CHECKPOINT, Action.VACUUM]
    verdicts[Action.COMPACT].reason           # "3 small files, fewer than 10"
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from delta_ops.protocol.units import format_bytes


class Action(StrEnum):
    """The maintenance actions judged due, in the order one run takes them (data rewrites
    first, so the checkpoint and vacuum after them see their commits); values are the CLI's
    command names."""

    COMPACT = "compact"
    PURGE = "purge"
    CHECKPOINT = "checkpoint"
    CLEANUP = "cleanup"
    VACUUM = "vacuum"


#: a compaction is due from this many small files to rewrite (Delta's auto compaction waits
#: for 50 in a partition; a scheduled run can afford fewer)
COMPACT_MIN_FILES = 10
#: a purge is due once deletion vectors hide this share of the live files' rows
PURGE_MIN_SHARE = 0.1
#: what one point of gain is, per action
POINTS = {
    Action.CHECKPOINT: "a checkpoint interval of commits since the last checkpoint",
    Action.CLEANUP: "100 log files, when some are past the log retention",
    Action.VACUUM: "1 GiB of removed files past the file retention",
    Action.COMPACT: "100 small files to rewrite",
    Action.PURGE: "1,000,000 rows hidden by deletion vectors",
}
REQUEST_S = 0.02  # what an object-store request costs, in seconds
BYTES_PER_S = 100 * 1024 * 1024  # read or written


def checkpoint_due(commits_since_checkpoint: int, interval: int) -> bool:
    """Delta Spark's rule: a checkpoint once the commits since the last reach the interval."""
    return commits_since_checkpoint >= max(interval, 1)


@dataclass(frozen=True)
class DueFacts:
    """What the rules read, gathered once per table.

    Attributes:
        version: the table's latest version.
        commits_since_checkpoint: commits after the last checkpoint (all of them without one).
        checkpoint_interval: ``delta.checkpointInterval``.
        log_files, log_bytes: the files directly in ``_delta_log``.
        cleanup_files: log files cleanup would delete now.
        cleanup_waits_for_checkpoint: commits are past the log retention, but only a
            checkpoint of the latest version would let them go.
        vacuum_work: whether vacuum would delete anything (None: not judged).
        reclaimable_files, reclaimable_bytes: removed files past the file retention still on
            storage.
        files, table_bytes: the live files and their bytes (None: not judged).
        small_files: files a compaction would rewrite (None: not judged).
        hidden_rows: rows hidden by deletion vectors (None: not judged).
        physical_rows: rows in the live files, hidden ones included (None: unknown).
        refused: why the table's features refuse an action, per action.
        idle: why an action has no work, where a planner said more than the rule does.
        unjudged: why the actions left out were not judged (e.g. a log too big to replay).
        hint_problem: what is wrong with ``_last_checkpoint`` when the table has a checkpoint
            the hint does not name (None: nothing).
    """

    version: int
    commits_since_checkpoint: int
    checkpoint_interval: int
    log_files: int = 0
    log_bytes: int = 0
    cleanup_files: int = 0
    cleanup_waits_for_checkpoint: bool = False
    vacuum_work: bool | None = None
    reclaimable_files: int = 0
    reclaimable_bytes: int = 0
    files: int | None = None
    table_bytes: int = 0
    small_files: int | None = None
    hidden_rows: int | None = None
    physical_rows: int | None = None
    refused: Mapping[Action, str] = field(default_factory=dict)
    idle: Mapping[Action, str] = field(default_factory=dict)
    unjudged: str = "not judged"
    hint_problem: str | None = None


@dataclass(frozen=True)
class Verdict:
    """Whether one action is due, why, and what it would gain and cost.

    Attributes:
        action: the action.
        due: whether a run should do it now.
        reason: what it would do (due) or why it has nothing to do (not due), one line.
        points: the gain (see `POINTS`); 0 when not due.
        requests, bytes: the estimated cost of doing it.
    """

    action: Action
    due: bool
    reason: str
    points: float = 0.0
    requests: int = 0
    bytes: int = 0

    @property
    def cost_s(self) -> float:
        """The estimated cost in seconds (`REQUEST_S` a request, `BYTES_PER_S`)."""
        return self.requests * REQUEST_S + self.bytes / BYTES_PER_S

    def __str__(self) -> str:
        return f"{self.action}: {self.reason}"


@dataclass(frozen=True)
class Verdicts:
    """Every action's verdict on one table, in `Action` order."""

    facts: DueFacts
    verdicts: tuple[Verdict, ...]

    def __getitem__(self, action: Action) -> Verdict:
        for verdict in self.verdicts:
            if verdict.action is action:
                return verdict
        raise KeyError(action)

    def __iter__(self) -> Iterator[Verdict]:
        return iter(self.verdicts)

    @property
    def due(self) -> tuple[Verdict, ...]:
        """The due actions, in the order a run takes them."""
        return tuple(v for v in self.verdicts if v.due)

    @property
    def idle(self) -> tuple[Verdict, ...]:
        """The actions that are not due, each with why."""
        return tuple(v for v in self.verdicts if not v.due)


def judge(facts: DueFacts) -> Verdicts:
    """Every action's verdict from `facts` (pure: reads nothing)."""
    rules = {
        Action.COMPACT: _compact,
        Action.PURGE: _purge,
        Action.CHECKPOINT: _checkpoint,
        Action.CLEANUP: _cleanup,
        Action.VACUUM: _vacuum,
    }
    verdicts = []
    for action in Action:
        refusal = facts.refused.get(action)
        if refusal is not None:
            verdicts.append(Verdict(action, False, refusal))
        else:
            verdicts.append(rules[action](facts))
    return Verdicts(facts, tuple(verdicts))


def _checkpoint(f: DueFacts) -> Verdict:
    lag = f"{f.commits_since_checkpoint} commits since the last (interval {f.checkpoint_interval})"
    cost = (3, f.log_bytes)
    if checkpoint_due(f.commits_since_checkpoint, f.checkpoint_interval):
        points = f.commits_since_checkpoint / max(f.checkpoint_interval, 1)
        return Verdict(Action.CHECKPOINT, True, lag, points, *cost)
    if f.hint_problem is not None:
        why = f"_last_checkpoint: {f.hint_problem}: log cleanup deletes nothing without it"
        return Verdict(Action.CHECKPOINT, True, why, 0.01, 2, 0)
    if f.commits_since_checkpoint == 0:
        return Verdict(Action.CHECKPOINT, False, f"version {f.version} is already checkpointed")
    return Verdict(Action.CHECKPOINT, False, lag)


def _cleanup(f: DueFacts) -> Verdict:
    waiting = f.cleanup_waits_for_checkpoint and not f.cleanup_files
    if waiting and not _checkpoint(f).due:
        why = (
            "the commits past the log retention wait for a checkpoint"
            f" ({f.commits_since_checkpoint} commit(s) since the last, interval"
            f" {f.checkpoint_interval})"
        )
        return Verdict(Action.CLEANUP, False, why)
    if f.cleanup_files or waiting:
        files = f.cleanup_files or f.log_files
        why = (
            f"{f.cleanup_files} log file(s) past the log retention"
            if f.cleanup_files
            else "commits past the log retention, deleted after the checkpoint"
        )
        return Verdict(Action.CLEANUP, True, why, max(files / 100, 0.01), 1 + files, 0)
    return Verdict(Action.CLEANUP, False, f.idle.get(Action.CLEANUP, "no log file is expired"))


def _vacuum(f: DueFacts) -> Verdict:
    if f.vacuum_work is None:
        return Verdict(Action.VACUUM, False, f.unjudged)
    if not f.vacuum_work:
        why = f.idle.get(Action.VACUUM, "no removed file past the file retention is left")
        return Verdict(Action.VACUUM, False, why)
    listing = 1 + (f.files or 0) // 1000
    if f.reclaimable_files:
        why = (
            f"{f.reclaimable_files} removed file(s) past the file retention"
            f" ({format_bytes(f.reclaimable_bytes)})"
        )
    else:
        why = "commits aged past the file retention since the last vacuum"
    points = max(f.reclaimable_bytes / 2**30, 0.01)
    return Verdict(Action.VACUUM, True, why, points, listing + f.reclaimable_files, 0)


def _compact(f: DueFacts) -> Verdict:
    if f.small_files is None:
        return Verdict(Action.COMPACT, False, f.unjudged)
    if f.small_files < COMPACT_MIN_FILES:
        why = f"{f.small_files} small file(s), fewer than {COMPACT_MIN_FILES}"
        return Verdict(Action.COMPACT, False, why)
    average = f.table_bytes // max(f.files or 1, 1)
    cost = (2 * f.small_files, 2 * f.small_files * average)
    why = f"{f.small_files} small files"
    return Verdict(Action.COMPACT, True, why, f.small_files / 100, *cost)


def _purge(f: DueFacts) -> Verdict:
    if f.hidden_rows is None:
        return Verdict(Action.PURGE, False, f.unjudged)
    if not f.hidden_rows:
        return Verdict(Action.PURGE, False, "no rows hidden by deletion vectors")
    share = f.hidden_rows / f.physical_rows if f.physical_rows else 1.0
    if share < PURGE_MIN_SHARE:
        why = (
            f"{f.hidden_rows:,} rows hidden by deletion vectors ({share:.1%} of the rows),"
            f" under {PURGE_MIN_SHARE:.0%}"
        )
        return Verdict(Action.PURGE, False, why)
    why = f"{f.hidden_rows:,} rows hidden by deletion vectors ({share:.1%} of the rows)"
    cost = (2, int(2 * f.table_bytes * min(share, 1.0)))
    return Verdict(Action.PURGE, True, why, f.hidden_rows / 1e6, *cost)


__all__ = [
    "BYTES_PER_S",
    "COMPACT_MIN_FILES",
    "POINTS",
    "PURGE_MIN_SHARE",
    "REQUEST_S",
    "Action",
    "DueFacts",
    "Verdict",
    "Verdicts",
    "checkpoint_due",
    "judge",
]
