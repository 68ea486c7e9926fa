"""The table: a snapshot to read from and a transaction to commit through.

* `delta_ops.table.snapshot`: a table's reconciled state at one version (or only its
  protocol and metadata, a `TableHead`).
* `delta_ops.table.commit_times`: when each commit happened; the version at a time.
* `delta_ops.table.scan`: a snapshot's rows as Arrow, file by file.
* `delta_ops.table.deletion_vector_check`: live deletion vectors against their files'
  row counts (a corruption alarm).
* `delta_ops.table.transaction`: optimistic commits with conflict checks.
* `delta_ops.table.remove_lines`: `remove` actions encoded straight from the file state.
* `delta_ops.table.new_table`: the protocol and metadata of a table's first commit.
* `delta_ops.table.write_target`: how new rows must be laid out for a table.
* `delta_ops.table.writer`: parquet data files plus a commit with their stats.
* `delta_ops.table.parquet_bytes`: a parquet file held in memory, decoded.

For example:

    from delta_ops.table.snapshot import load_snapshot
    snapshot = load_snapshot("/data/events")
"""
