"""delta-ops maintaining a table while Delta Spark writes it (issue 47).

Each scenario creates a table with Delta Spark and starts the pipeline's side in Delta Spark's
process (tests/reference/race_workload.py: appends, MERGE, DELETE with deletion vectors,
UPDATE, its own OPTIMIZE, micro-batches of a `writeStream`, micro-batches of a stream whose
`foreachBatch` MERGEs them into the table, and a streaming read of the table into a sink) while this process runs one of our operations in a loop until the pipeline is done.
Afterwards (tests/reference/race_model.py rebuilds every version's rows from the log):
- Delta Spark reads every version a reader is promised (from the oldest the log rebuilds, and
  after a vacuum with zero retention from the version it vacuumed) with exactly the model's
  rows: no row lost, none resurrected, no duplicate from a retried write;
- DuckDB and delta-ops read the latest version the same;
- every write Delta Spark reported committed is in the log once, no commit is unexplained, and
  a commit of our maintenance changed no data;
- the streaming read never failed on a file we removed and its sink holds each appended row
  exactly once (a compaction's rewrite, `dataChange=false`, is never read again);
- our loop failed only with conflicts (counted, as are Delta Spark's by error class);
- where our side enabled row tracking, Delta Spark reads a row id for every row, no id twice,
  none above the table's high-water mark (a backfill or a commit of ours that assigned ids
  from a mark a concurrent Delta Spark append had moved would give two rows one id).

`kill` runs our operations as CLI processes killed with SIGKILL at random moments; the run after
the race finishes their work. `mirror` swaps the sides: our writers append (the Arrow writer,
`write_delta` and our streaming sink in the test's own Spark session) while Delta Spark runs
VACUUM, checkpoints (with its metadata cleanup) and OPTIMIZE.

Log cleanup compresses time: each of our rounds makes the whole log look three days old, so
the checkpoint Delta Spark listed a moment ago may already be "expired" when a newer one exists
and our cleanup (like Delta Spark's own metadata cleanup, the same rule) deletes it. A Delta
Spark write that then reads it fails with FILE_NOT_EXIST, commits nothing, and is retried
(counted as LOG_FILE_REMOVED_UNDER_READER, allowed only where a cleanup runs); a streaming query
dies of it, so the cleanup scenario has no streams. In real time this needs a table idle for the
whole retention (30 days by default) and a reader listing it in the second between our new
checkpoint and the cleanup: a streaming table is never idle that long.

A vacuum at zero retention (forced, as the race runs it) deletes files the moment a version
removes them: a Delta Spark write whose snapshot is one version older then fails on a missing
data file, commits nothing and is retried (DATA_FILE_VACUUMED_UNDER_READER, allowed only where
such a vacuum runs); Delta Spark's VACUUM RETAIN 0 HOURS does the same to its own writers, and
the default retention (7 days) is what prevents it. The in-flight grace protects what zero
retention cannot: files written but not yet committed.

Sizes: `RACE_WRITES` Delta Spark writes per scenario (5 in `make check`; `make soak` sets more),
the seed is the run's (`RELIABILITY_SEED`). The counts of every scenario are in the reference
report at the end of the run.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from delta_ops.errors import ConcurrentModification
from delta_ops.table.scan import read_table
from delta_ops.table.snapshot import load_snapshot
from delta_ops.table.writer import write_arrow
from tests.reference.delta_spark import DeltaSpark
from tests.reference.judge import TALLY, age_log, readable_from, run_op
from tests.reference.race_model import REPORT, Model, build_model, latest_version, rows_list
from tests.support import REPO, duckdb_rows

WRITES = int(os.environ.get("RACE_WRITES", "5"))
SEED_ROWS = 60
#: our vacuum's in-flight grace in the race: long enough for any Delta Spark write of these
#: tiny tables to commit the files it wrote, short enough that files rewritten early in the
#: race are old enough to delete before it ends
GRACE = "10s"
#: the longest our side waits between planning and executing (Race.dawdle)
DAWDLE_S = 5.0
ALL_WRITES = ("append", "merge", "delete", "update", "optimize", "stream", "foreach_batch")


@dataclass
class Race:
    """One scenario's shared state: what our side did, for the checks and the report."""

    path: Path
    archive: Path
    rng: random.Random
    runs: int = 0
    conflicts: Counter[str] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    #: the oldest version a zero-retention vacuum promised to keep readable
    vacuum_floor: int = 0
    #: the oldest version our log cleanup promised to keep: every commit the race made look
    #: old is at most the latest version seen after aging, so the boundary checkpoint is at most
    #: one past it (the protection under test never sets this)
    cleanup_floor: int = 0
    deleted: int = 0
    #: our own appends (mirror), by the version they committed
    known: dict[int, dict[str, Any]] = field(default_factory=dict)
    next_id: int = 1_000_000
    done_once: set[str] = field(default_factory=set)
    #: the test's own Spark session (classic, delta-ops' `delta` source and sink), for the
    #: scenarios whose side writes through it
    spark: Any = None
    #: our streaming sink's query (mirror), fed one parquet file per micro-batch
    our_stream: OurStream | None = None
    #: our appends by writer (mirror)
    writers: Counter[str] = field(default_factory=Counter)

    def dawdle(self, plan: Any, warnings: tuple[str, ...]) -> None:
        """Between planning and executing, wait for the pipeline's next commit (at most
        DAWDLE_S): nearly every commit of ours then has a winner to check against, which a
        fast operation beside a pipeline that commits every second or two rarely meets."""
        if getattr(plan, "nothing_to_do", False):
            return
        planned = latest_version(self.path)
        deadline = time.monotonic() + DAWDLE_S
        while latest_version(self.path) <= planned and time.monotonic() < deadline:
            time.sleep(0.02)

    def op(self, name: str, **options: Any) -> Any:
        """Our operation `name` on the raced table, dawdling between plan and execution."""
        return run_op(name, self.path, on_plan=self.dawdle, **options)

    def archive_log(self) -> None:
        """Copy every commit file into the archive before cleanup may delete it."""
        log = self.path / "_delta_log"
        for name in os.listdir(log):
            if name.endswith(".json") and not (self.archive / name).exists():
                try:
                    shutil.copy(log / name, self.archive / name)
                except FileNotFoundError:  # a temporary file renamed meanwhile
                    continue


Step = Callable[[Race], None]


def _vacuum(mode: str) -> Step:
    def step(race: Race) -> None:
        # every other round on average: a compaction first (so the vacuum has just-removed
        # files to delete); without one, the live files are older than the in-flight grace,
        # so a vacuum that did not protect them would delete them
        if race.rng.random() < 0.5:
            race.op("compact")
        run = race.op(
            "vacuum",
            retention="0s",
            force=True,
            mode=mode,
            in_flight_grace=GRACE,
        )
        snapshot = run.plan.snapshot
        if snapshot is not None:
            race.vacuum_floor = max(race.vacuum_floor, snapshot.version)
        if run.result is not None:
            race.deleted += len(getattr(run.result, "deleted", ()) or ())

    return step


def _cleanup(race: Race) -> None:
    try:
        age_log(race.path, 3)
    except FileNotFoundError:  # a file Delta Spark renamed while we aged the folder
        pass
    race.cleanup_floor = max(race.cleanup_floor, latest_version(race.path) + 1)
    race.archive_log()
    race.op("checkpoint")
    race.op("cleanup", retention="1d")


def _restore(race: Race) -> None:
    latest = load_snapshot(str(race.path)).version
    floor = max(readable_from(race.path), 1)
    if latest - floor >= 1:
        race.op("restore", version=str(race.rng.randint(max(floor, latest - 3), latest)))


def _drop_deletion_vectors(race: Race) -> None:
    if "drop" not in race.done_once and load_snapshot(str(race.path)).protocol.supports(
        "deletionVectors"
    ):
        race.op("purge")
        race.op("drop_feature", feature="deletionVectors")
        race.done_once.add("drop")
    else:
        race.op("compact")


def _row_tracking(race: Race) -> None:
    if "row_tracking" not in race.done_once:
        race.op("enable_row_tracking")
        race.done_once.add("row_tracking")
    else:
        race.op("checkpoint")


def _kill(race: Race) -> None:
    """Our operation as a CLI process, killed at a random moment (or finishing)."""
    command = race.rng.choice(
        (
            ["compact"],
            ["vacuum", "--retention", "0s", "--force", "--in-flight-grace", GRACE],
            ["checkpoint"],
            ["purge"],
        )
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "delta_ops.cli", command[0], str(race.path), *command[1:]],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd=REPO,
    )
    time.sleep(race.rng.uniform(0.05, 1.5))
    if process.poll() is None:
        process.send_signal(signal.SIGKILL)
        race.conflicts["killed"] += 1
    _, err = process.communicate()
    if command[0] == "vacuum":  # it vacuumed at most the version that is the latest now
        race.vacuum_floor = max(race.vacuum_floor, latest_version(race.path))
    if process.returncode not in (0, -signal.SIGKILL):
        text = err.decode(errors="replace").strip()
        if "concurrent" in text.lower() or "conflict" in text.lower():
            race.conflicts["ConcurrentModification"] += 1
        else:
            race.errors.append(f"{' '.join(command)}: exit {process.returncode}: {text[-400:]}")


def _finish_killed(race: Race) -> None:
    """The re-run after the race: every operation the kills interrupted finishes."""
    run_op("compact", race.path)
    run_op("purge", race.path)
    run = run_op("vacuum", race.path, retention="0s", force=True, in_flight_grace="0s")
    if run.plan.snapshot is not None:
        race.vacuum_floor = max(race.vacuum_floor, run.plan.snapshot.version)
    run_op("checkpoint", race.path)


class OurStream:
    """delta-ops' streaming sink (`writeStream.format("delta")` in the test's own Spark
    session) from a parquet folder into the raced table, one file per micro-batch."""

    def __init__(self, spark: Any, path: Path, scratch: Path) -> None:
        self.path = path
        self.source = scratch / "our-stream-source"
        self.source.mkdir(parents=True, exist_ok=True)
        self.count = 0
        self.query = (
            spark.readStream.schema("id BIGINT, v BIGINT")
            .parquet(str(self.source))
            .writeStream.format("delta")
            .option("checkpointLocation", str(scratch / "our-stream-checkpoint"))
            .outputMode("append")
            .start(str(path))
        )

    def write(self, ids: list[int]) -> int:
        """One micro-batch of `ids`; the version its commit (`txn` = query id, batch id) got."""
        import pyarrow.parquet as pq

        self.count += 1
        rows = pa.table(
            {"id": pa.array(ids, pa.int64()), "v": pa.array([0] * len(ids), pa.int64())}
        )
        hidden = self.source / f".batch-{self.count}.parquet"
        pq.write_table(rows, hidden)
        hidden.rename(self.source / f"batch-{self.count}.parquet")
        self.query.processAllAvailable()
        batch = int(self.query.lastProgress["batchId"])
        app = str(self.query.id)
        log = self.path / "_delta_log"
        for version in range(latest_version(self.path), -1, -1):
            try:
                lines = (log / f"{version:020d}.json").read_text().splitlines()
            except FileNotFoundError:
                continue
            for line in lines:
                txn = json.loads(line).get("txn")
                if txn and txn["appId"] == app and int(txn["version"]) == batch:
                    return version
        raise AssertionError(f"our stream's batch {batch} is in no commit")

    def stop(self) -> None:
        self.query.stop()


def _our_appends(race: Race) -> None:
    """Our writers append (new ids, `v = 0`): the Arrow writer, and with the test's Spark
    session `write_delta` and a micro-batch of our streaming sink, in turn at random."""
    ids = list(range(race.next_id, race.next_id + race.rng.randint(3, 12)))
    race.next_id = ids[-1] + 1
    writer = race.rng.choice(("arrow", "spark", "stream") if race.spark is not None else ("arrow",))
    if writer == "spark":
        from delta_ops.spark import write_delta

        frame = race.spark.range(ids[0], ids[-1] + 1, 1, 2).selectExpr(
            "id", "CAST(0 AS BIGINT) AS v"
        )
        version = write_delta(frame, str(race.path)).version
    elif writer == "stream":
        assert race.our_stream is not None
        version = race.our_stream.write(ids)
    else:
        data = pa.table(
            {"id": pa.array(ids, pa.int64()), "v": pa.array([0] * len(ids), pa.int64())}
        )
        version = write_arrow(str(race.path), data).version
    race.known[version] = {"kind": "append", "ids": ids}
    race.writers[writer] += 1


@dataclass(frozen=True)
class Scenario:
    name: str
    ours: Step
    writes: tuple[str, ...] = ALL_WRITES
    #: the table's extra DDL (after the columns)
    ddl: str = "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')"
    #: a streaming read of the table runs through the race (not where our side deletes files
    #: it may not have read yet, or re-adds old ones)
    read_stream: bool = True
    after: Step | None = None
    #: a log cleanup runs (ours or Delta Spark's): a Delta Spark write whose snapshot listed a
    #: log file the cleanup then deleted fails, commits nothing, and is retried (as Delta
    #: Spark's own metadata cleanup does to a concurrent reader; see test_races' docstring)
    log_cleanup: bool = False
    #: a vacuum at zero retention runs: a Delta Spark write whose snapshot still referenced a
    #: file a newer version removed fails the same way (FILE_NOT_EXIST), as it does beside
    #: Delta Spark's own VACUUM RETAIN 0 HOURS: that is what zero retention means
    vacuum_zero: bool = False
    #: our loop's pause between runs, seconds (the pipeline gets the CPU too)
    pause: float = 0.2
    #: our side enables row tracking: check the row ids Delta Spark reads
    row_ids: bool = False
    #: our side also writes through the test's Spark session (`write_delta`, our sink)
    our_spark: bool = False


SCENARIOS = (
    Scenario("checkpoint", lambda r: r.op("checkpoint") and None),
    # no streams: see "Log cleanup" in the docstring
    Scenario(
        "cleanup",
        _cleanup,
        writes=tuple(w for w in ALL_WRITES if w != "stream"),
        read_stream=False,
        pause=0.5,
        log_cleanup=True,
    ),
    Scenario("vacuum-full", _vacuum("full"), read_stream=False, vacuum_zero=True),
    Scenario("vacuum-lite", _vacuum("lite"), read_stream=False, vacuum_zero=True),
    Scenario("purge", lambda r: r.op("purge") and None),
    Scenario("compact", lambda r: r.op("compact") and None),
    Scenario("zorder", lambda r: r.op("compact", zorder_by="id,v") and None),
    Scenario(
        "liquid",
        lambda r: r.op("compact") and None,
        ddl="CLUSTER BY (id) TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')",
    ),
    Scenario("restore", _restore, read_stream=False, pause=3.0),
    Scenario("drop-feature", _drop_deletion_vectors),
    Scenario("row-tracking", _row_tracking, row_ids=True),
    Scenario("kill", _kill, read_stream=False, after=_finish_killed, vacuum_zero=True),
    Scenario(
        "mirror",
        _our_appends,
        # no DELETE: it reads the whole table, so each of our appends is a conflict for it and
        # its six retries made this the slowest race (342 s of a gate)
        writes=("vacuum", "checkpoint", "optimize", "append"),
        # Delta Spark's VACUUM keeps its 7 days: with less it deletes any writer's files
        # written but not committed yet (its own writers' too)
        ddl="TBLPROPERTIES ('delta.enableDeletionVectors' = 'true', "
        "'delta.checkpointInterval' = '3')",
        log_cleanup=True,
        pause=2.0,
        our_spark=True,
    ),
)


def _our_loop(race: Race, scenario: Scenario, stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            scenario.ours(race)
            race.runs += 1
        except ConcurrentModification as exc:
            race.conflicts[type(exc).__name__] += 1
        except Exception as exc:  # noqa: BLE001 - every other failure fails the scenario
            race.errors.append(f"{type(exc).__name__}: {exc}"[:600])
        if scenario.pause:
            stop.wait(scenario.pause)


def _seed(spark: DeltaSpark, path: Path, ddl: str) -> dict[int, dict[str, Any]]:
    spark.sql(f"CREATE TABLE delta.`{path}` (id BIGINT, v BIGINT) USING delta {ddl}")
    spark.sql(
        f"INSERT INTO delta.`{path}` SELECT id, CAST(0 AS BIGINT) FROM range(0, {SEED_ROWS}, 1, 4)"
    )
    # the seed's files are old: a vacuum has work from its first compaction on
    old = time.time() - 86400
    for file in path.glob("*.parquet"):
        os.utime(file, (old, old))
    return {1: {"kind": "append", "ids": list(range(SEED_ROWS))}}


def _multiset(rows: list[dict[str, Any]]) -> Counter[tuple[int, int]]:
    return Counter((int(r["id"]), int(r["v"])) for r in rows)


def _check(
    race: Race, scenario: Scenario, reply: dict[str, Any], model: Model, spark: DeltaSpark
) -> tuple[list[str], int, int]:
    """What went wrong (nothing, when the race was safe), versions read, rows compared."""
    problems = list(model.problems)
    problems += [f"ours: {e}" for e in race.errors]
    problems += [f"Delta Spark: {f}" for f in reply["failures"]]
    if "LOG_FILE_REMOVED_UNDER_READER" in reply["conflicts"] and not scenario.log_cleanup:
        problems.append("a log file Delta Spark listed was deleted, and no log cleanup ran")
    if "DATA_FILE_VACUUMED_UNDER_READER" in reply["conflicts"] and not scenario.vacuum_zero:
        problems.append("a data file Delta Spark's snapshot referenced was deleted, no vacuum ran")
    if reply.get("stream_error"):
        problems.append(f"Delta Spark's streaming read failed: {reply['stream_error']}")
    if problems:
        return problems, 0, 0
    latest = latest_version(race.path)
    floor = max(race.cleanup_floor, race.vacuum_floor)
    versions = list(range(min(floor, latest), latest + 1))
    tables = spark.read_versions(race.path, versions)
    rows = 0
    for version in versions:
        want = _multiset(rows_list(model.states[version]))
        got = _multiset(tables[version].select(["id", "v"]).to_pylist())
        rows += sum(want.values())
        if got != want:
            lost = sorted((want - got).elements())[:5]
            extra = sorted((got - want).elements())[:5]
            problems.append(f"version {version}: Delta Spark lost {lost}, resurrected {extra}")
    want = _multiset(rows_list(model.states[latest]))
    if _multiset(duckdb_rows(race.path)) != want:
        problems.append("DuckDB reads the latest version differently")
    if _multiset(read_table(load_snapshot(str(race.path))).to_pylist()) != want:
        problems.append("delta-ops reads the latest version differently")
    return problems, len(versions), rows


def _check_row_ids(spark: DeltaSpark, path: Path) -> list[str]:
    """Every row of the latest version has a row id, each id once, none negative and none
    above the table's `delta.rowTracking` high-water mark (the protocol's writer
    requirements)."""
    got = spark.query(
        "SELECT count(*) AS n, count(_metadata.row_id) AS ids, "
        "count(DISTINCT _metadata.row_id) AS distinct_ids, max(_metadata.row_id) AS top, "
        "min(_metadata.row_id) AS bottom "
        f"FROM delta.`{path}`"
    ).to_pylist()[0]
    problems = []
    if not got["n"] == got["ids"] == got["distinct_ids"]:
        problems.append(
            f"row ids: {got['n']} rows, {got['ids']} with an id, {got['distinct_ids']} distinct"
        )
    if got["bottom"] is not None and got["bottom"] < 0:
        problems.append(f"row id {got['bottom']} is negative")
    mark = load_snapshot(str(path)).row_id_high_water_mark
    if got["top"] is not None and (mark is None or got["top"] > mark):
        problems.append(f"row id {got['top']} is above the high-water mark {mark}")
    return problems


def _check_stream(sink: Path, model: Model) -> list[str]:
    """The sink of the streaming read: every row a commit without removes wrote (the seed, the
    appends, stream batches, insert-only merges), each once."""
    got = _multiset(read_table(load_snapshot(str(sink))).to_pylist())
    if got != model.inserted:
        missing = sorted((model.inserted - got).elements())[:5]
        extra = sorted((got - model.inserted).elements())[:5]
        return [f"the streaming read's sink: missing {missing}, extra (read twice) {extra}"]
    return []


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_race_with_delta_spark(
    scenario: Scenario, delta_spark: DeltaSpark, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    seed = int(os.environ.get("RELIABILITY_SEED", "0")) + sum(map(ord, scenario.name))
    path = tmp_path / "table"
    archive = tmp_path / "archive"
    archive.mkdir()
    sink = tmp_path / "sink"
    known = _seed(delta_spark, path, scenario.ddl)
    race = Race(path, archive, random.Random(seed), known=dict(known))
    if scenario.our_spark:
        race.spark = request.getfixturevalue("spark")
        race.our_stream = OurStream(race.spark, path, tmp_path / "ours")
    stop = threading.Event()
    loop = threading.Thread(target=_our_loop, args=(race, scenario, stop), daemon=True)
    loop.start()
    try:
        reply = delta_spark.request(
            {
                "op": "race",
                "path": str(path),
                "seed": seed,
                "writes": WRITES,
                "kinds": list(scenario.writes),
                "first_id": SEED_ROWS,
                "scratch": str(tmp_path / "spark"),
                "sink": str(sink) if scenario.read_stream else None,
            },
            timeout=600 + 30 * WRITES,
        )
    finally:
        stop.set()
        loop.join(timeout=600)
        if race.our_stream is not None:
            race.our_stream.stop()
    if scenario.after is not None:
        scenario.after(race)
    reply.update(delta_spark.request({"op": "race_end"}, timeout=600))
    race.archive_log()
    model = build_model(path, archive, reply["attempts"], reply["batches"], race.known)
    problems, versions, rows = _check(race, scenario, reply, model, delta_spark)
    if scenario.read_stream and not problems:
        problems += _check_stream(sink, model)
    if scenario.row_ids and "row_tracking" in race.done_once and not problems:
        problems += _check_row_ids(delta_spark, path)
    outcomes = Counter(a["outcome"] for a in reply["attempts"])
    REPORT.append(
        f"race {scenario.name} (seed {seed}): Delta Spark {outcomes['committed']} writes "
        f"+ {len(reply['batches'])} stream batches, conflicts {dict(reply['conflicts'])}, "
        f"gave up {outcomes['gave up']}; ours {race.runs} runs, conflicts "
        f"{dict(race.conflicts)}, vacuum deleted {race.deleted}"
        f"{f', appends by {dict(race.writers)}' if race.writers else ''}; {versions} versions "
        f"({rows} rows) read back identically; commits by {dict(model.authors)}"
    )
    TALLY.record(f"race {scenario.name}", "generated", "; ".join(problems) or None)
    assert not problems, "\n".join(problems)
    assert race.runs > 0, "our side never completed a run during the race"
