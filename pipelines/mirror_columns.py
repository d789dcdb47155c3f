"""What a mirror records about itself: its table properties and each column's source type.

Gold writes them when it creates or evolves a mirror; quality, export and history read them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipelines.layout import LINEAGE_COLUMNS
from pipelines.sql import lit, q
from pipelines.values import spark_type

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from pipelines.warehouse import TableRef

#: A mirror column's comment names the type the source declared.
SOURCE_TYPE_PREFIX = "source type: "
#: Source type recorded for a column the ``evolve`` policy turned into text.
TEXT_SOURCE_TYPE = "text"


def table_properties(spark: SparkSession, ref: TableRef) -> dict[str, str]:
    rows = spark.sql(f"SHOW TBLPROPERTIES {ref.sql}").collect()
    return {r["key"]: r["value"] for r in rows}


def column_source_type(comment: str | None) -> str | None:
    """The source type a column comment records (None where it records none)."""
    comment = comment or ""
    return comment[len(SOURCE_TYPE_PREFIX) :] if comment.startswith(SOURCE_TYPE_PREFIX) else None


def mirror_schema(spark: SparkSession, ref: TableRef) -> dict[str, tuple[str, str | None]]:
    """Existing mirror columns: name → (Spark type, source type). Empty when there is no mirror."""
    if not ref.exists(spark):
        return {}
    return {
        f.name: (f.dataType.simpleString(), column_source_type(f.metadata.get("comment")))
        for f in ref.read(spark).schema.fields
    }


def source_types(df: DataFrame) -> dict[str, str | None]:
    """Mirror column → source type, lineage columns excluded."""
    return {
        f.name: column_source_type((f.metadata or {}).get("comment"))
        for f in df.schema.fields
        if f.name not in LINEAGE_COLUMNS
    }


def column_ddl(name: str, source_type: str | None) -> str:
    """A mirror column's DDL: its Delta type, and its source type as the comment."""
    return f"{q(name)} {spark_type(source_type)} COMMENT {lit(SOURCE_TYPE_PREFIX + (source_type or ''))}"
