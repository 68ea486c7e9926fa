"""The Spark side (`delta_ops.spark`): the engine, the `delta` source, `write_delta` and streaming, on the shared Spark session."""
