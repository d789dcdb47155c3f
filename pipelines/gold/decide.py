"""The batch pass: every decision of a micro-batch, for all of its tables at once.

What used to cost Spark jobs per table (a quarantine probe, a staleness join against the mirror and its
tombstones, counts, the change checks) is one pass over the batch, against key state shared by all
mirrors (:mod:`pipelines.gold.state`) and each table's facts as lookups (:mod:`pipelines.gold.lookups`):

1. :func:`check_changes` – each change's ``reason`` to go to quarantine (a refused table, a schema change
   a ``quarantine`` policy holds back, a value that does not fit its column, a key column missing or NULL,
   an invalid value under ``invalid_values: quarantine``), NULL when it can apply;
2. :func:`keyed_changes` – for a table with a key: the key ``k`` each change writes (canonical text, so
   ``01`` and ``1`` of an INT are one key), its key columns ``kimg``, and the DELETE of the old key of an
   UPDATE that moves its row (``moved``, just before the UPDATE);
3. :func:`with_key_state` – the key's state before the batch, and ``stale``: older than the sequence key
   state holds for the key (an equal sequence re-applies: that is what makes a retry idempotent), or than
   the mirror's TRUNCATE;
4. :func:`table_counts` – per source table, one aggregation: quarantined, applied, stale, and the counts of
   the change checks (a sequence older than the mirror's row; an UPDATE/DELETE whose before-image is not
   the mirror's row: drift), so a batch that passes runs no Great Expectations;
5. :func:`fold_inputs` and :func:`key_state_rows` – the fresh changes as the fold reads them, and the key
   state they leave (one row per key: its last sequence, live or deleted, its values' hashes).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from pipelines.config import PipelineConfig
from pipelines.gold.fold import TOMB_FIELDS
from pipelines.gold.lookups import MIRROR, Lookups, map_sql
from pipelines.gold.order import ORD, delete_first, ord_sql
from pipelines.gold.plan import TablePlan
from pipelines.gold.profile import SOURCE_TABLE
from pipelines.gold.soft import is_soft
from pipelines.sql import EMPTY_MAP, PARTIAL_SQL, ROW_AFTER_SQL, ROW_IMAGE_SQL, lit

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

#: A change's columns the fold, the pending table and the history read (:data:`pipelines.gold.state.PENDING_DDL`).
FOLD_FIELDS = ("op", "seq", "queue_pos", "event_time", "source", "format", "bronze_position", "ingest_time")
#: A keyed change's columns the steps after :func:`keyed_changes` read (staleness, the change checks, the counts,
#: the fold): every interpreted projection copies each column it carries, so the others (the stated types, the
#: invalid values, the names, the row rules' columns) stay behind in the checked changes.
KEYED_FIELDS = (SOURCE_TABLE, MIRROR, ORD, "reason", "before", "after", "changed", "change_index", *FOLD_FIELDS)
#: The row a keyed change writes, as :func:`keyed_changes` computes it once to read its keys from.
WRITTEN = "_written"
#: The seed of Spark's ``xxhash64``, which is what it returns for NULL: a column never written hashes so.
NULL_HASH = 42


# ---------------------------------------------------------------- 1. quarantine reasons


def check_changes(batch: DataFrame, plans: Mapping[str, TablePlan], lookups: Lookups) -> DataFrame:
    """Each change with ``_mirror`` and ``reason`` (NULL: it can apply). Older images of a renamed
    column read the new name first (``evolve`` of a RENAME)."""
    from pyspark.sql import functions as F

    frame = _renamed(batch.withColumn(MIRROR, F.expr(lookups.mirror_sql)), plans)
    keys, row = lookups.key_sql(), f"coalesce({ROW_IMAGE_SQL}, {EMPTY_MAP})"
    found = {  # the first offending entry of each kind, once per change
        f"_misfit_{image}": f"try_element_at(filter(map_entries(coalesce({image}, {EMPTY_MAP})), "
        f"e -> e.value IS NOT NULL AND NOT ({lookups.fits('e.value', lookups.conversion_sql('e.key'))})), 1)"
        for image in ("after", "before")
    }
    found["_key_missing"] = (
        f"try_element_at(filter({keys}, kc -> NOT (map_contains_key(coalesce(after, {EMPTY_MAP}), kc) "
        f"OR map_contains_key(coalesce(before, {EMPTY_MAP}), kc))), 1)"
    )
    found["_key_null"] = f"try_element_at(filter({keys}, kc -> map_contains_key({row}, kc) AND {row}[kc] IS NULL), 1)"
    frame = frame.withColumns({name: F.expr(sql) for name, sql in found.items()})
    checks = []
    refused = {name: lit(p.conflict) for name, p in plans.items() if p.conflict}
    if refused:
        checks.append(f"element_at({map_sql(refused, 'string')}, {SOURCE_TABLE})")
    for plan in plans.values():
        for predicate, reason in plan.shape.rejects if plan.shape else ():
            checks.append(f"CASE WHEN {MIRROR} = {lit(plan.mirror)} AND ({predicate}) THEN {lit(reason)} END")
    for image in ("after", "before"):
        misfit = f"_misfit_{image}"
        checks.append(
            f"CASE WHEN {misfit} IS NOT NULL THEN concat('value ', substr({misfit}.value, 1, 80), ' of column ', "
            f"{misfit}.key, ' does not fit ', {lookups.target_sql(f'{misfit}.key')}) END"
        )
    checks.append(
        "CASE WHEN op != 'TRUNCATE' AND _key_missing IS NOT NULL THEN "
        "concat('key column ', _key_missing, ' is missing from the change') END"
    )
    checks.append(
        "CASE WHEN op != 'TRUNCATE' AND _key_null IS NOT NULL THEN "
        "concat('key column ', _key_null, ' is NULL (a table with a key needs one on every row)') END"
    )
    strict = [lit(p.mirror) for p in plans.values() if p.shape and p.invalid_policy == "quarantine"]
    if strict:
        checks.append(
            f"CASE WHEN {MIRROR} IN ({', '.join(strict)}) AND invalid IS NOT NULL AND size(invalid) > 0 THEN "
            "concat('values the source holds as invalid (column: raw value): ', substr(to_json(invalid), 1, 400), "
            "' (invalid_values: quarantine)') END"
        )
    return frame.withColumn("reason", F.expr(f"coalesce({', '.join(checks)})")).drop(*found)


def _renamed(frame: DataFrame, plans: Mapping[str, TablePlan]) -> DataFrame:
    """Images of tables whose mirror renamed a column read the new name (``evolve`` of a RENAME)."""
    from pyspark.sql import functions as F

    cases = [
        f"WHEN {MIRROR} = {lit(p.mirror)} AND k = {lit(old)} THEN {lit(new)}"
        for p in plans.values()
        if p.shape
        for old, new in p.shape.renames.items()
    ]
    if not cases:
        return frame
    case = f"CASE {' '.join(cases)} ELSE k END"
    for image in ("before", "after", "col_types"):
        frame = frame.withColumn(image, F.expr(f"transform_keys({image}, (k, v) -> {case})"))
    return frame.withColumn("changed", F.expr(f"transform(changed, k -> {case})"))


# ---------------------------------------------------------------- 2. keys


def keyed_changes(good: DataFrame, lookups: Lookups) -> DataFrame:
    """The changes of tables with a key (TRUNCATE aside) with ``k``, ``kimg`` and ``moved``, and the DELETE of
    the old key of every UPDATE that moves its row to a new key (``moved`` true, ordered just before it), with
    the columns of :data:`KEYED_FIELDS`.

    Each change's keys are computed once: the row it writes (``written``) in one projection, its keys from it in
    the next (Spark does not collapse a projection whose expression the next reads twice), and the moved key's
    DELETE is a second row of the same change (an ``explode``), not a second pass over the batch that would
    compute every key again."""
    from pyspark.sql import functions as F

    keys = lookups.key_sql()
    written = (
        f"CASE WHEN op = 'UPDATE' THEN map_concat(coalesce(before, {EMPTY_MAP}), coalesce(after, {EMPTY_MAP})) "
        f"ELSE {ROW_IMAGE_SQL} END"
    )
    carried = f"map_contains_key(coalesce(before, {EMPTY_MAP}), kc)"
    has_old = f"op = 'UPDATE' AND size({keys}) > 0 AND forall({keys}, kc -> {carried})"

    def key_columns(image: str) -> str:
        return f"map_filter({image}, (c, v) -> array_contains({keys}, c))"

    columns = [c for c in KEYED_FIELDS if c in good.columns]
    rows = (
        good.where(f"op != 'TRUNCATE' AND size({keys}) > 0")
        .select("*", F.expr(written).alias(WRITTEN))
        .select(
            *columns,
            F.expr(lookups.key_text(WRITTEN)).alias("k"),
            F.expr(key_columns(WRITTEN)).alias("kimg"),
            F.expr(f"CASE WHEN {has_old} THEN {lookups.key_text('before')} END").alias("old_k"),
            F.expr(f"CASE WHEN {has_old} THEN {key_columns('before')} END").alias("old_kimg"),
        )
    )
    moves = "old_k IS NOT NULL AND NOT (old_k <=> k)"
    both = rows.select("*", F.explode(F.expr(f"CASE WHEN {moves} THEN array(true, false) ELSE array(false) END"))
                       .alias("moved"))  # fmt: skip
    return both.withColumns(
        {
            "k": F.when(F.col("moved"), F.col("old_k")).otherwise(F.col("k")),
            "kimg": F.when(F.col("moved"), F.col("old_kimg")).otherwise(F.col("kimg")),
            "op": F.when(F.col("moved"), F.lit("DELETE")).otherwise(F.col("op")),
            ORD: F.when(F.col("moved"), delete_first()).otherwise(F.col(ORD)),
        }
    )


# ---------------------------------------------------------------- 3. staleness


def with_key_state(rows: DataFrame, state: DataFrame, plans: Mapping[str, TablePlan], small: bool = False) -> DataFrame:
    """Each keyed change with its key's state before the batch (``s_seq``, ``s_live``, ``s_vh``; NULL where
    none counts) and ``stale``. A key state row counts unless the mirror was created after it (a mirror
    dropped by hand and made again) or the mirror's TRUNCATE superseded it. ``small``: the batch is small
    enough that its keys' state is joined by broadcast (no shuffle of the batch)."""
    from pyspark.sql import functions as F

    since = {p.mirror: str(p.since) for p in plans.values() if p.keyed and p.since > 0}
    truncated = {p.mirror: lit(t) for p in plans.values() if p.keyed and (t := truncated_seq(p))}
    valid = ["true"]
    if since:
        valid.append(f"s_batch >= coalesce(element_at({map_sql(since, 'bigint')}, mirror), -1)")
    if truncated:
        valid.append(f"NOT coalesce(s_seq <= element_at({map_sql(truncated, 'string')}, mirror), false)")
    counted = state.where(" AND ".join(valid)).withColumnRenamed("mirror", MIRROR)
    joined = rows.join(F.broadcast(counted) if small else counted, [MIRROR, "k"], "left")
    truncate_stale = f"seq < coalesce(element_at({map_sql(truncated, 'string')}, {MIRROR}), '')" if truncated else ""
    stale = " OR ".join(filter(None, ("seq < s_seq", truncate_stale, _superseded(plans))))
    buried = _buried(plans, f"NOT coalesce({truncate_stale}, false)" if truncate_stale else "true")
    tomb = "named_struct(" + ", ".join(f"'{f}', s_{f}" for f in TOMB_FIELDS) + ")"  # fold.TOMB_DDL's fields
    return (
        joined.withColumn("buried", F.expr(buried))
        .withColumn("stale", F.expr(f"NOT buried AND coalesce({stale}, false)"))
        .withColumn("tomb", F.expr(f"CASE WHEN buried THEN {tomb} END"))
        .withColumn("prev_live", F.coalesce("s_live", F.lit(False)))
    )


def _buried(plans: Mapping[str, TablePlan], after_truncate: str) -> str:
    """SQL: the change is an image (not a DELETE) of a ``deletes: soft`` key, older than the key's tombstone
    but newer than the image its deleted row holds: it came late, across a batch boundary, and in sequence
    order it came before the DELETE, so the row takes its values and stays deleted (one batch of the same
    changes marks the row with them). It is applied, not stale. A tombstone an earlier version wrote
    (``s_img_seq`` NULL) cannot tell, and a mirror with history keeps its versions: stale there, as before."""
    soft = [lit(p.mirror) for p in plans.values() if p.keyed and is_soft(p.tc) and not p.history]
    if not soft:
        return "false"
    return (
        f"coalesce({MIRROR} IN ({', '.join(soft)}) AND op != 'DELETE' AND NOT s_live AND seq < s_seq "
        f"AND seq > s_img_seq AND {after_truncate}, false)"
    )


def truncated_seq(plan: TablePlan) -> str:
    """The TRUNCATE sequence a table's changes must be newer than: the mirror's, or this batch's last (a soft
    mirror's: the mirror's; its TRUNCATEs mark what they cover after the write, :mod:`pipelines.gold.truncate`)."""
    if plan.keyed and not is_soft(plan.tc):
        return max(plan.truncated_seq, plan.profile.truncate_seq or "")
    return plan.truncated_seq


def _superseded(plans: Mapping[str, TablePlan]) -> str:
    """SQL: the change comes before its table's TRUNCATE in this batch."""
    parts = [
        f"({MIRROR} = {lit(p.mirror)} AND {ORD} <= {ord_sql(p.profile.truncate_ord)})"
        for p in plans.values()
        if p.truncates and p.keyed and not is_soft(p.tc)  # soft: applied, then marked by the TRUNCATE
    ]
    return " OR ".join(parts)


# ---------------------------------------------------------------- 4. counts and the change checks


def probe_columns(lookups: Lookups) -> dict[str, str]:
    """SQL of the change checks' columns on a keyed change with its key state (see ``CHANGE_COUNTS`` in
    :mod:`pipelines.quality.checks`): ``probe`` (the row stands for a change's expected row: an
    UPDATE/DELETE's before-image key, any other change's own), ``prev_seq`` (the mirror's sequence for that
    key), ``check_drift`` and ``row_matches`` (an UPDATE/DELETE finds the row its before-image describes)."""
    keys = lookups.key_sql()
    data = f"{lookups.conversion_sql('c')} IS NOT NULL AND NOT array_contains({keys}, c)"
    before_hashes = lookups.value_hashes(f"map_filter(before, (c, v) -> {data})")
    differs = f"map_keys(map_filter({before_hashes}, (c, h) -> NOT (h <=> coalesce(s_vh[c], {NULL_HASH}))))"
    return {
        "probe": "moved OR old_k IS NULL OR old_k <=> k",
        "prev_seq": "CASE WHEN s_live THEN s_seq END",
        "diff_cols": f"CASE WHEN s_live THEN array_join({differs}, ',') END",
        "row_matches": "coalesce(s_live, false) AND diff_cols = ''",
        "drift": "CASE WHEN NOT coalesce(s_live, false) THEN 'row missing' "
        "WHEN diff_cols != '' THEN concat('differs: ', diff_cols) END",
    }


def table_counts(decided: DataFrame, checks: bool) -> DataFrame:
    """One row per source table: ``quarantined``, ``applied``, ``stale`` (the DELETEs of moved keys are no
    changes of their own), ``truncates`` (TRUNCATEs), ``fresh`` and ``oldest`` (the changes to write, moved
    keys' DELETEs included, and the oldest one's ingest time in microseconds), ``partial`` (partial images),
    ``newest`` (the newest source commit time of the changes applied, microseconds), and with ``checks`` the change
    checks' counts: ``seq_n``/``seq_u`` (changes compared, sequences older than the mirror's) and
    ``drift_n``/``drift_u`` (UPDATE/DELETEs compared, before-images that are not the mirror's row)."""
    from pyspark.sql import functions as F

    own = "reason IS NULL AND NOT coalesce(moved, false) AND NOT coalesce(truncate, false)"
    aggs = [
        F.count_if(F.expr("reason IS NOT NULL")).alias("quarantined"),
        F.count_if(F.expr("coalesce(truncate, false)")).alias("truncates"),
        F.count_if(F.expr(f"{own} AND stale")).alias("stale"),
        F.count_if(F.expr(f"{own} AND NOT stale")).alias("applied"),
        F.count_if(F.expr("reason IS NULL AND NOT stale")).alias("fresh"),
        F.count_if(F.expr(f"reason IS NULL AND coalesce({PARTIAL_SQL}, false)")).alias("partial"),
        F.min(F.when(F.expr("reason IS NULL AND NOT stale"), F.unix_micros("ingest_time"))).alias("oldest"),
        F.max(F.when(F.expr(f"{own} AND NOT stale"), F.unix_micros(F.col("event_time").cast("timestamp")))).alias(
            "newest"
        ),
    ]
    if checks:
        aggs += [
            F.count_if(F.expr("probe")).alias("seq_n"),
            F.count_if(F.expr("probe AND seq IS NOT NULL AND prev_seq IS NOT NULL AND NOT (seq >= prev_seq)")).alias(
                "seq_u"
            ),
            F.count_if(F.expr("coalesce(check_drift, false)")).alias("drift_n"),
            F.count_if(F.expr("coalesce(check_drift AND NOT row_matches, false)")).alias("drift_u"),
        ]
    return decided.groupBy(SOURCE_TABLE).agg(*aggs)


def with_change_checks(rows: DataFrame, lookups: Lookups) -> DataFrame:
    """The change checks' columns (:func:`probe_columns`) and ``check_drift``: an UPDATE/DELETE not applied
    yet (a retried batch must not look like drift) and not stale (an UPDATE older than its key's DELETE finds
    no row, and that is no drift), the first of its expected key in the batch."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    for name, sql in probe_columns(lookups).items():
        rows = rows.withColumn(name, F.expr(sql))
    # a stale change is older than what its key holds (a live row's or a tombstone's sequence): its before-image
    # describes a row the mirror no longer has, so it is compared with nothing
    compared = "probe AND NOT buried AND NOT stale"
    expected = F.when(F.expr(compared), F.col("k"))
    first = F.row_number().over(Window.partitionBy(MIRROR, expected).orderBy(ORD)) == 1
    return rows.withColumn(
        "check_drift",
        F.expr(f"{compared} AND op IN ('UPDATE', 'DELETE') AND (prev_seq IS NULL OR seq > prev_seq)") & first,
    )


# ---------------------------------------------------------------- 5. what the fold reads, and the key state it leaves


def ignore_nulls_sql(plans: Mapping[str, TablePlan], cfg: PipelineConfig) -> str:
    """SQL: the change is an UPDATE whose NULLs mean "unchanged" (``ignore_null_updates``: its table's
    setting, else its source's), as AUTO CDC's ``ignore_null_updates``."""
    tables = {p.mirror: str(p.tc.ignore_null_updates).lower() for p in plans.values() if p.keyed and p.tc
              and p.tc.ignore_null_updates is not None}  # fmt: skip
    sources = [lit(s.name) for s in cfg.sources if s.ignore_null_updates]
    if not tables and not sources:
        return "false"
    by_source = f"source IN ({', '.join(sources)})" if sources else "false"
    by_table = " ".join(f"WHEN {lit(m)} THEN {v}" for m, v in tables.items())
    return f"(op = 'UPDATE' AND {f'CASE {MIRROR} {by_table} ELSE {by_source} END' if tables else by_source})"


def fold_inputs(rows: DataFrame, batch_id: int, ignore_nulls: str = "false") -> DataFrame:
    """Fresh keyed changes as the fold and the pending table read them (:data:`~pipelines.gold.state.PENDING_DDL`).
    An UPDATE whose NULLs mean "unchanged" (``ignore_nulls``, :func:`ignore_nulls_sql`) carries only its
    other columns: a partial image."""
    from pyspark.sql import functions as F

    after = (
        f"CASE WHEN {ignore_nulls} THEN map_filter({ROW_AFTER_SQL}, (c, v) -> v IS NOT NULL) ELSE {ROW_AFTER_SQL} END"
    )
    return rows.select(
        F.col(MIRROR).alias("mirror"),
        F.lit(batch_id).cast("bigint").alias("batch"),
        "k",
        "kimg",
        "prev_live",
        ORD,
        F.expr(after).alias("after"),
        F.expr(f"coalesce({PARTIAL_SQL}, false) OR {ignore_nulls}").alias("partial"),
        F.expr("CASE WHEN s_live THEN s_vh END").alias("held"),
        *[F.col(c).cast("timestamp").alias(c) if c == "event_time" else c for c in FOLD_FIELDS],
        "tomb",
        F.expr("CASE WHEN s_live THEN s_seq ELSE s_img_seq END").alias("prior_img"),
    )


def key_state_rows(folded: DataFrame, lookups: Lookups, batch_id: int) -> DataFrame:
    """The key state the batch's fresh changes leave, one row per key (``folded``: their fold,
    :func:`~pipelines.gold.fold.fold_per_key`, with ``held``: the value hashes of a key live before): the last
    change's sequence, live or deleted, and its values' hashes (a partial image's columns over what the key
    held)."""
    from pyspark.sql import functions as F

    hashes = lookups.value_hashes("st.img", mirror_sql="mirror")

    def last(field: str) -> Column:  # a buried key keeps its tombstone's
        return F.expr(f"CASE WHEN buried THEN tomb.{field} ELSE last.{field} END").alias(field)

    return folded.select(
        "mirror",
        "k",
        last("seq"),
        F.col("st.live").alias("live"),
        F.expr(
            f"CASE WHEN NOT st.live THEN NULL WHEN st.full THEN {hashes} "
            f"ELSE map_concat(coalesce(held, cast(map() AS map<string,bigint>)), {hashes}) END"
        ).alias("vh"),
        F.lit(batch_id).cast("bigint").alias("batch"),
        F.current_timestamp().alias("written"),
        last("queue_pos"),
        last("event_time"),
        F.expr("CASE WHEN NOT st.live THEN coalesce(img_seq, prior_img, '') END").alias("img_seq"),
    )
