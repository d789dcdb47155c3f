"""The built-in CDC checks every mirror gets without configuration.

* ``key_not_null`` / ``key_unique``: the mirror has a key on every row, once.
* ``seq_not_backwards``: a change never carries a sequence older than the mirror's row for its key.
* ``source_drift``: an UPDATE/DELETE finds the row its before-image describes (else the source and
  the mirror disagree: a change was lost or the mirror was written behind our back).
* ``freshness``: the newest event time or heartbeat per source is within a threshold (default 1 hour).
* ``reconcile``: after a full load, the mirror's row count and order-independent checksum equal the
  SNAPSHOT rows'.

Each check is one function that returns its named GE expectations. After gold writes, the checks scale
with what it wrote (:mod:`pipelines.quality.written`); :func:`cdc_checks` runs them on whole mirrors, as
``lakecdc dq check`` asks, the checks that read the same frame as one GE suite, so every frame is computed
once.
"""

from __future__ import annotations

import datetime as _dt
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pipelines.layout import SYSTEM_COLUMNS
from pipelines.mirror_columns import source_types
from pipelines.quality.batch import QualityFailure, run_checks
from pipelines.quality.gx_session import great_expectations, utc_now
from pipelines.quality.rules import CDC_CHECKS, DEFAULT_FRESHNESS, freshness_seconds
from pipelines.sql import lit, q
from pipelines.sql import typed as typed_column

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

#: One check's result as GE validates it: (dq_results name, action, GE expectation).
Check = tuple[str, str, Any]


@dataclass(frozen=True)
class MirrorFrames:
    """The mirror around one batch's merge, and how to read its columns."""

    after: DataFrame  # the mirror after the merge (gold columns + lineage ``_seq``, ``_source``, ``_event_time``)
    key_cols: tuple[str, ...]
    columns: Mapping[str, str | None]  # column → source type


# ---------------------------------------------------------------- one function per check


def key_not_null(key_cols: Sequence[str]) -> list[Check]:
    """Every key column of the mirror is set (one result per key column of a compound key)."""
    E = great_expectations().expectations
    return [
        (
            "cdc_key_not_null" if len(key_cols) == 1 else f"cdc_key_not_null.{k}",
            "warn",
            E.ExpectColumnValuesToNotBeNull(column=k),
        )
        for k in key_cols
    ]


def key_unique(key_cols: Sequence[str]) -> list[Check]:
    """No two mirror rows share a key (nothing to check without a key)."""
    if not key_cols:
        return []
    E = great_expectations().expectations
    return [
        (
            "cdc_key_unique",
            "warn",
            E.ExpectColumnValuesToBeUnique(column=key_cols[0])
            if len(key_cols) == 1
            else E.ExpectCompoundColumnsToBeUnique(column_list=list(key_cols)),
        )
    ]


def seq_not_backwards() -> list[Check]:
    """On gold's probe of a batch's changes: a change's sequence is not older than the mirror's for its key."""
    E = great_expectations().expectations
    return [
        (
            "cdc_seq_not_backwards",
            "warn",
            E.ExpectColumnPairValuesAToBeGreaterThanB(
                column_A="seq", column_B="prev_seq", or_equal=True, ignore_row_if="either_value_is_missing"
            ),
        )
    ]


def source_drift() -> list[Check]:
    """On gold's probe of a batch's changes: each UPDATE/DELETE not applied yet finds the row it describes."""
    E = great_expectations().expectations
    return [
        (
            "cdc_source_drift",
            "warn",
            E.ExpectColumnValuesToBeInSet(
                column="row_matches", value_set=[True], row_condition="check_drift", condition_parser="spark"
            ),
        )
    ]


#: The change checks as one Spark aggregation counts them over gold's probe of a batch's changes
#: (:func:`pipelines.gold.decide.probe_columns`), exactly as GE does: check → (rows it counts, rows
#: unexpected). GE skips a pair with a missing value, and its row condition and the value set leave NULL
#: out (``run_checks`` runs GE only when one is unexpected).
CHANGE_COUNTS = {
    "cdc_seq_not_backwards": ("true", "seq IS NOT NULL AND prev_seq IS NOT NULL AND NOT (seq >= prev_seq)"),
    "cdc_source_drift": ("coalesce(check_drift, false)", "coalesce(check_drift AND NOT row_matches, false)"),
}


def freshness() -> list[Check]:
    """On the :func:`freshness_frame`: each source's lag is within its threshold."""
    E = great_expectations().expectations
    return [
        (
            "cdc_freshness",
            "warn",
            E.ExpectColumnPairValuesAToBeGreaterThanB(
                column_A="threshold_seconds", column_B="lag_seconds", or_equal=True
            ),
        )
    ]


def reconcile() -> list[Check]:
    """On the :func:`reconcile_frame`: the mirror has the full load's row count and checksum."""
    E = great_expectations().expectations
    return [
        (
            "cdc_reconcile_count",
            "warn",
            E.ExpectColumnPairValuesToBeEqual(column_A="mirror_rows", column_B="snapshot_rows"),
        ),
        (
            "cdc_reconcile_checksum",
            "warn",
            E.ExpectColumnPairValuesToBeEqual(column_A="mirror_checksum", column_B="snapshot_checksum"),
        ),
    ]


# ---------------------------------------------------------------- the frames the checks read


def threshold_seconds(threshold: Any, source: str | None) -> float:
    """A source's freshness threshold: one duration, or {source: duration, "*": default}; a source without
    one has the default of ``sources[].freshness`` (what ``lakecdc status`` judges it by too)."""
    if isinstance(threshold, Mapping):
        value = threshold.get(source) if source in threshold else threshold.get("*")
    else:
        value = threshold
    return freshness_seconds(value)


def freshness_frame(
    spark: SparkSession, mirror_df: DataFrame, heartbeats_df: DataFrame | None, threshold: Any, now: _dt.datetime
) -> DataFrame | None:
    """One row per source: when it was last seen (event time or heartbeat), its lag and threshold.
    None when there is nothing to measure."""
    from pyspark.sql import functions as F

    parts = []
    if "_event_time" in mirror_df.columns:
        src = F.col("_source") if "_source" in mirror_df.columns else F.lit(None).cast("string")
        parts.append(
            mirror_df.select(
                src.alias("source"), F.col("_event_time").cast("timestamp").alias("t"), F.lit(True).alias("own")
            )
        )
    if heartbeats_df is not None:
        parts.append(
            heartbeats_df.select(
                F.col("source"), F.col("event_time").cast("timestamp").alias("t"), F.lit(False).alias("own")
            )
        )
    if not parts:
        return None
    allp = parts[0]
    for p in parts[1:]:
        allp = allp.unionByName(p)
    last = allp.groupBy("source").agg(F.max("t").alias("last_seen"), F.max("own").alias("own")).collect()
    # a mirror is judged on its own sources: the heartbeats of a source none of its rows came from are not its own
    own_only = "_source" in mirror_df.columns and "_event_time" in mirror_df.columns
    last = [r for r in last if r["last_seen"] is not None and (r["own"] or not own_only)]
    if not last:
        log.info("quality: no event time or heartbeat to measure freshness")
        return None
    if now.tzinfo is None:
        now = now.replace(tzinfo=_dt.timezone.utc)
    data = []
    for r in last:
        seen = r["last_seen"]
        seen_utc = seen.astimezone(_dt.timezone.utc) if seen.tzinfo else seen.astimezone().astimezone(_dt.timezone.utc)
        data.append(
            (
                r["source"],
                seen_utc.isoformat(),
                float((now - seen_utc).total_seconds()),
                float(threshold_seconds(threshold, r["source"])),
            )
        )
    return spark.createDataFrame(data, "source STRING, last_seen STRING, lag_seconds DOUBLE, threshold_seconds DOUBLE")


def row_hash_sql(cols: Sequence[str]) -> str:
    """SQL of an order-independent row hash (sum it for a table checksum)."""
    fields = ", ".join(f"{lit(c)}, {q(c)}" for c in sorted(cols))
    return f"CAST(xxhash64(to_json(named_struct({fields}))) AS DECIMAL(38, 0))"


def reconcile_frame(spark: SparkSession, mirror: MirrorFrames, snapshot_df: DataFrame) -> DataFrame:
    """One row: mirror vs full-load row count and sum of xxhash64 over the canonical typed row."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    mirror_df = mirror.after
    cols = [c for c in mirror_df.columns if c not in SYSTEM_COLUMNS]  # lineage, soft-delete marks
    snap = snapshot_df.where("op = 'SNAPSHOT'").selectExpr(
        *[f"{typed_column('after', c, mirror.columns.get(c))} AS {q(c)}" for c in cols],
        "concat_ws('|', seq, queue_pos, lpad(CAST(change_index AS STRING), 6, '0')) AS _ord",
    )
    w = Window.partitionBy(*[F.col(q(k)) for k in mirror.key_cols]).orderBy(F.col("_ord").desc())
    snap = snap.withColumn("_rn", F.row_number().over(w)).where("_rn = 1")  # latest per key
    # cast the snapshot to the mirror's types so both sides hash the same canonical value
    types = {f.name: f.dataType.simpleString() for f in mirror_df.schema.fields}
    snap = snap.select(*[F.col(q(c)).cast(types[c]).alias(c) for c in cols])
    hs = row_hash_sql(cols)
    m = (
        mirror_df.select(*[F.col(q(c)) for c in cols])
        .agg(F.count(F.lit(1)).alias("n"), F.expr(f"sum({hs})").alias("h"))
        .first()
    )
    s = snap.agg(F.count(F.lit(1)).alias("n"), F.expr(f"sum({hs})").alias("h")).first()
    return spark.createDataFrame(
        [(int(m["n"]), int(s["n"]), str(m["h"] or 0), str(s["h"] or 0))],
        "mirror_rows BIGINT, snapshot_rows BIGINT, mirror_checksum STRING, snapshot_checksum STRING",
    )


# ---------------------------------------------------------------- the entry point


class _Suites:
    """Runs the checks' suites of one table and batch, keeping every row for a :class:`QualityFailure`."""

    def __init__(self, table: str, run_id: str, batch_id: int, fail_on: Iterable[str]) -> None:
        self.table, self.run_id, self.batch_id, self.fail_on = table, run_id, batch_id, tuple(fail_on)
        self.rows: list[dict] = []

    def run(
        self,
        suite: str,
        df: DataFrame,
        items: list[Check],
        index_columns: Sequence[str] = (),
        counted: Mapping[str, tuple[str, str]] | None = None,
    ) -> None:
        try:
            self.rows.extend(
                run_checks(
                    self.table,
                    suite,
                    df,
                    items,
                    run_id=self.run_id,
                    batch_id=self.batch_id,
                    index_columns=index_columns,
                    fail_on=self.fail_on,
                    counted=counted,
                )
            )
        except QualityFailure as exc:
            raise QualityFailure(str(exc), self.rows + exc.results) from None


def cdc_checks(
    spark: SparkSession,
    table: str,
    mirror_df: DataFrame,
    key_cols: Sequence[str],
    *,
    run_id: str = "",
    batch_id: int = 0,
    columns: Mapping[str, str | None] | None = None,
    mirror_props: Mapping[str, str] | None = None,
    heartbeats_df: DataFrame | None = None,
    freshness_threshold: Any = DEFAULT_FRESHNESS,
    now: _dt.datetime | None = None,
    snapshot_df: DataFrame | None = None,
    checks: Iterable[str] = CDC_CHECKS,
    fail_on: Iterable[str] = (),
) -> list[dict]:
    """The checks of a whole mirror (``lakecdc dq check``); returns dq_results rows.

    mirror_df          the mirror (gold columns + lineage ``_seq``, ``_source``, ``_event_time``); key not
                       NULL, key unique, freshness, reconciliation run on it.
    key_cols           the mirror's key columns.
    columns            column → source type (gold's ``columns``); default: those that mirror_props
                       (the mirror's table properties) record for mirror_df's columns.
    heartbeats_df      silver heartbeats (``source``, ``event_time``) – a heartbeat counts as progress.
    freshness_threshold  timedelta / seconds / "1 hour", or {source: ..., "*": default}; default 1 hour.
    snapshot_df        the SNAPSHOT changes of a full load (silver's canonical changes): reconciles row
                       count and checksum; skipped when None.
    checks             which of :data:`~pipelines.quality.rules.CDC_CHECKS` to run (default all).
    fail_on            check names (``cdc_key_unique``, ...) that raise :class:`QualityFailure`
                       instead of warning.

    Result names: cdc_key_not_null, cdc_key_unique, cdc_freshness, cdc_reconcile_count,
    cdc_reconcile_checksum (the change checks, cdc_seq_not_backwards and cdc_source_drift, are gold's:
    :func:`change_check_rows`).
    """
    wanted = set(checks)
    mirror = MirrorFrames(
        after=mirror_df,
        key_cols=tuple(key_cols),
        columns=dict(columns) if columns is not None else source_types(mirror_df, mirror_props),
    )
    suites = _Suites(table, run_id, batch_id, fail_on)

    # the mirror after the merge: key columns never NULL, key unique
    items = (key_not_null(mirror.key_cols) if "key_not_null" in wanted else []) + (
        key_unique(mirror.key_cols) if "key_unique" in wanted else []
    )
    if items:  # GE validates the mirror on a cache of it (run_checks)
        suites.run("cdc_mirror", mirror.after, items, index_columns=[*mirror.key_cols, "_seq"])

    # newest event time or heartbeat per source vs now
    if "freshness" in wanted:
        fresh = freshness_frame(spark, mirror.after, heartbeats_df, freshness_threshold, now or utc_now())
        if fresh is not None:
            suites.run("cdc_freshness", fresh, freshness(), index_columns=["source", "last_seen"])

    # reconciliation after a full load
    if "reconcile" in wanted and snapshot_df is not None and mirror.key_cols:
        suites.run("cdc_reconcile", reconcile_frame(spark, mirror, snapshot_df), reconcile())
    return suites.rows
