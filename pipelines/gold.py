"""Gold: apply each micro-batch of silver changes to one mirror Delta table per source table.

For every table a batch touches:

1. **Shape** – the mirror's columns are the union of what messages carry, typed by
   configuration first, else by the types messages state (:func:`pipelines.values.spark_type`).
   New columns are added (older rows read NULL); each column's COMMENT keeps its source type.
2. **Convert** – canonical text becomes the Delta type. A value that does not fit
   (overflow, too many decimal places, sub-microsecond time, bad Base64) sends its change to
   quarantine with the column and value named; it never becomes a silent NULL.
3. **Order** – by the format's sequence, then the queue position, then the position
   inside the message. A change older than what the mirror or its tombstones hold for
   that key is stale and skipped (equal sequence re-applies: that is what makes a
   retried batch idempotent).
4. **Fold** – per key, changes are folded in order: INSERT/SNAPSHOT and full-image
   UPDATEs replace the row, a partial UPDATE (``changed`` set: SharePlex, Mongo ``$set``)
   overlays only the columns it carries (a column carried as NULL becomes NULL), DELETE
   removes it. An UPDATE whose before-image has another key also deletes the old key.
5. **Merge** – one MERGE into the mirror (live rows only) and one into its tombstones,
   each stamped with Delta ``txnAppId``/``txnVersion`` so a retried batch is applied once.
"""
from __future__ import annotations

import logging
from contextlib import contextmanager
from dataclasses import dataclass, field

from pipelines.config import PipelineConfig, TableConfig
from pipelines.values import family, parse_type, spark_type
from pipelines.warehouse import TableRef, Warehouse, quote_ident

log = logging.getLogger(__name__)

LINEAGE_DDL = (
    ("_seq", "STRING"), ("_queue_pos", "STRING"), ("_op", "STRING"), ("_event_time", "TIMESTAMP"),
    ("_source", "STRING"), ("_format", "STRING"), ("_position", "STRING"), ("_ingest_time", "TIMESTAMP"),
)
LINEAGE_COLUMNS = tuple(name for name, _ in LINEAGE_DDL)
SOURCE_TYPE_PREFIX = "source type: "
ORD_SEPARATOR = "\u0001"
TRUNCATED_SEQ_PROPERTY = "lakecdc.truncated_seq"


@dataclass
class GoldStats:
    applied: int = 0
    stale: int = 0
    quarantined: int = 0
    tables: set[str] = field(default_factory=set)

    def add(self, other: "GoldStats") -> None:
        self.applied += other.applied
        self.stale += other.stale
        self.quarantined += other.quarantined
        self.tables |= other.tables


def q(name: str) -> str:
    return quote_ident(name)


# ---------------------------------------------------------------- value conversion


def convert_expr(text_col: str, source_type: str | None) -> str:
    """SQL that turns canonical text into the mirror type, NULL where it does not fit."""
    target = spark_type(source_type)
    if target == "STRING":
        return text_col
    if target == "BINARY":
        return f"try_to_binary({text_col}, 'base64')"
    if target in ("TIMESTAMP", "TIMESTAMP_NTZ"):
        return f"CASE WHEN {text_col} RLIKE '\\\\.[0-9]{{7,}}' THEN NULL ELSE try_cast({text_col} AS {target}) END"
    if target.startswith("DECIMAL"):
        _, args, _ = parse_type(source_type or "")
        p, s = (list(args) + [0])[:2] if args else (20, 0)
        if family(source_type) == "uint64":
            p, s = 20, 0
        whole = p - s
        int_part = f"(0|[1-9][0-9]{{0,{whole - 1}}})" if whole > 0 else "0?"
        frac_part = f"(\\\\.[0-9]{{0,{s}}}0*)?" if s > 0 else "(\\\\.0*)?"
        return (f"CASE WHEN {text_col} RLIKE '^-?{int_part}{frac_part}$' "
                f"THEN try_cast({text_col} AS {target}) ELSE NULL END")
    return f"try_cast({text_col} AS {target})"


def export_expr(column: str, data_type: str) -> str:
    """SQL that renders a mirror value as canonical text for ``lakecdc export``."""
    c = q(column)
    t = data_type.lower()
    if t == "binary":
        return f"base64({c})"
    if t == "timestamp":
        return f"concat(replace(CAST({c} AS STRING), ' ', 'T'), 'Z')"
    if t == "timestamp_ntz":
        return f"replace(CAST({c} AS STRING), ' ', 'T')"
    return f"CAST({c} AS STRING)"


# ---------------------------------------------------------------- mirror shape


def table_config(cfg: PipelineConfig, source_table: str) -> TableConfig | None:
    for name, tc in cfg.tables.items():
        if name.lower() == source_table.lower():
            return tc
    return None


def mirror_schema(spark, ref: TableRef) -> dict[str, tuple[str, str | None]]:
    """Existing mirror columns: name → (Spark type, source type from the column comment)."""
    if not ref.exists(spark):
        return {}
    out = {}
    for f in ref.read(spark).schema.fields:
        comment = f.metadata.get("comment", "")
        src = comment[len(SOURCE_TYPE_PREFIX):] if comment.startswith(SOURCE_TYPE_PREFIX) else None
        out[f.name] = (f.dataType.simpleString(), src)
    return out


def table_properties(spark, ref: TableRef) -> dict[str, str]:
    rows = spark.sql(f"SHOW TBLPROPERTIES {ref.sql}").collect()
    return {r["key"]: r["value"] for r in rows}


def _column_ddl(name: str, source_type: str | None) -> str:
    comment = (SOURCE_TYPE_PREFIX + (source_type or "")).replace("\\", "\\\\").replace("'", "\\'")
    return f"{q(name)} {spark_type(source_type)} COMMENT '{comment}'"


def ensure_mirror(spark, ref: TableRef, tomb: TableRef, source_table: str, mirror_name: str, key: tuple[str, ...],
                  columns: dict[str, str | None]) -> dict[str, str | None]:
    """Create the mirror (and its tombstones) or add the new columns; returns column → source type."""
    existing = mirror_schema(spark, ref)
    if not existing:
        cols = [_column_ddl(c, t) for c, t in columns.items()] + [f"{n} {t}" for n, t in LINEAGE_DDL]
        props = {"lakecdc.source_table": source_table, "lakecdc.mirror_name": mirror_name, "lakecdc.key": ",".join(key),
                 "delta.enableChangeDataFeed": "true"}
        prop_sql = ", ".join(f"'{k}' = '{_sql_str(v)}'" for k, v in props.items())
        spark.sql(f"CREATE TABLE IF NOT EXISTS {ref.sql} ({', '.join(cols)}) USING DELTA TBLPROPERTIES ({prop_sql})")
        key_cols = [_column_ddl(c, columns.get(c)) for c in key]
        spark.sql(f"CREATE TABLE IF NOT EXISTS {tomb.sql} ({', '.join(key_cols)}, _seq STRING, _queue_pos STRING, "
                  f"_event_time TIMESTAMP) USING DELTA")
        return dict(columns)
    known = {name: src for name, (_t, src) in existing.items() if name not in LINEAGE_COLUMNS}
    new = {c: t for c, t in columns.items() if c not in existing}
    if new:
        log.info("gold: %s gains columns %s", source_table, ", ".join(new))
        spark.sql(f"ALTER TABLE {ref.sql} ADD COLUMNS ({', '.join(_column_ddl(c, t) for c, t in new.items())})")
        known.update(new)
    return known


def _sql_str(value: str) -> str:
    return value.replace("\\", "\\\\").replace("'", "\\'")


# ---------------------------------------------------------------- applying one table


def apply_table(spark, changes, source_table: str, cfg: PipelineConfig, wh: Warehouse, app_id: str,
                batch_id: int) -> GoldStats:
    from pyspark.sql import functions as F

    from pipelines.silver import append_idempotent, quarantine_frame

    stats = GoldStats(tables={source_table})
    tc = table_config(cfg, source_table)
    mirror_name = (tc.target if tc and tc.target else source_table)
    ref, tomb = wh.mirror(mirror_name), wh.tombstones(mirror_name)

    # --- key and column types -------------------------------------------------------------
    first_key = changes.where(F.size("key_columns") > 0).select("key_columns").first()
    key = tuple(first_key[0]) if first_key else (tc.key if tc else ())
    if not key and ref.exists(spark):
        key = tuple(k for k in table_properties(spark, ref).get("lakecdc.key", "").split(",") if k)
    quarantine = wh.silver("quarantine")
    if not key:
        reason = (f"table {source_table} has no primary key in its messages or configuration; "
                  f"set tables.{source_table}.key")
        bad = changes.withColumn("reason", F.lit(reason)).withColumn("stage", F.lit("gold"))
        append_idempotent(quarantine_frame(bad), quarantine, f"{app_id}-q-{mirror_name}", batch_id)
        stats.quarantined = changes.count()
        return stats
    message_types = {r["k"]: r["v"] for r in changes.select(F.explode("col_types").alias("k", "v"))
                     .where("v IS NOT NULL").distinct().collect()}
    image_cols = [r[0] for r in changes.select(F.explode(F.map_keys(F.coalesce("after", "before"))).alias("c"))
                  .union(changes.select(F.explode(F.map_keys("before")).alias("c"))).distinct().collect()]
    configured = dict(tc.columns) if tc else {}
    wanted: dict[str, str | None] = {}
    for c in list(configured) + sorted(set(image_cols) - set(configured)):
        wanted[c] = configured.get(c) or message_types.get(c)
    for k in key:
        wanted.setdefault(k, configured.get(k) or message_types.get(k))
    columns = ensure_mirror(spark, ref, tomb, source_table, mirror_name, key, wanted)

    # --- convert and validate every change --------------------------------------------------
    def typed(image: str, c: str) -> str:
        return convert_expr(f"{image}[{_lit(c)}]", columns.get(c))

    checks = []
    for c in columns:
        for image in ("after", "before"):
            checks.append(
                f"CASE WHEN {image}[{_lit(c)}] IS NOT NULL AND ({typed(image, c)}) IS NULL THEN "
                f"concat('value ', substr({image}[{_lit(c)}], 1, 80), ' of column ', {_lit(c)}, ' does not fit ', "
                f"{_lit(f'{spark_type(columns.get(c))} (source type {columns.get(c)})')}) END")
    key_source = "CASE WHEN op = 'DELETE' THEN coalesce(before, after) ELSE coalesce(after, before) END"
    for k in key:
        checks.append(f"CASE WHEN op != 'TRUNCATE' AND NOT (map_contains_key(coalesce(after, map()), {_lit(k)}) "
                      f"OR map_contains_key(coalesce(before, map()), {_lit(k)})) THEN "
                      f"concat('key column ', {_lit(k)}, ' is missing from the change') END")
    checked = changes.withColumn("reason", F.expr(f"coalesce({', '.join(checks)})") if checks else F.lit(None))
    checked = checked.persist()
    bad = checked.where("reason IS NOT NULL")
    stats.quarantined = bad.count()
    if stats.quarantined:
        append_idempotent(quarantine_frame(bad.withColumn("stage", F.lit("gold"))), quarantine,
                          f"{app_id}-q-{mirror_name}", batch_id)
        log.warning("gold: %s: %d changes quarantined (values that do not fit the mirror)", source_table,
                    stats.quarantined)
    good = checked.where("reason IS NULL")
    good = _batch_expectations(spark, tc, mirror_name, good, columns, wh, app_id, batch_id, stats)

    # --- key per change; a key change also deletes the old key -----------------------------
    def key_struct(image_sql: str) -> str:
        return "named_struct(" + ", ".join(f"{_lit(k)}, {convert_expr(f'({image_sql})[{_lit(k)}]', columns.get(k))}"
                                           for k in key) + ")"

    ordered = good.withColumn("k", F.expr(key_struct(f"CASE WHEN op = 'UPDATE' THEN map_concat(coalesce(before, map()), "
                                                      f"coalesce(after, map())) ELSE {key_source} END")))
    has_old = " AND ".join(f"map_contains_key(coalesce(before, map()), {_lit(k)})" for k in key)
    ordered = ordered.withColumn("old_k", F.expr(f"CASE WHEN op = 'UPDATE' AND {has_old} THEN {key_struct('before')} END"))
    # Sort key: vendor sequence, queue position, place in the message, then 0 for the delete of a
    # moved key before 1 for the change itself. The separator sorts below every digit and '.', so
    # an empty sequence (full-load rows) sorts before any incremental change.
    ordered = ordered.withColumn("ord", F.concat_ws(
        ORD_SEPARATOR, "seq", "queue_pos", F.lpad(F.col("change_index").cast("string"), 6, "0"), F.lit("1")))
    ordered = ordered.withColumn("moved_from", F.lit(False))
    moved = (ordered.where("old_k IS NOT NULL AND NOT (old_k <=> k)")
             .withColumn("k", F.col("old_k")).withColumn("op", F.lit("DELETE")).withColumn("moved_from", F.lit(True))
             .withColumn("ord", F.expr("concat(substr(ord, 1, length(ord) - 1), '0')")))
    rows = ordered.unionByName(moved)

    # --- truncate: drop what came before it, empty the mirror as of its sequence ------------
    # The truncate's sequence is kept as a table property, so a late change older than it
    # (in a later batch) is stale too.
    truncated_seq = table_properties(spark, ref).get(TRUNCATED_SEQ_PROPERTY, "")
    truncates = rows.where("op = 'TRUNCATE'").agg(F.max("ord").alias("ord"), F.max("seq").alias("seq")).first()
    if truncates and truncates["ord"] is not None:
        rows = rows.where(F.col("ord") > F.lit(truncates["ord"]))
        with idempotent_dml(spark, f"{app_id}-t-{mirror_name}", batch_id):
            ref.delta(spark).delete(F.col("_seq") <= F.lit(truncates["seq"]))
        if truncates["seq"] > truncated_seq:
            truncated_seq = truncates["seq"]
            spark.sql(f"ALTER TABLE {ref.sql} SET TBLPROPERTIES ('{TRUNCATED_SEQ_PROPERTY}' = {_lit(truncated_seq)})")
    rows = rows.where("op != 'TRUNCATE'")
    if truncated_seq:
        stats.stale += rows.where(F.col("seq") < F.lit(truncated_seq)).count()
        rows = rows.where(F.col("seq") >= F.lit(truncated_seq))

    # --- stale filter against mirror and tombstones -----------------------------------------
    key_cols_sql = ", ".join(q(k) for k in key)
    current = (ref.read(spark).selectExpr(f"named_struct({', '.join(f'{_lit(k)}, {q(k)}' for k in key)}) AS k",
                                          "_seq AS m_seq")
               .unionByName(tomb.read(spark).selectExpr(
                   f"named_struct({', '.join(f'{_lit(k)}, {q(k)}' for k in key)}) AS k", "_seq AS m_seq"))
               .groupBy("k").agg(F.max("m_seq").alias("m_seq")))
    joined = rows.join(current, on="k", how="left")
    rows = joined.where("m_seq IS NULL OR seq >= m_seq").drop("m_seq").persist()
    stats.stale += joined.where("m_seq IS NOT NULL AND seq < m_seq").count()

    # --- fold per key --------------------------------------------------------------------------
    empty_map = "cast(map() AS map<string,string>)"
    folded = rows.groupBy("k").agg(F.collect_list(F.struct(
        "ord", "op",
        # A partial UPDATE overlays its columns on its before-image (SharePlex `key`), so a row that
        # moves to a new key keeps the columns the message does not carry.
        F.expr(f"CASE WHEN op = 'UPDATE' AND changed IS NOT NULL THEN map_concat(coalesce(before, {empty_map}), "
               f"coalesce(after, {empty_map})) ELSE coalesce(after, {empty_map}) END").alias("after"),
        F.expr("op = 'UPDATE' AND changed IS NOT NULL").alias("partial"), "seq", "queue_pos", "event_time",
        "source", "format", "bronze_position", "ingest_time")).alias("chs"))
    folded = folded.withColumn("chs", F.expr(
        "array_sort(chs, (l, r) -> CASE WHEN l.ord < r.ord THEN -1 WHEN l.ord > r.ord THEN 1 ELSE 0 END)"))
    folded = folded.selectExpr("k", f"""aggregate(chs,
        named_struct('live', false, 'full', false, 'img', {empty_map}),
        (acc, c) -> named_struct(
            'live', c.op != 'DELETE',
            'full', NOT c.partial OR acc.full,
            'img', CASE WHEN c.op = 'DELETE' THEN {empty_map}
                        WHEN c.partial THEN map_concat(acc.img, c.after)
                        ELSE c.after END)) AS st""", "element_at(chs, -1) AS last")
    select = ["k", "st.live AS live", "st.full AS full"]
    data_cols = [c for c in columns if c not in key]
    for i, c in enumerate(data_cols):
        select.append(f"{convert_expr(f'st.img[{_lit(c)}]', columns.get(c))} AS v{i}")
        select.append(f"(st.full OR map_contains_key(st.img, {_lit(c)})) AS p{i}")
    select += ["last.seq AS _seq", "last.queue_pos AS _queue_pos", "CASE WHEN st.live THEN last.op ELSE 'DELETE' END AS _op",
               "last.event_time AS _event_time", "last.source AS _source", "last.format AS _format",
               "last.bronze_position AS _position", "last.ingest_time AS _ingest_time"]
    source_df = folded.selectExpr(*select)
    stats.applied = rows.where(~F.col("moved_from")).count()  # the deletes of moved keys are not changes

    # --- merge into the mirror, then the tombstones -----------------------------------------
    from pipelines.quality import current_version

    version_before = current_version(spark, ref) if cfg.quality_checks else None
    on = " AND ".join(f"t.{q(k)} <=> s.k.{q(k)}" for k in key)
    update_set = {q(c): f"CASE WHEN s.p{i} THEN s.v{i} ELSE t.{q(c)} END" for i, c in enumerate(data_cols)}
    update_set.update({q(n): f"s.{n}" for n in LINEAGE_COLUMNS})
    insert_values = {q(k): f"s.k.{q(k)}" for k in key}
    insert_values.update({q(c): f"s.v{i}" for i, c in enumerate(data_cols)})
    insert_values.update({q(n): f"s.{n}" for n in LINEAGE_COLUMNS})
    with idempotent_dml(spark, f"{app_id}-m-{mirror_name}", batch_id):
        (ref.delta(spark).alias("t").merge(source_df.alias("s"), on)
         .whenMatchedDelete(condition="NOT s.live")
         .whenMatchedUpdate(condition="s.live", set=update_set)
         .whenNotMatchedInsert(condition="s.live", values=insert_values)
         .execute())
    tomb_values = {q(k): f"s.k.{q(k)}" for k in key}
    tomb_values.update({"_seq": "s._seq", "_queue_pos": "s._queue_pos", "_event_time": "s._event_time"})
    with idempotent_dml(spark, f"{app_id}-d-{mirror_name}", batch_id):
        (tomb.delta(spark).alias("t").merge(source_df.alias("s"), on)
         .whenMatchedDelete(condition="s.live")
         .whenMatchedUpdate(condition="NOT s.live", set=tomb_values)
         .whenNotMatchedInsert(condition="NOT s.live", values=tomb_values)
         .execute())
    if version_before is not None:
        _cdc_batch_checks(spark, mirror_name, ref, key, good, columns, version_before, wh, app_id, batch_id)
    mirror_rules = [r for r in (tc.expectations if tc else ()) if r.scope == "mirror"]
    if mirror_rules:
        from pipelines.quality import check_mirror, write_results

        write_results(spark, wh, check_mirror(spark, mirror_name, ref.read(spark), mirror_rules, app_id, batch_id,
                                              key_cols=key), app_id=f"{app_id}-dqm-{mirror_name}", version=batch_id)
    rows.unpersist()
    checked.unpersist()
    log.info("gold: %s → %s: %d changes applied, %d stale skipped, %d quarantined (key %s)", source_table,
             mirror_name, stats.applied, stats.stale, stats.quarantined, key_cols_sql)
    return stats


def _batch_expectations(spark, tc: TableConfig | None, mirror_name: str, good, columns, wh: Warehouse, app_id: str,
                        batch_id: int, stats: GoldStats):
    """Run the table's row rules (Great Expectations) on this batch: ``drop`` quarantines exactly the
    offending changes with the rule's name, ``warn`` records, ``fail`` stops the stream."""
    rules = [r for r in (tc.expectations if tc else ()) if r.scope == "batch"]
    if not rules:
        return good
    from pyspark.sql import functions as F

    from pipelines.quality import QualityFailure, check_batch, typed_changes, write_results
    from pipelines.silver import append_idempotent, quarantine_frame

    try:
        quality = check_batch(spark, mirror_name, typed_changes(good, columns), rules, app_id, batch_id)
    except QualityFailure as failure:
        write_results(spark, wh, failure.results, app_id=f"{app_id}-dq-{mirror_name}", version=batch_id)
        raise
    write_results(spark, wh, quality.results, app_id=f"{app_id}-dq-{mirror_name}", version=batch_id)
    keep, bad = quality.split(good)
    if bad is not None:
        append_idempotent(quarantine_frame(bad.withColumn("stage", F.lit("gold"))), wh.silver("quarantine"),
                          f"{app_id}-qdq-{mirror_name}", batch_id)
        stats.quarantined += quality.dropped_count
        log.warning("gold: %s: %d changes quarantined by expectations", mirror_name, quality.dropped_count)
    return keep


def _cdc_batch_checks(spark, mirror_name: str, ref: TableRef, key, changes, columns, version_before: int,
                      wh: Warehouse, app_id: str, batch_id: int) -> None:
    """Built-in checks that need the mirror as it was before this batch: sequences never go
    backwards for a key, and UPDATE/DELETE before-images match the mirror's row (else: drift)."""
    from pipelines.quality import cdc_checks, read_version, write_results

    rows = cdc_checks(spark, mirror_name, ref.read(spark), list(key), changes, run_id=app_id, batch_id=batch_id,
                      mirror_before_df=read_version(spark, ref, version_before), columns=columns,
                      checks=("seq_not_backwards", "source_drift"))
    write_results(spark, wh, rows, app_id=f"{app_id}-dqc-{mirror_name}", version=batch_id)


def _lit(text: str) -> str:
    return "'" + _sql_str(text) + "'"


@contextmanager
def idempotent_dml(spark, app_id: str, version: int):
    """Delta idempotent DML: a MERGE/DELETE stamped with an (appId, version) already committed
    to the table is skipped, so a micro-batch retried after a crash applies once."""
    spark.conf.set("spark.databricks.delta.write.txnAppId", app_id)
    spark.conf.set("spark.databricks.delta.write.txnVersion", str(version))
    try:
        yield
    finally:
        spark.conf.unset("spark.databricks.delta.write.txnAppId")
        spark.conf.unset("spark.databricks.delta.write.txnVersion")


# ---------------------------------------------------------------- the stream


def source_table_col():
    """The source table of a silver row as messages name it: ``db.table``, or ``table`` when there
    is no db (the same name :func:`pipelines.model.table_name` gives)."""
    from pyspark.sql import functions as F

    return F.when(F.col("db").isNotNull(), F.concat_ws(".", "db", "table")).otherwise(F.col("table"))


def apply_gold_batch(spark, batch_df, batch_id: int, cfg: PipelineConfig, wh: Warehouse, app_id: str) -> GoldStats:
    spark.conf.set("spark.sql.mapKeyDedupPolicy", "LAST_WIN")  # map_concat: later image wins
    total = GoldStats()
    batch_df = batch_df.persist()
    try:
        names = [r[0] for r in batch_df.select(source_table_col().alias("n")).distinct().collect()]
        for name in sorted(n for n in names if n is not None):
            part = batch_df.where(source_table_col() == name)
            total.add(apply_table(spark, part, name, cfg, wh, app_id, batch_id))
    finally:
        batch_df.unpersist()
    log.info("gold batch %d: %d changes applied to %d tables, %d stale, %d quarantined", batch_id, total.applied,
             len(total.tables), total.stale, total.quarantined)
    return total


def start_gold(spark, cfg: PipelineConfig, wh: Warehouse, available_now: bool, stats: GoldStats | None = None):
    from pipelines.silver import ensure_silver, run_id

    ensure_silver(spark, wh)
    checkpoint = wh.checkpoint("gold", "apply")
    app_id = f"lakecdc-gold-{run_id(checkpoint)}"
    stats = stats if stats is not None else GoldStats()

    def each_batch(df, batch_id):
        stats.add(apply_gold_batch(spark, df, batch_id, cfg, wh, app_id))

    writer = (wh.silver("changes").read_stream(spark).writeStream.queryName("gold_apply")
              .option("checkpointLocation", checkpoint).foreachBatch(each_batch))
    writer = writer.trigger(availableNow=True) if available_now else writer.trigger(processingTime=cfg.processing_time)
    return writer.start()
