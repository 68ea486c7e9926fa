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

from delta_ops.errors import DeltaOpsError


def _add_table_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("table", help="table path or URL (file://, memory://, s3://, ...)")
    p.add_argument(
        "--storage-option", action="append", default=[], metavar="KEY=VALUE",
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
    from delta_ops.snapshot import load_snapshot
    from delta_ops.table_summary import format_summary, summarize

    snapshot = load_snapshot(args.table, args.version, storage_options=_storage_options(args.storage_option))
    summary = summarize(snapshot, include_files=args.files)
    print(json.dumps(summary.to_dict()) if args.json else format_summary(summary))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="delta-ops", description="Maintenance for Delta Lake tables.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress to stderr")
    sub = parser.add_subparsers(dest="command", required=True)

    inspect = sub.add_parser("inspect", help="show a table's state")
    _add_table_args(inspect)
    inspect.add_argument("--version", type=int, default=None, help="version to inspect (default: latest)")
    inspect.add_argument("--files", action="store_true", help="list the live files")
    inspect.set_defaults(func=_cmd_inspect)
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
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="delta-ops: %(levelname)s: %(message)s")
    try:
        return args.func(args)
    except DeltaOpsError as exc:
        print(f"delta-ops: error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"delta-ops: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
