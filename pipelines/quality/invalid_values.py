"""The built-in check ``cdc_invalid_value``: values the source itself holds as invalid.

MySQL keeps zero dates (``0000-00-00 00:00:00``) in many legacy rows, and OMS passes them on as
they are; OMS passes other invalid dates as their original text (seeds 000, 001). Decoders keep
such a row with the column NULL and the raw text in the change's ``invalid`` map. Under the table's
``invalid_values: null`` policy (the default) gold applies the row, and this check records, per
micro-batch and column, how many changes carried one and examples naming the key and the raw text,
so nobody loses sight of them. Under ``quarantine`` the changes go to quarantine instead (gold).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pipelines.quality.gx_session import utc_now
from pipelines.quality.storage import result_row
from pipelines.sql import ROW_IMAGE_SQL, lit

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

CHECK = "cdc_invalid_value"
#: Examples kept per column and batch.
MAX_EXAMPLES = 5


def invalid_value_rows(
    table: str, changes: DataFrame, key_cols: Sequence[str], run_id: str, batch_id: int
) -> list[dict]:
    """One ``dq_results`` row per column that held invalid values in this batch (none: no rows).

    ``details`` is JSON: the column, the number of changes, and examples ``{key, raw}``.
    """
    from pyspark.sql import functions as F

    key = (
        F.expr("named_struct(" + ", ".join(f"{lit(k)}, ({ROW_IMAGE_SQL})[{lit(k)}]" for k in key_cols) + ")")
        if key_cols
        else F.lit(None)
    )
    flagged = changes.where("invalid IS NOT NULL AND size(invalid) > 0")
    per_column = (
        flagged.select(F.explode("invalid").alias("column", "raw"), F.to_json(key).alias("key"))
        .groupBy("column")
        .agg(
            F.count(F.lit(1)).alias("n"),
            F.slice(F.collect_list(F.struct("key", "raw")), 1, MAX_EXAMPLES).alias("examples"),
        )
    )
    now = utc_now()
    rows = []
    for r in per_column.collect():
        examples = [{"key": json.loads(e["key"]) if e["key"] else None, "raw": e["raw"]} for e in r["examples"]]
        details = json.dumps(
            {"column": r["column"], "changes": r["n"], "examples": examples, "became": "NULL (invalid_values: null)"},
            ensure_ascii=False,
        )
        rows.append(
            result_row(
                run_id, batch_id, table, f"{CHECK}:{r['column']}", CHECK, "warn", False, r["n"], r["n"], details, now
            )
        )
    return rows
