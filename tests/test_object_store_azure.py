"""Tables on Azure Blob Storage, against Azurite on loopback, started by the test run (issue 13).

Azurite comes from the repository's package.json (`make venv` installs it); commits are
created with adlfs' exclusive upload, which Azure refuses for a taken name, and `deltalake`
(its own Azure client) reads the result.
"""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator

import pytest
from deltalake import DeltaTable

from delta_ops.ops.checkpoint import checkpoint
from delta_ops.storage import Storage
from delta_ops.table.snapshot import load_snapshot
from tests.store_support import forced_vacuum, write_history
from tests.support import REPO

ACCOUNT = "devstoreaccount1"
# Azurite's published development key (not a secret)
ACCOUNT_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)
AZURITE = REPO / "node_modules" / ".bin" / "azurite-blob"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def blob_url() -> Iterator[str]:
    assert AZURITE.exists(), "Azurite is missing: run `make venv` (npm install)"
    port = _free_port()
    proc = subprocess.Popen(
        [
            str(AZURITE),
            "--blobHost",
            "127.0.0.1",
            "--blobPort",
            str(port),
            "--inMemoryPersistence",
            "--skipApiVersionCheck",
            "--silent",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.1)
    url = f"http://127.0.0.1:{port}/{ACCOUNT}"
    import adlfs

    adlfs.AzureBlobFileSystem(connection_string=_connection(url)).mkdir("lake")
    yield url
    proc.terminate()
    proc.wait(timeout=10)


def _connection(blob_url: str) -> str:
    return (
        f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={ACCOUNT_KEY};"
        f"BlobEndpoint={blob_url};"
    )


def _ids(table: str, blob_url: str, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    monkeypatch.setenv("AZURITE_BLOB_STORAGE_URL", blob_url.rsplit("/", 1)[0])
    theirs = {
        "AZURE_STORAGE_ACCOUNT_NAME": ACCOUNT,
        "AZURE_STORAGE_ACCOUNT_KEY": ACCOUNT_KEY,
        "AZURE_STORAGE_USE_EMULATOR": "true",
    }
    data = DeltaTable(table, storage_options=theirs).to_pyarrow_table()
    return sorted(data.column("id").to_pylist())


def test_every_op_on_azure_and_deltalake_reads_the_result(
    blob_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    url = "az://lake/events"
    options = {"connection_string": _connection(blob_url)}
    write_history(url, options, (0, 10))
    assert Storage.open(url, options).supports_conditional_create
    # written then read back at once: a stale listing cache would miss the new checkpoint
    result = checkpoint(url, storage_options=options)
    assert load_snapshot(url, storage_options=options).segment.checkpoint_version == result.version
    out = forced_vacuum(url, options, capsys)
    assert out["num_deleted"] == 2 and len(out["commits"]) == 2
    assert _ids(url, blob_url, monkeypatch) == [99]
