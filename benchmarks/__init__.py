"""Benchmarks and synthetic-table fixtures of delta-ops (see README.md)."""
