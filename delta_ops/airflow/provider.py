"""What Airflow learns about the provider: its modules, hook and connection type.

Airflow calls `get_provider_info` through the ``apache_airflow_provider`` entry point in
`pyproject.toml` (``delta_ops.airflow.provider:get_provider_info``), validates it against its
provider schema and lists the provider (``airflow providers list``), its connection type
``delta_ops`` (the connection form), hook, operators, sensor and triggers. Reading it imports
nothing of Airflow or of the operators, so every Airflow command pays nothing for it:

    airflow providers get delta-ops
"""

from __future__ import annotations

from typing import Any

from delta_ops.version import __version__

#: the distribution's name: Airflow checks that the entry point's package says the same
PACKAGE_NAME = "delta-ops"
INTEGRATION = "Delta Lake (delta-ops)"


def get_provider_info() -> dict[str, Any]:
    """The provider's description, in the shape of Airflow's ``provider_info.schema.json``."""
    return {
        "package-name": PACKAGE_NAME,
        "name": "delta-ops",
        "description": (
            "Maintenance for Delta Lake tables in pure Python (checkpoints, log cleanup, vacuum,"
            " row tracking, rewrites), without a Databricks cluster or a JVM."
        ),
        "versions": [__version__],
        "integrations": [
            {
                "integration-name": INTEGRATION,
                "external-doc-url": "https://delta.io/",
                "tags": ["software"],
            }
        ],
        "operators": [
            {"integration-name": INTEGRATION, "python-modules": ["delta_ops.airflow.operators"]}
        ],
        "sensors": [
            {"integration-name": INTEGRATION, "python-modules": ["delta_ops.airflow.sensors"]}
        ],
        "hooks": [{"integration-name": INTEGRATION, "python-modules": ["delta_ops.airflow.hook"]}],
        "triggers": [
            {"integration-name": INTEGRATION, "python-modules": ["delta_ops.airflow.triggers"]}
        ],
        "connection-types": [
            {
                "connection-type": "delta_ops",
                "hook-class-name": "delta_ops.airflow.hook.DeltaOpsHook",
                "hook-name": INTEGRATION,
            }
        ],
    }


__all__ = ["PACKAGE_NAME", "get_provider_info"]
