"""Maintenance on a real Spark standalone cluster (issue 46): a master and two workers in JVMs of
their own, a Spark Connect server driving them, the tables on S3 (moto), reached by executors
through the store only.

The CLI runs purge, Z-order, liquid clustering, compaction, checkpoint and vacuum with
``--engine spark --spark-remote`` against the cluster and, on a copy of each table, with the
local engine: the rows, the file counts and the commits' operations come out the same. The
storage credentials are in the cluster's environment (as an instance role or a cluster's
secret scope would put them), never in a task: they appear in nothing the cluster, the CLI or
the history table wrote. An executor killed mid-rewrite leaves no commit of a partial rewrite,
and once the rewrite is re-run and the table vacuumed, no file outside the log.

One cluster for the module (five JVMs and the moto server: about a minute to start on CI).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pytest

from delta_ops import cli
from delta_ops.storage import Storage
from delta_ops.table.snapshot import load_snapshot
from delta_ops.table.writer import write_arrow
from loopback.servers import BUCKET, StoreServer, serve_s3, storage_args
from loopback.spark_cluster import Cluster, standalone_cluster
from tests.support import deltalake_rows
from tests.support.rewrite_support import dv_table

pytestmark = pytest.mark.spark

#: the credentials executors and the CLI find in their environment
KEY_ID = "AKIACLUSTERTEST0001"
SECRET = f"cluster-secret-{uuid.uuid4().hex}"


@pytest.fixture(scope="module")
def s3() -> StoreServer:
    with serve_s3() as server:
        yield server


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, s3) -> Cluster:
    secrets = {"AWS_ACCESS_KEY_ID": KEY_ID, "AWS_SECRET_ACCESS_KEY": SECRET}
    with standalone_cluster(tmp_path_factory.mktemp("cluster"), env=secrets) as running:
        yield running


def _upload(local: Path, s3: StoreServer, name: str) -> str:
    """`local`'s files under s3://lake/<name>; its URL."""
    import s3fs

    fs = s3fs.S3FileSystem(**s3.options)
    fs.put(str(local) + "/", f"{BUCKET}/{name}/", recursive=True)
    return s3.url(name)


#: the environment of a CLI run against the cluster: the credentials are only there
CLI_ENV = {**os.environ, "AWS_ACCESS_KEY_ID": KEY_ID, "AWS_SECRET_ACCESS_KEY": SECRET}


def _cluster_command(cluster: Cluster, s3: StoreServer, args: list[str]) -> list[str]:
    """`delta-ops ARGS --json --engine spark --spark-remote ...`: the storage options name
    only the endpoint (the credentials come from the environment)."""
    command = [sys.executable, "-m", "delta_ops.cli", *args, "--json"]
    command += ["--engine", "spark", "--spark-remote", cluster.connect_url]
    return command + storage_args({"endpoint_url": s3.endpoint})


def _cli_on_cluster(
    cluster: Cluster, s3: StoreServer, args: list[str]
) -> subprocess.CompletedProcess[str]:
    """:func:`_cluster_command` run to its end, in a process of its own."""
    return subprocess.run(
        _cluster_command(cluster, s3, args),
        check=False,
        env=CLI_ENV,
        capture_output=True,
        text=True,
        timeout=600,
    )


def _cli_locally(s3: StoreServer, args: list[str], capsys) -> dict:
    assert cli.main([*args, "--json", *storage_args(s3.options)]) == 0
    return json.loads(capsys.readouterr().out)


def _facts(url: str, s3: StoreServer) -> tuple[list[dict], int, list[str]]:
    """Rows (delta-rs), live file count, and the operations of the commits, oldest first."""
    snapshot = load_snapshot(url, storage_options=s3.options)
    storage = Storage.open(url, s3.options)
    operations = []
    for version in range(snapshot.version + 1):
        for line in storage.read_bytes(storage.log_file(f"{version:020d}.json")).splitlines():
            action = json.loads(line)
            if "commitInfo" in action:
                operations.append(action["commitInfo"]["operation"])
    return deltalake_rows(url, s3.peer_options), snapshot.num_files, operations


STEPS = [
    ["purge"],
    ["compact", "--zorder-by", "id"],  # Z-order: each cube a task on the cluster
    ["cluster-by", "id"],  # metadata only (no engine): run by the CLI itself on both tables
    ["compact", "--full"],  # liquid clustering by the table's columns, on the cluster
    ["compact"],
    ["checkpoint"],
    ["vacuum", "--retention", "0h", "--force", "--in-flight-grace", "0s"],
]
#: the steps that take no engine: run the same way (locally) for both tables
NO_ENGINE = {"cluster-by"}


def test_maintenance_over_connect_on_the_cluster_as_the_local_engine(cluster, s3, tmp_path, capsys):
    source = dv_table(tmp_path, {"delta.enableRowTracking": "true"})
    on_cluster = _upload(source, s3, "dv-cluster")
    local = _upload(source, s3, "dv-local")
    history = s3.url("_history")
    rows_before = deltalake_rows(on_cluster, s3.peer_options)
    for step in STEPS:
        if step[0] in NO_ENGINE:
            for url in (on_cluster, local):
                _cli_locally(s3, [step[0], url, *step[1:]], capsys)
            continue
        done = _cli_on_cluster(cluster, s3, [step[0], on_cluster, *step[1:], "--history", history])
        assert done.returncode == 0, done.stderr
        remote = json.loads(done.stdout)
        here = _cli_locally(s3, [step[0], local, *step[1:]], capsys)
        assert remote.get("files_removed") == here.get("files_removed")
        assert remote.get("files_added") == here.get("files_added")
        assert remote.get("deleted") is None or len(remote["deleted"]) == len(here["deleted"])
        assert SECRET not in done.stdout + done.stderr
    assert _facts(on_cluster, s3) == _facts(local, s3)
    rows = deltalake_rows(on_cluster, s3.peer_options)
    assert rows == [r for r in rows_before if r["id"] in (0, 2, 3, 11)] != []
    # the credentials reached the executors (they read and wrote) but nothing printed them
    assert SECRET not in cluster.printed()
    history_files = Storage.open(history, s3.options)
    for path in history_files.walk(lambda name: False).paths:
        assert SECRET.encode() not in history_files.read_bytes(history_files.join(path)), path


def _rewrite_table(s3: StoreServer, tmp_path: Path) -> str:
    """Two partitions of 24 small files each (2,000 rows a file): two compaction tasks that
    each read and write for a while."""
    table = tmp_path / "big"
    for i in range(48):
        ids = pa.array(range(i * 2000, (i + 1) * 2000), pa.int64())
        day = pa.array(["a" if i % 2 else "b"] * 2000)
        write_arrow(table, pa.table({"id": ids, "day": day}), partition_by=["day"])
    return _upload(table, s3, "kill")


def _python_task_running(cluster: Cluster) -> bool:
    """Whether an executor has a Python worker running a task (workers are not reused)."""
    return any(len(e.children(recursive=True)) > 1 for e in cluster.executors())


def test_an_executor_killed_mid_rewrite_commits_no_partial_rewrite(cluster, s3, tmp_path):
    url = _rewrite_table(s3, tmp_path)
    rows, version = (
        deltalake_rows(url, s3.peer_options),
        load_snapshot(url, storage_options=s3.options).version,
    )
    command = _cluster_command(cluster, s3, ["compact", url])
    run = subprocess.Popen(command, env=CLI_ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300
    while not _python_task_running(cluster) and run.poll() is None:
        assert time.monotonic() < deadline, "no rewrite task started"
        time.sleep(0.02)
    killed = run.poll() is None and cluster.kill_an_executor()
    _, err = run.communicate(timeout=600)
    after = load_snapshot(url, storage_options=s3.options)
    assert killed, "the rewrite ended before an executor could be killed"
    if run.returncode != 0:  # the job failed with the executor: nothing committed
        assert after.version == version, err
        done = _cli_on_cluster(cluster, s3, ["compact", url])  # the re-run finishes
        assert done.returncode == 0, done.stderr
    else:  # Spark ran the killed task again elsewhere: one whole rewrite
        assert after.version == version + 1
    assert load_snapshot(url, storage_options=s3.options).num_files == 2  # one file per partition
    assert deltalake_rows(url, s3.peer_options) == rows
    vacuum = ["vacuum", url, "--retention", "0h", "--force", "--in-flight-grace", "0s"]
    assert _cli_on_cluster(cluster, s3, vacuum).returncode == 0
    snapshot = load_snapshot(url, storage_options=s3.options)
    live = set(snapshot.files.column("path").to_pylist())
    storage = Storage.open(url, s3.options)
    data = {p for p in storage.walk(lambda name: name == "_delta_log").paths}
    assert data == live  # what the killed attempt wrote is gone too
    shutil.rmtree(tmp_path / "big")
