"""One Airflow operator per delta-ops operation, written from the operation registry.

The CLI's subcommands and Dagster's jobs come from `delta_ops.ops.registry`; so do these
operators, one class per operation, named after it: ``DeltaCheckpointOperator``,
``DeltaCleanupOperator``, ``DeltaVacuumOperator``, ``DeltaEnableRowTrackingOperator``,
``DeltaPurgeOperator``, ``DeltaCompactOperator``, and one for every operation added later
(`OPERATORS` maps each operation's name to its class). The classes are Python source written
from the registry and checked in (`delta_ops.airflow.operator_classes`, by
`delta_ops.airflow.operator_code`; a test fails while it is stale), so type checkers and IDEs
see each one and its arguments: one typed keyword per option, its default the registry's, a
docstring listing them, Airflow's own keywords typed too (``mypy --strict`` refuses
``DeltaVacuumOperator(retension="7d")``). All of them run on `DeltaOperationOperator`
(`delta_ops.airflow.operator_base`). An operation registered after import
(`Registry.extend`: a plugin's) gets a class made at run time by `operator_for`, its options
checked when it is built but not typed. Each takes:

* ``table``: the table's path or URL; ``delta_ops_conn_id`` and ``storage_options`` for an
  object store (`delta_ops.airflow.hook`; given options win over the connection's);
* the operation's options by their names, as the CLI's flags and Dagster's config take them
  (``retention="7d"``, ``force=True``, ``target_size="256MB"``, ``engine="spark"``), parsed by
  the same code: a bad value fails the DAG's import in one line naming the operation and the
  argument (``vacuum: retention: '30' is not a duration ...``), and a templated one
  (``"{{ params.retention }}"``) when the task runs, recorded in the operation history as a
  failed run. A misspelled argument fails the import in one line too, with the closest name
  and the operation's options (not Airflow's ``TypeError`` listing the kwargs). The CLI's own
  conveniences (``--now``) are not offered, as in Dagster;
* ``engine="spark"`` with ``spark_conn_id`` (`delta_ops.airflow.engines`), ``version`` for the
  operations that act on a chosen version (checkpoint: the CLI's ``--version``), ``dry_run``;
* ``deferrable=True`` (with ``engine="spark"``): the run is a Spark job of its own and the task
  defers while it works, holding no worker slot (`delta_ops.airflow.spark_jobs`, which says
  its limits; ``job_folder`` where the job's outcome and log go).

What a run does:

* plans, and logs the plan as ``delta-ops <op> --dry-run`` prints it, listing at most
  ``max_listed`` files (a vacuum's plan has a line per file);
* skips the task (``AirflowSkipException``, the plan's reason) when there is nothing to do, so
  a run's grid shows real work only;
* executes (not with ``dry_run=True``: then the plan is the result), logging progress of long
  steps every ``progress_every_seconds``, then what it did (at most ``max_listed`` files);
* returns the result as plain data (`delta_ops.ops.results.to_data`, the CLI's ``--json``): the
  task's XCom, and the ``extra`` of an event on each of the task's outlet assets. Lists longer
  than ``max_listed`` (1000: a vacuum's deleted paths) are cut to their first entries and named
  under ``truncated``; their counts stay whole;
* fails without retrying on a delta-ops error that retrying cannot fix (a bad value, a feature
  the table's protocol refuses: ``AirflowFailException`` naming the table and operation), and
  lets a retryable one (a concurrent commit, a store's hiccup) through to the task's
  ``retries``;
* reports its table to OpenLineage as input and output dataset, with the operation, the
  versions before and after, files and bytes (`delta_ops.airflow.lineage`), when the
  OpenLineage provider is installed;
* when the task is killed (``on_kill``: marked failed, cleared, timed out), cancels its Spark
  jobs and stops at once with ``AirflowTaskTerminated``. Every operation writes in an order
  where stopping at any point leaves a table every reader reads, and running it again
  finishes the work (see the guarantees page).

Example (a DAG file):

    from delta_ops.airflow.operators import DeltaVacuumOperator

    DeltaVacuumOperator(task_id="vacuum_events", table="s3://lake/events",
                        delta_ops_conn_id="lake_s3", retention="7d", retries=3)
"""

from __future__ import annotations

from delta_ops.airflow import operator_classes
from delta_ops.airflow.operator_base import (
    MAX_LISTED,
    DeltaOperationOperator,
    bounded,
    check_option_names,
    operator_class,
    operator_name,
    operator_options,
    option_names,
)

# every class, typed (their names are in its __all__)
from delta_ops.airflow.operator_classes import *
from delta_ops.airflow.operator_classes import OPERATOR_CLASSES
from delta_ops.errors import InvalidValue
from delta_ops.ops.registry import OPERATIONS

#: every registered operation's operator class, by the operation's name
OPERATORS: dict[str, type[DeltaOperationOperator]] = {
    cls.operation.name: cls for cls in OPERATOR_CLASSES
}


def operator_for(name: str) -> type[DeltaOperationOperator]:
    """The operator of a registered operation, by its name (``drop_feature``), its CLI
    spelling (``drop-feature``) or a name it had before (``log_cleanup``, deprecated)."""
    try:
        canonical = OPERATIONS.canonical(name)
    except InvalidValue:
        known = ", ".join(sorted(OPERATIONS))
        raise InvalidValue(f"unknown operation {name!r}; known: {known}") from None
    made = OPERATORS.get(canonical)
    if made is None:  # registered after this module was imported (`Registry.extend`)
        made = OPERATORS[canonical] = operator_class(OPERATIONS[canonical])
        globals()[made.__name__] = made
    return made


__all__ = [
    "MAX_LISTED",
    "OPERATORS",
    "DeltaOperationOperator",
    "bounded",
    "check_option_names",
    "operator_for",
    "operator_name",
    "operator_options",
    "option_names",
]
__all__ += operator_classes.__all__
