"""Gold's shared state: three Delta tables for all mirrors, written once per batch, not once per table.

* ``keys`` – key state: per mirror and key, the sequence of the last change decided for it, whether the
  row is live or deleted (a tombstone: a late change older than the delete never resurrects the row), and a
  hash of each column's value (what the drift check compares a before-image with). It replaces a MERGE
  into a tombstones table and a read of the mirror per table and batch: one join serves every table.
* ``pending`` – the fresh changes of mirrors not due yet (:mod:`pipelines.gold.due`): they wait here,
  durable, until their mirror is merged, in order, with nothing lost.
* ``progress`` – per mirror, the batch through which its pending changes are applied.
* ``later`` – the changes of new tables past ``limits.new_mirrors_per_batch``, as silver gave them, each
  with the round that put it there: the next batch (or a flush between batches) reads them with its own, and
  ``progress`` records the round read through under :data:`LATER` (no mirror has that id).

Every write is an append stamped with its batch id, and readers decide what counts: key state *before*
batch ``B`` is the newest row per key among rows of batches before ``B``, so a retried batch decides
exactly as its first attempt did, whatever that attempt committed. A retry appends its rows again; readers
take the newest key row and one copy of a change. No Delta ``txnAppId`` check is needed (open-source Delta
rebuilds a table's state, a Spark job, to answer one). Applying a mirror's changes sets rows to states, so
applying them twice leaves the mirror as once: a mirror merged just before a crash, whose progress row
was not yet written, is merged again and stays right.

``lakecdc maintain`` rewrites the tables between runs with only what readers still need (:meth:`GoldState.compact`).

A mirror written before key state existed is adopted on its first batch (:func:`adopt_mirror`): its
rows and its tombstones table become key state, and the mirror records ``lakecdc.key_state``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pipelines.gold.fold import TOMB_DDL
from pipelines.gold.lookups import canonical_text
from pipelines.gold.order import ORD_FIELDS
from pipelines.layout import SYSTEM_COLUMNS
from pipelines.sql import lit, q

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from pipelines.gold.identity import MirrorIdentity
    from pipelines.warehouse import TableRef, Warehouse

log = logging.getLogger(__name__)

#: The mirror property that says its keys are in key state, and since which batch (its first, or -1: adopted).
KEY_STATE_PROPERTY = "lakecdc.key_state_since"
_ORD_DDL = "STRUCT<" + ", ".join(f"{name}: {t.upper()}" for name, t in ORD_FIELDS) + ">"
KEYS_DDL = (
    "mirror STRING, k STRING, seq STRING, live BOOLEAN, vh MAP<STRING, BIGINT>, batch BIGINT, "
    "written TIMESTAMP, queue_pos STRING, event_time TIMESTAMP, img_seq STRING"
)
#: A change of a mirror that is not due, as the fold reads it (:mod:`pipelines.gold.fold`).
PENDING_DDL = (
    f"mirror STRING, batch BIGINT, k STRING, kimg MAP<STRING, STRING>, prev_live BOOLEAN, ord {_ORD_DDL}, "
    "op STRING, after MAP<STRING, STRING>, partial BOOLEAN, seq STRING, queue_pos STRING, event_time TIMESTAMP, "
    f"source STRING, format STRING, bronze_position STRING, ingest_time TIMESTAMP, tomb {TOMB_DDL}, prior_img STRING"
)
PROGRESS_DDL = "mirror STRING, batch BIGINT, applied_at TIMESTAMP"
KEYS_COLUMNS = ("mirror", "k", "seq", "live", "vh", "batch", "written", "queue_pos", "event_time", "img_seq")
PENDING_COLUMNS = (
    "mirror", "batch", "k", "kimg", "prev_live", "ord", "op", "after", "partial", "seq", "queue_pos",
    "event_time", "source", "format", "bronze_position", "ingest_time", "tomb", "prior_img",
)  # fmt: skip
#: What names one change among pending rows (a retry appends the same change again).
CHANGE_IDENTITY = ("mirror", "bronze_position", "ord")
#: The ``progress`` row of the ``later`` table: the round its changes are read through.
LATER = ""


@dataclass
class Pending:
    """One mirror's changes waiting in ``pending``: how many, and the oldest one's ingest time."""

    changes: int = 0
    oldest: float | None = None  # epoch seconds
    batches: set[int] = field(default_factory=set)

    def add(self, changes: int, oldest: float | None, batch: int) -> None:
        self.changes += changes
        if oldest is not None:
            self.oldest = oldest if self.oldest is None else min(self.oldest, oldest)
        self.batches.add(batch)


class GoldState:
    """The three state tables of one warehouse."""

    def __init__(self, wh: Warehouse) -> None:
        self.keys, self.pending, self.progress, self.later = (
            wh.gold_state(name) for name in ("keys", "pending", "progress", "later")
        )

    def ensure(self, spark: SparkSession) -> None:
        from pyspark.sql.types import StructType

        for ref, ddl in ((self.keys, KEYS_DDL), (self.pending, PENDING_DDL), (self.progress, PROGRESS_DDL)):
            if not ref.exists(spark):
                spark.sql(f"CREATE TABLE IF NOT EXISTS {ref.sql} ({ddl}) USING DELTA")
                continue
            have = set(ref.read(spark).columns)  # a warehouse an earlier version wrote: its new columns
            fields = StructType.fromDDL(ddl).fields
            added = [f"{f.name} {f.dataType.simpleString()}" for f in fields if f.name not in have]
            if added:
                spark.sql(f"ALTER TABLE {ref.sql} ADD COLUMNS ({', '.join(added)})")

    def newest_batch(self, spark: SparkSession) -> int:
        """The newest batch any state table holds rows of (-1: none): a stream of another checkpoint numbers its
        batches above it (:func:`pipelines.gold.stream.StateBases`)."""
        from pyspark.sql import functions as F

        newest = -1
        for ref in (self.keys, self.pending, self.progress, self.later):
            if ref.exists(spark):
                got = ref.read(spark).agg(F.max("batch")).first()[0]
                newest = max(newest, -1 if got is None else int(got))
        return newest

    # ---------------------------------------------------------------- key state

    def key_state(self, spark: SparkSession, wanted: DataFrame, batch_id: int, small: bool = False) -> DataFrame:
        """Key state as batch ``batch_id`` finds it, for the (``mirror``, ``k``) pairs of ``wanted``:
        ``s_seq``, ``s_live``, ``s_vh`` of the newest row of an earlier batch, and a tombstone's ``s_img_seq``
        (the sequence of the image a soft-deleted row holds), ``s_event_time`` and ``s_queue_pos``. ``small``:
        ``wanted`` is broadcast (key state is not shuffled to meet it)."""
        from pyspark.sql import functions as F

        wanted = F.broadcast(wanted) if small else wanted
        rows = self.keys.read(spark).where(F.col("batch") < batch_id).join(wanted, ["mirror", "k"], "left_semi")
        fields = ("seq", "live", "vh", "batch", "img_seq", "event_time", "queue_pos")
        newest = F.max_by(F.struct(*fields), F.struct("batch", "written"))
        return (
            rows.groupBy("mirror", "k")
            .agg(newest.alias("s"))
            .select("mirror", "k", *[F.col(f"s.{f}").alias(f"s_{f}") for f in fields])
        )

    def current_keys(self, spark: SparkSession) -> DataFrame:
        """Every key's newest state (``mirror``, ``k``, ``seq``, ``live``, ``vh``, ``queue_pos``,
        ``event_time``): what ``lakecdc status`` counts and a retried batch must leave as it was."""
        from pyspark.sql import functions as F

        fields = ("seq", "live", "vh", "queue_pos", "event_time")
        newest = F.max_by(F.struct(*fields), F.struct("batch", "written"))
        return self.keys.read(spark).groupBy("mirror", "k").agg(newest.alias("s")).select("mirror", "k", "s.*")

    def deleted_keys(self, spark: SparkSession) -> dict[str, tuple[int, tuple[str, str, float | None]]]:
        """Per mirror: how many of its keys are deleted (tombstones), and the newest delete's sequence, queue
        position and source commit time (epoch seconds)."""
        from pyspark.sql import functions as F

        last = F.max_by(
            F.struct("seq", "queue_pos", (F.unix_micros("event_time") / 1e6).alias("t")),
            F.struct("event_time", "queue_pos"),
        )
        rows = (
            self.current_keys(spark)
            .where("NOT live")
            .groupBy("mirror")
            .agg(F.count(F.lit(1)).alias("n"), last.alias("last"))
            .collect()
        )
        return {r["mirror"]: (r["n"], (r["last"]["seq"], r["last"]["queue_pos"], r["last"]["t"])) for r in rows}

    def append_keys(self, rows: DataFrame) -> None:
        _append(_shaped(rows, KEYS_DDL), self.keys)

    # ---------------------------------------------------------------- pending changes

    def append_pending(self, rows: DataFrame) -> None:
        _append(_shaped(rows, PENDING_DDL), self.pending)

    def pending_changes(self, spark: SparkSession, mirrors: dict[str, int], batch_id: int) -> DataFrame:
        """The changes pending for ``mirrors`` (mirror → the batch its pending changes are applied through),
        from batches before ``batch_id``, one copy of each."""
        from pyspark.sql import functions as F

        through = F.expr("CASE mirror " + " ".join(f"WHEN {lit(m)} THEN {int(b)}" for m, b in mirrors.items()) + " END")
        rows = self.pending.read(spark).where(F.col("mirror").isin(list(mirrors)) & (F.col("batch") < batch_id))
        return rows.where(F.col("batch") > through).dropDuplicates(list(CHANGE_IDENTITY))

    def record_applied(self, spark: SparkSession, mirrors: Iterable[str], batch_id: int) -> None:
        """Progress: the pending changes of ``mirrors`` are applied through ``batch_id``."""
        import datetime as _dt

        now = _dt.datetime.now(_dt.timezone.utc)
        rows = [(m, int(batch_id), now) for m in sorted(mirrors)]
        if rows:
            _append(spark.createDataFrame(rows, PROGRESS_DDL), self.progress)

    def progress_now(self, spark: SparkSession) -> dict[str, int]:
        """Per mirror: the batch its pending changes are applied through."""
        from pyspark.sql import functions as F

        rows = self.progress.read(spark).groupBy("mirror").agg(F.max("batch").alias("batch")).collect()
        return {r["mirror"]: r["batch"] for r in rows}

    def pending_now(
        self, spark: SparkSession, through: dict[str, int], before: int | None = None
    ) -> dict[str, Pending]:
        """Per mirror: its changes still waiting (of batches after ``through[mirror]``, and before batch
        ``before`` where given)."""
        from pyspark.sql import functions as F

        pending = self.pending.read(spark)
        rows = (
            (pending if before is None else pending.where(F.col("batch") < before))
            .dropDuplicates(list(CHANGE_IDENTITY))
            .groupBy("mirror", "batch")
            .agg(F.count(F.lit(1)).alias("n"), (F.min(F.unix_micros("ingest_time")) / 1e6).alias("oldest"))
            .collect()
        )
        out: dict[str, Pending] = {}
        for r in rows:
            if r["batch"] > through.get(r["mirror"], -2):
                out.setdefault(r["mirror"], Pending()).add(r["n"], r["oldest"], r["batch"])
        return out

    # ---------------------------------------------------------------- changes of new tables that wait

    def later_round(self, spark: SparkSession) -> tuple[int, int | None]:
        """The newest round of the ``later`` table and its batch (-1 and None: nothing ever waited)."""
        from pyspark.sql import functions as F

        if not self.later.exists(spark):
            return -1, None
        row = self.later.read(spark).agg(F.max(F.struct("round", "batch")).alias("m")).first()["m"]
        return (-1, None) if row is None else (row["round"], row["batch"])

    def later_changes(self, spark: SparkSession, after_round: int) -> DataFrame:
        """The waiting changes of rounds after ``after_round``, one copy of each, as silver gave them."""
        from pyspark.sql import functions as F

        rows = self.later.read(spark).where(F.col("round") > after_round)
        return rows.dropDuplicates(["bronze_position", "change_index"]).drop("round", "batch")

    def append_later(self, rows: DataFrame, round_: int, batch_id: int) -> None:
        from pyspark.sql import functions as F

        rows = rows.withColumn("round", F.lit(round_).cast("bigint")).withColumn(
            "batch", F.lit(batch_id).cast("bigint")
        )
        self.later.save(rows.write.format("delta").mode("append").option("mergeSchema", "true"))

    # ---------------------------------------------------------------- compaction

    def compact(self, spark: SparkSession, batch_id: int) -> None:
        """Rewrite the state tables with what readers still need: the newest key row of every key (and
        every row of batch ``batch_id`` or later: a retried batch's first attempt), the pending changes
        not applied yet (one copy each), and each mirror's newest progress row."""
        from pyspark.sql import functions as F

        keys = self.keys.read(spark)
        newest = F.max_by(
            F.struct(*[c for c in KEYS_COLUMNS if c not in ("mirror", "k")]), F.struct("batch", "written")
        )
        kept = (
            keys.where(F.col("batch") < batch_id)
            .groupBy("mirror", "k")
            .agg(newest.alias("s"))
            .select("mirror", "k", "s.*")
            .select(*KEYS_COLUMNS)
            .unionByName(keys.where(F.col("batch") >= batch_id).select(*KEYS_COLUMNS))
        )
        _overwrite(kept, self.keys)
        through = self.progress_now(spark)
        progress = spark.createDataFrame([(m, b, None) for m, b in sorted(through.items())], PROGRESS_DDL).withColumn(
            "applied_at", F.current_timestamp()
        )
        marks = progress.select(F.col("mirror").alias("m"), F.col("batch").alias("through"))
        pending = (
            self.pending.read(spark)
            .join(marks, F.col("mirror") == F.col("m"), "left")
            .where(F.col("through").isNull() | (F.col("batch") > F.col("through")))
            .dropDuplicates(list(CHANGE_IDENTITY))
            .select(*PENDING_COLUMNS)
        )
        _overwrite(pending, self.pending)
        _overwrite(progress, self.progress)
        log.info("gold: state tables compacted at batch %d", batch_id)


def _shaped(rows: DataFrame, ddl: str) -> DataFrame:
    """``rows`` as a state table's columns, each cast to its type (a change's ``event_time`` may still be
    the text silver decodes before it writes its table)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    return rows.select(*[F.col(f.name).cast(f.dataType).alias(f.name) for f in StructType.fromDDL(ddl).fields])


def _append(rows: DataFrame, ref: TableRef) -> None:
    ref.save(rows.write.format("delta").mode("append"))


def _overwrite(rows: DataFrame, ref: TableRef) -> None:
    """Replace a state table with ``rows``, computed once first: they are read from the table itself."""
    copy = rows.localCheckpoint()
    ref.save(copy.write.format("delta").mode("overwrite"))


# ---------------------------------------------------------------- adopting a mirror an earlier version wrote


def adopt_mirror(
    spark: SparkSession, state: GoldState, ident: MirrorIdentity, key: tuple[str, ...], batch_id: int
) -> None:
    """Key state for a mirror written before key state existed: a live row per mirror row (its key, ``_seq``
    and values' hashes) and a deleted one per row of its tombstones table, stamped as of before the batch;
    then the mirror records :data:`KEY_STATE_PROPERTY`. Done again after a crash, it appends the same rows."""
    from pyspark.sql import functions as F

    mirror = ident.ref.read(spark)
    types = {f.name: f.dataType.simpleString() for f in mirror.schema.fields}
    data = [c for c in mirror.columns if c not in key and c not in SYSTEM_COLUMNS]

    def key_text(frame_types: dict[str, str]) -> str:
        return "to_json(array(" + ", ".join(canonical_text(q(k), frame_types[k]) for k in key) + "))"

    hashes = "map(" + ", ".join(f"{lit(c)}, xxhash64({canonical_text(q(c), types[c])})" for c in data) + ")"
    common = [F.lit(ident.state_key).alias("mirror"), F.lit(batch_id - 1).cast("bigint").alias("batch"),
              F.current_timestamp().alias("written")]  # fmt: skip
    live = mirror.select(
        *common,
        F.expr(key_text(types)).alias("k"),
        F.col("_seq").alias("seq"),
        F.lit(True).alias("live"),
        F.expr(hashes if data else "cast(map() AS map<string,bigint>)").alias("vh"),
        "_queue_pos",
        "_event_time",
    ).withColumnsRenamed({"_queue_pos": "queue_pos", "_event_time": "event_time"})
    rows = live
    if ident.tombstones is not None and ident.tombstones.exists(spark):
        tombs = ident.tombstones.read(spark)
        tomb_types = {f.name: f.dataType.simpleString() for f in tombs.schema.fields}
        rows = rows.unionByName(
            tombs.select(
                *common,
                F.expr(key_text(tomb_types)).alias("k"),
                F.col("_seq").alias("seq"),
                F.lit(False).alias("live"),
                F.expr("cast(NULL AS map<string,bigint>)").alias("vh"),
                F.col("_queue_pos").alias("queue_pos"),
                F.col("_event_time").alias("event_time"),
            )
        )
    state.append_keys(rows)
    spark.sql(f"ALTER TABLE {ident.ref.sql} SET TBLPROPERTIES ({lit(KEY_STATE_PROPERTY)} = '-1')")
    log.info("gold: %s: adopted into key state (a mirror written before it)", ident.mirror_name)


def state_since(props: dict[str, str] | None) -> int | None:
    """The batch since which a mirror's keys are in key state (None: not yet: adopt it)."""
    value = (props or {}).get(KEY_STATE_PROPERTY)
    return int(value) if value not in (None, "") else None
