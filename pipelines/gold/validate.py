"""Check: which changes of a batch cannot apply to the mirror, and why; those go to quarantine.

A value whose canonical text does not convert to the mirror column's type (overflow, too many
decimal places, sub-microsecond time, bad Base64) is named with its column; it never becomes a
silent NULL. So is a change a ``quarantine`` schema policy holds back, one that lacks a key column
or whose key is NULL (two such rows would collapse into one), and, under ``invalid_values:
quarantine``, one that carries a value the source holds as invalid (a zero date).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from pipelines.delta_writes import quarantine_frame
from pipelines.gold.batch import BatchContext, Step
from pipelines.gold.schema import MirrorShape
from pipelines.sql import ROW_IMAGE_SQL, convert_expr, lit
from pipelines.values import spark_type

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)


def rename_columns(changes: DataFrame, renames: dict[str, str]) -> DataFrame:
    """Older images still carry a renamed column's old name (``evolve`` of a RENAME): read the new one."""
    if not renames:
        return changes
    from pyspark.sql import functions as F

    case = "CASE " + " ".join(f"WHEN k = {lit(old)} THEN {lit(new)}" for old, new in renames.items()) + " ELSE k END"
    for image in ("before", "after", "col_types"):
        changes = changes.withColumn(image, F.expr(f"transform_keys({image}, (k, v) -> {case})"))
    return changes.withColumn("changed", F.expr(f"transform(changed, k -> {case})"))


def check_changes(
    changes: DataFrame, shape: MirrorShape, key: tuple[str, ...], invalid_values: str = "null"
) -> DataFrame:
    """Each change with ``reason``: why it cannot apply (NULL when it can)."""
    from pyspark.sql import functions as F

    columns = shape.columns
    checks = [f"CASE WHEN {predicate} THEN {lit(reason)} END" for predicate, reason in shape.rejects]
    for c in columns:
        target = lit(f"{spark_type(columns.get(c))} (source type {columns.get(c)})")
        for image in ("after", "before"):
            value = f"{image}[{lit(c)}]"
            checks.append(
                f"CASE WHEN {value} IS NOT NULL AND ({convert_expr(value, columns.get(c))}) IS NULL THEN "
                f"concat('value ', substr({value}, 1, 80), ' of column ', {lit(c)}, ' does not fit ', "
                f"{target}) END"
            )
    for k in key:
        checks.append(
            f"CASE WHEN op != 'TRUNCATE' AND NOT (map_contains_key(coalesce(after, map()), {lit(k)}) "
            f"OR map_contains_key(coalesce(before, map()), {lit(k)})) THEN "
            f"concat('key column ', {lit(k)}, ' is missing from the change') END"
        )
        checks.append(
            f"CASE WHEN op != 'TRUNCATE' AND map_contains_key(coalesce({ROW_IMAGE_SQL}, map()), {lit(k)}) "
            f"AND ({ROW_IMAGE_SQL})[{lit(k)}] IS NULL THEN "
            f"concat('key column ', {lit(k)}, ' is NULL (a table with a key needs one on every row)') END"
        )
    if invalid_values == "quarantine":
        checks.append(
            "CASE WHEN invalid IS NOT NULL AND size(invalid) > 0 THEN "
            "concat('values the source holds as invalid (column: raw value): ', substr(to_json(invalid), 1, 400), "
            "' (invalid_values: quarantine)') END"
        )
    return changes.withColumn("reason", F.expr(f"coalesce({', '.join(checks)})") if checks else F.lit(None))


def quarantine_misfits(ctx: BatchContext, checked: DataFrame) -> DataFrame:
    """Send the changes with a reason to quarantine (counted in ``ctx.stats``); return the others."""
    from pyspark.sql import functions as F

    bad = checked.where("reason IS NOT NULL")
    quarantined = bad.count()
    if quarantined:
        ctx.stats.quarantined += quarantined
        ctx.append(
            quarantine_frame(bad.withColumn("stage", F.lit("gold"))), ctx.wh.silver("quarantine"), Step.QUARANTINE
        )
        log.warning(
            "gold: %s: %d changes quarantined (values or schema changes that do not fit the mirror)",
            ctx.ident.source_table,
            quarantined,
        )
    return checked.where("reason IS NULL")
