"""The `delta-ops` command line: ``delta-ops inspect|checkpoint|cleanup|vacuum|enable-row-tracking|purge|compact``.

For example:

    from delta_ops.cli import main
    main(["inspect", "/data/events", "--json"])

`run` is the `delta-ops` process (its console script and ``python -m delta_ops.cli``):
it sets the process's environment up (`OWN_PROCESS_ENVIRONMENT`) before numpy and
pyarrow load, which is why this package imports them only when `main` or
`build_parser` is first used. Calling `main` from a program leaves its
environment alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NoReturn

from delta_ops.cli.own_process import OWN_PROCESS_ENVIRONMENT, prepare_own_process

if TYPE_CHECKING:
    from delta_ops.cli.commands import build_parser, main


def run() -> NoReturn:
    """The `delta-ops` process: its environment set up, then `delta_ops.cli.commands.run`."""
    prepare_own_process()
    # after the environment is set: this import loads numpy and pyarrow
    from delta_ops.cli.commands import run as run_command

    run_command()


def __getattr__(name: str) -> Any:
    if name not in ("main", "build_parser"):
        raise AttributeError(f"module 'delta_ops.cli' has no attribute {name!r}")
    # the commands' modules on first use, so that `run` can set the environment up first
    from delta_ops.cli import commands

    return getattr(commands, name)


__all__ = [
    "OWN_PROCESS_ENVIRONMENT",
    "build_parser",
    "main",
    "prepare_own_process",
    "run",
]
