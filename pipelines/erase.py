"""``lakecdc erase``: one key's values out of every layer, with an audit row (GDPR erasure requests).

What it removes, for the key of one mirror (found as ``lakecdc why`` finds it, :mod:`pipelines.why`):

* **bronze**: every raw message that holds one of the key's changes is redacted: its value becomes
  :data:`REDACTED_PREFIX` and the erasure's id (bytes no decoder reads: a rebuild quarantines it, so
  ``messages in = changes + heartbeats + DDL + quarantined + skipped`` still holds), its Kafka key and headers
  NULL. A message that held other keys' changes too (a Canal or Maxwell batch) is redacted whole: the plan
  counts those changes (the mirrors keep them; a rebuild from bronze would not);
* **silver**: the key's rows of ``changes``; a message left with no silver row gets one ``quarantine`` row
  (stage ``erase``, no excerpt), so every bronze row still has a silver row; ``quarantine`` rows of those
  messages (gold's, with their excerpt and bad value);
* **gold**: the key's row of the mirror (a soft-deleted one too), its SCD2 history rows and tombstones,
  its key state, its changes waiting in ``pending`` and ``later``.

Bronze and silver ``changes`` are read by streams (silver's, gold's): they are rewritten with Delta's
``dataChange=false`` (``replaceWhere`` on the messages' pointers), so no stream reads the rewrite as new
data or fails on it. Every table touched then has its deletion vectors purged (``REORG TABLE ... APPLY
(PURGE)``): the current files no longer hold the values; the files before the erasure still do until
``VACUUM`` (after each table's ``delta.deletedFileRetentionDuration``, default 7 days), and the Delta log's
commit files keep min/max statistics of the old files until log cleanup (``delta.logRetentionDuration``,
default 30 days). The erasure prints both.

The audit row goes to ``erasures`` (next to bronze: a rebuild keeps it): who asked, when, why, the mirror,
a hash of the key (never the key itself), the rows removed per table and each table's version after it.
A rebuild cannot bring the key back: bronze no longer holds it.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pipelines.gold.state import GoldState
from pipelines.layout import QUARANTINE_FIELDS
from pipelines.sql import lit
from pipelines.warehouse import TableRef, Warehouse
from pipelines.why import KeyTarget, key_changes, key_target

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Row, SparkSession

    from pipelines.config import PipelineConfig

#: A redacted bronze message's value starts so: no format decodes it (not JSON, not Avro's framing).
REDACTED_PREFIX = b"lakecdc-erased:"
ERASURES_DDL = (
    "erasure_id STRING, requested_by STRING, reason STRING, requested_at TIMESTAMP, mirror STRING, "
    "key_columns ARRAY<STRING>, key_hash STRING, removed MAP<STRING, BIGINT>, versions MAP<STRING, BIGINT>, "
    "vacuum_after TIMESTAMP"
)
#: Delta's default ``delta.deletedFileRetentionDuration``.
DEFAULT_RETENTION = dt.timedelta(days=7)


def erasures_ref(wh: Warehouse) -> TableRef:
    """``<warehouse>/bronze/erasures``, or ``[bronze_]erasures`` in the bronze schema: beside the raw
    messages, so a rebuild (which drops silver and gold) keeps the record."""
    if not wh.catalog:
        return TableRef(path=f"{wh.root}/bronze/erasures")
    return TableRef(name=f"{wh.catalog}.{wh.schemas['bronze']}.{wh.prefix('bronze')}erasures")


def key_hash(target: KeyTarget) -> str:
    """What the audit row keeps of the key: a hash, never the value."""
    return hashlib.sha256(f"{target.state_key}\x00{target.key_text}".encode()).hexdigest()


@dataclass
class ErasePlan:
    target: KeyTarget
    positions: list[str] = field(default_factory=list)  # bronze pointers of the messages that hold the key
    pairs: list[tuple[str, int]] = field(default_factory=list)  # (pointer, change index) of the key's changes
    counts: dict[str, int] = field(default_factory=dict)  # table → rows to remove (bronze: to redact)
    others_in_messages: int = 0  # other changes in those messages (redacted with them)
    tables: dict[str, TableRef] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not any(self.counts.values())

    def to_json(self) -> dict:
        return {
            "table": self.target.name,
            "key_columns": list(self.target.key),
            "messages": len(self.positions),
            "would_remove": self.counts,
            "other_changes_in_those_messages": self.others_in_messages,
        }


def _in(column: str, values: list[str]) -> str:
    return f"{column} IN ({', '.join(lit(v) for v in values)})" if values else "false"


def _pairs_sql(pairs: list[tuple[str, int]]) -> str:
    if not pairs:
        return "false"
    return " OR ".join(f"(bronze_position = {lit(p)} AND change_index = {int(i)})" for p, i in pairs)


def plan_erase(
    spark: SparkSession, wh: Warehouse, cfg: PipelineConfig | None, table: str, values: Mapping[str, str]
) -> ErasePlan:
    """What an erasure of the key would remove, table by table (nothing is changed)."""
    from pyspark.sql import functions as F

    target = key_target(spark, wh, table, values)
    changes = key_changes(spark, wh, cfg, target).where("op != 'TRUNCATE'")
    rows = changes.select("bronze_position", "change_index", "before", "after").collect()
    plan = ErasePlan(target, sorted({r[0] for r in rows}), sorted({(r[0], int(r[1])) for r in rows}))
    found = undecoded_with(spark, wh, distinctive_values(target, rows))
    plan.positions = sorted(set(plan.positions) | set(found))
    state = GoldState(wh)
    mine = f"mirror = {lit(target.state_key)} AND k = {lit(target.key_text)}"
    candidates: dict[str, tuple[TableRef, str]] = {
        "bronze": (wh.bronze, _in("position", plan.positions)),
        "silver.changes": (wh.silver("changes"), _pairs_sql(plan.pairs)),
        "silver.quarantine": (wh.silver("quarantine"), _in("bronze_position", plan.positions)),
        "mirror": (target.ref, target.typed_match()),
        "history": (wh.side_of(target.ref, "history"), target.typed_match()),
        "tombstones": (wh.side_of(target.ref, "tombstones"), target.typed_match()),
        "gold.keys": (state.keys, mine),
        "gold.pending": (state.pending, mine),
        "gold.later": (state.later, _pairs_sql(plan.pairs)),
    }
    for name, (ref, condition) in candidates.items():
        if condition == "false" or not ref.exists(spark):
            continue
        plan.tables[name] = ref
        plan.counts[name] = ref.read(spark).where(condition).count()
    if plan.positions:
        held = wh.silver("changes").read(spark).where(F.expr(_in("bronze_position", plan.positions)))
        plan.others_in_messages = max(0, held.count() - plan.counts.get("silver.changes", 0))
    return plan


#: A value shorter than this is not searched for in messages silver could not decode (``1`` is everywhere).
MIN_SEARCHED = 6


def distinctive_values(target: KeyTarget, rows: Sequence[Row]) -> list[str]:
    """The key's values, and every value its changes carry, of :data:`MIN_SEARCHED` characters or more."""
    found = set(target.values.values())
    for r in rows:
        for image in (r["before"], r["after"]):
            found |= {v for v in (image or {}).values() if v is not None}
    return sorted(v for v in found if len(v) >= MIN_SEARCHED)


def undecoded_with(spark: SparkSession, wh: Warehouse, values: list[str]) -> list[str]:
    """Bronze pointers of messages silver could not decode (they name no key) whose raw bytes hold one of
    ``values``: a quarantined message of the key is found by what it holds."""
    from pyspark.sql import functions as F

    quarantine = wh.silver("quarantine")
    if not values or not quarantine.exists(spark):
        return []
    held = quarantine.read(spark).where("stage = 'silver'").select("bronze_position").distinct()
    raw = F.col("value").cast("string")
    holds = F.lit(False)
    for v in values:
        holds = holds | (F.instr(raw, v) > 0)
    bronze = wh.bronze.read(spark).select(F.col("position").alias("bronze_position"), "value")
    return sorted(
        r[0] for r in bronze.join(held, "bronze_position", "left_semi").where(holds).select("bronze_position").collect()
    )


def render_plan(plan: ErasePlan) -> str:
    t = plan.target
    lines = [f"erase {t.name} key {', '.join(f'{c}=<given>' for c in t.key)}: {len(plan.positions)} bronze messages"]
    for name, n in plan.counts.items():
        lines.append(f"  {name}: {n} rows" + (" (redacted)" if name == "bronze" else ""))
    if plan.others_in_messages:
        lines.append(
            f"  note: those messages hold {plan.others_in_messages} changes of other keys; bronze redacts them whole "
            "(the mirrors keep them, a rebuild from bronze would not)"
        )
    return "\n".join(lines)


def _version(spark: SparkSession, ref: TableRef) -> int:
    return int(spark.sql(f"DESCRIBE HISTORY {ref.sql} LIMIT 1").first()["version"])


def _retention(spark: SparkSession, ref: TableRef) -> dt.timedelta:
    """A table's ``delta.deletedFileRetentionDuration`` (``interval N unit``), else Delta's default."""
    rows = spark.sql(f"SHOW TBLPROPERTIES {ref.sql}").collect()
    text = {r["key"]: r["value"] for r in rows}.get("delta.deletedFileRetentionDuration")
    if not text:
        return DEFAULT_RETENTION
    base = "TIMESTAMP'2000-01-01'"
    try:
        sql = f"SELECT CAST(unix_seconds({base} + {text}) - unix_seconds({base}) AS BIGINT) AS s"
        seconds = spark.sql(sql).first()["s"]
        return dt.timedelta(seconds=int(seconds))
    except Exception:  # noqa: BLE001 - a value Spark cannot read: Delta's default is the safe guess
        return DEFAULT_RETENTION


def erase_key(
    spark: SparkSession,
    wh: Warehouse,
    plan: ErasePlan,
    requested_by: str,
    reason: str | None = None,
    progress: Callable[[str], None] = lambda msg: None,
) -> dict:
    """Carry out ``plan`` (see the module docstring); returns the audit row and what VACUUM must still do."""
    from pyspark.sql import functions as F

    erasure_id = uuid.uuid4().hex[:16]
    now = dt.datetime.now(dt.timezone.utc)
    t = plan.target
    removed: dict[str, int] = {}
    touched: dict[str, TableRef] = {}
    if plan.counts.get("bronze"):
        bronze = plan.tables["bronze"]
        hit = F.expr(_in("position", plan.positions))
        marker = F.lit(REDACTED_PREFIX + erasure_id.encode())
        frame = bronze.read(spark)
        redacted = frame.withColumns(
            {
                "value": F.when(hit, marker).otherwise(F.col("value")),
                "key": F.when(hit, F.lit(None).cast("binary")).otherwise(F.col("key")),
                "headers": F.when(hit, F.lit(None).cast(frame.schema["headers"].dataType)).otherwise(F.col("headers")),
            }
        )
        _rewrite(bronze, redacted)
        removed["bronze"], touched["bronze"] = plan.counts["bronze"], bronze
        progress(f"erase: bronze: {plan.counts['bronze']} messages redacted")
    if plan.counts.get("silver.changes"):
        changes = plan.tables["silver.changes"]
        _rewrite(changes, changes.read(spark).where(f"NOT ({_pairs_sql(plan.pairs)})"))
        removed["silver.changes"], touched["silver.changes"] = plan.counts["silver.changes"], changes
        progress(f"erase: silver changes: {plan.counts['silver.changes']} rows removed")
    quarantine = wh.silver("quarantine")
    if plan.counts.get("silver.quarantine"):
        spark.sql(f"DELETE FROM {quarantine.sql} WHERE {_in('bronze_position', plan.positions)}")
        removed["silver.quarantine"], touched["silver.quarantine"] = plan.counts["silver.quarantine"], quarantine
    if plan.positions and quarantine.exists(spark):  # a message with no silver row left gets one: erased
        left = {r[0] for r in wh.silver("changes").read(spark).where(_in("bronze_position", plan.positions))
                .select("bronze_position").distinct().collect()}  # fmt: skip
        alone = [p for p in plan.positions if p not in left]
        if alone:
            bronze_rows = (
                wh.bronze.read(spark)
                .where(_in("position", alone))
                .select("source", "format", F.col("position").alias("bronze_position"), "queue_pos", "ingest_time")
            )
            rows = bronze_rows.withColumns(
                {"stage": F.lit("erase"), "reason": F.lit(f"erased by erasure {erasure_id}")}
            )
            shaped = rows.select(
                *[F.col(c) if c in rows.columns else F.lit(None).cast(ty).alias(c) for c, ty in QUARANTINE_FIELDS]
            )
            quarantine.save(shaped.write.format("delta").mode("append"))
            touched["silver.quarantine"] = quarantine
    for name in ("mirror", "history", "tombstones", "gold.keys", "gold.pending", "gold.later"):
        if not plan.counts.get(name):
            continue
        ref = plan.tables[name]
        condition = {
            "gold.keys": f"mirror = {lit(t.state_key)} AND k = {lit(t.key_text)}",
            "gold.pending": f"mirror = {lit(t.state_key)} AND k = {lit(t.key_text)}",
            "gold.later": _pairs_sql(plan.pairs),
        }.get(name, t.typed_match())
        spark.sql(f"DELETE FROM {ref.sql} WHERE {condition}")
        removed[name], touched[name] = plan.counts[name], ref
        progress(f"erase: {name}: {plan.counts[name]} rows removed")
    versions: dict[str, int] = {}
    vacuum: list[dict] = []
    for name, ref in touched.items():
        spark.sql(f"REORG TABLE {ref.sql} APPLY (PURGE)")
        versions[name] = _version(spark, ref)
        after = now + _retention(spark, ref)
        vacuum.append(
            {"table": name, "location": ref.path or ref.name, "vacuum_after": after.isoformat(timespec="seconds")}
        )
    vacuum_after = max((dt.datetime.fromisoformat(v["vacuum_after"]) for v in vacuum), default=now)
    audit = {
        "erasure_id": erasure_id,
        "requested_by": requested_by,
        "reason": reason,
        "requested_at": now,
        "mirror": t.name,
        "key_columns": list(t.key),
        "key_hash": key_hash(t),
        "removed": removed,
        "versions": versions,
        "vacuum_after": vacuum_after,
    }
    ref = erasures_ref(wh)
    ref.save(spark.createDataFrame([tuple(audit.values())], ERASURES_DDL).write.format("delta").mode("append"))
    return {**audit, "requested_at": now.isoformat(timespec="seconds"),
            "vacuum_after": vacuum_after.isoformat(timespec="seconds"), "vacuum": vacuum}  # fmt: skip


def _rewrite(ref: TableRef, rows: DataFrame) -> None:
    """Replace the table with ``rows`` (read from it) as a commit streams skip (``dataChange=false``): silver's
    stream reads bronze, gold's reads silver ``changes``. Delta refuses ``replaceWhere`` on data columns
    without a data change, so the whole table is rewritten (an erasure costs one rewrite of each)."""
    ref.save(rows.write.format("delta").mode("overwrite").option("dataChange", "false"))


def render_result(result: dict) -> str:
    lines = [
        f"erasure {result['erasure_id']} of {result['mirror']} by {result['requested_by']} at {result['requested_at']}"
    ]
    for name, n in result["removed"].items():
        lines.append(
            f"  {name}: {n} rows {'redacted' if name == 'bronze' else 'removed'}; version {result['versions'][name]}"
        )
    lines.append(
        "the current files no longer hold the values (deletion vectors purged); older files still do until VACUUM:"
    )
    for v in result["vacuum"]:
        lines.append(
            f"  VACUUM {v['location']} after {v['vacuum_after']} (lakecdc maintain, with its default retention)"
        )
    lines.append(
        "the Delta log's commit files keep min/max statistics of the old files until log cleanup "
        "(delta.logRetentionDuration, default 30 days); the source's own copy (Kafka, landing files) is outside lakecdc"
    )
    return "\n".join(lines)
