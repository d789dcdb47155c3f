"""The mirrors' half of ``lakecdc status`` (:mod:`pipelines.status`): every mirror's figures from a few Spark
jobs for the whole warehouse, without reading the mirrors where gold's own state holds the same figure.

Read once each, for all mirrors:

* gold's key state (``keys``, :mod:`pipelines.gold.state`), one aggregation: per mirror its tombstones (keys
  whose newest state is deleted) and, for a mirror with a key, its **rows** (keys whose newest state is live
  and still counts as gold counts it, :func:`pipelines.gold.decide.with_key_state`: not from before the
  mirror was made again, ``lakecdc.key_state_since``, nor covered by its TRUNCATE, ``lakecdc.truncated_seq``),
  its **newest change** (``seq``, ``queue_pos``, ``event_time`` of the newest of those rows or tombstones)
  and its **sources** (a live key's last change's queue position, ``<file>#<line>`` or ``<topic>:<partition>:
  <offset>``, names its file or partition: the source of bronze's rows there, one aggregation of bronze);
* ``pending`` and ``progress``: what waits for each mirror; ``dq_results``: the newest result of each check;
* each mirror's table properties and schema (its Delta log's metadata: no data file is read).

A mirror's own rows are scanned (one ``UNION ALL`` of the lineage columns of all such mirrors, grouped by
mirror) only where nothing else holds its figures: a mirror without a key (a multiset: key state has no
rows of it), a ``deletes: soft`` mirror (its soft-deleted rows are counted in the mirror alone, and its
deleted keys stay as rows), a mirror not yet in key state (written before it, not adopted), a mirror with
changes waiting for its next merge (key state already holds what they leave), and a mirror with a row whose
file or partition is not one source's alone in bronze (a replay's, or two sources over one directory).

A batch writes key state and its mirrors side by side: at rest they agree (while one writes, or failed until
its retry, its keys can count before its mirror holds them).
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pipelines.config import PipelineConfig
from pipelines.gold.due import Budget, Waiting, due_reason
from pipelines.gold.identity import SOURCE_IDENTITY_PROPERTY
from pipelines.gold.plan import table_config
from pipelines.gold.state import CHANGE_IDENTITY, KEY_STATE_PROPERTY, GoldState, state_since
from pipelines.gold.truncate import TRUNCATED_SEQ_PROPERTY
from pipelines.layout import SOFT_DELETE_COLUMNS
from pipelines.mirror_columns import table_properties
from pipelines.mirror_key import key_of
from pipelines.quality.storage import dq_results_ref
from pipelines.sql import q
from pipelines.warehouse import TableRef, Warehouse, state_key

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: The column that marks a ``deletes: soft`` mirror's deleted rows.
SOFT_DELETED = SOFT_DELETE_COLUMNS[0]


@dataclass
class MirrorStatus:
    name: str
    table: str
    rows: int
    tombstones: int | None
    last_seq: str | None
    last_queue_pos: str | None
    last_event_time: str | None
    quarantined_silver: int
    quarantined_gold: int
    dq: dict[str, Any] | None  # the last result of each check: checks, failed, failing, newest run_id, checked_at
    pending: int = 0  # changes waiting for the mirror's next merge (continuous runs)
    oldest_pending_seconds: float | None = None  # how long the oldest of them has waited
    max_delay_seconds: float | None = None  # the mirror's freshness budget
    soft_deleted: int | None = None  # rows marked deleted (``deletes: soft``; None: not a soft mirror)
    sources: list[str] = field(default_factory=list)  # the sources of its rows and of what waits for it
    complete_to: str | None = None  # the point its sources are known complete to, less what waits for it
    staleness_seconds: float | None = None  # now - complete_to
    freshness_seconds: float | None = None  # the strictest ``freshness`` of its sources
    stale: bool = False  # staleness_seconds over freshness_seconds
    waiting_reason: str | None = None  # why the waiting changes wait, or why they are due


@dataclass
class _Lineage:
    """What a mirror's rows say (a scan of its lineage columns, or key state): rows, soft-deleted rows,
    sources, newest change."""

    rows: int = 0
    soft_deleted: int | None = None
    sources: tuple[str, ...] = ()
    newest: tuple[str | None, str | None, float | None] | None = None


@dataclass
class _Waiting:
    """A mirror's changes in gold's ``pending`` table after the batch it is applied through."""

    changes: int = 0
    oldest: float | None = None  # epoch seconds: the oldest one's ingest time (its budget runs from it)
    since: float | None = None  # ... and the oldest one's source commit time (the mirror lacks it)
    sources: set[str] = field(default_factory=set)


@dataclass
class _KeyFacts:
    """What gold's shared state says of one mirror."""

    tombstones: int = 0
    last_deleted: tuple[str | None, str | None, float | None] | None = None  # seq, queue_pos, event time
    pending: _Waiting | None = None
    lineage: _Lineage | None = None  # its rows, sources and newest row from key state (None: not known there)


@dataclass(frozen=True)
class Counted:
    """Which key state rows of a mirror with a key stand for its rows, as gold counts them
    (:func:`pipelines.gold.decide.with_key_state`)."""

    since: int | None  # the batch the mirror was made in (``lakecdc.key_state_since``; -1: adopted)
    truncated_seq: str  # its highest TRUNCATE's sequence (``lakecdc.truncated_seq``; "": none)


def counted(props: Mapping[str, str], columns: Sequence[str]) -> Counted | None:
    """How key state counts a mirror's rows, or None where it cannot: no key, ``deletes: soft`` (its deleted
    keys stay as rows), or not yet in key state."""
    since = state_since(dict(props))
    if not key_of(props) or SOFT_DELETED in columns or since is None:
        return None
    return Counted(since, props.get(TRUNCATED_SEQ_PROPERTY, ""))


def _origin(position: str) -> str:
    """SQL: a queue position's file or Kafka partition (``<file>#<line>``, ``<topic>:<partition>:<offset>``
    less the last field)."""
    return f"regexp_replace({position}, '[#:][0-9]+$', '')"


def origins(spark: SparkSession, wh: Warehouse) -> DataFrame | None:
    """Per file or Kafka partition in bronze (:func:`_origin` of ``queue_pos``): its source, and how many
    sources it has (one aggregation of bronze's ``queue_pos`` and ``source``)."""
    from pyspark.sql import functions as F

    if not wh.bronze.exists(spark):
        return None
    return (
        wh.bronze.read(spark)
        .select(F.expr(_origin("queue_pos")).alias("origin"), "source")
        .groupBy("origin")
        .agg(F.min("source").alias("origin_source"), F.countDistinct("source").alias("origin_sources"))
    )


def key_facts(
    spark: SparkSession,
    wh: Warehouse,
    mirrors: Mapping[str, Counted] | None = None,
    positions: DataFrame | None = None,
) -> dict[str, _KeyFacts]:
    """Per mirror (state key): its deleted keys and the changes waiting for it (:mod:`pipelines.gold.state`),
    and for ``mirrors`` (state key → how its rows are counted) its rows, sources and newest row where key
    state and bronze's ``positions`` (:func:`origins`) tell them: one aggregation of key state, one of the
    pending changes, one of progress."""
    from pyspark.sql import functions as F

    state = GoldState(wh)
    if not state.keys.exists(spark):
        return {}
    facts = _key_rows(spark, state, dict(mirrors or {}), positions)
    if not state.pending.exists(spark):
        return facts
    through = state.progress_now(spark) if state.progress.exists(spark) else {}
    rows = (
        state.pending.read(spark)
        .dropDuplicates(list(CHANGE_IDENTITY))
        .groupBy("mirror", "batch")
        .agg(
            F.count(F.lit(1)).alias("n"),
            (F.min(F.unix_micros("ingest_time")) / 1e6).alias("oldest"),
            (F.min(F.unix_micros("event_time")) / 1e6).alias("since"),
            F.collect_set("source").alias("sources"),
        )
        .collect()
    )
    for r in rows:
        if r["batch"] <= through.get(r["mirror"], -2):
            continue  # applied: a merge read it through its batch
        w = facts.setdefault(r["mirror"], _KeyFacts()).pending or _Waiting()
        facts[r["mirror"]].pending = w
        w.changes += r["n"]
        w.oldest = _min(w.oldest, r["oldest"])
        w.since = _min(w.since, r["since"])
        w.sources |= {s for s in r["sources"] if s}
    for f in facts.values():
        if f.pending is not None:
            f.lineage = None  # key state holds what its waiting changes leave, the mirror not yet
    return facts


def _key_rows(
    spark: SparkSession, state: GoldState, mirrors: dict[str, Counted], positions: DataFrame | None
) -> dict[str, _KeyFacts]:
    """One aggregation of every key's newest state: per mirror its tombstones and newest delete, and for
    ``mirrors`` its live keys that count, their sources (``positions``) and the newest of them."""
    from pyspark.sql import functions as F

    newest = F.max_by(F.struct("seq", "live", "batch", "queue_pos", "event_time"), F.struct("batch", "written"))
    keys = state.keys.read(spark).groupBy("mirror", "k").agg(newest.alias("s")).select("mirror", "s.*")
    wanted = [(m, c.since if c.since is not None and c.since > 0 else None, c.truncated_seq or None)
              for m, c in sorted(mirrors.items())]  # fmt: skip
    counts = "false"
    if wanted:
        marks = spark.createDataFrame(wanted, "mirror STRING, since BIGINT, truncated STRING")
        keys = keys.join(F.broadcast(marks.withColumn("wanted", F.lit(True))), "mirror", "left")
        counts = "live AND coalesce(wanted, false) AND coalesce(batch >= since, true) AND "
        counts += "NOT coalesce(seq <= truncated, false)"
    if positions is not None and wanted:
        keys = keys.withColumn("origin", F.expr(_origin("queue_pos"))).join(positions, "origin", "left")
    else:
        keys = keys.withColumn("origin_source", F.lit(None).cast("string")).withColumn("origin_sources", F.lit(0))
    keys = keys.withColumn("counts", F.expr(counts)).withColumn("known", F.expr("coalesce(origin_sources = 1, false)"))
    row = F.struct("seq", "queue_pos", (F.unix_micros("event_time") / 1e6).alias("t"))
    order = F.struct("event_time", "queue_pos")
    rows = (
        keys.groupBy("mirror")
        .agg(
            F.count_if(~F.col("live")).alias("tombstones"),
            F.max_by(row, F.when(~F.col("live"), order)).alias("last_deleted"),
            F.count_if("counts").alias("rows"),
            F.max_by(row, F.when(F.col("counts"), order)).alias("newest"),
            F.collect_set(F.when(F.col("counts") & F.col("known"), F.col("origin_source"))).alias("sources"),
            F.count_if(F.col("counts") & ~F.col("known")).alias("unknown"),
        )
        .collect()
    )
    out = {}
    for r in rows:
        f = out[r["mirror"]] = _KeyFacts(r["tombstones"], _row(r["last_deleted"]) if r["tombstones"] else None)
        if r["mirror"] in mirrors and not r["unknown"]:
            f.lineage = _Lineage(r["rows"], None, tuple(sorted(s for s in r["sources"] if s)), _row(r["newest"]))
    for m in mirrors:  # a mirror with a key and no key state row holds no row
        if m not in out:
            out[m] = _KeyFacts(lineage=_Lineage())
    return out


def _row(r: Any) -> tuple[str | None, str | None, float | None] | None:
    return (r["seq"], r["queue_pos"], r["t"]) if r is not None else None


def _min(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else min(a, b)


def mirror_metadata(spark: SparkSession, refs: Mapping[str, TableRef]) -> dict[str, tuple[dict[str, str], tuple]]:
    """Per mirror: its table properties and its columns, from its Delta log's metadata (no data file read)."""
    return {name: (table_properties(spark, ref), tuple(ref.read(spark).columns)) for name, ref in refs.items()}


def lineages(spark: SparkSession, refs: Mapping[str, TableRef]) -> dict[str, _Lineage]:
    """Every mirror's rows, soft-deleted rows, sources and newest row (by source commit time, then queue
    position), in one Spark job: a ``UNION ALL`` of the mirrors' lineage columns, grouped by mirror."""
    from pyspark.sql import functions as F

    parts = []
    for i, ref in enumerate(refs.values()):
        cols = set(ref.read(spark).columns)

        def col(name: str, sql_type: str, cols: set[str] = cols) -> str:
            return f"CAST({name} AS {sql_type})" if name in cols else f"CAST(NULL AS {sql_type})"

        soft = SOFT_DELETED in cols
        parts.append(
            f"SELECT {i} AS m, {col('_source', 'STRING')} AS src, {col('_seq', 'STRING')} AS seq, "
            f"{col('_queue_pos', 'STRING')} AS qp, {col('_event_time', 'TIMESTAMP')} AS t, "
            f"{q(SOFT_DELETED) if soft else 'CAST(NULL AS BOOLEAN)'} AS del, {str(soft).upper()} AS soft FROM {ref.sql}"
        )
    if not parts:
        return {}
    newest = F.max_by(F.struct(F.col("seq"), F.col("qp"), (F.unix_micros("t") / 1e6).alias("t")), F.struct("t", "qp"))
    rows = (
        spark.sql(" UNION ALL ".join(parts))
        .groupBy("m")
        .agg(
            F.count(F.lit(1)).alias("rows"),
            F.count_if(F.coalesce("del", F.lit(False))).alias("deleted"),
            F.max("soft").alias("soft"),
            F.collect_set("src").alias("sources"),
            newest.alias("newest"),
        )
        .collect()
    )
    names = list(refs)
    out = {}
    for r in rows:
        last = r["newest"]
        out[names[r["m"]]] = _Lineage(
            rows=r["rows"],
            soft_deleted=r["deleted"] if r["soft"] else None,
            sources=tuple(sorted(s for s in r["sources"] if s)),
            newest=(last["seq"], last["qp"], last["t"]) if last is not None else None,
        )
    return out


def mirror_status(
    spark: SparkSession,
    cfg: PipelineConfig,
    wh: Warehouse,
    name: str,
    ref: TableRef,
    meta: tuple[Mapping[str, str], Sequence[str]],
    lineage: _Lineage | None,
    quarantine: Mapping[tuple, int],
    keys: Mapping[str, _KeyFacts],
    dq: dict[str, Any] | None,
    now: float,
) -> tuple[MirrorStatus, float | None]:
    """The mirror's figures (``meta``: its properties and columns, :func:`mirror_metadata`; ``lineage``: what
    key state or a scan says of its rows), and the source commit time of its oldest waiting change (None:
    nothing waits)."""
    props, columns = meta
    lineage = lineage or _Lineage(soft_deleted=0 if SOFT_DELETED in columns else None)
    facts = keys.get(state_key(ref))
    if (facts is not None and (facts.tombstones or facts.pending)) or KEY_STATE_PROPERTY in props:
        tombstones, deleted = (facts.tombstones, facts.last_deleted) if facts else (0, None)
    else:  # a mirror written before key state, not adopted yet: its tombstones table
        tomb_ref = wh.side_of(ref, "tombstones")
        tombs = tomb_ref.read(spark) if tomb_ref.exists(spark) else None
        tombstones, deleted = (None, None) if tombs is None else (tombs.count(), _newestlineages(tombs))
    newest = max((x for x in (lineage.newest, deleted) if x), key=lambda x: (x[2] or 0, x[1] or ""), default=None)
    identity = props.get(SOURCE_IDENTITY_PROPERTY)
    db, _schema, table = json.loads(identity) if identity else (None, None, None)
    held = {stage: 0 for stage in ("silver", "gold")}
    for (stage, _src, q_db, q_table), n in quarantine.items():
        if identity and q_table == table and q_db == db and stage in held:
            held[stage] += n
    tc = table_config(cfg, props.get("lakecdc.source_table", name))
    pending = facts.pending if facts and facts.pending and facts.pending.changes else None
    budget = Budget(tc.max_delay if tc and tc.max_delay else cfg.gold_max_delay, cfg.gold_max_pending)
    m = MirrorStatus(
        name=name,
        table=ref.path or ref.name or "",
        rows=lineage.rows,
        tombstones=tombstones,
        last_seq=newest[0] if newest else None,
        last_queue_pos=newest[1] if newest else None,
        last_event_time=iso(newest[2]) if newest else None,
        quarantined_silver=held["silver"],
        quarantined_gold=held["gold"],
        dq=dq,
        pending=pending.changes if pending else 0,
        oldest_pending_seconds=round(max(0.0, now - pending.oldest), 3) if pending and pending.oldest else None,
        max_delay_seconds=budget.max_delay,
        soft_deleted=lineage.soft_deleted,
        sources=sorted(set(lineage.sources) | (pending.sources if pending else set())),
        waiting_reason=_why_waiting(pending, budget, now) if pending else None,
    )
    return m, (pending.since if pending else None)


def _why_waiting(pending: _Waiting, budget: Budget, now: float) -> str:
    """Why a mirror's changes wait (its freshness budget, :func:`pipelines.gold.due.due_reason`), or why
    they are due and what merges them."""
    reason = due_reason(Waiting(pending.changes, pending.oldest), budget, now)
    if reason:
        return f"due ({reason}): the gold stream's next batch or flush merges them"
    left = "" if pending.oldest is None else f", in {age(max(0.0, pending.oldest + budget.max_delay - now))}"
    return (
        f"within the freshness budget: merged at {budget.max_pending} changes waiting "
        f"or when the oldest has waited {age(budget.max_delay)}{left}"
    )


def _newestlineages(table: DataFrame) -> tuple[str | None, str | None, float | None] | None:
    """(``_seq``, ``_queue_pos``, ``_event_time`` in epoch seconds) of a table's newest row by source commit time."""
    from pyspark.sql import functions as F

    last = (
        table.orderBy(F.col("_event_time").desc_nulls_last(), F.col("_queue_pos").desc_nulls_last())
        .select("_seq", "_queue_pos", (F.unix_micros("_event_time") / 1e6).alias("t"))
        .first()
    )
    return (last["_seq"], last["_queue_pos"], last["t"]) if last else None


def last_dq(spark: SparkSession, wh: Warehouse) -> dict[str, dict[str, Any]]:
    """Per mirror, the newest result of each check on it, in one aggregation (per-batch expectations and
    run-end checks write under different run ids: the newest run alone may pass while an older check still
    fails)."""
    from pyspark.sql import functions as F

    ref = dq_results_ref(wh)
    if not ref.exists(spark):
        return {}
    last = F.max_by(
        F.struct("run_id", "success", F.unix_micros("checked_at").alias("t")), F.struct("checked_at", "batch_id")
    )
    rows = ref.read(spark).groupBy("table", "expectation").agg(last.alias("r")).collect()
    by_table: dict[str, list] = {}
    for r in rows:
        by_table.setdefault(r["table"], []).append((r["expectation"], r["r"]))
    out = {}
    for table, results in by_table.items():
        newest = max((r for _e, r in results), key=lambda r: r["t"])
        failing = sorted(e for e, r in results if r["success"] is not True)
        out[table] = {"run_id": newest["run_id"], "checked_at": iso(newest["t"] / 1e6), "checks": len(results),
                      "failed": len(failing), "failing": failing}  # fmt: skip
    return out


def iso(epoch: float | None) -> str | None:
    if epoch is None:
        return None
    return _dt.datetime.fromtimestamp(epoch, _dt.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    s = int(round(seconds))
    for unit, size, sub, sub_size in (("d", 86400, "h", 3600), ("h", 3600, "m", 60), ("m", 60, "s", 1)):
        if s >= size:
            return f"{s // size}{unit}{(s % size) // sub_size:02d}{sub}"
    return f"{s}s"
