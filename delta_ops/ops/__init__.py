"""Maintenance operations, one module each, all of one shape: options -> pure plan -> execute -> result.

The operations, in the registry's order (each module ends with its ``OPERATION``, gathered by
`delta_ops.ops.registry`, from which the CLI, the Dagster plugin, the Airflow provider and
the docs are built):

* `delta_ops.ops.checkpoint`: write a checkpoint every Delta reader accepts.
* `delta_ops.ops.cleanup`: delete expired log files (Spark's truncated-day cutoff).
* `delta_ops.ops.vacuum`: delete data files no retained version needs.
* `delta_ops.ops.row_tracking` (``enable_row_tracking``): enable row tracking with a
  resumable backfill.
* `delta_ops.ops.purge`: rewrite files without the rows their deletion vectors delete.
* `delta_ops.ops.compact`: bin-pack small files (OPTIMIZE), or cluster them
  (`delta_ops.ops.cluster`: ZORDER BY, liquid clustering).
* `delta_ops.ops.cluster_by`: set or change the clustering columns.
* `delta_ops.ops.repair`: remove live files that storage no longer has (FSCK).
* `delta_ops.ops.restore`: make the latest version read as an older one.
* `delta_ops.ops.checksum`: write a version's checksum, or check the one it has.
* `delta_ops.ops.drop_feature`: take a table feature out of the protocol.
* `delta_ops.ops.recompute_stats`: compute missing or short file statistics.

No operation imports another (an import-linter contract in pyproject.toml says so; compaction's
clustering mode, `delta_ops.ops.cluster`, is compact's alone). What several of them need is a
module of its own: `delta_ops.ops.checkpoint_writer` (a checkpoint written: the checkpoint
operation, drop-feature's barrier checkpoints), `delta_ops.ops.log_cleanup` (expired log
files: cleanup, drop-feature's history truncation), `delta_ops.ops.dv_purge` (files rewritten
without their deleted rows: purge, drop-feature's deletion-vector removal), and below the
operations `delta_ops.layout.clustering` (a table's clustering) and
`delta_ops.table.file_paths` (the log's paths as storage keys).

What they share besides: `delta_ops.ops.operation` (what an operation is: typed options, plan,
execute, describe), `delta_ops.ops.engines` (where heavy work runs), `delta_ops.ops.rewrite`
(purge's and compaction's file rewriting), `delta_ops.ops.write_options` (the codec and
row-group size their files are written with), `delta_ops.ops.leftovers` (files of crashed
writes), `delta_ops.ops.progress` and `delta_ops.ops.results`; and `delta_ops.ops.registry`,
which gathers the operations for the front ends.

What only the front ends use (a run recorded in the history, health, what is due, the commit
probe, the fleet planner, inspect, table names, failure notices) is `delta_ops.service`, a
package above this one.

For example:

    from delta_ops.ops.vacuum import plan_vacuum, execute_vacuum
    plan = plan_vacuum(load_snapshot(path), now_ms=now)
    result = execute_vacuum(plan)
"""
