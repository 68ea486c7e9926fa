"""Protocol rules and types, pure: what the Delta protocol says, with no I/O of its own.

* :mod:`~delta_ops.protocol.schema`: `schemaString` <-> Arrow, partition values, stats schema.
* :mod:`~delta_ops.protocol.features`: table features, per-operation support, protocol algebra.
* :mod:`~delta_ops.protocol.properties`: typed table properties (Spark's interval syntax).
* :mod:`~delta_ops.protocol.deletion_vectors`: DV descriptors, Z85, roaring bitmaps.
* :mod:`~delta_ops.protocol.stats`: per-file statistics from parquet footers.
* :mod:`~delta_ops.protocol.row_tracking`: row-tracking property names and their rules.

Example::

    from delta_ops.protocol.properties import TableProperties
    TableProperties.from_configuration({"delta.logRetentionDuration": "interval 7 days"})
"""
