"""Every way a process of ours ends, run many times under a timeout: no hang, no abort.

`delta-ops plan` once printed its answer and never exited (4 runs in 4): a forked map whose
results were all in shut its pool down without waiting, and the CLI's exit path (``atexit``
handlers, then ``os._exit``) closed the pool's call queue before the workers got their stop
sentinel, then joined them for ever. A cron job or a CI step hangs on that, so each forking
subcommand runs :data:`RUNS` times here, each under :data:`TIMEOUT_S`, and the child proves
that it forked (a fork counter written by its last exit handler): a run that never forks
would pass without testing anything.

The children run the CLI's own entry point (`delta_ops.cli.commands.run`, what the
`delta-ops` script calls) with the fork thresholds lowered (the rewrite's file count, the clustering's in-memory
and spill sizes), so that tables of a few rows fork as a 2,000-file compaction or a cube
bigger than memory does.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa

from delta_ops.table.writer import write_arrow
from tests.support.rewrite_support import dv_table, many_small_appends

ROOT = Path(__file__).resolve().parents[2]
TABLES = ROOT / "tests" / "data" / "tables"
#: runs of each exit path (the issue's acceptance: 50 runs, 0 hangs)
RUNS = int(os.environ.get("DELTA_OPS_EXIT_RUNS", "50"))
#: far above a run's ~1 s: a run still going then is a hang
TIMEOUT_S = 60

#: the child: counts its forks, lowers the rewrite's fork threshold, then is the CLI process;
#: its first exit handler (so the last to run) records the forks once every other has run
CLI_CHILD = """
import atexit, os, sys
forks = []
os.register_at_fork(after_in_parent=lambda: forks.append(1))
report = sys.argv[1]
atexit.register(lambda: open(report, "w").write(str(len(forks))))
import delta_ops.ops.rewrite as rewrite
rewrite.PROCESS_MIN_FILES = 2
import delta_ops.ops.cluster as cluster
cluster.IN_MEMORY_BYTES = cluster.SPILL_CHUNK_BYTES = cluster.FORK_MIN_BYTES = 0
from delta_ops.cli.commands import run
sys.argv = ["delta-ops", *sys.argv[2:]]
run()
"""

#: the in-process case: a forked map in a program's own process, then the CLI's exit path
MAP_CHILD = """
import atexit, os, sys
forks = []
os.register_at_fork(after_in_parent=lambda: forks.append(1))
report = sys.argv[1]
atexit.register(lambda: open(report, "w").write(str(len(forks))))
from delta_ops.ops.engines import LOCAL, Spread
assert LOCAL.map_ordered(abs, [-1, -2, -3, -4], spread=Spread.PROCESSES) == [1, 2, 3, 4]
from delta_ops.cli.commands import exit_now
exit_now(0)
"""


def _run_child(code: str, args: list[str], report: Path, cwd: Path) -> tuple[str, int | None]:
    """One child run: ("hang", None), or (its exit code as text, its fork count)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    try:
        done = subprocess.run(
            [sys.executable, "-c", code, str(report), *args],
            capture_output=True,
            check=False,
            timeout=TIMEOUT_S,
            cwd=cwd,
            env=env,
        )
    except subprocess.TimeoutExpired:
        return "hang", None
    forks = int(report.read_text() or 0) if report.exists() else None
    if done.returncode != 0:
        return f"exit {done.returncode}: {done.stderr.decode()[-500:]}", forks
    return "ok", forks


def _stress(tmp_path: Path, code: str, args_for_run, forks: bool = True) -> None:  # type: ignore[no-untyped-def]
    """RUNS runs, two at a time (the machine's cores); every one must end by itself with
    exit 0 (after forking, where `forks`)."""

    def one(i: int) -> tuple[str, int | None]:
        run_dir = tmp_path / f"run-{i}"
        run_dir.mkdir()
        return _run_child(code, args_for_run(run_dir), run_dir / "forks", run_dir)

    with ThreadPoolExecutor(2) as pool:
        outcomes = list(pool.map(one, range(RUNS)))
    bad = [o for o in outcomes if o[0] != "ok"]
    assert not bad, f"{len(bad)} of {RUNS} runs did not end cleanly, e.g. {bad[0]}"
    unforked = [o for o in outcomes if not o[1]]
    assert not forks or not unforked, (
        f"{len(unforked)} of {RUNS} runs never forked: the test tests nothing"
    )


def _template(tmp_path: Path, build) -> Path:  # type: ignore[no-untyped-def]
    template = tmp_path / "template"
    template.mkdir()
    return build(template)


def _copy_of(template: Path):  # type: ignore[no-untyped-def]
    def fresh(run_dir: Path) -> Path:
        table = run_dir / "table"
        shutil.copytree(template, table)
        return table

    return fresh


def _small_files(root: Path) -> Path:
    table = root / "t"
    many_small_appends(table, appends=6)
    return table


def _two_cubes(root: Path) -> Path:
    table = root / "t"
    for i in range(6):
        ids = pa.array(range(10 * i, 10 * i + 10), pa.int64())
        write_arrow(
            table,
            pa.table({"id": ids, "day": pa.array(["a" if i % 2 else "b"] * 10)}),
            partition_by=["day"],
        )
    return table


def test_plan_of_a_lake_exits_every_time(tmp_path: Path) -> None:
    _stress(tmp_path, CLI_CHILD, lambda _: ["plan", str(TABLES), "--max-tables", "3"])


def test_compaction_exits_every_time(tmp_path: Path) -> None:
    fresh = _copy_of(_template(tmp_path, _small_files))
    _stress(tmp_path, CLI_CHILD, lambda run_dir: ["compact", str(fresh(run_dir))])


def test_zorder_compaction_exits_every_time(tmp_path: Path) -> None:
    fresh = _copy_of(_template(tmp_path, _two_cubes))
    _stress(
        tmp_path,
        CLI_CHILD,
        lambda run_dir: ["compact", str(fresh(run_dir)), "--zorder-by", "id"],
    )


def test_purge_exits_every_time(tmp_path: Path) -> None:
    fresh = _copy_of(_template(tmp_path, lambda root: dv_table(root)))
    _stress(tmp_path, CLI_CHILD, lambda run_dir: ["purge", str(fresh(run_dir))])


def test_a_forked_map_then_the_cli_exit_path_exits_every_time(tmp_path: Path) -> None:
    _stress(tmp_path, MAP_CHILD, lambda _: [])


#: a Dagster maintenance step's exit path, as the demo ends: the maintenance asset job run in
#: this process on a table with a checkpoint due, `inspect` through the CLI's `main` (no
#: `exit_now`), then the interpreter's normal exit with everything loaded still alive
DAGSTER_CHILD = """
import sys
import dagster as dg
from delta_ops.cli import main
from delta_ops.dagster import DeltaTableTarget, build_delta_maintenance_defs
table = sys.argv[2]
defs = build_delta_maintenance_defs([DeltaTableTarget("t", table)], name="x")
job = defs.resolve_job_def("x_maintenance_assets_job")
assert job.execute_in_process(instance=dg.DagsterInstance.ephemeral()).success
assert main(["inspect", table]) == 0
open(sys.argv[1], "w").write("1")
"""


def _lagging(root: Path) -> Path:
    table = root / "t"
    for i in range(11):  # past delta.checkpointInterval: the run writes a checkpoint
        write_arrow(table, pa.table({"id": pa.array([i], pa.int64())}))
    return table


def test_a_dagster_maintenance_step_then_a_normal_exit_never_aborts(tmp_path: Path) -> None:
    """Each run checkpoints (the row-group builder's thread), cleans up and vacuums a copy,
    then ends as a program does: atexit handlers, the interpreter's teardown, Arrow's static
    destructors. An abort there ("terminate called without an active exception", exit -6)
    is a failed run."""
    fresh = _copy_of(_template(tmp_path, _lagging))
    _stress(tmp_path, DAGSTER_CHILD, lambda run_dir: [str(fresh(run_dir))], forks=False)


#: `checkpoint()` in a spawned process (as the racing-checkpoint tests run it), exiting the
#: normal way: the teardown stress the racing runs met (two SIGABRTs in one CI run)
CHECKPOINT_CHILD = """
import sys
from delta_ops.ops.checkpoint import checkpoint
checkpoint(sys.argv[2])
open(sys.argv[1], "w").write("1")
"""


def test_checkpoint_in_a_process_that_exits_normally_never_aborts(tmp_path: Path) -> None:
    fresh = _copy_of(_template(tmp_path, _lagging))
    _stress(tmp_path, CHECKPOINT_CHILD, lambda run_dir: [str(fresh(run_dir))], forks=False)


#: a row-group builder left running (its generator never closed) when the program exits: the
#: checkpoint module's exit handler must stop it before the teardown. The handler registered
#: here first runs last, and reports whether the builder was still alive then.
BUILDER_CHILD = """
import atexit, sys, threading, time
alive = []
atexit.register(lambda: open(sys.argv[1], "w").write(str(int(any(alive[0]())))))
import pyarrow as pa
from delta_ops.ops import checkpoint_writer
def slow_groups():
    while True:
        time.sleep(0.05)
        yield pa.table({"a": list(range(1000))})
groups = checkpoint_writer.built_ahead(slow_groups())
next(groups)  # the builder runs on; `groups` is never closed
alive.append(lambda: [t.is_alive() for t in threading.enumerate() if t.daemon])
sys.exit(0)
"""


def test_a_builder_left_running_is_stopped_before_the_interpreter_tears_down(
    tmp_path: Path,
) -> None:
    report = tmp_path / "alive"
    outcome, _ = _run_child(BUILDER_CHILD, [], report, tmp_path)
    assert outcome == "ok", outcome
    assert report.read_text() == "0", "the builder thread was still running at teardown"


def test_the_spark_engine_without_pandas_is_one_line_not_an_internal_error(tmp_path: Path) -> None:
    """PySpark's mapInArrow (every Spark engine job) refuses to run without pandas, which the
    `spark` extra brings: without it, `--engine spark` says which extra to install (exit 2),
    where it was an internal error (exit 70) from inside the first job."""
    table = tmp_path / "t"
    write_arrow(table, pa.table({"id": pa.array([1, 2], pa.int64())}))
    script = (
        "import sys; sys.modules['pandas'] = None\n"  # as if pandas were not installed
        "from delta_ops import cli\n"
        f"sys.exit(cli.main(['compact', {str(table)!r}, '--engine', 'spark']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 2, done.stderr
    wanted = (
        "delta-ops: error: delta_ops.spark: the 'spark' extra is not installed:"
        " pip install 'delta-ops[spark]'"
    )
    assert done.stderr.strip().splitlines() == [wanted]
