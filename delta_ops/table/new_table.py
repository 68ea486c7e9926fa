"""The first commit of a new table: its protocol and metadata, made from the data's schema.

`new_table_actions` gives the ``protocol`` and ``metaData`` actions for an Arrow schema,
partition columns and table properties. The properties decide the protocol's features
(row tracking, deletion vectors, change data feed, V2 checkpoints, in-commit timestamps,
column mapping; TIMESTAMP_NTZ columns bring their feature), and a column-mapping mode gives
every column an id and a physical name, as Delta Spark does when it creates a table.

For example:

    actions = new_table_actions(data.schema, ["day"], {"delta.enableRowTracking": "true"})
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from delta_ops import clock
from delta_ops.errors import SchemaMismatch
from delta_ops.protocol.features import Protocol
from delta_ops.protocol.properties import COLUMN_MAPPING_MAX_COLUMN_ID, TableProperties
from delta_ops.protocol.row_tracking import materialized_column_names
from delta_ops.protocol.schema import assign_column_mapping, from_arrow_schema


def protocol_for_configuration(configuration: Mapping[str, str], schema_json: str = "") -> Protocol:
    """The protocol a new table needs: (1, 2) plus what its properties and column types need."""
    protocol = Protocol(1, 2)
    props = TableProperties.from_configuration(configuration)
    wanted = []
    if '"timestamp_ntz"' in schema_json:
        wanted.append("timestampNtz")
    if props.enable_row_tracking:
        wanted.append("rowTracking")
    if props.enable_deletion_vectors:
        wanted.append("deletionVectors")
    if props.enable_change_data_feed:
        wanted.append("changeDataFeed")
    if props.checkpoint_policy == "v2":
        wanted.append("v2Checkpoint")
    if props.enable_in_commit_timestamps:
        wanted.append("inCommitTimestamp")
    if props.column_mapping_mode != "none":
        wanted.append("columnMapping")
    return protocol.with_features(*wanted) if wanted else protocol


def new_table_actions(
    schema: pa.Schema, partition_by: Sequence[str], configuration: Mapping[str, str]
) -> list[dict[str, Any]]:
    """Protocol and metaData actions creating a table with this Arrow schema."""
    missing = [c for c in partition_by if c not in schema.names]
    if missing:
        raise SchemaMismatch(
            f"partition columns {missing} are not in the data's schema {schema.names}"
        )
    delta_schema = from_arrow_schema(schema)
    configuration = dict(configuration)
    if TableProperties.from_configuration(configuration).column_mapping_mode != "none":
        delta_schema, highest = assign_column_mapping(delta_schema)
        configuration[COLUMN_MAPPING_MAX_COLUMN_ID] = str(highest)
    if TableProperties.from_configuration(configuration).enable_row_tracking:
        configuration.update(
            materialized_column_names(configuration, {n.lower() for n in schema.names})
        )
    metadata = {
        "id": str(uuid.uuid4()),
        "format": {"provider": "parquet", "options": {}},
        "schemaString": delta_schema.to_json(),
        "partitionColumns": list(partition_by),
        "configuration": dict(configuration),
        "createdTime": clock.now_ms(),
    }
    protocol = protocol_for_configuration(configuration, delta_schema.to_json())
    return [{"protocol": protocol.to_action()}, {"metaData": metadata}]


__all__ = ["new_table_actions", "protocol_for_configuration"]
