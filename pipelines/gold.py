"""Gold: apply each micro-batch of silver changes to one mirror Delta table per source table.

A micro-batch is profiled once for every table it touches (one Spark job: columns and the types
messages state, image shapes, keys, truncates). Then, per table, the stages below; the MERGE per
mirror is Delta's floor (one commit per table), everything else is shared or metadata only.

1. **Shape** – :mod:`pipelines.mirror_schema`: the mirror's columns are the union of what
   messages carry, typed by configuration first, else by the types messages state. ADD COLUMN
   and Delta-allowed widening evolve the mirror; DROP, RENAME, narrowing and unrelated types
   follow the table's ``schema_changes`` policy (default ``fail``).
2. **Check** – canonical text must convert to the Delta type. A value that does not fit
   (overflow, too many decimal places, sub-microsecond time, bad Base64) sends its change to
   quarantine with the column and value named; it never becomes a silent NULL. So do changes
   a ``quarantine`` schema policy holds back, and those a ``drop`` expectation rejects.
3. **Truncate** – empties the mirror as of its sequence; older changes are stale, in this
   batch and later ones (the sequence is kept as the table property ``lakecdc.truncated_seq``).
4. **Apply**, for a table with a key (or a vendor row id):
   order by the format's sequence, then queue position, then place in the message; skip what
   is older than the mirror or its tombstones hold for that key (an equal sequence re-applies:
   that is what makes a retried batch idempotent); fold per key (INSERT/SNAPSHOT and full-image
   UPDATEs replace the row, a partial UPDATE overlays the columns it carries, a column carried
   as NULL becomes NULL, DELETE removes it, a key change also deletes the old key); one MERGE
   into the mirror (live rows only) and one into its tombstones.
   For a table without one: multiset semantics (:func:`apply_multiset`).

Every MERGE and append is stamped with Delta ``txnAppId``/``txnVersion``, so a retried batch
is applied once.
"""
from __future__ import annotations

import json
import logging
from contextlib import contextmanager
from dataclasses import dataclass, field

from pipelines.config import PipelineConfig, TableConfig
from pipelines.mirror_schema import (
    FULL_IMAGE_SQL, LINEAGE_COLUMNS, LINEAGE_DDL, ROW_ID_COLUMN, SOURCE_TYPE_PREFIX, SYSTEM_COLUMNS, ColumnSighting,
    ImageShape, MirrorIdentity, MirrorShape, SchemaChangeError, lit, mirror_schema, q, shape_mirror, table_properties,
)
from pipelines.values import family, parse_type, spark_type
from pipelines.warehouse import TableRef, Warehouse

log = logging.getLogger(__name__)

__all__ = [
    "LINEAGE_COLUMNS", "LINEAGE_DDL", "ROW_ID_COLUMN", "SOURCE_TYPE_PREFIX", "SYSTEM_COLUMNS", "SchemaChangeError",
    "GoldStats", "apply_gold_batch", "convert_expr", "export_expr", "mirror_schema", "source_table_col",
    "start_gold", "table_properties",
]

ORD_SEPARATOR = "\u0001"
TRUNCATED_SEQ_PROPERTY = "lakecdc.truncated_seq"
SOURCE_TABLE = "_source_table"
EMPTY_MAP = "cast(map() AS map<string,string>)"
#: A change that carries only some columns (``changed`` set: SharePlex, Mongo ``$set``, DTS NONE).
PARTIAL_SQL = "op = 'UPDATE' AND changed IS NOT NULL"
#: The row as a change leaves it (canonical text): a partial UPDATE overlays its columns on its
#: before-image (SharePlex ``key``), so a row that moves to a new key keeps the columns the message
#: does not carry; any other change's after-image is the row.
ROW_AFTER_SQL = (f"CASE WHEN {PARTIAL_SQL} THEN map_concat(coalesce(before, {EMPTY_MAP}), coalesce(after, {EMPTY_MAP})) "
                 f"ELSE coalesce(after, {EMPTY_MAP}) END")
#: Each lineage column of a mirror row, and the silver column of its last change it records.
LINEAGE_SOURCES = (("_seq", "seq"), ("_queue_pos", "queue_pos"), ("_op", "op"), ("_event_time", "event_time"),
                   ("_source", "source"), ("_format", "format"), ("_position", "bronze_position"),
                   ("_ingest_time", "ingest_time"))


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


# ---------------------------------------------------------------- the batch profile


@dataclass
class TableProfile:
    """What one micro-batch says about one source table."""
    name: str
    changes: int = 0
    key: tuple[str, ...] = ()
    formats: tuple[str, ...] = ()
    columns: dict[str, ColumnSighting] = field(default_factory=dict)
    shapes: list[ImageShape] = field(default_factory=list)
    truncate_ord: str | None = None
    truncate_seq: str | None = None
    truncate_time: str | None = None  # its source commit time

    @property
    def schemaless(self) -> bool:
        from pipelines.formats import get_decoder

        return any(get_decoder(f).schemaless for f in self.formats)


def with_order(changes):
    """The sort key of a change: vendor sequence, queue position, place in the message, then 0 for
    the delete of a moved key before 1 for the change itself. The separator sorts below every digit
    and '.', so an empty sequence (full-load rows) sorts before any incremental change."""
    from pyspark.sql import functions as F

    return changes.withColumn("ord", F.concat_ws(
        ORD_SEPARATOR, "seq", "queue_pos", F.lpad(F.col("change_index").cast("string"), 6, "0"), F.lit("1")))


def profile_batch(batch) -> dict[str, TableProfile]:
    """Every table of the batch, from one Spark job (three aggregations collected as one union)."""
    from pyspark.sql import functions as F

    seq_or_null = F.when(F.col("seq") != "", F.col("seq"))
    carried = F.array_union(F.map_keys(F.coalesce("after", F.expr(EMPTY_MAP))),
                            F.map_keys(F.coalesce("before", F.expr(EMPTY_MAP))))
    columns = (batch.select(SOURCE_TABLE, "seq", "col_types", F.explode(carried).alias("c"))
               .groupBy(SOURCE_TABLE, "c")
               .agg(F.collect_set(F.col("col_types")[F.col("c")]).alias("types"),
                    F.min(seq_or_null).alias("first"), F.max(seq_or_null).alias("last"))
               .select(SOURCE_TABLE, F.lit("column").alias("fact"),
                       F.to_json(F.struct("c", "types", "first", "last")).alias("v")))
    shapes = (batch.where(f"{FULL_IMAGE_SQL} AND seq != ''")
              .groupBy(SOURCE_TABLE, F.array_sort(F.map_keys("after")).alias("cols"))
              .agg(F.min("seq").alias("first"), F.max("seq").alias("last"))
              .select(SOURCE_TABLE, F.lit("shape").alias("fact"),
                      F.to_json(F.struct("cols", "first", "last")).alias("v")))
    truncate = F.col("op") == "TRUNCATE"
    tables = (batch.groupBy(SOURCE_TABLE)
              .agg(F.count(F.lit(1)).alias("n"),
                   F.first(F.when(F.size("key_columns") > 0, F.col("key_columns")), ignorenulls=True).alias("key"),
                   F.collect_set("format").alias("formats"),
                   F.max(F.when(truncate, F.col("ord"))).alias("t_ord"), F.max(F.when(truncate, F.col("seq"))).alias("t_seq"),
                   F.max(F.when(truncate, F.col("event_time"))).cast("string").alias("t_time"))
              .select(SOURCE_TABLE, F.lit("table").alias("fact"),
                      F.to_json(F.struct("n", "key", "formats", "t_ord", "t_seq", "t_time")).alias("v")))
    profiles: dict[str, TableProfile] = {}
    for row in columns.unionByName(shapes).unionByName(tables).collect():
        if row[SOURCE_TABLE] is None:
            continue
        p = profiles.setdefault(row[SOURCE_TABLE], TableProfile(row[SOURCE_TABLE]))
        v = json.loads(row["v"])
        if row["fact"] == "column":
            p.columns[v["c"]] = ColumnSighting(set(v["types"]), v.get("first"), v.get("last"))
        elif row["fact"] == "shape":
            p.shapes.append(ImageShape(frozenset(v["cols"]), v["first"], v["last"]))
        else:
            p.changes, p.key, p.formats = v["n"], tuple(v.get("key") or ()), tuple(v["formats"])
            p.truncate_ord, p.truncate_seq, p.truncate_time = v.get("t_ord"), v.get("t_seq"), v.get("t_time")
    return profiles


# ---------------------------------------------------------------- applying one table


def table_config(cfg: PipelineConfig, source_table: str) -> TableConfig | None:
    for name, tc in cfg.tables.items():
        if name.lower() == source_table.lower():
            return tc
    return None


def resolve_key(props: dict[str, str] | None, profile: TableProfile, tc: TableConfig | None) -> tuple[str, ...]:
    """The mirror's key is fixed when it is created: from the messages, else the configuration.
    No key at all (and no vendor row id in the messages) means multiset semantics."""
    if props is not None and "lakecdc.key" in props:
        return tuple(k for k in props["lakecdc.key"].split(",") if k)
    return profile.key or (tc.key if tc else ())


def apply_table(spark, changes, profile: TableProfile, cfg: PipelineConfig, wh: Warehouse, app_id: str,
                batch_id: int) -> GoldStats:
    """The stages of the module docstring, for one table's changes of one micro-batch."""
    stats = GoldStats(tables={profile.name})
    tc = table_config(cfg, profile.name)
    mirror_name = tc.target if tc and tc.target else profile.name
    ident = MirrorIdentity(profile.name, mirror_name, wh.mirror(mirror_name), wh.tombstones(mirror_name),
                           policy=(tc.schema_changes if tc and tc.schema_changes else cfg.schema_changes))
    # the mirror's properties as the batch begins (None: no mirror yet), read once for every stage
    props = table_properties(spark, ident.ref) if ident.ref.exists(spark) else None
    key = resolve_key(props, profile, tc)
    shape = shape_mirror(spark, ident, props, key, dict(tc.columns) if tc else {}, profile.columns, profile.shapes,
                         profile.schemaless, keyless=not key)
    checked = check_changes(rename_columns(changes, shape.renames), shape, key).persist()
    try:
        good = quarantine_misfits(spark, checked, ident, wh, app_id, batch_id, stats)
        good = _batch_expectations(spark, tc, mirror_name, good, shape.columns, wh, app_id, batch_id, stats)
        history = wh.history(mirror_name) if tc and tc.history and key else None
        truncated_seq = (props or {}).get(TRUNCATED_SEQ_PROPERTY, "")
        good = apply_truncate(spark, good, profile, ident, truncated_seq, app_id, batch_id, history)
        from pipelines.quality import current_version

        version_before = current_version(spark, ident.ref) if cfg.quality_checks and key else None
        if shape.keyless:
            if tc and tc.history:
                log.warning("gold: %s has no key: no SCD type 2 history (a version needs a key)", profile.name)
            apply_multiset(spark, good, shape, ident, wh, app_id, batch_id, stats)
        else:
            apply_keyed(spark, good, shape, key, ident, app_id, batch_id, stats, history)
        if version_before is not None:
            _cdc_batch_checks(spark, mirror_name, ident.ref, key, good, shape.columns, version_before, wh, app_id,
                              batch_id)
    finally:
        checked.unpersist()
    mirror_rules = [r for r in (tc.expectations if tc else ()) if r.scope == "mirror"]
    if mirror_rules:
        from pipelines.quality import check_mirror, write_results

        write_results(spark, wh, check_mirror(spark, mirror_name, ident.ref.read(spark), mirror_rules, app_id, batch_id,
                                              key_cols=key), app_id=f"{app_id}-dqm-{mirror_name}", version=batch_id)
    log.info("gold: %s → %s: %d changes applied, %d stale skipped, %d quarantined (%s)", profile.name, mirror_name,
             stats.applied, stats.stale, stats.quarantined,
             f"key {', '.join(key)}" if key else "no key: multiset")
    return stats


def rename_columns(changes, renames: dict[str, str]):
    """Older images still carry a renamed column's old name (``evolve`` of a RENAME): read the new one."""
    if not renames:
        return changes
    from pyspark.sql import functions as F

    case = "CASE " + " ".join(f"WHEN k = {lit(old)} THEN {lit(new)}" for old, new in renames.items()) + " ELSE k END"
    for image in ("before", "after", "col_types"):
        changes = changes.withColumn(image, F.expr(f"transform_keys({image}, (k, v) -> {case})"))
    return changes.withColumn("changed", F.expr(f"transform(changed, k -> {case})"))


def check_changes(changes, shape: MirrorShape, key: tuple[str, ...]):
    """Each change with ``reason``: why it cannot apply (NULL when it can)."""
    from pyspark.sql import functions as F

    columns = shape.columns
    checks = [f"CASE WHEN {predicate} THEN {lit(reason)} END" for predicate, reason in shape.rejects]
    for c in columns:
        target = lit(f"{spark_type(columns.get(c))} (source type {columns.get(c)})")
        for image in ("after", "before"):
            value = f"{image}[{lit(c)}]"
            checks.append(f"CASE WHEN {value} IS NOT NULL AND ({convert_expr(value, columns.get(c))}) IS NULL THEN "
                          f"concat('value ', substr({value}, 1, 80), ' of column ', {lit(c)}, ' does not fit ', "
                          f"{target}) END")
    for k in key:
        checks.append(f"CASE WHEN op != 'TRUNCATE' AND NOT (map_contains_key(coalesce(after, map()), {lit(k)}) "
                      f"OR map_contains_key(coalesce(before, map()), {lit(k)})) THEN "
                      f"concat('key column ', {lit(k)}, ' is missing from the change') END")
    return changes.withColumn("reason", F.expr(f"coalesce({', '.join(checks)})") if checks else F.lit(None))


def quarantine_misfits(spark, checked, ident: MirrorIdentity, wh: Warehouse, app_id: str, batch_id: int,
                       stats: GoldStats):
    """Send the changes with a reason to quarantine; return the others."""
    from pyspark.sql import functions as F

    from pipelines.silver import append_idempotent, quarantine_frame

    bad = checked.where("reason IS NOT NULL")
    stats.quarantined = bad.count()
    if stats.quarantined:
        append_idempotent(quarantine_frame(bad.withColumn("stage", F.lit("gold"))), wh.silver("quarantine"),
                          f"{app_id}-q-{ident.mirror_name}", batch_id)
        log.warning("gold: %s: %d changes quarantined (values or schema changes that do not fit the mirror)",
                    ident.source_table, stats.quarantined)
    return checked.where("reason IS NULL")


def apply_truncate(spark, changes, profile: TableProfile, ident: MirrorIdentity, truncated_seq: str, app_id: str,
                   batch_id: int, history: TableRef | None = None):
    """TRUNCATE empties the mirror as of its sequence (and closes the history's current versions);
    changes before it (in this batch, or later batches: ``truncated_seq``, the mirror's
    ``lakecdc.truncated_seq`` property) are stale."""
    from pyspark.sql import functions as F

    if profile.truncate_ord is not None:
        changes = changes.where(F.col("ord") > F.lit(profile.truncate_ord))
        with idempotent_dml(spark, f"{app_id}-t-{ident.mirror_name}", batch_id):
            ident.ref.delta(spark).delete(F.col("_seq") <= F.lit(profile.truncate_seq))
        if ident.tombstones.exists(spark):
            # Compaction that is provably safe: a change older than the truncate is stale through
            # lakecdc.truncated_seq, so tombstones up to it are no longer needed.
            with idempotent_dml(spark, f"{app_id}-tt-{ident.mirror_name}", batch_id):
                ident.tombstones.delta(spark).delete(F.col("_seq") <= F.lit(profile.truncate_seq))
        if history is not None and history.exists(spark):
            with idempotent_dml(spark, f"{app_id}-ht-{ident.mirror_name}", batch_id):
                history.delta(spark).update(
                    condition=F.expr(f"_current AND _valid_from_seq <= {lit(profile.truncate_seq)}"),
                    set={"_current": F.lit(False), "_valid_to_seq": F.lit(profile.truncate_seq),
                         "_valid_to": F.lit(profile.truncate_time).cast("timestamp")})
        if profile.truncate_seq > truncated_seq:
            truncated_seq = profile.truncate_seq
            spark.sql(f"ALTER TABLE {ident.ref.sql} SET TBLPROPERTIES ('{TRUNCATED_SEQ_PROPERTY}' = {lit(truncated_seq)})")
    changes = changes.where("op != 'TRUNCATE'")
    return changes.withColumn("stale", F.col("seq") < F.lit(truncated_seq)) if truncated_seq \
        else changes.withColumn("stale", F.lit(False))


def _typed(image_sql: str, column: str, source_type: str | None) -> str:
    return convert_expr(f"({image_sql})[{lit(column)}]", source_type)


def stored_key(key: tuple[str, ...]) -> str:
    """SQL of a stored row's key (mirror, tombstones, history) as the struct ``k`` changes carry."""
    return f"named_struct({', '.join(f'{lit(k)}, {q(k)}' for k in key)})"


def apply_keyed(spark, changes, shape: MirrorShape, key: tuple[str, ...], ident: MirrorIdentity, app_id: str,
                batch_id: int, stats: GoldStats, history: TableRef | None = None) -> None:
    """Order, drop stale changes, fold per key, MERGE the mirror and its tombstones (and the
    SCD type 2 history, where configured)."""
    from pyspark.sql import functions as F

    columns = shape.columns

    def key_struct(image_sql: str) -> str:
        return "named_struct(" + ", ".join(f"{lit(k)}, {_typed(image_sql, k, columns.get(k))}" for k in key) + ")"

    # --- key per change; a key change also deletes the old key -----------------------------
    key_source = "CASE WHEN op = 'DELETE' THEN coalesce(before, after) ELSE coalesce(after, before) END"
    rows = changes.withColumn("k", F.expr(key_struct(
        f"CASE WHEN op = 'UPDATE' THEN map_concat(coalesce(before, map()), coalesce(after, map())) ELSE {key_source} END")))
    has_old = " AND ".join(f"map_contains_key(coalesce(before, map()), {lit(k)})" for k in key)
    rows = rows.withColumn("old_k", F.expr(f"CASE WHEN op = 'UPDATE' AND {has_old} THEN {key_struct('before')} END"))
    rows = rows.withColumn("moved_from", F.lit(False))
    moved = (rows.where("old_k IS NOT NULL AND NOT (old_k <=> k)")
             .withColumn("k", F.col("old_k")).withColumn("op", F.lit("DELETE")).withColumn("moved_from", F.lit(True))
             .withColumn("ord", F.expr("concat(substr(ord, 1, length(ord) - 1), '0')")))
    rows = rows.unionByName(moved)

    # --- stale: older than what the mirror or its tombstones hold for the key ------------------
    key_sql = f"{stored_key(key)} AS k"
    current = (ident.ref.read(spark).selectExpr(key_sql, "_seq AS m_seq")
               .unionByName(ident.tombstones.read(spark).selectExpr(key_sql, "_seq AS m_seq"))
               .groupBy("k").agg(F.max("m_seq").alias("m_seq")))
    rows = (rows.join(current, on="k", how="left")
            .withColumn("stale", F.expr("stale OR (m_seq IS NOT NULL AND seq < m_seq)")).drop("m_seq").persist())
    try:
        counts = rows.where(~F.col("moved_from")).agg(  # the deletes of moved keys are not changes
            F.count_if("stale").alias("stale"), F.count_if(~F.col("stale")).alias("applied")).first()
        stats.stale += counts["stale"] or 0
        stats.applied = counts["applied"] or 0
        fresh = rows.where(~F.col("stale"))
        if history is not None:
            from pipelines.history import merge_history

            merge_history(spark, fresh, key, shape, history, ident.ref, f"{app_id}-h-{ident.mirror_name}", batch_id)
        merge_keyed(spark, fold_per_key(fresh, key, shape), key, shape, ident, app_id, batch_id)
    finally:
        rows.unpersist()


#: The state of one key while its changes fold: live or deleted, whether a full image has been
#: seen (then every column is known), and the image so far (canonical text).
FOLD_START = f"named_struct('live', false, 'full', false, 'img', {EMPTY_MAP})"


def fold_step(prev: str) -> str:
    """SQL of the state after change ``c`` (a partial UPDATE overlays; anything else replaces)."""
    return f"""named_struct(
        'live', c.op != 'DELETE',
        'full', NOT c.partial OR {prev}.full,
        'img', CASE WHEN c.op = 'DELETE' THEN {EMPTY_MAP}
                    WHEN c.partial THEN map_concat({prev}.img, c.after)
                    ELSE c.after END)"""


def changes_per_key(rows):
    """Per key, its changes in order (``chs``: the fields the fold and the lineage need)."""
    from pyspark.sql import functions as F

    per_key = rows.groupBy("k").agg(F.collect_list(F.struct(
        "ord", "op", F.expr(ROW_AFTER_SQL).alias("after"), F.expr(PARTIAL_SQL).alias("partial"),
        "seq", "queue_pos", "event_time", "source", "format", "bronze_position", "ingest_time")).alias("chs"))
    return per_key.withColumn("chs", F.expr(
        "array_sort(chs, (l, r) -> CASE WHEN l.ord < r.ord THEN -1 WHEN l.ord > r.ord THEN 1 ELSE 0 END)"))


def state_columns(state: str, key: tuple[str, ...], shape: MirrorShape) -> list[tuple[str, str]]:
    """Per data column: (typed value, whether the state writes it) as SQL over ``state``."""
    out = []
    for c in _data_columns(shape, key):
        # a dropped column the ignore policy keeps is written only where an image still carries it
        carried = f"map_contains_key({state}.img, {lit(c)})"
        out.append((_typed(f"{state}.img", c, shape.columns.get(c)),
                    carried if c in shape.unwritten else f"({state}.full OR {carried})"))
    return out


def fold_per_key(rows, key: tuple[str, ...], shape: MirrorShape):
    """One row per key: its last state (``live``, each data column's value ``v<i>`` and whether the
    batch wrote it ``p<i>``) and the lineage of its last change."""
    folded = changes_per_key(rows).selectExpr(
        "k", f"aggregate(chs, {FOLD_START}, (acc, c) -> {fold_step('acc')}) AS st", "element_at(chs, -1) AS last")
    select = ["k", "st.live AS live", "st.full AS full"]
    for i, (value, written) in enumerate(state_columns("st", key, shape)):
        select += [f"{value} AS v{i}", f"{written} AS p{i}"]
    select += [("CASE WHEN st.live THEN last.op ELSE 'DELETE' END" if name == "_op" else f"last.{source}") + f" AS {name}"
               for name, source in LINEAGE_SOURCES]
    return folded.selectExpr(*select)


def _data_columns(shape: MirrorShape, key: tuple[str, ...]) -> list[str]:
    return [c for c in shape.columns if c not in key]


def merge_keyed(spark, source_df, key: tuple[str, ...], shape: MirrorShape, ident: MirrorIdentity, app_id: str,
                batch_id: int) -> None:
    """One MERGE into the mirror (live rows), one into the tombstones (deleted keys)."""
    data_cols = _data_columns(shape, key)
    on = " AND ".join(f"t.{q(k)} <=> s.k.{q(k)}" for k in key)
    update_set = {q(c): f"CASE WHEN s.p{i} THEN s.v{i} ELSE t.{q(c)} END" for i, c in enumerate(data_cols)}
    update_set.update({q(n): f"s.{n}" for n in LINEAGE_COLUMNS})
    insert_values = {q(k): f"s.k.{q(k)}" for k in key}
    insert_values.update({q(c): f"s.v{i}" for i, c in enumerate(data_cols)})
    insert_values.update({q(n): f"s.{n}" for n in LINEAGE_COLUMNS})
    with idempotent_dml(spark, f"{app_id}-m-{ident.mirror_name}", batch_id):
        (ident.ref.delta(spark).alias("t").merge(source_df.alias("s"), on)
         .whenMatchedDelete(condition="NOT s.live")
         .whenMatchedUpdate(condition="s.live", set=update_set)
         .whenNotMatchedInsert(condition="s.live", values=insert_values)
         .execute())
    tomb_values = {q(k): f"s.k.{q(k)}" for k in key}
    tomb_values.update({"_seq": "s._seq", "_queue_pos": "s._queue_pos", "_event_time": "s._event_time"})
    with idempotent_dml(spark, f"{app_id}-d-{ident.mirror_name}", batch_id):
        (ident.tombstones.delta(spark).alias("t").merge(source_df.alias("s"), on)
         .whenMatchedDelete(condition="s.live")
         .whenMatchedUpdate(condition="NOT s.live", set=tomb_values)
         .whenNotMatchedInsert(condition="NOT s.live", values=tomb_values)
         .execute())


# ---------------------------------------------------------------- tables without a key


def apply_multiset(spark, changes, shape: MirrorShape, ident: MirrorIdentity, wh: Warehouse, app_id: str,
                   batch_id: int, stats: GoldStats) -> None:
    """A table with no key and no vendor row id keeps the source's multiset: INSERT/SNAPSHOT add a
    row, DELETE removes ONE row equal to its before-image (every column; one the image lacks is
    NULL), UPDATE does both. Events apply in sequence order per distinct row value, so a delete
    only takes a copy that exists at that point.

    Each mirror row carries ``_row_id``: the id of the change that inserted it. A change's id is a
    hash of its table, sequence, op, place in its message and images, so a redelivered copy of a
    message is applied once (the ids applied are kept in ``gold/_applied/<mirror>``), while two
    equal rows of one message (a Canal ``data`` array) stay two. Two equal changes with the same
    sequence in different messages are one change: a format whose full-load rows carry no
    sequence delivers two identical keyless rows of its full load as one.
    """
    from pyspark.sql import functions as F

    from pipelines.silver import append_idempotent

    mirror = ident.ref.read(spark)
    mirror_types = {f.name: f.dataType.simpleString() for f in mirror.schema.fields}
    columns = [c for c in shape.columns if c in mirror_types]

    def typed_row(image_sql: str) -> list:
        return [F.expr(f"CAST({_typed(image_sql, c, shape.columns[c])} AS {mirror_types[c]})").alias(c)
                for c in columns]

    def row_hash(cols) -> object:
        return F.sha2(F.to_json(F.struct(*cols)), 256)

    applied = wh.applied_changes(ident.mirror_name)
    if not applied.exists(spark):
        spark.sql(f"CREATE TABLE IF NOT EXISTS {applied.sql} (change_id STRING, _seq STRING) USING DELTA")
    image_text = "to_json(array_sort(map_entries(coalesce({0}, " + EMPTY_MAP + "))))"
    change_id = F.sha2(F.concat_ws(ORD_SEPARATOR, F.col(SOURCE_TABLE), "seq", "op", F.col("change_index").cast("string"),
                                   F.expr(image_text.format("before")), F.expr(image_text.format("after"))), 256)
    with_ids = changes.withColumn("change_id", change_id)
    fresh = (with_ids.where("NOT stale").dropDuplicates(["change_id"])
             .join(applied.read(spark).select("change_id"), "change_id", "left_anti").persist())
    try:
        stats.applied = fresh.count()
        stats.stale += with_ids.count() - stats.applied  # redelivered copies, and changes before a truncate
        lineage = [F.col(source).alias(name) for name, source in LINEAGE_SOURCES]
        added = (fresh.where("op IN ('INSERT', 'SNAPSHOT', 'UPDATE') AND after IS NOT NULL")
                 .select(F.col("change_id").alias(ROW_ID_COLUMN), F.concat("ord", F.lit("1")).alias("ord"),
                         F.struct(*typed_row(ROW_AFTER_SQL)).alias("row"), *lineage)
                 .withColumn("h", row_hash([F.col(f"row.{q(c)}") for c in columns])))
        removed = (fresh.where("op IN ('DELETE', 'UPDATE') AND before IS NOT NULL")
                   .select(F.concat("ord", F.lit("0")).alias("ord"), row_hash(typed_row("before")).alias("h")))
        events = (added.select("h", "ord", F.lit(True).alias("plus"), ROW_ID_COLUMN)
                  .unionByName(removed.select("h", "ord", F.lit(False).alias("plus"),
                                              F.lit(None).cast("string").alias(ROW_ID_COLUMN))))
        held = (mirror.select(row_hash([F.col(q(c)) for c in columns]).alias("h"), ROW_ID_COLUMN)
                .join(events.select("h").distinct(), "h", "left_semi")
                .groupBy("h").agg(F.array_sort(F.collect_list(ROW_ID_COLUMN)).alias("held")))
        outcome = (events.groupBy("h").agg(F.collect_list(F.struct("ord", "plus", ROW_ID_COLUMN)).alias("evs"))
                   .join(held, "h", "left")
                   .selectExpr("coalesce(held, cast(array() AS array<string>)) AS held", f"""aggregate(
                       array_sort(evs, (l, r) -> CASE WHEN l.ord < r.ord THEN -1 WHEN l.ord > r.ord THEN 1 ELSE 0 END),
                       coalesce(held, cast(array() AS array<string>)),
                       (ids, e) -> CASE WHEN e.plus THEN concat(ids, array(e.{ROW_ID_COLUMN}))
                                        WHEN size(ids) > 0 THEN slice(ids, 2, size(ids) - 1)
                                        ELSE ids END) AS kept"""))
        gone_ids = outcome.select(F.explode(F.array_except("held", "kept")).alias(ROW_ID_COLUMN))
        kept_ids = outcome.select(F.explode("kept").alias(ROW_ID_COLUMN))
        inserts = added.join(kept_ids, ROW_ID_COLUMN, "left_semi").select(
            ROW_ID_COLUMN, *[F.col(f"row.{q(c)}").alias(c) for c in columns], *LINEAGE_COLUMNS,
            F.lit("insert").alias("_action"))
        deletes = gone_ids.select(ROW_ID_COLUMN, *[F.lit(None).cast(mirror_types[c]).alias(c) for c in columns],
                                  *[F.lit(None).cast(t).alias(n) for n, t in LINEAGE_DDL], F.lit("delete").alias("_action"))
        values = {q(c): f"s.{q(c)}" for c in (*columns, *LINEAGE_COLUMNS, ROW_ID_COLUMN)}
        with idempotent_dml(spark, f"{app_id}-m-{ident.mirror_name}", batch_id):
            (ident.ref.delta(spark).alias("t").merge(inserts.unionByName(deletes).alias("s"),
                                                     f"t.{ROW_ID_COLUMN} = s.{ROW_ID_COLUMN}")
             .whenMatchedDelete(condition="s._action = 'delete'")
             .whenNotMatchedInsert(condition="s._action = 'insert'", values=values)
             .execute())
        append_idempotent(fresh.select("change_id", F.col("seq").alias("_seq")), applied,
                          f"{app_id}-a-{ident.mirror_name}", batch_id)
    finally:
        fresh.unpersist()


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
    """Fan one micro-batch out to every table it touches."""
    from pyspark.sql import functions as F

    spark.conf.set("spark.sql.mapKeyDedupPolicy", "LAST_WIN")  # map_concat: later image wins
    total = GoldStats()
    batch = with_order(batch_df.withColumn(SOURCE_TABLE, source_table_col())).persist()
    try:
        profiles = profile_batch(batch)
        for name in sorted(profiles):
            total.add(apply_table(spark, batch.where(F.col(SOURCE_TABLE) == name), profiles[name], cfg, wh, app_id,
                                  batch_id))
    finally:
        batch.unpersist()
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
