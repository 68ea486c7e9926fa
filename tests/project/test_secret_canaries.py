"""Storage credentials never show in anything delta-ops prints, logs, records or reports (issue 52.4).

A canary secret sits in every credential field of every store: the S3 access key, secret key
and session token (moto on loopback accepts any), the Azure account key (Azurite's, the one it
accepts, so the runs succeed; the canary is the key itself) and a SAS token (a canary, refused:
the error paths), the GCS service-account JSON (its private key and key id; the emulator needs
no OAuth). Then every output of a front end is searched for any of them:

- the CLI: plans (``--dry-run``), ``--json`` results, delta-ops' log records at every level,
  every library's at INFO (what ``-v`` shows), what ``-v`` prints (tracebacks of internal errors with ``DELTA_OPS_TRACEBACK=1``), refusals and errors
  (a missing table, a retention refused, an option the native client has no name for);
- the operation history the runs recorded, on the same store, read back row by row;
- Dagster: every event of a maintenance run (metadata, materializations, logs) and the
  history it records.

Libraries' DEBUG records are not searched: botocore's print every request's headers, the
session token among them, by design (a process that logs them at DEBUG has chosen to).
Airflow (XCom, asset events, task logs, rendered templates) is
``tests/airflow/test_secrets.py``: Airflow runs in a process of its own.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import dagster as dg
import pyarrow as pa
import pytest

from delta_ops import cli
from delta_ops.dagster import (
    DeltaMaintenanceResource,
    DeltaTableTarget,
    build_delta_maintenance_defs,
)
from delta_ops.service.history import OperationHistory
from delta_ops.table.writer import write_arrow
from loopback.servers import AZURE_ACCOUNT, AZURE_KEY, SERVERS, StoreServer, storage_args

#: in every canary secret, and in nothing else
CANARY = "CANARYx9q"
S3_SECRETS = {
    "key": f"AKIA{CANARY}KEY",
    "secret": f"{CANARY}-secret-access-key",
    "token": f"{CANARY}-session-token",
}
GCS_KEY_ID = f"{CANARY}-key-id"
GCS_PRIVATE_KEY = f"-----BEGIN PRIVATE KEY-----\\n{CANARY}privatekey\\n-----END PRIVATE KEY-----\\n"
SAS_TOKEN = f"sv=2021-08-06&ss=b&srt=sco&sp=rwdlac&se=2030-01-01T00:00:00Z&sig={CANARY}sig"
#: Azurite's key is the secret its runs authenticate with: a chunk of it is searched for too
AZURE_SECRET = AZURE_KEY[10:40]


def _secret_options(store: StoreServer, client: str) -> dict[str, Any]:
    """The store's options with every credential field holding a canary (or, for Azure's
    account key, the real key, which is searched for)."""
    if store.name == "s3":
        return {"endpoint_url": store.endpoint, **S3_SECRETS, "client": client}
    if store.name == "azure":
        return {
            "account_name": AZURE_ACCOUNT,
            "account_key": AZURE_KEY,
            "connection_string": (
                f"DefaultEndpointsProtocol=http;AccountName={AZURE_ACCOUNT};"
                f"AccountKey={AZURE_KEY};BlobEndpoint={store.endpoint};"
            ),
            "client": client,
        }
    account = {
        "type": "service_account",
        "gcs_base_url": store.native_options["endpoint_url"] if store.native_options else "",
        "disable_oauth": True,
        "client_email": "maintenance@example.iam.gserviceaccount.com",
        "private_key": GCS_PRIVATE_KEY.replace("\\n", "\n"),
        "private_key_id": GCS_KEY_ID,
    }
    return {"token": account, "client": client}


def _refused_options(store: StoreServer, client: str) -> dict[str, Any] | None:
    """Options with a canary credential the store refuses (the error paths); None where the
    client takes a minute of retries to give up (adlfs on a refused SAS)."""
    if store.name == "azure" and client == "fsspec":
        return None
    if store.name == "azure":
        return {
            "account_name": AZURE_ACCOUNT,
            "sas_token": SAS_TOKEN,
            "account_host": store.endpoint.removeprefix("http://"),
            "client": client,
        }
    if store.name == "s3":  # an option the native client has no name for, holding secrets
        kwargs = {"region_name": "us-east-1", "aws_secret_access_key": S3_SECRETS["secret"]}
        return {"endpoint_url": store.endpoint, "client_kwargs": kwargs, "client": client}
    return {**_secret_options(store, client), "endpoint_url": "http://127.0.0.1:9"}


#: (store, client) pairs: GCS' service-account JSON is the native client's form only
CASES = [("s3", "native"), ("s3", "fsspec"), ("azure", "native"), ("azure", "fsspec")]
CASES.append(("gcs", "native"))


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, StoreServer]]:
    running: dict[str, StoreServer] = {}
    contexts = {name: SERVERS[name]() for name in ("s3", "azure", "gcs")}
    try:
        for name, context in contexts.items():
            running[name] = context.__enter__()
        yield running
    finally:
        for name in running:
            contexts[name].__exit__(None, None, None)


def _leaks(text: str) -> list[str]:
    """The lines of `text` that hold a canary or the Azure key."""
    secrets = (CANARY, AZURE_SECRET, AZURE_KEY)
    return [line for line in text.splitlines() if any(s in line for s in secrets)]


def _cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = cli.main(args)
    out = capsys.readouterr()
    return code, out.out + out.err


def _args(options: dict[str, Any]) -> list[str]:
    """Storage options as CLI arguments (a value that is no string as ``KEY:=JSON``)."""
    strings = {k: v for k, v in options.items() if isinstance(v, str)}
    other = [
        f"--storage-option={k}:={json.dumps(v)}" for k, v in options.items() if k not in strings
    ]
    return storage_args(strings) + other


@pytest.mark.parametrize(("name", "client"), CASES)
def test_no_cli_output_log_error_or_history_row_holds_a_credential(
    servers: dict[str, StoreServer],
    name: str,
    client: str,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = servers[name].through(client)
    options = _secret_options(servers[name], client)
    table = store.url("canary")
    history = store.url("history")
    for i in range(3):
        write_arrow(table, pa.table({"id": [i]}), storage_options=options)
    monkeypatch.setenv("DELTA_OPS_TRACEBACK", "1")
    caplog.set_level(logging.INFO)  # every library at what -v shows
    caplog.set_level(logging.DEBUG, logger="delta_ops")  # ours at every level
    said: list[str] = []
    runs = [
        (0, ["-v", "inspect", table, "--json"]),
        (0, ["-v", "checkpoint", table, "--dry-run"]),
        (0, ["-v", "checkpoint", table, "--json", "--history", history]),
        (0, ["-v", "vacuum", table, "--dry-run", "--json"]),
        (0, ["-v", "vacuum", table, "--history", history]),
        (1, ["-v", "vacuum", table, "--retention", "1h", "--history", history]),  # refused
        (2, ["-v", "cleanup", store.url("missing"), "--history", history]),
    ]
    for expected, args in runs:
        code, text = _cli([*args, *_args(options)], capsys)
        assert code == expected, f"{args}: {text}"
        said.append(text)
    refused = _refused_options(servers[name], client)
    if refused is not None:
        code, text = _cli(["-v", "inspect", table, *_args(refused)], capsys)
        assert code != 0, text
        said.append(text)
    said += [record.getMessage() for record in caplog.records]
    said += [str(record.exc_info) for record in caplog.records if record.exc_info]
    rows = OperationHistory(history, options).read().to_pylist()
    assert {row["status"] for row in rows} >= {"succeeded", "failed"}, rows
    said += [json.dumps(row, default=str) for row in rows]
    leaked = [line for text in said for line in _leaks(text)]
    assert not leaked, leaked


def test_no_dagster_event_metadata_or_history_row_holds_a_credential(
    servers: dict[str, StoreServer],
) -> None:
    store = servers["s3"]
    options = _secret_options(store, "native")
    table = store.url("dagster_canary")
    history = store.url("dagster_history")
    for i in range(3):
        write_arrow(table, pa.table({"id": [i]}), storage_options=options)
    defs = build_delta_maintenance_defs(
        [DeltaTableTarget("canary", table)],
        name="canary",
        resource=DeltaMaintenanceResource(storage_options=options),
        history=history,
    )
    instance = dg.DagsterInstance.ephemeral()
    said: list[str] = []
    for action, config, succeeds in [
        ("checkpoint", {}, True),
        ("vacuum", {"dry_run": True}, True),
        ("vacuum", {"retention": "1h"}, False),  # refused
    ]:
        job = defs.resolve_job_def(f"canary_{action}_job")
        result = job.execute_in_process(
            run_config={"ops": {f"canary_{action}": {"config": config}}},
            instance=instance,
            raise_on_error=False,
        )
        assert result.success == succeeds, action
        for event in instance.all_logs(result.run_id):
            said.append(repr(event))
    rows = OperationHistory(history, options).read().to_pylist()
    assert len(rows) >= 2, rows
    said += [json.dumps(row, default=str) for row in rows]
    leaked = [line for text in said for line in _leaks(text)]
    assert not leaked, leaked
