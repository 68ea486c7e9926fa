"""Data layout: space-filling curves that order rows by several columns (Z-order, Hilbert),
pure numpy and pyarrow, no I/O. `delta_ops.ops.cluster` lays tables out with them, and the
writers of a clustered table order each task's rows along them (`write_order`)."""
