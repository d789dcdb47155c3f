"""A consistent point per source: the mirror versions at which every transaction of the source is whole.

Each mirror is current to its own point, so a join of two mirrors read now can see half of a source
transaction (an order without its lines). After gold, the runner records (:func:`record_point`), per source:

* whether the source is **whole**: every transaction that changes read since the last point carry (a
  ``txn`` id: Debezium's ``transaction.id``, and the formats that carry one) has its END marker in silver
  ``heartbeats``, and, where the marker's raw message says how many events it had (Debezium's
  ``event_count``, read from the bronze row the marker points to), that many changes (``changes`` and
  ``skipped`` rows) are in silver. Formats without transaction markers are whole at every run's end;
* if whole, a new **point**: every mirror of the source at its current version (gold has applied
  everything silver holds when the runner records: a run until caught up, or a continuous run's end),
  and ``complete_up_to``, the source commit time of its newest change or heartbeat (a heartbeat says the
  source is complete up to its time);
* if not, a **held** row naming the transaction that holds it back: the last point stays what readers get.

The rows go to a small table, ``gold/_state/consistent`` (``[gold_]_lakecdc_consistent`` in a catalog):
``source, mirror, location, version, complete_up_to, through_ingest, recorded_at, held_by, held_detail``.
A point is the rows of a source's newest ``recorded_at`` with ``held_by`` NULL; one row per mirror, plus
one with ``mirror`` NULL that carries the source's marks. A mirror made after a point has no row in it:
as of that point it did not exist (version -1: no rows).

The point advances once per record (after each run's gold stage): a run that always stops in the middle of
a transaction keeps the point where it was. A record that would say what the newest one says (the same
versions and ``complete_up_to`` to the second, or the same transaction holding it back) is not written: a run
or replay that changed nothing commits nothing. Checking reads only what arrived since the last point (silver
rows with a newer ``ingest_time``: file statistics skip the older files).
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pipelines.export import export_table, mirror_refs
from pipelines.gold.profile import source_table_col
from pipelines.mirror_columns import table_properties
from pipelines.routing import route_shards, routes
from pipelines.silver import last_seen
from pipelines.sql import lit
from pipelines.warehouse import SOURCE_IDENTITY_PROPERTY, STATE_PREFIX, TableRef, Warehouse

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from pipelines.config import PipelineConfig

CONSISTENT_DDL = (
    "source STRING, mirror STRING, location STRING, version BIGINT, complete_up_to TIMESTAMP, "
    "through_ingest TIMESTAMP, recorded_at TIMESTAMP, held_by STRING, held_detail STRING"
)
END_DETAIL = "transaction END"


def consistent_ref(wh: Warehouse) -> TableRef:
    if not wh.catalog:
        return TableRef(path=f"{wh.root}/gold/_state/consistent")
    return TableRef(name=f"{wh.catalog}.{wh.schemas['gold']}.{wh.prefix('gold')}{STATE_PREFIX}consistent")


@dataclass
class Point:
    """A source's consistent point: when recorded, how complete, and each mirror's version."""

    source: str
    recorded_at: str | None = None
    complete_up_to: str | None = None
    versions: dict[str, int] = field(default_factory=dict)  # mirror name → Delta version
    locations: dict[str, str] = field(default_factory=dict)
    held_by: str | None = None  # the transaction holding the next point back (newest record), if any
    held_detail: str | None = None

    def to_json(self) -> dict:
        return {
            "source": self.source,
            "recorded_at": self.recorded_at,
            "complete_up_to": self.complete_up_to,
            "versions": self.versions,
            "held_by": self.held_by,
            "held_detail": self.held_detail,
        }


def _iso(value: dt.datetime | None) -> str | None:
    return None if value is None else value.isoformat(sep=" ", timespec="seconds")


def current_version(spark: SparkSession, ref: TableRef) -> int:
    """A table's newest version: the newest commit file of a local table's log, else DESCRIBE HISTORY."""
    if ref.path is not None:
        log = Path(ref.path) / "_delta_log"
        numbers = [int(p.stem) for p in log.glob("*.json") if p.stem.isdigit()]
        if numbers:
            return max(numbers)
    return int(spark.sql(f"DESCRIBE HISTORY {ref.sql} LIMIT 1").first()["version"])


def read_points(spark: SparkSession, wh: Warehouse) -> dict[str, Point]:
    """Each source's newest point, and what holds the next one back (if its newest record is held)."""
    from pyspark.sql import functions as F

    ref = consistent_ref(wh)
    if not ref.exists(spark):
        return {}
    rows = ref.read(spark)
    newest = rows.where("held_by IS NULL").groupBy("source").agg(F.max("recorded_at").alias("at"))
    chosen = rows.join(newest, "source").where(F.col("recorded_at") == F.col("at")).collect()
    points: dict[str, Point] = {}
    for r in chosen:
        p = points.setdefault(r["source"], Point(r["source"], _iso(r["recorded_at"])))
        if r["mirror"] is None:
            p.complete_up_to = _iso(r["complete_up_to"])
        else:
            p.versions[r["mirror"]], p.locations[r["mirror"]] = int(r["version"]), r["location"]
    last = rows.groupBy("source").agg(F.max_by(F.struct("held_by", "held_detail"), "recorded_at").alias("h")).collect()
    for r in last:
        if r["h"]["held_by"] is not None:
            p = points.setdefault(r["source"], Point(r["source"]))
            p.held_by, p.held_detail = r["h"]["held_by"], r["h"]["held_detail"]
    return points


def _since(frame: DataFrame, points: dict[str, dict]) -> DataFrame:
    """Rows of each source newer than its last point's ``through_ingest`` (pushed down as a filter)."""
    from pyspark.sql import functions as F

    parts = []
    for source, info in points.items():
        cond = F.col("source") == source
        if info.get("through") is not None:
            cond = cond & (F.col("ingest_time") > F.lit(info["through"]))
        parts.append(cond)
    out = parts[0]
    for p in parts[1:]:
        out = out | p
    return frame.where(out)


def open_transactions(spark: SparkSession, wh: Warehouse, since: dict[str, dict]) -> dict[str, tuple[str, str]]:
    """source → (transaction id, why it is not whole) of one transaction read since the last point that is not."""
    from pyspark.sql import functions as F

    changes = _since(wh.silver("changes").read(spark), since).where("txn IS NOT NULL").select("source", "txn")
    skipped_ref = wh.silver("skipped")
    if skipped_ref.exists(spark):
        skipped = _since(skipped_ref.read(spark), since).where("txn IS NOT NULL").select("source", "txn")
        changes = changes.unionByName(skipped)
    counted = changes.groupBy("source", "txn").agg(F.count(F.lit(1)).alias("n"))
    ends = (
        _since(wh.silver("heartbeats").read(spark), since)
        .where((F.col("detail") == END_DETAIL) & F.col("txn").isNotNull())
        .select("source", "txn", "bronze_position")
    )
    raw = F.col("value").cast("string")
    declared = F.coalesce(
        F.get_json_object(raw, "$.payload.event_count"), F.get_json_object(raw, "$.event_count")
    ).cast("bigint")
    bronze = wh.bronze.read(spark).select(F.col("position").alias("bronze_position"), declared.alias("declared"))
    ends = (
        ends.join(bronze, "bronze_position", "left").groupBy("source", "txn").agg(F.max("declared").alias("declared"))
    )
    rows = (
        counted.join(ends.withColumn("ended", F.lit(True)), ["source", "txn"], "full")
        .where("ended IS NULL OR (declared IS NOT NULL AND coalesce(n, 0) < declared)")
        .collect()
    )
    out: dict[str, tuple[str, str]] = {}
    for r in sorted(rows, key=lambda r: (r["source"], r["txn"])):
        if r["source"] in out or r["n"] is None:  # an END whose changes were all before the last point
            continue
        detail = (
            f"{r['n']} changes seen, END not yet"
            if r["ended"] is None
            else f"{r['n']} of {r['declared']} changes seen (END says {r['declared']})"
        )
        out[r["source"]] = (r["txn"], detail)
    return out


def source_mirrors(
    spark: SparkSession, wh: Warehouse, cfg: PipelineConfig, since: dict[str, dict]
) -> dict[str, dict[str, TableRef]]:
    """source → mirror name → table, for the mirrors of source tables a source's changes since its last
    point name (the mirrors of its earlier points are added by the caller)."""
    changes = _since(wh.silver("changes").read(spark), since)
    if routes(cfg):
        changes = route_shards(changes, cfg)
    pairs = changes.select("source", source_table_col().alias("identity")).distinct().collect()
    by_identity: dict[str, list[tuple[str, TableRef]]] = {}
    for name, ref in mirror_refs(spark, wh).items():
        identity = table_properties(spark, ref).get(SOURCE_IDENTITY_PROPERTY)
        if identity:
            by_identity.setdefault(json.dumps(json.loads(identity)), []).append((name, ref))
    out: dict[str, dict[str, TableRef]] = {s: {} for s in since}
    for r in pairs:
        for name, ref in by_identity.get(json.dumps(json.loads(r["identity"])), []):
            out.setdefault(r["source"], {})[name] = ref
    return out


def record_point(spark: SparkSession, cfg: PipelineConfig, wh: Warehouse) -> list[str]:
    """After gold: a new point for every whole source, a held row for each other (see the module
    docstring). Returns a line per source for the run's progress."""
    ref = consistent_ref(wh)
    if not wh.silver("changes").exists(spark):
        return []
    if not ref.exists(spark):
        spark.sql(f"CREATE TABLE IF NOT EXISTS {ref.sql} ({CONSISTENT_DDL}) USING DELTA")
    points = read_points(spark, wh)
    marks = last_seen(spark, wh)
    since = {}
    for s in cfg.sources:
        through = None
        p = points.get(s.name)
        if p is not None and p.recorded_at is not None:
            rows = ref.read(spark).where(f"source = {lit(s.name)} AND mirror IS NULL AND held_by IS NULL")
            through = rows.agg({"through_ingest": "max"}).first()[0]
        since[s.name] = {"through": through}
    if not since:
        return []
    held = open_transactions(spark, wh, since)
    mirrors = source_mirrors(spark, wh, cfg, since)
    refs = mirror_refs(spark, wh)
    now = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    rows, lines = [], []
    for source in since:
        last = points.get(source)
        if source in held:
            txn, detail = held[source]
            if last is not None and (last.held_by, last.held_detail) == (txn, detail):
                lines.append(f"consistent point of {source}: still held back by transaction {txn} ({detail})")
                continue  # recorded already: a run that changed nothing commits nothing
            rows.append((source, None, None, None, None, None, now, txn, detail))
            lines.append(f"consistent point of {source}: held back by transaction {txn} ({detail})")
            continue
        change_t, heartbeat_t, ingest_t = marks.get(source, (None, None, None))
        known = [t for t in (change_t, heartbeat_t) if t is not None]
        upto = dt.datetime.fromtimestamp(max(known), dt.timezone.utc).replace(tzinfo=None) if known else None
        through = dt.datetime.fromtimestamp(ingest_t, dt.timezone.utc).replace(tzinfo=None) if ingest_t else None
        members = dict(mirrors.get(source, {}))
        for name in (last or Point(source)).versions:
            if name in refs:
                members.setdefault(name, refs[name])
        versions = {name: current_version(spark, mref) for name, mref in sorted(members.items())}
        if last is not None and last.held_by is None and (last.complete_up_to, last.versions) == (_iso(upto), versions):
            lines.append(f"consistent point of {source}: unchanged, complete up to {_iso(upto)}")
            continue  # the newest point already says this: a run that changed nothing commits nothing
        rows.append((source, None, None, None, upto, through, now, None, None))
        for name, mref in sorted(members.items()):
            rows.append((source, name, mref.path or mref.name, versions[name], upto, through, now, None, None))
        lines.append(f"consistent point of {source}: {len(members)} mirrors, complete up to {_iso(upto)}")
    if rows:
        ref.save(spark.createDataFrame(rows, CONSISTENT_DDL).write.format("delta").mode("append"))
    return lines


class _AsOf(TableRef):
    """A mirror read as of one version (export reads through ``read``)."""

    def __init__(self, ref: TableRef, version: int) -> None:
        object.__setattr__(self, "path", ref.path)
        object.__setattr__(self, "name", ref.name)
        object.__setattr__(self, "_version", version)

    def read(self, spark: SparkSession) -> DataFrame:
        return spark.sql(f"SELECT * FROM {self.sql} VERSION AS OF {int(self._version)}")


def export_consistent(
    spark: SparkSession,
    wh: Warehouse,
    table: str | None = None,
    source: str | None = None,
    with_system_columns: bool = False,
) -> dict:
    """Every mirror of every source's point (or ``source``'s) as export prints it, each as of its version in
    the point; a mirror the point has no version for had no rows then. KeyError: no point yet, or a mirror
    two sources' points hold at different versions (name the ``source``)."""
    points = read_points(spark, wh)
    if source is not None:
        if source not in points or not points[source].recorded_at:
            raise KeyError(
                f"source {source!r} has no consistent point yet; with one: {', '.join(sorted(points)) or 'none'}"
            )
        points = {source: points[source]}
    versions: dict[str, int] = {}
    for p in points.values():
        for name, version in p.versions.items():
            if versions.get(name, version) != version:
                raise KeyError(f"mirror {name} is at different versions in two sources' points: name one with --source")
            versions[name] = version
    if not versions and not any(p.recorded_at for p in points.values()):
        raise KeyError("no consistent point yet (one is recorded after each run's gold stage)")
    refs = mirror_refs(spark, wh)
    if table is not None:
        refs = {n: r for n, r in refs.items() if n.lower() == table.lower()}
        if not refs:
            raise KeyError(f"no mirror named {table!r}")
    out = {}
    for name, ref in sorted(refs.items()):
        if name in versions:
            out[name] = export_table(spark, _AsOf(ref, versions[name]), with_system_columns)
        elif table is not None or source is None:
            out[name] = []  # made after the point: no rows as of it
    return out


def status_points(spark: SparkSession, wh: Warehouse) -> list[dict]:
    """Each source's consistent point as ``lakecdc status --json`` shows it (empty before the first)."""
    return [p.to_json() for _s, p in sorted(read_points(spark, wh).items())]


def status_lines(points: list[dict]) -> list[str]:
    """The consistent points as ``lakecdc status`` prints them."""
    lines = ["consistent points (lakecdc export --as-of-consistent):"] if points else []
    for p in points:
        if p["recorded_at"]:
            lines.append(
                f"  {p['source']}: complete up to {p['complete_up_to']}, {len(p['versions'])} mirrors "
                f"(recorded {p['recorded_at']})"
            )
        else:
            lines.append(f"  {p['source']}: no consistent point yet")
        if p["held_by"]:
            lines.append(f"    next point held back by transaction {p['held_by']}: {p['held_detail']}")
    return lines
