"""Hostile log files against every read-only command (issue 52.1; the harness and its judgement:
tests/support/log_fuzz.py).

Hypothesis writes each target file anew from its original bytes: JSON files (a commit,
``_last_checkpoint``, a ``.crc``) truncated, with a line dropped or repeated, a value anywhere
replaced by a hostile one (a wrong type, a number past 64 bits, a deep nest, a string of invalid
UTF-8, a partition value that is not its column's type), duplicate keys, an inline deletion
vector whose Z85 lies; binary files (a checkpoint, a sidecar, a deletion-vector file) truncated,
with bytes flipped (a bitmap's size or cardinality among them). Every command must exit 0, or
1/2 with one line naming the file, change nothing, and never fail inside delta-ops (exit 70).
CI runs a few examples per target (the run's seed chooses them, printed at the end); ``make
soak`` runs hypothesis' soak profile and a coverage-guided atheris run (``make fuzz``).

The inputs that once failed are kept in tests/data/fuzz_corpus/ and replayed here, each its own
test.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support import TABLES
from tests.support.log_fuzz import COMMANDS, CORPUS, TARGETS, BaseTables, Target, decode, run_case

#: examples per target in CI (a command each: ~0.2 s); the soak profile's count when soaking
EXAMPLES = 6 if settings.default.max_examples <= 100 else settings.default.max_examples
_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"


@pytest.fixture(scope="module")
def bases() -> Iterator[BaseTables]:
    with tempfile.TemporaryDirectory(prefix="delta-ops-fuzz-") as root:
        yield BaseTables(Path(root))


def _hostile_values() -> st.SearchStrategy[Any]:
    leaves = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=8),
        st.sampled_from(["abc", "", "2023-13-45", "1e999", "-0", "9" * 40]),
    )
    return st.recursive(
        leaves,
        lambda inner: st.one_of(
            st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)
        ),
        max_leaves=6,
    )


def _replace_somewhere(value: Any, path: list[int], new: Any) -> Any:
    """`value` with one of its leaves or objects (chosen by `path`) replaced by `new`."""
    if not path or not isinstance(value, dict | list) or not value:
        return new
    keys = list(value) if isinstance(value, dict) else list(range(len(value)))
    key = keys[path[0] % len(keys)]
    copy = dict(value) if isinstance(value, dict) else list(value)
    copy[key] = _replace_somewhere(value[key], path[1:], new)  # type: ignore[index]
    return copy


@st.composite
def _json_file(draw: st.DrawFn, original: bytes) -> bytes:
    lines = original.splitlines(keepends=True) or [b"{}\n"]
    how = draw(
        st.sampled_from(
            ["truncate", "drop", "repeat", "value", "deep", "utf8", "duplicate", "inline-dv"]
        )
    )
    i = draw(st.integers(0, len(lines) - 1))
    if how == "truncate":
        return original[: draw(st.integers(0, len(original)))]
    if how == "drop":
        return b"".join(lines[:i] + lines[i + 1 :])
    if how == "repeat":
        return b"".join(lines[: i + 1] + lines[i:])
    if how == "deep":
        depth = draw(st.integers(100, 200_000))
        return b"".join(lines[:i]) + b"[" * depth + b"]" * draw(st.integers(0, depth)) + b"\n"
    if how == "utf8":
        at = draw(st.integers(0, len(original)))
        junk = draw(st.sampled_from([b"\xc3\x28", b"\xff", b"\xed\xa0\x80", b"\xf4\x90\x80\x80"]))
        return original[:at] + junk + original[at:]
    try:
        line = json.loads(lines[i])
    except ValueError:
        line = {}
    if how == "duplicate":
        text = json.dumps(line)
        return b"".join(lines[:i]) + (text[:-1] + ", " + text[1:]).encode() + b"\n"
    if how == "inline-dv":
        dv = {
            "storageType": draw(st.sampled_from(["i", "u", "p", "x"])),
            "pathOrInlineDv": draw(st.text(alphabet=_Z85 + " \\", max_size=60)),
            "offset": draw(st.one_of(st.none(), st.integers(-5, 2**40))),
            "sizeInBytes": draw(st.integers(-5, 2**40)),
            "cardinality": draw(st.integers(-5, 2**63)),
        }
        action = next(iter(line.values()), {}) if isinstance(line, dict) else {}
        action = action if isinstance(action, dict) else {}
        line = _replace_somewhere(line, [0], {**action, "deletionVector": dv})
    else:
        path = draw(st.lists(st.integers(0, 50), min_size=1, max_size=4))
        line = _replace_somewhere(line, path, draw(_hostile_values()))
    encoded = json.dumps(line, allow_nan=True).encode()
    return b"".join(lines[:i]) + encoded + b"\n" + b"".join(lines[i + 1 :])


@st.composite
def _binary_file(draw: st.DrawFn, original: bytes) -> bytes:
    how = draw(st.sampled_from(["truncate", "flip", "header", "footer"]))
    if how == "truncate" or not original:
        return original[: draw(st.integers(0, len(original)))]
    data = bytearray(original)
    # the header holds a deletion vector's size, magic and bitmap counts; the footer a
    # parquet file's metadata and its length
    span = {"flip": (0, len(data)), "header": (0, min(len(data), 24))}.get(
        how, (max(0, len(data) - 64), len(data))
    )
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(span[0], span[1] - 1))
        data[at] = draw(st.integers(0, 255))
    return bytes(data)


def _content(target: Target) -> st.SearchStrategy[bytes]:
    original = (TABLES / target.table / target.file).read_bytes()
    if target.kind in ("commit", "last_checkpoint", "crc"):
        return _json_file(original)
    return _binary_file(original)


@pytest.mark.parametrize("target", TARGETS, ids=[t.kind for t in TARGETS])
def test_a_hostile_log_file_is_read_ignored_or_named_in_one_line(
    bases: BaseTables, target: Target
) -> None:
    @settings(max_examples=EXAMPLES)
    @given(command=st.sampled_from(COMMANDS), content=_content(target))
    def case(command: tuple[str, ...], content: bytes) -> None:
        with tempfile.TemporaryDirectory() as scratch:
            run_case(bases, Path(scratch), target, command, content)

    case()


def _corpus() -> list[Path]:
    return sorted(CORPUS.glob("*.bin")) if CORPUS.is_dir() else []


@pytest.mark.parametrize("found", _corpus(), ids=lambda p: p.stem)
def test_an_input_the_fuzzers_found_stays_judged_right(
    bases: BaseTables, found: Path, tmp_path: Path
) -> None:
    target, command, content = decode(found.read_bytes())
    run_case(bases, tmp_path, target, command, content)


def test_the_corpus_is_there() -> None:
    """The regression corpus is not lost (an empty parametrization would pass silently)."""
    assert len(_corpus()) >= 6, os.listdir(CORPUS)
