"""Tests for delta_ops.protocol.properties: Spark interval parsing and typed table properties."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from delta_ops.errors import InvalidTableProperty
from delta_ops.protocol.properties import (
    LOG_RETENTION_DURATION,
    TableProperties,
    parse_interval_ms,
)
from tests.support import TABLES

SECOND = 1000
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE
DAY = 24 * HOUR
WEEK = 7 * DAY
FIXTURES = TABLES


# ------------------------------------------------------------------------------ intervals
@pytest.mark.parametrize(
    "text,ms",
    [
        ("interval 1 week", WEEK),
        ("interval 30 days", 30 * DAY),
        ("30 days", 30 * DAY),
        ("INTERVAL 2 HOURS 30 minutes", 2 * HOUR + 30 * MINUTE),
        ("1 day 2 hours", DAY + 2 * HOUR),
        ("interval 1 weeks 1 day", 8 * DAY),
        ("  interval   3   days  ", 3 * DAY),
        ("Interval 24 Hours", DAY),
        ("1 hour 1 hour", 2 * HOUR),  # repeated units add up, as in Spark
        ("1 day -1 hour", 23 * HOUR),  # a negative part is fine while the total is not negative
        ("-1 hour 1 day", 23 * HOUR),
        ("- 1 hour 1 day", 23 * HOUR),  # Spark allows whitespace after the sign
        ("+5 minutes", 5 * MINUTE),
        ("1 second", SECOND),
        ("1.5 seconds", 1500),
        (".25 second", 250),
        ("1. seconds", SECOND),
        ("0.0015 seconds", 1),  # truncated to micros, then millis
        ("2 milliseconds", 2),
        ("1500 microseconds", 1),  # millis are truncated
        ("999 microseconds", 0),
        ("0 days", 0),
        ("interval 1 day\t2 hours", DAY + 2 * HOUR),
        ("106751991 days", 106751991 * DAY),
    ],
)
def test_intervals_parse_like_spark(text, ms):
    assert parse_interval_ms(text) == ms


@pytest.mark.parametrize(
    "text,reason",
    [
        ("1 month", "months and years"),
        ("interval 2 years", "months and years"),
        ("1 day 1 month", "months and years"),
        ("abc", "unrecognized number"),
        ("", "empty"),
        ("   ", "empty"),
        ("interval", "unrecognized number"),  # becomes "interval interval"
        ("interval\t1 day", "unrecognized number"),  # only "interval " counts as the prefix
        ("interval interval 1 day", "unrecognized number"),
        ("1day", "invalid value"),
        ("1", "unit"),
        ("1 ", "unit"),
        ("1 d", "invalid unit"),
        ("1 hr", "invalid unit"),
        ("1 min", "invalid unit"),
        ("1 nanosecond", "invalid unit"),
        ("1 dayss", "invalid unit"),
        ("1 days,", "invalid unit"),
        ("1 day, 2 hours", "invalid unit"),
        ("1.5 days", "fractional"),
        ("1.5 minutes", "fractional"),
        ("1.1234567891 seconds", "nanosecond precision"),
        (". seconds", "invalid value"),
        ("1.5x seconds", "invalid value"),
        ("-1 day", "negative"),
        ("-", "number"),
        ("99999999999 days", "overflow"),
        ("9223372036854775808 microseconds", "overflow"),
        ("1 week 1", "unit"),
    ],
)
def test_invalid_intervals_raise_with_a_reason(text, reason):
    with pytest.raises(ValueError) as info:
        parse_interval_ms(text)
    assert reason in str(info.value)


@given(
    st.lists(
        st.tuples(
            st.integers(0, 10_000),
            st.sampled_from(
                ["week", "day", "hour", "minute", "second", "millisecond", "microsecond"]
            ),
            st.booleans(),
        ),
        min_size=1,
        max_size=5,
    ),
    st.booleans(),
    st.booleans(),
)
def test_interval_sums_its_parts(parts, prefix, upper):
    factor = {
        "week": WEEK * 1000,
        "day": DAY * 1000,
        "hour": HOUR * 1000,
        "minute": MINUTE * 1000,
        "second": SECOND * 1000,
        "millisecond": 1000,
        "microsecond": 1,
    }
    text = " ".join(f"{n} {unit}{'s' if plural else ''}" for n, unit, plural in parts)
    if prefix:
        text = "interval " + text
    if upper:
        text = text.upper()
    assert parse_interval_ms(text) == sum(n * factor[u] for n, u, _ in parts) // 1000


# --------------------------------------------------------------------- typed properties
def test_defaults_are_sparks():
    props = TableProperties.from_configuration({})
    assert props == TableProperties()
    assert props.log_retention_ms == 30 * DAY
    assert props.deleted_file_retention_ms == 7 * DAY
    assert props.set_transaction_retention_ms is None
    assert props.checkpoint_retention_ms == 2 * DAY
    assert props.enable_expired_log_cleanup is True
    assert props.checkpoint_interval == 10
    assert props.checkpoint_write_stats_as_json is True
    assert props.checkpoint_write_stats_as_struct is True
    assert props.checkpoint_policy == "classic"
    assert props.enable_row_tracking is False and props.row_tracking_suspended is False
    assert props.materialized_row_id_column_name is None
    assert props.materialized_row_commit_version_column_name is None
    assert props.enable_deletion_vectors is False
    assert props.column_mapping_mode == "none"
    assert props.append_only is False
    assert props.enable_change_data_feed is False
    assert props.enable_in_commit_timestamps is False
    assert props.randomize_file_prefixes is False
    assert props.random_prefix_length == 2
    assert props.data_skipping_num_indexed_cols == 32
    assert props.data_skipping_stats_columns is None
    assert props.require_checkpoint_protection_before_version == 0
    assert dict(props.raw) == {}
    assert TableProperties.from_configuration(None) == props


def test_values_are_parsed_and_typed():
    cfg = {
        "delta.logRetentionDuration": "interval 60 days",
        "delta.deletedFileRetentionDuration": "2 weeks",
        "delta.setTransactionRetentionDuration": "interval 1 day",
        "delta.checkpointRetentionDuration": "interval 3 days",
        "delta.enableExpiredLogCleanup": "FALSE",
        "delta.checkpointInterval": "100",
        "delta.checkpoint.writeStatsAsJson": "false",
        "delta.checkpoint.writeStatsAsStruct": "False",
        "delta.checkpointPolicy": "v2",
        "delta.enableRowTracking": "true",
        "delta.rowTrackingSuspended": "false",
        "delta.rowTracking.materializedRowIdColumnName": "_row-id-col-1",
        "delta.rowTracking.materializedRowCommitVersionColumnName": "_row-commit-version-col-1",
        "delta.enableDeletionVectors": "true",
        "delta.columnMapping.mode": "Name",
        "delta.columnMapping.maxColumnId": "7",
        "delta.appendOnly": "true",
        "delta.enableChangeDataFeed": "true",
        "delta.enableInCommitTimestamps": "true",
        "delta.inCommitTimestampEnablementVersion": "5",
        "delta.inCommitTimestampEnablementTimestamp": "1700000000000",
        "delta.enableTypeWidening": "true",
        "delta.randomizeFilePrefixes": "true",
        "delta.randomPrefixLength": "+4",
        "delta.dataSkippingNumIndexedCols": "-1",
        "delta.dataSkippingStatsColumns": "a, b.c ,`x,y`.`z``w`",
        "delta.requireCheckpointProtectionBeforeVersion": "12",
        "some.other": "kept",
    }
    props = TableProperties.from_configuration(cfg)
    assert props.log_retention_ms == 60 * DAY
    assert props.deleted_file_retention_ms == 14 * DAY
    assert props.set_transaction_retention_ms == DAY
    assert props.checkpoint_retention_ms == 3 * DAY
    assert props.enable_expired_log_cleanup is False
    assert props.checkpoint_interval == 100
    assert props.checkpoint_write_stats_as_json is False
    assert props.checkpoint_write_stats_as_struct is False
    assert props.checkpoint_policy == "v2"
    assert props.enable_row_tracking is True and props.row_tracking_suspended is False
    assert props.materialized_row_id_column_name == "_row-id-col-1"
    assert props.materialized_row_commit_version_column_name == "_row-commit-version-col-1"
    assert props.enable_deletion_vectors is True
    assert props.column_mapping_mode == "name"
    assert props.column_mapping_max_column_id == 7
    assert props.append_only is True
    assert props.enable_change_data_feed is True
    assert props.enable_in_commit_timestamps is True
    assert props.in_commit_timestamp_enablement_version == 5
    assert props.in_commit_timestamp_enablement_timestamp == 1700000000000
    assert props.enable_type_widening is True
    assert props.randomize_file_prefixes is True
    assert props.random_prefix_length == 4
    assert props.data_skipping_num_indexed_cols == -1
    assert props.data_skipping_stats_columns == (("a",), ("b", "c"), ("x,y", "z`w"))
    assert props.require_checkpoint_protection_before_version == 12
    assert props.raw["some.other"] == "kept"
    assert props.raw == cfg
    hash(props)  # frozen and hashable although it carries the raw map


def test_legacy_change_data_capture_key_is_read_when_the_new_one_is_absent():
    assert TableProperties.from_configuration(
        {"delta.enableChangeDataCapture": "true"}
    ).enable_change_data_feed
    assert not TableProperties.from_configuration(
        {"delta.enableChangeDataCapture": "true", "delta.enableChangeDataFeed": "false"}
    ).enable_change_data_feed


def test_keys_match_exactly_as_spark_reads_them():
    props = TableProperties.from_configuration({"delta.logretentionduration": "1 day"})
    assert props.log_retention_ms == 30 * DAY


INVALID = [
    ("delta.logRetentionDuration", "1 month"),
    ("delta.logRetentionDuration", "forever"),
    ("delta.deletedFileRetentionDuration", "-1 day"),
    ("delta.deletedFileRetentionDuration", ""),
    ("delta.setTransactionRetentionDuration", "7 dayz"),
    ("delta.checkpointRetentionDuration", "2 years"),
    ("delta.enableExpiredLogCleanup", "yes"),
    ("delta.enableExpiredLogCleanup", " true"),
    ("delta.enableExpiredLogCleanup", "1"),
    ("delta.checkpointInterval", "0"),
    ("delta.checkpointInterval", "-5"),
    ("delta.checkpointInterval", "10.0"),
    ("delta.checkpointInterval", " 10"),
    ("delta.checkpointInterval", "1_000"),
    ("delta.checkpointInterval", "2147483648"),
    ("delta.checkpoint.writeStatsAsJson", "t"),
    ("delta.checkpoint.writeStatsAsStruct", "null"),
    ("delta.checkpointPolicy", "V2"),
    ("delta.checkpointPolicy", "v3"),
    ("delta.enableRowTracking", "on"),
    ("delta.rowTrackingSuspended", "off"),
    ("delta.enableDeletionVectors", "TRUE!"),
    ("delta.columnMapping.mode", "physical"),
    ("delta.columnMapping.maxColumnId", "x"),
    ("delta.appendOnly", "appendOnly"),
    ("delta.enableChangeDataFeed", "enabled"),
    ("delta.enableChangeDataCapture", "enabled"),
    ("delta.enableInCommitTimestamps", "0"),
    ("delta.inCommitTimestampEnablementVersion", "-1"),
    ("delta.inCommitTimestampEnablementTimestamp", "soon"),
    ("delta.enableTypeWidening", "maybe"),
    ("delta.randomizeFilePrefixes", "false "),
    ("delta.randomPrefixLength", "0"),
    ("delta.dataSkippingNumIndexedCols", "-2"),
    ("delta.dataSkippingNumIndexedCols", "all"),
    ("delta.dataSkippingStatsColumns", ""),
    ("delta.dataSkippingStatsColumns", "a,,b"),
    ("delta.dataSkippingStatsColumns", "a,"),
    ("delta.dataSkippingStatsColumns", "`unclosed"),
    ("delta.dataSkippingStatsColumns", "a b"),
    ("delta.requireCheckpointProtectionBeforeVersion", "-1"),
    ("delta.requireCheckpointProtectionBeforeVersion", "v12"),
]


@pytest.mark.parametrize("key,value", INVALID)
def test_every_invalid_value_raises_naming_the_property(key, value):
    with pytest.raises(InvalidTableProperty) as info:
        TableProperties.from_configuration({key: value})
    assert info.value.name == key
    assert info.value.value == value
    assert key in str(info.value)


def test_invalid_values_cover_every_typed_property():
    typed_keys = {
        "delta.logRetentionDuration",
        "delta.deletedFileRetentionDuration",
        "delta.setTransactionRetentionDuration",
        "delta.checkpointRetentionDuration",
        "delta.enableExpiredLogCleanup",
        "delta.checkpointInterval",
        "delta.checkpoint.writeStatsAsJson",
        "delta.checkpoint.writeStatsAsStruct",
        "delta.checkpointPolicy",
        "delta.enableRowTracking",
        "delta.rowTrackingSuspended",
        "delta.enableDeletionVectors",
        "delta.columnMapping.mode",
        "delta.columnMapping.maxColumnId",
        "delta.appendOnly",
        "delta.enableChangeDataFeed",
        "delta.enableChangeDataCapture",
        "delta.enableInCommitTimestamps",
        "delta.inCommitTimestampEnablementVersion",
        "delta.inCommitTimestampEnablementTimestamp",
        "delta.enableTypeWidening",
        "delta.randomizeFilePrefixes",
        "delta.randomPrefixLength",
        "delta.dataSkippingNumIndexedCols",
        "delta.dataSkippingStatsColumns",
        "delta.requireCheckpointProtectionBeforeVersion",
    }
    assert {key for key, _ in INVALID} == typed_keys


def test_non_string_values_are_invalid_and_null_optionals_are_unset():
    with pytest.raises(InvalidTableProperty, match="delta.appendOnly"):
        TableProperties.from_configuration({"delta.appendOnly": None})
    props = TableProperties.from_configuration(
        {"delta.setTransactionRetentionDuration": None, "delta.dataSkippingStatsColumns": None}
    )
    assert props.set_transaction_retention_ms is None
    assert props.data_skipping_stats_columns is None


# ------------------------------------------------------------------------- validations
def test_retention_compatibility_follows_sparks_rule():
    assert TableProperties().validate_retention_compatibility() == []
    ok = TableProperties.from_configuration({LOG_RETENTION_DURATION: "7 days"})
    assert ok.validate_retention_compatibility() == []
    bad = TableProperties.from_configuration({LOG_RETENTION_DURATION: "1 day"})
    problems = bad.validate_retention_compatibility()
    assert len(problems) == 1
    assert "delta.logRetentionDuration" in problems[0]
    assert "delta.deletedFileRetentionDuration" in problems[0]
    bad = TableProperties.from_configuration({"delta.deletedFileRetentionDuration": "60 days"})
    assert bad.validate_retention_compatibility()
    # neither set: defaults (30 days >= 7 days) are never reported
    assert TableProperties.from_configuration({"a": "b"}).validate_retention_compatibility() == []


# ---------------------------------------------------------------------------- fixtures
def test_every_fixture_configuration_parses():
    seen = 0
    for path in sorted(FIXTURES.glob("*/*/_delta_log/*.json")):
        for line in path.read_text().splitlines():
            if line.strip() and '"metaData"' in line:
                metadata = json.loads(line).get("metaData")
                if metadata is not None:
                    TableProperties.from_configuration(metadata.get("configuration") or {})
                    seen += 1
    assert seen > 10
