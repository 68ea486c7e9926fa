"""The demo's pipeline runs on Delta Spark (issue 44, item 5): `make demo-delta-spark`'s steps,
without Dagster, on the reference server's Delta Spark session (tests/reference/demo_workload.py,
a `call` request, so no second JVM).

The pipeline's `write_delta` appends and Delta Spark reads each batch back; after 40 days pass
and a fourth run, the planner asks for a checkpoint, log cleanup and vacuum (and compaction of
the small batches), which do their work (old commits and the crashed write's file go); Delta Spark then reads every version it
read before that the log still holds with the same rows, shows the history, and keeps writing.
"""

from __future__ import annotations

from pathlib import Path

from tests.reference.delta_spark import DeltaSpark


def test_the_demo_pipeline_and_its_maintenance_run_on_delta_spark(
    delta_spark: DeltaSpark, tmp_path: Path
) -> None:
    report = delta_spark.call("demo_workload", "run", scratch=str(tmp_path))

    runs = report["runs"]
    assert [r["version"] for r in runs] == [0, 1, 2, 3]
    assert [r["total"] for r in runs] == [300, 600, 900, 1200]
    assert {r["reader"] for r in runs} == {"Delta Spark"}
    before, after = report["before"], report["after"]
    # runs 1-3 are 40 days old: Delta Spark refuses to travel past the 7-day file retention
    # (its rule, whatever the files), and reads the fourth
    beyond = "DELTA_UNSUPPORTED_TIME_TRAVEL_BEYOND_DELETED_FILE_RETENTION_DURATION"
    assert all(beyond in before[str(v)] for v in range(3)), before
    assert before["3"].startswith("1200:"), before

    maintenance = report["maintenance"]
    assert {"checkpoint", "cleanup", "vacuum"} <= set(report["planned_actions"]), report["planned"]
    # log cleanup deleted the old commits, vacuum the crashed write's file
    assert maintenance["cleanup"]["num_deleted"] > 0, maintenance["cleanup"]
    assert maintenance["vacuum"]["num_deleted"] >= 1 and not report["crashed_file_left"]
    # every version Delta Spark read before reads the same rows after
    for version, digest in before.items():
        if not digest.startswith("error:"):
            assert after[version] == digest, f"version {version}: {after[version]} != {digest}"
    # maintenance's own commits (a compaction's, vacuum's) keep the rows of the fourth run
    newest = max(int(v) for v in after)
    assert all(after[str(v)] == before["3"] for v in range(3, newest + 1)), after
    history = report["history"]
    assert history == ["OPTIMIZE", "VACUUM END", "VACUUM START", "WRITE"], history
    continued = report["continued"]
    assert continued["read"] == continued["expected"]
