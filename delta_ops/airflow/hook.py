"""Airflow connections as storage options: credentials stay in Airflow, tables open with them.

`DeltaOpsHook` reads one Airflow connection and returns the fsspec storage options a
table opens with (`delta_ops.storage.Storage.open`), by the connection's type:

| connection type | from | storage options |
|---|---|---|
| ``delta_ops`` (this provider's) | extra, a JSON object | the extra as it is (``{"endpoint_url": ..., "key": ...}``) |
| ``aws`` | login / password (or extra ``aws_access_key_id`` / ``aws_secret_access_key``), extra ``aws_session_token``, ``region_name``, ``endpoint_url`` (or ``service_config.s3.endpoint_url``), ``profile_name``; ``role_arn`` (with ``assume_role_kwargs``): the role is assumed (`delta_ops.airflow.assumed_role`) | s3fs: ``key``, ``secret``, ``token`` (an assumed role's session keys), ``client_kwargs.region_name``, ``endpoint_url``, ``profile`` |
| ``wasb`` | extra ``connection_string``; or login (account) and password / extra ``shared_access_key`` / ``account_key`` (key) or extra ``sas_token``; or extra ``tenant_id`` with login / password as client id / secret and host the account URL | adlfs: ``connection_string``, ``account_name``, ``account_key``, ``sas_token``, ``tenant_id``, ``client_id``, ``client_secret`` |
| ``adls`` | extra ``connection_string``; or host (account name) with password (key), or extra ``tenant_id`` with login / password as client id / secret | adlfs, as above |
| ``google_cloud_platform`` | extra ``key_path`` or ``keyfile_dict``, ``project`` | gcsfs: ``token`` (a key file, the key's fields, or ``google_default``), ``project`` |

A connection without credentials gives options without them, so the store's client looks for
them itself (environment, profile, managed identity), as the CLI does. An AWS connection with
a ``role_arn`` assumes the role through STS, as the Amazon provider does. What delta-ops
cannot honour is refused rather than ignored: another ``assume_role_method`` than
``assume_role``, any other connection type. Options given to an operator beside a connection
win over the connection's.

The UI's **Test** button (`DeltaOpsHook.test_connection`) opens the location in the
connection's *Table to test* field (the host) with its options and reads the table's
``_delta_log``: it says the version and protocol, or in one line why the table cannot be read
(a refused key, a missing bucket, no ``_delta_log``).

For example:

    DeltaOpsHook("lake_s3").storage_options()
    # {'key': 'AKIA...', 'secret': '...', 'client_kwargs': {'region_name': 'eu-west-1'}}
    DeltaOpsHook("lake_s3").test_connection("s3://lake/events")
    # (True, 's3://lake/events: a Delta table at version 41 (protocol 1/2): its _delta_log ...')
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

from airflow.sdk import BaseHook, Connection

from delta_ops.airflow.assumed_role import assume_role
from delta_ops.airflow.provider import INTEGRATION
from delta_ops.errors import DeltaOpsError, InvalidValue
from delta_ops.storage import Storage
from delta_ops.table.snapshot import load_head

Options = dict[str, Any]


def _field(extra: Mapping[str, Any], conn_type: str, name: str) -> Any:
    """An extra field by its name, or by the ``extra__<type>__<name>`` spelling older
    connection forms saved; empty values count as absent."""
    value = extra.get(name) or extra.get(f"extra__{conn_type}__{name}")
    return value if value not in ("", None) else None


def _aws(conn: Connection, extra: Mapping[str, Any]) -> Options:
    out: Options = {}
    key = conn.login or _field(extra, "aws", "aws_access_key_id")
    secret = conn.password or _field(extra, "aws", "aws_secret_access_key")
    if key:
        out["key"] = key
    if secret:
        out["secret"] = secret
    if token := _field(extra, "aws", "aws_session_token"):
        out["token"] = token
    s3_config = (extra.get("service_config") or {}).get("s3") or {}
    if endpoint := s3_config.get("endpoint_url") or _field(extra, "aws", "endpoint_url"):
        out["endpoint_url"] = endpoint
    if region := _field(extra, "aws", "region_name"):
        out["client_kwargs"] = {"region_name": region}
    if profile := _field(extra, "aws", "profile_name"):
        out["profile"] = profile
    if role_arn := _field(extra, "aws", "role_arn"):
        # the connection's keys (or the environment's) assume the role; its session's keys
        # open the table
        assumed = assume_role(conn.conn_id, role_arn, extra, out)
        for own in ("key", "secret", "token", "profile"):
            out.pop(own, None)
        out.update(assumed)
    return out


def _account_from_url(url: str | None) -> str | None:
    """The storage account an account URL names (``https://NAME.blob.core.windows.net``)."""
    if not url:
        return None
    netloc = urlsplit(url if "://" in url else f"https://{url}").netloc
    return netloc.split(".")[0] if "." in netloc else None


def _azure(
    conn: Connection, extra: Mapping[str, Any], conn_type: str, account: str | None
) -> Options:
    if connection_string := _field(extra, conn_type, "connection_string"):
        return {"connection_string": connection_string}
    out: Options = {}
    if account:
        out["account_name"] = account
    if tenant := _field(extra, conn_type, "tenant_id"):
        out.update(tenant_id=tenant, client_id=conn.login, client_secret=conn.password)
        return out
    key = (
        conn.password
        or _field(extra, conn_type, "shared_access_key")
        or _field(extra, conn_type, "account_key")
    )
    if key:
        out["account_key"] = key
    elif sas := _field(extra, conn_type, "sas_token"):
        # a SAS URL (https://account.blob.core.windows.net/?sv=...) or the token alone
        out["sas_token"] = urlsplit(sas).query if sas.startswith("https://") else sas
        out.setdefault("account_name", _account_from_url(sas))
    return {k: v for k, v in out.items() if v is not None}


def _wasb(conn: Connection, extra: Mapping[str, Any]) -> Options:
    tenant = _field(extra, "wasb", "tenant_id")
    # with Active Directory auth the login is the client id, so the account is the host's
    account = _account_from_url(conn.host) if tenant else conn.login or _account_from_url(conn.host)
    return _azure(conn, extra, "wasb", account)


def _adls(conn: Connection, extra: Mapping[str, Any]) -> Options:
    account = _account_from_url(_field(extra, "adls", "account_url")) or conn.host
    return _azure(conn, extra, "adls", account)


def _google(conn: Connection, extra: Mapping[str, Any]) -> Options:
    kind = "google_cloud_platform"
    out: Options = {}
    key_path = _field(extra, kind, "key_path")
    keyfile = _field(extra, kind, "keyfile_dict")
    if key_path and keyfile:
        raise InvalidValue(f"connection {conn.conn_id!r}: give key_path or keyfile_dict, not both")
    if key_path:
        out["token"] = key_path
    elif keyfile:
        try:
            out["token"] = keyfile if isinstance(keyfile, dict) else json.loads(keyfile)
        except ValueError:
            raise InvalidValue(
                f"connection {conn.conn_id!r}: keyfile_dict is not a JSON object"
            ) from None
    else:
        out["token"] = "google_default"
    if project := _field(extra, kind, "project"):
        out["project"] = project
    return out


def _delta_ops(conn: Connection, extra: Mapping[str, Any]) -> Options:
    return dict(extra)


_BY_TYPE: dict[str, Callable[[Connection, Mapping[str, Any]], Options]] = {
    "delta_ops": _delta_ops,
    "aws": _aws,
    "wasb": _wasb,
    "adls": _adls,
    "google_cloud_platform": _google,
}


def storage_options_from(conn: Connection) -> Options:
    """The storage options an Airflow connection holds (see the module's table)."""
    conn_type = conn.conn_type or ""
    convert = _BY_TYPE.get(conn_type)
    if convert is None:
        raise InvalidValue(
            f"connection {conn.conn_id!r}: type {conn_type!r} holds no storage options delta-ops"
            f" reads; use one of {', '.join(sorted(_BY_TYPE))}"
        )
    try:
        extra = json.loads(conn.extra) if conn.extra else {}
    except ValueError:
        raise InvalidValue(f"connection {conn.conn_id!r}: its extra is not JSON") from None
    if not isinstance(extra, dict):
        raise InvalidValue(f"connection {conn.conn_id!r}: its extra is not a JSON object")
    return convert(conn, extra)


class DeltaOpsHook(BaseHook):
    """Storage options for Delta tables from an Airflow connection (any type in the module's
    table; the ``delta_ops`` type is this provider's: its extra is the options).

    Args:
        delta_ops_conn_id: the connection's id.
    """

    conn_name_attr = "delta_ops_conn_id"
    default_conn_name = "delta_ops_default"
    conn_type = "delta_ops"
    hook_name = INTEGRATION

    def __init__(self, delta_ops_conn_id: str = default_conn_name) -> None:
        super().__init__()
        self.delta_ops_conn_id = delta_ops_conn_id

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        """The connection form: only the extra, which holds the storage options."""
        return {
            "hidden_fields": ["schema", "port", "login", "password"],
            "relabeling": {"extra": "Storage options (JSON)", "host": "Table to test"},
            "placeholders": {
                "extra": '{"endpoint_url": "https://minio.internal:9000", "key": "...",'
                ' "secret": "..."}',
                "host": "s3://lake/events (read by the Test button only)",
            },
        }

    def test_connection(self, location: str | None = None) -> tuple[bool, str]:
        """What the UI's Test button shows: whether the table at `location` (default: the
        connection's host, *Table to test*) opens with the connection's options and its
        ``_delta_log`` reads, and its version; never raises."""
        try:
            conn = self.get_connection(self.delta_ops_conn_id)
            target = location or conn.host
            if not target:
                return False, (
                    "nothing to test: put a table's location (s3://bucket/table) in the"
                    " connection's 'Table to test' field"
                )
            storage = Storage.open(target, storage_options_from(conn) or None)
            head = load_head(storage)
        except DeltaOpsError as exc:
            return False, str(exc)
        except Exception as exc:  # noqa: BLE001 - a store's own error (refused keys): said, not raised
            return False, f"{type(exc).__name__}: {exc}"
        protocol = head.protocol
        return True, (
            f"{target}: a Delta table at version {head.version} (protocol"
            f" {protocol.min_reader_version}/{protocol.min_writer_version}): its _delta_log"
            " reads with these options"
        )

    def get_conn(self) -> Options:
        """The storage options (what a hook's connection is, for this one)."""
        return self.storage_options()

    def storage_options(self) -> Options:
        """The connection's storage options (a task's; the triggerer uses
        `astorage_options`)."""
        return storage_options_from(self.get_connection(self.delta_ops_conn_id))

    async def astorage_options(self) -> Options:
        """The same, without blocking an event loop (a trigger's)."""
        return storage_options_from(await self.aget_connection(self.delta_ops_conn_id))


def table_storage_options(conn_id: str | None, given: Mapping[str, Any] | None) -> Options | None:
    """The options a table opens with: the connection's, with `given` over them (None when
    there are none at all: a local path opens without fsspec)."""
    from_connection = DeltaOpsHook(conn_id).storage_options() if conn_id else {}
    return {**from_connection, **(given or {})} or None


async def atable_storage_options(
    conn_id: str | None, given: Mapping[str, Any] | None
) -> Options | None:
    """`table_storage_options` in a trigger, without blocking its event loop."""
    from_connection = await DeltaOpsHook(conn_id).astorage_options() if conn_id else {}
    return {**from_connection, **(given or {})} or None


__all__ = [
    "DeltaOpsHook",
    "atable_storage_options",
    "storage_options_from",
    "table_storage_options",
]
