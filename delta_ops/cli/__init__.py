"""The `delta-ops` command line: ``delta-ops inspect|checkpoint|cleanup|vacuum|enable-row-tracking``.

Example::

    from delta_ops.cli import main
    main(["inspect", "/data/events", "--json"])
"""

from delta_ops.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
