"""The operations (`delta_ops.ops`): each op's plan and execute, and what serves them."""
