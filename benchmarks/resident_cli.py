"""The `delta-ops` CLI in one resident process, for timings that exclude start-up on our side
as a warm Spark session excludes it on Delta Spark's.

A fresh `delta-ops` process pays ~0.2-0.3 s of interpreter start-up and imports (numpy,
pyarrow) before it does anything; a Dagster code server, an Airflow worker or a notebook pays
them once. `ResidentCli` starts one child interpreter that imports the CLI once, then runs each
command it is sent (`delta_ops.cli.commands.main(argv)`, its output discarded) and replies with
the command's exit code, its wall time around that call alone, and the child's peak RSS during
it (`VmHWM`, reset before the call by writing 5 to `/proc/self/clear_refs`, as the Delta Spark
server's JVM peak is).

    cli = ResidentCli()
    code, seconds, peak_mb = cli.run(["cleanup", "/tables/t", "--retention", "30 days"])
    cli.close()
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: the child: import the CLI once, then one JSON request (argv) per line, one JSON reply each
_CHILD = """
import contextlib, io, json, sys, time
from delta_ops.cli.commands import main

def peak_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")

print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    argv = json.loads(line)
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")
    sink = io.StringIO()
    started = time.perf_counter()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        code = main(argv)
    seconds = time.perf_counter() - started
    reply = {"code": code, "seconds": seconds, "peak_mb": peak_mb(), "tail": sink.getvalue()[-2000:]}
    print(json.dumps(reply), flush=True)
"""


class ResidentCli:
    """One resident `delta-ops` interpreter (see the module's doc)."""

    def __init__(self, python: str = sys.executable) -> None:
        self.process = subprocess.Popen(
            [python, "-c", _CHILD],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        self._reply()  # ready

    def _reply(self) -> dict:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the resident delta-ops process died (exit {self.process.poll()})")
        return json.loads(line)

    def run(self, argv: list[str]) -> tuple[int, float, float]:
        """Run one command in the resident process: (exit code, wall seconds, peak MB)."""
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(argv) + "\n")
        self.process.stdin.flush()
        reply = self._reply()
        if reply["code"] != 0:
            raise RuntimeError(f"delta-ops {' '.join(argv)}: exit {reply['code']}: {reply['tail']}")
        return reply["code"], reply["seconds"], reply["peak_mb"]

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=60)
