"""Protocol rules and types: what the Delta protocol says, with no storage of its own (the few
functions that read or write a file, a deletion vector or a parquet footer, are handed the
filesystem).

* `delta_ops.protocol.schema`: `schemaString` <-> Arrow, partition values, stats schema.
* `delta_ops.protocol.features`: table features, per-operation support, protocol algebra.
* `delta_ops.protocol.properties`: typed table properties (Spark's interval syntax).
* `delta_ops.protocol.deletion_vectors`: DV descriptors, Z85, roaring bitmaps, DV files.
* `delta_ops.protocol.stats`: per-file statistics from parquet footers.
* `delta_ops.protocol.num_records`: `numRecords` read from a stats string.
* `delta_ops.protocol.row_tracking`: row-tracking property names and their rules.
* `delta_ops.protocol.partition_predicate`: predicates on partition columns.
* `delta_ops.protocol.units`: durations, times and sizes as users write them.

For example:

    from delta_ops.protocol.properties import TableProperties
    TableProperties.from_configuration({"delta.logRetentionDuration": "interval 7 days"})
"""
