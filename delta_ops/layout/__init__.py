"""Data layout: space-filling curves that order rows by several columns (Z-order, Hilbert),
pure numpy and pyarrow, no I/O; and a table's clustering (`delta_ops.layout.clustering`: its
columns, which files a clustering wrote, how well they separate), read from a loaded snapshot.
`delta_ops.ops.cluster` lays tables out with them, and the writers of a clustered table order
each task's rows along them (`write_order`)."""
