"""What a mirror records about itself: its table properties, and each column's source type.

A column's source type (``decimal(12,2)``, ``bigint unsigned``, ``datetime(3)``) says how gold
converts the column's canonical text and how export renders it (``bigint unsigned`` is an integer,
``decimal(20,0)`` a decimal string). It is kept in one table property, :data:`SOURCE_TYPES_PROPERTY`:
a JSON object ``{column: source type or null}``, which holds any column name (spaces, dots,
backticks, quotes, unicode). Column comments are the analysts': gold writes none and reads them
only on a mirror an earlier version wrote (its column comments said ``source type: <type>``).

Gold writes the property when it creates or reshapes a mirror; gold, history, quality and export
read it through :func:`source_types`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING

from pipelines.layout import LINEAGE_COLUMNS
from pipelines.sql import lit, q
from pipelines.values import spark_type

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructField, StructType

    from pipelines.warehouse import TableRef

#: The table property that records every column's source type: JSON ``{column: type or null}``.
SOURCE_TYPES_PROPERTY = "lakecdc.source_types"
#: How an earlier version recorded a column's source type: as its comment, after this prefix.
SOURCE_TYPE_PREFIX = "source type: "
#: Source type recorded for a column the ``evolve`` policy turned into text.
TEXT_SOURCE_TYPE = "text"
#: A source type that gives each Delta type back where the type's own name does not.
_SOURCE_TYPE_OF_DELTA = {"string": TEXT_SOURCE_TYPE, "timestamp_ntz": "datetime", "variant": "json"}


def table_properties(spark: SparkSession, ref: TableRef) -> dict[str, str]:
    rows = spark.sql(f"SHOW TBLPROPERTIES {ref.sql}").collect()
    return {r["key"]: r["value"] for r in rows}


def table_comment(spark: SparkSession, ref: TableRef) -> str | None:
    """The table's comment (Delta's description), None where it has none."""
    return spark.sql(f"DESCRIBE DETAIL {ref.sql}").first()["description"] or None


def properties_sql(props: Mapping[str, str]) -> str:
    """``'key' = 'value', ...`` for ``TBLPROPERTIES (...)``: every key and value a SQL literal."""
    return ", ".join(f"{lit(k)} = {lit(v)}" for k, v in props.items())


def source_types_json(types: Mapping[str, str | None]) -> str:
    """The value of :data:`SOURCE_TYPES_PROPERTY` (mirror column order)."""
    return json.dumps(dict(types))


def column_source_type(comment: str | None) -> str | None:
    """The source type an earlier version's column comment records (None where it records none)."""
    comment = comment or ""
    return comment[len(SOURCE_TYPE_PREFIX) :] if comment.startswith(SOURCE_TYPE_PREFIX) else None


def _same_delta_type(source_type: str | None, delta_type: str) -> bool:
    return spark_type(source_type).lower().replace(" ", "") == delta_type.lower().replace(" ", "")


def _column_types(fields: list[StructField], props: Mapping[str, str] | None) -> dict[str, str | None]:
    """Every column → source type. The property where the mirror has it, else the comments (a mirror
    an earlier version wrote). A recorded type that no longer gives the column's Delta type (a schema
    change committed without its property, a column an analyst altered or added) yields to a source
    type read off the Delta type, so values still convert to what the column holds."""
    recorded = (props or {}).get(SOURCE_TYPES_PROPERTY)
    if recorded is not None:
        by_name = json.loads(recorded)
        types = {f.name: by_name.get(f.name) for f in fields}
    else:
        types = {f.name: column_source_type((f.metadata or {}).get("comment")) for f in fields}
    for f in fields:
        delta_type = f.dataType.simpleString()
        if not _same_delta_type(types[f.name], delta_type):
            fallback = _source_type_of_delta(delta_type)
            types[f.name] = fallback if _same_delta_type(fallback, delta_type) else None
    return types


def _source_type_of_delta(delta_type: str) -> str:
    """A source type read off a Delta type (``array<timestamp_ntz>`` → ``array<datetime>``)."""
    if delta_type.startswith("array<") and delta_type.endswith(">"):
        return f"array<{_source_type_of_delta(delta_type[6:-1])}>"
    return _SOURCE_TYPE_OF_DELTA.get(delta_type, delta_type)


def source_types(table: DataFrame | StructType, props: Mapping[str, str] | None) -> dict[str, str | None]:
    """Mirror column → source type, lineage columns excluded: the one reader of source types.

    ``table`` is the mirror as read (or its schema), ``props`` its table properties (:func:`table_properties`;
    gold has them from the start of its batch)."""
    fields = list(getattr(table, "schema", table).fields)
    return {c: t for c, t in _column_types(fields, props).items() if c not in LINEAGE_COLUMNS}


def mirror_schema(
    spark: SparkSession, ref: TableRef, props: Mapping[str, str] | None = None
) -> dict[str, tuple[str, str | None]]:
    """Existing columns, system columns included: name → (Delta type, source type). Empty when there is
    no table. ``props``: the table's properties where the caller has them (else they are read)."""
    if not ref.exists(spark):
        return {}
    fields = list(ref.read(spark).schema.fields)
    types = _column_types(fields, props if props is not None else table_properties(spark, ref))
    return {f.name: (f.dataType.simpleString(), types[f.name]) for f in fields}


def delta_types(spark: SparkSession, ref: TableRef) -> dict[str, str]:
    """Existing columns → Delta type (empty when there is no table)."""
    if not ref.exists(spark):
        return {}
    return {f.name: f.dataType.simpleString() for f in ref.read(spark).schema.fields}


def column_ddl(name: str, source_type: str | None, not_null: bool = False) -> str:
    """A mirror column's DDL: its Delta type (its source type goes to :data:`SOURCE_TYPES_PROPERTY`)."""
    return f"{q(name)} {spark_type(source_type)}{' NOT NULL' if not_null else ''}"
