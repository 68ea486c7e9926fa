"""The `delta-ops` command: the operations for people and scripts.

Thin by design: parse arguments, call the library, print the result (JSON with `--json`).
Errors print one line naming the file and problem on stderr and exit non-zero.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any

from delta_ops.errors import DeltaOpsError


def _add_table_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("table", help="table path or URL (file://, memory://, s3://, ...)")
    p.add_argument(
        "--storage-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="fsspec storage option (repeatable)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")


def _storage_options(pairs: Sequence[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise SystemExit(f"delta-ops: --storage-option needs KEY=VALUE, got {pair!r}")
        out[key] = value
    return out


def _cmd_inspect(args: argparse.Namespace) -> int:
    from delta_ops.ops.inspect import format_summary, summarize
    from delta_ops.table.snapshot import load_snapshot

    snapshot = load_snapshot(
        args.table, args.version, storage_options=_storage_options(args.storage_option)
    )
    summary = summarize(snapshot, include_files=args.files)
    print(json.dumps(summary.to_dict()) if args.json else format_summary(summary))
    return 0


def _now_ms(text: str | None) -> int:
    """`--now` as epoch ms: ISO-8601 (UTC if no zone) or integer epoch milliseconds."""
    import datetime as dt
    import time

    if text is None:
        return int(time.time() * 1000)
    if text.lstrip("-").isdigit():
        return int(text)
    value = dt.datetime.fromisoformat(text)
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    return int(value.timestamp() * 1000)


NOW_HELP = (
    "plan as of this time (ISO-8601 or epoch ms; default: now); a later time than the real"
    " clock is clamped to it, so it never makes the op delete or expire more"
)


def _print(args: argparse.Namespace, data: dict[str, Any], human: str) -> None:
    print(json.dumps(data) if args.json else human)


def _cmd_checkpoint(args: argparse.Namespace) -> int:
    from delta_ops.ops.checkpoint import execute_checkpoint, plan_checkpoint
    from delta_ops.table.snapshot import load_snapshot

    snapshot = load_snapshot(
        args.table, args.version, storage_options=_storage_options(args.storage_option)
    )
    plan = plan_checkpoint(snapshot, _now_ms(args.now), parts=args.parts)
    if args.dry_run:
        data = {"dry_run": True, **plan.to_dict()}
        action = (
            f"would write {', '.join(plan.files)}"
            if not plan.nothing_to_do
            else f"nothing to do: {plan.existing} exists"
        )
        _print(
            args,
            data,
            f"checkpoint of version {plan.version} ({plan.kind}): {action}; "
            f"{plan.num_add_files} files, {plan.num_tombstones} tombstones kept, {plan.expired_tombstones} expired",
        )
        return 0
    result = execute_checkpoint(plan)
    data = {"dry_run": False, **result.to_dict()}
    if result.skipped_existing:
        human = f"version {result.version} already has a checkpoint ({result.skipped_existing}); nothing written"
    else:
        human = (
            f"wrote {result.kind} checkpoint of version {result.version}: {', '.join(result.written)} "
            f"({result.num_actions} actions, {result.size_in_bytes:,} bytes, {result.duration_ms} ms)"
        )
    _print(args, data, human)
    return 0


def _duration_ms(text: str | None) -> int | None:
    """`--retention` like a table property: '7 days', 'interval 2 hours', or plain hours ('168')."""
    if text is None:
        return None
    from delta_ops.protocol.properties import parse_interval_ms

    if text.strip().isdigit():
        return int(text) * 3_600_000
    try:
        return parse_interval_ms(text)
    except ValueError as exc:
        raise SystemExit(f"delta-ops: error: invalid --retention {text!r}: {exc}") from None


def _cmd_cleanup(args: argparse.Namespace) -> int:
    from delta_ops.ops.cleanup import execute_cleanup, plan_cleanup
    from delta_ops.table.snapshot import load_snapshot

    snapshot = load_snapshot(args.table, storage_options=_storage_options(args.storage_option))
    plan = plan_cleanup(snapshot, _now_ms(args.now), retention_ms=_duration_ms(args.retention))
    if args.dry_run or plan.nothing_to_do:
        data = {**plan.to_dict(), "dry_run": args.dry_run}
        verb = "would delete" if args.dry_run else "deleted"
        human = "\n".join(
            [
                f"cutoff {data['cutoff']}, boundary checkpoint {plan.boundary_checkpoint_version}: {verb} {len(plan.deleted)} log files"
            ]
            + [f"  {name}" for name in plan.deleted]
            + [f"kept: {reason}" for reason in plan.kept_reasons]
        )
        _print(args, data, human)
        return 0
    result = execute_cleanup(plan)
    human = "\n".join(
        [
            f"cutoff {result.cutoff}, boundary checkpoint {result.boundary_checkpoint_version}: deleted {result.num_deleted} log files"
        ]
        + [f"  {name}" for name in result.deleted]
    )
    _print(args, result.to_dict(), human)
    return 0


def _cmd_vacuum(args: argparse.Namespace) -> int:
    from delta_ops.ops.vacuum import execute_vacuum, plan_vacuum
    from delta_ops.table.snapshot import load_snapshot

    snapshot = load_snapshot(args.table, storage_options=_storage_options(args.storage_option))
    grace = _duration_ms(args.in_flight_grace)
    plan = plan_vacuum(
        snapshot,
        _now_ms(args.now),
        retention_ms=_duration_ms(args.retention),
        mode=args.mode,
        force=args.force,
        **({"in_flight_grace_ms": grace} if grace is not None else {}),
    )
    if args.dry_run:
        data = {
            **plan.to_dict(),
            "dry_run": True,
            "deleted": [c.path for c in plan.candidates],
            "num_deleted": len(plan.candidates),
            "commits": [],
        }
        lines = [
            f"{c.path}\t{c.size} bytes\t{(plan.now_ms - c.modification_time) // 3_600_000} h old\t{c.reason}"
            for c in plan.candidates
        ]
        lines.append(
            f"would delete {len(plan.candidates)} files ({plan.bytes:,} bytes) and {len(plan.directories)} empty directories at most ({plan.mode}, retention {plan.retention_ms} ms)"
        )
        _print(args, data, "\n".join(lines))
        return 0
    result = execute_vacuum(plan)
    human = f"deleted {result.num_deleted} files ({result.bytes:,} bytes), {result.num_vacuumed_directories} directories; commits {list(result.commits) or 'none'}"
    _print(args, result.to_dict(), human)
    return 0


def _cmd_enable_row_tracking(args: argparse.Namespace) -> int:
    from delta_ops.ops.row_tracking import execute_enable_row_tracking, plan_enable_row_tracking
    from delta_ops.table.snapshot import load_snapshot

    snapshot = load_snapshot(args.table, storage_options=_storage_options(args.storage_option))
    plan = plan_enable_row_tracking(snapshot, batch_files=args.batch_files)
    if args.dry_run or plan.nothing_to_do:
        data = {**plan.to_dict(), "dry_run": args.dry_run}
        if plan.nothing_to_do:
            human = "row tracking is already enabled: nothing to do"
        else:
            human = (
                f"would {'upgrade the protocol, ' if plan.upgrade_protocol else ''}backfill {plan.files_to_backfill} files "
                f"in {plan.num_batches} batch(es) ({plan.files_without_num_records} counted from footers), then set delta.enableRowTracking=true"
            )
        _print(args, data, human)
        return 0
    say = (lambda m: print(f"delta-ops: {m}", file=sys.stderr)) if args.verbose else None
    result = execute_enable_row_tracking(plan, progress=say)
    human = (
        f"row tracking enabled: protocol upgrade at {result.protocol_upgrade_version}, "
        f"{result.files_backfilled} files backfilled in commits {list(result.backfill_commits)}, "
        f"property set at {result.property_commit_version}; high-water mark {result.row_id_high_water_mark}"
    )
    _print(args, {**result.to_dict(), "dry_run": False}, human)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="delta-ops", description="Maintenance for Delta Lake tables."
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress to stderr")
    sub = parser.add_subparsers(dest="command", required=True)

    inspect = sub.add_parser("inspect", help="show a table's state")
    _add_table_args(inspect)
    inspect.add_argument(
        "--version", type=int, default=None, help="version to inspect (default: latest)"
    )
    inspect.add_argument("--files", action="store_true", help="list the live files")
    inspect.set_defaults(func=_cmd_inspect)

    cp = sub.add_parser(
        "checkpoint", help="write a checkpoint (classic, V2 by table policy, or multi-part)"
    )
    _add_table_args(cp)
    cp.add_argument(
        "--version", type=int, default=None, help="version to checkpoint (default: latest)"
    )
    cp.add_argument(
        "--parts", type=int, default=None, help="write a multi-part checkpoint with N parts"
    )
    cp.add_argument(
        "--now",
        default=None,
        help=NOW_HELP,
    )
    cp.add_argument("--dry-run", action="store_true", help="print the plan, write nothing")
    cp.set_defaults(func=_cmd_checkpoint)

    cl = sub.add_parser(
        "cleanup", help="delete expired log files (Spark's truncated-day cutoff, whole segments)"
    )
    _add_table_args(cl)
    cl.add_argument(
        "--retention",
        default=None,
        help="log retention (e.g. '30 days'; default: delta.logRetentionDuration)",
    )
    cl.add_argument("--now", default=None, help=NOW_HELP)
    cl.add_argument(
        "--dry-run",
        action="store_true",
        help="print what would be deleted and what is kept, delete nothing",
    )
    cl.set_defaults(func=_cmd_cleanup)

    vac = sub.add_parser("vacuum", help="delete data files no retained version needs")
    _add_table_args(vac)
    vac.add_argument(
        "--retention",
        default=None,
        help="retention (e.g. '7 days', or hours; default: delta.deletedFileRetentionDuration)",
    )
    vac.add_argument("--mode", choices=("full", "lite"), default="full")
    vac.add_argument(
        "--dry-run",
        action="store_true",
        help="print every file with size, age and reason; delete nothing",
    )
    vac.add_argument(
        "--force", action="store_true", help="allow a retention shorter than the table's"
    )
    vac.add_argument("--now", default=None, help=NOW_HELP)
    vac.add_argument(
        "--in-flight-grace",
        default=None,
        help="keep untracked files younger than this (default '1 minute'; '0 seconds' = Spark)",
    )
    vac.set_defaults(func=_cmd_vacuum)

    rt = sub.add_parser(
        "enable-row-tracking", help="upgrade the protocol, backfill row ids, enable row tracking"
    )
    _add_table_args(rt)
    rt.add_argument(
        "--batch-files", type=int, default=22_000, help="files per backfill commit (default 22000)"
    )
    rt.add_argument("--dry-run", action="store_true", help="print the plan, write nothing")
    rt.set_defaults(func=_cmd_enable_row_tracking)
    return parser


def use_system_allocator() -> None:
    """Make the system allocator pyarrow's default pool for this process.

    pyarrow's default (mimalloc) keeps freed scratch memory, so one big log load would hold
    its peak for the life of the process; the system allocator returns it. Skipped when the
    user chose a pool with ARROW_DEFAULT_MEMORY_POOL.
    """
    if "ARROW_DEFAULT_MEMORY_POOL" not in os.environ:
        import pyarrow as pa

        pa.set_memory_pool(pa.system_memory_pool())


def main(argv: Sequence[str] | None = None) -> int:
    use_system_allocator()
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="delta-ops: %(levelname)s: %(message)s",
    )
    try:
        code: int = args.func(args)
        return code
    except DeltaOpsError as exc:
        print(f"delta-ops: error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"delta-ops: error: {exc}", file=sys.stderr)
        return 2
