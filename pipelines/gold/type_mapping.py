"""``type_mapping`` (top level, per source, per table; Paimon's ``--type_mapping``): trade exact types for a
schema that never breaks. The most specific setting wins: a table's, else its source's, else the top level's.

* ``to-string``: every column of the mirror is STRING and holds each value's exact canonical text
  (:mod:`pipelines.values`: ``1.10`` stays ``1.10``, an instant ``2024-01-05T10:00:00Z``, bytes Base64). It
  gives up typed comparison and arithmetic in the mirror (``'10' < '9'``), never a digit.
* ``bigint-unsigned-to-bigint``: a BIGINT UNSIGNED column is BIGINT, not DECIMAL(20,0); a value above
  2^63 - 1 does not fit and its change goes to quarantine (a misfit), as any value that does not fit.
* ``tinyint1-not-bool`` and ``char-to-string``: lakecdc reads TINYINT(1) as a number and CHAR(n) as STRING
  already; they are accepted, so that one file serves Paimon and lakecdc, and change nothing.

Gold maps the types of the batch's changes (their ``col_types``) before it plans (:func:`map_batch_types`),
and the table's configured ``columns`` when it plans (:func:`map_type`), so a mirror is created with the
mapped types. For an existing mirror a new mapping is a type change under ``schema_changes``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pipelines.routing import NAME_SQL
from pipelines.sql import lit

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from pipelines.config import PipelineConfig

_UNSIGNED_BIGINT = r"(?i)^\s*(bigint|int64|long)\b.*\bunsigned\b.*$"


def mappings_for(cfg: PipelineConfig, source: str | None, table: str) -> tuple[str, ...]:
    """The type mappings of a source table (its entry's, else its source's, else the top level's)."""
    tc = cfg.table_for(table)
    if tc is not None and tc.type_mapping is not None:
        return tc.type_mapping
    src = next((s for s in cfg.sources if s.name == source), None)
    if src is not None and src.type_mapping is not None:
        return src.type_mapping
    return cfg.type_mapping


def map_type(source_type: str, mappings: Sequence[str]) -> str:
    """A source type as ``mappings`` make it."""
    if "to-string" in mappings:
        return "text"
    if "bigint-unsigned-to-bigint" in mappings and re.match(_UNSIGNED_BIGINT, source_type):
        return "bigint"
    return source_type


def _flag(cfg: PipelineConfig, mapping: str) -> str:
    """SQL: the change's table maps its types with ``mapping``."""
    whens = [
        f"WHEN {NAME_SQL} = {lit(name)} THEN {str(mapping in tc.type_mapping).lower()}"
        for name, tc in cfg.tables.items()
        if tc.type_mapping is not None
    ]
    whens += [
        f"WHEN source = {lit(s.name)} THEN {str(mapping in s.type_mapping).lower()}"
        for s in cfg.sources
        if s.type_mapping is not None
    ]
    top = str(mapping in cfg.type_mapping).lower()
    return f"CASE {' '.join(whens)} ELSE {top} END" if whens else top


def map_batch_types(batch: DataFrame, cfg: PipelineConfig) -> DataFrame:
    """The batch's changes with their column types mapped (unchanged where no table maps types)."""
    from pyspark.sql import functions as F

    used = {m for tc in cfg.tables.values() for m in tc.type_mapping or ()}
    used |= {m for s in cfg.sources for m in s.type_mapping or ()} | set(cfg.type_mapping)
    if not used & {"to-string", "bigint-unsigned-to-bigint"}:
        return batch
    to_string, unsigned = _flag(cfg, "to-string"), _flag(cfg, "bigint-unsigned-to-bigint")
    mapped = (
        f"transform_values(col_types, (c, t) -> CASE WHEN {to_string} THEN 'text' "
        f"WHEN {unsigned} AND t RLIKE {lit(_UNSIGNED_BIGINT)} THEN 'bigint' ELSE t END)"
    )
    return batch.withColumn("col_types", F.expr(mapped))
