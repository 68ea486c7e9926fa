"""Plans and results as plain data: the one serializer every front end prints with.

Plans and results are frozen dataclasses; `fields_data` turns one into a JSON-ready dict
(fields marked ``repr=False``, such as the snapshot a plan carries, are left out; tuples become
lists), with computed extras added by the class's ``to_dict``. `to_data` converts anything
a front end holds (a result, a list of them, nested dicts):

    print(json.dumps(to_data(execute_vacuum(plan))))
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from enum import Enum
from typing import Any

_PLAIN = frozenset({str, int, float, bool, type(None)})


def to_data(value: Any) -> Any:
    """`value` as JSON-ready plain data; plain values pass through untouched (a result listing
    100k paths costs one pass)."""
    if type(value) in _PLAIN:
        return value
    if isinstance(value, Enum):  # a kind, a mode, a reason: its value
        return to_data(value.value)
    if isinstance(value, (list, tuple)):
        return [v if type(v) in _PLAIN else to_data(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): v if type(v) in _PLAIN else to_data(v) for k, v in value.items()}
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        return to_data(to_dict())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return fields_data(value)
    if isinstance(value, (set, frozenset)):
        return sorted(to_data(v) for v in value)
    return value


def fields_data(obj: Any, **extra: Any) -> dict[str, Any]:
    """A dataclass instance's shown fields (``repr=True``) as plain data, plus `extra`."""
    out = {f.name: to_data(getattr(obj, f.name)) for f in dataclasses.fields(obj) if f.repr}
    out.update({k: to_data(v) for k, v in extra.items()})
    return out
