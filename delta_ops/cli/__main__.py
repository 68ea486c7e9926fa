"""``python -m delta_ops.cli``: the same as the `delta-ops` command."""

from delta_ops.cli import run

run()
