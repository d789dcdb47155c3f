"""Optional SCD type 2 history of a mirror (``tables.<name>.history: true``).

Next to the type 1 mirror, ``gold/_history/<mirror>`` (in a catalog: ``[gold_]_history_<mirror>`` next to the mirror)
keeps one row per version of each key: the row's values, and when it was valid:

* ``_valid_from_seq`` / ``_valid_to_seq``: the vendor sequence of the change that wrote the
  version and of the next change of that key (NULL while current);
* ``_valid_from`` / ``_valid_to``: the same as source commit times;
* ``_current``: the version the mirror holds; a deleted key has no current version.

Versions are cut per sequence value: changes of one key that share a sequence (one Canal message,
one transaction) give one version, the state after the last of them, so a replay with other
micro-batch boundaries gives the same history. With tracked columns (``history: {columns: [...]}`` or
``{except_columns: [...]}``, as AUTO CDC's ``track_history_column_list``) a new version opens only when a
tracked column changes (or the key comes back after a DELETE); a change of the other columns updates the
current version in place. A key change closes the old key's version and
opens one for the new key. A TRUNCATE closes every current version at its sequence; changes that
come before it in the same micro-batch leave no version (the one place batch boundaries show).
History starts when it is enabled; it keeps every column it has seen, also after a DROP or RENAME
in the mirror, and records their source types as the mirror does (``lakecdc.source_types``). Stale
changes never reach it (the same filter as the mirror), and a retried batch is applied once (Delta
``txnAppId``/``txnVersion``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from pipelines.delta_dml import DeltaMerge
from pipelines.gold.batch import BatchContext, Step
from pipelines.gold.fold import (
    FOLD_START,
    VALUES,
    WRITTEN,
    changes_per_key,
    data_columns,
    fold_step,
    named_struct,
    state_structs,
    stored_key,
    struct_field,
)
from pipelines.gold.schema import MirrorShape, widens
from pipelines.layout import SYSTEM_COLUMNS
from pipelines.mirror_columns import (
    SOURCE_TYPES_PROPERTY,
    column_ddl,
    delta_types,
    properties_sql,
    source_types,
    source_types_json,
    table_properties,
)
from pipelines.sql import lit, q

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from pipelines.warehouse import TableRef

HISTORY_DDL = (
    ("_valid_from_seq", "STRING"),
    ("_valid_to_seq", "STRING"),
    ("_valid_from", "TIMESTAMP"),
    ("_valid_to", "TIMESTAMP"),
    ("_current", "BOOLEAN"),
    ("_op", "STRING"),
    ("_position", "STRING"),
)
HISTORY_COLUMNS = tuple(n for n, _ in HISTORY_DDL)
#: The current version's values of a key, by column name.
HELD = "held"


def ensure_history(
    spark: SparkSession, history: TableRef, mirror: TableRef, mirror_types: Mapping[str, str | None]
) -> None:
    """Create the history table like the mirror, or give it the mirror's new and wider columns.
    ``mirror_types``: the mirror's source types (gold's :attr:`MirrorShape.columns`); the history
    records those of its columns in ``lakecdc.source_types``, written before the change it describes."""
    mirror_cols = {c: t for c, t in delta_types(spark, mirror).items() if c not in SYSTEM_COLUMNS}
    existing = delta_types(spark, history)
    if not existing:
        types = {c: mirror_types.get(c) for c in mirror_cols}
        cols = [column_ddl(c, src) for c, src in types.items()] + [f"{n} {t}" for n, t in HISTORY_DDL]
        props = {
            "delta.enableTypeWidening": "true",
            "delta.columnMapping.mode": "name",
            SOURCE_TYPES_PROPERTY: source_types_json(types),
        }
        spark.sql(
            f"CREATE TABLE IF NOT EXISTS {history.sql} ({', '.join(cols)}) USING DELTA "
            f"TBLPROPERTIES ({properties_sql(props)})"
        )
        return
    new = [c for c in mirror_cols if c not in existing]
    wider = [c for c, t in mirror_cols.items() if c in existing and widens(existing[c], t)]
    if not new and not wider:
        return
    recorded = source_types(history.read(spark), table_properties(spark, history))
    recorded = {c: t for c, t in recorded.items() if c not in HISTORY_COLUMNS}
    recorded.update({c: mirror_types.get(c) for c in new + wider})
    recorded_sql = properties_sql({SOURCE_TYPES_PROPERTY: source_types_json(recorded)})
    spark.sql(f"ALTER TABLE {history.sql} SET TBLPROPERTIES ({recorded_sql})")
    if new:
        spark.sql(
            f"ALTER TABLE {history.sql} ADD COLUMNS ({', '.join(column_ddl(c, mirror_types.get(c)) for c in new)})"
        )
    for c in wider:
        spark.sql(f"ALTER TABLE {history.sql} ALTER COLUMN {q(c)} TYPE {mirror_cols[c].upper()}")


def merge_history(
    ctx: BatchContext,
    rows: DataFrame,
    key: tuple[str, ...],
    shape: MirrorShape,
    history: TableRef,
    tracked: Sequence[str] | None = None,
) -> None:
    """Close the current version of every key the changes reach and add their new versions; with ``tracked``
    columns, a state that changes none of them updates the version it continues in place."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    spark = ctx.spark
    ensure_history(spark, history, ctx.ident.ref, shape.columns)
    hist_types = delta_types(spark, history)
    data_cols = data_columns(shape, key)
    # every state of every key: aggregate the fold, keeping each step's state next to its change
    step = fold_step("acc.st")
    states = (
        changes_per_key(rows)
        .selectExpr(
            "k",
            f"""aggregate(chs,
        named_struct('st', {FOLD_START}, 'out', slice(array(named_struct('st', {FOLD_START}, 'c', chs[0])), 1, 0)),
        (acc, c) -> named_struct('st', {step}, 'out', concat(acc.out, array(named_struct('st', {step}, 'c', c))))
        ) AS acc""",
        )
        .select("k", F.posexplode("acc.out").alias("pos", "v"))
    )
    last_of_seq = Window.partitionBy("k", "v.c.seq")
    values, written = state_structs("st", key, shape)
    states = (
        states.withColumn("last_pos", F.max("pos").over(last_of_seq))
        .where("pos = last_pos")
        .selectExpr("k", "pos", "v.st AS st", "v.c AS c")
        .selectExpr("k", "pos", "st", "c", f"{values} AS {VALUES}", f"{written} AS {WRITTEN}")
    )
    held = named_struct((c, q(c)) for c in data_cols)
    current = (
        history.read(spark)
        .where("_current")
        .selectExpr(f"{stored_key(key)} AS k", "_valid_from_seq AS open_from", f"{held} AS {HELD}")
    )
    by_pos = Window.partitionBy("k").orderBy("pos")
    states = (
        states.join(current, "k", "left")
        .where("open_from IS NULL OR c.seq > open_from")
        .withColumn("next_seq", F.lead("c.seq").over(by_pos))
        .withColumn("next_time", F.lead("c.event_time").over(by_pos))
        .withColumn("first", F.row_number().over(by_pos) == 1)
    )

    def cast(sql: str, column: str) -> str:
        return f"CAST({sql} AS {hist_types[column]})"

    def version_value(c: str) -> str:
        """The column as this version holds it: written by the changes, else as the current version held it."""
        return f"CASE WHEN {struct_field(WRITTEN, c)} THEN {struct_field(VALUES, c)} ELSE {struct_field(HELD, c)} END"

    states = _runs(states, by_pos, tracked, version_value)
    key_values = [f"{cast(f'k.{q(k)}', k)} AS {q(k)}" for k in key]
    versions = states.where("st.live AND pos = run_last").selectExpr(
        *key_values,
        *[f"{cast(version_value(c), c)} AS {q(c)}" for c in data_cols],
        "CASE WHEN continues THEN open_from ELSE run_from_seq END AS _valid_from_seq",
        "next_seq AS _valid_to_seq",
        "run_from_time AS _valid_from",
        "next_time AS _valid_to",
        "next_seq IS NULL AS _current",
        "c.op AS _op",
        "c.bronze_position AS _position",
        "CASE WHEN continues THEN 'update' ELSE 'insert' END AS _action",
    )
    closes = states.where("opens AND open_from IS NOT NULL").selectExpr(
        *key_values,
        *[f"CAST(NULL AS {hist_types[c]}) AS {q(c)}" for c in data_cols],
        "open_from AS _valid_from_seq",
        "run_from_seq AS _valid_to_seq",
        "CAST(NULL AS TIMESTAMP) AS _valid_from",
        "run_from_time AS _valid_to",
        "false AS _current",
        "CAST(NULL AS STRING) AS _op",
        "CAST(NULL AS STRING) AS _position",
        "'close' AS _action",
    )
    on = " AND ".join(
        [
            *(f"t.{q(k)} <=> s.{q(k)}" for k in key),
            "t._current",
            "s._action IN ('close', 'update')",
            "t._valid_from_seq = s._valid_from_seq",
        ]
    )
    merge_values = {q(c): f"s.{q(c)}" for c in (*key, *data_cols, *HISTORY_COLUMNS)}
    in_place = {q(c): f"s.{q(c)}" for c in (*data_cols, "_valid_to_seq", "_valid_to", "_current", "_op", "_position")}
    with ctx.txn(Step.HISTORY):
        merge = DeltaMerge(history, versions.unionByName(closes), on)
        close = {"_valid_to_seq": "s._valid_to_seq", "_valid_to": "s._valid_to", "_current": "false"}
        merge.when_matched_update("s._action = 'close'", close).when_matched_update("s._action = 'update'", in_place)
        merge.when_not_matched_insert("s._action = 'insert'", merge_values).execute(spark)


def _runs(states: DataFrame, by_pos, tracked: Sequence[str] | None, version_value) -> DataFrame:
    """Each state with its run: the states one version spans (``run``; ``run_last``: its last state, whose
    values the version holds; ``run_from_seq``/``run_from_time``: its first state's), whether the run
    ``continues`` the current version (its tracked columns unchanged: updated in place) and, on a key's first
    state, whether it ``opens`` after the current version (which it then closes). Without ``tracked`` columns
    every live state is a run of its own (a version per sequence)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    if tracked is None:
        continues = "false"
        starts = "st.live"
    else:
        sig = "to_json(named_struct(" + ", ".join(f"{lit(c)}, {version_value(c)}" for c in tracked) + "))"
        held = "to_json(named_struct(" + ", ".join(f"{lit(c)}, {struct_field(HELD, c)}" for c in tracked) + "))"
        states = states.withColumn("sig", F.expr(f"CASE WHEN st.live THEN {sig} END"))
        states = states.withColumn("prev_live", F.lag("st.live").over(by_pos))
        states = states.withColumn("prev_sig", F.lag("sig").over(by_pos))
        continues = f"(st.live AND first AND open_from IS NOT NULL AND sig <=> {held})"
        starts = f"(st.live AND NOT {continues} AND (first OR NOT prev_live OR NOT (sig <=> prev_sig)))"
    states = states.withColumn("continues", F.expr(continues)).withColumn(
        "run", F.sum(F.expr(f"CASE WHEN {starts} OR NOT st.live THEN 1 ELSE 0 END")).over(by_pos)
    )
    # a run that continues the current version keeps run 0 until its first boundary
    by_run = Window.partitionBy("k", "run")
    ordered = by_run.orderBy("pos")
    return (
        states.withColumn("run_last", F.max("pos").over(by_run))
        .withColumn("run_from_seq", F.first("c.seq").over(ordered))
        .withColumn("run_from_time", F.first("c.event_time").over(ordered))
        .withColumn("opens", F.expr("first AND NOT continues"))
        .withColumn("continues", F.first("continues").over(ordered))
    )
