"""The `delta-ops` command line: ``delta-ops inspect|checkpoint|cleanup|vacuum|enable-row-tracking|purge|compact``.

Example::

    from delta_ops.cli import main
    main(["inspect", "/data/events", "--json"])
"""

from delta_ops.cli.main import build_parser, main, run

__all__ = ["build_parser", "main", "run"]
