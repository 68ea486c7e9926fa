"""Benchmark: load delta-kernel's 300k-file, 100-column partitioned test table, ours vs delta-rs.

The table is delta-kernel-rs' `kernel/tests/data/300k-add-files-100-col-partitioned` (a
`_delta_log` only: 5 JSON commits, 300,000 adds without stats, a 100-column schema partitioned
by `partition_col`, 100 partitions). It is regenerated here byte for byte (`make_kernel_table`),
so the benchmark needs nothing but this repository; `--verify DIR` compares the generated log
with an extracted copy of the real one (`zstd -d -c <tar.zst> | tar x`).

Three layouts of the same table, each loaded at its head (version 4, 300,000 live files):

* ``json``: as delta-kernel ships it, five JSON commits;
* ``rs-checkpoint``: plus a checkpoint at version 3 written by delta-rs (`create_checkpoint` of
  version 3), so a load reads a foreign checkpoint and one 100k-add commit after it;
* ``own-checkpoint``: the same with the version-3 checkpoint written by delta-ops.

Ours: ``load_snapshot`` with the CLI's process set-up; theirs: ``DeltaTable`` + ``file_uris()``
(both print the version and the live file count). Fresh processes, runs alternating after one
warm-up; the median wall and the highest peak RSS. Targets: ours/theirs <= 0.4 for time
(issue 35), <= 0.5 for peak RSS.

Same work, checked per layout before its ratios are printed: every run of each side must print
``4 300000``, and (untimed) both libraries must load the same state: version, protocol,
metaData and live files (path, size, modification time). A difference prints
``MISMATCH: ...`` and exits 1.

``--files N`` makes a smaller table of the same shape (10 files in commit 1, the rest split
over commits 2-4), for a quick check of the benchmark itself.

    python benchmarks/bench_kernel_300k.py [--runs 3] [--layouts json rs-checkpoint own-checkpoint]
        [--files 300000]
    python benchmarks/bench_kernel_300k.py --verify /tmp/k300/300k-add-files-100-col-partitioned

Exit status: 0 all layouts PASS, 1 some FAIL (target missed, or MISMATCH), 3 ours unavailable.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.bench_load import OURS, THEIRS
from benchmarks.harness import compare, compile_package, evaluate, format_result
from benchmarks.verify import Mismatch, outputs_agree, printed, readers_agree, report_mismatch

DATA = ROOT / "benchmarks" / ".data"
RESULTS = DATA / "results"
LAYOUTS = ("json", "rs-checkpoint", "own-checkpoint")
HEAD_VERSION = 4
LIVE_FILES = 300_000
BASE_TIME = 1_234_567_890


def big_commits(files: int) -> tuple[tuple[int, int], ...]:
    """The file ranges of commits 2-4: for 300,000 files 10..100,009, 100,010..200,009 and
    200,010..299,999."""
    third = files // 3
    return ((10, 10 + third), (10 + third, 10 + 2 * third), (10 + 2 * third, files))


def _json(value: object) -> str:
    return json.dumps(value, separators=(",", ":"))


def _schema_string() -> str:
    fields = [{"name": "partition_col", "type": "string", "nullable": False, "metadata": {}}]
    fields += [
        {"name": f"col_{i}", "type": "long", "nullable": True, "metadata": {}} for i in range(99)
    ]
    return _json({"type": "struct", "fields": fields})


def _add(index: int, partition: int, size: int) -> str:
    name = f"part_{partition}"
    return _json(
        {
            "add": {
                "path": f"{name}/file_{index}.parquet",
                "partitionValues": {"partition_col": name},
                "size": size,
                "modificationTime": BASE_TIME + index,
                "dataChange": True,
            }
        }
    )


def _commits(files: int) -> Iterator[list[str]]:
    """The lines of commits 0..4, in order."""
    yield [
        _json({"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}),
        _json(
            {
                "metaData": {
                    "id": "5adb1fc2-ed97-4832-ba7f-541135e95b63",
                    "name": "test_table",
                    "description": "Test table for performance testing",
                    "format": {"provider": "parquet", "options": {}},
                    "schemaString": _schema_string(),
                    "partitionColumns": ["partition_col"],
                    "createdTime": BASE_TIME,
                    "configuration": {},
                }
            }
        ),
    ]
    yield [_add(i, i % 3, 1024 * (i + 1)) for i in range(10)]
    for start, stop in big_commits(files):
        yield [_add(i, i % 100, 1_048_576) for i in range(start, stop)]


def make_kernel_table(path: Path, files: int = LIVE_FILES) -> None:
    """Write the table's `_delta_log` at `path` (kept if it is already complete)."""
    log = path / "_delta_log"
    if (log / f"{HEAD_VERSION:020d}.json").exists():
        return
    shutil.rmtree(path, ignore_errors=True)
    log.mkdir(parents=True)
    for version, lines in enumerate(_commits(files)):
        (log / f"{version:020d}.json").write_text("\n".join(lines) + "\n")


def verify(generated: Path, real: Path) -> list[str]:
    """Names of the commit files that differ between the generated and the real log."""
    differ = []
    for version in range(HEAD_VERSION + 1):
        name = f"_delta_log/{version:020d}.json"
        if not filecmp.cmp(generated / name, real / name, shallow=False):
            differ.append(name)
    return differ


def _hardlink_copy(source: Path, target: Path) -> None:
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(source, target, copy_function=os.link)


def prepare(layout: str, files: int = LIVE_FILES) -> Path:
    """The table in `layout`, made once under benchmarks/.data."""
    name = "kernel-300k" if files == LIVE_FILES else f"kernel-{files}"
    base = DATA / f"{name}-json"
    make_kernel_table(base, files)
    if layout == "json":
        return base
    table = DATA / f"{name}-{layout}"
    checkpoint_file = table / "_delta_log" / f"{3:020d}.checkpoint.parquet"
    if checkpoint_file.exists():
        return table
    _hardlink_copy(base, table)
    if layout == "rs-checkpoint":
        from deltalake import DeltaTable

        DeltaTable(str(table), version=3).create_checkpoint()
    else:
        from delta_ops.ops.checkpoint import checkpoint

        checkpoint(str(table), version=3)
    if not checkpoint_file.exists():
        raise SystemExit(f"{layout}: no checkpoint at version 3 in {table / '_delta_log'}")
    (table / "_delta_log" / "_last_checkpoint").unlink(missing_ok=True)
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--layouts", nargs="+", choices=LAYOUTS, default=list(LAYOUTS))
    parser.add_argument("--target-wall", type=float, default=0.4)  # issue 35
    parser.add_argument("--target-rss", type=float, default=0.5)
    parser.add_argument("--verify", type=Path, help="an extracted copy of the real table")
    parser.add_argument("--files", type=int, default=LIVE_FILES, help="a smaller table (>= 13)")
    args = parser.parse_args(argv)
    if args.files < 13:
        parser.error("--files must be at least 13")

    if args.verify is not None:
        base = DATA / "kernel-300k-json"
        make_kernel_table(base)
        differ = verify(base, args.verify)
        print("generated log equals the real one" if not differ else f"differ: {differ}")
        return 1 if differ else 0

    compile_package()
    expected = f"{HEAD_VERSION} {args.files}"
    report: dict[str, object] = {"benchmark": "kernel-300k", "expected_output": expected}
    status = 0
    for layout in args.layouts:
        table = str(prepare(layout, args.files))
        result = compare(
            [sys.executable, "-c", OURS, table],
            [sys.executable, "-c", THEIRS, table],
            args.runs,
            args.warmup,
            name=f"load kernel {args.files} ({layout})",
        )
        try:
            sides = [m for m in (result.ours, result.theirs) if m.ok]
            outputs_agree(expected, {m.label: printed(m) for m in sides}, "version, files")
            if len(sides) == 2:
                state = readers_agree(table, DATA / "kernel-verify")
                print(
                    f"same work ({layout}): every run printed {expected!r}; both load {state.summary()}"
                )
        except Mismatch as exc:
            status = report_mismatch("bench_kernel_300k", f"{layout}: {exc}")
            break
        print(format_result(result, args.target_wall, args.target_rss), flush=True)
        if not result.ours.ok:
            status = 3
        verdict = evaluate(result, args.target_wall, args.target_rss)
        if status == 0 and not verdict.passed:
            status = 1
        report[layout] = {"comparison": result.to_dict(), "verdict": verdict.label}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "bench_kernel_300k.json").write_text(json.dumps(report, indent=2) + "\n")
    return status


if __name__ == "__main__":
    sys.exit(main())
