"""What the front ends share above the operations (`delta_ops.service`): the history, what is
due, the fleet planner."""
