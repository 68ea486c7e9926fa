"""Space-filling curves (`delta_ops.layout`)."""
