"""Truncate: a TRUNCATE empties the mirror as of its sequence, and what came before it is stale.

Changes ordered before the batch's last TRUNCATE are dropped (counted stale, as are the batch's earlier
TRUNCATEs; the last one counts applied); changes of later batches older than
the highest TRUNCATE sequence seen stay stale (the mirror's table property
``lakecdc.truncated_seq``). Tombstones up to that sequence are no longer needed and go too; the
history's current versions close at it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipelines.gold.batch import BatchContext, Step
from pipelines.gold.order import ORD, ord_literal
from pipelines.gold.profile import TableProfile
from pipelines.sql import lit

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from pipelines.warehouse import TableRef

#: The mirror's table property: the highest TRUNCATE sequence it has applied.
TRUNCATED_SEQ_PROPERTY = "lakecdc.truncated_seq"


def apply_truncate(
    ctx: BatchContext, changes: DataFrame, profile: TableProfile, truncated_seq: str, history: TableRef | None = None
) -> DataFrame:
    """Apply the batch's TRUNCATE (if any) and return the other changes with ``stale``: older than
    the TRUNCATE sequence (``truncated_seq``: as the mirror's property held it when the batch began)."""
    from pyspark.sql import functions as F

    spark, ident = ctx.spark, ctx.ident
    if profile.truncate_ord is not None:
        before = F.col(ORD) <= ord_literal(profile.truncate_ord)
        superseded = changes.agg(F.count_if(before).alias("n")).first()["n"]  # the last TRUNCATE included
        ctx.stats.applied += 1
        ctx.stats.stale += superseded - 1
        changes = changes.where(~before)
        with ctx.txn(Step.TRUNCATE):
            ident.ref.delta(spark).delete(F.col("_seq") <= F.lit(profile.truncate_seq))
        if ident.tombstones.exists(spark):
            # Compaction that is provably safe: a change older than the truncate is stale through
            # lakecdc.truncated_seq, so tombstones up to it are no longer needed.
            with ctx.txn(Step.TRUNCATE_TOMBSTONES):
                ident.tombstones.delta(spark).delete(F.col("_seq") <= F.lit(profile.truncate_seq))
        if history is not None and history.exists(spark):
            with ctx.txn(Step.TRUNCATE_HISTORY):
                history.delta(spark).update(
                    condition=F.expr(f"_current AND _valid_from_seq <= {lit(profile.truncate_seq)}"),
                    set={
                        "_current": F.lit(False),
                        "_valid_to_seq": F.lit(profile.truncate_seq),
                        "_valid_to": F.lit(profile.truncate_time).cast("timestamp"),
                    },
                )
        if profile.truncate_seq > truncated_seq:
            truncated_seq = profile.truncate_seq
            spark.sql(
                f"ALTER TABLE {ident.ref.sql} SET TBLPROPERTIES ({lit(TRUNCATED_SEQ_PROPERTY)} = {lit(truncated_seq)})"
            )
    changes = changes.where("op != 'TRUNCATE'")
    if truncated_seq:
        return changes.withColumn("stale", F.col("seq") < F.lit(truncated_seq))
    return changes.withColumn("stale", F.lit(False))
