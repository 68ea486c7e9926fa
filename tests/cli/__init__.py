"""The `delta-ops` command (`delta_ops.cli`): help, bad input, failures and clean exits."""
