"""Table features and the protocol action: what a table asks of its readers and writers.

A Delta table states its requirements in its `protocol` action: a legacy reader version (1, 2)
and writer version (1..6) *imply* a fixed set of features; reader version 3 and writer version 7
list them by name in `readerFeatures` / `writerFeatures`. This module knows every feature named
in the protocol text and in Delta Spark (plus the kernels' and accepted RFCs' names), says which
ones delta-ops can honour when it reads a table and when it commits to one, and does the
protocol algebra (effective features, upgrades that never drop a feature).

Support is per operation (`Access`), not per table: a feature may allow checkpoints
but refuse data writes. Loading a snapshot checks `Protocol.check_readable`; every
operation then calls `Protocol.check_allows` with what it is about to do (a checkpoint,
cleanup, a vacuum, which `vacuumProtocolCheck` requires to check the writer protocol before
deleting anything, a data write, ...), and reports that only describe a table ask
`Protocol.refusal`.

For example:

    p = Protocol.from_action({"minReaderVersion": 1, "minWriterVersion": 2})
    p.effective_writer_features            # frozenset({'appendOnly', 'invariants'})
    p.check_readable(); p.check_allows(Access.WRITE)
    q = p.with_features("rowTracking")     # what Spark's ALTER TABLE ... enableRowTracking commits
    q.to_action()
    # {'minReaderVersion': 1, 'minWriterVersion': 7,
    #  'writerFeatures': ['appendOnly', 'domainMetadata', 'invariants', 'rowTracking']}

Readers are lenient, writers exact: `from_action` accepts what Delta Spark accepts
(a missing feature list at version 3/7, an empty list at a legacy version, feature names in any
letter case), while `to_action` and `with_features` only produce protocols every reader accepts.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from delta_ops.errors import DeltaOpsError, InvalidProtocol, UnsupportedFeature

__all__ = [
    "FEATURES",
    "KEEPS_DATA",
    "MAX_READER_VERSION",
    "MAX_WRITER_VERSION",
    "READS",
    "TABLE_FEATURES_READER_VERSION",
    "TABLE_FEATURES_WRITER_VERSION",
    "Access",
    "FeatureKind",
    "Protocol",
    "TableFeature",
    "UnsupportedProtocolVersion",
    "canonical_feature_name",
    "implied_features",
    "lookup_feature",
    "required_features",
]

#: The reader version from which `readerFeatures` lists the reader features explicitly.
TABLE_FEATURES_READER_VERSION = 3
#: The writer version from which `writerFeatures` lists the writer features explicitly.
TABLE_FEATURES_WRITER_VERSION = 7
#: The highest protocol versions delta-ops implements.
MAX_READER_VERSION = TABLE_FEATURES_READER_VERSION
MAX_WRITER_VERSION = TABLE_FEATURES_WRITER_VERSION


class Access(str, Enum):
    """What delta-ops may do to a table; a feature allows some of these, not all or nothing.
    The value reads in a refusal: "cannot <value> this table"."""

    READ_LOG = "read the log of"
    READ_ROWS = "read the rows of"
    CHECKPOINT = "checkpoint"
    CLEANUP = "clean up the log of"
    VACUUM = "vacuum"
    ENABLE_ROW_TRACKING = "enable row tracking on"
    WRITE = "write data to"
    REWRITE = "rewrite data files of"  # purge, compaction: the same rows in new files
    #: restore, repair, recompute-stats: commits that add, remove or re-add files already on
    #: storage (with their stats), writing no data file and reading no rows
    RECOMMIT = "commit existing data files to"
    COMPACT = "compact"  # a rewrite that also chooses the files' layout (which rows go together)


READS = frozenset({Access.READ_LOG, Access.READ_ROWS})
#: the maintenance that changes no data file's set: checkpoints, log cleanup, VACUUM brackets
KEEPS_DATA = frozenset({Access.CHECKPOINT, Access.CLEANUP, Access.VACUUM})


class FeatureKind(str, Enum):
    """Whether readers must understand a feature too, or only writers."""

    READER_WRITER = "reader-writer"
    WRITER = "writer"


@dataclass(frozen=True, kw_only=True)
class TableFeature:
    """One known table feature and delta-ops' support for it.

    Attributes:
        name: the canonical name, as written in `readerFeatures` / `writerFeatures`.
        kind: reader-writer features go into both lists, writer features into `writerFeatures`.
        min_reader_version: for a legacy feature, the reader version that implies it (with
            `min_writer_version`); otherwise 3 for reader-writer features and 1 for writer ones.
        min_writer_version: for a legacy feature, the writer version that implies it; else 7.
        legacy: the feature predates table features, so legacy protocol versions imply it.
        readable: delta-ops reads the log state (and rows) of a table using it correctly.
        writable: delta-ops' maintenance commits and deletions respect all its writer rules.
        requires: features that must be supported whenever this one is (Spark's
            `requiredFeatures`); `Protocol.with_features` adds them.
    """

    name: str
    kind: FeatureKind
    min_reader_version: int
    min_writer_version: int
    legacy: bool
    readable: bool
    writable: bool
    requires: tuple[str, ...] = ()
    #: for a feature only some operations honour: those operations (None: by readable/writable)
    allows: frozenset[Access] | None = None
    #: why the other operations are refused, in one line
    reason: str = ""

    def __post_init__(self) -> None:
        # A writer has to read the table first, so "writable but not readable" is meaningless.
        if self.writable and not self.readable:
            raise ValueError(f"feature {self.name}: writable features must be readable")
        if self.allows is not None and Access.READ_LOG not in self.allows:
            raise ValueError(f"feature {self.name}: every operation reads the log first")

    @property
    def allowed_operations(self) -> frozenset[Access]:
        """The operations delta-ops runs on a table using this feature."""
        if self.allows is not None:
            return self.allows
        if self.writable:
            return frozenset(Access)
        return READS if self.readable else frozenset()

    @property
    def is_reader_writer(self) -> bool:
        return self.kind is FeatureKind.READER_WRITER


def _legacy_writer(name: str, writer: int) -> TableFeature:
    return TableFeature(
        name=name,
        kind=FeatureKind.WRITER,
        min_reader_version=1,
        min_writer_version=writer,
        legacy=True,
        readable=True,
        writable=True,
    )


def _writer(name: str, *, writable: bool, requires: tuple[str, ...] = ()) -> TableFeature:
    return TableFeature(
        name=name,
        kind=FeatureKind.WRITER,
        min_reader_version=1,
        min_writer_version=TABLE_FEATURES_WRITER_VERSION,
        legacy=False,
        readable=True,
        writable=writable,
        requires=requires,
    )


def _reader_writer(
    name: str, *, readable: bool, writable: bool, requires: tuple[str, ...] = ()
) -> TableFeature:
    return TableFeature(
        name=name,
        kind=FeatureKind.READER_WRITER,
        min_reader_version=TABLE_FEATURES_READER_VERSION,
        min_writer_version=TABLE_FEATURES_WRITER_VERSION,
        legacy=False,
        readable=readable,
        writable=writable,
        requires=requires,
    )


def _partly(
    name: str,
    kind: FeatureKind,
    allows: frozenset[Access],
    reason: str,
    requires: tuple[str, ...] = (),
) -> TableFeature:
    """A feature some operations honour (`allows`) and the others refuse, for `reason`."""
    reader = TABLE_FEATURES_READER_VERSION if kind is FeatureKind.READER_WRITER else 1
    return TableFeature(
        name=name,
        kind=kind,
        min_reader_version=reader,
        min_writer_version=TABLE_FEATURES_WRITER_VERSION,
        legacy=False,
        readable=True,
        writable=False,
        requires=requires,
        allows=allows,
        reason=reason,
    )


_REGISTRY: tuple[TableFeature, ...] = (
    # ---------------------------------------------------------------- legacy writer features
    # Readers ignore them. Each one constrains rows written or data changed, and maintenance
    # commits write no rows, change no data and never touch the schema, so all are writable:
    # appendOnly: our removes/re-adds carry dataChange=false, which append-only tables allow;
    # invariants, checkConstraints, generatedColumns: they constrain rows written, we write none;
    # changeDataFeed: `cdc` files are needed for data changes only, and we make none;
    # identityColumns: the identity high-water mark only moves on inserts.
    _legacy_writer("appendOnly", 2),
    _legacy_writer("invariants", 2),
    _legacy_writer("checkConstraints", 3),
    _legacy_writer("changeDataFeed", 4),
    _legacy_writer("generatedColumns", 4),
    _legacy_writer("identityColumns", 6),
    # ------------------------------------------------------------ the legacy reader-writer one
    # Readers must resolve physical column names (the snapshot/schema code does, and checkpoint
    # `partitionValues_parsed`/`stats_parsed` use physical names); writers must not change the
    # schema without assigning ids/physical names, and maintenance never changes the schema.
    TableFeature(
        name="columnMapping",
        kind=FeatureKind.READER_WRITER,
        min_reader_version=2,
        min_writer_version=5,
        legacy=True,
        readable=True,
        writable=True,
    ),
    # --------------------------------------------------------- reader-writer table features
    # DVs: the log state keys files by (path, dvId); vacuum protects referenced DV files; our
    # re-adds carry the descriptor and `numRecords` unchanged, as the writer rules require.
    _reader_writer("deletionVectors", readable=True, writable=True),
    # TIMESTAMP_NTZ only changes how values and partition values are typed; we rewrite neither.
    _reader_writer("timestampNtz", readable=True, writable=True),
    # V2 checkpoints: we read UUID-named checkpoints and sidecars, and cleanup keeps sidecars
    # referenced and writes the compatibility checkpoint, as Spark does.
    _reader_writer("v2Checkpoint", readable=True, writable=True),
    # Readers need nothing; writers must check the *writer* protocol before VACUUM deletes
    # anything, which our vacuum does by calling `check_allows(Access.VACUUM)` first.
    _reader_writer("vacuumProtocolCheck", readable=True, writable=True),
    # Type widening: files may hold narrower types than the schema; log state is unaffected and
    # rows are read with casts to the table type. Writer rules concern schema changes
    # (`delta.typeChanges` metadata) and rewrites, which maintenance never does. The preview
    # name has the same specification.
    _reader_writer("typeWidening", readable=True, writable=True),
    _reader_writer("typeWidening-preview", readable=True, writable=True),
    # Variant columns are struct<metadata, value> binaries in parquet: we read them as such and
    # never write variant data or stats. The preview name has the same specification.
    _reader_writer("variantType", readable=True, writable=True),
    _reader_writer("variantType-preview", readable=True, writable=True),
    # Shredded variants spread a value over typed parquet columns that must be reassembled on
    # read; our pyarrow reader cannot reassemble them, so we refuse rather than return wrong rows.
    # The log, checkpoints (variant columns carry no stats), cleanup and vacuum are unaffected,
    # and so are commits of files already written (restore, repair, recompute-stats): the
    # feature's writer rules say how variant values are written into parquet files, and those
    # commits write none (the protocol defines no statistics for variant columns).
    *(
        _partly(
            name,
            FeatureKind.READER_WRITER,
            frozenset({Access.READ_LOG, Access.RECOMMIT}) | KEEPS_DATA,
            "shredded variant values cannot be reassembled from their parquet columns here",
        )
        for name in ("variantShredding", "variantShredding-preview")
    ),
    # Catalog-managed tables: the latest ratified commits live in the catalog (or unpublished in
    # `_staged_commits`), so `_delta_log` holds the published versions only. Reading them and
    # checkpointing a published version are allowed to anyone (the protocol's "Maintenance
    # Operations on Catalog-managed Tables"); commits, cleanup, vacuum and rewrites must go
    # through the managing catalog.
    *(
        _partly(
            name,
            FeatureKind.READER_WRITER,
            READS | {Access.CHECKPOINT},
            "commits and maintenance other than checkpoints must go through the catalog that "
            "manages the table; run them from an engine connected to it",
            ("inCommitTimestamp",),
        )
        for name in ("catalogManaged", "catalogOwned-preview")
    ),
    # Geometry/geography types: values are WKB, stats are bounding boxes we do not interpret.
    # The log, cleanup and vacuum never type a column; a checkpoint keeps the JSON stats and
    # leaves geospatial columns out of `stats_parsed` min/max (the protocol lets a writer omit
    # any column there), so readers still skip files. Reading rows would return raw WKB and
    # writes would need bounding-box stats, so both are refused.
    _partly(
        "geospatial",
        FeatureKind.READER_WRITER,
        frozenset({Access.READ_LOG}) | KEEPS_DATA,
        "geometry and geography values and their bounding-box stats are not implemented",
    ),
    # Collated strings change how stats compare. Their values are still strings: checkpoints
    # copy the stats as written and reads return the strings; writes would need
    # collation-aware min/max.
    *(
        _partly(
            name,
            FeatureKind.READER_WRITER,
            READS | KEEPS_DATA,
            "collation-aware statistics for new data are not implemented",
        )
        for name in ("collations", "collations-preview")
    ),
    # Table redirection: reads must follow the redirect to another location.
    _reader_writer("redirectReaderWriter-preview", readable=False, writable=False),
    # Adaptive Metadata Tree (Delta master, unreleased): a new checkpoint layout we do not read.
    _reader_writer("adaptiveMetadata-preview", readable=False, writable=False),
    # delta-rs' non-standard nanosecond timestamps: a type no other reader understands.
    _reader_writer("timestampNanos", readable=False, writable=False),
    # Development names that only ever existed in Delta's master branch; no release reads them.
    _reader_writer("typeWidening-dev", readable=False, writable=False),
    _reader_writer("managed-commit-dev", readable=False, writable=False),
    # ------------------------------------------------------------------ writer table features
    # We preserve every domain in checkpoints and write only the `delta.rowTracking` domain,
    # which we understand.
    _writer("domainMetadata", writable=True),
    # Our commits assign `baseRowId`/`defaultRowCommitVersion` to the adds they make (backfill)
    # and keep the high-water mark domain; VACUUM commits add no files.
    _writer("rowTracking", writable=True, requires=("domainMetadata",)),
    # Liquid clustering lives in the `delta.clustering` domain, which we preserve and which
    # `cluster-by` writes as Delta Spark does; re-adds keep `clusteringProvider`. Checkpoints,
    # cleanup, vacuum, the row-tracking backfill and purge (a file rewritten without its
    # deleted rows, in the same place of the layout) lay out no data; appends land
    # unclustered, as Spark's do. Compaction of a table clustered by columns clusters it by
    # them (Delta Spark's OPTIMIZE, `delta_ops.ops.cluster`), so the layout is kept.
    _writer("clustering", writable=True, requires=("domainMetadata",)),
    # Column defaults only apply to inserted rows; we insert none.
    _writer("allowColumnDefaults", writable=True),
    # Metadata cleanup must follow `delta.requireCheckpointProtectionBeforeVersion` (all or
    # nothing below it); our cleanup implements Spark's rule
    # (the protocol's "Writer Requirements for Checkpoint Protection").
    _writer("checkpointProtection", writable=True),
    # Partition values must also be written into data files; we write no data files.
    _writer("materializePartitionColumns", writable=True),
    # Every commit must carry a monotonic `inCommitTimestamp` in its first action (commitInfo):
    # our transactions write max(now, previous + 1) while delta.enableInCommitTimestamps is on.
    _writer("inCommitTimestamp", writable=True),
    # Iceberg compatibility requires Iceberg metadata to be kept in step with every commit
    # (UniForm) plus schema/type restrictions we do not check.
    # UniForm: Iceberg metadata follows the Delta log (converted after commits); maintenance
    # that changes no data file's set keeps both valid, while data writes, rewrites and
    # protocol upgrades need the Iceberg conversion and schema checks we do not do.
    # Commits of existing files (restore, repair, recompute-stats) keep the IcebergCompat
    # writer rules where the op checks them (every new add has numRecords, no deletion
    # vector, no schema change: `restore` refuses otherwise); the Iceberg metadata catches up
    # at Delta Spark's next conversion, which their plans say.
    *(
        _partly(
            name,
            FeatureKind.WRITER,
            READS | KEEPS_DATA | {Access.RECOMMIT},
            "UniForm keeps Iceberg metadata in step with data changes, which delta-ops does not write",
            requires,
        )
        for name, requires in (
            ("icebergCompatV1", ("columnMapping",)),
            ("icebergCompatV2", ("columnMapping",)),
            ("icebergCompatV3", ("columnMapping", "rowTracking")),
            ("icebergWriterCompatV1", ("icebergCompatV2",)),
            ("icebergWriterCompatV3", ("icebergCompatV3",)),
        )
    ),
    # Coordinated commits: commits go through a commit coordinator, not put-if-absent files.
    _writer(
        "coordinatedCommits-preview",
        writable=False,
        requires=("inCommitTimestamp", "vacuumProtocolCheck"),
    ),
    # Writer-side table redirection: writes must go to the redirect target.
    _writer("redirectWriterOnly-preview", writable=False),
    # The Delta 2.4 row-ID draft: writers had to maintain a `rowIdHighWaterMark` action we do
    # not write. Never enabled by a release, but a table could carry it.
    _writer("rowIds", writable=False),
    _writer("inCommitTimestamp-dev", writable=False),
)

#: Every known feature by canonical name.
FEATURES: Mapping[str, TableFeature] = {f.name: f for f in _REGISTRY}

# Spark looks feature names up case-insensitively (`TableFeature.featureNameToFeature`), so a
# protocol written with "timestampNTZ" (as older Delta protocol texts spelled it) means
# timestampNtz.
_CANONICAL_BY_LOWER = {f.name.lower(): f for f in _REGISTRY}
assert len(_CANONICAL_BY_LOWER) == len(FEATURES), "names must differ in more than letter case"

#: Older names of a feature, as tables written before its release list them: Databricks
#: wrote liquid clustering as `liquid` before Delta named the feature `clustering`.
FEATURE_ALIASES: Mapping[str, str] = {"liquid": "clustering"}
_BY_LOWER: Mapping[str, TableFeature] = {
    **_CANONICAL_BY_LOWER,
    **{alias.lower(): FEATURES[name] for alias, name in FEATURE_ALIASES.items()},
}

_LEGACY: tuple[TableFeature, ...] = tuple(f for f in _REGISTRY if f.legacy)


def lookup_feature(name: str) -> TableFeature | None:
    """The known feature called `name` (any letter case), or None for an unknown name."""
    return _BY_LOWER.get(name.lower())


def canonical_feature_name(name: str) -> str:
    """`name` spelled as the registry spells it; unknown names are returned unchanged."""
    feature = lookup_feature(name)
    return feature.name if feature is not None else name


def implied_features(min_reader_version: int, min_writer_version: int) -> frozenset[str]:
    """The legacy features a protocol *without* feature lists implies, as Delta Spark decides.

    A legacy feature is implied when both versions reach its legacy versions, e.g. (1, 2) gives
    appendOnly and invariants, and columnMapping needs reader 2 *and* writer 5. Versions that
    list features (reader 3 with writer 7) imply nothing; for a mixed protocol the caller takes
    the listed side from the lists (see `Protocol.effective_writer_features`).
    """
    return frozenset(
        f.name
        for f in _LEGACY
        if f.min_reader_version <= min_reader_version and f.min_writer_version <= min_writer_version
    )


def required_features(names: Iterable[str]) -> frozenset[str]:
    """`names` (canonical) plus, transitively, every feature they require."""
    out: set[str] = set()
    todo = [canonical_feature_name(n) for n in names]
    while todo:
        name = todo.pop()
        if name in out:
            continue
        out.add(name)
        feature = FEATURES.get(name)
        if feature is not None:
            todo.extend(feature.requires)
    return frozenset(out)


class UnsupportedProtocolVersion(UnsupportedFeature):
    """The table needs a protocol version newer than delta-ops implements."""

    def __init__(self, side: str, version: int, action: str):
        self.side = side
        self.version = version
        self.features = [f"min{side.capitalize()}Version={version}"]
        self.action = action
        highest = MAX_READER_VERSION if side == "reader" else MAX_WRITER_VERSION
        DeltaOpsError.__init__(
            self,
            f"cannot {action} this table: unsupported {side} protocol version {version} "
            f"(min{side.capitalize()}Version={version}; delta-ops implements {side} versions "
            f"1 to {highest}); a newer Delta client wrote it",
        )


def _version(d: Mapping[str, Any], key: str) -> int:
    if key not in d or d[key] is None:
        raise InvalidProtocol(f"protocol action without {key}: {dict(d)!r}")
    value = d[key]
    # Jackson (Spark) accepts a JSON float for an Int field; a pyarrow JSON read that unified
    # columns across files can hand us 1.0, so integral floats are accepted too.
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidProtocol(f"protocol {key} must be an integer, got {value!r}")
    return value


def _feature_list(d: Mapping[str, Any], key: str) -> frozenset[str] | None:
    value = d.get(key)
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise InvalidProtocol(f"protocol {key} must be a list of feature names, got {value!r}")
    names = list(value)
    bad = [n for n in names if not isinstance(n, str) or not n]
    if bad:
        raise InvalidProtocol(f"protocol {key} must hold non-empty strings, got {bad!r}")
    return frozenset(names)


def _spelled(names: Iterable[str]) -> dict[str, str]:
    """lower-case canonical name -> the first spelling seen (an alias such as `liquid`
    included), so raw names survive a rewrite."""
    out: dict[str, str] = {}
    for name in names:
        out.setdefault(canonical_feature_name(name).lower(), name)
    return out


@dataclass(frozen=True)
class Protocol:
    """The `protocol` action of a table.

    `reader_features` / `writer_features` keep the names exactly as the log spells them (None when
    the action has no such list); the `effective_*` properties give canonical names.
    """

    min_reader_version: int
    min_writer_version: int
    reader_features: frozenset[str] | None = None
    writer_features: frozenset[str] | None = None

    # ------------------------------------------------------------------------ construction
    @classmethod
    def from_action(cls, d: Mapping[str, Any]) -> Protocol:
        """Parse and validate a camelCase `protocol` action (the inner dict, or `{"protocol": ...}`).

        Validation follows the reference readers and is lenient where Delta Spark is:

        * versions must be integers; a reader version above 3 raises
          `UnsupportedProtocolVersion` (the table needs a newer client), one below 1
          raises `InvalidProtocol`. A writer version above 7 is accepted, because Spark
          still reads such a table; `check_allows` refuses it for everything but reads.
        * `readerFeatures` may be missing at reader version 3 (kernel-rs rejects this, Spark
          reads it as an empty list), likewise `writerFeatures` at writer version 7.
        * a feature list at a legacy version must be empty (Spark ignores it; a non-empty one is
          a broken writer and we refuse to guess what it meant).
        * reader version 3 with a writer version below 7 is accepted as Spark does, although the
          spec forbids creating it.

        Raises:
            InvalidProtocol: the action breaks the protocol rules.
            UnsupportedProtocolVersion: the reader version is newer than delta-ops implements.
        """
        if "minReaderVersion" not in d and isinstance(d.get("protocol"), Mapping):
            d = d["protocol"]
        reader = _version(d, "minReaderVersion")
        writer = _version(d, "minWriterVersion")
        if reader > MAX_READER_VERSION:
            raise UnsupportedProtocolVersion("reader", reader, "read")
        if reader < 1:
            raise InvalidProtocol(f"invalid minReaderVersion {reader}: versions start at 1")
        if writer < 1:
            raise InvalidProtocol(f"invalid minWriterVersion {writer}: versions start at 1")
        reader_features = _feature_list(d, "readerFeatures")
        writer_features = _feature_list(d, "writerFeatures")
        if reader < TABLE_FEATURES_READER_VERSION and reader_features:
            raise InvalidProtocol(
                f"readerFeatures {sorted(reader_features)} on minReaderVersion {reader}: reader "
                f"features exist only with minReaderVersion {TABLE_FEATURES_READER_VERSION}"
            )
        if writer < TABLE_FEATURES_WRITER_VERSION and writer_features:
            raise InvalidProtocol(
                f"writerFeatures {sorted(writer_features)} on minWriterVersion {writer}: writer "
                f"features exist only with minWriterVersion {TABLE_FEATURES_WRITER_VERSION}"
            )
        return cls(reader, writer, reader_features, writer_features)

    def to_action(self) -> dict[str, Any]:
        """The camelCase `protocol` action, exactly as the spec wants it written.

        Feature lists are present iff the version lists features (an absent list at version 3/7
        is written as `[]`), and sorted so the output is deterministic.
        """
        out: dict[str, Any] = {
            "minReaderVersion": self.min_reader_version,
            "minWriterVersion": self.min_writer_version,
        }
        if self.min_reader_version >= TABLE_FEATURES_READER_VERSION:
            out["readerFeatures"] = sorted(self.reader_features or ())
        if self.min_writer_version >= TABLE_FEATURES_WRITER_VERSION:
            out["writerFeatures"] = sorted(self.writer_features or ())
        return out

    # ------------------------------------------------------------------- effective features
    @property
    def effective_writer_features(self) -> frozenset[str]:
        """Every feature writers must respect: listed, or implied by the legacy writer version.

        Reader features count too (a reader-writer feature binds writers), so a lenient protocol
        that lists one only in `readerFeatures` is still honoured on write.
        """
        names = {canonical_feature_name(n) for n in self.writer_features or ()}
        names |= {canonical_feature_name(n) for n in self.reader_features or ()}
        if self.min_writer_version < TABLE_FEATURES_WRITER_VERSION:
            names |= implied_features(self.min_reader_version, self.min_writer_version)
        return frozenset(names)

    @property
    def effective_reader_features(self) -> frozenset[str]:
        """Every feature readers must respect: listed in `readerFeatures`, implied by the legacy
        versions (columnMapping on reader 2 with writer >= 5), or a known reader-writer feature
        that is only listed in `writerFeatures` (e.g. columnMapping on a (2, 7) table)."""
        names = {canonical_feature_name(n) for n in self.reader_features or ()}
        for name in self.effective_writer_features:
            feature = FEATURES.get(name)
            if feature is not None and feature.is_reader_writer:
                names.add(name)
        return frozenset(names)

    @property
    def effective_features(self) -> frozenset[str]:
        """Reader and writer features together."""
        return self.effective_reader_features | self.effective_writer_features

    def supports(self, feature: str) -> bool:
        """Whether the protocol supports `feature` (any letter case), explicitly or implicitly.

        Supported is not enabled: appendOnly may be supported while `delta.appendOnly` is false.
        """
        return canonical_feature_name(feature) in self.effective_features

    # ----------------------------------------------------------------------------- checks
    def unsupported_reader_features(self) -> frozenset[str]:
        """Reader features delta-ops cannot read (unknown names included)."""
        return frozenset(n for n in self.effective_reader_features if not _readable(n))

    def check_readable(self) -> None:
        """Raise UnsupportedFeature(action="read") naming what delta-ops cannot read."""
        if self.min_reader_version > MAX_READER_VERSION:
            raise UnsupportedProtocolVersion("reader", self.min_reader_version, "read")
        unsupported = self.unsupported_reader_features()
        if unsupported:
            raise UnsupportedFeature(unsupported, action="read")

    def refusing(self, operation: Access) -> frozenset[str]:
        """The features (unknown names included) that stop `operation` on this table. Reads
        consider reader features only: writer features never bind readers."""
        features = self.effective_reader_features if operation in READS else self.effective_features
        # named as the table lists them (`liquid`, not `clustering`), so a user finds them
        spelled = _spelled([*(self.reader_features or ()), *(self.writer_features or ())])
        return frozenset(
            spelled.get(n.lower(), n) for n in features if operation not in _allowed(n)
        )

    def check_allows(self, operation: Access) -> None:
        """Raise UnsupportedFeature naming the operation and the features that refuse it (with
        why), or the protocol version newer than delta-ops implements."""
        if self.min_reader_version > MAX_READER_VERSION:
            raise UnsupportedProtocolVersion("reader", self.min_reader_version, operation.value)
        if operation not in READS and self.min_writer_version > MAX_WRITER_VERSION:
            raise UnsupportedProtocolVersion("writer", self.min_writer_version, operation.value)
        refusing = self.refusing(operation)
        if refusing:
            reasons = sorted({f.reason for n in refusing if (f := lookup_feature(n)) and f.reason})
            raise UnsupportedFeature(refusing, action=operation.value, reasons=reasons)

    def refusal(self, operation: Access) -> str | None:
        """Why `operation` is refused on this table, as `check_allows` would say it, or
        None when it is allowed: for reads that report instead of failing (inspect, health
        checks, sensors)."""
        try:
            self.check_allows(operation)
        except (UnsupportedFeature, UnsupportedProtocolVersion) as exc:
            return str(exc)
        return None

    def allowed_operations(self) -> dict[Access, frozenset[str]]:
        """Each operation and the features refusing it (empty: allowed), for `inspect`."""
        return {op: self.refusing(op) for op in Access}

    # ---------------------------------------------------------------------------- upgrades
    def with_features(self, *names: str) -> Protocol:
        """A protocol that also supports `names` and their required features.

        Mirrors Delta Spark's `protocol.merge(Protocol(r, 7).withFeatures(...))`:

        * the writer version becomes 7 and every feature the old versions implied is listed
          explicitly (appendOnly and invariants for writer 2, ...);
        * the reader version becomes 3 only when a reader-writer table feature needs it
          (deletionVectors, v2Checkpoint, ...); a writer-only feature leaves reader 1 or 2 alone,
          and columnMapping needs only reader 2, which implies it for readers;
        * required features are added (rowTracking and clustering bring domainMetadata,
          icebergCompatV3 brings columnMapping and rowTracking, ...);
        * versions never go down and no effective feature is lost; names already listed keep
          their spelling. When everything asked for is already supported the protocol is
          returned unchanged, so no needless upgrade commit is made.

        Raises:
            UnsupportedFeature: a name is unknown or delta-ops cannot write it (adding a feature
                we cannot honour would make the table unwritable by us and wrong for others), or
                this protocol's versions are newer than delta-ops implements.
        """
        if self.min_reader_version > MAX_READER_VERSION:
            raise UnsupportedProtocolVersion("reader", self.min_reader_version, "upgrade")
        if self.min_writer_version > MAX_WRITER_VERSION:
            raise UnsupportedProtocolVersion("writer", self.min_writer_version, "upgrade")
        if not names:
            return self
        wanted = required_features(names)
        refused = [n for n in wanted if not _writable(n)]
        if refused:
            raise UnsupportedFeature(refused, action="add to the protocol of")
        if all(self.supports(n) for n in wanted):
            return self

        writer_names = self.effective_writer_features | wanted
        reader_names = self.effective_reader_features | {
            n for n in writer_names if FEATURES.get(n) is not None and FEATURES[n].is_reader_writer
        }
        # Unknown names in readerFeatures can only come from a reader-3 table, which stays 3.
        needs_listed_readers = self.min_reader_version >= TABLE_FEATURES_READER_VERSION or any(
            not FEATURES[n].legacy for n in reader_names if n in FEATURES
        )
        if needs_listed_readers:
            reader_version = max(self.min_reader_version, TABLE_FEATURES_READER_VERSION)
        else:
            needed = max((FEATURES[n].min_reader_version for n in reader_names), default=1)
            reader_version = max(self.min_reader_version, needed)
        writer_version = max(self.min_writer_version, TABLE_FEATURES_WRITER_VERSION)

        # Keep the log's spelling of names it already lists; add canonical names for the rest.
        spelled = _spelled([*(self.reader_features or ()), *(self.writer_features or ())])
        writer_out = {spelled.get(n.lower(), n) for n in writer_names}
        reader_out: frozenset[str] | None = None
        if reader_version >= TABLE_FEATURES_READER_VERSION:
            reader_out = frozenset(spelled.get(n.lower(), n) for n in reader_names)
            writer_out |= reader_out
        return Protocol(reader_version, writer_version, reader_out, frozenset(writer_out))

    def without_feature(self, name: str) -> Protocol:
        """The protocol without `name` (any letter case), as low as what is left allows.

        Mirrors Delta Spark's `protocol.removeFeature(f)` (`denormalized`, drop the name from
        both lists, `normalized`): the remaining features' minimum versions are taken (a
        reader-writer table feature needs reader 3, a writer table feature writer 7, a legacy
        feature its legacy versions); when the legacy versions imply exactly the remaining
        features the protocol is written with them and no lists ((3, 7, [deletionVectors],
        [appendOnly, deletionVectors, invariants]) less deletionVectors is (1, 2)), otherwise
        the lowest reader version with writer 7 and the features listed. Names already listed
        keep their spelling.

        Raises:
            UnsupportedFeature: a remaining name is unknown (its versions cannot be computed),
                or this protocol's versions are newer than delta-ops implements.
        """
        if self.min_reader_version > MAX_READER_VERSION:
            raise UnsupportedProtocolVersion("reader", self.min_reader_version, "downgrade")
        if self.min_writer_version > MAX_WRITER_VERSION:
            raise UnsupportedProtocolVersion("writer", self.min_writer_version, "downgrade")
        dropped = canonical_feature_name(name)
        remaining = self.effective_features - {dropped}
        unknown = [n for n in remaining if n not in FEATURES]
        if unknown:
            raise UnsupportedFeature(unknown, action="lower the protocol of")
        features = [FEATURES[n] for n in remaining]
        reader = max((f.min_reader_version for f in features), default=1)
        writer = max((f.min_writer_version for f in features), default=1)
        if writer < TABLE_FEATURES_WRITER_VERSION and implied_features(reader, writer) == remaining:
            return Protocol(reader, writer)
        spelled = _spelled([*(self.reader_features or ()), *(self.writer_features or ())])
        writer_out = frozenset(spelled.get(n.lower(), n) for n in remaining)
        reader_out: frozenset[str] | None = None
        if reader >= TABLE_FEATURES_READER_VERSION:
            reader_out = frozenset(
                spelled.get(f.name.lower(), f.name) for f in features if f.is_reader_writer
            )
        return Protocol(reader, TABLE_FEATURES_WRITER_VERSION, reader_out, writer_out)

    def __str__(self) -> str:
        """As a person reads it (and `inspect` prints it): ``reader v3, writer v7 (reader
        features: deletionVectors; writer features: deletionVectors, domainMetadata)``; a
        feature list the action lacks is left out, an empty one is ``-``."""
        lists = [
            f"{who} features: {', '.join(sorted(names)) or '-'}"
            for who, names in (("reader", self.reader_features), ("writer", self.writer_features))
            if names is not None
        ]
        features = f" ({'; '.join(lists)})" if lists else ""
        return f"reader v{self.min_reader_version}, writer v{self.min_writer_version}{features}"


def _allowed(name: str) -> frozenset[Access]:
    feature = lookup_feature(name)
    return feature.allowed_operations if feature is not None else frozenset()


def _readable(name: str) -> bool:
    feature = lookup_feature(name)
    return feature is not None and feature.readable


def _writable(name: str) -> bool:
    feature = lookup_feature(name)
    return feature is not None and feature.writable
