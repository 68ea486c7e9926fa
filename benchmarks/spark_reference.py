"""The benchmarks' client of Delta Spark (`benchmarks/spark_reference_server.py`).

    spark = SparkReference()               # starts the server: JVM, session, Delta's jars
    print(spark.startup_s)                 # the start-up, reported apart
    spark.clear_peak()
    seconds = spark.sql("OPTIMIZE delta.`/t`")   # the call's time inside the warm session
    print(spark.peak_rss_mb())             # the JVM's peak RSS since clear_peak()
    spark.close()

The server runs under the reference virtualenv (`make reference`; `DELTA_OPS_REFERENCE_PYTHON`
overrides `.venv-reference/bin/python`), its jars from the Ivy cache `build/ivy`. Peak memory is
the JVM's (the server's `java` descendant): `VmHWM` of `/proc/PID/status`, reset before each
operation by writing 5 to `/proc/PID/clear_refs`.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SERVER = Path(__file__).with_name("spark_reference_server.py")
PYTHON = Path(os.environ.get("DELTA_OPS_REFERENCE_PYTHON", ROOT / ".venv-reference/bin/python"))
IVY = ROOT / "build" / "ivy"


class ReferenceFailed(RuntimeError):
    """The server did not start, died, or refused a request."""


class SparkReference:
    """A running Delta Spark server; `close()` stops it."""

    def __init__(
        self, driver_memory: str = "1g", conf: dict[str, str] | None = None, timeout: float = 900
    ) -> None:
        if not PYTHON.exists():
            raise ReferenceFailed(f"no reference virtualenv at {PYTHON}: run `make reference`")
        self.timeout = timeout
        self.log_path = Path(tempfile.mkdtemp(prefix="bench-reference-")) / "server.log"
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - lives as long as the server
        args = [str(PYTHON), str(SERVER), "--ivy", str(IVY), "--driver-memory", driver_memory]
        for key, value in (conf or {}).items():
            args += ["--conf", f"{key}={value}"]
        started = time.perf_counter()
        self._process = subprocess.Popen(
            args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, text=True
        )
        self._replies: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        ready = self._reply("start")
        #: wall time from spawning the server to its first answered query (JVM, jars, session)
        self.startup_s = time.perf_counter() - started
        self.package = str(ready.get("ready"))
        self.java_pid = self._find_java()

    def _pump(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            self._replies.put(line)
        self._replies.put(None)

    def _tail(self) -> str:
        self._log.flush()
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-30:])

    def _reply(self, what: str) -> dict[str, Any]:
        try:
            line = self._replies.get(timeout=self.timeout)
        except queue.Empty:
            raise ReferenceFailed(f"no answer to {what}\n{self._tail()}") from None
        if line is None:
            raise ReferenceFailed(f"the server exited during {what}\n{self._tail()}")
        reply: dict[str, Any] = json.loads(line)
        if not reply.get("ok"):
            raise ReferenceFailed(f"{what}: {reply.get('error')}")
        return reply

    def _find_java(self) -> int:
        """The JVM: the server's descendant whose command is `java`."""
        pending, seen = [self._process.pid], []
        while pending:
            pid = pending.pop()
            seen.append(pid)
            try:
                children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
            except OSError:
                continue
            pending.extend(int(c) for c in children)
        for pid in seen:
            try:
                if Path(f"/proc/{pid}/comm").read_text().strip() == "java":
                    return pid
            except OSError:
                continue
        raise ReferenceFailed(f"no java process under the server (pids {seen})")

    def request(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self._process.stdin is not None
        self._process.stdin.write(json.dumps(request) + "\n")
        self._process.stdin.flush()
        return self._reply(str(request.get("op")))

    # ------------------------------------------------------------------ operations
    def sql(self, statement: str) -> float:
        """Run a statement; its wall time inside the session."""
        return float(self.request({"op": "sql", "sql": statement})["seconds"])

    def checkpoint(self, path: Path | str) -> float:
        return float(self.request({"op": "checkpoint", "path": str(path)})["seconds"])

    def cleanup(self, path: Path | str) -> float:
        return float(self.request({"op": "cleanup", "path": str(path)})["seconds"])

    def summary(self, path: Path | str) -> dict[str, Any]:
        """`rows`, `sum_id`, `num_files`, `version` as Delta Spark reads the table."""
        return self.request({"op": "summary", "path": str(path)})

    def clear_cache(self) -> None:
        self.request({"op": "clear_cache"})

    # ------------------------------------------------------------------ memory
    def clear_peak(self) -> None:
        """Reset the JVM's peak RSS (`VmHWM`) to its current RSS."""
        Path(f"/proc/{self.java_pid}/clear_refs").write_text("5")

    def peak_rss_mb(self) -> float:
        """The JVM's peak RSS since the last `clear_peak` (or its start)."""
        for line in Path(f"/proc/{self.java_pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        raise ReferenceFailed("no VmHWM in /proc status")

    def close(self) -> None:
        if self._process.poll() is None:
            try:
                self.request({"op": "stop"})
                self._process.wait(timeout=60)
            except (ReferenceFailed, subprocess.TimeoutExpired):
                self._process.kill()
                self._process.wait()
        self._log.close()


if __name__ == "__main__":  # a smoke test: start, report, stop
    reference = SparkReference()
    print(
        f"{reference.package}: started in {reference.startup_s:.1f} s, JVM pid {reference.java_pid}"
    )
    print(f"JVM peak RSS {reference.peak_rss_mb():.0f} MB")
    reference.close()
    sys.exit(0)
