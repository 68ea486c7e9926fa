"""The delta-ops version, written into every commit's `engineInfo`."""

__version__ = "0.1.0"
