"""Sharded sources into one mirror: ``tables.<name>.from`` (Flink CDC's ``route``, Paimon's ``--merge_shards``).

An entry with ``from`` names a mirror's source table (``shop.orders``) and lists regular expressions over
the source tables' names (``db.table``, or ``db.schema.table``; Python's :mod:`re` syntax, matched against the
whole name with :func:`re.fullmatch`, case kept). One engine checks and matches: the file's patterns compile
at load (:func:`config_problems`), and routing is decided in Python, per distinct source table name of a
batch (a batch names few tables), so Spark never runs a user's pattern and no pattern can fail a batch.
Gold routes each change of a matching table before anything else (:func:`route_shards`): the change becomes
one of the entry's table, so the mirror, its key state, its schema evolution and its counts are one table's,
and it carries the shard's name in a data column ``_source_table`` (:data:`SOURCE_TABLE_COLUMN`, in both
images), so ``key: [_source_table, id]`` keys rows whose ids repeat across shards. The entry's ``key``,
where given, is the key of every routed change. The mirror's columns are the union of its shards'
(:mod:`pipelines.gold.schema`: a column one shard's images lack is no DROP).

* ``include`` / ``exclude`` act in silver, on the shards' own names: before routing.
* A table that matches no ``from`` keeps its own mirror.
* A table whose name matches patterns of two entries is refused (:func:`route_problem`): its changes go to
  quarantine with both patterns named. The file itself is checked at load for what can be known then
  (each pattern compiles; no entry's own name is routed elsewhere).
* A TRUNCATE of one shard is not routed (it would empty every shard's rows): it goes to quarantine with
  the reason.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import TYPE_CHECKING

from pipelines.sql import EMPTY_MAP, lit

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from pipelines.config.model import PipelineConfig

#: The data column of a routed change: ``db.table`` of the shard it came from.
SOURCE_TABLE_COLUMN = "_source_table"
#: SQL of a silver row's source table name as patterns read it (``db[.schema].table``, as SourceTable.name).
NAME_SQL = (
    "concat_ws('.', nullif(db, ''), CASE WHEN nullif(`schema`, '') = nullif(db, '') THEN NULL "
    "ELSE nullif(`schema`, '') END, `table`)"
)


def routes(cfg: PipelineConfig) -> dict[str, tuple[str, ...]]:
    """Entry name → its ``from`` patterns, for the entries that have them."""
    return {name: tc.from_tables for name, tc in cfg.tables.items() if tc.from_tables}


@lru_cache(maxsize=4096)
def _compiled(pattern: str) -> re.Pattern | None:
    try:
        return re.compile(pattern)
    except re.error:
        return None


def _matches(pattern: str, name: str) -> bool:
    compiled = _compiled(pattern)
    return compiled is not None and compiled.fullmatch(name) is not None


def matching(cfg: PipelineConfig, name: str) -> list[tuple[str, str]]:
    """The (entry, pattern) pairs whose pattern matches the source table ``name``, one per entry."""
    out = []
    for entry, patterns in routes(cfg).items():
        hit = next((p for p in patterns if _matches(p, name)), None)
        if hit is not None:
            out.append((entry, hit))
    return out


def route_problem(cfg: PipelineConfig, name: str) -> str | None:
    """Why gold refuses the (unrouted) changes of source table ``name``: it matches two entries' patterns,
    or it is a shard whose unrouted change is a TRUNCATE. None: nothing to refuse."""
    if name in routes(cfg):  # the mirror's own table (routed changes are named so)
        return None
    hits = matching(cfg, name)
    if len(hits) > 1:
        named = "; ".join(f"tables.{entry}.from {pattern!r}" for entry, pattern in hits)
        return f"source table {name} matches the from patterns of two mirrors ({named}): make them exclusive"
    if hits:
        return (
            f"a TRUNCATE of {name}, one shard of tables.{hits[0][0]} (from {hits[0][1]!r}), is not applied: it "
            f"would empty every shard's rows (delete this shard's with DELETE ... WHERE {SOURCE_TABLE_COLUMN} = "
            f"'{name}')"
        )
    return None


def routed_names(cfg: PipelineConfig, names: Iterable[str]) -> dict[str, str]:
    """Source table name → its entry, for the ``names`` that are shards: they match exactly one entry's
    ``from`` and are no entry's own name (routed already: changes that waited; or the mirror's own table)."""
    table_routes = routes(cfg)
    out = {}
    for name in names:
        if name is None or name in table_routes:
            continue
        hits = matching(cfg, name)
        if len(hits) == 1:
            out[name] = hits[0][0]
    return out


def route_shards(batch: DataFrame, cfg: PipelineConfig, names: Iterable[str] | None = None) -> DataFrame:
    """The batch's changes with every change of a shard (a table matching exactly one entry's ``from``; not a
    TRUNCATE) made one of its entry's table, its shard's name in ``_source_table``. Unchanged without ``from``.
    ``names``: the batch's source table names (:data:`NAME_SQL`), else read from it (one small job); which
    entry each routes to is decided here, in Python (:func:`routed_names`)."""
    from pyspark.sql import functions as F

    table_routes = routes(cfg)
    if not table_routes:
        return batch
    if names is None:
        names = [r[0] for r in batch.select(F.expr(NAME_SQL).alias("n")).distinct().collect()]
    shards = routed_names(cfg, names)
    if not shards:
        return batch
    shard_map = "map(" + ", ".join(f"{lit(n)}, {lit(e)}" for n, e in sorted(shards.items())) + ")"
    entry_sql = f"CASE WHEN op != 'TRUNCATE' THEN element_at({shard_map}, {NAME_SQL}) END"
    routed = batch.withColumn("__lakecdc_entry", F.expr(entry_sql)).withColumn("__lakecdc_shard", F.expr(NAME_SQL))
    used = set(shards.values())
    parts = {entry: entry.split(".") for entry in table_routes if entry in used}
    keys = {entry: cfg.tables[entry].key for entry in parts if cfg.tables[entry].key}

    def per_entry(values: Mapping[str, str], otherwise: str) -> str:
        whens = " ".join(f"WHEN {lit(e)} THEN {v}" for e, v in values.items())
        return f"CASE __lakecdc_entry {whens} ELSE {otherwise} END" if whens else otherwise

    shard = f"map({lit(SOURCE_TABLE_COLUMN)}, __lakecdc_shard)"
    tagged = {
        image: f"CASE WHEN {image} IS NULL THEN NULL ELSE map_concat(map_filter({image}, (c, v) -> "
        f"c != {lit(SOURCE_TABLE_COLUMN)}), {shard}) END"
        for image in ("before", "after")
    }
    typed = f"map_concat(map_filter(coalesce(col_types, {EMPTY_MAP}), (c, v) -> c != {lit(SOURCE_TABLE_COLUMN)}), " \
        f"map({lit(SOURCE_TABLE_COLUMN)}, 'varchar'))"  # fmt: skip
    new = {
        "db": per_entry({e: lit(p[0]) for e, p in parts.items()}, "db"),
        "schema": per_entry({e: lit(p[1]) if len(p) == 3 else "CAST(NULL AS STRING)" for e, p in parts.items()},
                            "NULL"),
        "table": per_entry({e: lit(p[-1]) for e, p in parts.items()}, "`table`"),
        "before": tagged["before"],
        "after": tagged["after"],
        "col_types": typed,
        "key_columns": per_entry({e: f"array({', '.join(lit(k) for k in key)})" for e, key in keys.items()},
                                 "key_columns"),
    }  # fmt: skip
    for column, sql in new.items():
        routed = routed.withColumn(
            column, F.expr(f"CASE WHEN __lakecdc_entry IS NULL THEN {_own(column)} ELSE {sql} END")
        )
    return routed.drop("__lakecdc_entry", "__lakecdc_shard")


def _own(column: str) -> str:
    return "`schema`" if column == "schema" else "`table`" if column == "table" else column


def config_problems(tables: Mapping[str, object]) -> list[tuple[str, str]]:
    """(field, error) of the ``from`` lists of a file: a pattern that does not compile with Python's
    :mod:`re` (the engine that routes, :func:`routed_names`), an entry whose own name another entry's pattern
    routes."""
    out = []
    for entry, tc in tables.items():
        for i, pattern in enumerate(tc.from_tables):
            try:
                re.compile(pattern)
            except (re.error, RecursionError, OverflowError) as exc:
                out.append((f"tables.{entry}.from[{i}]", f"{pattern!r} is not a regular expression (Python's re "
                                                          f"syntax, matched with re.fullmatch): {exc}"))  # fmt: skip
                continue
            for other in tables:
                if other != entry and _matches(pattern, other):
                    out.append((f"tables.{entry}.from[{i}]", f"{pattern!r} matches the entry {other!r}: a mirror "
                                                              "cannot also be a shard"))  # fmt: skip
    return out
