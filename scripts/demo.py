"""The README's main command: run the demo pipeline a few times, then its maintenance.

Uses the Dagster code location in `definitions.py` on its embedded default, a local warehouse
folder (`./warehouse`, or $DELTA_OPS_WAREHOUSE): the PySpark `events` asset appends a batch per
run through delta-ops' commit layer, then `warehouse_maintenance_job` checkpoints, cleans up
the log and vacuums the table. Prints what each step did. `dagster dev` shows the same
definitions in the UI.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import dagster as dg

from definitions import EVENTS_TABLE, defs
from delta_ops.cli import main as cli

RUNS = 3


def describe(result: dg.ExecuteInProcessResult) -> list[str]:
    lines = []
    for event in result.get_asset_materialization_events():
        meta = event.step_materialization_data.materialization.metadata
        shown = {
            k: getattr(v, "value", v)
            for k, v in meta.items()
            if k in ("version", "rows", "num_deleted", "written", "kind", "bytes")
        }
        lines.append(f"  materialized {event.asset_key.to_user_string()}: {shown}")
    for event in result.get_asset_observation_events():
        meta = event.asset_observation_data.asset_observation.metadata
        shown = {
            k: getattr(v, "value", getattr(v, "text", v))
            for k, v in meta.items()
            if k in ("action", "skipped", "version", "num_deleted", "written", "bytes")
        }
        lines.append(f"  observed {event.asset_key.to_user_string()}: {shown}")
    return lines


def main() -> int:
    pipeline = defs.resolve_job_def("events_pipeline_job")
    for i in range(RUNS):
        result = pipeline.execute_in_process(
            run_config={"ops": {"events": {"config": {"rows": 300}}}}
        )
        print(f"pipeline run {i + 1}/{RUNS}: {'ok' if result.success else 'FAILED'}")
        print("\n".join(describe(result)))
        if not result.success:
            return 1
    maintenance = defs.resolve_job_def("warehouse_maintenance_job")
    result = maintenance.execute_in_process()
    print(f"maintenance job: {'ok' if result.success else 'FAILED'}")
    print("\n".join(describe(result)))
    print(f"\n$ delta-ops inspect {EVENTS_TABLE}")
    cli(["inspect", str(EVENTS_TABLE)])
    return 0 if result.success else 1


if __name__ == "__main__":
    sys.exit(main())
