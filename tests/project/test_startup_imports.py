"""What the `delta-ops` command loads before it does anything (issue 35: start-up is most of
the wait on a small table). Structure, not timing: a fresh interpreter imports the CLI and
reports which modules came with it.

The registry is lazy: `delta-ops vacuum` generates only its own subcommand, so only the vacuum
module of all the operations is loaded (the others, the fleet planner and inspect's advice
stay out), and what only an operation's execution needs is loaded when it runs: the rewriting
stack of purge and compaction (reading and rewriting data files) and the process pool of forked
map workers.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from delta_ops.cli.own_process import (
    OWN_PROCESS_ENVIRONMENT,
    SET_FOR_OWN_PROCESS,
    chosen_by_user,
)
from delta_ops.log.actions import from_numpy
from tests.support import REPO, TABLES, copy_fixture

#: loaded by the commands that write data files or fork workers, never at start-up
DEFERRED = (
    "delta_ops.ops.rewrite",
    "delta_ops.table.parquet_bytes",
    "concurrent.futures.process",
    "multiprocessing",
    "multiprocessing.connection",
)


def _loaded_by(statement: str) -> set[str]:
    # the child ends with os._exit, as the CLI does (`cli.main.exit_now`): Arrow's thread pools
    # can abort an interpreter's teardown (apache/arrow#34314; 1 run in 60 of this load+inspect)
    code = (
        f"import json, os, sys\n{statement}\nprint(json.dumps(sorted(sys.modules)))\n"
        "sys.stdout.flush()\nos._exit(0)\n"
    )
    child = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    return set(json.loads(child.stdout.splitlines()[-1]))


def test_the_cli_loads_no_rewriting_stack_and_no_process_pool() -> None:
    loaded = _loaded_by("import delta_ops.cli.commands")
    assert "delta_ops.ops.registry" in loaded  # the check looks at a real start-up
    assert sorted(m for m in DEFERRED if m in loaded) == []


def test_the_package_and_the_cli_package_load_no_numpy_or_pyarrow() -> None:
    """The `delta-ops` process sets its environment before numpy loads (below): only possible
    while neither package's import brings numpy or pyarrow."""
    for statement in ("import delta_ops", "import delta_ops.cli", "from delta_ops import errors"):
        loaded = _loaded_by(statement)
        assert "delta_ops" in loaded, statement
        assert {"numpy", "pyarrow"} & loaded == set(), statement
    # the table API is still there, on first use
    assert "pyarrow" in _loaded_by("from delta_ops import load_snapshot, Storage, Snapshot")


_OPENBLAS_AT_NUMPY = (
    "import atexit, json, os, sys\n"
    "seen = []\n"
    "class Watch:\n"
    "    def find_spec(self, name, path=None, target=None):\n"
    "        if name == 'numpy':\n"
    "            seen.append(os.environ.get('OPENBLAS_NUM_THREADS'))\n"
    "sys.meta_path.insert(0, Watch())\n"
    "atexit.register(lambda: print(json.dumps(seen)))\n"
    "sys.argv = ['delta-ops', 'inspect', {table!r}, '--json']\n"
    "from delta_ops.cli import run\n"
    "run()\n"
)


@pytest.mark.parametrize(("users", "at_numpy"), [(None, "1"), ("3", "3")])
def test_the_cli_process_limits_openblas_threads_before_numpy_loads(
    users: str | None, at_numpy: str
) -> None:
    """numpy's OpenBLAS starts a spinning thread per core at load, for linear algebra
    delta-ops never does: the `delta-ops` process asks for one thread unless the user chose."""
    import os

    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if users is not None:
        env["OPENBLAS_NUM_THREADS"] = users
    code = _OPENBLAS_AT_NUMPY.format(table=str(TABLES / "delta-rs" / "simple_table"))
    child = subprocess.run(
        [sys.executable, "-c", code], check=False, cwd=REPO, env=env, capture_output=True, text=True
    )
    assert child.returncode == 0, child.stderr
    assert json.loads(child.stdout.splitlines()[-1]) == [at_numpy]


def test_calling_main_leaves_the_callers_environment_alone() -> None:
    loaded_env = _loaded_by(
        "import os\nos.environ.pop('OPENBLAS_NUM_THREADS', None)\n"
        "from delta_ops.cli import main\nmain(['--version'])\n"
        "assert 'OPENBLAS_NUM_THREADS' not in os.environ\n"
    )
    assert "delta_ops.cli.commands" in loaded_env


def test_one_operation_loads_its_own_module_and_no_other() -> None:
    from delta_ops.ops.registry import ENTRIES

    loaded = _loaded_by("from delta_ops.cli.commands import build_parser\nbuild_parser('vacuum')")
    op_modules = {entry.module_path for entry in ENTRIES}
    assert sorted(op_modules & loaded) == ["delta_ops.ops.vacuum"]
    assert "delta_ops.service.fleet" not in loaded and "delta_ops.service.inspect" not in loaded
    # every subcommand still comes with --help, or when the command is no operation
    everything = _loaded_by("from delta_ops.cli.commands import build_parser\nbuild_parser()")
    assert op_modules <= everything


def test_inspect_loads_no_operation_before_it_loads_the_table() -> None:
    """inspect's advice planners come after the table's load, so their modules' memory lands
    under the load's peak (issue 35: inspect's peak RSS at most the load's)."""
    from delta_ops.ops.registry import ENTRIES

    op_modules = {entry.module_path for entry in ENTRIES}
    for command in ("inspect", "plan"):
        loaded = _loaded_by(
            f"from delta_ops.cli.commands import build_parser\nbuild_parser({command!r})"
        )
        assert sorted(op_modules & loaded) == [], command
        assert "delta_ops.service.inspect" not in loaded, command


def test_the_registry_names_each_operation_as_its_module_does() -> None:
    from delta_ops.ops.registry import ENTRIES, OPERATIONS

    for entry in ENTRIES:
        operation = OPERATIONS[entry.name]
        assert operation.name == entry.name
        assert operation.plan_with.__module__ == entry.module_path
    assert list(OPERATIONS) == [e.name for e in ENTRIES]


def test_planning_a_compaction_loads_no_rewriting_stack() -> None:
    """inspect and the asset checks count what a compaction would rewrite: a plan, no writer."""
    table = TABLES / "delta-rs" / "simple_table"
    loaded = _loaded_by(
        "from delta_ops.table.snapshot import load_snapshot\n"
        "from delta_ops.ops.compact import plan_compact, files_to_compact\n"
        f"s = load_snapshot({str(table)!r})\n"
        "assert files_to_compact(s) == plan_compact(s).files_to_rewrite\n"
    )
    assert "delta_ops.ops.rewrite" not in loaded


def test_bin_packing_loads_no_clustering_module_and_z_ordering_does() -> None:
    """`compact` on a table without clustering bin-packs without the clustering module (~10 ms
    of start-up); with --zorder-by the same operation plans a clustering."""
    table = TABLES / "delta-rs" / "simple_table"
    plan = (
        "from delta_ops.table.snapshot import load_snapshot\n"
        "from delta_ops.ops.compact import CompactOptions, CompactPlan, plan_optimize\n"
        f"s = load_snapshot({str(table)!r})\n"
        "plan = plan_optimize(s, CompactOptions(target_size=1 << 27, zorder_by={zorder!r}))\n"
        "assert isinstance(plan, CompactPlan) == ({zorder!r} is None), plan\n"
    )
    assert "delta_ops.ops.cluster" not in _loaded_by(plan.format(zorder=None))
    assert "delta_ops.ops.cluster" in _loaded_by(plan.format(zorder="id"))


def test_loading_inspecting_and_checkpointing_convert_no_numpy_array_through_pyarrow(
    tmp_path: Path,
) -> None:
    """``pa.array(ndarray)`` asks whether the array is a masked one, which imports numpy.ma
    (10 ms of CPU): the load, inspect and a checkpoint convert through
    `log.actions.from_numpy` instead."""
    # pyarrow itself imports pandas (and pandas numpy.ma) on its first conversion whenever
    # pandas is installed (the spark extra brings it), so the child watches for the cause
    # instead: a numpy array handed to `pa.array`
    code = (
        "import sys, numpy, pyarrow\n"
        "ours = []\n"
        "_array = pyarrow.array\n"
        "def _watched(obj, *args, **kwargs):\n"
        "    if isinstance(obj, numpy.ndarray):\n"
        "        ours.append(obj.dtype)\n"
        "    return _array(obj, *args, **kwargs)\n"
        "pyarrow.array = _watched\n"
        "from delta_ops.table.snapshot import load_snapshot\n"
        "from delta_ops.service.inspect import summarize\n"
        "from delta_ops.ops.checkpoint import checkpoint\n"
    )
    for name in ("dv-partitioned-with-checkpoint", "log-replay-dv-key-cases", "v2-checkpoint-json"):
        code += f"summarize(load_snapshot({str(TABLES / 'delta-spark' / name)!r}))\n"
        copy = copy_fixture(f"delta-spark/{name}", tmp_path / name)
        code += f"checkpoint({str(copy)!r})\n"
    code += "if ours:\n    sys.modules['numpy_ma_by_our_conversion'] = sys\n"  # a marker
    assert "numpy_ma_by_our_conversion" not in _loaded_by(code)


@pytest.mark.parametrize(
    "values",
    [
        np.array([3, -1, 7], dtype=np.int64),
        np.array([1, 2], dtype=np.int32),
        np.array([True, False, True, True, False, False, True, False, True], dtype=bool),
        np.arange(10, dtype=np.int64)[::3],  # not contiguous
        np.zeros(0, dtype=bool),
    ],
)
def test_from_numpy_is_pyarrows_conversion(values: np.ndarray) -> None:
    assert from_numpy(values).equals(pa.array(values))
    assert from_numpy(values, pa.int64()).equals(pa.array(values).cast(pa.int64()))


def test_a_clustering_by_the_cli_process_loads_no_pandas_and_uses_the_system_pool(
    tmp_path: Path,
) -> None:
    """pyarrow's first conversion of a Python value imports pandas when installed (~40 MB and
    ~0.2 s in a fresh process): the `delta-ops` process has pyarrow take it for absent
    (`cli.own_process.keep_pandas_unloaded`), and Arrow's C++ default pool (the parquet
    writer's) is the system allocator, as pyarrow's own is (issue 50.4)."""
    copy = copy_fixture("delta-rs/simple_table", tmp_path / "t")
    code = (
        "import json, os, sys\n"
        "from delta_ops.cli import prepare_own_process\n"
        "prepare_own_process()\n"
        "from delta_ops.cli.commands import main\n"
        f"code = main(['compact', {str(copy)!r}, '--zorder-by', 'id', '--json'],"
        " own_process=True)\n"
        "import pyarrow\n"
        "print(json.dumps([code, 'pandas' in sys.modules,"
        " pyarrow.default_memory_pool().backend_name]))\n"
        "sys.stdout.flush()\nos._exit(0)\n"
    )
    child = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert json.loads(child.stdout.splitlines()[-1]) == [0, False, "system"]


def test_pyarrow_still_converts_pandas_when_asked_after_keep_pandas_unloaded() -> None:
    code = (
        "import json, os, sys\n"
        "from delta_ops.cli.own_process import keep_pandas_unloaded\n"
        "keep_pandas_unloaded()\n"
        "import pyarrow as pa\n"
        "pa.array([1, 2])\n"
        "assert 'pandas' not in sys.modules\n"
        "frame = pa.table({'a': pa.array(['x', 'y']).dictionary_encode()}).to_pandas()\n"
        "back = pa.Table.from_pandas(frame).column('a').type\n"
        "print(json.dumps([type(frame).__name__, str(back)]))\n"
        "sys.stdout.flush()\nos._exit(0)\n"
    )
    pytest.importorskip("pandas")
    child = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert json.loads(child.stdout.splitlines()[-1]) == [
        "DataFrame",
        "dictionary<values=string, indices=int8, ordered=0>",
    ]


def test_a_pool_the_user_set_after_the_own_process_setup_stays_theirs() -> None:
    """A program that called `prepare_own_process` and then chose its own Arrow pool keeps
    it: only the value delta-ops set counts as delta-ops' (`use_system_allocator` asks)."""
    environ: dict[str, str] = {}
    name = "ARROW_DEFAULT_MEMORY_POOL"
    was_set = name in SET_FOR_OWN_PROCESS
    SET_FOR_OWN_PROCESS.add(name)  # as prepare_own_process on os.environ records it
    try:
        assert not chosen_by_user(name, environ)
        environ[name] = OWN_PROCESS_ENVIRONMENT[name]
        assert not chosen_by_user(name, environ)
        environ[name] = "jemalloc"
        assert chosen_by_user(name, environ)
    finally:
        if not was_set:
            SET_FOR_OWN_PROCESS.discard(name)
