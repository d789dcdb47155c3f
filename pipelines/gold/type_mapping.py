"""``type_mapping``: exact column types traded for a schema that never breaks (docs/type-mapping.md).

Gold maps types where a batch enters, before it is profiled: each change's stated types (``col_types``)
become the mapped ones, by the change's source and table (:meth:`PipelineConfig.type_mapping_for`), and a
table's configured types likewise (:func:`configured_types`). The mirror is then created, widened and written
with the mapped types, each value converted from the canonical text silver keeps: silver itself, and a
replay from it, are untouched by the setting.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from pipelines.config import PipelineConfig, TableConfig
from pipelines.gold.lookups import map_sql
from pipelines.gold.profile import SOURCE_TABLE, TableProfile
from pipelines.sql import lit
from pipelines.values.types import family

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def with_mapped_types(batch: DataFrame, cfg: PipelineConfig, profiles: Mapping[str, TableProfile]) -> DataFrame | None:
    """The batch with each change's ``col_types`` mapped (``profiles``: the batch's, before mapping); None
    when no change of it has a type that maps to another."""
    from pyspark.sql import functions as F

    stated = sorted({t for p in profiles.values() for s in p.columns.values() for t in s.types if t})
    by_mapping: dict[tuple[str, ...], list[str]] = {}
    for name, profile in profiles.items():
        for source in profile.sources or (None,):
            mapping = cfg.type_mapping_for(source, profile.source.name)
            if mapping:
                by_mapping.setdefault(mapping, []).append(_pair(source, name))
    cases = []
    for mapping, pairs in by_mapping.items():
        changed = {t: lit(m) for t in stated if (m := mapped_type(t, mapping)) != t}
        if changed:
            cases.append(f"WHEN {_PAIR_SQL} IN ({', '.join(lit(p) for p in pairs)}) THEN {map_sql(changed, 'string')}")
    if not cases:
        return None
    by_row = f"CASE {' '.join(cases)} END"
    return batch.withColumn(
        "col_types", F.expr(f"transform_values(col_types, (c, t) -> coalesce(element_at({by_row}, t), t))")
    )


def configured_types(cfg: PipelineConfig, tc: TableConfig | None, profile: TableProfile) -> dict[str, str]:
    """A table's configured column types, mapped as its changes are: by the mapping its sources give it (a
    table fed by sources whose mappings differ takes its own, else the top level's)."""
    if tc is None:
        return {}
    mappings = {cfg.type_mapping_for(s, profile.source.name) for s in profile.sources}
    mapping = mappings.pop() if len(mappings) == 1 else cfg.type_mapping_for(None, profile.source.name)
    return {c: mapped_type(t, mapping) or t for c, t in tc.columns.items()}


#: The source type every column of a ``to-string`` table takes: text, each value its canonical text.
MAPPED_TEXT_TYPE = "text"


def mapped_type(source_type: str | None, mappings: tuple[str, ...]) -> str | None:
    """A column's source type under ``type_mapping`` (docs/type-mapping.md):

    * ``to-string``: every column text, holding the canonical text silver keeps (decimals with all their
      digits and trailing zeros, times with their precision and zone, bytes as Base64, documents as JSON);
    * ``bigint-unsigned-to-bigint``: an unsigned BIGINT is a BIGINT, not DECIMAL(20,0); a value above 2^63 - 1
      no longer fits, and its change goes to quarantine (it is never wrapped or rounded);
    * ``tinyint1-not-bool`` and ``char-to-string``: what lakecdc does anyway (TINYINT(1) is an integer, CHAR
      and VARCHAR are STRING), accepted so that a Paimon user's list works unchanged."""
    if not mappings or source_type is None:
        return source_type
    if "to-string" in mappings:
        return MAPPED_TEXT_TYPE
    if "bigint-unsigned-to-bigint" in mappings and family(source_type) == "uint64":
        return "bigint"
    return source_type


#: SQL: a change's source and table, as :func:`_pair` writes them.
_PAIR_SQL = f"concat(coalesce(source, ''), '|', {SOURCE_TABLE})"


def _pair(source: str | None, table: str) -> str:
    """A source name has no ``|`` (``sources[].name``: letters, digits, ``_ . -``): the first one ends it."""
    return f"{source or ''}|{table}"
