"""Tests for delta_ops.protocol.features: the feature registry and the protocol action."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from delta_ops.errors import DeltaOpsError, InvalidProtocol, UnsupportedFeature
from delta_ops.protocol.features import (
    FEATURES,
    Access,
    FeatureKind,
    Protocol,
    UnsupportedProtocolVersion,
    canonical_feature_name,
    implied_features,
    lookup_feature,
    required_features,
)
from tests.support import TABLES

FIXTURES = TABLES
INVALID_FIXTURE = "delta-spark/deltalog-invalid-protocol-version"


# ------------------------------------------------------------------------------ registry
SPEC_FEATURES = {
    # PROTOCOL.md "Supported Features" (with Spark's spelling timestampNtz) and its sections
    "appendOnly": FeatureKind.WRITER,
    "invariants": FeatureKind.WRITER,
    "checkConstraints": FeatureKind.WRITER,
    "generatedColumns": FeatureKind.WRITER,
    "changeDataFeed": FeatureKind.WRITER,
    "columnMapping": FeatureKind.READER_WRITER,
    "identityColumns": FeatureKind.WRITER,
    "deletionVectors": FeatureKind.READER_WRITER,
    "rowTracking": FeatureKind.WRITER,
    "timestampNtz": FeatureKind.READER_WRITER,
    "domainMetadata": FeatureKind.WRITER,
    # Delta Spark's TableFeature.scala, kernel-rs and Kernel-Java
    "v2Checkpoint": FeatureKind.READER_WRITER,
    "vacuumProtocolCheck": FeatureKind.READER_WRITER,
    "typeWidening": FeatureKind.READER_WRITER,
    "typeWidening-preview": FeatureKind.READER_WRITER,
    "variantType": FeatureKind.READER_WRITER,
    "variantType-preview": FeatureKind.READER_WRITER,
    "variantShredding-preview": FeatureKind.READER_WRITER,
    "catalogManaged": FeatureKind.READER_WRITER,
    "catalogOwned-preview": FeatureKind.READER_WRITER,
    "icebergCompatV1": FeatureKind.WRITER,
    "icebergCompatV2": FeatureKind.WRITER,
    "icebergCompatV3": FeatureKind.WRITER,
    "icebergWriterCompatV1": FeatureKind.WRITER,
    "icebergWriterCompatV3": FeatureKind.WRITER,
    "clustering": FeatureKind.WRITER,
    "inCommitTimestamp": FeatureKind.WRITER,
    "checkpointProtection": FeatureKind.WRITER,
    "collations-preview": FeatureKind.READER_WRITER,
    "allowColumnDefaults": FeatureKind.WRITER,
    "geospatial": FeatureKind.READER_WRITER,
    "coordinatedCommits-preview": FeatureKind.WRITER,
    "materializePartitionColumns": FeatureKind.WRITER,
    "redirectReaderWriter-preview": FeatureKind.READER_WRITER,
    "redirectWriterOnly-preview": FeatureKind.WRITER,
}

LEGACY_VERSIONS = {
    "appendOnly": (1, 2),
    "invariants": (1, 2),
    "checkConstraints": (1, 3),
    "changeDataFeed": (1, 4),
    "generatedColumns": (1, 4),
    "columnMapping": (2, 5),
    "identityColumns": (1, 6),
}

READABLE = {
    "deletionVectors",
    "columnMapping",
    "timestampNtz",
    "v2Checkpoint",
    "vacuumProtocolCheck",
    "typeWidening",
    "typeWidening-preview",
    "variantType",
    "variantType-preview",
}
WRITABLE = {
    "appendOnly",
    "invariants",
    "checkConstraints",
    "changeDataFeed",
    "generatedColumns",
    "columnMapping",
    "identityColumns",
    "deletionVectors",
    "domainMetadata",
    "rowTracking",
    "v2Checkpoint",
    "vacuumProtocolCheck",
    "timestampNtz",
    "typeWidening",
    "typeWidening-preview",
    "checkpointProtection",
    "clustering",
    "variantType",
    "variantType-preview",
    "allowColumnDefaults",
    "inCommitTimestamp",
}
NOT_WRITABLE = {
    "catalogManaged",
    "catalogOwned-preview",
    "icebergCompatV1",
    "icebergCompatV2",
    "icebergCompatV3",
    "icebergWriterCompatV1",
    "icebergWriterCompatV3",
    "coordinatedCommits-preview",
}


@pytest.mark.parametrize("name,kind", sorted(SPEC_FEATURES.items()))
def test_every_named_feature_is_known_with_its_kind(name, kind):
    assert FEATURES[name].kind is kind
    assert FEATURES[name].name == name


@pytest.mark.parametrize("name,versions", sorted(LEGACY_VERSIONS.items()))
def test_legacy_features_carry_their_legacy_versions(name, versions):
    feature = FEATURES[name]
    assert feature.legacy
    assert (feature.min_reader_version, feature.min_writer_version) == versions


def test_only_the_seven_pre_table_feature_features_are_legacy():
    assert {f.name for f in FEATURES.values() if f.legacy} == set(LEGACY_VERSIONS)
    for f in FEATURES.values():
        if not f.legacy:
            assert f.min_writer_version == 7
            assert f.min_reader_version == (3 if f.kind is FeatureKind.READER_WRITER else 1)


def test_read_and_write_support_decisions():
    for name in READABLE:
        assert FEATURES[name].readable, name
    for name in WRITABLE:
        assert FEATURES[name].writable, name
    for name in NOT_WRITABLE:
        assert not FEATURES[name].writable, name
    # catalog-managed: published versions are read and checkpointed, nothing else
    for name in ("catalogManaged", "catalogOwned-preview"):
        assert FEATURES[name].allowed_operations == {
            Access.READ_LOG,
            Access.READ_ROWS,
            Access.CHECKPOINT,
        }
    # writer-only features never block reading
    assert all(f.readable for f in FEATURES.values() if f.kind is FeatureKind.WRITER)
    # nothing is writable that cannot be read
    assert all(f.readable for f in FEATURES.values() if f.writable)


def test_dependencies_are_known_and_closed():
    assert required_features(["rowTracking"]) == {"rowTracking", "domainMetadata"}
    assert required_features(["clustering"]) == {"clustering", "domainMetadata"}
    assert required_features(["icebergWriterCompatV3"]) == {
        "icebergWriterCompatV3",
        "icebergCompatV3",
        "columnMapping",
        "rowTracking",
        "domainMetadata",
    }
    assert required_features(["catalogManaged"]) == {"catalogManaged", "inCommitTimestamp"}
    for f in FEATURES.values():
        assert all(r in FEATURES for r in f.requires), f.name


def test_feature_names_resolve_case_insensitively_like_spark():
    # An old PROTOCOL.md spelled it timestampNTZ; Spark's lookup lower-cases the name.
    assert lookup_feature("timestampNTZ") is FEATURES["timestampNtz"]
    assert canonical_feature_name("DELETIONVECTORS") == "deletionVectors"
    assert canonical_feature_name("someFutureFeature") == "someFutureFeature"
    assert lookup_feature("someFutureFeature") is None


# ------------------------------------------------------------------- legacy implication
IMPLIED = [
    (1, 1, set()),
    (1, 2, {"appendOnly", "invariants"}),
    (1, 3, {"appendOnly", "invariants", "checkConstraints"}),
    (1, 4, {"appendOnly", "invariants", "checkConstraints", "changeDataFeed", "generatedColumns"}),
    # columnMapping needs reader 2 as well (Spark's implicitlySupportedFeatures)
    (1, 5, {"appendOnly", "invariants", "checkConstraints", "changeDataFeed", "generatedColumns"}),
    (
        1,
        6,
        {
            "appendOnly",
            "invariants",
            "checkConstraints",
            "changeDataFeed",
            "generatedColumns",
            "identityColumns",
        },
    ),
    (2, 4, {"appendOnly", "invariants", "checkConstraints", "changeDataFeed", "generatedColumns"}),
    (
        2,
        5,
        {
            "appendOnly",
            "invariants",
            "checkConstraints",
            "changeDataFeed",
            "generatedColumns",
            "columnMapping",
        },
    ),
    (
        2,
        6,
        {
            "appendOnly",
            "invariants",
            "checkConstraints",
            "changeDataFeed",
            "generatedColumns",
            "columnMapping",
            "identityColumns",
        },
    ),
]


@pytest.mark.parametrize("reader,writer,expected", IMPLIED)
def test_legacy_versions_imply_features(reader, writer, expected):
    assert implied_features(reader, writer) == expected
    p = Protocol(reader, writer)
    assert p.effective_writer_features == expected
    assert p.effective_reader_features == ({"columnMapping"} & expected)
    for name in expected:
        assert p.supports(name)
    assert not p.supports("deletionVectors")


def test_table_feature_versions_imply_nothing():
    p = Protocol(3, 7, frozenset(), frozenset())
    assert p.effective_features == set()
    p = Protocol(1, 7, None, frozenset({"rowTracking"}))
    assert p.effective_writer_features == {"rowTracking"}
    assert not p.supports("appendOnly")


def test_reader_two_with_writer_seven_lists_column_mapping_for_writers():
    p = Protocol.from_action(
        {
            "minReaderVersion": 2,
            "minWriterVersion": 7,
            "writerFeatures": ["columnMapping", "identityColumns"],
        }
    )
    assert p.effective_reader_features == {"columnMapping"}
    assert p.effective_writer_features == {"columnMapping", "identityColumns"}
    p.check_readable()
    p.check_allows(Access.WRITE)


# --------------------------------------------------------------------------- validation
def test_invalid_fixture_protocol_says_the_reader_version_is_unsupported():
    commit = FIXTURES / INVALID_FIXTURE / "_delta_log" / "00000000000000000000.json"
    actions = [json.loads(line) for line in commit.read_text().splitlines() if line.strip()]
    protocol = next(a["protocol"] for a in actions if "protocol" in a)
    assert protocol["minReaderVersion"] == 99
    with pytest.raises(UnsupportedFeature) as info:
        Protocol.from_action(protocol)
    assert isinstance(info.value, UnsupportedProtocolVersion)
    message = str(info.value)
    assert "unsupported reader protocol version 99" in message
    assert "minReaderVersion=99" in message
    assert info.value.action == "read"


@pytest.mark.parametrize(
    "action,error,fragment",
    [
        ({"minWriterVersion": 2}, InvalidProtocol, "minReaderVersion"),
        ({"minReaderVersion": 1}, InvalidProtocol, "minWriterVersion"),
        ({"minReaderVersion": "1", "minWriterVersion": 2}, InvalidProtocol, "integer"),
        ({"minReaderVersion": True, "minWriterVersion": 2}, InvalidProtocol, "integer"),
        ({"minReaderVersion": 1.5, "minWriterVersion": 2}, InvalidProtocol, "integer"),
        ({"minReaderVersion": 0, "minWriterVersion": 2}, InvalidProtocol, "minReaderVersion 0"),
        ({"minReaderVersion": 1, "minWriterVersion": -1}, InvalidProtocol, "minWriterVersion -1"),
        ({"minReaderVersion": 4, "minWriterVersion": 7}, UnsupportedProtocolVersion, "reader"),
        (
            {"minReaderVersion": 1, "minWriterVersion": 2, "readerFeatures": ["columnMapping"]},
            InvalidProtocol,
            "readerFeatures",
        ),
        (
            {"minReaderVersion": 2, "minWriterVersion": 5, "writerFeatures": ["appendOnly"]},
            InvalidProtocol,
            "writerFeatures",
        ),
        (
            {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": "deletionVectors"},
            InvalidProtocol,
            "list",
        ),
        (
            {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": [1]},
            InvalidProtocol,
            "strings",
        ),
    ],
)
def test_invalid_protocol_actions_are_refused(action, error, fragment):
    with pytest.raises(error) as info:
        Protocol.from_action(action)
    assert fragment in str(info.value)
    assert isinstance(info.value, DeltaOpsError)


def test_lenient_where_spark_is_lenient():
    # missing lists at version 3/7 read as empty (kernel-rs rejects, Spark reads)
    p = Protocol.from_action({"minReaderVersion": 3, "minWriterVersion": 7})
    assert p.effective_features == set()
    assert p.to_action() == {
        "minReaderVersion": 3,
        "minWriterVersion": 7,
        "readerFeatures": [],
        "writerFeatures": [],
    }
    # an empty list at a legacy version is ignored, and not written back
    p = Protocol.from_action(
        {"minReaderVersion": 1, "minWriterVersion": 2, "readerFeatures": [], "writerFeatures": []}
    )
    assert p.effective_writer_features == {"appendOnly", "invariants"}
    assert p.to_action() == {"minReaderVersion": 1, "minWriterVersion": 2}
    # the whole action wrapper, and integral floats from a unified JSON read
    p = Protocol.from_action({"protocol": {"minReaderVersion": 1.0, "minWriterVersion": 2}})
    assert (p.min_reader_version, p.min_writer_version) == (1, 2)
    # writer versions beyond 7 are readable (Spark only checks the reader version) but not ours
    p = Protocol.from_action({"minReaderVersion": 1, "minWriterVersion": 8})
    p.check_readable()
    assert p.refusal(Access.WRITE) is not None
    with pytest.raises(UnsupportedProtocolVersion, match="writer protocol version 8"):
        p.check_allows(Access.WRITE)


def test_reader_features_bind_writers_and_writer_listed_reader_features_bind_readers():
    # A protocol listing a reader-writer feature only on one side is still honoured both ways.
    p = Protocol(1, 7, None, frozenset({"deletionVectors"}))
    assert "deletionVectors" in p.effective_reader_features
    p = Protocol(3, 7, frozenset({"v2Checkpoint"}), frozenset())
    assert "v2Checkpoint" in p.effective_writer_features


def test_round_trip_keeps_the_log_spelling():
    action = {
        "minReaderVersion": 3,
        "minWriterVersion": 7,
        "readerFeatures": ["timestampNTZ"],
        "writerFeatures": ["timestampNTZ", "appendOnly"],
    }
    p = Protocol.from_action(action)
    assert p.to_action() == {**action, "writerFeatures": ["appendOnly", "timestampNTZ"]}
    assert p.supports("timestampNtz")
    assert p.effective_reader_features == {"timestampNtz"}
    p.check_readable()


# ------------------------------------------------------------------------------- checks
def test_check_readable_names_the_unsupported_features():
    p = Protocol.from_action(
        {
            "minReaderVersion": 3,
            "minWriterVersion": 7,
            "readerFeatures": ["redirectReaderWriter-preview", "deletionVectors", "futureThing"],
            "writerFeatures": ["redirectReaderWriter-preview", "deletionVectors", "futureThing"],
        }
    )
    assert p.unsupported_reader_features() == {"redirectReaderWriter-preview", "futureThing"}
    with pytest.raises(UnsupportedFeature) as info:
        p.check_readable()
    assert info.value.action == "read"
    assert info.value.features == ["futureThing", "redirectReaderWriter-preview"]
    assert "futureThing, redirectReaderWriter-preview" in str(info.value)


def test_check_allows_write_names_writer_features_we_do_not_write():
    p = Protocol.from_action(
        {
            "minReaderVersion": 1,
            "minWriterVersion": 7,
            "writerFeatures": [
                "appendOnly",
                "redirectWriterOnly-preview",
                "icebergCompatV2",
                "columnMapping",
                "writerOnlyFuture",
            ],
        }
    )
    p.check_readable()  # writer-only features, known or not, never block reading
    assert p.refusing(Access.WRITE) == {
        "redirectWriterOnly-preview",
        "icebergCompatV2",
        "writerOnlyFuture",
    }
    assert p.refusal(Access.WRITE) is not None
    with pytest.raises(UnsupportedFeature) as info:
        p.check_allows(Access.WRITE)
    assert info.value.action == Access.WRITE.value
    assert "redirectWriterOnly-preview" in str(info.value)


def test_unreadable_reader_features_are_also_unwritable():
    p = Protocol(
        3, 7, frozenset({"variantShredding-preview"}), frozenset({"variantShredding-preview"})
    )
    assert p.refusing(Access.WRITE) == {"variantShredding-preview"}
    with pytest.raises(UnsupportedFeature):
        p.check_allows(Access.WRITE)


def test_supported_tables_pass_both_checks():
    for action in (
        {"minReaderVersion": 1, "minWriterVersion": 2},
        {"minReaderVersion": 2, "minWriterVersion": 6},
        {
            "minReaderVersion": 3,
            "minWriterVersion": 7,
            "readerFeatures": [
                "deletionVectors",
                "v2Checkpoint",
                "vacuumProtocolCheck",
                "columnMapping",
                "timestampNtz",
                "typeWidening",
                "variantType",
            ],
            "writerFeatures": [
                "deletionVectors",
                "v2Checkpoint",
                "vacuumProtocolCheck",
                "columnMapping",
                "timestampNtz",
                "typeWidening",
                "variantType",
                "rowTracking",
                "domainMetadata",
                "clustering",
                "appendOnly",
                "invariants",
                "checkpointProtection",
                "identityColumns",
            ],
        },
    ):
        p = Protocol.from_action(action)
        p.check_readable()
        p.check_allows(Access.WRITE)
        assert p.refusal(Access.VACUUM) is None


# ------------------------------------------------------------------------------ fixtures
def _fixture_protocols():
    """(file, protocol dict) for every protocol action in every fixture log file."""
    for log in sorted(FIXTURES.glob("*/*/_delta_log")):
        for path in sorted(log.rglob("*")):
            if path.suffix == ".json" and path.is_file():
                for line in path.read_text().splitlines():
                    if line.strip():
                        action = json.loads(line)
                        if action.get("protocol") is not None:
                            yield path, action["protocol"]
            elif path.suffix == ".parquet" and path.is_file() and "_sidecars" not in path.parts:
                schema = pq.read_schema(path)
                if "protocol" not in schema.names:
                    continue
                for row in pq.read_table(path, columns=["protocol"]).column(0).to_pylist():
                    if row is not None and row.get("minReaderVersion") is not None:
                        yield path, row


def test_fixtures_hold_protocols_from_commits_and_checkpoints():
    found = list(_fixture_protocols())
    assert any(p.suffix == ".parquet" for p, _ in found)
    assert sum(1 for p, _ in found if p.suffix == ".json") >= 40


def test_every_fixture_protocol_is_readable_except_the_invalid_one():
    seen_invalid = False
    for path, action in _fixture_protocols():
        if INVALID_FIXTURE in str(path):
            with pytest.raises(UnsupportedProtocolVersion):
                Protocol.from_action(action)
            seen_invalid = True
            continue
        protocol = Protocol.from_action(action)
        protocol.check_readable()
        # and the action survives a round trip (modulo list order / empty legacy lists)
        again = Protocol.from_action(protocol.to_action())
        assert again.effective_features == protocol.effective_features, path
    assert seen_invalid


def test_fixture_with_vacuum_protocol_check_is_writable():
    log = FIXTURES / "delta-spark/basic-with-vacuum-protocol-check-feature/_delta_log"
    actions = [
        json.loads(x) for f in sorted(log.glob("*.json")) for x in f.read_text().splitlines()
    ]
    latest = [a["protocol"] for a in actions if "protocol" in a][-1]
    protocol = Protocol.from_action(latest)
    assert protocol.supports("vacuumProtocolCheck")
    protocol.check_allows(Access.VACUUM)
    protocol.check_allows(Access.WRITE)


# ----------------------------------------------------------------------------- upgrades
def test_with_features_on_reader1_writer2_adds_row_tracking_and_domain_metadata():
    p = Protocol(1, 2).with_features("rowTracking")
    assert p == Protocol(
        1, 7, None, frozenset({"appendOnly", "invariants", "rowTracking", "domainMetadata"})
    )
    assert p.to_action() == {
        "minReaderVersion": 1,
        "minWriterVersion": 7,
        "writerFeatures": ["appendOnly", "domainMetadata", "invariants", "rowTracking"],
    }


def test_with_features_on_reader2_writer5_keeps_reader2_for_a_writer_feature():
    # Spark: Protocol(2, 7).withFeature(rowTracking).merge(Protocol(2, 5)) -> (2, 7) with the
    # legacy features, columnMapping included, listed for writers; reader 2 still implies it.
    p = Protocol(2, 5).with_features("rowTracking")
    assert p.min_reader_version == 2 and p.min_writer_version == 7
    assert p.reader_features is None
    assert p.writer_features == {
        "appendOnly",
        "invariants",
        "checkConstraints",
        "changeDataFeed",
        "generatedColumns",
        "columnMapping",
        "rowTracking",
        "domainMetadata",
    }
    assert p.effective_reader_features == {"columnMapping"}


def test_with_features_goes_to_reader3_for_a_reader_writer_table_feature():
    p = Protocol(2, 5).with_features("deletionVectors")
    assert (p.min_reader_version, p.min_writer_version) == (3, 7)
    assert p.reader_features == {"columnMapping", "deletionVectors"}
    assert p.writer_features == {
        "appendOnly",
        "invariants",
        "checkConstraints",
        "changeDataFeed",
        "generatedColumns",
        "columnMapping",
        "deletionVectors",
    }


def test_with_features_column_mapping_needs_only_reader2():
    p = Protocol(1, 1).with_features("columnMapping")
    assert p.to_action() == {
        "minReaderVersion": 2,
        "minWriterVersion": 7,
        "writerFeatures": ["columnMapping"],
    }
    p = Protocol(3, 7, frozenset(), frozenset()).with_features("columnMapping")
    assert p.reader_features == {"columnMapping"} and p.writer_features == {"columnMapping"}


def test_with_features_is_a_no_op_when_everything_is_supported():
    p = Protocol(1, 2)
    assert p.with_features("appendOnly", "invariants") is p
    q = Protocol(2, 5)
    assert q.with_features("columnMapping") is q
    r = Protocol(3, 7, frozenset({"deletionVectors"}), frozenset({"deletionVectors"}))
    assert r.with_features("DELETIONVECTORS") is r
    assert p.with_features() is p


def test_with_features_never_lowers_versions_and_keeps_unknown_and_spelled_names():
    p = Protocol(
        3,
        7,
        frozenset({"futureReader", "timestampNTZ"}),
        frozenset({"futureReader", "timestampNTZ", "futureWriter"}),
    )
    q = p.with_features("rowTracking")
    assert (q.min_reader_version, q.min_writer_version) == (3, 7)
    assert q.reader_features == {"futureReader", "timestampNTZ"}
    assert q.writer_features == {
        "futureReader",
        "timestampNTZ",
        "futureWriter",
        "rowTracking",
        "domainMetadata",
    }


def test_with_features_refuses_what_we_cannot_write():
    with pytest.raises(UnsupportedFeature, match="redirectWriterOnly-preview"):
        Protocol(1, 2).with_features("redirectWriterOnly-preview")
    with pytest.raises(UnsupportedFeature, match="noSuchFeature"):
        Protocol(1, 2).with_features("noSuchFeature")
    with pytest.raises(UnsupportedFeature, match="writer protocol version 8"):
        Protocol(1, 8).with_features("rowTracking")


# ----------------------------------------------------------------------------- property
WRITABLE_NAMES = sorted(n for n, f in FEATURES.items() if f.writable)
WRITER_ONLY_NAMES = sorted(n for n, f in FEATURES.items() if f.kind is FeatureKind.WRITER)
RW_TABLE_FEATURES = sorted(
    n for n, f in FEATURES.items() if f.kind is FeatureKind.READER_WRITER and not f.legacy
)


@st.composite
def protocols(draw) -> Protocol:
    """Valid protocols as real writers produce them (plus unknown names)."""
    shape = draw(st.sampled_from(["legacy", "writer7", "table_features"]))
    unknown_writer = draw(st.sets(st.sampled_from(["futureW1", "futureW2"]), max_size=1))
    if shape == "legacy":
        return Protocol(draw(st.integers(1, 2)), draw(st.integers(1, 6)))
    if shape == "writer7":
        reader = draw(st.integers(1, 2))
        names = draw(st.sets(st.sampled_from(WRITER_ONLY_NAMES)))
        if reader == 2 and draw(st.booleans()):
            names.add("columnMapping")
        return Protocol(reader, 7, None, frozenset(names | unknown_writer))
    readers = draw(st.sets(st.sampled_from([*RW_TABLE_FEATURES, "columnMapping", "futureRW"])))
    writers = draw(st.sets(st.sampled_from(WRITER_ONLY_NAMES)))
    return Protocol(3, 7, frozenset(readers), frozenset(readers | writers | unknown_writer))


@settings(max_examples=400, deadline=None)
@given(protocols(), st.sets(st.sampled_from(WRITABLE_NAMES), max_size=4))
def test_with_features_never_loses_an_effective_feature(p, names):
    q = p.with_features(*names)
    wanted = required_features(names)
    assert q.min_reader_version >= p.min_reader_version
    assert q.min_writer_version >= p.min_writer_version
    assert p.effective_reader_features <= q.effective_reader_features
    assert p.effective_writer_features <= q.effective_writer_features
    assert wanted <= q.effective_writer_features
    assert {n for n in wanted if FEATURES[n].is_reader_writer} <= q.effective_reader_features
    # the result is a protocol every reader accepts, and upgrading again changes nothing
    again = Protocol.from_action(q.to_action())
    assert again.effective_reader_features == q.effective_reader_features
    assert again.effective_writer_features == q.effective_writer_features
    assert q.with_features(*names) is q
    if q is not p:
        assert q.min_writer_version == 7
        if q.reader_features is not None:
            assert q.reader_features <= q.writer_features
        # a reader-3 upgrade happens only for a reader-writer table feature
        if q.min_reader_version == 3 and p.min_reader_version < 3:
            assert any(
                FEATURES[n].is_reader_writer and not FEATURES[n].legacy
                for n in q.effective_reader_features
                if n in FEATURES
            )
