"""An AWS connection's ``role_arn``, assumed as the Amazon provider assumes it.

An Airflow ``aws`` connection whose extra names a ``role_arn`` asks for the role's temporary
credentials: `assume_role` calls STS ``AssumeRole`` with the connection's own keys (or,
without them, the environment's: its profile, instance role, ...) and returns the session
credentials as s3fs's options (``key``, ``secret``, ``token``), which the table then opens
with. The extra's fields are the Amazon provider's:

| extra | meaning |
|---|---|
| ``role_arn`` | the role to assume |
| ``assume_role_method`` | ``assume_role`` (the default and the only one delta-ops takes; SAML and web identity are refused in one line) |
| ``assume_role_kwargs`` | more ``AssumeRole`` arguments (``ExternalId``, ``DurationSeconds``, ``Policy``, ...) |
| ``region_name`` | STS's region |
| ``service_config.sts.endpoint_url`` / ``endpoint_url`` | STS's endpoint (a private one, a test server) |

The session is named ``Airflow_<conn_id>`` (as the Amazon provider names it), so CloudTrail
shows which connection acted. The credentials last ``DurationSeconds`` (STS's default: one
hour) and are not refreshed: a task that runs longer than that should ask for a longer
session (the role's maximum allows up to 12 hours).

Example:

    AIRFLOW_CONN_LAKE='{"conn_type": "aws", "extra": {"role_arn": "arn:aws:iam::1:role/lake"}}'
    DeltaOpsHook("lake").storage_options()   # {"key": "ASIA...", "secret": ..., "token": ...}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from delta_ops.errors import InvalidValue

#: the ``assume_role_method`` delta-ops takes (the Amazon provider's default)
ASSUME_ROLE = "assume_role"


def assume_role(
    conn_id: str, role_arn: str, extra: Mapping[str, Any], credentials: Mapping[str, Any]
) -> dict[str, Any]:
    """The role's session credentials as s3fs's ``key``, ``secret`` and ``token``.

    Args:
        conn_id: the connection's id (the session's name).
        role_arn: the role to assume.
        extra: the connection's extra (method, kwargs, region, endpoints).
        credentials: the connection's own s3fs options (``key``, ``secret``, ``token``,
            ``profile``) that call STS; empty for the environment's.

    Raises:
        InvalidValue: the method is not ``assume_role``, or STS refused (a role the keys may
            not assume, a wrong ARN), named in one line.
    """
    method = extra.get("assume_role_method") or ASSUME_ROLE
    if method != ASSUME_ROLE:
        raise InvalidValue(
            f"connection {conn_id!r}: assume_role_method {method!r}: delta-ops assumes roles"
            f" with {ASSUME_ROLE!r} only"
        )
    arguments = extra.get("assume_role_kwargs") or {}
    if not isinstance(arguments, Mapping):
        raise InvalidValue(f"connection {conn_id!r}: assume_role_kwargs is not a JSON object")
    sts_config = (extra.get("service_config") or {}).get("sts") or {}
    # botocore comes with s3fs (the s3 extra), and only a connection with a role needs it
    import botocore.exceptions
    import botocore.session

    session = botocore.session.Session(profile=credentials.get("profile"))
    client = session.create_client(
        "sts",
        region_name=extra.get("region_name") or None,
        endpoint_url=sts_config.get("endpoint_url") or extra.get("endpoint_url") or None,
        aws_access_key_id=credentials.get("key"),
        aws_secret_access_key=credentials.get("secret"),
        aws_session_token=credentials.get("token"),
    )
    try:
        answer = client.assume_role(
            RoleArn=role_arn, RoleSessionName=f"Airflow_{conn_id}", **dict(arguments)
        )
    except (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError) as exc:
        raise InvalidValue(
            f"connection {conn_id!r}: role_arn: cannot assume {role_arn}: {' '.join(str(exc).split())}"
        ) from None
    given = answer["Credentials"]
    return {
        "key": given["AccessKeyId"],
        "secret": given["SecretAccessKey"],
        "token": given["SessionToken"],
    }


__all__ = ["ASSUME_ROLE", "assume_role"]
