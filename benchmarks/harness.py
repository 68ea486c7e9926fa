"""Time commands as fresh processes and measure their peak RSS; compare ours against theirs.

Peak memory comes from ``os.wait4`` (``ru_maxrss``, KiB on Linux), no ``/usr/bin/time`` needed.
One trap is avoided: on exec, Linux carries the *parent's* RSS high-water mark into the child's
``ru_maxrss`` (the child starts life as a fork/vfork of the parent), so a fat benchmark process
(say, one that just generated a table with pyarrow) would inflate every measurement. Each command
is therefore started by a tiny launcher (``python -I -S``, about 9 MB) that spawns the command,
waits for it with ``os.wait4`` and reports wall time (measured around spawn + wait only, so the
launcher's own start-up is excluded), CPU times and peak RSS. The floor of the RSS measurement is
the launcher's own RSS (see :func:`rss_floor_mb`), far below any Python process under test.

API::

    r = run_fresh([sys.executable, "-c", "import deltalake"])      # one RunResult
    m = measure(cmd, runs=5, warmup=1)                              # Measurement (many runs)
    c = compare(ours_cmd, theirs_cmd, runs=5)                       # alternating ours/theirs
    print(format_result(c, target_wall_ratio=0.5, target_rss_ratio=1.0))
"""

from __future__ import annotations

import math
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

__all__ = [
    "Comparison",
    "Measurement",
    "RunResult",
    "Verdict",
    "alternate",
    "compare",
    "evaluate",
    "format_measurements",
    "format_result",
    "measure",
    "rss_floor_mb",
    "run_fresh",
]

_LAUNCHER = r"""
import os, sys, time
out, argv = sys.argv[1], sys.argv[2:]
t0 = time.perf_counter()
try:
    pid = os.posix_spawnp(argv[0], argv, os.environ)
except OSError as e:
    sys.stderr.write("cannot start %r: %s\n" % (argv[0], e))
    sys.exit(127)
_, status, ru = os.wait4(pid, 0)
wall = time.perf_counter() - t0
with open(out, "w") as f:
    f.write("%r %r %r %d %d" % (wall, ru.ru_utime, ru.ru_stime, ru.ru_maxrss,
                                 os.waitstatus_to_exitcode(status)))
"""


@dataclass
class RunResult:
    """One execution of a command in a fresh process."""

    cmd: list[str]
    returncode: int
    wall_s: float
    user_s: float
    sys_s: float
    max_rss_mb: float
    stdout: str
    stderr: str
    #: the highest summed RSS of the command's process tree (forked workers included),
    #: sampled every TREE_SAMPLE_S; NaN unless asked for (`run_fresh(tree=True)`)
    tree_rss_mb: float = float("nan")

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    @property
    def first_line(self) -> str:
        return self.stdout.strip().splitlines()[0] if self.stdout.strip() else ""

    def error_summary(self, lines: int = 6) -> str:
        tail = self.stderr.strip().splitlines()[-lines:]
        return f"exit {self.returncode}: " + "\n".join(tail)


_COMPILED = False


def compile_package() -> None:
    """Write delta-ops' bytecode once, as `pip install` does for a real installation: this
    machine sets PYTHONDONTWRITEBYTECODE, so an editable checkout would otherwise compile every
    module from source in every fresh process (about 50 ms no installed user pays)."""
    global _COMPILED
    if not _COMPILED:
        package = os.path.join(
            os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "delta_ops"
        )
        subprocess.run([sys.executable, "-m", "compileall", "-q", package], check=True)
        _COMPILED = True


def run_fresh(
    cmd: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    timeout: float | None = 600,
    tree: bool = False,
) -> RunResult:
    """Run ``cmd`` (argv list, no shell) as a fresh process; wall time, CPU, peak RSS, output;
    with `tree`, also the peak of the process tree's summed RSS (sampled)."""
    compile_package()
    cmd = [str(c) for c in cmd]
    with tempfile.TemporaryDirectory(prefix="delta-ops-bench-") as tmp:
        res_path = os.path.join(tmp, "rusage")
        out_path = os.path.join(tmp, "stdout")
        err_path = os.path.join(tmp, "stderr")
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            proc = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _LAUNCHER, res_path, *cmd],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                env=None if env is None else dict(env),
                cwd=cwd,
                start_new_session=True,
            )
            sampler = _TreeSampler(proc.pid) if tree else None
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                raise
            finally:
                if sampler is not None:
                    sampler.stop()
        with open(out_path, encoding="utf-8", errors="replace") as f:
            stdout = f.read()
        with open(err_path, encoding="utf-8", errors="replace") as f:
            stderr = f.read()
        try:
            with open(res_path) as f:
                wall, user, sys_, rss_kib, rc = f.read().split()
        except FileNotFoundError:
            return RunResult(
                cmd, proc.returncode or 127, float("nan"), 0.0, 0.0, 0.0, stdout, stderr
            )
    return RunResult(
        cmd=cmd,
        returncode=int(rc),
        wall_s=float(wall),
        user_s=float(user),
        sys_s=float(sys_),
        max_rss_mb=int(rss_kib) / 1024.0,
        stdout=stdout,
        stderr=stderr,
        tree_rss_mb=sampler.peak_kib / 1024.0 if sampler is not None else float("nan"),
    )


TREE_SAMPLE_S = 0.01


class _TreeSampler:
    """Samples the summed RSS (``/proc/PID/status`` VmRSS) of a launcher's descendants (the
    command and every process it forks) every TREE_SAMPLE_S on a thread; `peak_kib` is the
    highest sum seen. Pages forked workers share with their parent count once per process,
    as the kernel's RSS counts them."""

    def __init__(self, launcher: int) -> None:
        self.launcher = launcher
        self.peak_kib = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._done.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._done.wait(TREE_SAMPLE_S):
            pids = _descendants(self.launcher)
            self.peak_kib = max(self.peak_kib, sum(_rss_kib(p) for p in pids))


def _descendants(pid: int) -> list[int]:
    out: list[int] = []
    todo = [pid]
    while todo:
        parent = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                with open(f"/proc/{parent}/task/{tid}/children") as f:
                    kids = [int(k) for k in f.read().split()]
            except OSError:
                continue
            out += kids
            todo += kids
    return out


def _rss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def rss_floor_mb() -> float:
    """Peak RSS reported for ``/bin/true``: the measurement floor (the launcher's own RSS)."""
    return run_fresh(["true"]).max_rss_mb


@dataclass
class Measurement:
    """Repeated runs of one command (after warm-up). ``error`` is set if the command failed."""

    label: str
    cmd: list[str]
    runs: list[RunResult] = field(default_factory=list)
    error: str | None = None
    output: str = ""  # first stdout line of the warm-up run

    @property
    def ok(self) -> bool:
        return self.error is None and bool(self.runs)

    @property
    def walls(self) -> list[float]:
        return [r.wall_s for r in self.runs]

    @property
    def median_wall_s(self) -> float:
        return statistics.median(self.walls) if self.runs else float("nan")

    @property
    def min_wall_s(self) -> float:
        return min(self.walls) if self.runs else float("nan")

    @property
    def max_wall_s(self) -> float:
        return max(self.walls) if self.runs else float("nan")

    @property
    def max_rss_mb(self) -> float:
        return max(r.max_rss_mb for r in self.runs) if self.runs else float("nan")

    @property
    def median_cpu_s(self) -> float:
        if not self.runs:
            return float("nan")
        return statistics.median(r.user_s + r.sys_s for r in self.runs)

    def to_dict(self) -> dict:
        return {
            "label": self.label,
            "cmd": self.cmd,
            "ok": self.ok,
            "error": self.error,
            "output": self.output,
            "walls_s": self.walls,
            "median_wall_s": self.median_wall_s if self.runs else None,
            "max_rss_mb": self.max_rss_mb if self.runs else None,
            "median_cpu_s": self.median_cpu_s if self.runs else None,
        }


def _warm_up(label: str, cmd: Sequence[str], warmup: int, **kw) -> Measurement:
    m = Measurement(label, [str(c) for c in cmd])
    for _ in range(max(1, warmup)):
        r = run_fresh(cmd, **kw)
        if not r.ok:
            m.error = r.error_summary()
            m.output = r.first_line
            return m
        m.output = r.first_line
    return m


def _add_run(m: Measurement, **kw) -> None:
    if m.error is not None:
        return
    r = run_fresh(m.cmd, **kw)
    if r.ok:
        m.runs.append(r)
    else:
        m.error = r.error_summary()


def measure(
    cmd: Sequence[str],
    runs: int = 5,
    warmup: int = 1,
    *,
    label: str = "",
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    timeout: float | None = 600,
) -> Measurement:
    """``warmup`` untimed runs, then ``runs`` timed runs of ``cmd``, each a fresh process."""
    kw = {"env": env, "cwd": cwd, "timeout": timeout}
    m = _warm_up(label or " ".join(map(str, cmd)), cmd, warmup, **kw)
    for _ in range(runs):
        _add_run(m, **kw)
    return m


@dataclass
class Comparison:
    ours: Measurement
    theirs: Measurement
    name: str = ""

    @property
    def wall_ratio(self) -> float | None:
        if not (self.ours.ok and self.theirs.ok):
            return None
        return self.ours.median_wall_s / self.theirs.median_wall_s

    @property
    def rss_ratio(self) -> float | None:
        if not (self.ours.ok and self.theirs.ok):
            return None
        return self.ours.max_rss_mb / self.theirs.max_rss_mb

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "ours": self.ours.to_dict(),
            "theirs": self.theirs.to_dict(),
            "wall_ratio": self.wall_ratio,
            "rss_ratio": self.rss_ratio,
        }


def compare(
    ours_cmd: Sequence[str],
    theirs_cmd: Sequence[str],
    runs: int = 5,
    warmup: int = 1,
    *,
    name: str = "",
    ours_label: str = "delta-ops",
    theirs_label: str = "delta-rs",
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    timeout: float | None = 600,
) -> Comparison:
    """Warm up each side, then alternate timed runs ours, theirs, ours, theirs, ...

    A side whose warm-up (or any run) fails gets ``error`` set and is not run again; the other
    side is still measured, so a missing implementation of ours still yields delta-rs numbers.
    """
    kw = {"env": env, "cwd": cwd, "timeout": timeout}
    ours = _warm_up(ours_label, ours_cmd, warmup, **kw)
    theirs = _warm_up(theirs_label, theirs_cmd, warmup, **kw)
    for _ in range(runs):
        _add_run(ours, **kw)
        _add_run(theirs, **kw)
    return Comparison(ours=ours, theirs=theirs, name=name)


def alternate(
    cmds: Mapping[str, Sequence[str]],
    runs: int = 5,
    warmup: int = 1,
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    timeout: float | None = 600,
) -> dict[str, Measurement]:
    """Warm up each command (label -> argv), then run them in turn, ``runs`` rounds: the
    same alternation as :func:`compare` for more than two sides."""
    kw = {"env": env, "cwd": cwd, "timeout": timeout}
    out = {label: _warm_up(label, cmd, warmup, **kw) for label, cmd in cmds.items()}
    for _ in range(runs):
        for m in out.values():
            _add_run(m, **kw)
    return out


@dataclass
class Verdict:
    wall_ok: bool | None  # None: not decidable (a side failed)
    rss_ok: bool | None
    target_wall_ratio: float
    target_rss_ratio: float | None

    @property
    def passed(self) -> bool:
        return self.wall_ok is True and (self.target_rss_ratio is None or self.rss_ok is True)

    @property
    def label(self) -> str:
        if self.wall_ok is None:
            return "ERROR"
        return "PASS" if self.passed else "FAIL"


def evaluate(
    c: Comparison, target_wall_ratio: float = 1.0, target_rss_ratio: float | None = 1.0
) -> Verdict:
    """PASS iff ours/theirs median wall <= target and (if given) ours/theirs peak RSS <= target."""
    wr, rr = c.wall_ratio, c.rss_ratio
    return Verdict(
        wall_ok=None if wr is None else wr <= target_wall_ratio,
        rss_ok=None if rr is None or target_rss_ratio is None else rr <= target_rss_ratio,
        target_wall_ratio=target_wall_ratio,
        target_rss_ratio=target_rss_ratio,
    )


def _fmt(x: float, spec: str) -> str:
    width = int(spec.split(".")[0] or 0)
    return "-".rjust(width) if math.isnan(x) else format(x, spec)


def format_measurements(ms: Sequence[Measurement], title: str = "") -> str:
    """A table of measurements (median/min/max wall, CPU, peak RSS, first output line)."""
    rows = [f"== {title} =="] if title else []
    head = f"{'':<26} {'median s':>9} {'min s':>8} {'max s':>8} {'cpu s':>8} {'peak MB':>8}  output"
    rows.append(head)
    rows.append("-" * len(head))
    for m in ms:
        rows.append(
            f"{m.label[:26]:<26} {_fmt(m.median_wall_s, '9.3f')} {_fmt(m.min_wall_s, '8.3f')} "
            f"{_fmt(m.max_wall_s, '8.3f')} {_fmt(m.median_cpu_s, '8.3f')} "
            f"{_fmt(m.max_rss_mb, '8.1f')}  {m.output[:60]}"
        )
        if m.error:
            for line in m.error.splitlines():
                rows.append(f"{'':<26} ! {line}")
    return "\n".join(rows)


def format_result(
    c: Comparison,
    target_wall_ratio: float = 1.0,
    target_rss_ratio: float | None = 1.0,
) -> str:
    """Table of both sides, the ours/theirs ratios and PASS/FAIL against the targets."""
    v = evaluate(c, target_wall_ratio, target_rss_ratio)
    n = len(c.theirs.runs) or len(c.ours.runs)
    out = [format_measurements([c.ours, c.theirs], f"{c.name or 'comparison'} ({n} runs)")]
    wr, rr = c.wall_ratio, c.rss_ratio
    if wr is None:
        failed = [m.label for m in (c.ours, c.theirs) if not m.ok]
        out.append(f"ratio: n/a ({', '.join(failed)} failed)  => {v.label}")
    else:
        wall_s = "PASS" if v.wall_ok else "FAIL"
        out.append(
            f"wall ratio ours/theirs = {wr:.3f}  (target <= {target_wall_ratio:g})  {wall_s}"
        )
        if target_rss_ratio is not None:
            rss_s = "PASS" if v.rss_ok else "FAIL"
            out.append(
                f"peak RSS ratio ours/theirs = {rr:.3f}  (target <= {target_rss_ratio:g})  {rss_s}"
            )
        else:
            out.append(f"peak RSS ratio ours/theirs = {rr:.3f}")
        out.append(f"=> {v.label}")
    return "\n".join(out)
