"""The Airflow provider as Airflow and its users meet it: discovered through its entry point, an
operator for every registered operation with the CLI's options, a bad value or a misspelled
name refused in one line naming the operation and the argument, a task log listing at most
`max_listed` files, and connections turned into storage options (an S3 table maintained
through one).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from delta_ops.cli.commands import main as cli
from delta_ops.errors import ConcurrentModification, InvalidValue, NotADeltaTable
from delta_ops.ops.registry import OPERATIONS
from delta_ops.table.writer import write_arrow
from loopback.servers import serve_s3
from tests.support import REPO
from tests.support.airflow_support import (
    airflow_env,
    airflow_home,
    dag_module,
    define_connection,
    task_states,
    xcom,
)

GUIDE = (REPO / "docs" / "airflow.md").read_text()

#: a value each kind of option refuses, as a user would mistype it
BAD = {
    "duration": "30",  # no unit
    "count": "0",
    "ratio": "150%",
    "size": "huge",
    "choice": "fastest",
    "flag": "yes",
    "time": "yesterday-ish",
    "version": "-1",
}


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return airflow_home(tmp_path_factory.getbasetemp())


# ------------------------------------------------------------------------------ discovery
def test_airflow_discovers_the_provider_its_hook_and_connection_type(home: Path) -> None:
    from airflow.providers_manager import ProvidersManager
    from airflow.sdk.providers_manager_runtime import ProvidersManagerTaskRuntime

    from delta_ops.airflow.provider import get_provider_info
    from delta_ops.version import __version__

    manager = ProvidersManager()
    provider = manager.providers["delta-ops"]
    assert provider.version == __version__
    assert provider.data["connection-types"][0]["connection-type"] == "delta_ops"
    hook = ProvidersManagerTaskRuntime().hooks["delta_ops"]  # what a task's connection uses
    assert hook is not None and hook.hook_class_name == "delta_ops.airflow.hook.DeltaOpsHook"
    # every module the provider names imports (Airflow lists them in `providers` commands)
    info = get_provider_info()
    for kind in ("operators", "sensors", "hooks", "triggers"):
        for module in info[kind][0]["python-modules"]:
            __import__(module)


def test_airflow_providers_list_shows_it(home: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "airflow", "providers", "list", "-o", "json"],
        env={**os.environ, **airflow_env(home)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    listed = {p["package_name"]: p for p in json.loads(done.stdout)}
    assert "delta-ops" in listed


# ------------------------------------------------------------------ operators = registry
def test_every_registered_operation_has_its_operator(home: Path) -> None:
    from delta_ops.airflow import operators
    from delta_ops.airflow.operators import OPERATORS, operator_for, operator_name

    assert set(OPERATORS) == set(OPERATIONS)
    for name, operation in OPERATIONS.items():
        cls = getattr(operators, operator_name(operation))
        assert cls is OPERATORS[name] is operator_for(name) is operator_for(operation.command)
        assert cls.operation is operation
        assert cls.__module__ == "delta_ops.airflow.operators"
        offered = [o.name for o in operation.options if not o.cli_only]
        assert list(cls.template_fields) == [
            "table",
            "storage_options",
            *(["version"] if operation.at_version else []),
            *offered,
        ]
        task = cls(task_id=f"t_{name.replace('-', '_')}", table="/data/t")
        # the defaults are the registry's, parsed as the CLI parses them
        assert operation.parse({o: getattr(task, o) for o in offered}) == operation.parse({})
        # a value is kept under its option's name (restore's `version` is an option; the
        # version checkpoint acts on is the CLI's --version)
        for option in operation.options:
            if option.kind.value in ("count", "version") and not option.cli_only:
                given = cls(task_id="given", table="/data/t", **{option.name: "3"})
                parsed = operation.parse({option.name: getattr(given, option.name)})
                assert getattr(parsed, option.name) == 3
        if operation.at_version:
            assert cls(task_id="at", table="/data/t", version="4")._version() == 4
        assert cls.__name__ in operators.__all__
        # the guide's table of operators lists it, linking its how-to page
        assert f"| [`{cls.__name__}`](airflow/operators/{name}.md) |" in GUIDE


@pytest.mark.parametrize(
    "operation,option",
    [
        (op.name, option.name)
        for op in OPERATIONS.values()
        for option in op.options
        if not option.cli_only and option.kind.value in BAD
    ],
)
def test_a_bad_value_is_refused_by_the_clis_parser_naming_the_argument(
    home: Path, operation: str, option: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from delta_ops.airflow.operators import OPERATORS

    spec = next(o for o in OPERATIONS[operation].options if o.name == option)
    bad = BAD[spec.kind.value]
    with pytest.raises(InvalidValue) as refused:
        OPERATORS[operation](task_id="bad", table="/data/t", **{option: bad})
    if spec.kind.value == "flag":  # the CLI's flags take no value; its parser is the same
        assert str(refused.value) == f"{operation}: {option}: {bad!r} is not true or false"
        return
    # the same parser's words, naming the operation and the Python argument, not the flag
    said = str(refused.value)
    assert said.startswith(f"{operation}: {option}: "), said
    assert cli([OPERATIONS[operation].command, "/data/t", spec.flag, bad]) == 2
    clis = capsys.readouterr().err.removeprefix(f"delta-ops: error: {spec.flag}: ")
    assert said == f"{operation}: {option}: {clis}".rstrip("\n")


@pytest.mark.parametrize(
    "arguments,refusal",
    [
        (
            {"retension": "7d"},
            (
                "vacuum: no argument 'retension' (did you mean 'retention'?); its options:"
                " retention, mode, force, engine"
            ),
        ),
        ({"delta_ops_conn": "lake"}, "vacuum: no argument 'delta_ops_conn' (did you mean"),
    ],
)
def test_a_misspelled_argument_is_refused_in_one_line(
    home: Path, arguments: dict[str, Any], refusal: str
) -> None:
    """Not Airflow's two-line TypeError with the kwargs: the operation, the name, the names."""
    from delta_ops.airflow.operators import OPERATORS

    with pytest.raises(InvalidValue) as refused:
        OPERATORS["vacuum"](task_id="v", table="/data/t", **arguments)
    said = str(refused.value)
    assert "\n" not in said and said.startswith(refusal), said
    # Airflow's own arguments are still the operator's
    OPERATORS["vacuum"](task_id="v2", table="/data/t", retries=2, pool="p", doc_md="x")


@pytest.mark.parametrize("size", [4_194_304, "4194304", "4MB"])
def test_a_size_in_bytes_is_taken_as_delta_rs_takes_it(home: Path, size: object) -> None:
    """Issue 50.5: `target_size=4194304` is bytes, as delta-rs' and Spark's sizes are."""
    from delta_ops.airflow.operators import OPERATORS

    task = OPERATORS["compact"](task_id="compact", table="/data/t", target_size=size)
    assert OPERATIONS["compact"].parse(task._raw_options()).target_size == 4_194_304


def test_a_templated_value_is_parsed_when_the_task_runs(home: Path, tmp_path: Path) -> None:
    table = tmp_path / "t"
    write_arrow(table, pa.table({"id": [1]}))
    module = dag_module(
        home,
        "templated",
        f"""
        from airflow.sdk import DAG
        from delta_ops.airflow.operators import DeltaVacuumOperator

        with DAG("templated", schedule=None, params={{"retention": "30"}}) as dag:
            DeltaVacuumOperator(task_id="vacuum", table={str(table)!r},
                                retention="{{{{ params.retention }}}}")
        """,
    )
    run = module.dag.test()
    assert task_states(run) == {"vacuum": "failed"}  # "30" has no unit, as in the CLI


def test_only_retryable_errors_are_left_to_airflow_retries(home: Path) -> None:
    from airflow.sdk.exceptions import AirflowFailException

    from delta_ops.airflow.operators import OPERATORS

    task = OPERATORS["vacuum"](task_id="v", table="/data/events")
    race = ConcurrentModification("another writer committed version 7 first")
    assert race.retryable
    with pytest.raises(ConcurrentModification):
        task._fail(race)
    with pytest.raises(
        AirflowFailException,
        match=r"^events: vacuum failed: not a Delta table: /data/events: no _delta_log",
    ):
        task._fail(NotADeltaTable("/data/events", "no _delta_log directory"))


def test_results_keep_their_counts_when_long_lists_are_cut() -> None:
    from delta_ops.airflow.operators import bounded

    data = {"deleted": [f"f{i}" for i in range(5)], "num_deleted": 5, "commits": [3, 4]}
    assert bounded(data, 2) == {
        "deleted": ["f0", "f1"],
        "num_deleted": 5,
        "commits": [3, 4],
        "truncated": ["deleted"],
    }


def test_the_task_log_lists_at_most_max_listed_files(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The plan a task logs opens with its line and lists at most `max_listed` files (a
    vacuum's plan has one line per file), saying how many more there are."""
    import time

    from delta_ops.airflow.operators import OPERATORS
    from delta_ops.table.snapshot import load_snapshot

    table = tmp_path / "t"
    write_arrow(table, pa.table({"id": [1]}))
    old = time.time() - 30 * 86_400
    for i in range(5):
        (table / f"stray-{i}.parquet").write_bytes(b"x")
        os.utime(table / f"stray-{i}.parquet", (old, old))
    said: list[str] = []

    class Log:
        def info(self, message: str, *args: Any) -> None:
            said.append(message % args)

    task = OPERATORS["vacuum"](task_id="v", table=str(table), max_listed=2)
    monkeypatch.setattr(type(task), "log", property(lambda self: Log()))
    vacuum = OPERATIONS["vacuum"]
    task._log_plan(vacuum.plan(load_snapshot(table), vacuum.parse({})), ())
    (logged,) = said
    assert logged.startswith("t: would delete 5 files"), logged
    assert logged.count("stray-") == 2 and logged.endswith("... and 3 more lines not listed")


def test_a_real_tasks_log_lists_at_most_max_listed_files(
    home: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Issue 49.3, run by Airflow: the task's log (what ``dag.test()`` prints) names two of the
    five files the vacuum deletes, and says how many more there are."""
    import time

    table = tmp_path / "t"
    write_arrow(table, pa.table({"id": [1]}))
    old = time.time() - 30 * 86_400
    for i in range(5):
        (table / f"stray-{i}.parquet").write_bytes(b"x")
        os.utime(table / f"stray-{i}.parquet", (old, old))
    module = dag_module(
        home,
        "listed",
        f"""
        from airflow.sdk import DAG
        from delta_ops.airflow.operators import DeltaVacuumOperator

        with DAG("listed", schedule=None) as dag:
            DeltaVacuumOperator(task_id="vacuum", table={str(table)!r}, max_listed=2,
                                history=False)
        """,
    )
    capfd.readouterr()
    run = module.dag.test()
    logged = capfd.readouterr().out
    assert task_states(run) == {"vacuum": "success"}
    assert not list(table.glob("stray-*"))  # all five deleted
    assert logged.count("stray-") == 2, logged
    assert "... and 3 more lines not listed" in logged


# --------------------------------------------------------------------------- connections
@pytest.mark.parametrize(
    "fields,options",
    [
        (
            {"conn_type": "delta_ops", "extra": {"endpoint_url": "http://minio:9000", "key": "k"}},
            {"endpoint_url": "http://minio:9000", "key": "k"},
        ),
        (
            {
                "conn_type": "aws",
                "login": "AKIA1",
                "password": "s3cret",
                "extra": {
                    "aws_session_token": "tok",
                    "region_name": "eu-west-1",
                    "endpoint_url": "http://127.0.0.1:9000",
                },
            },
            {
                "key": "AKIA1",
                "secret": "s3cret",
                "token": "tok",
                "endpoint_url": "http://127.0.0.1:9000",
                "client_kwargs": {"region_name": "eu-west-1"},
            },
        ),
        ({"conn_type": "aws", "extra": {"profile_name": "lake"}}, {"profile": "lake"}),
        (
            {"conn_type": "wasb", "login": "lakeacct", "password": "a2V5"},
            {"account_name": "lakeacct", "account_key": "a2V5"},
        ),
        (
            {"conn_type": "wasb", "extra": {"connection_string": "DefaultEndpointsProtocol=..."}},
            {"connection_string": "DefaultEndpointsProtocol=..."},
        ),
        (
            {
                "conn_type": "wasb",
                "host": "https://lakeacct.blob.core.windows.net/",
                "login": "client-id",
                "password": "client-secret",
                "extra": {"tenant_id": "tenant"},
            },
            {
                "account_name": "lakeacct",
                "tenant_id": "tenant",
                "client_id": "client-id",
                "client_secret": "client-secret",
            },
        ),
        (
            {"conn_type": "adls", "host": "lakeacct", "password": "a2V5"},
            {"account_name": "lakeacct", "account_key": "a2V5"},
        ),
        (
            {
                "conn_type": "google_cloud_platform",
                "extra": {"key_path": "/keys/sa.json", "project": "lake-project"},
            },
            {"token": "/keys/sa.json", "project": "lake-project"},
        ),
        (
            {
                "conn_type": "google_cloud_platform",
                "extra": {"extra__google_cloud_platform__keyfile_dict": '{"type": "sa"}'},
            },
            {"token": {"type": "sa"}},
        ),
        ({"conn_type": "google_cloud_platform"}, {"token": "google_default"}),
    ],
    ids=lambda value: value.get("conn_type", "") if "conn_type" in value else "",
)
def test_connections_become_storage_options(
    home: Path, fields: dict[str, Any], options: dict[str, Any]
) -> None:
    from delta_ops.airflow.hook import DeltaOpsHook

    define_connection("store_under_test", **fields)
    assert DeltaOpsHook("store_under_test").storage_options() == options


@pytest.mark.parametrize(
    "fields,refusal",
    [
        (
            {
                "conn_type": "aws",
                "extra": {"role_arn": "arn:aws:iam::1:role/x", "assume_role_method": "saml"},
            },
            "assume_role_method 'saml'",
        ),
        ({"conn_type": "postgres", "host": "db"}, "type 'postgres' holds no storage options"),
    ],
)
def test_a_connection_delta_ops_cannot_honour_is_refused(
    home: Path, fields: dict[str, Any], refusal: str
) -> None:
    from delta_ops.airflow.hook import DeltaOpsHook

    define_connection("refused_store", **fields)
    with pytest.raises(InvalidValue, match=refusal):
        DeltaOpsHook("refused_store").storage_options()


def test_a_table_on_s3_is_maintained_through_an_awsdefine_connection(home: Path) -> None:
    """moto's S3 server on loopback; the keys and endpoint live only in the connection."""
    with serve_s3() as store:
        url = store.url("airflow_events")
        for i in range(3):
            write_arrow(url, pa.table({"id": [i]}), storage_options=store.options)
        define_connection(
            "lake_s3",
            conn_type="aws",
            login=store.options["key"],
            password=store.options["secret"],
            extra={"endpoint_url": store.endpoint, "region_name": "us-east-1"},
        )
        module = dag_module(
            home,
            "s3",
            f"""
            from airflow.sdk import DAG
            from delta_ops.airflow.operators import DeltaCheckpointOperator

            with DAG("s3_checkpoint", schedule=None) as dag:
                DeltaCheckpointOperator(task_id="checkpoint", table={url!r},
                                        delta_ops_conn_id="lake_s3")
            """,
        )
        run = module.dag.test()
        assert task_states(run) == {"checkpoint": "success"}
        assert xcom(run, "checkpoint")["version"] == 2
        from deltalake import DeltaTable

        peer = DeltaTable(url, storage_options=store.peer_options)
        assert peer.version() == 2 and peer.to_pyarrow_table().num_rows == 3
        import s3fs

        fs = s3fs.S3FileSystem(**store.options)
        assert fs.exists(f"lake/airflow_events/_delta_log/{2:020d}.checkpoint.parquet")
