"""Quarantine after a fix: what is held, why, and its replay from bronze; one mirror rebuilt from bronze.

``silver.quarantine`` is append-only: silver and gold append to it while they run. What a replay resolves
is recorded beside it, in ``silver.quarantine_resolved`` (append-only too, so it never conflicts with their
appends), one row per group of quarantine rows resolved: the group's identity (:data:`IDENTITY`), how many
of its rows the replay resolved, when and by which run. A group's unresolved rows are its rows less the
resolved ones (:func:`unresolved_quarantine`): a change quarantined again after its replay (the same
identity) is a new unresolved row, never hidden by the old resolution.

A replay re-decodes the messages from bronze, which keeps every raw message with its position, Kafka's and
landing files' alike, under the current configuration, and appends their changes to ``silver.changes``
(one commit marked ``lakecdc:<run>-changes``) for gold to apply in its next batch like any other change:
in source order, against key state, so a replayed old change never overwrites a newer one, and under the
source that delivered it. Silver's counts (``batch_counts``) are not touched: the message stays counted
once, as quarantined, and its quarantine rows say it is resolved.

:func:`rebuild_plan` does the same for one mirror: every change bronze holds for its source table, after
its mirror, side tables and gold-state rows are dropped; the other mirrors keep theirs.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pipelines.config import PipelineConfig
from pipelines.delta_writes import append_once
from pipelines.export import mirror_refs
from pipelines.gold.profile import source_table_col
from pipelines.gold.state import GoldState
from pipelines.layout import CHANGES_COLUMNS
from pipelines.mirror_columns import table_properties
from pipelines.routing import route_shards
from pipelines.silver import decode_frame, ensure_silver
from pipelines.sql import lit
from pipelines.warehouse import SIDE_TABLES, SOURCE_IDENTITY_PROPERTY, TableRef, Warehouse, state_key

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

#: What names a group of quarantine rows: the same message, stage, table, rule and reason.
IDENTITY = ("stage", "source", "bronze_position", "db", "table", "rule", "reason")
RESOLVED_DDL = (
    "stage STRING, source STRING, bronze_position STRING, db STRING, `table` STRING, rule STRING, reason STRING, "
    "resolved BIGINT, resolved_at TIMESTAMP, resolved_by STRING, outcome STRING"
)
#: Longest raw excerpt ``list`` prints per row (``show`` prints the whole message).
LIST_EXCERPT_CHARS = 120


def readable(raw: bytes | bytearray | None) -> dict | None:
    """Raw bytes for people: ``{"encoding": "utf-8", "text": ...}`` when they decode as UTF-8, else
    ``{"encoding": "base64", "text": ...}``; never a Python ``b'…'`` repr."""
    if raw is None:
        return None
    raw = bytes(raw)
    try:
        return {"encoding": "utf-8", "text": raw.decode("utf-8")}
    except UnicodeDecodeError:
        return {"encoding": "base64", "text": base64.b64encode(raw).decode("ascii")}


def excerpt_text(value: dict | None, limit: int | None = None) -> str:
    """A :func:`readable` value as one line (``base64:`` in front of a binary one), cut at ``limit``."""
    if value is None:
        return "-"
    text = value["text"] if value["encoding"] == "utf-8" else "base64:" + value["text"]
    text = text.replace("\r", "\\r").replace("\n", "\\n")
    return text if limit is None or len(text) <= limit else text[: limit - 1] + "…"


def resolved_ref(wh: Warehouse) -> TableRef:
    return wh.silver("quarantine_resolved")


def unresolved_quarantine(spark: SparkSession, wh: Warehouse, include_resolved: bool = False) -> DataFrame | None:
    """The quarantine's groups (:data:`IDENTITY`) with rows not resolved yet, one row each: the identity,
    ``count`` (its unresolved rows), ``resolved`` (its resolved rows), and of its first row ``format``,
    ``queue_pos``, ``bad_value``, ``raw_excerpt``, ``ingest_time``. None: no quarantine table.
    ``include_resolved``: the groups resolved in full too (``count`` 0). What ``lakecdc status`` counts."""
    from pyspark.sql import functions as F

    ref = wh.silver("quarantine")
    if not ref.exists(spark):
        return None
    rows = ref.read(spark)
    groups = rows.groupBy(*IDENTITY).agg(
        F.count(F.lit(1)).alias("rows"),
        *(F.first(c, ignorenulls=True).alias(c) for c in ("format", "queue_pos", "bad_value", "raw_excerpt")),
        F.min("ingest_time").alias("ingest_time"),
    )
    done = resolved_ref(wh)
    if done.exists(spark):
        marks = done.read(spark).groupBy(*IDENTITY).agg(F.sum("resolved").alias("resolved_rows"))
        cond = [groups[c].eqNullSafe(marks[c]) for c in IDENTITY]
        groups = groups.join(marks, cond, "left").select(groups["*"], F.coalesce("resolved_rows", F.lit(0)).alias("r"))
    else:
        groups = groups.withColumn("r", F.lit(0))
    groups = groups.withColumn("resolved", F.least("r", "rows")).withColumn("count", F.col("rows") - F.col("resolved"))
    groups = groups.drop("r", "rows")
    return groups if include_resolved else groups.where("count > 0")


def filtered(
    groups: DataFrame,
    table: str | None = None,
    reason: str | None = None,
    rule: str | None = None,
    stage: str | None = None,
    position: str | None = None,
) -> DataFrame:
    """Groups of one table (``db.table``), whose reason holds ``reason`` (case-insensitive), of a rule, a stage
    or a bronze position."""
    from pyspark.sql import functions as F

    if table:
        groups = groups.where(F.lower(F.concat_ws(".", "db", "table")) == table.lower())
    if reason:
        groups = groups.where(F.lower("reason").contains(reason.lower()))
    if rule:
        groups = groups.where(F.col("rule") == rule)
    if stage:
        groups = groups.where(F.col("stage") == stage)
    if position:
        groups = groups.where(F.col("bronze_position") == position)
    return groups


def group_rows(groups: DataFrame, limit: int | None = None) -> list[dict]:
    """The groups as plain dicts, oldest first, each with its ``raw_excerpt`` made :func:`readable`."""
    frame = groups.orderBy("ingest_time", "queue_pos", "stage", "table")
    rows = frame.limit(limit).collect() if limit else frame.collect()
    out = []
    for r in rows:
        d = r.asDict()
        d["raw_excerpt"] = readable(d.get("raw_excerpt"))
        d["ingest_time"] = d["ingest_time"].isoformat() if d.get("ingest_time") else None
        out.append(d)
    return out


def bronze_message(spark: SparkSession, wh: Warehouse, position: str) -> dict | None:
    """The bronze row at ``position``: source, format, queue position, key and value made readable."""
    from pyspark.sql import functions as F

    rows = wh.bronze.read(spark).where(F.col("position") == position).limit(1).collect()
    if not rows:
        return None
    r = rows[0]
    return {
        "source": r["source"],
        "format": r["format"],
        "position": r["position"],
        "queue_pos": r["queue_pos"],
        "ingest_time": r["ingest_time"].isoformat() if r["ingest_time"] else None,
        "key": readable(r["key"]),
        "value": readable(r["value"]),
    }


# ---------------------------------------------------------------- replay


@dataclass
class Outcome:
    """What a replay does with one group: ``replay`` (its changes go to gold), ``still`` (the message is
    still rejected, ``reason`` says why; it stays unresolved), ``nothing`` (no row change now: resolved)."""

    group: dict
    outcome: str
    changes: int = 0
    reason: str | None = None


@dataclass
class ReplayPlan:
    """The changes a replay (or a one-table rebuild) appends to silver, and what it resolves."""

    outcomes: list[Outcome] = field(default_factory=list)
    changes: DataFrame | None = None  # silver ``changes`` rows to append
    change_count: int = 0
    # a one-table rebuild: what it drops
    mirror: str | None = None
    drops: list[TableRef] = field(default_factory=list)
    state_key: str | None = None

    @property
    def resolves(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.outcome != "still"]

    def to_json(self) -> dict:
        return {
            "mirror": self.mirror,
            "drops": [ref.name or ref.path for ref in self.drops],
            "changes": self.change_count,
            "groups": [
                {
                    **{k: o.group.get(k) for k in (*IDENTITY, "count")},
                    "outcome": o.outcome,
                    "changes": o.changes,
                    "still_reason": o.reason,
                }
                for o in self.outcomes
            ],
        }


def _decoded(spark: SparkSession, cfg: PipelineConfig, bronze: DataFrame) -> DataFrame:
    """Bronze rows decoded under ``cfg``, computed once (a local checkpoint: the decoder runs once)."""
    return decode_frame(bronze, cfg).localCheckpoint()


def _as_changes(decoded: DataFrame) -> DataFrame:
    """Decoded ``change`` rows in the columns of ``silver.changes`` (as silver writes them)."""
    from pyspark.sql import functions as F

    rows = decoded.where("kind = 'change'")
    return rows.select(*[F.to_timestamp("event_time").alias(c) if c == "event_time" else c for c in CHANGES_COLUMNS])


def _routed_ids(changes: DataFrame, cfg: PipelineConfig) -> DataFrame:
    """``bronze_position``, ``change_index``, routed ``db``/``table`` and source identity (``ident``) of changes."""
    routed = route_shards(changes, cfg)
    return routed.select("bronze_position", "change_index", "db", "table", source_table_col().alias("ident"))


def replay_plan(spark: SparkSession, cfg: PipelineConfig, wh: Warehouse, groups: list[dict]) -> ReplayPlan:
    """Re-decode the bronze messages of quarantine ``groups`` under ``cfg``: a silver group's message gives
    all its changes; a gold group's its changes of the group's table (after ``from`` routing)."""
    from pyspark.sql import functions as F

    plan = ReplayPlan()
    if not groups:
        return plan
    positions = sorted({g["bronze_position"] for g in groups if g["bronze_position"]})
    wanted = spark.createDataFrame([(p,) for p in positions], "position STRING")
    bronze = wh.bronze.read(spark).join(F.broadcast(wanted), "position", "left_semi")
    decoded = _decoded(spark, cfg, bronze)
    rejected = {
        r["bronze_position"]: r["reason"]
        for r in decoded.where("kind = 'quarantine'").select("bronze_position", "reason").collect()
    }
    changes = _as_changes(decoded)
    ids = _routed_ids(changes, cfg).collect()
    per_message: dict[str, list] = {}
    for r in ids:
        per_message.setdefault(r["bronze_position"], []).append(r)
    chosen: set[tuple[str, int]] = set()
    for g in groups:
        pos = g["bronze_position"]
        if pos in rejected:
            plan.outcomes.append(Outcome(g, "still", reason=rejected[pos]))
            continue
        mine = per_message.get(pos, [])
        if g["stage"] != "silver":  # gold quarantined changes of one table: those of the message
            same = [r for r in mine if (r["db"], r["table"]) == (g["db"], g["table"])]
            mine = same or mine
        chosen |= {(r["bronze_position"], r["change_index"]) for r in mine}
        plan.outcomes.append(Outcome(g, "replay" if mine else "nothing", changes=len(mine)))
    if chosen:
        keep = spark.createDataFrame(sorted(chosen), "bronze_position STRING, change_index INT")
        plan.changes = changes.join(F.broadcast(keep), ["bronze_position", "change_index"], "left_semi").select(
            *CHANGES_COLUMNS
        )
    plan.change_count = len(chosen)
    return plan


def rebuild_plan(spark: SparkSession, cfg: PipelineConfig, wh: Warehouse, name: str) -> ReplayPlan:
    """One mirror again from bronze: every change bronze holds for its source table, decoded under ``cfg``;
    the mirror, its side tables and its gold-state rows to drop; its unresolved quarantine groups (gold's, and
    silver's whose message now gives changes of this table only) to resolve. ``KeyError``: no such mirror."""
    from pyspark.sql import functions as F

    refs = mirror_refs(spark, wh)
    if name not in refs:
        known = ", ".join(sorted(refs)) or "none"
        raise KeyError(f"no mirror {name!r} in the warehouse (mirrors: {known})")
    ref = refs[name]
    identity = table_properties(spark, ref).get(SOURCE_IDENTITY_PROPERTY)
    if not identity:
        raise ValueError(f"mirror {name} records no source identity (written by an old lakecdc): use `rebuild --yes`")
    db, _schema, table = json.loads(identity)
    plan = ReplayPlan(mirror=name, state_key=state_key(ref))
    plan.drops = [r for r in (ref, *(wh.side_of(ref, kind) for kind in SIDE_TABLES)) if r.exists(spark)]
    decoded = _decoded(spark, cfg, wh.bronze.read(spark))
    changes = _as_changes(decoded)
    ids = _routed_ids(changes, cfg)
    keep = ids.where(F.col("ident") == F.lit(identity)).select("bronze_position", "change_index")
    plan.changes = changes.join(keep, ["bronze_position", "change_index"], "left_semi").localCheckpoint()
    plan.change_count = plan.changes.count()
    groups = unresolved_quarantine(spark, wh)
    if groups is not None:
        gold = groups.where(
            (F.col("stage") != "silver") & F.col("db").eqNullSafe(db) & F.col("table").eqNullSafe(table)
        )
        plan.outcomes += [Outcome(g, "replay") for g in group_rows(gold)]
        silver = group_rows(groups.where("stage = 'silver'"))
        if silver:
            by_message: dict[str, set[str | None]] = {}
            positions = [g["bronze_position"] for g in silver]
            for r in ids.where(F.col("bronze_position").isin(positions)).select("bronze_position", "ident").collect():
                by_message.setdefault(r["bronze_position"], set()).add(r["ident"])
            plan.outcomes += [
                Outcome(g, "replay") for g in silver if by_message.get(g["bronze_position"]) == {identity}
            ]
    return plan


def drop_mirror(spark: SparkSession, wh: Warehouse, plan: ReplayPlan) -> list[str]:
    """Drop a one-table rebuild's mirror and side tables, and its rows of gold's state (key state, waiting
    changes, progress); the other mirrors' rows stay. Returns what was dropped."""
    import shutil

    done = []
    for ref in plan.drops:
        if ref.path is not None:
            shutil.rmtree(ref.path, ignore_errors=True)
        else:
            spark.sql(f"DROP TABLE IF EXISTS {ref.sql}")
        done.append(ref.name or ref.path)
    state = GoldState(wh)
    for table in (state.keys, state.pending, state.progress):
        if table.exists(spark):
            spark.sql(f"DELETE FROM {table.sql} WHERE mirror = {lit(plan.state_key)}")
            done.append(f"{table.name or table.path} rows of {plan.state_key}")
    return done


def commit(spark: SparkSession, wh: Warehouse, plan: ReplayPlan, run: str, outcome: str = "replayed") -> None:
    """Append the plan's changes to ``silver.changes`` (marked ``lakecdc:<run>-changes``; gold applies them in
    its next batch), then record the groups it resolves in ``silver.quarantine_resolved``."""
    from datetime import datetime, timezone

    ensure_silver(spark, wh)
    if plan.changes is not None and plan.change_count:
        append_once(plan.changes, wh.silver("changes"), f"lakecdc:{run}-changes", check=True)
    rows = [
        (*(o.group.get(c) for c in IDENTITY), int(o.group.get("count") or 0), datetime.now(timezone.utc), run,
         outcome if o.outcome == "replay" else "no row change")
        for o in plan.resolves
    ]  # fmt: skip
    if rows:
        frame = spark.createDataFrame(rows, RESOLVED_DDL)
        append_once(frame, resolved_ref(wh), f"lakecdc:{run}-resolved", check=True)


def rebuild_mirror(
    spark: SparkSession, cfg: PipelineConfig, wh: Warehouse, name: str, run: str
) -> tuple[ReplayPlan, list[str]]:
    """One mirror again from bronze (:func:`rebuild_plan`): its changes appended to silver for gold's next batch
    (marked ``lakecdc:<run>-changes``), its quarantine groups resolved, then the mirror, side tables and gold-state
    rows dropped. Returns the plan and what was dropped. Run where no gold batch runs meanwhile: under the lease, or
    between a running stream's batches (:mod:`pipelines.run_requests`). Safe to repeat under a new ``run``: a copy
    of a change gold already applied is stale by its sequence, or (keyless) applied once by its id."""
    plan = rebuild_plan(spark, cfg, wh, name)
    commit(spark, wh, plan, run, outcome="rebuilt")
    return plan, drop_mirror(spark, wh, plan)


def appended_commit(spark: SparkSession, wh: Warehouse, run: str) -> tuple[int, int] | None:
    """The version of ``silver.changes`` that :func:`commit` appended for ``run`` and its number of files;
    None when it appended nothing."""
    history = spark.sql(f"DESCRIBE HISTORY {wh.silver('changes').sql} LIMIT 50")
    row = history.where(history["userMetadata"] == f"lakecdc:{run}-changes").select("version", "operationMetrics")
    found = row.first()
    if found is None:
        return None
    return int(found["version"]), int((found["operationMetrics"] or {}).get("numFiles") or 1)


def resolutions(spark: SparkSession, wh: Warehouse, identities: Sequence[dict]) -> list[dict]:
    """The recorded resolutions of the groups ``identities`` (``show``)."""
    from pyspark.sql import functions as F

    done = resolved_ref(wh)
    if not done.exists(spark) or not identities:
        return []
    positions = sorted({i["bronze_position"] for i in identities if i.get("bronze_position")})
    rows = done.read(spark).where(F.col("bronze_position").isin(positions)).orderBy("resolved_at").collect()
    out = []
    for r in rows:
        d = r.asDict()
        d["resolved_at"] = d["resolved_at"].isoformat() if d["resolved_at"] else None
        out.append(d)
    return out
