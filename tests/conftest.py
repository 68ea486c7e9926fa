"""Test-run configuration: hypothesis profiles sized for CI's 2 cores."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, Phase, settings

settings.register_profile(
    "ci",
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.register_profile(
    "thorough",
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
# `make soak`: the reliability suite for as long as it is given (stop it with Ctrl-C or a timeout)
settings.register_profile(
    "soak",
    max_examples=100_000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
# scripts/mutation_check.py: a failure is all a mutant run needs to know, so no shrinking
settings.register_profile(
    "mutation",
    max_examples=25,
    deadline=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# The store tests talk to servers on 127.0.0.1 only: no client may look for cloud credentials on
# a metadata endpoint (a stall off-cloud, a real identity on-cloud). Set before any client loads.
os.environ["AWS_EC2_METADATA_DISABLED"] = "true"
os.environ["NO_GCE_CHECK"] = "true"  # gcsfs / google-auth: no GCE metadata probe
os.environ["GCE_METADATA_HOST"] = "127.0.0.1:9"  # and if one is made anyway, it is refused
os.environ["GCE_METADATA_IP"] = "127.0.0.1:9"
os.environ["MSI_ENDPOINT"] = "http://127.0.0.1:9"  # Azure managed identity
os.environ["IDENTITY_ENDPOINT"] = "http://127.0.0.1:9"

from tests.spark_fixtures import (  # noqa: F401  (one Spark JVM per test run)
    any_spark,
    connect_port,
    spark,
    spark_connect,
)
