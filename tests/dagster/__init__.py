"""The Dagster plugin (`delta_ops.dagster`), executing for real."""
