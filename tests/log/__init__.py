"""The log layer (`delta_ops.log`): file names, the JSON/parquet reader, replay, checkpoints' content."""
