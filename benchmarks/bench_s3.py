"""Benchmark: maintenance on an object store with 20 ms added to every request (issues 13, 28),
against delta-rs.

The store (``--store``: S3, Azurite, fake-gcs-server; each in a process of its own, whose CPU
time is reported per run so the server is seen not to be the floor) sits behind
a proxy on loopback that delays every request by ``--latency-ms`` (20), as a real store's round
trip would, and counts the requests of every run (by kind: listings, bulk deletes, PUTs, ...).
delta-ops runs through ``--client`` (``native``: obstore, the default; ``fsspec``; or ``both``).
On GCS both sides write through the test proxy's XML shim (fake-gcs-server takes object_store's
XML uploads only through it). S3 is served by ``--server``: ``seaweedfs`` (the default:
SeaweedFS' ``weed mini``, a production S3 server that keeps objects on disk and checks every
request's signature, built by ``make bench-setup``; ``loopback.servers.serve_seaweedfs``) or
``moto`` (the store tests' server, whose one Python process spends more CPU on a 10,000-key
vacuum than both clients). The table: one commit adding N+1 files (N = 10,000 by default, tiny
parquet files), one commit removing N of them 30 days ago.

- vacuum (full): ``delta-ops vacuum s3://... --mode full --retention 0h --force
  --in-flight-grace 0s`` against ``DeltaTable.vacuum(retention_hours=0, full=True,
  enforce_retention_duration=False, dry_run=False)``; after every run exactly the one live data
  file must be left, and both sides must have deleted the same N files.
  Goal: median wall ours/theirs <= 0.5.
- checkpoint: ``delta-ops checkpoint`` against ``DeltaTable.create_checkpoint()``. After every
  run the log is downloaded and the checkpoint put alone (with its ``_last_checkpoint``) into a
  scratch table, which ``deltalake`` must load with the state it loads from the two commits
  (version, protocol, metaData, live files with sizes and ``numRecords``); both checkpoints must
  hold the same rows of each other action kind and the same tombstones.
- cleanup: ``delta-ops cleanup`` against ``DeltaTable.cleanup_metadata()``. On this server every
  log file is minutes old, so both only list and decide (nothing expires under the truncated-day
  cutoff): the cost of asking. The log is listed before and after every run: both sides must
  have deleted the same set of log files (none here).

Before every run (untimed) the table is restored through the server directly (no delay).
Each command runs as a fresh process (start-up included, as a scheduled job pays it). Every
check runs before the op's ratio is printed; a difference prints ``MISMATCH: ...`` and exits 1.

    python benchmarks/bench_s3.py [--store s3|azure|gcs] [--server seaweedfs|moto]
        [--client native|fsspec|both] [--runs 3] [--files 10000] [--latency-ms 20]

Goals (issue 28): vacuum <= 0.5x delta-rs, checkpoint and cleanup <= 1.0x, client CPU <= 1.0x,
requests per run <= delta-rs'. Exit status: 0 PASS (every goal met), 1 FAIL (a goal missed, or
MISMATCH), 3 ours failed.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks.harness import Comparison, Measurement, evaluate, format_result, run_fresh
from benchmarks.verify import (
    CheckpointContents,
    Mismatch,
    checkpoint_contents,
    checkpoint_only_copy,
    contents_difference,
    read_state,
    report_mismatch,
    set_difference,
    state_difference,
)
from loopback.proxy import StoreProxy
from loopback.servers import (
    BUCKET,
    StoreServer,
    serve_azure,
    serve_gcs,
    serve_s3_process,
    serve_seaweedfs,
)

DATA = ROOT / "benchmarks" / ".data"
RESULTS = DATA / "results"
VERIFY = DATA / "s3-verify"
LOG = "_delta_log/"
DAY_MS = 86_400_000

THEIRS = {
    "vacuum": "d.vacuum(retention_hours=0, full=True, enforce_retention_duration=False, dry_run=False)",
    "checkpoint": "d.create_checkpoint()",
    "cleanup": "d.cleanup_metadata()",
}
THEIRS_SCRIPT = """
import json, sys
from deltalake import DeltaTable
d = DeltaTable(sys.argv[1], storage_options=json.loads(sys.argv[2]))
print({op})
"""


def _log(files: int, size: int) -> dict[str, bytes]:
    """The two commits: N+1 adds of `size` bytes each, then N removes 30 days old."""
    old = int(time.time() * 1000) - 30 * DAY_MS
    schema = {
        "type": "struct",
        "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}],
    }
    first = [
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
        {
            "metaData": {
                "id": "bench-s3",
                "format": {"provider": "parquet", "options": {}},
                "schemaString": json.dumps(schema),
                "partitionColumns": [],
                "configuration": {},
                "createdTime": old,
            }
        },
        {"commitInfo": {"timestamp": old, "operation": "WRITE"}},
    ]
    add = {"partitionValues": {}, "size": size, "modificationTime": old, "dataChange": True}
    first += [{"add": {**add, "path": f"part-{i:05d}.parquet"}} for i in range(files + 1)]
    second = [{"commitInfo": {"timestamp": old + 1, "operation": "DELETE"}}]
    second += [
        {
            "remove": {
                "path": f"part-{i:05d}.parquet",
                "deletionTimestamp": old + 1,
                "dataChange": True,
            }
        }
        for i in range(files)
    ]
    return {
        "00000000000000000000.json": "\n".join(map(json.dumps, first)).encode(),
        "00000000000000000001.json": "\n".join(map(json.dumps, second)).encode(),
    }


class Table:
    """The benchmark table on the server, restorable between runs."""

    def __init__(self, fs: Any, prefix: str, files: int) -> None:
        self.fs, self.prefix, self.files = fs, prefix, files
        out = io.BytesIO()
        pq.write_table(pa.table({"id": pa.array([1], pa.int64())}), out)
        self.parquet = out.getvalue()
        self.log = _log(files, len(self.parquet))

    def _objects(self) -> list[str]:
        self.fs.invalidate_cache()
        return [p.lstrip("/") for p in self.fs.find(self.prefix)]

    def restore(self, data: bool) -> None:
        existing = self._objects()
        log_objects = [p for p in existing if "/_delta_log/" in p]
        if log_objects:
            self.fs.rm(log_objects)
        self.fs.pipe({f"{self.prefix}/_delta_log/{k}": v for k, v in self.log.items()})
        if data:
            present = {p.rsplit("/", 1)[-1] for p in existing if "/_delta_log/" not in p}
            missing = {
                f"{self.prefix}/part-{i:05d}.parquet": self.parquet
                for i in range(self.files + 1)
                if f"part-{i:05d}.parquet" not in present
            }
            for start in range(0, len(missing), 2000):
                self.fs.pipe(dict(list(missing.items())[start : start + 2000]))

    def listing(self) -> set[str]:
        """Every object of the table, by its name under the table's prefix."""
        return {p[len(self.prefix) + 1 :] for p in self._objects()}

    def download_log(self, local: Path) -> None:
        """Copy the table's `_delta_log` (untimed, through the server directly) under `local`."""
        if local.exists():
            shutil.rmtree(local)
        keys = [p for p in self._objects() if "/_delta_log/" in p]
        for key, data in self.fs.cat(keys).items():
            target = local / key[len(self.prefix) + 1 :]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)

    @property
    def live_file(self) -> str:
        return f"part-{self.files:05d}.parquet"


class Verifier:
    """What one op's run must have done, checked after every run of either side; the outcome
    of each run must equal every earlier one's, of either side."""

    def __init__(self, op: str, table: Table) -> None:
        self.op, self.table = op, table
        self.outcomes: dict[str, Any] = {}
        self.contents: dict[str, CheckpointContents] = {}
        if op == "checkpoint":
            pristine = VERIFY / "pristine" / "_delta_log"
            shutil.rmtree(pristine.parent, ignore_errors=True)
            pristine.mkdir(parents=True)
            for name, data in table.log.items():
                (pristine / name).write_bytes(data)
            self.expected = read_state(pristine.parent, VERIFY / "expected")

    def check(self, label: str, before: set[str], after: set[str]) -> None:
        """Raises Mismatch naming the first difference."""
        gone = before - after
        if self.op == "checkpoint":
            self._check_checkpoint(label)
            outcome: Any = ("deleted", frozenset(gone))
            what = f"objects deleted by the checkpoint of {label}"
        elif self.op == "cleanup":
            outcome = frozenset(n for n in gone if n.startswith(LOG))
            what = f"log files deleted by the cleanup of {label}"
        else:
            left = {n for n in after if not n.startswith(LOG)}
            difference = set_difference(
                f"data files left by the vacuum of {label}",
                left,
                "the live file",
                {self.table.live_file},
            )
            if difference:
                raise Mismatch(difference)
            outcome = frozenset(n for n in gone if not n.startswith(LOG))
            what = f"data files deleted by the vacuum of {label}"
        for other, earlier in self.outcomes.items():
            difference = set_difference(what, outcome, f"by that of {other}", earlier)
            if difference:
                raise Mismatch(difference)
        self.outcomes[label] = outcome

    def _check_checkpoint(self, label: str) -> None:
        local = VERIFY / label
        self.table.download_log(local)
        log, version = local / "_delta_log", 1
        scratch = checkpoint_only_copy(log, version, VERIFY / f"{label}-checkpoint-only")
        got = read_state(scratch, VERIFY / f"{label}-state")
        where = f"the checkpoint {label} wrote (read alone by deltalake)"
        difference = state_difference("the two commits", self.expected, where, got)
        if difference:
            raise Mismatch(difference)
        contents = checkpoint_contents(log, version)
        for other, theirs in self.contents.items():
            difference = contents_difference(label, contents, other, theirs)
            if difference:
                raise Mismatch(difference)
        self.contents[label] = contents

    def describe(self) -> str:
        if self.op == "checkpoint":
            rows = next(iter(self.contents.values())).rows
            return (
                f"same work: both checkpoints read back by deltalake as the log's state "
                f"({self.expected.summary()}), {rows['remove']} tombstones each"
            )
        outcome = next(iter(self.outcomes.values()))
        kind = "log" if self.op == "cleanup" else "data"
        return f"same work: both sides deleted the same {len(outcome)} {kind} files"


def server_cpu_s(pid: int | None) -> float:
    """CPU seconds (user + system) the server process has used so far (0 when unknown)."""
    if pid is None:
        return 0.0
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Counted:
    """What the proxy and the server saw of each run of one side: requests (in all and by
    kind) and the server's CPU time."""

    def __init__(self) -> None:
        self.requests: list[int] = []
        self.kinds: list[dict[str, int]] = []
        self.server_cpu_s: list[float] = []
        #: this process' CPU during the run: the proxy's (its thread is all that runs here)
        self.proxy_cpu_s: list[float] = []

    def to_dict(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "requests_by_kind": self.kinds[-1] if self.kinds else {},
            "server_cpu_s": self.server_cpu_s,
            "proxy_cpu_s": self.proxy_cpu_s,
        }

    def summary(self) -> str:
        kinds = ", ".join(f"{k} {v}" for k, v in sorted((self.kinds or [{}])[-1].items()))
        cpu, proxy = _median(self.server_cpu_s), _median(self.proxy_cpu_s)
        return (
            f"requests {self.requests} ({kinds}); server CPU {cpu:.3f} s, proxy CPU "
            f"{proxy:.3f} s (medians)"
        )


def _median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2] if values else 0.0


def _measure(
    label: str,
    cmd: list[str],
    env: dict[str, str],
    runs: int,
    table: Table,
    data: bool,
    verifier: Verifier,
    proxy: StoreProxy,
    server_pid: int | None,
) -> tuple[Measurement, Counted]:
    """`runs` fresh-process runs, the table restored (untimed) before each and the run's work
    checked by `verifier` after it (raises Mismatch); the proxy's and server's counts of each."""
    m = Measurement(label=label, cmd=cmd)
    counted = Counted()
    for _ in range(runs):
        table.restore(data)
        before = table.listing()
        requests, kinds, cpu = proxy.requests, dict(proxy.counts), server_cpu_s(server_pid)
        own = time.process_time()
        result = run_fresh(cmd, env=env, timeout=1800)
        counted.proxy_cpu_s.append(time.process_time() - own)
        counted.requests.append(proxy.requests - requests)
        counted.kinds.append(
            {k: v - kinds.get(k, 0) for k, v in proxy.counts.items() if v - kinds.get(k, 0)}
        )
        counted.server_cpu_s.append(server_cpu_s(server_pid) - cpu)
        if not result.ok:
            m.error = result.error_summary()
            return m, counted
        verifier.check(label, before, table.listing())
        print(
            f"  {label:<16} {result.wall_s:7.3f} s  cpu {result.user_s + result.sys_s:6.3f} s"
            f"  requests {counted.requests[-1]}",
            flush=True,
        )
        m.runs.append(result)
    return m, counted


GOALS = {"vacuum": 0.5, "checkpoint": 1.0, "cleanup": 1.0}
SERVERS = {"s3": serve_seaweedfs, "azure": serve_azure, "gcs": serve_gcs}
#: --server: what serves --store s3
S3_SERVERS = {"seaweedfs": serve_seaweedfs, "moto": serve_s3_process}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--store", choices=sorted(SERVERS), default="s3")
    p.add_argument("--server", choices=sorted(S3_SERVERS), default="seaweedfs", help="S3's server")
    p.add_argument("--client", choices=["native", "fsspec", "both"], default="native")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--files", type=int, default=10_000)
    p.add_argument("--latency-ms", type=float, default=20.0)
    p.add_argument("--ops", default="checkpoint,cleanup,vacuum")
    a = p.parse_args(argv)
    try:
        return run(a)
    except Mismatch as exc:
        return report_mismatch("bench_s3", exc)


def _through(server: StoreServer, proxy: StoreProxy, client: str) -> dict[str, str]:
    """Our storage options reaching the server through the delaying proxy."""
    options = dict(server.through(client).options)
    if server.name == "azure":
        account = server.endpoint.rsplit("/", 1)[1]
        options["connection_string"] = options["connection_string"].replace(
            f"BlobEndpoint={server.endpoint};", f"BlobEndpoint={proxy.url}/{account};"
        )
    else:
        options["endpoint_url"] = proxy.url
    return options


def _theirs(server: StoreServer, proxy: StoreProxy, scratch: Path) -> dict[str, str]:
    """deltalake's storage options reaching the server through the delaying proxy."""
    if server.name == "s3":
        return {**server.peer_options, "AWS_ENDPOINT_URL": proxy.url}
    if server.name == "azure":
        account = server.endpoint.rsplit("/", 1)[1]
        return {**server.peer_options, "AZURE_STORAGE_ENDPOINT": f"{proxy.url}/{account}"}
    account_file = scratch / "gcs-through-proxy.json"
    account_file.write_text(
        json.dumps(
            {
                "gcs_base_url": proxy.url,
                "disable_oauth": True,
                "client_email": "",
                "private_key": "",
                "private_key_id": "",
            }
        )
    )
    return {"google_service_account": str(account_file)}


def run(a: argparse.Namespace) -> int:
    """The benchmark; raises Mismatch when the sides did not do the same work."""
    env = {**os.environ, "AWS_EC2_METADATA_DISABLED": "true"}
    py = sys.executable
    summary: dict[str, Any] = {}
    clients = ["native", "fsspec"] if a.client == "both" else [a.client]
    passed = True
    ours_failed = False
    VERIFY.mkdir(parents=True, exist_ok=True)
    serve = S3_SERVERS[a.server] if a.store == "s3" else SERVERS[a.store]
    with serve() as server:
        # GCS: both sides write through the XML shim in front of fake-gcs-server
        upstream = (server.native_options or {}).get("endpoint_url", server.endpoint)
        if server.name != "gcs":
            upstream = server.endpoint.rsplit("/", 1)[0] if server.name == "azure" else upstream
        with StoreProxy(upstream, delay_s=a.latency_ms / 1000) as proxy:
            direct = server.fsspec()
            table = Table(direct, f"{BUCKET}/bench", a.files)
            url = server.url("bench")
            theirs_opts = _theirs(server, proxy, VERIFY)
            print(f"restoring {a.files + 1} files on {server.name} ...", flush=True)
            table.restore(data=True)
            for op in a.ops.split(","):
                extra = (
                    ["--mode", "full", "--retention", "0h", "--force", "--in-flight-grace", "0s"]
                    if op == "vacuum"
                    else []
                )
                data = op == "vacuum"
                print(f"{op} on {server.name} ({a.latency_ms:g} ms per request):", flush=True)
                verifier = Verifier(op, table)
                theirs_cmd = [py, "-c", THEIRS_SCRIPT.format(op=THEIRS[op]), url]
                theirs_cmd.append(json.dumps(theirs_opts))
                theirs, theirs_counted = _measure(
                    "delta-rs", theirs_cmd, env, a.runs, table, data, verifier, proxy, server.pid
                )
                for client in clients:
                    options = _through(server, proxy, client)
                    flags = [
                        x for k, v in options.items() for x in ("--storage-option", f"{k}={v}")
                    ]
                    ours_cmd = [py, "-m", "delta_ops.cli", op, url, "--json", *extra, *flags]
                    label = f"delta-ops {client}"
                    ours, counted = _measure(
                        label, ours_cmd, env, a.runs, table, data, verifier, proxy, server.pid
                    )
                    if ours.ok and theirs.ok:
                        print(verifier.describe(), flush=True)
                    name = f"{server.name} {op}, {a.files} files, {client}"
                    comparison = Comparison(ours=ours, theirs=theirs, name=name)
                    print(format_result(comparison, GOALS[op], None))
                    print(f"  ours:     {counted.summary()}")
                    print(f"  delta-rs: {theirs_counted.summary()}")
                    verdict = evaluate(comparison, GOALS[op], None)
                    cpu_ok = ours.ok and theirs.ok and ours.median_cpu_s <= theirs.median_cpu_s
                    fewer = max(counted.requests, default=0) <= min(
                        theirs_counted.requests, default=0
                    )
                    print(
                        f"  client CPU ours <= theirs: {cpu_ok}; requests ours <= theirs: {fewer}"
                    )
                    passed = passed and verdict.passed and cpu_ok and fewer
                    ours_failed = ours_failed or not ours.ok
                    summary[f"{op}/{client}"] = {
                        **comparison.to_dict(),
                        "ours_counts": counted.to_dict(),
                        "theirs_counts": theirs_counted.to_dict(),
                        "goal_wall_ratio": GOALS[op],
                    }
            print(f"proxy requests in all: {proxy.requests}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    name = f"bench_{a.store}-moto" if a.store == "s3" and a.server == "moto" else f"bench_{a.store}"
    (RESULTS / f"{name}.json").write_text(
        json.dumps(
            {
                "store": a.store,
                "server": a.server if a.store == "s3" else a.store,
                "files": a.files,
                "latency_ms": a.latency_ms,
                "comparisons": summary,
                "verdict": "PASS" if passed else "FAIL",
            },
            indent=2,
        )
        + "\n"
    )
    if ours_failed:
        return 3
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
