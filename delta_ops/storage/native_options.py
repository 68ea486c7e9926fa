"""Which client serves an object-store table, and the native client's settings.

`s3://`/`s3a://`, `az://`/`abfs[s]://` and `gs://` tables go through the native client
(obstore, the Rust `object_store` crate delta-rs uses) when it is installed, and through fsspec
otherwise. The storage option ``client`` chooses: ``native``, ``fsspec``, or ``auto`` (the
default: native when obstore is installed and every given option has a native name, fsspec
otherwise, so options only fsspec knows keep working). `choose_client` decides without
importing either client; `native_spec` maps the options the README documents (fsspec's
names: ``key``/``secret``/``endpoint_url``, ``connection_string``, ``token``, ...) and the
environment to obstore's, raising `Unmappable` for one it has no name for:

    choose_client("s3", {"endpoint_url": "http://minio:9000"})   # "native" (obstore installed)
    spec = native_spec("s3://lake/events", {"key": "k", "secret": "s"})
    spec.bucket, spec.root, spec.config["access_key_id"]       # 'lake', 'lake/events', 'k'

Names obstore itself takes (``aws_access_key_id``, ``AWS_ENDPOINT_URL``,
``azure_storage_account_name``, ``google_service_account``, ...: the ones deltalake takes)
pass through unchanged.
"""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal

from delta_ops.errors import InvalidLocation

#: URL scheme -> which native store serves it
NATIVE_SCHEMES: dict[str, Literal["s3", "azure", "gcs"]] = {
    "s3": "s3",
    "s3a": "s3",
    "az": "azure",
    "abfs": "azure",
    "abfss": "azure",
    "gs": "gcs",
    "gcs": "gcs",
}
#: the storage option naming the client
CLIENT_OPTION = "client"
CLIENTS = ("auto", "native", "fsspec")

#: obstore's HTTP client options (given flat among the storage options)
CLIENT_OPTIONS = frozenset(
    {
        "allow_http",
        "allow_invalid_certificates",
        "connect_timeout",
        "default_content_type",
        "http1_only",
        "http2_only",
        "pool_idle_timeout",
        "pool_max_idle_per_host",
        "proxy_url",
        "proxy_ca_certificate",
        "proxy_excludes",
        "timeout",
        "user_agent",
    }
)
_TRUE = ("true", "1", "yes")


class Unmappable(ValueError):
    """A storage option the native client has no name for (fsspec then serves the table)."""


@dataclass(frozen=True)
class NativeSpec:
    """Everything needed to make the native client for one table's bucket."""

    kind: Literal["s3", "azure", "gcs"]
    bucket: str
    #: the table root as fsspec writes it: bucket/prefix (no trailing slash)
    root: str
    config: dict[str, Any] = field(default_factory=dict)
    client_options: dict[str, Any] = field(default_factory=dict)
    #: an obstore credential provider (an AWS profile), or None
    credential_provider: Any = None
    #: obstore's RetryConfig: the storage options ``max_retries`` and ``retry_timeout``
    #: (seconds), as deltalake takes them; obstore's defaults (10, 180 s) otherwise
    retry: dict[str, Any] = field(default_factory=dict)

    @property
    def endpoint(self) -> str:
        """What identifies the server, for the once-per-endpoint conditional-write probe."""
        for key in ("endpoint", "aws_endpoint_url_s3", "base_url"):
            if self.config.get(key):
                return f"{self.kind}:{self.config[key]}"
        if self.kind == "gcs" and "service_account_key" in self.config:
            key_json = json.loads(self.config["service_account_key"])
            if key_json.get("gcs_base_url"):
                return f"gcs:{key_json['gcs_base_url']}"
        return f"{self.kind}:default"


def choose_client(scheme: str, options: Mapping[str, Any]) -> str:
    """``native``, ``fsspec`` or ``auto`` (as the option asks) for a table of `scheme`; other
    schemes are always ``fsspec``. Raises InvalidLocation for an unknown value, and for
    ``native`` when obstore is not installed."""
    asked = str(options.get(CLIENT_OPTION, "auto")).strip().lower() or "auto"
    if asked not in CLIENTS:
        raise InvalidLocation(
            f"storage option {CLIENT_OPTION}={options.get(CLIENT_OPTION)!r}: use one of "
            + ", ".join(CLIENTS)
        )
    if scheme not in NATIVE_SCHEMES:
        if asked == "native":
            raise InvalidLocation(
                f"storage option {CLIENT_OPTION}=native: {scheme}:// has no native client "
                f"(only {', '.join(sorted(NATIVE_SCHEMES))})"
            )
        return "fsspec"
    installed = importlib.util.find_spec("obstore") is not None
    if asked == "native" and not installed:
        extra = NATIVE_SCHEMES[scheme]
        raise InvalidLocation(
            f"storage option {CLIENT_OPTION}=native needs obstore: pip install 'delta-ops[{extra}]'"
        )
    if asked == "auto":
        return "auto" if installed else "fsspec"
    return asked


def _flag(value: object) -> bool:
    return str(value).strip().lower() in _TRUE


def option_flag(value: object, name: str) -> bool:
    """A true/false storage option, strictly: anything else is refused in one line, whichever
    client serves the table."""
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in ("false", "0", "no", ""):
        return False
    raise InvalidLocation(f"storage option {name}={value!r}: use true or false")


def split_url(url: str) -> tuple[str, str, str, str | None]:
    """(scheme, bucket, key prefix, account) of a store URL; the account only for abfs[s]://
    URLs naming it (``container@account.dfs.core.windows.net``)."""
    scheme, _, rest = url.partition("://")
    scheme = scheme.lower()
    authority, _, prefix = rest.partition("/")
    account = None
    if "@" in authority:
        authority, _, host = authority.partition("@")
        account = host.split(".", 1)[0] or None
    return scheme, authority, prefix.strip("/"), account


def strip_protocol(url: str) -> str:
    """A store URL as a path inside its store (``bucket/key``), as fsspec strips it."""
    _scheme, bucket, prefix, _account = split_url(url)
    return f"{bucket}/{prefix}" if prefix else bucket


def native_spec(
    url: str, options: Mapping[str, Any], environ: Mapping[str, str] | None = None
) -> NativeSpec:
    """The native client's settings for a table URL and its storage options (``client`` and
    ``single_writer`` already taken out). Raises Unmappable for an option with no native name."""
    env = os.environ if environ is None else environ
    scheme, bucket, prefix, account = split_url(url)
    if not bucket:
        raise InvalidLocation(f"{url}: no bucket (container) in the URL")
    kind = NATIVE_SCHEMES[scheme]
    root = f"{bucket}/{prefix}" if prefix else bucket
    given = {k: v for k, v in options.items() if v is not None}
    client: dict[str, Any] = {}
    for name in list(given):
        if name.lower() in CLIENT_OPTIONS:
            value = given.pop(name)
            client[name.lower()] = _flag(value) if name.lower() == "allow_http" else value
    retry: dict[str, Any] = {}
    for name in ("max_retries", "retry_timeout"):
        if name in given:
            value = given.pop(name)
            try:
                number = float(str(value).strip().rstrip("s"))
            except ValueError:
                raise InvalidLocation(f"storage option {name}={value!r}: a number") from None
            if name == "max_retries":
                retry[name] = int(number)
            else:
                retry[name] = timedelta(seconds=number)
    if option_flag(given.pop("use_listings_cache", False), "use_listings_cache"):
        raise Unmappable("use_listings_cache=true (the native client never caches listings)")
    if kind == "s3":
        config, provider = _s3(given, env, bucket)
    elif kind == "azure":
        config, provider = _azure(given, env, account), None
    else:
        config, provider = _gcs(given), None
    endpoint = str(config.get("endpoint") or config.get("base_url") or "")
    if endpoint.startswith("http://"):
        client.setdefault("allow_http", True)
    key_json = json.loads(config.get("service_account_key") or "{}") if kind == "gcs" else {}
    if str(key_json.get("gcs_base_url", "")).startswith("http://"):
        client.setdefault("allow_http", True)
    return NativeSpec(kind, bucket, root, config, client, provider, retry)


# fsspec (s3fs) name -> obstore name
_S3_NAMES = {
    "key": "access_key_id",
    "secret": "secret_access_key",
    "token": "session_token",
    "endpoint_url": "endpoint",
    "region": "region",
    "region_name": "region",
    "requester_pays": "request_payer",
}
# s3fs options that change nothing on the native client
_S3_IGNORED = frozenset({"fixed_upload_size", "default_block_size", "default_fill_cache"})


def _s3(given: dict[str, Any], env: Mapping[str, str], bucket: str) -> tuple[dict[str, Any], Any]:
    config: dict[str, Any] = {}
    profile = given.pop("profile", None)
    kwargs = given.pop("client_kwargs", None)
    if kwargs is not None:
        if isinstance(kwargs, str):
            try:
                kwargs = json.loads(kwargs)
            except ValueError:
                raise Unmappable("client_kwargs (not a JSON object)") from None
        # the refusal names keys only: client_kwargs may hold credentials
        if not isinstance(kwargs, dict):
            raise Unmappable("client_kwargs (not a JSON object)")
        if unknown := sorted(set(kwargs) - {"region_name", "endpoint_url"}):
            raise Unmappable(", ".join(f"client_kwargs.{name}" for name in unknown))
        given = {**kwargs, **given}
    for name, value in given.items():
        if name in _S3_IGNORED:
            continue
        if name == "anon":
            if _flag(value):
                config["skip_signature"] = True
            continue
        if name in _S3_NAMES:
            config[_S3_NAMES[name]] = value
        elif _known_to_obstore("s3", name):
            config[name.lower()] = value
        else:
            raise Unmappable(name)
    provider = None
    has_keys = any(k in config for k in ("access_key_id", "aws_access_key_id")) or (
        "AWS_ACCESS_KEY_ID" in env and profile is None
    )
    if not config.get("skip_signature") and not has_keys:
        # AWS profiles (configparser) only for S3 tables without keys
        from delta_ops.storage.aws_profile import profile_settings

        settings, provider = profile_settings(None if profile is None else str(profile), env)
        for name, value in settings.items():
            if name != "region" or not _has_region(config, env):
                config.setdefault(name, value)
    elif profile is not None:
        raise Unmappable("profile together with key and secret")
    if not _has_region(config, env) and not _has_endpoint(config, env):
        # http.client only to ask AWS proper for a bucket's region
        from delta_ops.storage.aws_profile import bucket_region

        region = bucket_region(bucket)
        if region:
            config["region"] = region
    return config, provider


def _has_region(config: Mapping[str, Any], env: Mapping[str, str]) -> bool:
    return any(k in config for k in ("region", "aws_region", "aws_default_region")) or any(
        k in env for k in ("AWS_REGION", "AWS_DEFAULT_REGION")
    )


def _has_endpoint(config: Mapping[str, Any], env: Mapping[str, str]) -> bool:
    return any(k in config for k in ("endpoint", "aws_endpoint", "aws_endpoint_url")) or any(
        k in env for k in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT", "AWS_ENDPOINT_URL_S3")
    )


def _connection_string(text: str) -> dict[str, str]:
    parts = dict(p.split("=", 1) for p in text.split(";") if "=" in p)
    config: dict[str, str] = {}
    if parts.get("UseDevelopmentStorage", "").lower() == "true":
        config["use_emulator"] = "true"
    if "AccountName" in parts:
        config["account_name"] = parts["AccountName"]
    if "AccountKey" in parts:
        config["account_key"] = parts["AccountKey"]
    if "SharedAccessSignature" in parts:
        config["sas_key"] = parts["SharedAccessSignature"].lstrip("?")
    if "BlobEndpoint" in parts:
        config["endpoint"] = parts["BlobEndpoint"].rstrip("/")
    elif "AccountName" in parts and "EndpointSuffix" in parts:
        protocol = parts.get("DefaultEndpointsProtocol", "https")
        config["endpoint"] = f"{protocol}://{parts['AccountName']}.blob.{parts['EndpointSuffix']}"
    return config


# fsspec (adlfs) name -> obstore name
_AZURE_NAMES = {
    "account_name": "account_name",
    "account_key": "account_key",
    "sas_token": "sas_key",
    "tenant_id": "tenant_id",
    "client_id": "client_id",
    "client_secret": "client_secret",
}


def _azure(given: dict[str, Any], env: Mapping[str, str], account: str | None) -> dict[str, Any]:
    config: dict[str, Any] = {}
    connection = given.pop("connection_string", None)
    if connection is None and not given.get("account_name"):
        connection = env.get("AZURE_STORAGE_CONNECTION_STRING")
    if connection:
        config.update(_connection_string(str(connection)))
    elif "AZURE_STORAGE_SAS_TOKEN" in env and "sas_token" not in given:
        config["sas_key"] = env["AZURE_STORAGE_SAS_TOKEN"].lstrip("?")
    if account and "account_name" not in given:
        config.setdefault("account_name", account)
    for name, value in given.items():
        if name == "anon":
            if _flag(value):
                config["skip_signature"] = True
            continue
        if name == "account_host":
            config["endpoint"] = f"https://{value}"
        elif name in _AZURE_NAMES:
            config[_AZURE_NAMES[name]] = str(value).lstrip("?") if name == "sas_token" else value
        elif _known_to_obstore("azure", name):
            config[name.lower()] = value
        else:
            raise Unmappable(name)
    return config


def _gcs(given: dict[str, Any]) -> dict[str, Any]:
    config: dict[str, Any] = {}
    token = given.pop("token", None)
    endpoint = given.pop("endpoint_url", None)
    given.pop("project", None)  # names the project to bill: no native name, not needed to read
    for name, value in given.items():
        if _known_to_obstore("gcs", name):
            config[name.lower()] = value
        else:
            raise Unmappable(name)
    if isinstance(token, dict):
        config["service_account_key"] = json.dumps(token)
    elif token in ("anon", None) and endpoint:
        # an emulator or private endpoint without OAuth: the form object_store takes it in
        config["service_account_key"] = json.dumps(
            {
                "gcs_base_url": str(endpoint).rstrip("/"),
                "disable_oauth": True,
                "client_email": "",
                "private_key": "",
                "private_key_id": "",
            }
        )
        return config
    elif token == "anon":
        config["skip_signature"] = True
    elif token in (None, "google_default", "cloud"):
        pass  # application default credentials, as gcsfs finds them
    elif isinstance(token, str) and os.path.isfile(token):
        with open(token, encoding="utf-8") as f:
            kind = json.load(f).get("type")
        name = "service_account" if kind == "service_account" else "application_credentials"
        config[name] = token
    else:
        raise Unmappable(f"token={token!r}")
    if endpoint:
        config["base_url"] = str(endpoint).rstrip("/")
    return config


def _known_to_obstore(kind: str, name: str) -> bool:
    """Whether obstore's store for `kind` takes `name` as a configuration key (its own short
    names and the environment-style ones, any case)."""
    from obstore.store import AzureStore, GCSStore, S3Store  # only once a native store is used

    store: Any = {"s3": S3Store, "azure": AzureStore, "gcs": GCSStore}[kind]
    try:
        if kind == "azure":
            store("probe", config={name: "x"}, account_name="probe")
        else:
            store("probe", config={name: "x"})
    except Exception as exc:  # noqa: BLE001 - obstore's classes
        return type(exc).__name__ != "UnknownConfigurationKeyError"
    return True


__all__ = [
    "CLIENT_OPTION",
    "NATIVE_SCHEMES",
    "NativeSpec",
    "Unmappable",
    "choose_client",
    "native_spec",
    "split_url",
    "strip_protocol",
]
