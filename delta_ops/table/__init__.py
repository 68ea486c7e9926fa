"""The table: a snapshot to read from and a transaction to commit through.

* :mod:`~delta_ops.table.snapshot`: a table's reconciled state at one version (or only its
  protocol and metadata, a `TableHead`).
* :mod:`~delta_ops.table.commit_times`: when each commit happened; the version at a time.
* :mod:`~delta_ops.table.scan`: a snapshot's rows as Arrow, file by file.
* :mod:`~delta_ops.table.deletion_vector_check`: live deletion vectors against their files'
  row counts (a corruption alarm).
* :mod:`~delta_ops.table.transaction`: optimistic commits with conflict checks.
* :mod:`~delta_ops.table.remove_lines`: `remove` actions encoded straight from the file state.
* :mod:`~delta_ops.table.new_table`: the protocol and metadata of a table's first commit.
* :mod:`~delta_ops.table.write_target`: how new rows must be laid out for a table.
* :mod:`~delta_ops.table.writer`: parquet data files plus a commit with their stats.
* :mod:`~delta_ops.table.parquet_bytes`: a parquet file held in memory, decoded.

Example::

    from delta_ops.table.snapshot import load_snapshot
    snapshot = load_snapshot("/data/events")
"""
