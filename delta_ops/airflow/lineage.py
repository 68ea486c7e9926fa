"""OpenLineage for the operators: the table as input and output dataset, and what the run did.

With ``apache-airflow-providers-openlineage`` installed and a transport configured, Airflow's
OpenLineage listener asks each finished task for its lineage
(``get_openlineage_facets_on_complete``); a delta-ops operator answers with
`operator_lineage`:

* the table as the **input** dataset, at the version the run planned on
  (``version`` facet: ``datasetVersion``), and as the **output** dataset at the version the
  run left (a new commit's, or the same for a checkpoint, a log cleanup, a dry run), with
  ``outputStatistics`` (``fileCount``, ``size``: the files and bytes the run deleted,
  rewrote or wrote, as the operation history counts them);
* a run facet ``deltaOps`` (`DeltaOpsRunFacet`): the operation, the versions before
  and after, files and bytes, whether it was a dry run.

Datasets are named by OpenLineage's conventions: a local table is namespace ``file`` with its
absolute path; ``s3://bucket/key`` is namespace ``s3://bucket`` with the key (``gs``, ``az``,
``abfss`` alike). Without the OpenLineage provider nothing here is imported.

Example (what a vacuum of ``s3://lake/events`` reports):

    inputs=[Dataset("s3://lake", "events", facets={"version": ...("41")})]
    outputs=[Dataset("s3://lake", "events", facets={"version": ...("43")},
                     outputFacets={"outputStatistics": ...(fileCount=12, size=3_400_000)})]
    run_facets={"deltaOps": DeltaOpsRunFacet(operation="vacuum", version_before=41, ...)}
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import attr
from airflow.providers.openlineage.extractors import OperatorLineage
from openlineage.client.event_v2 import Dataset, OutputDataset
from openlineage.client.facet_v2 import (
    RunFacet,
    dataset_version_dataset,
    output_statistics_output_dataset,
)

from delta_ops.ops.operation import AnyOperation
from delta_ops.ops.results import to_data
from delta_ops.service.runs import Run
from delta_ops.version import __version__

PRODUCER = f"https://github.com/delta-ops/delta-ops/tree/{__version__}"


@attr.define
class DeltaOpsRunFacet(RunFacet):
    """What one delta-ops run did to its table."""

    operation: str
    table: str
    version_before: int | None
    version_after: int | None
    files: int | None
    bytes: int | None
    dry_run: bool

    @staticmethod
    def _get_schema() -> str:
        return "https://delta-ops.dev/spec/facets/1-0-0/DeltaOpsRunFacet.json"


def dataset_name(table: str) -> tuple[str, str]:
    """(namespace, name) of a table by OpenLineage's naming conventions."""
    if "://" not in table:
        return "file", os.path.abspath(table)
    parts = urlsplit(table)
    if parts.scheme == "file":
        return "file", parts.path
    return f"{parts.scheme}://{parts.netloc}", parts.path.strip("/")


def _versions(run: Run[Any, Any], data: Mapping[str, Any]) -> tuple[int | None, int | None]:
    """The version the run planned on and the one it left."""
    plan = run.plan
    snapshot = getattr(plan, "snapshot", None)
    before = getattr(snapshot, "version", None)
    if before is None and isinstance(getattr(plan, "version", None), int):
        before = plan.version
    commits = [v for v in data.get("commits") or [] if isinstance(v, int)]
    version = data.get("version")
    after = max([*commits, *([version] if isinstance(version, int) else []), before or -1])
    return before, after if after >= 0 else None


def operator_lineage(
    operation: AnyOperation, table: str, run: Run[Any, Any] | None
) -> OperatorLineage[Dataset, RunFacet]:
    """The lineage of one operator's run (`run` None: it did not get to run; only the table)."""
    namespace, name = dataset_name(table)
    if run is None:
        return OperatorLineage(
            inputs=[Dataset(namespace, name)], outputs=[Dataset(namespace, name)]
        )
    data = to_data(run.result) if run.result is not None else {}
    before, after = _versions(run, data)
    files = size = None
    if run.result is not None and operation.touched is not None:
        files, size = operation.touched(run.result)

    def version(at: int | None) -> dict[str, Any]:
        if at is None:
            return {}
        return {"version": dataset_version_dataset.DatasetVersionDatasetFacet(str(at))}

    statistics = output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(
        size=size, fileCount=files
    )
    return OperatorLineage(
        inputs=[Dataset(namespace, name, facets=version(before))],
        outputs=[
            OutputDataset(
                namespace,
                name,
                facets=version(after),
                outputFacets={"outputStatistics": statistics},
            )
        ],
        run_facets={
            "deltaOps": DeltaOpsRunFacet(
                operation=operation.name,
                table=table,
                version_before=before,
                version_after=after,
                files=files,
                bytes=size,
                dry_run=run.result is None,
                producer=PRODUCER,
            )
        },
    )


__all__ = ["DeltaOpsRunFacet", "dataset_name", "operator_lineage"]
