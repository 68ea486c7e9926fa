"""The operator classes, one per operation of the registry: written by a generator, not by hand.

Edit the registry (`delta_ops.ops.registry`, an operation's options) or the generator
(`delta_ops.airflow.operator_code`), then rewrite this file:

    python -m delta_ops.airflow.operator_code delta_ops/airflow/operator_classes.py

`tests/airflow/test_operator_code.py` fails while it is not current. DAG files import the
classes from `delta_ops.airflow.operators` (their `__module__`), which holds them all.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, Unpack

from airflow.sdk import XComArg

from delta_ops.airflow.operator_base import (
    PUBLIC_MODULE,
    BaseOperatorArguments,
    DeltaOperationOperator,
)
from delta_ops.ops.registry import OPERATIONS


class DeltaCheckpointOperator(DeltaOperationOperator):
    """Write a checkpoint (classic, V2 by table policy, or multi-part): `delta-ops checkpoint` run
    by an Airflow task.

    What a run does, its XCom and asset events: `delta_ops.airflow.operators`; the how-to page:
    docs/airflow/operators/checkpoint.md. Written from the registry by
    `delta_ops.airflow.operator_code`.

    Arguments, all keywords (an option's kind and accepted forms, then its meaning):

    - `task_id`: the task's id (BaseOperator's, as are `retries`, `pool`, `outlets`, ...)
    - `table`: the table's path or URL (templated)
    - `parts` (count: a whole number): write a multi-part checkpoint with this many parts
    - `engine` (choice: local | spark; default `local`): where the heavy I/O runs: local (this
      process), or spark (executors)
    - `version` (version: a version number, 0 or more): the version to act on (default: the latest)
    - `delta_ops_conn_id`: an Airflow connection holding the storage options (the hook's types)
    - `storage_options`: options over the connection's (templated; shown as JSON in the UI)
    - `dry_run`: plan only: log and return the plan, change nothing
    - `spark_conn_id`: the Spark connection when `engine="spark"`
    - `table_name`: the table's name in logs, alerts and the history (default: the path's end)
    - `max_listed`: lists longer than this are cut in the log, the XCom and asset events
    - `progress_every_seconds`: how often a long step logs its progress
    - `history`: record the run in the operation history (`_delta_ops_history`)
    - `history_location`: where the history is, if not beside the table
    - `deferrable`: with `engine="spark"`: run as a Spark job of its own, the task deferred
    - `job_folder`: where a deferred run's job writes its outcome and log

    Templated (parsed when the task runs): `table`, `storage_options`, `version`, `parts`, `engine`.
    A value that is not templated is parsed now: a bad one, or a misspelled keyword, fails the DAG's
    import in one line naming `checkpoint`.
    """

    __module__ = PUBLIC_MODULE
    operation = OPERATIONS["checkpoint"]
    template_fields: Sequence[str] = (
        "table",
        "storage_options",
        "version",
        "parts",
        "engine",
    )

    def __init__(
        self,
        *,
        table: str,
        parts: int | str | XComArg | None = None,
        engine: str | XComArg = "local",
        version: int | str | XComArg | None = None,
        delta_ops_conn_id: str | None = None,
        storage_options: Mapping[str, Any] | None = None,
        dry_run: bool = False,
        spark_conn_id: str | None = None,
        table_name: str | None = None,
        max_listed: int = 1000,
        progress_every_seconds: float = 10.0,
        history: bool = True,
        history_location: str | None = None,
        deferrable: bool = False,
        job_folder: str | None = None,
        **kwargs: Unpack[BaseOperatorArguments],
    ) -> None:
        super().__init__(
            table=table,
            parts=parts,
            engine=engine,
            version=version,
            delta_ops_conn_id=delta_ops_conn_id,
            storage_options=storage_options,
            dry_run=dry_run,
            spark_conn_id=spark_conn_id,
            table_name=table_name,
            max_listed=max_listed,
            progress_every_seconds=progress_every_seconds,
            history=history,
            history_location=history_location,
            deferrable=deferrable,
            job_folder=job_folder,
            **kwargs,
        )


class DeltaCleanupOperator(DeltaOperationOperator):
    """Delete expired log files (Spark's truncated-day cutoff, whole segments): `delta-ops cleanup`
    run by an Airflow task.

    What a run does, its XCom and asset events: `delta_ops.airflow.operators`; the how-to page:
    docs/airflow/operators/cleanup.md. Written from the registry by
    `delta_ops.airflow.operator_code`.

    Arguments, all keywords (an option's kind and accepted forms, then its meaning):

    - `task_id`: the task's id (BaseOperator's, as are `retries`, `pool`, `outlets`, ...)
    - `table`: the table's path or URL (templated)
    - `retention` (duration: e.g. 7d, 168h, P7D, '7 days'): log retention (default:
      delta.logRetentionDuration)
    - `delta_ops_conn_id`: an Airflow connection holding the storage options (the hook's types)
    - `storage_options`: options over the connection's (templated; shown as JSON in the UI)
    - `dry_run`: plan only: log and return the plan, change nothing
    - `engine`: only `local`: this operation runs in the task's process
    - `spark_conn_id`: the Spark connection when `engine="spark"`
    - `table_name`: the table's name in logs, alerts and the history (default: the path's end)
    - `max_listed`: lists longer than this are cut in the log, the XCom and asset events
    - `progress_every_seconds`: how often a long step logs its progress
    - `history`: record the run in the operation history (`_delta_ops_history`)
    - `history_location`: where the history is, if not beside the table
    - `deferrable`: with `engine="spark"`: run as a Spark job of its own, the task deferred
    - `job_folder`: where a deferred run's job writes its outcome and log

    Templated (parsed when the task runs): `table`, `storage_options`, `retention`. A value that is
    not templated is parsed now: a bad one, or a misspelled keyword, fails the DAG's import in one
    line naming `cleanup`.
    """

    __module__ = PUBLIC_MODULE
    operation = OPERATIONS["cleanup"]
    template_fields: Sequence[str] = (
        "table",
        "storage_options",
        "retention",
    )

    def __init__(
        self,
        *,
        table: str,
        retention: str | int | XComArg | None = None,
        delta_ops_conn_id: str | None = None,
        storage_options: Mapping[str, Any] | None = None,
        dry_run: bool = False,
        engine: Literal["local"] = "local",
        spark_conn_id: str | None = None,
        table_name: str | None = None,
        max_listed: int = 1000,
        progress_every_seconds: float = 10.0,
        history: bool = True,
        history_location: str | None = None,
        deferrable: bool = False,
        job_folder: str | None = None,
        **kwargs: Unpack[BaseOperatorArguments],
    ) -> None:
        super().__init__(
            table=table,
            retention=retention,
            delta_ops_conn_id=delta_ops_conn_id,
            storage_options=storage_options,
            dry_run=dry_run,
            engine=engine,
            spark_conn_id=spark_conn_id,
            table_name=table_name,
            max_listed=max_listed,
            progress_every_seconds=progress_every_seconds,
            history=history,
            history_location=history_location,
            deferrable=deferrable,
            job_folder=job_folder,
            **kwargs,
        )


class DeltaVacuumOperator(DeltaOperationOperator):
    """Delete data files no retained version needs: `delta-ops vacuum` run by an Airflow task.

    What a run does, its XCom and asset events: `delta_ops.airflow.operators`; the how-to page:
    docs/airflow/operators/vacuum.md. Written from the registry by
    `delta_ops.airflow.operator_code`.

    Arguments, all keywords (an option's kind and accepted forms, then its meaning):

    - `task_id`: the task's id (BaseOperator's, as are `retries`, `pool`, `outlets`, ...)
    - `table`: the table's path or URL (templated)
    - `retention` (duration: e.g. 7d, 168h, P7D, '7 days'): delete files unneeded for this long
      (default: delta.deletedFileRetentionDuration)
    - `mode` (choice: full | lite; default `full`): full (list the table) or lite (the log's
      removes)
    - `force` (flag: true or false; default `False`): allow a retention shorter than the table's
    - `engine` (choice: local | spark; default `local`): where the heavy I/O runs: local (this
      process), or spark (executors)
    - `delta_ops_conn_id`: an Airflow connection holding the storage options (the hook's types)
    - `storage_options`: options over the connection's (templated; shown as JSON in the UI)
    - `dry_run`: plan only: log and return the plan, change nothing
    - `spark_conn_id`: the Spark connection when `engine="spark"`
    - `table_name`: the table's name in logs, alerts and the history (default: the path's end)
    - `max_listed`: lists longer than this are cut in the log, the XCom and asset events
    - `progress_every_seconds`: how often a long step logs its progress
    - `history`: record the run in the operation history (`_delta_ops_history`)
    - `history_location`: where the history is, if not beside the table
    - `deferrable`: with `engine="spark"`: run as a Spark job of its own, the task deferred
    - `job_folder`: where a deferred run's job writes its outcome and log

    Templated (parsed when the task runs): `table`, `storage_options`, `retention`, `mode`, `force`,
    `engine`. A value that is not templated is parsed now: a bad one, or a misspelled keyword, fails
    the DAG's import in one line naming `vacuum`.
    """

    __module__ = PUBLIC_MODULE
    operation = OPERATIONS["vacuum"]
    template_fields: Sequence[str] = (
        "table",
        "storage_options",
        "retention",
        "mode",
        "force",
        "engine",
    )

    def __init__(
        self,
        *,
        table: str,
        retention: str | int | XComArg | None = None,
        mode: str | XComArg = "full",
        force: bool | str | XComArg = False,
        engine: str | XComArg = "local",
        delta_ops_conn_id: str | None = None,
        storage_options: Mapping[str, Any] | None = None,
        dry_run: bool = False,
        spark_conn_id: str | None = None,
        table_name: str | None = None,
        max_listed: int = 1000,
        progress_every_seconds: float = 10.0,
        history: bool = True,
        history_location: str | None = None,
        deferrable: bool = False,
        job_folder: str | None = None,
        **kwargs: Unpack[BaseOperatorArguments],
    ) -> None:
        super().__init__(
            table=table,
            retention=retention,
            mode=mode,
            force=force,
            engine=engine,
            delta_ops_conn_id=delta_ops_conn_id,
            storage_options=storage_options,
            dry_run=dry_run,
            spark_conn_id=spark_conn_id,
            table_name=table_name,
            max_listed=max_listed,
            progress_every_seconds=progress_every_seconds,
            history=history,
            history_location=history_location,
            deferrable=deferrable,
            job_folder=job_folder,
            **kwargs,
        )


class DeltaEnableRowTrackingOperator(DeltaOperationOperator):
    """Upgrade the protocol, backfill row ids, enable row tracking: `delta-ops enable-row-tracking`
    run by an Airflow task.

    What a run does, its XCom and asset events: `delta_ops.airflow.operators`; the how-to page:
    docs/airflow/operators/enable_row_tracking.md. Written from the registry by
    `delta_ops.airflow.operator_code`.

    Arguments, all keywords (an option's kind and accepted forms, then its meaning):

    - `task_id`: the task's id (BaseOperator's, as are `retries`, `pool`, `outlets`, ...)
    - `table`: the table's path or URL (templated)
    - `batch_files` (count: a whole number; default `22000`): files per backfill commit
    - `engine` (choice: local | spark; default `local`): where the heavy I/O runs: local (this
      process), or spark (executors)
    - `delta_ops_conn_id`: an Airflow connection holding the storage options (the hook's types)
    - `storage_options`: options over the connection's (templated; shown as JSON in the UI)
    - `dry_run`: plan only: log and return the plan, change nothing
    - `spark_conn_id`: the Spark connection when `engine="spark"`
    - `table_name`: the table's name in logs, alerts and the history (default: the path's end)
    - `max_listed`: lists longer than this are cut in the log, the XCom and asset events
    - `progress_every_seconds`: how often a long step logs its progress
    - `history`: record the run in the operation history (`_delta_ops_history`)
    - `history_location`: where the history is, if not beside the table
    - `deferrable`: with `engine="spark"`: run as a Spark job of its own, the task deferred
    - `job_folder`: where a deferred run's job writes its outcome and log

    Templated (parsed when the task runs): `table`, `storage_options`, `batch_files`, `engine`. A
    value that is not templated is parsed now: a bad one, or a misspelled keyword, fails the DAG's
    import in one line naming `enable_row_tracking`.
    """

    __module__ = PUBLIC_MODULE
    operation = OPERATIONS["enable_row_tracking"]
    template_fields: Sequence[str] = (
        "table",
        "storage_options",
        "batch_files",
        "engine",
    )

    def __init__(
        self,
        *,
        table: str,
        batch_files: int | str | XComArg = 22000,
        engine: str | XComArg = "local",
        delta_ops_conn_id: str | None = None,
        storage_options: Mapping[str, Any] | None = None,
        dry_run: bool = False,
        spark_conn_id: str | None = None,
        table_name: str | None = None,
        max_listed: int = 1000,
        progress_every_seconds: float = 10.0,
        history: bool = True,
        history_location: str | None = None,
        deferrable: bool = False,
        job_folder: str | None = None,
        **kwargs: Unpack[BaseOperatorArguments],
    ) -> None:
        super().__init__(
            table=table,
            batch_files=batch_files,
            engine=engine,
            delta_ops_conn_id=delta_ops_conn_id,
            storage_options=storage_options,
            dry_run=dry_run,
            spark_conn_id=spark_conn_id,
            table_name=table_name,
            max_listed=max_listed,
            progress_every_seconds=progress_every_seconds,
            history=history,
            history_location=history_location,
            deferrable=deferrable,
            job_folder=job_folder,
            **kwargs,
        )


class DeltaPurgeOperator(DeltaOperationOperator):
    """Rewrite files with deletion vectors without their deleted rows (REORG ... PURGE): `delta-ops
    purge` run by an Airflow task.

    What a run does, its XCom and asset events: `delta_ops.airflow.operators`; the how-to page:
    docs/airflow/operators/purge.md. Written from the registry by `delta_ops.airflow.operator_code`.

    Arguments, all keywords (an option's kind and accepted forms, then its meaning):

    - `task_id`: the task's id (BaseOperator's, as are `retries`, `pool`, `outlets`, ...)
    - `table`: the table's path or URL (templated)
    - `min_deleted_ratio` (ratio: e.g. 0.1 or 10%; default `0.0`): only files with at least this
      share of rows deleted
    - `compression` (choice: zstd | snappy | gzip | lz4 | uncompressed; default `zstd`): codec of
      the parquet files written
    - `row_group_size` (size: e.g. 128MB, 1GB, or bytes: 4194304; default `64MB`): row groups of the
      files written hold at most about this much data (in memory)
    - `engine` (choice: local | spark; default `local`): where the heavy I/O runs: local (this
      process), or spark (executors)
    - `delta_ops_conn_id`: an Airflow connection holding the storage options (the hook's types)
    - `storage_options`: options over the connection's (templated; shown as JSON in the UI)
    - `dry_run`: plan only: log and return the plan, change nothing
    - `spark_conn_id`: the Spark connection when `engine="spark"`
    - `table_name`: the table's name in logs, alerts and the history (default: the path's end)
    - `max_listed`: lists longer than this are cut in the log, the XCom and asset events
    - `progress_every_seconds`: how often a long step logs its progress
    - `history`: record the run in the operation history (`_delta_ops_history`)
    - `history_location`: where the history is, if not beside the table
    - `deferrable`: with `engine="spark"`: run as a Spark job of its own, the task deferred
    - `job_folder`: where a deferred run's job writes its outcome and log

    Templated (parsed when the task runs): `table`, `storage_options`, `min_deleted_ratio`,
    `compression`, `row_group_size`, `engine`. A value that is not templated is parsed now: a bad
    one, or a misspelled keyword, fails the DAG's import in one line naming `purge`.
    """

    __module__ = PUBLIC_MODULE
    operation = OPERATIONS["purge"]
    template_fields: Sequence[str] = (
        "table",
        "storage_options",
        "min_deleted_ratio",
        "compression",
        "row_group_size",
        "engine",
    )

    def __init__(
        self,
        *,
        table: str,
        min_deleted_ratio: float | str | XComArg = 0.0,
        compression: str | XComArg = "zstd",
        row_group_size: int | str | XComArg = "64MB",
        engine: str | XComArg = "local",
        delta_ops_conn_id: str | None = None,
        storage_options: Mapping[str, Any] | None = None,
        dry_run: bool = False,
        spark_conn_id: str | None = None,
        table_name: str | None = None,
        max_listed: int = 1000,
        progress_every_seconds: float = 10.0,
        history: bool = True,
        history_location: str | None = None,
        deferrable: bool = False,
        job_folder: str | None = None,
        **kwargs: Unpack[BaseOperatorArguments],
    ) -> None:
        super().__init__(
            table=table,
            min_deleted_ratio=min_deleted_ratio,
            compression=compression,
            row_group_size=row_group_size,
            engine=engine,
            delta_ops_conn_id=delta_ops_conn_id,
            storage_options=storage_options,
            dry_run=dry_run,
            spark_conn_id=spark_conn_id,
            table_name=table_name,
            max_listed=max_listed,
            progress_every_seconds=progress_every_seconds,
            history=history,
            history_location=history_location,
            deferrable=deferrable,
            job_folder=job_folder,
            **kwargs,
        )


class DeltaCompactOperator(DeltaOperationOperator):
    """Bin-pack small files of each partition into files near a target size (OPTIMIZE); with
    --zorder-by, or on a clustered table, cluster the rows (OPTIMIZE ZORDER BY, liquid): `delta-ops
    compact` run by an Airflow task.

    What a run does, its XCom and asset events: `delta_ops.airflow.operators`; the how-to page:
    docs/airflow/operators/compact.md. Written from the registry by
    `delta_ops.airflow.operator_code`.

    Arguments, all keywords (an option's kind and accepted forms, then its meaning):

    - `task_id`: the task's id (BaseOperator's, as are `retries`, `pool`, `outlets`, ...)
    - `table`: the table's path or URL (templated)
    - `target_size` (size: e.g. 128MB, 1GB, or bytes: 4194304; default `128MB`): size of the files
      to write
    - `where` (text: e.g. day=2026-11-01): only partitions this predicate on partition columns
      selects, e.g. "day >= '2026-11-01'" or day=2026-11-01,region=eu
    - `zorder_by` (text: e.g. a,b): Z-order the rows of each partition by these data columns
      (OPTIMIZE ZORDER BY); a clustered table is clustered by its own columns without it
    - `full` (flag: true or false; default `False`): cluster every file again, clustered or not
      (OPTIMIZE FULL)
    - `min_cube_size` (size: e.g. 128MB, 1GB, or bytes: 4194304; default `100GB`): clustering: a
      cube of files clustered together this big takes no new rows
    - `compression` (choice: zstd | snappy | gzip | lz4 | uncompressed; default `zstd`): codec of
      the parquet files written
    - `row_group_size` (size: e.g. 128MB, 1GB, or bytes: 4194304; default `64MB`): row groups of the
      files written hold at most about this much data (in memory)
    - `engine` (choice: local | spark; default `local`): where the heavy I/O runs: local (this
      process), or spark (executors)
    - `delta_ops_conn_id`: an Airflow connection holding the storage options (the hook's types)
    - `storage_options`: options over the connection's (templated; shown as JSON in the UI)
    - `dry_run`: plan only: log and return the plan, change nothing
    - `spark_conn_id`: the Spark connection when `engine="spark"`
    - `table_name`: the table's name in logs, alerts and the history (default: the path's end)
    - `max_listed`: lists longer than this are cut in the log, the XCom and asset events
    - `progress_every_seconds`: how often a long step logs its progress
    - `history`: record the run in the operation history (`_delta_ops_history`)
    - `history_location`: where the history is, if not beside the table
    - `deferrable`: with `engine="spark"`: run as a Spark job of its own, the task deferred
    - `job_folder`: where a deferred run's job writes its outcome and log

    Templated (parsed when the task runs): `table`, `storage_options`, `target_size`, `where`,
    `zorder_by`, `full`, `min_cube_size`, `compression`, `row_group_size`, `engine`. A value that is
    not templated is parsed now: a bad one, or a misspelled keyword, fails the DAG's import in one
    line naming `compact`.
    """

    __module__ = PUBLIC_MODULE
    operation = OPERATIONS["compact"]
    template_fields: Sequence[str] = (
        "table",
        "storage_options",
        "target_size",
        "where",
        "zorder_by",
        "full",
        "min_cube_size",
        "compression",
        "row_group_size",
        "engine",
    )

    def __init__(
        self,
        *,
        table: str,
        target_size: int | str | XComArg = "128MB",
        where: str | XComArg | None = None,
        zorder_by: str | XComArg | None = None,
        full: bool | str | XComArg = False,
        min_cube_size: int | str | XComArg = "100GB",
        compression: str | XComArg = "zstd",
        row_group_size: int | str | XComArg = "64MB",
        engine: str | XComArg = "local",
        delta_ops_conn_id: str | None = None,
        storage_options: Mapping[str, Any] | None = None,
        dry_run: bool = False,
        spark_conn_id: str | None = None,
        table_name: str | None = None,
        max_listed: int = 1000,
        progress_every_seconds: float = 10.0,
        history: bool = True,
        history_location: str | None = None,
        deferrable: bool = False,
        job_folder: str | None = None,
        **kwargs: Unpack[BaseOperatorArguments],
    ) -> None:
        super().__init__(
            table=table,
            target_size=target_size,
            where=where,
            zorder_by=zorder_by,
            full=full,
            min_cube_size=min_cube_size,
            compression=compression,
            row_group_size=row_group_size,
            engine=engine,
            delta_ops_conn_id=delta_ops_conn_id,
            storage_options=storage_options,
            dry_run=dry_run,
            spark_conn_id=spark_conn_id,
            table_name=table_name,
            max_listed=max_listed,
            progress_every_seconds=progress_every_seconds,
            history=history,
            history_location=history_location,
            deferrable=deferrable,
            job_folder=job_folder,
            **kwargs,
        )


class DeltaClusterByOperator(DeltaOperationOperator):
    """Set or change the clustering columns (ALTER TABLE ... CLUSTER BY); compact then clusters the
    rows by them: `delta-ops cluster-by` run by an Airflow task.

    What a run does, its XCom and asset events: `delta_ops.airflow.operators`; the how-to page:
    docs/airflow/operators/cluster_by.md. Written from the registry by
    `delta_ops.airflow.operator_code`.

    Arguments, all keywords (an option's kind and accepted forms, then its meaning):

    - `task_id`: the task's id (BaseOperator's, as are `retries`, `pool`, `outlets`, ...)
    - `table`: the table's path or URL (templated)
    - `columns` (text: e.g. a,b or none): the clustering columns, comma-separated, or none
    - `delta_ops_conn_id`: an Airflow connection holding the storage options (the hook's types)
    - `storage_options`: options over the connection's (templated; shown as JSON in the UI)
    - `dry_run`: plan only: log and return the plan, change nothing
    - `engine`: only `local`: this operation runs in the task's process
    - `spark_conn_id`: the Spark connection when `engine="spark"`
    - `table_name`: the table's name in logs, alerts and the history (default: the path's end)
    - `max_listed`: lists longer than this are cut in the log, the XCom and asset events
    - `progress_every_seconds`: how often a long step logs its progress
    - `history`: record the run in the operation history (`_delta_ops_history`)
    - `history_location`: where the history is, if not beside the table
    - `deferrable`: with `engine="spark"`: run as a Spark job of its own, the task deferred
    - `job_folder`: where a deferred run's job writes its outcome and log

    Templated (parsed when the task runs): `table`, `storage_options`, `columns`. A value that is
    not templated is parsed now: a bad one, or a misspelled keyword, fails the DAG's import in one
    line naming `cluster_by`.
    """

    __module__ = PUBLIC_MODULE
    operation = OPERATIONS["cluster_by"]
    template_fields: Sequence[str] = (
        "table",
        "storage_options",
        "columns",
    )

    def __init__(
        self,
        *,
        table: str,
        columns: str | XComArg | None = None,
        delta_ops_conn_id: str | None = None,
        storage_options: Mapping[str, Any] | None = None,
        dry_run: bool = False,
        engine: Literal["local"] = "local",
        spark_conn_id: str | None = None,
        table_name: str | None = None,
        max_listed: int = 1000,
        progress_every_seconds: float = 10.0,
        history: bool = True,
        history_location: str | None = None,
        deferrable: bool = False,
        job_folder: str | None = None,
        **kwargs: Unpack[BaseOperatorArguments],
    ) -> None:
        super().__init__(
            table=table,
            columns=columns,
            delta_ops_conn_id=delta_ops_conn_id,
            storage_options=storage_options,
            dry_run=dry_run,
            engine=engine,
            spark_conn_id=spark_conn_id,
            table_name=table_name,
            max_listed=max_listed,
            progress_every_seconds=progress_every_seconds,
            history=history,
            history_location=history_location,
            deferrable=deferrable,
            job_folder=job_folder,
            **kwargs,
        )


class DeltaRepairOperator(DeltaOperationOperator):
    """Remove live files that storage no longer has from the table (FSCK REPAIR TABLE): `delta-ops
    repair` run by an Airflow task.

    What a run does, its XCom and asset events: `delta_ops.airflow.operators`; the how-to page:
    docs/airflow/operators/repair.md. Written from the registry by
    `delta_ops.airflow.operator_code`.

    Arguments, all keywords (an option's kind and accepted forms, then its meaning):

    - `task_id`: the task's id (BaseOperator's, as are `retries`, `pool`, `outlets`, ...)
    - `table`: the table's path or URL (templated)
    - `max_missing_ratio` (ratio: e.g. 0.1 or 10%; default `0.1`): refuse when more than this share
      of the live files is missing (a wrong path?)
    - `force` (flag: true or false; default `False`): remove them even past --max-missing-ratio
    - `engine` (choice: local | spark; default `local`): where the heavy I/O runs: local (this
      process), or spark (executors)
    - `delta_ops_conn_id`: an Airflow connection holding the storage options (the hook's types)
    - `storage_options`: options over the connection's (templated; shown as JSON in the UI)
    - `dry_run`: plan only: log and return the plan, change nothing
    - `spark_conn_id`: the Spark connection when `engine="spark"`
    - `table_name`: the table's name in logs, alerts and the history (default: the path's end)
    - `max_listed`: lists longer than this are cut in the log, the XCom and asset events
    - `progress_every_seconds`: how often a long step logs its progress
    - `history`: record the run in the operation history (`_delta_ops_history`)
    - `history_location`: where the history is, if not beside the table
    - `deferrable`: with `engine="spark"`: run as a Spark job of its own, the task deferred
    - `job_folder`: where a deferred run's job writes its outcome and log

    Templated (parsed when the task runs): `table`, `storage_options`, `max_missing_ratio`, `force`,
    `engine`. A value that is not templated is parsed now: a bad one, or a misspelled keyword, fails
    the DAG's import in one line naming `repair`.
    """

    __module__ = PUBLIC_MODULE
    operation = OPERATIONS["repair"]
    template_fields: Sequence[str] = (
        "table",
        "storage_options",
        "max_missing_ratio",
        "force",
        "engine",
    )

    def __init__(
        self,
        *,
        table: str,
        max_missing_ratio: float | str | XComArg = 0.1,
        force: bool | str | XComArg = False,
        engine: str | XComArg = "local",
        delta_ops_conn_id: str | None = None,
        storage_options: Mapping[str, Any] | None = None,
        dry_run: bool = False,
        spark_conn_id: str | None = None,
        table_name: str | None = None,
        max_listed: int = 1000,
        progress_every_seconds: float = 10.0,
        history: bool = True,
        history_location: str | None = None,
        deferrable: bool = False,
        job_folder: str | None = None,
        **kwargs: Unpack[BaseOperatorArguments],
    ) -> None:
        super().__init__(
            table=table,
            max_missing_ratio=max_missing_ratio,
            force=force,
            engine=engine,
            delta_ops_conn_id=delta_ops_conn_id,
            storage_options=storage_options,
            dry_run=dry_run,
            spark_conn_id=spark_conn_id,
            table_name=table_name,
            max_listed=max_listed,
            progress_every_seconds=progress_every_seconds,
            history=history,
            history_location=history_location,
            deferrable=deferrable,
            job_folder=job_folder,
            **kwargs,
        )


class DeltaRestoreOperator(DeltaOperationOperator):
    """Make the latest version read as an older one (RESTORE TABLE ... TO VERSION AS OF): `delta-ops
    restore` run by an Airflow task.

    What a run does, its XCom and asset events: `delta_ops.airflow.operators`; the how-to page:
    docs/airflow/operators/restore.md. Written from the registry by
    `delta_ops.airflow.operator_code`.

    Arguments, all keywords (an option's kind and accepted forms, then its meaning):

    - `task_id`: the task's id (BaseOperator's, as are `retries`, `pool`, `outlets`, ...)
    - `table`: the table's path or URL (templated)
    - `version` (version: a version number, 0 or more): the version to restore
    - `timestamp` (time: now, ISO 8601 with a zone, or 1700000000s): restore the version current at
      this time
    - `ignore_missing_files` (flag: true or false; default `False`): restore although some of the
      version's files are gone from storage, leaving them out (the plan lists them and the rows
      lost)
    - `protocol_downgrade_allowed` (flag: true or false; default `False`): restore the version's
      protocol too, dropping the features added since without removing their traces (the plan lists
      the risks)
    - `delta_ops_conn_id`: an Airflow connection holding the storage options (the hook's types)
    - `storage_options`: options over the connection's (templated; shown as JSON in the UI)
    - `dry_run`: plan only: log and return the plan, change nothing
    - `engine`: only `local`: this operation runs in the task's process
    - `spark_conn_id`: the Spark connection when `engine="spark"`
    - `table_name`: the table's name in logs, alerts and the history (default: the path's end)
    - `max_listed`: lists longer than this are cut in the log, the XCom and asset events
    - `progress_every_seconds`: how often a long step logs its progress
    - `history`: record the run in the operation history (`_delta_ops_history`)
    - `history_location`: where the history is, if not beside the table
    - `deferrable`: with `engine="spark"`: run as a Spark job of its own, the task deferred
    - `job_folder`: where a deferred run's job writes its outcome and log

    Templated (parsed when the task runs): `table`, `storage_options`, `version`, `timestamp`,
    `ignore_missing_files`, `protocol_downgrade_allowed`. A value that is not templated is parsed
    now: a bad one, or a misspelled keyword, fails the DAG's import in one line naming `restore`.
    """

    __module__ = PUBLIC_MODULE
    operation = OPERATIONS["restore"]
    template_fields: Sequence[str] = (
        "table",
        "storage_options",
        "version",
        "timestamp",
        "ignore_missing_files",
        "protocol_downgrade_allowed",
    )

    def __init__(
        self,
        *,
        table: str,
        version: int | str | XComArg | None = None,
        timestamp: str | XComArg | None = None,
        ignore_missing_files: bool | str | XComArg = False,
        protocol_downgrade_allowed: bool | str | XComArg = False,
        delta_ops_conn_id: str | None = None,
        storage_options: Mapping[str, Any] | None = None,
        dry_run: bool = False,
        engine: Literal["local"] = "local",
        spark_conn_id: str | None = None,
        table_name: str | None = None,
        max_listed: int = 1000,
        progress_every_seconds: float = 10.0,
        history: bool = True,
        history_location: str | None = None,
        deferrable: bool = False,
        job_folder: str | None = None,
        **kwargs: Unpack[BaseOperatorArguments],
    ) -> None:
        super().__init__(
            table=table,
            version=version,
            timestamp=timestamp,
            ignore_missing_files=ignore_missing_files,
            protocol_downgrade_allowed=protocol_downgrade_allowed,
            delta_ops_conn_id=delta_ops_conn_id,
            storage_options=storage_options,
            dry_run=dry_run,
            engine=engine,
            spark_conn_id=spark_conn_id,
            table_name=table_name,
            max_listed=max_listed,
            progress_every_seconds=progress_every_seconds,
            history=history,
            history_location=history_location,
            deferrable=deferrable,
            job_folder=job_folder,
            **kwargs,
        )


class DeltaChecksumOperator(DeltaOperationOperator):
    """Write a version's checksum (N.crc) when it has none; check the one it has against the log:
    `delta-ops checksum` run by an Airflow task.

    What a run does, its XCom and asset events: `delta_ops.airflow.operators`; the how-to page:
    docs/airflow/operators/checksum.md. Written from the registry by
    `delta_ops.airflow.operator_code`.

    Arguments, all keywords (an option's kind and accepted forms, then its meaning):

    - `task_id`: the task's id (BaseOperator's, as are `retries`, `pool`, `outlets`, ...)
    - `table`: the table's path or URL (templated)
    - `version` (version: a version number, 0 or more): the version to act on (default: the latest)
    - `delta_ops_conn_id`: an Airflow connection holding the storage options (the hook's types)
    - `storage_options`: options over the connection's (templated; shown as JSON in the UI)
    - `dry_run`: plan only: log and return the plan, change nothing
    - `engine`: only `local`: this operation runs in the task's process
    - `spark_conn_id`: the Spark connection when `engine="spark"`
    - `table_name`: the table's name in logs, alerts and the history (default: the path's end)
    - `max_listed`: lists longer than this are cut in the log, the XCom and asset events
    - `progress_every_seconds`: how often a long step logs its progress
    - `history`: record the run in the operation history (`_delta_ops_history`)
    - `history_location`: where the history is, if not beside the table
    - `deferrable`: with `engine="spark"`: run as a Spark job of its own, the task deferred
    - `job_folder`: where a deferred run's job writes its outcome and log

    Templated (parsed when the task runs): `table`, `storage_options`, `version`. A value that is
    not templated is parsed now: a bad one, or a misspelled keyword, fails the DAG's import in one
    line naming `checksum`.
    """

    __module__ = PUBLIC_MODULE
    operation = OPERATIONS["checksum"]
    template_fields: Sequence[str] = (
        "table",
        "storage_options",
        "version",
    )

    def __init__(
        self,
        *,
        table: str,
        version: int | str | XComArg | None = None,
        delta_ops_conn_id: str | None = None,
        storage_options: Mapping[str, Any] | None = None,
        dry_run: bool = False,
        engine: Literal["local"] = "local",
        spark_conn_id: str | None = None,
        table_name: str | None = None,
        max_listed: int = 1000,
        progress_every_seconds: float = 10.0,
        history: bool = True,
        history_location: str | None = None,
        deferrable: bool = False,
        job_folder: str | None = None,
        **kwargs: Unpack[BaseOperatorArguments],
    ) -> None:
        super().__init__(
            table=table,
            version=version,
            delta_ops_conn_id=delta_ops_conn_id,
            storage_options=storage_options,
            dry_run=dry_run,
            engine=engine,
            spark_conn_id=spark_conn_id,
            table_name=table_name,
            max_listed=max_listed,
            progress_every_seconds=progress_every_seconds,
            history=history,
            history_location=history_location,
            deferrable=deferrable,
            job_folder=job_folder,
            **kwargs,
        )


class DeltaDropFeatureOperator(DeltaOperationOperator):
    """Take a table feature out of the protocol (ALTER TABLE ... DROP FEATURE): `delta-ops
    drop-feature` run by an Airflow task.

    What a run does, its XCom and asset events: `delta_ops.airflow.operators`; the how-to page:
    docs/airflow/operators/drop_feature.md. Written from the registry by
    `delta_ops.airflow.operator_code`.

    Arguments, all keywords (an option's kind and accepted forms, then its meaning):

    - `task_id`: the task's id (BaseOperator's, as are `retries`, `pool`, `outlets`, ...)
    - `table`: the table's path or URL (templated)
    - `feature` (text: e.g. day=2026-11-01): the table feature to drop: deletionVectors,
      v2Checkpoint, inCommitTimestamp, vacuumProtocolCheck, checkpointProtection, typeWidening,
      typeWidening-preview, columnMapping, rowTracking, checkConstraints, domainMetadata,
      materializePartitionColumns
    - `truncate_history` (flag: true or false; default `False`): truncate the history instead of
      protecting it with checkpoints: the first run prepares, a run after
      delta.dropFeatureTruncateHistory.retentionDuration drops
    - `delta_ops_conn_id`: an Airflow connection holding the storage options (the hook's types)
    - `storage_options`: options over the connection's (templated; shown as JSON in the UI)
    - `dry_run`: plan only: log and return the plan, change nothing
    - `engine`: only `local`: this operation runs in the task's process
    - `spark_conn_id`: the Spark connection when `engine="spark"`
    - `table_name`: the table's name in logs, alerts and the history (default: the path's end)
    - `max_listed`: lists longer than this are cut in the log, the XCom and asset events
    - `progress_every_seconds`: how often a long step logs its progress
    - `history`: record the run in the operation history (`_delta_ops_history`)
    - `history_location`: where the history is, if not beside the table
    - `deferrable`: with `engine="spark"`: run as a Spark job of its own, the task deferred
    - `job_folder`: where a deferred run's job writes its outcome and log

    Templated (parsed when the task runs): `table`, `storage_options`, `feature`,
    `truncate_history`. A value that is not templated is parsed now: a bad one, or a misspelled
    keyword, fails the DAG's import in one line naming `drop_feature`.
    """

    __module__ = PUBLIC_MODULE
    operation = OPERATIONS["drop_feature"]
    template_fields: Sequence[str] = (
        "table",
        "storage_options",
        "feature",
        "truncate_history",
    )

    def __init__(
        self,
        *,
        table: str,
        feature: str | XComArg | None = None,
        truncate_history: bool | str | XComArg = False,
        delta_ops_conn_id: str | None = None,
        storage_options: Mapping[str, Any] | None = None,
        dry_run: bool = False,
        engine: Literal["local"] = "local",
        spark_conn_id: str | None = None,
        table_name: str | None = None,
        max_listed: int = 1000,
        progress_every_seconds: float = 10.0,
        history: bool = True,
        history_location: str | None = None,
        deferrable: bool = False,
        job_folder: str | None = None,
        **kwargs: Unpack[BaseOperatorArguments],
    ) -> None:
        super().__init__(
            table=table,
            feature=feature,
            truncate_history=truncate_history,
            delta_ops_conn_id=delta_ops_conn_id,
            storage_options=storage_options,
            dry_run=dry_run,
            engine=engine,
            spark_conn_id=spark_conn_id,
            table_name=table_name,
            max_listed=max_listed,
            progress_every_seconds=progress_every_seconds,
            history=history,
            history_location=history_location,
            deferrable=deferrable,
            job_folder=job_folder,
            **kwargs,
        )


class DeltaRecomputeStatsOperator(DeltaOperationOperator):
    """Compute missing or short file statistics from the data (COMPUTE STATS): `delta-ops
    recompute-stats` run by an Airflow task.

    What a run does, its XCom and asset events: `delta_ops.airflow.operators`; the how-to page:
    docs/airflow/operators/recompute_stats.md. Written from the registry by
    `delta_ops.airflow.operator_code`.

    Arguments, all keywords (an option's kind and accepted forms, then its meaning):

    - `task_id`: the task's id (BaseOperator's, as are `retries`, `pool`, `outlets`, ...)
    - `table`: the table's path or URL (templated)
    - `columns` (text: e.g. a,b.c or `name.with.dots`): only files lacking stats for these columns
      (default: every column the table's stats cover)
    - `batch_files` (count: a whole number; default `22000`): files per commit
    - `engine` (choice: local | spark; default `local`): where the heavy I/O runs: local (this
      process), or spark (executors)
    - `delta_ops_conn_id`: an Airflow connection holding the storage options (the hook's types)
    - `storage_options`: options over the connection's (templated; shown as JSON in the UI)
    - `dry_run`: plan only: log and return the plan, change nothing
    - `spark_conn_id`: the Spark connection when `engine="spark"`
    - `table_name`: the table's name in logs, alerts and the history (default: the path's end)
    - `max_listed`: lists longer than this are cut in the log, the XCom and asset events
    - `progress_every_seconds`: how often a long step logs its progress
    - `history`: record the run in the operation history (`_delta_ops_history`)
    - `history_location`: where the history is, if not beside the table
    - `deferrable`: with `engine="spark"`: run as a Spark job of its own, the task deferred
    - `job_folder`: where a deferred run's job writes its outcome and log

    Templated (parsed when the task runs): `table`, `storage_options`, `columns`, `batch_files`,
    `engine`. A value that is not templated is parsed now: a bad one, or a misspelled keyword, fails
    the DAG's import in one line naming `recompute_stats`.
    """

    __module__ = PUBLIC_MODULE
    operation = OPERATIONS["recompute_stats"]
    template_fields: Sequence[str] = (
        "table",
        "storage_options",
        "columns",
        "batch_files",
        "engine",
    )

    def __init__(
        self,
        *,
        table: str,
        columns: str | XComArg | None = None,
        batch_files: int | str | XComArg = 22000,
        engine: str | XComArg = "local",
        delta_ops_conn_id: str | None = None,
        storage_options: Mapping[str, Any] | None = None,
        dry_run: bool = False,
        spark_conn_id: str | None = None,
        table_name: str | None = None,
        max_listed: int = 1000,
        progress_every_seconds: float = 10.0,
        history: bool = True,
        history_location: str | None = None,
        deferrable: bool = False,
        job_folder: str | None = None,
        **kwargs: Unpack[BaseOperatorArguments],
    ) -> None:
        super().__init__(
            table=table,
            columns=columns,
            batch_files=batch_files,
            engine=engine,
            delta_ops_conn_id=delta_ops_conn_id,
            storage_options=storage_options,
            dry_run=dry_run,
            spark_conn_id=spark_conn_id,
            table_name=table_name,
            max_listed=max_listed,
            progress_every_seconds=progress_every_seconds,
            history=history,
            history_location=history_location,
            deferrable=deferrable,
            job_folder=job_folder,
            **kwargs,
        )


#: every operation's class, in the registry's order
OPERATOR_CLASSES: tuple[type[DeltaOperationOperator], ...] = (
    DeltaCheckpointOperator,
    DeltaCleanupOperator,
    DeltaVacuumOperator,
    DeltaEnableRowTrackingOperator,
    DeltaPurgeOperator,
    DeltaCompactOperator,
    DeltaClusterByOperator,
    DeltaRepairOperator,
    DeltaRestoreOperator,
    DeltaChecksumOperator,
    DeltaDropFeatureOperator,
    DeltaRecomputeStatsOperator,
)

__all__ = [
    "OPERATOR_CLASSES",
    "DeltaCheckpointOperator",
    "DeltaChecksumOperator",
    "DeltaCleanupOperator",
    "DeltaClusterByOperator",
    "DeltaCompactOperator",
    "DeltaDropFeatureOperator",
    "DeltaEnableRowTrackingOperator",
    "DeltaPurgeOperator",
    "DeltaRecomputeStatsOperator",
    "DeltaRepairOperator",
    "DeltaRestoreOperator",
    "DeltaVacuumOperator",
]
