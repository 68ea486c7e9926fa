"""The protocol rules (`delta_ops.protocol`): schema, features, properties, statistics, deletion vectors, units."""
