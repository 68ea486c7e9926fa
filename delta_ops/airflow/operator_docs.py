"""The how-to page of each operator (arguments, templating, XCom), written from the registry.

The site's pages ``docs/airflow/operators/<operation>.md`` are this module's output, checked
in; `tests/airflow/test_docs.py` fails when one is not current, so a new operation or option
reaches the docs with the operator. Rewrite them with:

    python -m delta_ops.airflow.operator_docs docs/airflow/operators
"""

from __future__ import annotations

import sys
from pathlib import Path

from delta_ops.airflow.operator_base import COMMON_ARGUMENTS, ENGINE_ONLY_LOCAL
from delta_ops.airflow.operators import OPERATORS, operator_options
from delta_ops.ops.operation import AnyOperation, Option


def _default(option: Option) -> str:
    return "—" if option.default in (None, "", ()) else f"`{option.default}`"


def _cell(text: str) -> str:
    """`text` inside a Markdown table's cell (its bars escaped)."""
    return text.replace("|", "\\|")


def render(operation: AnyOperation) -> str:
    """The how-to page of the operator of `operation`, as Markdown."""
    cls = OPERATORS[operation.name]
    options = operator_options(operation)
    takes_engine = any(o.name == "engine" for o in options)
    *common, spark = COMMON_ARGUMENTS  # the engine's row before the Spark connection's
    rows = [f"| `{name}` | {said} |" for name, said in common]
    if not takes_engine:
        rows.append(f"| `engine` | {ENGINE_ONLY_LOCAL} |")
    rows.append(f"| `{spark[0]}` | {spark[1]} |")
    option_rows = [
        f"| `{o.name}` | {o.kind.value} | {_default(o)} | {_cell(f'{o.help} ({o.hint})')} |"
        for o in options
    ]
    if operation.at_version:
        option_rows.append("| `version` | version | the latest | the version to act on |")
    example_option = next((o for o in options if o.name not in ("engine",)), None)
    templated = (
        f'    {example_option.name}="{{{{ params.{example_option.name} }}}}",\n'
        if example_option is not None
        else ""
    )
    fields = ", ".join(f"`{f}`" for f in cls.template_fields)
    return f"""# {cls.__name__}

<!-- written by `python -m delta_ops.airflow.operator_docs docs/airflow/operators`: edit the
registry or the generator, not this page -->

{operation.help[:1].upper()}{operation.help[1:]}: the operation
[{operation.command}](../../operations/{operation.command}.md), run by an Airflow task.

```python
from delta_ops.airflow.operators import {cls.__name__}

{cls.__name__}(
    task_id="{operation.name}_events",
    table="s3://lake/events",
    delta_ops_conn_id="lake_s3",
{templated})
```

## Arguments

| argument | meaning |
|---|---|
{chr(10).join(rows)}

The operation's options, by their Python names (the CLI's flags without `--`, `-` as `_`):

| option | kind | default | meaning |
|---|---|---|---|
{chr(10).join(option_rows) if option_rows else "| — | | | it takes none |"}

A misspelled argument, or a value that is not templated and does not parse, fails the DAG's
import in one line naming `{operation.name}` and the argument.

## Templating

Templated fields: {fields}. A templated value (`"{{{{ params.x }}}}"`, an XCom) is parsed when
the task runs, after Airflow rendered it; a bad one fails the task in one line and is recorded
in the operation history as a failed run.

## XCom and asset events

The task returns its result as plain data (what `delta-ops {operation.name} --json` prints),
with `dry_run`: the plan's data on a dry run, the result's otherwise. The same dictionary is
the `extra` of an event on each `Asset` in the task's `outlets`. Lists longer than
`max_listed` are cut to their first entries and named under `truncated`; counts stay whole.
A plan with nothing to do skips the task (its reason in the log) and returns nothing.

With the OpenLineage provider installed, the task reports the table as its input and output
dataset, with the versions before and after, files and bytes
([Airflow: lineage](../../airflow.md#lineage)).
"""


def write(folder: Path) -> list[Path]:
    """Write every operator's page into `folder`; the paths written."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, cls in sorted(OPERATORS.items()):
        path = folder / f"{name}.md"
        path.write_text(render(cls.operation))
        written.append(path)
    return written


if __name__ == "__main__":
    for path in write(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/airflow/operators")):
        print(path)


__all__ = ["render", "write"]
