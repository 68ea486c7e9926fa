"""Predicates on partition columns, evaluated on a table's files with Arrow compute.

The one grammar behind `delta-ops compact --where` and the writers' `replaceWhere`: terms on
partition columns joined by ``AND`` (or ``,``):

    day = '2026-11-01'                 day >= '2026-11-01' AND day < '2026-12-01'
    region IN ('eu', 'us')             region IS NULL          day=2026-11-01,region=eu

Operators: ``=`` (``==``), ``!=`` (``<>``), ``<``, ``<=``, ``>``, ``>=``, ``IN (...)``,
``IS [NOT] NULL``. Values are quoted strings, numbers, ``true``/``false``, or bare words (read
as text); each is cast to the column's type, so dates and timestamps compare as such. A
comparison with a null partition value is false, as in SQL. Anything else (another column,
``OR``, a function) is refused with a message that lists these forms.

    predicate = parse_partition_predicate(
        "day >= '2026-11-01'", snapshot.schema, snapshot.partition_columns, mapped=mapped
    )
    mask = predicate.mask(snapshot.files)            # boolean Array, one per file
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from delta_ops.errors import InvalidValue
from delta_ops.protocol.schema import (
    DeltaType,
    StructType,
    parse_partition_values,
    physical_name,
)

FORMS = (
    "terms on partition columns joined by AND: COLUMN = 'value', <, <=, >, >=, !=, "
    "COLUMN IN ('a', 'b'), COLUMN IS [NOT] NULL (or COLUMN=VALUE[,COLUMN=VALUE])"
)
_TOKEN = re.compile(
    r"""\s*(?:
        (?P<string>'(?:[^']|'')*')
      | (?P<op><=|>=|<>|!=|==|=|<|>)
      | (?P<paren>[(),])
      | (?P<word>[^\s()=<>!,']+)
    )""",
    re.VERBOSE,
)
_OPS = {
    "=": pc.equal,
    "==": pc.equal,
    "!=": pc.not_equal,
    "<>": pc.not_equal,
    "<": pc.less,
    "<=": pc.less_equal,
    ">": pc.greater,
    ">=": pc.greater_equal,
}


@dataclass(frozen=True)
class Term:
    """One condition: `column` (logical name) `op` `values` (text as written)."""

    column: str
    op: str  # one of _OPS, "in", "is null", "is not null"
    values: tuple[str | None, ...]


@dataclass(frozen=True)
class PartitionPredicate:
    """Terms that must all hold, with the partition columns' types and physical names."""

    text: str
    terms: tuple[Term, ...]
    types: dict[str, DeltaType]
    keys: dict[str, str]  # logical column -> partitionValues key
    option: str = ""  # how the user wrote it (--where, replaceWhere), for messages

    def mask(self, files: pa.Table) -> pa.Array:
        """Which of `files` (rows with `partitionValues`) the predicate selects."""
        result = pa.array([True] * files.num_rows, pa.bool_())
        if not files.num_rows:
            return result
        values = files.column("partitionValues").combine_chunks()
        for term in self.terms:
            key = pa.scalar(self.keys[term.column], pa.string())
            raw = pc.map_lookup(values, key, "first")
            column = parse_partition_values(raw, self.types[term.column])
            result = pc.and_(result, pc.fill_null(self._holds(term, column), False))
        return result

    def selects(self, partition_values: Sequence[Mapping[str, str | None]]) -> list[bool]:
        """For each file's `partitionValues` (as in an `add`), whether the predicate holds."""
        rows = pa.table(
            {"partitionValues": pa.array([list(v.items()) for v in partition_values], _MAP)}
        )
        return [bool(b) for b in self.mask(rows).to_pylist()]

    def _holds(self, term: Term, column: pa.Array) -> pa.Array:
        if term.op == "is null":
            return pc.is_null(column)
        if term.op == "is not null":
            return pc.is_valid(column)
        typed = self._literals(term, column.type)
        if term.op == "in":
            return pc.is_in(column, value_set=typed)
        return _OPS[term.op](column, typed[0])

    def _literals(self, term: Term, typ: pa.DataType) -> pa.Array:
        try:
            return parse_partition_values(
                pa.array(list(term.values), pa.string()), self.types[term.column]
            ).cast(typ)
        except Exception as exc:  # noqa: BLE001 - any cast failure is the user's value
            where = f"{self.option} {self.text!r}" if self.option else repr(self.text)
            raise InvalidValue(
                f"{where}: {list(term.values)} cannot be read as {term.column}'s type "
                f"{self.types[term.column]}: {exc}"
            ) from None

    def __str__(self) -> str:
        return self.text


_MAP = pa.map_(pa.string(), pa.string())


def parse_partition_predicate(
    text: str,
    schema: StructType,
    partition_columns: Sequence[str],
    *,
    mapped: bool = False,
    keys: Mapping[str, str] | None = None,
    option: str = "",
) -> PartitionPredicate:
    """Parse `text` against the table's partition columns (see the module doc); `option`
    (``--where``, ``replaceWhere``) names it in error messages. `partitionValues` are keyed
    by physical names when `mapped`, or as `keys` (logical column -> key) says.

    Raises:
        InvalidValue: the text is not in the grammar, names a column that is not a partition
            column, or has a value that cannot be read as the column's type.
    """
    by_lower = {f.name.lower(): f for f in schema.fields}
    columns = {c.lower(): by_lower[c.lower()] for c in partition_columns if c.lower() in by_lower}

    def refuse(why: str) -> InvalidValue:
        accepted = ", ".join(partition_columns) or "none: the table is not partitioned"
        where = f"{option} {text!r}" if option else repr(text)
        return InvalidValue(f"{where}: {why}; use {FORMS}; partition columns: {accepted}")

    tokens = _tokens(text, refuse)
    terms: list[Term] = []
    position = 0

    def take() -> tuple[str, str]:
        nonlocal position
        if position >= len(tokens):
            raise refuse("it ends too early")
        token = tokens[position]
        position += 1
        return token

    while position < len(tokens):
        kind, column = take()
        if kind != "word":
            raise refuse(f"expected a column name, found {column!r}")
        field = columns.get(column.lower())
        if field is None:
            raise refuse(f"{column!r} is not a partition column")
        kind, op = take()
        if kind == "op":
            terms.append(Term(field.name, op, (_literal(take(), refuse),)))
        elif kind == "word" and op.lower() == "in":
            if take() != ("paren", "("):
                raise refuse("IN needs a parenthesised list")
            values: list[str | None] = []
            while True:
                values.append(_literal(take(), refuse))
                closing = take()
                if closing == ("paren", ")"):
                    break
                if closing != ("paren", ","):
                    raise refuse("IN values are separated by commas")
            terms.append(Term(field.name, "in", tuple(values)))
        elif kind == "word" and op.lower() == "is":
            kind, word = take()
            negated = word.lower() == "not"
            if negated:
                kind, word = take()
            if word.lower() != "null":
                raise refuse("IS must be followed by NULL or NOT NULL")
            terms.append(Term(field.name, "is not null" if negated else "is null", ()))
        else:
            raise refuse(f"expected a comparison after {column!r}, found {op!r}")
        if position < len(tokens):
            joiner = take()
            if joiner != ("paren", ",") and not (
                joiner[0] == "word" and joiner[1].lower() == "and"
            ):
                raise refuse(f"terms are joined by AND, found {joiner[1]!r}")
            if position >= len(tokens):
                raise refuse("it ends after AND")
    if not terms:
        raise refuse("it is empty")
    return PartitionPredicate(
        text=text,
        terms=tuple(terms),
        types={c.name: c.type for c in columns.values()},
        keys={
            c.name: (keys or {}).get(c.name) or (physical_name(c) if mapped else c.name)
            for c in columns.values()
        },
        option=option,
    )


def _tokens(text: str, refuse: Any) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    position = 0
    stripped = text.rstrip()
    while position < len(stripped):
        match = _TOKEN.match(stripped, position)
        if match is None or match.end() == position:
            raise refuse(f"cannot read it from {stripped[position:]!r}")
        kind = match.lastgroup or "word"
        out.append((kind, match.group(kind)))
        position = match.end()
    return out


def _literal(token: tuple[str, str], refuse: Any) -> str | None:
    kind, value = token
    if kind == "string":
        return value[1:-1].replace("''", "'")
    if kind == "word":
        return None if value.lower() == "null" else value
    raise refuse(f"expected a value, found {value!r}")


__all__ = ["FORMS", "PartitionPredicate", "Term", "parse_partition_predicate"]
