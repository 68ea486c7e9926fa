"""A store that cannot create only-if-absent (issue 13): checkpoints still work, commits are
refused with a message that says how to declare a single writer, and declaring it works.

`plainmem://` is fsspec's real in-memory filesystem under a protocol delta-ops does not trust
for exclusive creates, standing in for an S3-compatible server without conditional PUT. The
native client's probe meets a real one: moto behind a proxy that drops `If-None-Match`.
"""

from __future__ import annotations

import fsspec
import pyarrow as pa
import pytest
from fsspec.implementations.memory import MemoryFileSystem

from delta_ops import cli
from delta_ops.ops.checkpoint import checkpoint
from delta_ops.storage import Storage
from delta_ops.table.snapshot import load_snapshot
from delta_ops.table.transaction import CommitRefused
from delta_ops.table.writer import write_arrow


class PlainMemoryFileSystem(MemoryFileSystem):
    protocol = ("plainmem",)


fsspec.register_implementation("plainmem", PlainMemoryFileSystem, clobber=True)


def _rows(n: int) -> pa.Table:
    return pa.table({"id": pa.array(range(n), pa.int64())})


def test_commits_need_a_declared_single_writer(capsys: pytest.CaptureFixture[str]) -> None:
    url = "plainmem://lake/refused"
    with pytest.raises(CommitRefused, match="single_writer=true"):
        write_arrow(url, _rows(2))
    write_arrow(url, _rows(2), storage_options={"single_writer": "true"})
    assert load_snapshot(url).version == 0
    # the CLI says the same in one line, and takes the declaration as a storage option
    storage = Storage.open(url)
    storage.write_atomic(storage.join("orphan.parquet"), b"x")
    args = ["vacuum", url, "--retention", "0h", "--force", "--in-flight-grace", "0s"]
    assert cli.main(args) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "single_writer=true" in err[0]
    assert load_snapshot(url).version == 0 and storage.exists(storage.join("orphan.parquet"))
    assert cli.main([*args, "--storage-option", "single_writer=true"]) == 0
    assert not storage.exists(storage.join("orphan.parquet"))
    assert load_snapshot(url).version == 2  # VACUUM START and END


def test_a_v2_checkpoint_completes_without_conditional_writes() -> None:
    url = "plainmem://lake/v2"
    options = {"single_writer": "true"}
    write_arrow(
        url, _rows(2), configuration={"delta.checkpointPolicy": "v2"}, storage_options=options
    )
    write_arrow(url, _rows(1), storage_options=options)
    result = checkpoint(url, storage_options=options)
    assert result.kind == "v2" and result.skipped_existing is None
    snapshot = load_snapshot(url)
    assert snapshot.segment.checkpoint_version == 1 and snapshot.num_files == 2
    sidecars = Storage.open(url).list_log("_sidecars")
    referenced = [n for n in result.written if n.startswith("_sidecars/")]
    assert len(sidecars) == len(referenced)  # nothing orphaned


def test_the_native_probe_finds_a_server_that_ignores_if_none_match() -> None:
    from delta_ops.storage import table_storage
    from loopback.proxy import StoreProxy
    from loopback.servers import serve_s3

    with serve_s3() as s3, StoreProxy(s3.endpoint, drop_headers=frozenset({"if-none-match"})) as p:
        table_storage._PROBED.clear()
        options = {**s3.options, "endpoint_url": p.url, "client": "native"}
        url = s3.url("no-conditional-put")
        assert Storage.open(url, options).client == "native"
        with pytest.raises(CommitRefused, match="single_writer=true"):
            write_arrow(url, _rows(2), storage_options=options)
        write_arrow(url, _rows(2), storage_options={**options, "single_writer": "true"})
        assert load_snapshot(url, storage_options=options).version == 0
        probes = [e for e in Storage.open(url, options).list_tree("_delta_log")]
        assert not [e for e in probes if "probe" in e.name]  # removed after a failed probe
        # the same server without the proxy honours it: probed once more, as its own endpoint
        direct = {**s3.options, "client": "native"}
        assert Storage.open(url, direct).supports_conditional_create
        table_storage._PROBED.clear()


def test_the_native_probe_leaves_nothing_in_the_table() -> None:
    """On a store that honours conditional writes, the probe object is deleted once it has
    answered: a table the native client writes to holds no probe, and one an older delta-ops
    left behind (a hidden name readers skip) is deleted by the next probe."""
    from delta_ops.storage import table_storage
    from delta_ops.storage.table_storage import NATIVE_PROBE_NAME
    from loopback.servers import serve_s3

    with serve_s3() as s3:
        options = {**s3.options, "client": "native"}
        url = s3.url("probed")
        table_storage._PROBED.clear()
        write_arrow(url, _rows(2), storage_options=options)
        storage = Storage.open(url, options)
        assert storage.client == "native"
        assert not [e.name for e in storage.list_tree("_delta_log") if "probe" in e.name]
        # a probe an older version kept: the next process's probe still answers, and removes it
        storage.put_if_absent(storage.log_file(NATIVE_PROBE_NAME), b"1")
        table_storage._PROBED.clear()
        assert Storage.open(url, options).supports_conditional_create
        assert not [e.name for e in storage.list_tree("_delta_log") if "probe" in e.name]
        table_storage._PROBED.clear()


def test_processes_probing_at_once_do_not_answer_each_other(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two processes probe one endpoint at once (B's whole probe runs between A's two
    creates). With one shared probe name, B's create was refused by A's probe, B deleted it,
    A's second create went through, and A judged the store unconditional and refused its
    commit (seen in the three-process commit race on S3 and GCS). Each probe has a name of its
    own: both answer that the store honours conditional writes, and nothing is left."""
    from delta_ops.storage import table_storage
    from delta_ops.storage.native_store import NativeStore
    from loopback.servers import serve_s3

    with serve_s3() as s3:
        options = {**s3.options, "client": "native"}
        url = s3.url("probing")
        a, b = Storage.open(url, options), Storage.open(url, options)
        real_put = NativeStore.put
        answers: list[bool] = []
        b_started: list[str] = []

        def put(self: NativeStore, path: str, data: bytes, *, create: bool) -> None:
            real_put(self, path, data, create=create)
            if "conditional-probe" in path and not b_started:
                b_started.append(path)
                table_storage._PROBED.clear()  # B is another process: a cache of its own
                answers.append(b.supports_conditional_create)
                table_storage._PROBED.clear()

        monkeypatch.setattr(NativeStore, "put", put)
        table_storage._PROBED.clear()
        try:
            assert a.supports_conditional_create and answers == [True]
            assert not [e.name for e in a.list_tree("_delta_log") if "probe" in e.name]
        finally:
            table_storage._PROBED.clear()
