"""What the front ends share above the operations: running one and recording it, deciding
which tables need what, and what a user is shown.

The CLI, the Dagster plugin and the Airflow provider build on `delta_ops.ops` (the operations,
independent of each other, and their registry) through these modules; no operation imports
them:

* `delta_ops.service.runs`: one run of an operation (load, plan, execute, record), recorded in
  `delta_ops.service.history` (the operation history, a Delta table).
* `delta_ops.service.health` (what a table needs, asking the operations' planners),
  `delta_ops.service.due` (when an action is due), `delta_ops.service.probe` (a table's new
  commits, for sensors) and `delta_ops.service.fleet` (which tables of a lake to visit).
* `delta_ops.service.inspect` (what ``delta-ops inspect`` prints),
  `delta_ops.service.table_names` (unique names for the orchestrators' tables) and
  `delta_ops.service.failure_notice` (the line a failed run is reported with).

For example:

    from delta_ops.service.runs import run_operation
    from delta_ops.service.health import health
"""
