"""What the `delta-ops` process sets up for itself, before and after numpy and pyarrow load.

    prepare_own_process()        # its environment: before numpy and pyarrow load
    ...                          # import the commands, load nothing yet
    keep_pandas_unloaded()       # pyarrow told pandas is absent, unless asked for by name

`delta_ops.cli.run` does the first, `delta_ops.cli.commands.main` (for the `delta-ops`
process, on the local engine) the second. A program that calls `main` keeps its own
environment and pyarrow's view of pandas.
"""

from __future__ import annotations

import importlib.abc
import os
import sys
from collections.abc import MutableMapping
from typing import Any

#: what the `delta-ops` process sets where the user has not: numpy's OpenBLAS starts a
#: thread per core that spins at load (~40 ms of CPU, ~10 ms of wall on 2 cores) for linear
#: algebra delta-ops never does; Arrow's C++ default memory pool, which pyarrow's
#: `set_memory_pool` (`delta_ops.cli.commands.use_system_allocator`) does not reach and which
#: the parquet writer and other C++ code allocate from, is the system allocator too: under
#: mimalloc a clustering of 2M rows held 40-60 MB more and took 10% more CPU
OWN_PROCESS_ENVIRONMENT = {"OPENBLAS_NUM_THREADS": "1", "ARROW_DEFAULT_MEMORY_POOL": "system"}
#: the names of OWN_PROCESS_ENVIRONMENT `prepare_own_process` set in this process's
#: environment (the user had set none of them)
SET_FOR_OWN_PROCESS: set[str] = set()


def prepare_own_process(environ: MutableMapping[str, str] = os.environ) -> None:
    """Set `OWN_PROCESS_ENVIRONMENT` in `environ` where it holds no value of its own."""
    for name, value in OWN_PROCESS_ENVIRONMENT.items():
        if name not in environ:
            environ[name] = value
            if environ is os.environ:
                SET_FOR_OWN_PROCESS.add(name)


def chosen_by_user(name: str, environ: MutableMapping[str, str] = os.environ) -> bool:
    """Whether `environ`'s value of `name` is the user's: set, and not the value
    `prepare_own_process` set (a program may set its own after calling it)."""
    if name not in environ:
        return False
    ours = name in SET_FOR_OWN_PROCESS and environ[name] == OWN_PROCESS_ENVIRONMENT.get(name)
    return not ours


class _RefusePandas(importlib.abc.MetaPathFinder):
    """An import finder under which ``import pandas`` fails."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)


def keep_pandas_unloaded() -> None:
    """Have pyarrow take pandas for absent until it is asked for pandas by name.

    pyarrow's first conversion of a Python or numpy value (``pa.array([...])``, ``pa.scalar``,
    a compute function given a Python value: a snapshot load does several) asks whether the
    value is a pandas object, which imports pandas if installed: ~40 MB of memory and ~0.2 s
    in a fresh process, for the life of the process, in a command that never sees pandas.
    Here that first question is asked with pandas' import refused, so pyarrow notes it as
    absent; its pandas functions (``to_pandas``, ``from_pandas``) still import pandas when
    called, after which pyarrow knows pandas as usual. For the `delta-ops` process only, on
    the local engine (the Spark engine hands pandas objects to pyarrow)."""
    if "pandas" in sys.modules:
        return
    import pyarrow as pa

    refuse = _RefusePandas()
    sys.meta_path.insert(0, refuse)
    try:
        pa.scalar(0)  # pyarrow's question, answered "absent"
    finally:
        sys.meta_path.remove(refuse)


__all__ = [
    "OWN_PROCESS_ENVIRONMENT",
    "SET_FOR_OWN_PROCESS",
    "chosen_by_user",
    "keep_pandas_unloaded",
    "prepare_own_process",
]
