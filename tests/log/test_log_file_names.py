"""`_delta_log` file names classified by `parse_log_file_name`: the commit fast path gives what
the full pattern gives, for commit-like names and near misses alike."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from delta_ops.log import file_names
from delta_ops.log.file_names import LogFileKind, parse_log_file_name


def _by_pattern(name: str, size: int, mtime: int) -> file_names.LogFile | None:
    """The classification by the full pattern alone (no fast path)."""
    m = file_names._PATTERN.match(name)
    if m is None or not m["json"]:
        return None
    return file_names.LogFile(name, LogFileKind.COMMIT, int(m["version"]), size, mtime)


DIGITS = st.text(st.sampled_from("0123456789٣²x "), min_size=19, max_size=21)
NAMES = st.builds(
    lambda v, ext: v + ext, DIGITS, st.sampled_from([".json", ".jsonx", "json", ".JSON", ".crc"])
)


@settings(max_examples=400, deadline=None)
@given(
    name=NAMES | st.just("00000000000000000007.json"),
    size=st.integers(0, 99),
    mtime=st.integers(0, 99),
)
def test_commit_names_parse_as_the_pattern_does(name: str, size: int, mtime: int) -> None:
    parsed = parse_log_file_name(name, size, mtime)
    expected = _by_pattern(name, size, mtime)
    if expected is not None or parsed is None or parsed.kind is LogFileKind.COMMIT:
        assert parsed == expected, name


NEAR_MISSES = [
    "0" * 21 + ".json",  # a digit too many
    "0" * 19 + ".json",  # one too few
    "0" * 19 + "\u0663.json",  # an Arabic-Indic digit: a decimal digit to the pattern too
    "0" * 19 + "\u00b2.json",  # a superscript two: a digit, not a decimal one
    "0" * 20 + ".jsonl",
    "0" * 20 + ".JSON",
    "0" * 20 + ".0" + "0" * 19 + ".compacted.json",
]


@pytest.mark.parametrize("name", NEAR_MISSES)
def test_names_near_a_commits_parse_as_the_pattern_does(name: str) -> None:
    parsed = parse_log_file_name(name, 1, 2)
    expected = _by_pattern(name, 1, 2)
    assert parsed == expected or (
        expected is None and parsed is not None and parsed.kind is not LogFileKind.COMMIT
    )


def test_a_commit_name_parses_to_its_version() -> None:
    parsed = parse_log_file_name("00000000000000000042.json", 7, 9)
    assert parsed == file_names.LogFile(
        "00000000000000000042.json", LogFileKind.COMMIT, 42, size=7, modification_time=9
    )
    assert parse_log_file_name("0000000000000000042.json") is None  # 19 digits
    assert parse_log_file_name("00000000000000000042.crc").kind is LogFileKind.CHECKSUM  # type: ignore[union-attr]
