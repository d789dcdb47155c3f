"""What a mirror tells the people and tools that browse the catalog: a table comment, and a primary key.

* The table comment names the source table, the sources and formats its changes came from, and the
  key (``keyless``: a multiset), and says lakecdc maintains the table. Gold sets it when it creates a
  mirror, and on a mirror an earlier version created, if that has none; after that it is the
  analysts' (as column comments always are).
* In a catalog, the key becomes an informational ``PRIMARY KEY`` constraint (Databricks Unity Catalog:
  ``ALTER TABLE ... ADD CONSTRAINT name PRIMARY KEY (cols)``; key columns must be ``NOT NULL``, the
  constraint name unique in the schema; never enforced). It is ``NORELY``: ``RELY`` would let the
  optimizer drop DISTINCTs and joins on the promise, and a write behind lakecdc's back would then give
  wrong answers silently. A catalog without key constraints (open-source Delta on ``spark_catalog``
  raises ``UNSUPPORTED_FEATURE.TABLE_OPERATION``) keeps the key in ``lakecdc.key`` only; the batch goes
  on. Local path mirrors get no constraint. Delta's schema overwrite (the ``evolve`` rewrite of a
  column as text) makes every column nullable; gold sets the key's NOT NULL again where the catalog
  lets it (Databricks does; open-source Spark refuses to make a column non-nullable).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pipelines.sql import q

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from pipelines.warehouse import TableRef

log = logging.getLogger(__name__)


def mirror_comment(source_table: str, sources: Sequence[str], formats: Sequence[str], key: Sequence[str]) -> str:
    """``Mirror of source table shop.orders (source shop_oms, format oms_default), key (order_id);
    maintained by lakecdc, do not write``."""
    origin = [
        f"{label}{'s' if len(names) > 1 else ''} {', '.join(sorted(names))}"
        for label, names in (("source", set(sources)), ("format", set(formats)))
        if names
    ]
    where = f" ({', '.join(origin)})" if origin else ""
    keyed = f"key ({', '.join(key)})" if key else "keyless"
    return f"Mirror of source table {source_table}{where}, {keyed}; maintained by lakecdc, do not write"


def declares_key(ref: TableRef, key: Sequence[str]) -> bool:
    """Whether gold declares the mirror's key as a constraint: a catalog table (not a path) with a key."""
    return ref.name is not None and bool(key)


def declare_key(spark: SparkSession, ref: TableRef, key: Sequence[str]) -> bool:
    """Add the informational primary key to a new catalog mirror (its key columns created NOT NULL);
    False, after one INFO line, where the catalog has no key constraints."""
    from pyspark.errors import AnalysisException  # ParseException is one too

    constraint = f"{ref.name.rsplit('.', 1)[-1]}_pk"  # table names are unique in a schema, so is this
    try:
        spark.sql(
            f"ALTER TABLE {ref.sql} ADD CONSTRAINT {q(constraint)} "
            f"PRIMARY KEY ({', '.join(q(k) for k in key)}) NOT ENFORCED NORELY"
        )
    except AnalysisException as refused:
        condition = refused.getCondition() or type(refused).__name__
        log.info(
            "gold: %s: the catalog keeps no primary key constraint (%s); the key (%s) is recorded in the "
            "table property lakecdc.key instead",
            ref.name,
            condition,
            ", ".join(key),
        )
        return False
    return True


def restore_not_null(spark: SparkSession, ref: TableRef, columns: Sequence[str]) -> None:
    """Set the columns NOT NULL again after a schema overwrite made them nullable; where the catalog
    refuses (open-source Spark: ``Cannot change nullable column to non-nullable``), one INFO line."""
    from pyspark.errors import AnalysisException

    for column in columns:
        try:
            spark.sql(f"ALTER TABLE {ref.sql} ALTER COLUMN {q(column)} SET NOT NULL")
        except AnalysisException as refused:
            log.info(
                "gold: %s: column %r stays nullable after its rewrite, as this catalog cannot set NOT NULL "
                "again (%s); the key is recorded in the table property lakecdc.key",
                ref.name or ref.path,
                column,
                refused.getCondition() or str(refused).splitlines()[0],
            )
