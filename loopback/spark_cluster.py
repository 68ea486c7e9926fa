"""A real Spark standalone cluster on loopback, started from PySpark's own `spark-class`.

:func:`standalone_cluster` starts a master, `workers` workers (one core each) and a Spark
Connect server that drives an application on them, every one a JVM of its own, listening on
127.0.0.1 only; executors run their Python workers with this interpreter. Each process's
output, the workers' directories (executor logs) and the application's event log are kept
under `root`, so a test can search what the cluster printed::

    with standalone_cluster(tmp_path, env={"AWS_ACCESS_KEY_ID": ...}) as cluster:
        run(["delta-ops", "compact", url, "--engine", "spark",
             "--spark-remote", cluster.connect_url])
        cluster.kill_an_executor()

`env` is what the cluster's processes (and so executors and their Python workers) see beyond
this process's environment: storage credentials given that way never travel in a task.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import psutil

from loopback.servers import REPO, free_port

#: how long a JVM of the cluster may take to listen (a shared 2-core CI box is slow)
START_S = 180.0
EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"


@dataclass(frozen=True)
class Cluster:
    """A running cluster: its master's URL, its Connect server's, where its logs are."""

    master_url: str
    connect_url: str
    root: Path

    def executors(self) -> list[psutil.Process]:
        """The executor JVMs running now (started by this cluster's workers)."""
        found = []
        for proc in psutil.process_iter(["cmdline", "cwd"]):
            # an executor runs in its worker's directory for the application, under root
            if EXECUTOR_CLASS in (proc.info["cmdline"] or []) and str(self.root) in (
                proc.info["cwd"] or ""
            ):
                found.append(proc)
        return found

    def kill_an_executor(self) -> int:
        """SIGKILL one executor (and its Python workers with it); its pid."""
        victim = self.executors()[0]
        for child in victim.children(recursive=True):
            child.kill()
        victim.kill()
        return int(victim.pid)

    def printed(self) -> str:
        """Everything the cluster wrote: process output, executor logs, the event log."""
        texts = []
        for path in sorted(self.root.rglob("*")):
            if path.is_file():
                texts.append(path.read_bytes().decode("utf-8", "replace"))
        return "\n".join(texts)


def _spark_class() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "bin" / "spark-class"


def _wait_until(ready: object, what: str, procs: list[subprocess.Popen[bytes]]) -> None:
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline:
        for proc in procs:
            if proc.poll() is not None:
                raise RuntimeError(f"{what}: a cluster process exited with {proc.returncode}")
        if ready():  # type: ignore[operator]
            return
        time.sleep(0.25)
    raise RuntimeError(f"{what}: not ready after {START_S:.0f} s")


def _listening(port: int) -> bool:
    import socket

    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
        return True
    except OSError:
        return False


def _alive_workers(ui_port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=1) as answer:
            return int(json.load(answer).get("aliveworkers", 0))
    except OSError:
        return 0


@contextmanager
def standalone_cluster(
    root: Path, env: Mapping[str, str] | None = None, workers: int = 2
) -> Iterator[Cluster]:
    """A master, `workers` one-core workers and a Spark Connect server on them (module doc)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "events").mkdir(exist_ok=True)
    environment = {
        **os.environ,
        **(env or {}),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOCAL_HOSTNAME": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p),
    }
    master_port, master_ui, connect_port = (free_port() for _ in range(3))
    master_url = f"spark://127.0.0.1:{master_port}"
    spark_class = str(_spark_class())
    procs: list[subprocess.Popen[bytes]] = []
    with ExitStack() as stack:

        def start(name: str, *args: str) -> None:
            out = stack.enter_context((root / f"{name}.log").open("wb"))
            # a process group of its own: stopping it stops its executors and Python workers
            proc = subprocess.Popen(
                [spark_class, *args],
                env=environment,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            procs.append(proc)

        try:
            start(
                "master",
                "org.apache.spark.deploy.master.Master",
                *("--host", "127.0.0.1", "--port", str(master_port)),
                *("--webui-port", str(master_ui)),
            )
            for n in range(workers):
                work = root / f"worker-{n}"
                start(
                    f"worker-{n}",
                    "org.apache.spark.deploy.worker.Worker",
                    *("--host", "127.0.0.1", "--cores", "1", "--memory", "1g"),
                    *("--webui-port", str(free_port()), "--work-dir", str(work)),
                    master_url,
                )
            _wait_until(lambda: _alive_workers(master_ui) == workers, "the workers", procs)
            conf = {
                "spark.connect.grpc.binding.address": "127.0.0.1",
                "spark.connect.grpc.binding.port": str(connect_port),
                "spark.driver.host": "127.0.0.1",
                "spark.driver.bindAddress": "127.0.0.1",
                "spark.executor.memory": "512m",
                "spark.executor.cores": "1",
                "spark.ui.enabled": "false",
                "spark.eventLog.enabled": "true",
                "spark.eventLog.dir": str(root / "events"),
                "spark.pyspark.python": sys.executable,
                # a task's Python worker exits with it: a running task is a process to see
                "spark.python.worker.reuse": "false",
                "spark.sql.session.timeZone": "UTC",
                "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
            }
            start(
                "connect-server",
                "org.apache.spark.deploy.SparkSubmit",
                *("--master", master_url, "--name", "delta-ops-cluster-test"),
                *("--class", "org.apache.spark.sql.connect.service.SparkConnectServer"),
                *(a for key, value in conf.items() for a in ("--conf", f"{key}={value}")),
                "spark-internal",
            )
            _wait_until(lambda: _listening(connect_port), "the Connect server", procs)
            yield Cluster(master_url, f"sc://127.0.0.1:{connect_port}", root)
        finally:
            for proc in reversed(procs):
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGTERM)
            for proc in procs:
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
