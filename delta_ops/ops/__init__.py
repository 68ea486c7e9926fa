"""Maintenance operations, one module each, all of one shape: options -> pure plan -> execute -> result.

The operations (each module ends with its ``OPERATION``, gathered by
:mod:`~delta_ops.ops.registry`, from which the CLI and the Dagster plugin are built):

* :mod:`~delta_ops.ops.checkpoint`: write a checkpoint every Delta reader accepts.
* :mod:`~delta_ops.ops.cleanup`: delete expired log files (Spark's truncated-day cutoff).
* :mod:`~delta_ops.ops.vacuum`: delete data files no retained version needs.
* :mod:`~delta_ops.ops.row_tracking`: enable row tracking with a resumable backfill.
* :mod:`~delta_ops.ops.purge`: rewrite files without the rows their deletion vectors delete.
* :mod:`~delta_ops.ops.compact`: bin-pack small files (OPTIMIZE).

What they share: :mod:`~delta_ops.ops.operation` (what an operation is: options, plan,
describe), :mod:`~delta_ops.ops.engines` (where heavy work runs), :mod:`~delta_ops.ops.rewrite`
(purge's and compaction's file rewriting), :mod:`~delta_ops.ops.write_options` (the codec and
row-group size their files are written with), :mod:`~delta_ops.ops.leftovers` (files of crashed
writes), :mod:`~delta_ops.ops.progress` and :mod:`~delta_ops.ops.results`. Read-only:
:mod:`~delta_ops.ops.probe` (new commits, for sensors), :mod:`~delta_ops.ops.health` (what a
table needs) and :mod:`~delta_ops.ops.inspect` (what `delta-ops inspect` prints).

Example::

    from delta_ops.ops.vacuum import plan_vacuum, execute_vacuum
    plan = plan_vacuum(load_snapshot(path), now_ms=now)
    result = execute_vacuum(plan)
"""
