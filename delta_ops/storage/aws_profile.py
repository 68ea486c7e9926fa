"""AWS profiles and bucket regions for the native S3 client, as the AWS CLI finds them.

The native client (obstore) takes credentials from the environment, web identity, the
container and the instance metadata service by itself, but not from ``~/.aws``. The README
promises profiles, so `profile_settings` reads them: a profile with keys in the shared
credentials (or config) file becomes those keys, read with ``configparser`` (no AWS SDK
import); any other profile (assumed roles, SSO, ``credential_process``) gets a credential
provider backed by botocore (installed with s3fs), which refreshes what it hands out:

    settings, provider = profile_settings("analytics", os.environ)
    settings  # {'access_key_id': ..., 'secret_access_key': ..., 'region': 'eu-west-1'}

`bucket_region` asks AWS where a bucket lives when nothing names a region, as s3fs does
(the native client would otherwise sign for us-east-1 and be redirected).
"""

from __future__ import annotations

import configparser
import http.client
import os
from collections.abc import Mapping
from datetime import datetime
from typing import Any


def _files(env: Mapping[str, str]) -> tuple[str, str]:
    home = os.path.expanduser("~")
    credentials = env.get("AWS_SHARED_CREDENTIALS_FILE") or os.path.join(
        home, ".aws", "credentials"
    )
    config = env.get("AWS_CONFIG_FILE") or os.path.join(home, ".aws", "config")
    return credentials, config


def _section(path: str, name: str) -> dict[str, str]:
    parser = configparser.RawConfigParser()
    try:
        parser.read(path, encoding="utf-8")
    except configparser.Error:
        return {}
    return dict(parser.items(name)) if parser.has_section(name) else {}


def profile_settings(profile: str | None, env: Mapping[str, str]) -> tuple[dict[str, str], Any]:
    """Native S3 settings (keys, region) from an AWS profile (`profile`, else
    ``AWS_PROFILE``, else ``default`` when a shared file exists), and a credential provider
    for profiles without plain keys; ({}, None) when there is no profile to read."""
    name = profile or env.get("AWS_PROFILE") or env.get("AWS_DEFAULT_PROFILE")
    credentials_file, config_file = _files(env)
    if name is None:
        if not (os.path.exists(credentials_file) or os.path.exists(config_file)):
            return {}, None
        name = "default"
    keys = _section(credentials_file, name)
    config = _section(config_file, name if name == "default" else f"profile {name}")
    settings: dict[str, str] = {}
    if config.get("region"):
        settings["region"] = config["region"]
    found = {**config, **keys}
    if found.get("aws_access_key_id") and found.get("aws_secret_access_key"):
        settings["access_key_id"] = found["aws_access_key_id"]
        settings["secret_access_key"] = found["aws_secret_access_key"]
        if found.get("aws_session_token"):
            settings["session_token"] = found["aws_session_token"]
        return settings, None
    if not found and profile is None:
        return settings, None  # no such profile in the files: the client's own chain
    return settings, BotocoreCredentials(name)


class BotocoreCredentials:
    """An obstore credential provider reading one AWS profile through botocore (assumed
    roles, SSO, credential processes), refreshed when botocore refreshes them."""

    def __init__(self, profile: str) -> None:
        self.profile = profile
        self._session: Any = None

    def __call__(self) -> dict[str, Any]:
        if self._session is None:
            import botocore.session  # the AWS SDK only for such profiles

            self._session = botocore.session.Session(profile=self.profile)
        found = self._session.get_credentials()
        if found is None:
            raise PermissionError(f"AWS profile {self.profile!r} gives no credentials")
        frozen = found.get_frozen_credentials()
        expiry = getattr(found, "_expiry_time", None)
        return {
            "access_key_id": frozen.access_key,
            "secret_access_key": frozen.secret_key,
            "token": frozen.token,
            "expires_at": expiry if isinstance(expiry, datetime) else None,
        }


def bucket_region(bucket: str, timeout_s: float = 5.0) -> str | None:
    """The AWS region of `bucket` (S3 names it in every answer to a HEAD of the bucket, even
    a refused one), or None when it cannot be asked."""
    if not bucket:
        return None
    try:
        connection = http.client.HTTPSConnection(f"{bucket}.s3.amazonaws.com", timeout=timeout_s)
        try:
            connection.request("HEAD", "/")
            region = connection.getresponse().getheader("x-amz-bucket-region")
        finally:
            connection.close()
    except OSError:
        return None
    return region or None


__all__ = ["BotocoreCredentials", "bucket_region", "profile_settings"]
