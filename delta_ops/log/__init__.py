"""The Delta log: its files read into Arrow actions, reconciled into a table state, and a state
laid out as a checkpoint. (Commits are written by `delta_ops.table.transaction`.)

Modules, in the order a snapshot load uses them:

* `delta_ops.log.file_names`: what each file in `_delta_log` is, from its name.
* `delta_ops.log.last_checkpoint`: the `_last_checkpoint` hint and its checksum.
* `delta_ops.log.segment`: the checkpoint and commits that make up one version.
* `delta_ops.log.reader`: commits (JSON) and checkpoints (parquet, V1/V2) as Arrow.
* `delta_ops.log.actions`: the canonical columnar form of log actions.
* `delta_ops.log.replay`: action reconciliation into a table state.
* `delta_ops.log.state_stream`: the file state streamed from a checkpoint, for tables too
  big to load.
* `delta_ops.log.checkpoint_content`: a state laid out as Delta Spark's checkpoint.

For example:

    from delta_ops.log.segment import build_log_segment
    segment = build_log_segment(storage, version=None)
"""
