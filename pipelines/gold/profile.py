"""The profile of a micro-batch: what it says about every table it touches, from one Spark job.

Per table: how many changes, the key messages state, the formats, every column with the types
messages state (and the newest change's) and the range of sequences that carry it, the column sets of full after-images
(:mod:`pipelines.gold.schema` reads schema changes from them), and the last TRUNCATE. Three
aggregations collected as one union, so a batch of many tables costs the jobs of one; the columns' facts are
read off the batch's kinds of change (a table, the columns its changes carry and their stated types: a few
whatever the batch's size), so a large batch is not exploded into a row per value.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pipelines.formats import get_decoder
from pipelines.gold.order import ORD
from pipelines.gold.schema import ColumnSighting, ImageShape
from pipelines.sql import EMPTY_MAP, FULL_IMAGE_SQL
from pipelines.warehouse import SourceTable

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

#: The column gold adds to a batch: the exact identity of each change's source table (JSON
#: ``[db, schema, table]``, :func:`source_table_col`).
SOURCE_TABLE = "_source_table"
#: The exact identity of a silver row's source table, as JSON ``[db, schema, table]`` (the form
#: :class:`~pipelines.warehouse.SourceTable` reads): an empty part is NULL, and a schema equal to
#: the database (MySQL-family formats report the database again as the schema) is NULL too.
SOURCE_IDENTITY_SQL = (
    "to_json(array(nullif(db, ''), CASE WHEN nullif(`schema`, '') = nullif(db, '') THEN NULL "
    "ELSE nullif(`schema`, '') END, `table`))"
)


def source_table_col() -> Column:
    """The exact identity of a silver row's source table (:data:`SOURCE_IDENTITY_SQL`): two tables
    whose names read alike (``a.b`` + ``c`` and ``a`` + ``b.c``; ``Shop`` and ``shop``; schemas
    ``public`` and ``audit``) are two tables."""
    from pyspark.sql import functions as F

    return F.expr(SOURCE_IDENTITY_SQL)


@dataclass
class TableProfile:
    """What one micro-batch says about one source table."""

    name: str
    changes: int = 0
    key: tuple[str, ...] = ()
    formats: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()  # the configured sources (``sources[].name``) the changes came from
    columns: dict[str, ColumnSighting] = field(default_factory=dict)
    shapes: list[ImageShape] = field(default_factory=list)
    truncate_ord: dict[str, Any] | None = None  # the ``ord`` fields of the last TRUNCATE
    truncate_seq: str | None = None
    truncate_time: str | None = None  # its source commit time
    truncates: list[tuple[str, str | None]] = field(default_factory=list)  # every TRUNCATE's (seq, time)
    invalid_values: int = 0  # changes carrying a value the source holds as invalid (a zero date)

    @property
    def source(self) -> SourceTable:
        """The source table (``name`` is its exact identity as JSON, :data:`SOURCE_TABLE`)."""
        return SourceTable.from_key(self.name)

    @property
    def schemaless(self) -> bool:
        """A format whose documents may lack fields: a missing column is no DROP."""
        return any(get_decoder(f).schemaless for f in self.formats)


def profile_batch(batch: DataFrame) -> dict[str, TableProfile]:
    """Every table of the batch (with ``ord`` and :data:`SOURCE_TABLE`), from one Spark job."""
    from pyspark.sql import functions as F

    seq_or_null = F.when(F.col("seq") != "", F.col("seq"))
    carried = F.array_union(
        F.map_keys(F.coalesce("after", F.expr(EMPTY_MAP))), F.map_keys(F.coalesce("before", F.expr(EMPTY_MAP)))
    )
    # the changes of a table that carry the same columns with the same stated types first (a batch has a few
    # such kinds, whatever its size), then the kinds' columns: the batch is not exploded into a row per value
    kinds = batch.groupBy(SOURCE_TABLE, F.array_sort(carried).alias("cs"), F.map_entries("col_types").alias("ct")).agg(
        F.min(seq_or_null).alias("first"), F.max(seq_or_null).alias("last"), F.max(ORD).alias("o")
    )
    stated = F.map_from_entries("ct")[F.col("c")]
    columns = (
        kinds.select(SOURCE_TABLE, "first", "last", "o", "ct", F.explode("cs").alias("c"))
        .groupBy(SOURCE_TABLE, "c")
        .agg(
            F.collect_set(stated).alias("types"),
            F.min("first").alias("first"),
            F.max("last").alias("last"),
            F.max(F.when(stated.isNotNull(), F.struct(F.col("o"), stated.alias("t")))).alias("newest"),
        )
        .select(
            SOURCE_TABLE,
            F.lit("column").alias("fact"),
            F.to_json(F.struct("c", "types", "first", "last", F.col("newest.t").alias("newest"))).alias("v"),
        )
    )
    shapes = (
        batch.where(f"{FULL_IMAGE_SQL} AND seq != ''")
        .groupBy(SOURCE_TABLE, F.array_sort(F.map_keys("after")).alias("cols"))
        .agg(F.min("seq").alias("first"), F.max("seq").alias("last"))
        .select(SOURCE_TABLE, F.lit("shape").alias("fact"), F.to_json(F.struct("cols", "first", "last")).alias("v"))
    )
    truncate = F.col("op") == "TRUNCATE"
    tables = (
        batch.groupBy(SOURCE_TABLE)
        .agg(
            F.count(F.lit(1)).alias("n"),
            F.first(F.when(F.size("key_columns") > 0, F.col("key_columns")), ignorenulls=True).alias("key"),
            F.collect_set("format").alias("formats"),
            F.collect_set("source").alias("sources"),
            F.max(F.when(truncate, F.col(ORD))).alias("t_ord"),
            F.max(F.when(truncate, F.col("seq"))).alias("t_seq"),
            F.max(F.when(truncate, F.col("event_time"))).cast("string").alias("t_time"),
            F.collect_set(F.when(truncate, F.array("seq", F.col("event_time").cast("string")))).alias("t_all"),
            F.count_if(F.coalesce(F.size("invalid") > 0, F.lit(False))).alias("invalid"),
        )
        .select(
            SOURCE_TABLE,
            F.lit("table").alias("fact"),
            F.to_json(F.struct("n", "key", "formats", "sources", "t_ord", "t_seq", "t_time", "t_all", "invalid")).alias(
                "v"
            ),
        )
    )
    profiles: dict[str, TableProfile] = {}
    for row in columns.unionByName(shapes).unionByName(tables).collect():
        if row[SOURCE_TABLE] is None:
            continue
        p = profiles.setdefault(row[SOURCE_TABLE], TableProfile(row[SOURCE_TABLE]))
        v = json.loads(row["v"])
        if row["fact"] == "column":
            p.columns[v["c"]] = ColumnSighting(set(v["types"]), v.get("first"), v.get("last"), v.get("newest"))
        elif row["fact"] == "shape":
            p.shapes.append(ImageShape(frozenset(v["cols"]), v["first"], v["last"]))
        else:
            p.changes, p.key, p.formats = v["n"], tuple(v.get("key") or ()), tuple(v["formats"])
            p.sources = tuple(sorted(s for s in v.get("sources") or () if s))
            p.truncate_ord, p.truncate_seq, p.truncate_time = v.get("t_ord"), v.get("t_seq"), v.get("t_time")
            p.truncates = sorted(((s, t) for s, t in v.get("t_all") or ()), key=lambda st: (st[0] or "", st[1] or ""))
            p.invalid_values = v.get("invalid") or 0
    return profiles
