"""Which client serves an object-store table, and how the documented options reach the native
one (issue 28). No store is contacted here: every S3 spec names its endpoint or region (else
the bucket's region would be asked of AWS) and every store gets its credentials.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from delta_ops.errors import InvalidLocation
from delta_ops.storage import Storage
from delta_ops.storage.native_options import Unmappable, choose_client, native_spec, split_url
from tests.support import REPO

ENDPOINT = {"endpoint_url": "http://127.0.0.1:9", "key": "k", "secret": "s"}


def test_the_native_client_is_the_default_and_fsspec_the_fallback() -> None:
    assert choose_client("s3", {}) == "auto"
    assert choose_client("abfss", {"client": "native"}) == "native"
    assert choose_client("gs", {"client": "FSSPEC"}) == "fsspec"
    assert choose_client("memory", {}) == "fsspec"
    with pytest.raises(InvalidLocation, match="one of auto, native, fsspec"):
        choose_client("s3", {"client": "rust"})
    with pytest.raises(InvalidLocation, match="no native client"):
        choose_client("memory", {"client": "native"})
    assert Storage.open("s3://lake/t", ENDPOINT).client == "native"
    assert Storage.open("s3://lake/t", {**ENDPOINT, "client": "fsspec"}).client == "fsspec"


def test_an_option_only_fsspec_knows_keeps_fsspec_unless_native_is_asked_for() -> None:
    options = {**ENDPOINT, "config_kwargs": {"retries": {"max_attempts": 1}}}
    assert Storage.open("s3://lake/t", options).client == "fsspec"
    with pytest.raises(InvalidLocation, match="config_kwargs.*client=fsspec"):
        Storage.open("s3://lake/t", {**options, "client": "native"})
    # listings are never cached natively: asking for a cache keeps fsspec's
    assert Storage.open("s3://lake/t", {**ENDPOINT, "use_listings_cache": "true"}).client == (
        "fsspec"
    )


def test_s3_options_by_fsspec_and_by_obstore_names() -> None:
    spec = native_spec(
        "s3a://lake/events/",
        {**ENDPOINT, "token": "t", "region_name": "eu-west-1", "AWS_ALLOW_HTTP": "true"},
        environ={},
    )
    assert (spec.kind, spec.bucket, spec.root) == ("s3", "lake", "lake/events")
    assert spec.config == {
        "endpoint": "http://127.0.0.1:9",
        "access_key_id": "k",
        "secret_access_key": "s",
        "session_token": "t",
        "region": "eu-west-1",
        "aws_allow_http": "true",
    }
    assert spec.client_options == {"allow_http": True}
    anonymous = native_spec("s3://lake/t", {"anon": "true", "region": "us-west-2"}, environ={})
    assert anonymous.config == {"skip_signature": True, "region": "us-west-2"}
    retry = native_spec("s3://lake/t", {**ENDPOINT, "max_retries": "3", "retry_timeout": "9"})
    assert retry.retry["max_retries"] == 3 and retry.retry["retry_timeout"].total_seconds() == 9


def test_an_aws_profile_is_read_from_the_shared_files(tmp_path: Path) -> None:
    (tmp_path / "credentials").write_text(
        "[analytics]\naws_access_key_id = A\naws_secret_access_key = B\n"
    )
    (tmp_path / "config").write_text("[profile analytics]\nregion = eu-central-1\n")
    env = {
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "credentials"),
        "AWS_CONFIG_FILE": str(tmp_path / "config"),
    }
    spec = native_spec("s3://lake/t", {"profile": "analytics"}, environ=env)
    assert spec.config == {
        "region": "eu-central-1",
        "access_key_id": "A",
        "secret_access_key": "B",
    }
    assert spec.credential_provider is None  # plain keys: no AWS SDK involved
    with_env = native_spec("s3://lake/t", {}, environ={**env, "AWS_PROFILE": "analytics"})
    assert with_env.config["access_key_id"] == "A"


def test_azure_connection_strings_and_abfss_urls() -> None:
    connection = (
        "DefaultEndpointsProtocol=http;AccountName=dev;AccountKey=a2V5;"
        "BlobEndpoint=http://127.0.0.1:10000/dev;"
    )
    spec = native_spec("az://lake/events", {"connection_string": connection}, environ={})
    assert spec.config == {
        "account_name": "dev",
        "account_key": "a2V5",
        "endpoint": "http://127.0.0.1:10000/dev",
    }
    assert spec.client_options == {"allow_http": True}
    url = "abfss://lake@acct.dfs.core.windows.net/events/x"
    assert split_url(url) == ("abfss", "lake", "events/x", "acct")
    spec = native_spec(url, {"sas_token": "?sv=1&sig=2"}, environ={})
    assert (spec.root, spec.config) == (
        "lake/events/x",
        {"account_name": "acct", "sas_key": "sv=1&sig=2"},
    )
    with pytest.raises(Unmappable):
        native_spec("az://lake/t", {"credential": "object"}, environ={})


def test_gcs_tokens(tmp_path: Path) -> None:
    emulator = native_spec(
        "gs://lake/t", {"endpoint_url": "http://127.0.0.1:4443", "token": "anon"}
    )
    key = json.loads(emulator.config["service_account_key"])
    assert key["gcs_base_url"] == "http://127.0.0.1:4443" and key["disable_oauth"]
    assert emulator.client_options == {"allow_http": True}
    account = tmp_path / "sa.json"
    account.write_text(json.dumps({"type": "service_account"}))
    assert native_spec("gs://lake/t", {"token": str(account), "project": "p"}).config == {
        "service_account": str(account)
    }
    assert native_spec("gs://lake/t", {"token": {"type": "x"}}).config == {
        "service_account_key": '{"type": "x"}'
    }


def test_no_store_client_is_imported_until_a_url_needs_one() -> None:
    code = (
        "import sys, delta_ops, delta_ops.cli.commands\n"
        "from delta_ops.storage import Storage\n"
        "Storage.open('/tmp/somewhere')\n"
        "loaded = [m for m in ('obstore', 's3fs', 'adlfs', 'gcsfs', 'botocore', 'fsspec') "
        "if m in sys.modules]\n"
        "assert not loaded, loaded\n"
        "Storage.open('s3://lake/t', {'endpoint_url': 'http://127.0.0.1:9', 'key': 'k', "
        "'secret': 's'})\n"
        "assert 'obstore' in sys.modules and 's3fs' not in sys.modules and "
        "'botocore' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True, timeout=120)
