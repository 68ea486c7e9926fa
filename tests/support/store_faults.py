"""What the store fault tests share (issue 28, issue 52 item 5): running the CLI as a user
does against a store reached through a fault proxy, and the checks every case ends with.

    code, errors = fault_cli(capsys, {**options, "endpoint_url": proxy.url}, "vacuum", url, *FORCED)
    assert ends_well(code, errors)
    reads_the_same(store, url, rows)

`tests/storage/test_object_store_faults.py` (S3, Azure Blob, GCS) uses it; its per-store
`Dialect` says how each store's endpoint is pointed at the proxy.
"""

from __future__ import annotations

import pytest

from delta_ops import cli
from delta_ops.service.history import OperationHistory, OperationRecord, Status
from delta_ops.storage import Storage
from delta_ops.table.snapshot import load_snapshot
from loopback.servers import StoreServer, storage_args
from tests.support import deltalake_rows

#: vacuum everything unreferenced now (no retention, no grace for in-flight writes)
FORCED = ["--retention", "0h", "--force", "--in-flight-grace", "0s"]
#: few, quick retries, so a fault that never ends fails the op in seconds: obstore's options,
#: and botocore's under s3fs (typed, through the CLI's KEY:=JSON form)
QUICK = {
    "native": {"max_retries": "2", "retry_timeout": "5"},
    "fsspec": {"config_kwargs:": '{"retries": {"max_attempts": 2}}'},
}


def fault_cli(
    capsys: pytest.CaptureFixture[str], options: dict[str, str], *args: str
) -> tuple[int, list[str]]:
    """The CLI run `args` (command, table, flags) with `options` (QUICK retries added for the
    client they name): its exit code and its error lines (warnings left out)."""
    quick = QUICK[options.get("client", "native")]
    code = cli.main([*args, *storage_args({**options, **quick}), "--json"])
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    errors = [line for line in err if not line.startswith("delta-ops: WARNING")]
    return code, errors


def ends_well(code: int, errors: list[str]) -> bool:
    """Success, or one line naming the failure (exit 1 or 2, never 70: an internal error)."""
    return code == 0 or (code in (1, 2) and len(errors) == 1 and errors[0].startswith("delta-ops"))


def orphans(storage: Storage) -> int:
    """How many of the planted `orphan-NNNN.parquet` files the table's folder still holds."""
    return sum("orphan-" in p for p in storage.walk(lambda n: n.startswith("_")).paths)


def reads_the_same(
    store: StoreServer, url: str, rows: list[dict[str, int]], files: int = 2
) -> None:
    """deltalake (its own client) reads `rows`, and the table still has its `files` live files."""
    assert deltalake_rows(url, store.peer_options) == rows
    assert load_snapshot(url, storage_options=store.options).num_files == files


def history_record(table: str) -> OperationRecord:
    """A row of the operation history: a checkpoint of `table` that succeeded."""
    return OperationRecord(
        start_ms=0, end_ms=1, table=table, operation="checkpoint", status=Status.SUCCEEDED
    )


def history_rows(history: OperationHistory) -> list[tuple[str, str]]:
    rows = history.read(["operation", "status"]).to_pylist()
    return sorted((row["operation"], row["status"]) for row in rows)


__all__ = [
    "FORCED",
    "QUICK",
    "ends_well",
    "fault_cli",
    "history_record",
    "history_rows",
    "orphans",
    "reads_the_same",
]
