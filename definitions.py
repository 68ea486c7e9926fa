"""The demo code location: a PySpark pipeline writing a Delta table, and its maintenance.

The warehouse is a local folder (`./warehouse`, or $DELTA_OPS_WAREHOUSE). The `events` asset
(the pipeline itself is `demo_pipeline.py`, which needs no Dagster) appends a batch of generated events to `warehouse/events` (partitioned by day) with the Spark
session of dagster-pyspark's `PySparkResource` (configured with delta-ops' session defaults),
through delta-ops' commit layer, and reads the table back through `format("delta")`; the
maintenance assets, checks, jobs, schedule and commit sensor for that table come from
`build_delta_maintenance_defs`. Point the factory at your own tables (or a warehouse root) to
maintain them the same way.

With ``DELTA_OPS_DEMO_ENGINE=delta-spark`` (`make demo-delta-spark`) the pipeline's session is a
Delta Spark one (Delta's jars from Maven Central through ``spark.jars.packages``, cached in
``build/ivy``; its SQL extension and catalog): `write_delta` still commits the batches, and
``format("delta")``, which stays Delta Spark's there, reads the table back. It needs the
``delta-spark`` package and the PySpark release it supports installed (PySpark 4.2 for Delta
4.4); the default, ``spark``, needs no Delta jars.
"""

import os
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import dagster as dg
from dagster_pyspark import PySparkResource
from pydantic import Field

from delta_ops.dagster import DeltaTableTarget, build_delta_maintenance_defs
from delta_ops.spark.session import session_conf
from demo_pipeline import append_events

WAREHOUSE = Path(
    os.environ.get("DELTA_OPS_WAREHOUSE", Path(__file__).resolve().parent / "warehouse")
)
EVENTS_TABLE = WAREHOUSE / "events"
EVENTS_KEY = dg.AssetKey(["events"])


class EventsConfig(dg.Config):
    rows: int = Field(default=500, description="events to append in this batch")
    days: int = Field(default=3, description="spread the batch over this many days (partitions)")


#: The pipeline's Spark session: two local cores, with delta-ops' defaults (UTC session time
#: zone, microsecond timestamps, workers on this interpreter); point spark.master at a cluster
#: to run elsewhere. Spark starts the `delta` source's planner with $PYSPARK_PYTHON as the JVM
#: saw it at launch, so it is set before the resource starts the session.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
#: the pipeline's Spark: `spark` (PySpark, no Delta jars) or `delta-spark` (a Delta Spark session)
ENGINE = os.environ.get("DELTA_OPS_DEMO_ENGINE", "spark")
#: where a Delta Spark session keeps its jars (the reference tier's cache too)
IVY_CACHE = Path(__file__).resolve().parent / "build" / "ivy"


def delta_spark_conf() -> dict[str, str]:
    """A Delta Spark session's options: the jars of the installed `delta-spark` for the
    installed PySpark (Maven Central, cached in `IVY_CACHE`), Delta's SQL extension and
    catalog."""
    import pyspark

    try:
        delta = version("delta-spark")
    except PackageNotFoundError:
        raise RuntimeError(
            "DELTA_OPS_DEMO_ENGINE=delta-spark needs the delta-spark package and the PySpark it "
            f"supports (PySpark {pyspark.__version__} here): run `make demo-delta-spark`"
        ) from None
    spark_minor = ".".join(pyspark.__version__.split(".")[:2])
    return {
        "spark.jars.packages": f"io.delta:delta-spark_{spark_minor}_2.13:{delta}",
        "spark.jars.ivy": str(IVY_CACHE),
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    }


def engine_conf(engine: str) -> dict[str, str]:
    """What the pipeline's session adds for `engine` (`DELTA_OPS_DEMO_ENGINE`)."""
    if engine == "spark":
        return {}
    if engine == "delta-spark":
        return delta_spark_conf()
    raise ValueError(f"DELTA_OPS_DEMO_ENGINE={engine!r}: spark or delta-spark")


SPARK = PySparkResource(
    spark_config={
        "spark.master": "local[2]",
        "spark.app.name": "delta-ops-demo",
        **session_conf("local[2]"),
        **engine_conf(ENGINE),
    }
)


@dg.asset(
    key=EVENTS_KEY,
    group_name="pipeline",
    kinds={"spark", "deltalake"},
    description=f"Events appended by PySpark to the Delta table at {EVENTS_TABLE}",
)
def events(
    context: dg.AssetExecutionContext, config: EventsConfig, pyspark: PySparkResource
) -> dg.MaterializeResult:
    report = append_events(
        pyspark.spark_session, str(EVENTS_TABLE), rows=config.rows, days=config.days
    )
    context.log.info(
        f"appended {config.rows} events as version {report.version}; the table now has "
        f"{report.total} rows ({report.reader} read it): {report.per_day}"
    )
    return dg.MaterializeResult(
        metadata={
            "version": report.version,
            "rows": config.rows,
            "dagster/row_count": report.total,
            "table": str(EVENTS_TABLE),
            "read_by": report.reader,
        }
    )


events_pipeline_job = dg.define_asset_job(
    "events_pipeline_job",
    selection=[EVENTS_KEY],
    executor_def=dg.in_process_executor,  # one Spark session serves the whole run
    description="Append a batch of events with PySpark.",
)

defs = dg.Definitions.merge(
    dg.Definitions(assets=[events], jobs=[events_pipeline_job], resources={"pyspark": SPARK}),
    build_delta_maintenance_defs(
        [DeltaTableTarget(name="events", url=str(EVENTS_TABLE), asset_key=EVENTS_KEY)],
        name="warehouse",
    ),
)
