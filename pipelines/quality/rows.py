"""A table's configured rules on its mirror's current rows (``lakecdc dq check --rules``).

Row rules (``not_null``, ``in_set``, ``between``, ``regex``, SQL rules) check each *change* as gold applies
it, so a rule added or changed later never saw the rows already in the mirror. This runs every rule of
the table over the mirror as it is now, one row per key: row rules on each live row (a soft-deleted row
is a DELETE, and is left out), table rules (``unique``, ``row_count_between``) on the mirror, as after a
merge. Nothing is dropped or stopped: a ``drop`` or ``fail`` rule that finds rows is a failed result
under its own name and action, its examples naming the bronze position of the change that wrote each
row (``_position``). ``lakecdc dq check --rules`` runs it beside the built-in checks
(:func:`pipelines.runner.check_every_mirror`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pipelines.layout import SYSTEM_COLUMNS
from pipelines.quality.batch import QualityFailure, check_batch, check_mirror
from pipelines.quality.rules import Rule
from pipelines.sql import q

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def rows_frame(mirror: DataFrame) -> DataFrame:
    """The mirror's live rows as :func:`~pipelines.quality.batch.check_batch` reads changes: the data
    columns, ``bronze_position`` (the row's ``_position``: where its last change is in bronze) and
    ``change_index`` 0."""
    from pyspark.sql import functions as F

    live = mirror.where(~F.coalesce(F.col("_deleted"), F.lit(False))) if "_deleted" in mirror.columns else mirror
    data = [F.col(q(c)) for c in mirror.columns if c not in SYSTEM_COLUMNS]
    pos = F.col("_position") if "_position" in mirror.columns else F.lit(None).cast("string")
    return live.select(*data, pos.alias("bronze_position"), F.lit(0).alias("change_index"))


def check_rows(
    spark: SparkSession, table: str, mirror: DataFrame, rules: Sequence[Rule], run_id: str, key_cols: Sequence[str] = ()
) -> list[dict]:
    """Every rule of ``rules`` on ``mirror``'s current rows; the ``dq_results`` rows, each under its rule's
    name and configured action (evaluated as ``warn``: nothing dropped, nothing raised)."""
    as_warn = [dataclasses.replace(r, action="warn") for r in rules]
    action = {r.name: r.action for r in rules}
    rows: list[dict] = []
    row_rules = [r for r in as_warn if r.scope == "batch"]
    if row_rules:
        frame = rows_frame(mirror)
        got = check_batch(spark, table, frame, row_rules, run_id, 0, suite="rows", on="each row of the mirror")
        rows += got.results
    table_rules = [r for r in as_warn if r.scope == "mirror"]
    if table_rules:
        try:
            rows += check_mirror(spark, table, rows_frame(mirror), table_rules, run_id, 0, key_cols=key_cols)
        except QualityFailure as exc:  # cannot happen with warn; kept for safety
            rows += exc.results
    for r in rows:
        r["action"] = action.get(r["expectation"], r["action"])
    return rows
