"""The table: a snapshot to read from and a transaction to commit through.

* :mod:`~delta_ops.table.snapshot`: a table's reconciled state at one version.
* :mod:`~delta_ops.table.transaction`: optimistic commits with conflict checks.
* :mod:`~delta_ops.table.writer`: parquet data files plus a commit with their stats.

Example::

    from delta_ops.table.snapshot import load_snapshot
    snapshot = load_snapshot("/data/events")
"""
