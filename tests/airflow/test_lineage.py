"""OpenLineage from a real run: Airflow's OpenLineage listener (the provider installed, a file
transport configured by `tests.support.airflow_support`) asks the operator for its facets when the task
completes; the events it wrote are read back.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from delta_ops.table.writer import write_arrow
from tests.support.airflow_support import (
    airflow_home,
    dag_module,
    lineage_events,
    task_states,
    xcom,
)


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return airflow_home(tmp_path_factory.getbasetemp())


def test_each_run_reports_its_table_versions_files_and_bytes(home: Path, tmp_path: Path) -> None:
    table = tmp_path / "events"
    for i in range(3):
        write_arrow(table, pa.table({"id": [i]}))
    module = dag_module(
        home,
        "lineage",
        f"""
        from airflow.sdk import DAG
        from delta_ops.airflow.operators import DeltaCompactOperator, DeltaCheckpointOperator

        with DAG("lineage", schedule=None) as dag:
            DeltaCompactOperator(task_id="compact", table={str(table)!r}) >> (
                DeltaCheckpointOperator(task_id="checkpoint", table={str(table)!r},
                                        dry_run=True)
            )
        """,
    )
    run = module.dag.test()
    assert task_states(run) == {"compact": "success", "checkpoint": "success"}
    compacted = xcom(run, "compact")
    [complete] = [
        e for e in lineage_events(home, "lineage.compact") if e["eventType"] == "COMPLETE"
    ]
    dataset = {"namespace": "file", "name": str(table)}
    [given] = complete["inputs"]
    [made] = complete["outputs"]
    assert {k: given[k] for k in dataset} == {k: made[k] for k in dataset} == dataset
    assert given["facets"]["version"]["datasetVersion"] == "2"
    assert made["facets"]["version"]["datasetVersion"] == "3" == str(compacted["version"])
    statistics = made["outputFacets"]["outputStatistics"]
    files = compacted["files_removed"] + compacted["files_added"]
    size = compacted["bytes_removed"] + compacted["bytes_added"]
    assert (statistics["fileCount"], statistics["size"]) == (files, size) == (4, size)
    facet = complete["run"]["facets"]["deltaOps"]
    assert {k: v for k, v in facet.items() if not k.startswith("_")} == {
        "operation": "compact",
        "table": str(table),
        "version_before": 2,
        "version_after": 3,
        "files": 4,
        "bytes": size,
        "dry_run": False,
    }
    # a dry run reads the table and changes nothing: the same version in and out
    [planned] = [
        e for e in lineage_events(home, "lineage.checkpoint") if e["eventType"] == "COMPLETE"
    ]
    assert planned["run"]["facets"]["deltaOps"]["dry_run"] is True
    versions = [d["facets"]["version"]["datasetVersion"] for d in planned["inputs"]]
    versions += [d["facets"]["version"]["datasetVersion"] for d in planned["outputs"]]
    assert versions == ["3", "3"]
