"""The README's main command: the demo pipeline, time passing, then maintenance doing real work.

Uses the Dagster code location in `definitions.py` on its embedded default, a local warehouse
folder (`./warehouse`, or $DELTA_OPS_WAREHOUSE), and keeps its Dagster instance in the project
(`./.dagster`, or $DAGSTER_HOME), so the runs are there when `make ui` opens the UI.

1. The PySpark `events` asset appends three batches through delta-ops' commit layer.
2. Time passes, simulated: those three versions' files are dated back 40 days, and a Spark
   write that "crashed" back then left a file no commit references.
3. One more batch, then maintenance by the path the schedule and the commit sensor use: the
   maintenance schedule's tick decides from the table's log which actions have work and
   requests them, and each request runs as the maintenance asset job with that asset
   selection (the run the daemon would launch). The runs materialize the maintenance assets,
   so the UI's asset pages for checkpoint, cleanup and vacuum show what they did: a
   checkpoint, log cleanup deleting the commits older than the 30-day log retention, and
   vacuum deleting the crashed write's file. Each action run is one row of the operation
   history (`warehouse/_delta_ops_history`, a Delta table DuckDB reads).

Prints what each step did, then `delta-ops inspect` of the table.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # the code location and its pipeline live at the top
    sys.path.insert(0, str(ROOT))

from demo_pipeline import AGE_DAYS, let_time_pass

DAGSTER_HOME = ROOT / ".dagster"

SHOWN = ("version", "rows", "num_deleted", "num_written", "bytes", "skipped", "table_version")


def describe(result) -> list[str]:  # type: ignore[no-untyped-def]
    lines = []
    events = [
        (e.asset_key, e.step_materialization_data.materialization.metadata, "materialized")
        for e in result.get_asset_materialization_events()
    ] + [
        (e.asset_key, e.asset_observation_data.asset_observation.metadata, "observed")
        for e in result.get_asset_observation_events()
    ]
    for key, meta, verb in events:
        action = getattr(meta.get("action"), "value", None)
        shown = {k: getattr(v, "value", v) for k, v in meta.items() if k in SHOWN}
        what = f"{key.to_user_string()}" + (f" {action}" if action else "")
        lines.append(f"  {verb} {what}: {shown}")
    return lines


def run_demo(defs, table: Path, instance, say: Callable[[str], None] = print) -> bool:  # type: ignore[no-untyped-def]
    """Run the demo's steps on `defs` (the code location) into `instance`; True on success."""
    pipeline = defs.resolve_job_def("events_pipeline_job")

    def append(label: str) -> bool:
        result = pipeline.execute_in_process(
            run_config={"ops": {"events": {"config": {"rows": 300}}}}, instance=instance
        )
        say(f"pipeline run {label}: {'ok' if result.success else 'FAILED'}")
        say("\n".join(describe(result)))
        return bool(result.success)

    for i in range(3):
        if not append(f"{i + 1}/4"):
            return False
    crashed = let_time_pass(table)
    say(
        f"(demo) {AGE_DAYS} days pass: runs 1-3 are dated back and a crashed write left "
        f"{crashed.relative_to(table)}"
    )
    if not append("4/4"):
        return False
    return run_maintenance(defs, instance, say) is not None


def run_maintenance(
    defs, instance, say: Callable[[str], None] = print, fleet: str = "warehouse"
) -> list | None:  # type: ignore[no-untyped-def]
    """The maintenance schedule's tick, then each run it requests, launched as the daemon
    would: the fleet's maintenance asset job with the request's asset selection and tags.
    Returns the runs' results (None when one failed)."""
    import datetime as dt

    import dagster as dg

    schedule = defs.resolve_schedule_def(f"{fleet}_maintenance_schedule")
    key = f"{fleet}_delta_maintenance"
    with dg.build_schedule_context(
        instance=instance,
        resources={key: defs.resources[key]},
        scheduled_execution_time=dt.datetime.now(dt.UTC),
    ) as context:
        tick = schedule.evaluate_tick(context)
    if not tick.run_requests:
        say(f"maintenance schedule: {tick.skip_message}")
        return []
    job = defs.resolve_job_def(f"{fleet}_maintenance_assets_job")
    results = []
    for request in tick.run_requests:
        wanted = ", ".join(k.path[-1] for k in request.asset_selection or [])
        say(f"maintenance schedule requested {request.run_key}: {wanted}")
        # as the daemon launches it: the request's assets, then the table's checks on the
        # state they left
        subset = job.get_subset(
            asset_selection=set(request.asset_selection or []),
            asset_check_selection=set(request.asset_check_keys or []),
        )
        result = subset.execute_in_process(
            tags={**request.tags, "dagster/schedule_name": schedule.name},
            instance=instance,
            raise_on_error=False,
        )
        say(f"maintenance run {request.run_key}: {'ok' if result.success else 'FAILED'}")
        say("\n".join(describe(result)))
        if not result.success:
            return None
        results.append(result)
    return results


def main() -> int:
    os.environ.setdefault("DAGSTER_HOME", str(DAGSTER_HOME))
    import dagster as dg

    from definitions import EVENTS_TABLE, defs
    from delta_ops.cli import main as cli

    instance = dg.DagsterInstance.get()
    ok = run_demo(defs, Path(EVENTS_TABLE), instance)
    print(f"\n$ delta-ops inspect {EVENTS_TABLE}")
    cli(["inspect", str(EVENTS_TABLE)])
    print(f"\nruns are kept in {os.environ['DAGSTER_HOME']}; `make ui` shows them")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
