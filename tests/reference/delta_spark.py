"""The tests' client of Delta Spark, the reference engine (tests/reference/delta_spark_server.py).

The server runs under the reference virtualenv (`make reference` makes `.venv-reference`: its
pyspark is older than the product's, so Delta's jars never load in the test process). One server
per test run (the `delta_spark` fixture in tests/reference/conftest.py); requests go one at a
time as JSON lines, rows come back as Arrow IPC files.

A server that cannot start, dies, or does not answer in time raises `ReferenceUnavailable` with
the tail of its log: the reference tier fails, it never skips.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import tempfile
import threading
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pyarrow as pa

REPO = Path(__file__).resolve().parents[2]
SERVER = Path(__file__).with_name("delta_spark_server.py")
#: the reference virtualenv's python (`make reference`); DELTA_OPS_REFERENCE_PYTHON overrides
PYTHON = Path(os.environ.get("DELTA_OPS_REFERENCE_PYTHON", REPO / ".venv-reference/bin/python"))
#: the Ivy cache of Delta's jars (`spark.jars.ivy`), filled by `make reference`
IVY = REPO / "build" / "ivy"
#: a start includes the JVM and, on a fresh clone, the jars' download
START_TIMEOUT = float(os.environ.get("DELTA_OPS_REFERENCE_START_TIMEOUT", "600"))
REQUEST_TIMEOUT = float(os.environ.get("DELTA_OPS_REFERENCE_TIMEOUT", "300"))


class ReferenceUnavailable(RuntimeError):
    """The reference engine could not start or stopped answering."""


class ReferenceError(RuntimeError):
    """Delta Spark refused a request: `kind` is the exception's class, `condition` Spark's error
    condition (`DELTA_...`) when it has one."""

    def __init__(self, kind: str, condition: str | None, message: str) -> None:
        super().__init__(f"{kind} [{condition}]: {message}")
        self.kind = kind
        self.condition = condition
        self.message = message


class DeltaSpark:
    """A running reference server; `close()` stops it."""

    def __init__(self, python: Path = PYTHON, ivy: Path = IVY) -> None:
        if not python.exists():
            raise ReferenceUnavailable(
                f"no reference virtualenv at {python}: run `make reference` (it creates "
                ".venv-reference with Delta Spark and caches its jars under build/ivy)"
            )
        self._scratch = Path(tempfile.mkdtemp(prefix="delta-ops-reference-"))
        self.log_path = self._scratch / "server.log"
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - lives as long as the server
        self._count = 0
        self._replies: queue.Queue[str | None] = queue.Queue()
        self._process = subprocess.Popen(
            [str(python), str(SERVER), "--ivy", str(ivy)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            cwd=self._scratch,
        )
        threading.Thread(target=self._pump, daemon=True).start()
        ready = self._reply(START_TIMEOUT, "start")
        if not ready.get("ok"):
            raise self._unavailable(f"the server did not start: {ready}")
        self.package = str(ready["ready"])

    # ------------------------------------------------------------------ transport
    def _pump(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            self._replies.put(line)
        self._replies.put(None)

    def _tail(self, lines: int = 40) -> str:
        self._log.flush()
        text = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])

    def _unavailable(self, why: str) -> ReferenceUnavailable:
        return ReferenceUnavailable(
            f"Delta Spark (reference): {why}\n--- server log tail ---\n{self._tail()}"
        )

    def _reply(self, timeout: float, what: str) -> dict[str, Any]:
        try:
            line = self._replies.get(timeout=timeout)
        except queue.Empty:
            raise self._unavailable(f"no answer to {what} within {timeout:.0f}s") from None
        if line is None:
            code = self._process.wait()
            raise self._unavailable(f"the server exited (code {code}) during {what}")
        return json.loads(line)

    def request(self, request: dict[str, Any], timeout: float = REQUEST_TIMEOUT) -> dict[str, Any]:
        """Send one request; its reply, or `ReferenceError` when Delta Spark refused it."""
        assert self._process.stdin is not None
        if self._process.poll() is not None:
            raise self._unavailable(f"the server is gone (code {self._process.returncode})")
        self._process.stdin.write(json.dumps(request) + "\n")
        self._process.stdin.flush()
        reply = self._reply(timeout, str(request.get("op")))
        if not reply.get("ok"):
            error = reply.get("error") or {}
            raise ReferenceError(
                str(error.get("type")), error.get("condition"), str(error.get("message"))
            )
        return reply

    def _out(self) -> Path:
        self._count += 1
        return self._scratch / f"result-{self._count}.arrow"

    @staticmethod
    def _load(path: Path) -> pa.Table:
        with pa.memory_map(str(path)) as source:
            table = pa.ipc.open_file(source).read_all()
        path.unlink()
        return table

    # ------------------------------------------------------------------ requests
    def sql(self, statement: str) -> None:
        """Run a statement (DDL/DML) for its effect."""
        self.request({"op": "sql", "sql": statement})

    def query(self, statement: str) -> pa.Table:
        """A statement's result as Arrow."""
        out = self._out()
        self.request({"op": "sql", "sql": statement, "out": str(out)})
        return self._load(out)

    def read(
        self, path: Path | str, version: int | None = None, timestamp: str | None = None
    ) -> pa.Table:
        """The table's rows as Delta Spark reads them (latest, at `version`, or at `timestamp`)."""
        out = self._out()
        self.request(
            {
                "op": "read",
                "path": str(path),
                "version": version,
                "timestamp": timestamp,
                "out": str(out),
            }
        )
        return self._load(out)

    def read_versions(self, path: Path | str, versions: Iterable[int]) -> dict[int, pa.Table]:
        """The rows at each of `versions`, in one request."""
        wanted = list(versions)
        outs = [self._out() for _ in wanted]
        reads = [{"path": str(path), "version": v, "out": str(out)} for v, out in zip(wanted, outs)]
        self.request({"op": "reads", "reads": reads})
        return {v: self._load(out) for v, out in zip(wanted, outs)}

    def checkpoint(self, path: Path | str) -> None:
        """Delta Spark's own checkpoint of the latest version."""
        self.request({"op": "checkpoint", "path": str(path)})

    def call(self, module: str, function: str, **fields: Any) -> dict[str, Any]:
        """`function(spark, request)` of the workload `module` beside the server, run on Delta
        Spark's session (`fields` are the request's); its reply."""
        return self.request({"op": "call", "module": module, "function": function, **fields})

    def history(self, path: Path | str) -> list[dict[str, Any]]:
        """`DESCRIBE HISTORY`, newest first."""
        return self.query(f"DESCRIBE HISTORY delta.`{path}`").to_pylist()

    def detail(self, path: Path | str) -> dict[str, Any]:
        """`DESCRIBE DETAIL`'s one row."""
        (row,) = self.query(f"DESCRIBE DETAIL delta.`{path}`").to_pylist()
        return row

    def close(self) -> None:
        if self._process.poll() is None:
            try:
                self.request({"op": "stop"}, timeout=60)
                self._process.wait(timeout=60)
            except (ReferenceUnavailable, subprocess.TimeoutExpired):
                self._process.kill()
                self._process.wait()
        self._log.close()


def table_relative(url: str, root: Path) -> str:
    """A data file's path under the table `root`, from the path or `file:` URL Delta Spark
    names it by (`VACUUM ... DRY RUN`, `_metadata.file_path`)."""
    path = unquote(urlparse(url).path) if url.startswith("file:") else url
    return os.path.relpath(path, os.path.realpath(root))


def sorted_rows(table: pa.Table) -> list[dict[str, Any]]:
    """Rows as Python values, in a fixed order (Spark returns them in any order)."""
    return sorted(table.to_pylist(), key=row_key)


def same_rows(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> bool:
    """Equal rows, NaN equal to NaN (each side's rows compared by their sort keys)."""
    return [row_key(r) for r in a] == [row_key(r) for r in b]


def row_key(row: dict[str, Any]) -> str:
    return json.dumps(row, sort_keys=True, default=_key_value)


def _key_value(value: Any) -> str:
    """A value's sort key: an instant the same whichever time zone object carries it."""
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value.astimezone(UTC).isoformat()
    if isinstance(value, bytes):
        return value.hex()
    return repr(value)
