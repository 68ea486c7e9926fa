"""The fleet planner: which tables of a lake maintenance should visit now, and why.

A lake is many tables (a warehouse root to discover, or a lake file listing them with settings
of their own: `fleet_from_spec`). For each table the planner loads only what it needs
(the log's listing; the snapshot when the log is small, else only the latest protocol and
metadata), asks `delta_ops.service.due` which actions are due, what each would gain and cost (the
rule every front end asks), and ranks each due action by its gain for its cost within a budget
(tables per tick, tables per action):

    plan = plan_fleet(fleet_from_warehouse("/data/warehouse"), clock.now_ms(), max_tables=20)
    print(describe_fleet_plan(plan))          # the ranked table, with why each is or is not chosen

Gains, in points (the exchange rates are `POINTS`): a checkpoint interval of commits since
the last checkpoint, 100 log files when log cleanup has work, 1 GiB that vacuum would reclaim,
100 small files compaction would rewrite, a million rows hidden by deletion vectors. An action
counts only when it is due (`delta_ops.service.due`: the checkpoint when the lag reached the
interval, compaction from 10 small files, ...). Costs are object-store requests and bytes read
or written, estimated from the same facts, turned into seconds at
`delta_ops.service.due.REQUEST_S` per request and `BYTES_PER_S`. An action's priority is the
table's weight times the action's points over (1 + the action's cost in seconds), so a costly
compaction does not bury a cheap, urgent checkpoint; a table ranks by its most urgent action.

Assessing the tables is an ordered map on the engine (forked workers on the local engine), so
a lake of a thousand small tables is planned in seconds.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from delta_ops.errors import DeltaOpsError, InvalidValue
from delta_ops.ops.engines import LOCAL, Engine, Spread
from delta_ops.ops.log_cleanup import plan_cleanup
from delta_ops.protocol.units import format_bytes, parse_duration_ms, parse_size_bytes
from delta_ops.service.due import BYTES_PER_S, REQUEST_S, Action, DueFacts, Verdict, Verdicts, judge
from delta_ops.service.due import POINTS as DUE_POINTS
from delta_ops.service.health import due_facts
from delta_ops.storage import FileEntry, Storage
from delta_ops.storage.warehouse import find_tables, name_for
from delta_ops.table.snapshot import load_head, load_snapshot

#: the actions the planner weighs, in the order a run takes them
ACTIONS = tuple(action.value for action in Action)
#: what one point of gain is, per action
POINTS = {action.value: text for action, text in DUE_POINTS.items()}
#: a log bigger than this is not replayed to plan: only the checkpoint and cleanup are judged
SNAPSHOT_LIMIT = parse_size_bytes("64MB")


@dataclass(frozen=True)
class FleetTable:
    """One table of a lake and its settings.

    Args:
        name: its name in the lake (unique).
        url: its path or URL.
        storage_options: options to open it with.
        actions: the actions the planner may choose for it.
        weight: how much its gains count against other tables' (a priority).
        enabled: False leaves it out of every plan (listed with why).
        log_retention_ms: the retention its log cleanup will use (None: the table's
            ``delta.logRetentionDuration``), so its work is judged as the run will do it.
        file_retention_ms: the retention its vacuum will use (None: the table's
            ``delta.deletedFileRetentionDuration``).
    """

    name: str
    url: str
    storage_options: Mapping[str, Any] = field(default_factory=dict)
    actions: tuple[str, ...] = ACTIONS
    weight: float = 1.0
    enabled: bool = True
    log_retention_ms: int | None = None
    file_retention_ms: int | None = None


def fleet_from_warehouse(
    root: str, storage_options: Mapping[str, Any] | None = None
) -> list[FleetTable]:
    """Every table under a local warehouse root (`delta_ops.storage.warehouse.find_tables`)."""
    options = dict(storage_options or {})
    return [FleetTable(name, url, options) for name, url in find_tables(root)]


_TABLE_KEYS = {
    "name",
    "url",
    "storage_options",
    "actions",
    "weight",
    "enabled",
    "log_retention",
    "file_retention",
}


def fleet_from_spec(
    spec: Mapping[str, Any], storage_options: Mapping[str, Any] | None = None
) -> list[FleetTable]:
    """The tables a lake file lists (its YAML or JSON, parsed):

        warehouse: /data/warehouse      # optional: every table found under it
        defaults: {actions: [checkpoint, cleanup, vacuum], weight: 1}
        storage_options: {region: eu-west-1}
        tables:
          - {name: events, url: s3://lake/events, weight: 3}
          - {url: s3://lake/orders, actions: [compact, checkpoint], file_retention: 1d}
          - {name: raw, url: s3://lake/raw, enabled: false}

    A listed table overrides a discovered one of the same name. Unknown keys and actions are
    refused (InvalidValue names them)."""
    if not isinstance(spec, Mapping):
        raise InvalidValue("a lake file holds a mapping: tables, warehouse, defaults")
    unknown = set(spec) - {"warehouse", "defaults", "storage_options", "tables"}
    if unknown:
        raise InvalidValue(f"lake file: unknown keys {sorted(unknown)}")
    options = {**(storage_options or {}), **dict(spec.get("storage_options") or {})}
    defaults = dict(spec.get("defaults") or {})
    tables: dict[str, FleetTable] = {}
    if spec.get("warehouse"):
        for found in fleet_from_warehouse(str(spec["warehouse"]), options):
            tables[found.name] = _table({**defaults, "name": found.name, "url": found.url}, options)
    for entry in spec.get("tables") or []:
        if not isinstance(entry, Mapping) or "url" not in entry:
            raise InvalidValue(f"lake file: a table needs a url: {entry!r}")
        table = _table({**defaults, **entry}, options)
        tables[table.name] = table
    return sorted(tables.values(), key=lambda t: t.name)


def _table(entry: Mapping[str, Any], options: Mapping[str, Any]) -> FleetTable:
    unknown = set(entry) - _TABLE_KEYS
    if unknown:
        raise InvalidValue(f"lake file: unknown table settings {sorted(unknown)}")
    actions = tuple(entry.get("actions") or ACTIONS)
    bad = [a for a in actions if a not in ACTIONS]
    if bad:
        raise InvalidValue(f"lake file: unknown actions {bad}; known: {', '.join(ACTIONS)}")
    url = str(entry["url"])
    try:
        weight = float(entry.get("weight", 1.0))
    except (TypeError, ValueError):
        raise InvalidValue(
            f"lake file: {url}: weight {entry['weight']!r} is not a number"
        ) from None
    return FleetTable(
        log_retention_ms=_retention(entry, "log_retention", url),
        file_retention_ms=_retention(entry, "file_retention", url),
        name=str(entry.get("name") or name_for(url)),
        url=url,
        storage_options={**options, **dict(entry.get("storage_options") or {})},
        actions=actions,
        weight=weight,
        enabled=bool(entry.get("enabled", True)),
    )


def _retention(entry: Mapping[str, Any], key: str, url: str) -> int | None:
    """A table's log or file retention in ms (None: the table's own property)."""
    raw = entry.get(key)
    if raw is None:
        return None
    try:
        return parse_duration_ms(str(raw))
    except ValueError as exc:
        raise InvalidValue(f"lake file: {url}: {key}: {exc}") from None


@dataclass(frozen=True)
class Assessment:
    """What maintenance would gain on one table, and cost.

    Attributes:
        facts: what the gains are judged from (version, commits since the checkpoint, log
            files and bytes, reclaimable bytes, small files, hidden rows, ...).
        gains: points per action with work (only the table's own actions).
        requests, bytes: the estimated cost of those actions.
        idle: why each action without work has none.
        error: why the table could not be assessed.
    """

    name: str
    url: str
    facts: dict[str, int] = field(default_factory=dict)
    gains: dict[str, float] = field(default_factory=dict)
    requests: int = 0
    bytes: int = 0
    idle: tuple[str, ...] = ()
    error: str | None = None
    #: the due actions the table's settings let it take, each with its gain and cost
    verdicts: tuple[Verdict, ...] = ()

    @property
    def cost_s(self) -> float:
        return self.requests * REQUEST_S + self.bytes / BYTES_PER_S


def assess(table: FleetTable, now_ms: int, snapshot_limit: int = SNAPSHOT_LIMIT) -> Assessment:
    """What each of `table`'s actions would gain and cost now (an error is a field, so one
    unreadable table never stops a plan)."""
    try:
        storage = Storage.open(table.url, dict(table.storage_options) or None)
        log = storage.list_log()
        if sum(entry.size for entry in log) > snapshot_limit:
            return _assess_head(table, storage, now_ms, log)
        return _assess_snapshot(table, storage, now_ms, log)
    except (DeltaOpsError, OSError) as exc:
        return Assessment(table.name, table.url, error=f"{type(exc).__name__}: {exc}")


def _assess_snapshot(
    table: FleetTable, storage: Storage, now_ms: int, log: Sequence[FileEntry]
) -> Assessment:
    snapshot = load_snapshot(storage)
    facts = due_facts(
        snapshot,
        now_ms,
        log_retention_ms=table.log_retention_ms,
        file_retention_ms=table.file_retention_ms,
        log=log,
    )
    return _assessment(table, facts, judge(facts))


def _assess_head(
    table: FleetTable, storage: Storage, now_ms: int, log: Sequence[FileEntry]
) -> Assessment:
    """A table whose log is too big to replay for a plan: its checkpoint lag and log cleanup,
    from the listing and the latest protocol and metadata only."""
    head = load_head(storage)
    checkpoint = head.segment.checkpoint_version
    log_bytes = sum(entry.size for entry in log)
    cleanup = plan_cleanup(head, now_ms, retention_ms=table.log_retention_ms)
    facts = DueFacts(
        version=head.version,
        commits_since_checkpoint=head.version - checkpoint
        if checkpoint is not None
        else head.version + 1,
        checkpoint_interval=head.properties.checkpoint_interval,
        log_files=len(log),
        log_bytes=log_bytes,
        cleanup_files=len(cleanup.deleted),
        idle={} if cleanup.deleted else {Action.CLEANUP: "; ".join(cleanup.kept_reasons)},
        unjudged=f"not judged (the log is {format_bytes(log_bytes)}, over the planner's"
        " snapshot limit)",
    )
    return _assessment(table, facts, judge(facts))


def _assessment(table: FleetTable, facts: DueFacts, verdicts: Verdicts) -> Assessment:
    wanted = tuple(v for v in verdicts.due if v.action in table.actions)
    found = {
        "version": facts.version,
        "commits_since_checkpoint": facts.commits_since_checkpoint,
        "checkpoint_interval": facts.checkpoint_interval,
        "log_files": facts.log_files,
        "log_bytes": facts.log_bytes,
    }
    if facts.files is not None:
        found |= {
            "files": facts.files,
            "table_bytes": facts.table_bytes,
            "reclaimable_files": facts.reclaimable_files,
            "reclaimable_bytes": facts.reclaimable_bytes,
            "small_files": facts.small_files or 0,
            "hidden_rows": facts.hidden_rows or 0,
        }
    return Assessment(
        table.name,
        table.url,
        found,
        gains={v.action.value: round(v.points, 4) for v in wanted},
        requests=sum(v.requests for v in wanted),
        bytes=sum(v.bytes for v in wanted),
        idle=tuple(str(v) for v in verdicts.idle),
        verdicts=wanted,
    )


@dataclass(frozen=True)
class TableChoice:
    """One table's place in a plan: chosen or not, and why."""

    rank: int
    table: FleetTable = field(repr=False)
    assessment: Assessment
    priority: float
    chosen: bool
    actions: tuple[str, ...]  # what a run would do, in order
    why: str

    def to_dict(self) -> dict[str, Any]:
        a = self.assessment
        return {
            "rank": self.rank,
            "name": a.name,
            "url": a.url,
            "chosen": self.chosen,
            "actions": list(self.actions),
            "priority": round(self.priority, 4),
            "gains": a.gains,
            "cost": {"requests": a.requests, "bytes": a.bytes, "seconds": round(a.cost_s, 3)},
            "facts": a.facts,
            "why": self.why,
            "error": a.error,
        }


@dataclass(frozen=True)
class FleetPlan:
    """Every table of a lake, ranked; the chosen ones first."""

    choices: tuple[TableChoice, ...]
    max_tables: int | None
    max_per_action: Mapping[str, int]

    @property
    def chosen(self) -> tuple[TableChoice, ...]:
        return tuple(c for c in self.choices if c.chosen)

    def to_dict(self) -> dict[str, Any]:
        return {
            "tables": len(self.choices),
            "chosen": len(self.chosen),
            "max_tables": self.max_tables,
            "max_per_action": dict(self.max_per_action),
            "points": POINTS,
            "choices": [c.to_dict() for c in self.choices],
        }


def plan_fleet(
    tables: Sequence[FleetTable],
    now_ms: int,
    *,
    max_tables: int | None = None,
    max_per_action: Mapping[str, int] | None = None,
    snapshot_limit: int = SNAPSHOT_LIMIT,
    engine: Engine = LOCAL,
    spread: Spread = Spread.PROCESSES,
) -> FleetPlan:
    """Assess every enabled table (on `engine`, spread as `spread` says: a caller in a
    threaded server, such as a Dagster schedule, asks for threads rather than forks) and
    choose, by priority, the tables whose actions fit the budget: at most `max_tables` tables,
    at most `max_per_action[a]` tables for action `a`.

    Each due action of each table is ranked on its own (its gain for its cost), so costly
    optional work on a table never buries cheap urgent work elsewhere, and an action over its
    budget leaves the table's other actions in. A table is chosen with every action of it that
    fits, while the tables chosen stay within `max_tables`."""
    limits = dict(max_per_action or {})
    bad = sorted(set(limits) - set(ACTIONS))
    if bad:
        raise InvalidValue(f"--max-per-action: unknown actions {bad}; known: {', '.join(ACTIONS)}")
    enabled = [t for t in tables if t.enabled]
    judge_table = functools.partial(assess, now_ms=now_ms, snapshot_limit=snapshot_limit)
    assessed = dict(zip((t.name for t in enabled), engine.map_ordered(
        judge_table, enabled, spread=spread, batch=50), strict=True))  # fmt: skip
    # every (table, due action), most urgent for its cost first
    ranked = sorted(
        (
            (-_action_priority(table, verdict), table.name, verdict.action.value)
            for table in enabled
            if (assessment := assessed[table.name]).error is None
            for verdict in assessment.verdicts
        ),
    )
    used = dict.fromkeys(ACTIONS, 0)
    picked: dict[str, list[str]] = {}
    over: dict[str, list[str]] = {}
    for _, name, action in ranked:
        if used[action] >= limits.get(action, 1 << 62):
            over.setdefault(name, []).append(f"{action} ({limits[action]})")
        elif name not in picked and max_tables is not None and len(picked) >= max_tables:
            over.setdefault(name, [])
        else:
            used[action] += 1
            picked.setdefault(name, []).append(action)
    by_priority = sorted(tables, key=lambda t: (-_priority(t, assessed.get(t.name)), t.name))
    choices = []
    for rank, table in enumerate(by_priority, 1):
        assessment = assessed.get(table.name) or Assessment(table.name, table.url)
        priority = _priority(table, assessment)
        if not table.enabled:
            choices.append(_choice(rank, table, assessment, 0.0, (), "disabled in the lake file"))
        elif assessment.error is not None:
            why = f"cannot be assessed: {assessment.error}"
            choices.append(_choice(rank, table, assessment, 0.0, (), why))
        elif not assessment.verdicts:
            why = "nothing to do: " + "; ".join(assessment.idle)
            choices.append(_choice(rank, table, assessment, 0.0, (), why))
        elif table.name in picked:
            actions = tuple(a for a in ACTIONS if a in picked[table.name])
            why = ", ".join(str(v) for v in assessment.verdicts if v.action in actions)
            left = over.get(table.name)
            if left:
                why += f"; left for a later run: {', '.join(left)} over its per-action limit"
            cost = f"~{assessment.requests:,} requests, {format_bytes(assessment.bytes)}"
            choices.append(
                TableChoice(rank, table, assessment, priority, True, actions, f"{why}; {cost}")
            )
        elif over.get(table.name):
            full = ", ".join(over[table.name])
            why = f"over budget: the per-action limit is reached for {full}"
            choices.append(_choice(rank, table, assessment, priority, (), why))
        else:
            why = f"over budget: {max_tables} table(s) chosen already (max tables)"
            choices.append(_choice(rank, table, assessment, priority, (), why))
    return FleetPlan(tuple(choices), max_tables, limits)


def _action_priority(table: FleetTable, verdict: Verdict) -> float:
    """One due action's priority: the table's weight times the action's gain for its cost."""
    return table.weight * verdict.points / (1 + verdict.cost_s)


def _priority(table: FleetTable, assessment: Assessment | None) -> float:
    """A table's priority: its most urgent due action's."""
    if assessment is None or assessment.error is not None or not table.enabled:
        return 0.0
    return max((_action_priority(table, v) for v in assessment.verdicts), default=0.0)


def _choice(
    rank: int,
    table: FleetTable,
    assessment: Assessment,
    priority: float,
    actions: tuple[str, ...],
    why: str,
) -> TableChoice:
    return TableChoice(rank, table, assessment, priority, False, actions, why)


def describe_fleet_plan(plan: FleetPlan) -> str:
    """The plan as a ranked table, one line per table with why it is or is not chosen."""
    lines = [
        f"{len(plan.chosen)} of {len(plan.choices)} tables chosen"
        + (f" (max {plan.max_tables})" if plan.max_tables is not None else ""),
        f"{'rank':>4}  {'table':<28} {'chosen':<6} {'priority':>9}  why",
    ]
    for c in plan.choices:
        name = c.assessment.name if len(c.assessment.name) <= 28 else c.assessment.name[:27] + "~"
        mark = "yes" if c.chosen else "no"
        lines.append(f"{c.rank:>4}  {name:<28} {mark:<6} {c.priority:>9.3f}  {c.why}")
    return "\n".join(lines)


__all__ = [
    "ACTIONS",
    "POINTS",
    "Assessment",
    "FleetPlan",
    "FleetTable",
    "TableChoice",
    "assess",
    "describe_fleet_plan",
    "fleet_from_spec",
    "fleet_from_warehouse",
    "plan_fleet",
]
