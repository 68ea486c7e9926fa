"""The reference corpus: small tables Delta Spark writes in the tests, each with the rows Delta
Spark reads at every one of its versions, recorded before delta-ops touches anything.

Each table is a list of SQL statements (`{t}` stands for the table, `delta.`path``). The corpus
is built once per test run (`corpus` fixture, a session tmp dir); judged tests copy a table
before running an operation on it, so the pristine one stays as Delta Spark left it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.reference.delta_spark import DeltaSpark, sorted_rows


@dataclass(frozen=True)
class CorpusTable:
    """What a corpus table is made of and what it exercises."""

    name: str
    statements: tuple[str, ...]
    features: frozenset[str] = frozenset()
    #: session settings for this table's statements (SET key=value), reset afterwards
    settings: tuple[tuple[str, str], ...] = ()


_TS = "TIMESTAMP'2024-03-10 01:30:00'"
#: a JSON object per row for `parse_json`: a number, a mixed array, a nested string growing
#: with the row (braces doubled for `str.format`)
_VARIANT_JSON = (
    """concat('{{"a":', id, ',"b":[1,"x",null,2.5],"c":{{"d":"', repeat('z', id), '"}}}}')"""
)

TABLES: tuple[CorpusTable, ...] = (
    CorpusTable(
        "plain",
        (
            (
                "CREATE TABLE {t} (id BIGINT, name STRING, amount DECIMAL(10,2), at TIMESTAMP, "
                "tags ARRAY<STRING>, info STRUCT<a: INT, b: STRING>) USING delta "
                "TBLPROPERTIES ('delta.enableDeletionVectors' = 'false')"
            ),
            (
                f"INSERT INTO {{t}} VALUES (1, 'a', 1.50, {_TS}, array('x', 'y'), named_struct('a', 1, 'b', 'p')), "
                "(2, 'b', 2.25, NULL, NULL, NULL), (3, 'c', NULL, TIMESTAMP'1969-12-31 23:59:59.999999', "
                "array(), named_struct('a', NULL, 'b', NULL))"
            ),
            "INSERT INTO {t} VALUES (4, 'd', -4.00, TIMESTAMP'2262-04-11 23:47:16', array(NULL), NULL)",
            "DELETE FROM {t} WHERE id = 2",
            "UPDATE {t} SET name = 'C' WHERE id = 3",
        ),
    ),
    CorpusTable(
        "partitioned",
        (
            (
                "CREATE TABLE {t} (id BIGINT, p STRING, d DATE, v DOUBLE) USING delta "
                "PARTITIONED BY (p, d)"
            ),
            (
                "INSERT INTO {t} VALUES (1, 'x', DATE'2024-01-01', 1.0), (2, 'y', DATE'2024-01-02', 2.5), "
                "(3, NULL, NULL, NULL), (4, 'a b/c=d', DATE'2024-01-01', double('NaN'))"
            ),
            "INSERT INTO {t} VALUES (5, 'x', DATE'2024-01-01', -0.0)",
            "DELETE FROM {t} WHERE p = 'y'",
        ),
    ),
    CorpusTable(
        "deletion_vectors",
        (
            (
                "CREATE TABLE {t} (id BIGINT, v STRING) USING delta "
                "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')"
            ),
            "INSERT INTO {t} SELECT id, concat('v', id) FROM range(0, 40)",
            "DELETE FROM {t} WHERE id % 7 = 0",
            "UPDATE {t} SET v = 'updated' WHERE id % 5 = 1",
            (
                "MERGE INTO {t} AS t USING (SELECT id, 'merged' AS v FROM range(30, 45)) AS s "
                "ON t.id = s.id WHEN MATCHED AND t.id % 2 = 0 THEN DELETE "
                "WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT *"
            ),
        ),
        frozenset({"deletionVectors"}),
    ),
    CorpusTable(
        "column_mapping",
        (
            (
                "CREATE TABLE {t} (id BIGINT, a STRING, b INT, c STRING) USING delta "
                "PARTITIONED BY (c) TBLPROPERTIES ('delta.columnMapping.mode' = 'name')"
            ),
            "INSERT INTO {t} VALUES (1, 'one', 10, 'p'), (2, 'two', 20, 'q')",
            "ALTER TABLE {t} RENAME COLUMN a TO a_renamed",
            "ALTER TABLE {t} DROP COLUMN b",
            "INSERT INTO {t} VALUES (3, 'three', 'p')",
        ),
        frozenset({"columnMapping"}),
    ),
    CorpusTable(
        "column_mapping_id",
        (
            (
                "CREATE TABLE {t} (id BIGINT, a STRING, b INT) USING delta TBLPROPERTIES ("
                "'delta.columnMapping.mode' = 'id', 'delta.checkpointInterval' = '2', "
                "'delta.enableDeletionVectors' = 'true', "
                "'delta.feature.vacuumProtocolCheck' = 'supported')"
            ),
            "INSERT INTO {t} VALUES (1, 'one', 10), (2, 'two', 20), (3, 'three', 30)",
            "ALTER TABLE {t} RENAME COLUMN a TO a_renamed",
            "ALTER TABLE {t} DROP COLUMN b",
            "INSERT INTO {t} VALUES (4, 'four'), (5, 'five')",
            # Delta 4's drop without history truncation: `checkpointProtection` keeps the
            # versions before it from log cleanup until their checkpoint is rewritten
            "ALTER TABLE {t} DROP FEATURE deletionVectors",
            "INSERT INTO {t} VALUES (6, 'six')",
        ),
        frozenset({"columnMapping", "vacuumProtocolCheck", "checkpointProtection"}),
        # every checkpoint in parts of two actions (multi-part, classic)
        settings=(("spark.databricks.delta.checkpoint.partSize", "2"),),
    ),
    CorpusTable(
        "row_tracking",
        (
            (
                "CREATE TABLE {t} (id BIGINT, v STRING) USING delta "
                "TBLPROPERTIES ('delta.enableRowTracking' = 'true', 'delta.enableDeletionVectors' = 'true')"
            ),
            "INSERT INTO {t} SELECT id, 'v' FROM range(0, 10)",
            "UPDATE {t} SET v = 'w' WHERE id < 3",
            "INSERT INTO {t} SELECT id, 'v' FROM range(10, 15)",
        ),
        frozenset({"rowTracking", "deletionVectors", "domainMetadata"}),
    ),
    CorpusTable(
        "type_widening",
        (
            (
                "CREATE TABLE {t} (id INT, v SMALLINT, s STRUCT<a: BYTE>) USING delta "
                "TBLPROPERTIES ('delta.enableTypeWidening' = 'true')"
            ),
            "INSERT INTO {t} VALUES (1, 10, named_struct('a', 1)), (2, NULL, NULL)",
            "ALTER TABLE {t} CHANGE COLUMN v TYPE INT",
            "ALTER TABLE {t} CHANGE COLUMN id TYPE BIGINT",
            "ALTER TABLE {t} CHANGE COLUMN s.a TYPE INT",
            "INSERT INTO {t} VALUES (3000000000, 100000, named_struct('a', 1000))",
        ),
        frozenset({"typeWidening"}),
    ),
    CorpusTable(
        "clustered",
        (
            "CREATE TABLE {t} (k INT, v STRING) USING delta CLUSTER BY (k)",
            "INSERT INTO {t} SELECT CAST(id % 9 AS INT), concat('a', id) FROM range(0, 30)",
            "INSERT INTO {t} SELECT CAST(id % 5 AS INT), concat('b', id) FROM range(0, 20)",
            "OPTIMIZE {t}",
        ),
        frozenset({"clustering", "domainMetadata"}),
    ),
    CorpusTable(
        "v2_checkpoint_ict",
        (
            (
                "CREATE TABLE {t} (id BIGINT, v STRING) USING delta TBLPROPERTIES ("
                "'delta.checkpointPolicy' = 'v2', 'delta.checkpointInterval' = '2', "
                "'delta.enableInCommitTimestamps' = 'true')"
            ),
            "INSERT INTO {t} VALUES (1, 'a'), (2, 'b')",
            "INSERT INTO {t} VALUES (3, 'c')",
            "DELETE FROM {t} WHERE id = 1",
            "INSERT INTO {t} VALUES (4, 'd')",
        ),
        frozenset({"v2Checkpoint", "inCommitTimestamp"}),
    ),
    CorpusTable(
        "variant",
        (
            (
                "CREATE TABLE {t} (id BIGINT, v VARIANT, s STRUCT<n: INT, w: VARIANT>) USING delta "
                "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')"
            ),
            (
                "INSERT INTO {t} SELECT id, CASE WHEN id % 4 = 3 THEN NULL "
                f"WHEN id % 4 = 2 THEN parse_json('null') ELSE parse_json({_VARIANT_JSON}) END, "
                "named_struct('n', CAST(id AS INT), 'w', parse_json(CAST(id * 10 AS STRING))) "
                "FROM range(0, 12)"
            ),
            "DELETE FROM {t} WHERE id % 5 = 0",
            """UPDATE {t} SET v = parse_json('"updated"') WHERE id = 1""",
        ),
        frozenset({"variantType", "deletionVectors"}),
    ),
    CorpusTable(
        "features",
        (
            (
                "CREATE TABLE {t} (id BIGINT GENERATED ALWAYS AS IDENTITY, amount INT, "
                "at TIMESTAMP_NTZ, day DATE GENERATED ALWAYS AS (CAST(at AS DATE))) USING delta "
                "TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true')"
            ),
            "ALTER TABLE {t} ADD CONSTRAINT positive CHECK (amount > 0)",
            (
                "INSERT INTO {t} (amount, at) VALUES (5, TIMESTAMP_NTZ'2024-05-01 10:00:00'), "
                "(7, TIMESTAMP_NTZ'2024-05-02 23:59:59.5'), (9, NULL)"
            ),
            "UPDATE {t} SET amount = amount + 1 WHERE amount = 7",
            "DELETE FROM {t} WHERE amount = 9",
        ),
        frozenset(
            {
                "changeDataFeed",
                "identityColumns",
                "generatedColumns",
                "checkConstraints",
                "timestampNtz",
            }
        ),
    ),
)


@dataclass
class BuiltTable:
    """A corpus table as Delta Spark wrote it, and what Delta Spark read at each version."""

    spec: CorpusTable
    path: Path
    rows: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    history: list[dict[str, Any]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def latest(self) -> int:
        return max(self.rows)

    def copy_to(self, dest: Path) -> Path:
        """A writable copy keeping file times (vacuum and cleanup decide by them)."""
        target = dest / self.name
        shutil.copytree(self.path, target, copy_function=shutil.copy2)
        return target


def table_ref(path: Path | str) -> str:
    return f"delta.`{path}`"


def build_table(spark: DeltaSpark, spec: CorpusTable, root: Path) -> BuiltTable:
    path = root / spec.name
    for key, value in spec.settings:
        spark.sql(f"SET {key} = {value}")
    try:
        for statement in spec.statements:
            spark.sql(statement.format(t=table_ref(path)))
    finally:
        for key, _ in spec.settings:
            spark.sql(f"RESET {key}")
    built = BuiltTable(spec, path)
    built.history = spark.history(path)
    latest = max(int(h["version"]) for h in built.history)
    tables = spark.read_versions(path, range(latest + 1))
    built.rows = {v: sorted_rows(t) for v, t in tables.items()}
    return built


class Corpus(Mapping[str, BuiltTable]):
    """The corpus, each table built by Delta Spark when a test first asks for it (a run of a
    few tests builds only what they use)."""

    def __init__(self, spark: DeltaSpark, root: Path) -> None:
        os.makedirs(root, exist_ok=True)
        self._spark = spark
        self._root = root
        self._specs = {spec.name: spec for spec in TABLES}
        self._built: dict[str, BuiltTable] = {}

    def __getitem__(self, name: str) -> BuiltTable:
        if name not in self._built:
            self._built[name] = build_table(self._spark, self._specs[name], self._root)
        return self._built[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._specs)

    def __len__(self) -> int:
        return len(self._specs)
