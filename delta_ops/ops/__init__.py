"""Maintenance operations, one module each, all of one shape: options -> pure plan -> execute -> result.

* :mod:`~delta_ops.ops.inspect`: a table's state and health (read only).
* :mod:`~delta_ops.ops.checkpoint`: write a checkpoint every Delta reader accepts.
* :mod:`~delta_ops.ops.cleanup`: delete expired log files (Spark's truncated-day cutoff).
* :mod:`~delta_ops.ops.vacuum`: delete data files no retained version needs.
* :mod:`~delta_ops.ops.row_tracking`: enable row tracking with a resumable backfill.
* :mod:`~delta_ops.ops.probe`: cheap checks for sensors and schedules.

Example::

    from delta_ops.ops.vacuum import plan_vacuum, execute_vacuum
    plan = plan_vacuum(load_snapshot(path), now_ms=now)
    result = execute_vacuum(plan)
"""
