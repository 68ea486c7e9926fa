"""delta-ops for Airflow: the maintenance operations as an Airflow provider (extra `airflow`).

Install ``pip install 'delta-ops[airflow]'`` (Airflow 3, its task SDK); Airflow finds the
provider through the package's ``apache_airflow_provider`` entry point
(`delta_ops.airflow.provider`), so ``airflow providers list`` shows it and the connection type
``delta_ops`` appears in the UI.

The modules, each one concept:

* `delta_ops.airflow.operators`: one operator per registered operation (``DeltaVacuumOperator``,
  ``DeltaCheckpointOperator``, ...), written from `delta_ops.ops.registry` as the CLI's
  subcommands and Dagster's jobs are: typed classes checked in
  (`delta_ops.airflow.operator_classes`, by `delta_ops.airflow.operator_code`) on
  `delta_ops.airflow.operator_base`;
* `delta_ops.airflow.hook`: Airflow connections (AWS, Azure, Google, or a ``delta_ops`` one
  holding storage options) turned into storage options, so secrets stay in Airflow;
* `delta_ops.airflow.engines`: the engine an operator names (``engine="spark"`` with a Spark
  connection);
* `delta_ops.airflow.triggers` and `delta_ops.airflow.sensors`: waiting for commits to pile
  up, deferrable, and an event trigger for an ``AssetWatcher``;
* `delta_ops.airflow.tables`, `delta_ops.airflow.dags` and `delta_ops.airflow.alerts`: the DAG
  factory that mirrors Dagster's `build_delta_maintenance_defs`, and its failure alerts.

Example (a DAG file):

    from delta_ops.airflow.dags import build_delta_maintenance_dag

    dag = build_delta_maintenance_dag("/data/warehouse", name="lake")

This package imports nothing from Airflow itself (Airflow imports it to read the provider's
description); its modules do.
"""

from importlib.util import find_spec

from delta_ops.errors import MissingExtra

if find_spec("airflow") is None:
    raise MissingExtra("airflow", "delta_ops.airflow")
