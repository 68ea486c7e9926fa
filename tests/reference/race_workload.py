"""The pipeline's side of a race (tests/reference/test_races.py): Delta Spark writing a table
while delta-ops maintains it. Runs inside the reference server (Delta Spark's process), one
`race` request at a time; only the standard library and pyspark/pyarrow of the reference
virtualenv are used here.

Every write attempt sets its own commit tag (`commitInfo.userMetadata`, `race:<seed>:<n>`) and
is described as data (`spec`) before it runs, so the test rebuilds what each committed version
must hold from the log alone: the commit with a tag applies that attempt's spec, whatever the
attempt reported. Attempts Delta Spark refuses with a concurrency error are retried (a new tag
each time) and counted by error class.

Write kinds (`kinds` in the request, drawn with the request's seed):
- `append`: new ids, `v = 0`, three files per append;
- `delete` / `update`: `id % k = r` rows deleted (deletion vectors when the table has them) or
  `v = v + 1`;
- `merge`: some ids of earlier appends (maybe deleted since) set to a new `v`, new ids inserted;
- `optimize`: Delta Spark's OPTIMIZE (its own compaction, `dataChange=false`);
- `stream`: one micro-batch of a `writeStream` into the table (a parquet file dropped into the
  stream's source folder, then `processAllAvailable`); its rows go by the batch id;
- `foreach_batch`: one micro-batch of a second stream whose `foreachBatch` MERGEs the batch into
  the table (the usual streaming upsert): the batch is a merge spec's pairs, and the MERGE is
  committed (and retried on conflicts) from inside the batch function, as an application does;
- `vacuum` / `checkpoint`: Delta Spark's VACUUM (its default retention) and DeltaLog checkpoint
  with its metadata cleanup (the mirror race: their maintenance beside our writers).

With `read_stream` a streaming read of the table (`skipChangeCommits`) runs into a sink table
for the whole race; its error, if any, is in the reply.
"""

from __future__ import annotations

import os
import random
import time
from collections import Counter
from typing import Any

USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"
#: a DELETE or UPDATE matching no row commits anyway, so every write the race counts is in the log
EMPTY_COMMITS = "spark.databricks.delta.skipRecordingEmptyCommits"
ATTEMPTS = 6
#: the streaming read of the race in progress, until `end`
_OPEN: dict[str, Any] = {}


def _is_conflict(exc: BaseException) -> bool:
    text = f"{type(exc).__name__} {exc}"
    markers = (
        "Concurrent",
        "DELTA_CONCURRENT",
        "CONCURRENT_",
        "ProtocolChanged",
        "MetadataChanged",
    )
    return any(marker in text for marker in markers)


def _file_gone(exc: BaseException) -> str | None:
    """A file the write's snapshot listed was deleted before it was read: a log file by a log
    cleanup, a data file by a vacuum at zero retention (the write commits nothing; the
    application's retry reads a newer snapshot)."""
    text = str(exc)
    if "FILE_NOT_EXIST" not in text:
        return None
    return (
        "LOG_FILE_REMOVED_UNDER_READER"
        if "_delta_log" in text
        else "DATA_FILE_VACUUMED_UNDER_READER"
    )


def _spec(kind: str, rng: random.Random, next_id: int, first_id: int) -> dict[str, Any]:
    if kind in ("append", "stream"):
        n = rng.randint(5, 20)
        return {"kind": kind, "ids": list(range(next_id, next_id + n))}
    if kind == "foreach_batch":
        merge = _spec("merge", rng, next_id, first_id)
        return {**merge, "kind": "merge", "via": "foreach_batch"}
    if kind in ("delete", "update"):
        k = rng.choice((7, 11, 13))
        return {"kind": kind, "k": k, "r": rng.randrange(k)}
    if kind == "merge":
        old = rng.sample(range(first_id, next_id), min(3, next_id - first_id))
        new = list(range(next_id, next_id + 2))
        return {"kind": kind, "pairs": [[i, 1000 + rng.randrange(1000)] for i in old + new]}
    return {"kind": kind}


def _sql_of(spec: dict[str, Any], table: str) -> str | None:
    kind = spec["kind"]
    if kind == "delete":
        return f"DELETE FROM {table} WHERE id % {spec['k']} = {spec['r']}"
    if kind == "update":
        return f"UPDATE {table} SET v = v + 1 WHERE id % {spec['k']} = {spec['r']}"
    if kind == "merge":
        values = ", ".join(f"({i}, {v})" for i, v in spec["pairs"])
        return (
            f"MERGE INTO {table} t USING (SELECT * FROM VALUES {values} AS s(id, v)) s "
            "ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = s.v "
            "WHEN NOT MATCHED THEN INSERT (id, v) VALUES (s.id, s.v)"
        )
    if kind == "optimize":
        return f"OPTIMIZE {table}"
    if kind == "vacuum":
        return f"VACUUM {table}"
    return None


class _StreamIn:
    """A `writeStream` from a parquet folder into the table, driven one file at a time."""

    def __init__(self, spark: Any, path: str, scratch: str) -> None:
        import pyarrow as pa

        self.source = os.path.join(scratch, "stream-source")
        os.makedirs(self.source, exist_ok=True)
        self.count = 0
        self.pa = pa
        schema = "id BIGINT, v BIGINT"
        self.query = (
            spark.readStream.schema(schema)
            .parquet(self.source)
            .writeStream.format("delta")
            .option("checkpointLocation", os.path.join(scratch, "stream-in-checkpoint"))
            .outputMode("append")
            .start(path)
        )

    def write(self, ids: list[int]) -> int:
        import pyarrow.parquet as pq

        self.count += 1
        table = self.pa.table(
            {"id": self.pa.array(ids, self.pa.int64()), "v": self.pa.array([0] * len(ids))}
        )
        hidden = os.path.join(self.source, f".batch-{self.count}.parquet")
        pq.write_table(table, hidden)
        os.rename(hidden, os.path.join(self.source, f"batch-{self.count}.parquet"))
        self.query.processAllAvailable()
        return int(self.query.lastProgress["batchId"])


class _ForeachBatchIn:
    """A stream from a parquet folder whose `foreachBatch` MERGEs each batch into the table,
    committing (with retries) through `commit(spec)`, driven one file at a time."""

    def __init__(self, spark: Any, scratch: str, commit: Any) -> None:
        import pyarrow as pa

        self.source = os.path.join(scratch, "foreach-source")
        os.makedirs(self.source, exist_ok=True)
        self.count = 0
        self.pa = pa
        self.commit = commit

        def upsert(batch: Any, batch_id: int) -> None:
            pairs = sorted([int(r["id"]), int(r["v"])] for r in batch.collect())
            if pairs:
                self.commit({"kind": "merge", "via": "foreach_batch", "pairs": pairs})

        self.query = (
            spark.readStream.schema("id BIGINT, v BIGINT")
            .parquet(self.source)
            .writeStream.foreachBatch(upsert)
            .option("checkpointLocation", os.path.join(scratch, "foreach-checkpoint"))
            .start()
        )

    def write(self, pairs: list[list[int]]) -> None:
        import pyarrow.parquet as pq

        self.count += 1
        ids, values = zip(*pairs, strict=True)
        table = self.pa.table(
            {"id": self.pa.array(ids, self.pa.int64()), "v": self.pa.array(values, self.pa.int64())}
        )
        hidden = os.path.join(self.source, f".batch-{self.count}.parquet")
        pq.write_table(table, hidden)
        os.rename(hidden, os.path.join(self.source, f"batch-{self.count}.parquet"))
        self.query.processAllAvailable()


def _read_stream(spark: Any, path: str, sink: str, scratch: str) -> Any:
    return (
        spark.readStream.format("delta")
        .option("skipChangeCommits", "true")
        .load(path)
        .writeStream.format("delta")
        .option("checkpointLocation", os.path.join(scratch, "stream-out-checkpoint"))
        .trigger(processingTime="1 second")
        .start(sink)
    )


def run(spark: Any, request: dict[str, Any]) -> dict[str, Any]:
    """One race: `writes` write attempts of the request's kinds; the reply describes every
    attempt (tag, spec, outcome), the stream batches and the conflicts by error class."""
    path = request["path"]
    table = f"delta.`{path}`"
    rng = random.Random(request["seed"])
    kinds: list[str] = request["kinds"]
    next_id = first_id = int(request["first_id"])
    scratch = request["scratch"]
    pause = float(request.get("pause", 0.0))
    attempts: list[dict[str, Any]] = []
    batches: dict[str, list[int]] = {}
    conflicts: Counter[str] = Counter()
    failures: list[str] = []
    spark.conf.unset(USER_METADATA)
    spark.conf.set(EMPTY_COMMITS, "false")
    stream_in = _StreamIn(spark, path, scratch) if "stream" in kinds else None
    pending = {"n": -1}

    def commit(spec: dict[str, Any], n: int) -> None:
        """Write attempt `n` of `spec`, retried on conflicts (a new tag each time)."""
        for attempt in range(ATTEMPTS):
            tag = f"race:{request['seed']}:{n}:{attempt}"
            record = {"tag": tag, "spec": spec, "outcome": "committed"}
            attempts.append(record)
            spark.conf.set(USER_METADATA, tag)
            try:
                _write(spark, spec, path, table)
                return
            except Exception as exc:  # noqa: BLE001 - classified below
                if _is_conflict(exc):
                    conflicts[_conflict_name(exc)] += 1
                    record["outcome"] = "conflict"
                    continue
                gone = _file_gone(exc)
                if gone is not None:
                    conflicts[gone] += 1
                    record["outcome"] = "file gone"
                    continue
                record["outcome"] = "failed"
                failures.append(f"{spec['kind']} {tag}: {type(exc).__name__}: {exc}"[:600])
                return
            finally:
                spark.conf.unset(USER_METADATA)
        record["outcome"] = "gave up"

    foreach_in = (
        _ForeachBatchIn(spark, scratch, lambda spec: commit(spec, pending["n"]))
        if "foreach_batch" in kinds
        else None
    )
    stream_out = (
        _read_stream(spark, path, request["sink"], scratch) if request.get("sink") else None
    )
    try:
        if stream_out is not None:
            # the read's first batch is the table as it is now, before any write of the race
            stream_out.processAllAvailable()
        for n in range(int(request["writes"])):
            kind = rng.choice(kinds)
            spec = _spec(kind, rng, next_id, first_id)
            next_id += len(spec.get("ids", ())) + 2 * (spec["kind"] == "merge")
            if kind == "stream":
                assert stream_in is not None
                try:
                    batches[str(stream_in.write(spec["ids"]))] = spec["ids"]
                except Exception as exc:  # noqa: BLE001 - the reply says what failed
                    failures.append(f"stream batch {n}: {type(exc).__name__}: {exc}"[:600])
                    stream_in = None
                    kinds = [k for k in kinds if k != "stream"]
                continue
            if kind == "foreach_batch":
                assert foreach_in is not None
                pending["n"] = n
                try:
                    foreach_in.write(spec["pairs"])
                except Exception as exc:  # noqa: BLE001 - the reply says what failed
                    failures.append(f"foreachBatch batch {n}: {type(exc).__name__}: {exc}"[:600])
                    foreach_in = None
                    kinds = [k for k in kinds if k != "foreach_batch"]
            else:
                commit(spec, n)
            if pause:
                time.sleep(pause)
    except Exception as exc:  # noqa: BLE001 - the reply says what stopped the race
        failures.append(f"the race stopped: {type(exc).__name__}: {exc}"[:2000])
    finally:
        spark.conf.unset(EMPTY_COMMITS)
        if stream_in is not None:
            _stop(stream_in.query)
        if foreach_in is not None:
            _stop(foreach_in.query)
    # the streaming read goes on until `end` (our side may still be writing)
    _OPEN["stream_out"] = stream_out
    return {
        "ok": True,
        "attempts": attempts,
        "batches": batches,
        "conflicts": dict(conflicts),
        "failures": failures,
    }


def end(spark: Any, request: dict[str, Any]) -> dict[str, Any]:
    """After our side stopped: the streaming read catches up and stops; its error, if any."""
    stream_out = _OPEN.pop("stream_out", None)
    if stream_out is None:
        return {"ok": True, "stream_error": None}
    try:
        stream_out.processAllAvailable()
        error = stream_out.exception()
        stream_error = None if error is None else str(error)[:2000]
    except Exception as exc:  # noqa: BLE001 - a stream that died mid-race is a finding
        stream_error = f"{type(exc).__name__}: {exc}"[:2000]
    finally:
        _stop(stream_out)
    return {"ok": True, "stream_error": stream_error}


def _stop(query: Any) -> None:
    try:
        query.stop()
    except Exception:  # noqa: BLE001, S110 - stopping a failed query
        pass


def _conflict_name(exc: BaseException) -> str:
    text = str(exc)
    for word in text.replace("[", " ").replace("]", " ").split():
        if word.startswith(
            ("DELTA_CONCURRENT", "Concurrent", "DELTA_PROTOCOL_CHANGED", "DELTA_METADATA_CHANGED")
        ):
            return word.rstrip(":.,")
    return type(exc).__name__


def _write(spark: Any, spec: dict[str, Any], path: str, table: str) -> None:
    kind = spec["kind"]
    if kind == "append":
        ids = spec["ids"]
        (
            spark.range(ids[0], ids[-1] + 1, 1, 3)
            .selectExpr("id", "CAST(0 AS BIGINT) AS v")
            .write.format("delta")
            .mode("append")
            .save(path)
        )
        return
    if kind == "checkpoint":
        jvm = spark.sparkContext._jvm
        jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, path).checkpoint()
        return
    sql = _sql_of(spec, table)
    if sql is None:
        raise ValueError(f"unknown write kind {kind!r}")
    spark.sql(sql).collect()
