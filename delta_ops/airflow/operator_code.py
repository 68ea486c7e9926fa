"""The operator classes as Python source, written from the registry: typed, documented, checked in.

`delta_ops/airflow/operator_classes.py` is this module's output, checked in, so type checkers
and IDEs see every operator (`DeltaVacuumOperator`) and its arguments: one keyword-only,
typed parameter per option of the operation (its default the registry's), `version` for an
operation acting on a chosen version, the arguments every operator takes (their types and
defaults `DeltaOperationOperator`'s), and Airflow's own as `**kwargs` typed by
`BaseOperatorArguments`; a Markdown docstring listing them; the `template_fields`.
`tests/airflow/test_operator_code.py` fails when the file is not what this module writes, so a
new operation or option reaches the classes with the registry. Rewrite it with:

    python -m delta_ops.airflow.operator_code delta_ops/airflow/operator_classes.py

The classes are written for the registry's own entries (`ENTRIES`); an operation registered
later (`Registry.extend`) gets an untyped class at run time (`operator_class`).
"""

from __future__ import annotations

import inspect
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from delta_ops.airflow.operator_base import (
    COMMON_ARGUMENTS,
    ENGINE_ONLY_LOCAL,
    VERSION_HELP,
    DeltaOperationOperator,
    operator_name,
    operator_options,
)
from delta_ops.ops.operation import AnyOperation, Option, OptionKind
from delta_ops.ops.registry import ENTRIES, OPERATIONS

#: where the classes are written
TARGET = Path(__file__).with_name("operator_classes.py")
#: the command that writes them
COMMAND = "python -m delta_ops.airflow.operator_code delta_ops/airflow/operator_classes.py"
#: the values an option of each kind takes from a DAG file, besides an `XComArg`: a kind's own
#: (`7d` or 0 for a duration, a number or its text), and text for a template
KIND_TYPES: dict[OptionKind, str] = {
    OptionKind.DURATION: "str | int",
    OptionKind.TIME: "str",
    OptionKind.COUNT: "int | str",
    OptionKind.FLAG: "bool | str",
    OptionKind.CHOICE: "str",
    OptionKind.RATIO: "float | str",
    OptionKind.SIZE: "int | str",
    OptionKind.TEXT: "str",
    OptionKind.VERSION: "int | str",
}
_WIDTH = 100
_HELP = dict(COMMON_ARGUMENTS)


def _literal(value: Any) -> str:
    """`value` as Python source, strings in double quotes (as ruff formats them)."""
    if isinstance(value, str):
        if '"' in value or "\\" in value or "\n" in value:
            raise TypeError(f"{value!r}: a default the generator cannot quote")
        return f'"{value}"'
    if value is None or isinstance(value, (bool, int, float)):
        return repr(value)
    raise TypeError(f"{value!r}: a default the generator cannot write")


def _docstring_text(text: str) -> str:
    """`text` safe inside a triple-quoted docstring."""
    if "\\" in text or '"""' in text:
        raise TypeError(f"{text!r}: text the generator cannot put in a docstring")
    return text


def _bullet(text: str) -> list[str]:
    return textwrap.wrap(
        _docstring_text(text),
        _WIDTH,
        initial_indent="    - ",
        subsequent_indent="      ",
        break_long_words=False,
        break_on_hyphens=False,
    )


def _paragraph(text: str, first: str = "    ") -> list[str]:
    return textwrap.wrap(
        _docstring_text(text),
        _WIDTH,
        initial_indent=first,
        subsequent_indent="    ",
        break_long_words=False,
        break_on_hyphens=False,
    )


@dataclass(frozen=True)
class Parameter:
    """One keyword of a class's `__init__`: its name, annotation and default (source text;
    None for a required one), and what the docstring says of it."""

    name: str
    annotation: str
    default: str | None
    said: str

    def source(self) -> str:
        default = "" if self.default is None else f" = {self.default}"
        return f"        {self.name}: {self.annotation}{default},"


def _option_parameter(option: Option) -> Parameter:
    annotation = f"{KIND_TYPES[option.kind]} | XComArg"
    if option.default is None:
        annotation += " | None"
    default = "" if option.default in (None, "", ()) else f"; default `{option.default}`"
    said = f"`{option.name}` ({option.kind.value}: {option.hint}{default}): {option.help}"
    return Parameter(option.name, annotation, _literal(option.default), said)


def _common_parameters(takes_engine: bool) -> list[Parameter]:
    """The base's own arguments after `table`, as its signature has them; `engine` only for an
    operation without the option (where it takes `local` alone)."""
    parameters = []
    signature = inspect.signature(DeltaOperationOperator.__init__)
    for name, parameter in signature.parameters.items():
        if name in ("self", "kwargs", "table"):
            continue
        if name == "engine":
            if takes_engine:
                continue
            said = f"`engine`: {ENGINE_ONLY_LOCAL}"
            parameters.append(Parameter(name, 'Literal["local"]', '"local"', said))
            continue
        annotation = parameter.annotation
        if not isinstance(annotation, str):  # the module's annotations are text (PEP 563)
            raise TypeError(f"{name}: an annotation the generator cannot write: {annotation!r}")
        said = f"`{name}`: {_HELP[name]}"
        parameters.append(Parameter(name, annotation, _literal(parameter.default), said))
    return parameters


def parameters(operation: AnyOperation) -> list[Parameter]:
    """Every keyword of the class of `operation`, in its signature's order."""
    options = operator_options(operation)
    names = [o.name for o in options]
    own = list(inspect.signature(DeltaOperationOperator.__init__).parameters)
    clashing = sorted(set(names) & (set(own) - {"engine"}))
    if clashing or (operation.at_version and "version" in names):
        raise TypeError(
            f"{operation.name}: options named as an operator's own arguments: "
            f"{clashing or ['version']}"
        )
    table = Parameter("table", "str", None, f"`table`: {_HELP['table']}")
    found = [table, *(_option_parameter(o) for o in options)]
    if operation.at_version:
        said = f"`version` (version: a version number, 0 or more): {VERSION_HELP}"
        found.append(Parameter("version", "int | str | XComArg | None", "None", said))
    return [*found, *_common_parameters("engine" in names)]


def template_fields(operation: AnyOperation) -> tuple[str, ...]:
    """The fields Airflow renders: the table, the storage options, the version, the options."""
    at_version = ("version",) if operation.at_version else ()
    return ("table", "storage_options", *at_version, *(o.name for o in operator_options(operation)))


def render_class(operation: AnyOperation) -> str:
    """The source of the operator class of `operation`."""
    name = operator_name(operation)
    keywords = parameters(operation)
    summary = (
        f"{operation.help[:1].upper()}{operation.help[1:]}: `delta-ops {operation.command}` run"
        " by an Airflow task."
    )
    about = (
        "What a run does, its XCom and asset events: `delta_ops.airflow.operators`; the how-to"
        f" page: docs/airflow/operators/{operation.name}.md. Written from the registry by"
        " `delta_ops.airflow.operator_code`."
    )
    fields = template_fields(operation)
    doc = [
        *_paragraph(summary, '    """'),
        "",
        *_paragraph(about),
        "",
        "    Arguments, all keywords (an option's kind and accepted forms, then its meaning):",
        "",
        *_bullet(f"`task_id`: {_HELP['task_id']}"),
        *(line for keyword in keywords for line in _bullet(keyword.said)),
        "",
        *_paragraph(
            "Templated (parsed when the task runs): "
            + ", ".join(f"`{field}`" for field in fields)
            + ". A value that is not templated is parsed now: a bad one, or a misspelled"
            f" keyword, fails the DAG's import in one line naming `{operation.name}`."
        ),
        '    """',
    ]
    lines = [
        f"class {name}(DeltaOperationOperator):",
        *doc,
        "",
        "    __module__ = PUBLIC_MODULE",
        f"    operation = OPERATIONS[{_literal(operation.name)}]",
        "    template_fields: Sequence[str] = (",
        *(f"        {_literal(field)}," for field in fields),
        "    )",
        "",
        "    def __init__(",
        "        self,",
        "        *,",
        *(keyword.source() for keyword in keywords),
        "        **kwargs: Unpack[BaseOperatorArguments],",
        "    ) -> None:",
        "        super().__init__(",
        *(f"            {keyword.name}={keyword.name}," for keyword in keywords),
        "            **kwargs,",
        "        )",
    ]
    return "\n".join(lines) + "\n"


def render() -> str:
    """The source of `delta_ops/airflow/operator_classes.py`: a class per operation of the
    registry's `ENTRIES`, in their order."""
    operations = [OPERATIONS[entry.name] for entry in ENTRIES]
    names = [operator_name(operation) for operation in operations]
    literal = any("engine" not in {o.name for o in operator_options(op)} for op in operations)
    typing_names = ", ".join(["Any", *(["Literal"] if literal else []), "Unpack"])
    head = f'''"""The operator classes, one per operation of the registry: written by a generator, not by hand.

Edit the registry (`delta_ops.ops.registry`, an operation's options) or the generator
(`delta_ops.airflow.operator_code`), then rewrite this file:

    {COMMAND}

`tests/airflow/test_operator_code.py` fails while it is not current. DAG files import the
classes from `delta_ops.airflow.operators` (their `__module__`), which holds them all.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import {typing_names}

from airflow.sdk import XComArg

from delta_ops.airflow.operator_base import (
    PUBLIC_MODULE,
    BaseOperatorArguments,
    DeltaOperationOperator,
)
from delta_ops.ops.registry import OPERATIONS
'''
    classes = "\n\n".join(render_class(operation) for operation in operations)
    tail = [
        "#: every operation's class, in the registry's order",
        "OPERATOR_CLASSES: tuple[type[DeltaOperationOperator], ...] = (",
        *(f"    {name}," for name in names),
        ")",
        "",
        "__all__ = [",
        '    "OPERATOR_CLASSES",',
        *(f'    "{name}",' for name in sorted(names)),
        "]",
    ]
    return f"{head}\n\n{classes}\n\n" + "\n".join(tail) + "\n"


def write(target: Path = TARGET) -> Path:
    """Write the classes' source to `target`; the path."""
    target.write_text(render())
    return target


if __name__ == "__main__":
    print(write(Path(sys.argv[1]) if len(sys.argv) > 1 else TARGET))


__all__ = [
    "COMMAND",
    "KIND_TYPES",
    "TARGET",
    "Parameter",
    "parameters",
    "render",
    "render_class",
    "write",
]
