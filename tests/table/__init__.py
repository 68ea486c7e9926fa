"""The table layer (`delta_ops.table`): snapshots, transactions, writes, scans, checksums."""
