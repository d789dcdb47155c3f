"""Truncate: a TRUNCATE empties the mirror as of its sequence, and what came before it is stale.

Changes ordered before the batch's last TRUNCATE are dropped (counted stale, as are the batch's earlier
TRUNCATEs; the last one counts applied); changes of later batches older than
the highest TRUNCATE sequence seen stay stale (the mirror's table property
``lakecdc.truncated_seq``). Key state up to that sequence no longer counts (a late change of a key the
TRUNCATE removed finds no row); the history's current versions close at it.

A ``deletes: soft`` mirror keeps what a TRUNCATE covers, marked: there the batch's changes before its
TRUNCATEs are applied like any (not stale), and every TRUNCATE of the batch then marks the rows it covers
with its own time (:func:`truncate_mirror` runs after the write), so where the batch boundary falls changes
nothing (every TRUNCATE counts applied). Its history is a hard mirror's: current versions close at the
TRUNCATE before the batch's changes after it are merged (:func:`close_history`), and the batch's changes before
its last TRUNCATE open no versions (:func:`after_truncate_sql`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipelines.delta_dml import delete_rows, update_rows
from pipelines.gold.batch import BatchContext, Step
from pipelines.gold.order import ORD, ord_literal, ord_sql
from pipelines.gold.profile import TableProfile
from pipelines.gold.soft import DELETED, soft_truncate_set
from pipelines.sql import lit, q, timestamp_lit

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from pipelines.warehouse import TableRef

#: The mirror's table property: the highest TRUNCATE sequence it has applied.
TRUNCATED_SEQ_PROPERTY = "lakecdc.truncated_seq"


def truncate_mirror(
    ctx: BatchContext, profile: TableProfile, truncated_seq: str, history: TableRef | None, soft: bool = False
) -> str:
    """Empty the mirror as of the batch's last TRUNCATE: its rows up to that sequence go (``soft``: are
    marked deleted, each by the first of the batch's TRUNCATEs that covers it, :mod:`pipelines.gold.soft`;
    called after the batch's write), the history's current versions close at it (:func:`close_history`; a
    soft mirror's caller closes them before its history merge and passes no ``history``), and the mirror's
    ``lakecdc.truncated_seq`` rises to it (``truncated_seq``: as the property held it when the batch began).
    Returns the sequence changes must now be newer than."""
    spark, ident = ctx.spark, ctx.ident
    covered = f"_seq <= {lit(profile.truncate_seq)}"
    with ctx.txn(Step.TRUNCATE):
        if soft:
            live = f"{covered} AND NOT coalesce({q(DELETED)}, false)"
            update_rows(spark, ident.ref, live, soft_truncate_set(truncates_of(profile)))
        else:
            delete_rows(spark, ident.ref, covered)
    close_history(ctx, profile, history, every=soft)
    if profile.truncate_seq > truncated_seq:
        truncated_seq = profile.truncate_seq
        spark.sql(
            f"ALTER TABLE {ident.ref.sql} SET TBLPROPERTIES ({lit(TRUNCATED_SEQ_PROPERTY)} = {lit(truncated_seq)})"
        )
    return truncated_seq


def close_history(ctx: BatchContext, profile: TableProfile, history: TableRef | None, every: bool = False) -> None:
    """Close the history's current versions at the batch's last TRUNCATE (``every``: each at the first of the
    batch's TRUNCATEs that covers it, as when each came in a batch of its own)."""
    spark = ctx.spark
    if history is None or not history.exists(spark):
        return
    marks = truncates_of(profile) if every else [(profile.truncate_seq, profile.truncate_time)]

    def first_covering(value) -> str:
        whens = " ".join(f"WHEN _valid_from_seq <= {lit(s)} THEN {value(s, t)}" for s, t in marks[:-1])
        last = value(*marks[-1])
        return f"CASE {whens} ELSE {last} END" if whens else last

    with ctx.txn(Step.TRUNCATE_HISTORY):
        update_rows(
            spark,
            history,
            f"_current AND _valid_from_seq <= {lit(profile.truncate_seq)}",
            {
                "_current": "false",
                "_valid_to_seq": first_covering(lambda s, t: lit(s)),
                "_valid_to": first_covering(lambda s, t: timestamp_lit(t)),
            },
        )


def after_truncate_sql(profile: TableProfile) -> str:
    """SQL: a change comes after the batch's last TRUNCATE of its table (what a soft mirror's history merges)."""
    return f"{ORD} > {ord_sql(profile.truncate_ord)}"


def truncates_of(profile: TableProfile) -> list[tuple[str, str | None]]:
    """The batch's TRUNCATEs of the table as (sequence, source commit time), ascending; the last one alone
    where the profile lists none."""
    listed = sorted({(s, t) for s, t in profile.truncates if s is not None}, key=lambda st: (st[0], st[1] or ""))
    return listed or [(profile.truncate_seq, profile.truncate_time)]


def apply_truncate(
    ctx: BatchContext, changes: DataFrame, profile: TableProfile, truncated_seq: str, history: TableRef | None = None
) -> DataFrame:
    """For a table without a key: apply the batch's TRUNCATE (if any) and return the other changes with
    ``stale``: older than the TRUNCATE sequence. (Tables with a key decide this in the batch pass,
    :func:`pipelines.gold.decide.with_key_state`, and call :func:`truncate_mirror` when they write.)"""
    from pyspark.sql import functions as F

    if profile.truncate_ord is not None:
        before = F.col(ORD) <= ord_literal(profile.truncate_ord)
        superseded = changes.agg(F.count_if(before).alias("n")).first()["n"]  # the last TRUNCATE included
        ctx.stats.applied += 1
        ctx.stats.stale += superseded - 1
        changes = changes.where(~before)
        truncated_seq = truncate_mirror(ctx, profile, truncated_seq, history)
    changes = changes.where("op != 'TRUNCATE'")
    if truncated_seq:
        return changes.withColumn("stale", F.col("seq") < F.lit(truncated_seq))
    return changes.withColumn("stale", F.lit(False))
