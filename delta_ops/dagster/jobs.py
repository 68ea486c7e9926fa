"""Op jobs with typed config, for launches from the Dagster UI and scripts.

Each job runs one action (or the combined checkpoint -> cleanup -> vacuum) on the fleet's
tables, or on the `tables` named in its config, and records an `AssetObservation` on each
table asset with the result, so a manual run shows up in the table's history. An action that
has a maintenance asset (checkpoint, log_cleanup, vacuum, row_tracking) and changed the table
also materializes that asset with the same metadata a scheduled run gives it, so the action's
asset page shows every change whichever way it was launched (schedule, sensor, the asset
graph, or this job).
"""

import functools
from collections.abc import Sequence
from typing import Any, Literal, cast

import dagster as dg
from pydantic import Field, create_model

from delta_ops.dagster.assets import run_action
from delta_ops.dagster.resource import DeltaMaintenanceResource
from delta_ops.dagster.targets import DeltaTableTarget
from delta_ops.dagster.translator import DeltaMaintenanceTranslator, asset_actions
from delta_ops.ops.operation import AnyOperation, OptionKind
from delta_ops.ops.registry import OPERATIONS, Option
from delta_ops.service.due import Action


class TableSelection(dg.Config):
    tables: list[str] = Field(
        default_factory=list, description="table names to act on; empty = every table of the fleet"
    )
    dry_run: bool = Field(default=False, description="plan and report only, change nothing")


def _config_field(option: Option) -> tuple[Any, Any]:
    """The pydantic (type, Field) of one registry option, as Dagster run config."""
    if option.kind is OptionKind.FLAG:
        return bool, Field(default=bool(option.default), description=option.help)
    if option.kind in (OptionKind.COUNT, OptionKind.VERSION):
        return int | None, Field(default=option.default, description=option.help)
    if option.kind is OptionKind.SIZE:
        # text with a unit ("128MB") or a whole number of bytes (YAML's 4194304 is an int):
        # Dagster's config takes no union of scalars, so any value, parsed as the CLI parses it
        return Any, Field(default=option.default, description=f"{option.help}; {option.hint}")
    if option.kind is OptionKind.TEXT:
        return str | None, Field(default=option.default, description=option.help)
    if option.kind is OptionKind.RATIO:
        return float, Field(default=option.default, ge=0, le=1, description=option.help)
    if option.kind is OptionKind.CHOICE:
        return Literal[option.choices], Field(
            default=option.default, description=f"{option.help} ({', '.join(option.choices)})"
        )
    # durations and times: text in the forms the CLI takes
    return str | None, Field(default=None, description=f"{option.help}; {option.hint}")


def config_class(operation: AnyOperation) -> type[TableSelection]:
    """The run config of an operation's job, generated from its registry options."""
    fields: dict[str, Any] = {o.name: _config_field(o) for o in operation.options if not o.cli_only}
    name = "".join(part.title() for part in operation.name.split("_")) + "Config"
    model: type[TableSelection] = create_model(name, __base__=TableSelection, **fields)
    return model


@functools.cache
def config_for(name: str) -> type[TableSelection]:
    """The run config of the job of the registered operation `name` (made once)."""
    return config_class(OPERATIONS[name])


def _chosen(targets: Sequence[DeltaTableTarget], names: list[str]) -> list[DeltaTableTarget]:
    if not names:
        return list(targets)
    known = {t.name: t for t in targets} | {t.safe_name: t for t in targets}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise dg.Failure(
            f"unknown tables {unknown}; this fleet has {sorted(t.name for t in targets)}",
            allow_retries=False,
        )
    return [known[n] for n in names]


def build_action_op(
    action: str,
    targets: Sequence[DeltaTableTarget],
    *,
    prefix: str,
    translator: DeltaMaintenanceTranslator,
    resource_key: str,
) -> dg.OpDefinition:
    config_class = config_for(action)

    @dg.op(
        name=f"{prefix}_{action}",
        required_resource_keys={resource_key},
        ins={"after": dg.In(dg.Nothing)},
        out=dg.Out(dg.Nothing),
        tags={"kind": "delta"},
    )
    def _op(context: dg.OpExecutionContext, config: config_class) -> None:  # type: ignore[valid-type]
        resource: DeltaMaintenanceResource = getattr(context.resources, resource_key)
        selection = cast(TableSelection, config)
        options = selection.model_dump()
        names = options.pop("tables")
        dry_run = options.pop("dry_run")
        for table in _chosen(targets, names):
            # what the config leaves unset (retention, force) comes from the table's settings
            given = {k: v for k, v in options.items() if v is not None and v is not False}
            merged = {**options, **table.settings.options_for(action), **given}
            outcome = run_action(
                resource, table, action, context.log, dry_run=dry_run, options=merged
            )
            metadata: dict[str, Any] = {
                "action": action,
                "dry_run": selection.dry_run,
                **outcome.metadata(table),
            }
            if outcome.result is None:
                context.log.info(f"{table.name}: {action} skipped: {outcome.reason}")
            else:
                context.log.info(
                    f"{table.name}: {action} {'planned' if selection.dry_run else 'done'}"
                )
            context.log_event(
                dg.AssetObservation(
                    asset_key=translator.get_asset_spec(table).key, metadata=metadata
                )
            )
            if action in asset_actions(table) and outcome.result is not None and not dry_run:
                # the action's own asset records the change, as a scheduled run's does
                context.log_event(
                    dg.AssetMaterialization(
                        asset_key=translator.get_action_spec(table, action).key,
                        metadata=outcome.metadata(table),
                    )
                )

    return _op


def _single_op_job(op: dg.OpDefinition, name: str, action: str, prefix: str) -> dg.JobDefinition:
    @dg.job(
        name=name,
        description=f"Run {action} on the {prefix} tables (typed config; dry_run to plan only).",
        tags={"delta_ops/action": action},
    )
    def _single() -> None:
        op()

    return _single


def build_jobs(
    targets: Sequence[DeltaTableTarget],
    *,
    prefix: str,
    translator: DeltaMaintenanceTranslator,
    resource_key: str,
) -> dict[str, dg.JobDefinition]:
    """One job per action plus `<prefix>_maintenance_job` (checkpoint -> cleanup -> vacuum)."""
    ops = {
        a: build_action_op(
            a, targets, prefix=prefix, translator=translator, resource_key=resource_key
        )
        for a in OPERATIONS
    }
    jobs = {
        action: _single_op_job(op, f"{prefix}_{action}_job", action, prefix)
        for action, op in ops.items()
    }

    @dg.job(
        name=f"{prefix}_maintenance_job",
        description=f"Checkpoint, then log cleanup, then vacuum every {prefix} table.",
    )
    def _maintenance() -> None:
        ops[Action.VACUUM.value](
            after=ops[Action.CLEANUP.value](after=ops[Action.CHECKPOINT.value]())
        )

    jobs["maintenance"] = _maintenance
    return jobs
