"""``lakecdc why``: every change one key of a mirror has had, oldest first, and what gold made of each.

It reads only what the pipeline keeps, each read filtered to the one table and key:

* silver ``changes``: the key's changes (a filter on the top-level ``table`` column, which Delta's file
  statistics skip by; the key is matched as gold names it, canonical text, so ``01`` and ``1`` of an INT
  are one key), each with its bronze position, source sequence, op, event time and transaction;
* ``quarantine``: gold's (and a ``drop`` rule's) rows of those bronze positions, with reason and rule;
* gold's key state (``keys``: per batch, the last fresh change of the key), ``pending`` and ``progress``
  (changes that wait for their mirror): whether each change was applied, in which batch, or stale against
  which sequence (gold's rule: older than the sequence key state held before its batch), or waits;
* the mirror's Delta log (the ``txn`` stamp or commit marker of each batch's write: which version wrote
  which batch) and ``DESCRIBE HISTORY`` (when), the key's current row and its SCD2 history rows.

Decisions are re-derived from key state, which keeps one row per key and batch until ``lakecdc maintain``
compacts it; a change decided before a compaction says so rather than guess.

Longer than 420 lines because it is three readings (the key's changes, gold's decisions, the mirror's
versions) and their rendering, which only make sense together.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pipelines.export import mirror_refs
from pipelines.gold.lookups import canonical_text
from pipelines.gold.profile import source_table_col
from pipelines.gold.state import GoldState
from pipelines.mirror_columns import source_types, table_properties
from pipelines.mirror_key import key_of
from pipelines.routing import SOURCE_TABLE_COLUMN, route_shards, routes
from pipelines.sql import EMPTY_MAP, ROW_IMAGE_SQL, convert_expr, lit, q
from pipelines.values import spark_type
from pipelines.warehouse import SOURCE_IDENTITY_PROPERTY, TableRef, Warehouse, state_key

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from pipelines.config import PipelineConfig

#: A gold write's ``txnAppId`` (``<app id>-<step>-<mirror>``) or commit marker (``lakecdc:<stamp>:<batch>``):
#: the step ``m`` is the mirror's MERGE or append, ``t`` a TRUNCATE's DELETE (pipelines.gold.batch.Step).
_STAMP = re.compile(r"^lakecdc-gold-[0-9a-f]+-(m|t)-")
_MARKER = re.compile(r"^lakecdc:(lakecdc-gold-[0-9a-f]+-(?:m|t)-.*):(\d+)$")


def parse_key(items: Sequence[str]) -> dict[str, str]:
    """``col=value[,col=value...]`` (the flag repeatable) as a dict. A piece without ``=`` belongs to the
    value before it (a value holding a comma); repeat ``--key`` for a value that holds ``,col=``."""
    out: dict[str, str] = {}
    last = None
    for item in items:
        for piece in item.split(","):
            name, eq, value = piece.partition("=")
            if eq and name.strip():
                last = name.strip()
                out[last] = value
            elif last is not None:
                out[last] += "," + piece
            else:
                raise ValueError(f"--key {item!r}: expected COLUMN=VALUE[,COLUMN=VALUE...]")
    if not out:
        raise ValueError("--key: expected COLUMN=VALUE[,COLUMN=VALUE...]")
    return out


@dataclass(frozen=True)
class KeyTarget:
    """One key of one mirror, as gold names it."""

    name: str  # the mirror's name (export's)
    ref: TableRef
    state_key: str  # the mirror's id in gold's state tables
    key: tuple[str, ...]
    values: dict[str, str]
    types: dict[str, str | None]  # source type of each mirror column
    identity: str | None  # JSON [db, schema, table] of the source table
    key_text: str  # the key as key state names it

    @property
    def table(self) -> str | None:
        return json.loads(self.identity)[2] if self.identity else None

    def key_sql(self, image_sql: str) -> str:
        """SQL of the key a row image (``map<string,string>``) names: gold's canonical key text."""
        return key_text_sql(image_sql, self.key, self.types)

    def typed_match(self, prefix: str = "") -> str:
        """SQL: a row of the mirror (or its history) holds this key (typed, as the mirror stores it)."""
        parts = []
        for c in self.key:
            value = convert_expr(lit(self.values[c]), self.types.get(c))
            parts.append(f"{prefix}{q(c)} <=> {value}")
        return " AND ".join(parts)


def key_text_sql(image_sql: str, key: Sequence[str], types: Mapping[str, str | None]) -> str:
    """Gold's key text of an image: a JSON array of each key column's canonical text (pipelines.gold.lookups)."""
    parts = []
    for c in key:
        st = types.get(c)
        parts.append(canonical_text(convert_expr(f"({image_sql})[{lit(c)}]", st), spark_type(st)))
    return f"to_json(array({', '.join(parts)}))"


def find_mirror(spark: SparkSession, wh: Warehouse, table: str) -> tuple[str, TableRef]:
    refs = mirror_refs(spark, wh)
    matches = [(n, r) for n, r in refs.items() if n.lower() == table.lower()]
    if not matches:
        raise ValueError(f"no mirror named {table!r}; mirrors: {', '.join(sorted(refs)) or 'none'}")
    return matches[0]


def key_target(spark: SparkSession, wh: Warehouse, table: str, values: Mapping[str, str]) -> KeyTarget:
    """The key ``values`` of the mirror named ``table``; ValueError when the mirror has no key or the
    columns given are not its key's."""
    name, ref = find_mirror(spark, wh, table)
    props = table_properties(spark, ref)
    key = key_of(props)
    if not key:
        raise ValueError(f"{name} has no key (a keyless mirror): its rows cannot be named by a key")
    if set(values) != set(key):
        raise ValueError(f"--key must name {name}'s key columns {', '.join(key)} (got {', '.join(values)})")
    types = source_types(ref.read(spark), props)
    image = "map(" + ", ".join(f"{lit(c)}, {lit(values[c])}" for c in key) + ")"
    text = spark.range(1).selectExpr(f"{key_text_sql(image, key, types)} AS k").first()["k"]
    return KeyTarget(name, ref, state_key(ref), key, {c: values[c] for c in key}, types,
                     props.get(SOURCE_IDENTITY_PROPERTY), text)  # fmt: skip


def table_changes(spark: SparkSession, wh: Warehouse, cfg: PipelineConfig | None, target: KeyTarget) -> DataFrame:
    """Silver's changes of the target's source table, as gold reads them (shards routed to their entry);
    the ``table`` filter is pushed down to Delta's file statistics."""
    from pyspark.sql import functions as F

    routed = cfg is not None and routes(cfg)
    if SOURCE_TABLE_COLUMN in target.types and not routed:  # silver names each change by its shard, not the mirror
        raise ValueError(
            f"{target.name} is fed by shards (its rows carry {SOURCE_TABLE_COLUMN}): give --conf, whose "
            f"tables.<name>.from routes their changes to it"
        )
    changes = wh.silver("changes").read(spark)
    if routed:
        changes = route_shards(changes, cfg)
    elif target.table is not None:
        changes = changes.where(F.col("table") == target.table)
    if target.identity:
        changes = changes.where(source_table_col() == F.lit(target.identity))
    return changes


def key_changes(spark: SparkSession, wh: Warehouse, cfg: PipelineConfig | None, target: KeyTarget) -> DataFrame:
    """The target key's changes in silver (an UPDATE that moves a row to or from it included) and the
    TRUNCATEs of its table: each with ``k_new`` / ``k_old``, the keys it writes and leaves."""
    from pyspark.sql import functions as F

    written = (
        f"CASE WHEN op = 'UPDATE' THEN map_concat(coalesce(before, {EMPTY_MAP}), coalesce(after, {EMPTY_MAP})) "
        f"ELSE {ROW_IMAGE_SQL} END"
    )
    rows = table_changes(spark, wh, cfg, target).withColumns(
        {
            "k_new": F.expr(target.key_sql(written)),
            "k_old": F.expr(f"CASE WHEN op = 'UPDATE' AND before IS NOT NULL THEN {target.key_sql('before')} END"),
        }
    )
    k = F.lit(target.key_text)
    return rows.where((F.col("op") == "TRUNCATE") | (F.col("k_new") == k) | (F.col("k_old") == k))


# ---------------------------------------------------------------- which mirror version wrote which batch


def delta_log_dir(spark: SparkSession, ref: TableRef) -> str:
    location = ref.path or spark.sql(f"DESCRIBE DETAIL {ref.sql}").first()["location"]
    return f"{location.rstrip('/')}/_delta_log"


def commit_lines(spark: SparkSession, ref: TableRef) -> list[tuple[int, dict]]:
    """(version, action) of every commit file still in the table's log: read as files on a local
    path, else through Spark (a catalog table's location); empty where neither can read it."""
    log_dir = delta_log_dir(spark, ref)
    local = log_dir[len("file:") :] if log_dir.startswith("file:") else log_dir
    out: list[tuple[int, dict]] = []
    if Path(local).is_dir():
        for path in sorted(Path(local).glob("*.json")):
            if path.stem.isdigit():
                for line in path.read_text(encoding="utf-8").splitlines():
                    if line.strip():
                        out.append((int(path.stem), json.loads(line)))
        return out
    try:  # noqa: SIM105 - a location this session cannot list reads as no log
        from pyspark.sql import functions as F

        rows = spark.read.text(f"{log_dir}/*.json").select("value", F.input_file_name().alias("f")).collect()
    except Exception:  # noqa: BLE001 - versions are then unknown, never an error of the command
        return []
    for r in rows:
        stem = r["f"].rsplit("/", 1)[-1].split(".")[0]
        if stem.isdigit():
            out.append((int(stem), json.loads(r["value"])))
    return sorted(out, key=lambda item: item[0])


def batch_versions(spark: SparkSession, ref: TableRef) -> dict[int, int]:
    """Gold batch → the mirror version that wrote it: from each commit's ``txn`` stamp (a MERGE, a
    TRUNCATE's DELETE) or commit marker (an append). A checkpoint's later life reusing a batch number wins."""
    found: dict[int, int] = {}
    for version, action in commit_lines(spark, ref):
        txn = action.get("txn")
        if txn and _STAMP.match(str(txn.get("appId", ""))):
            found[int(txn["version"])] = version
        info = action.get("commitInfo")
        marker = _MARKER.match(str((info or {}).get("userMetadata") or ""))
        if marker:
            found[int(marker.group(2))] = version
    return found


def version_times(spark: SparkSession, ref: TableRef) -> dict[int, str]:
    rows = spark.sql(f"DESCRIBE HISTORY {ref.sql}").select("version", "timestamp").collect()
    return {int(r["version"]): _iso(r["timestamp"]) for r in rows}


# ---------------------------------------------------------------- the decisions


@dataclass
class KeyStateRow:
    batch: int
    seq: str | None
    queue_pos: str | None
    live: bool
    written: dt.datetime
    img_seq: str | None = None  # a tombstone's: the sequence of the values its soft-deleted row holds


@dataclass
class WhyReport:
    target: KeyTarget
    changes: list[dict] = field(default_factory=list)
    now: dict | None = None  # the key's row in the mirror now (None: no row)
    history: list[dict] = field(default_factory=list)
    reads: dict[str, float] = field(default_factory=dict)  # what was read, seconds each

    def to_json(self) -> dict:
        t = self.target
        return {
            "table": t.name,
            "mirror": t.ref.path or t.ref.name,
            "key": t.values,
            "key_text": t.key_text,
            "changes": self.changes,
            "now": self.now,
            "history": self.history,
            "read_seconds": self.reads,
        }


def _iso(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ", timespec="milliseconds")
    return str(value)


def decide(
    change: Mapping,
    keys: Sequence[KeyStateRow],
    quarantined: Mapping[str, Mapping],
    pending: Mapping[tuple[str, str | None], int],
    progress: Sequence[int],
    compacted_at: dt.datetime | None,
) -> dict:
    """What gold made of one change of the key (see the module docstring): ``status`` ``quarantined``,
    ``applied`` (``batch``; ``last``: the batch's last change of the key, else folded before ``batch_seq``),
    ``stale`` (``against_seq``), ``waiting`` (``since_batch``), ``compacted`` or ``undecided``."""
    position = change["bronze_position"]
    if position in quarantined:
        held = quarantined[position]
        return {"status": "quarantined", "stage": held["stage"], "reason": held["reason"], "rule": held["rule"],
                "bad_value": held["bad_value"]}  # fmt: skip
    waited = pending.get((position, change["seq"]))
    if waited is not None:
        through = [b for b in progress if b > waited]
        if not through:
            return {"status": "waiting", "since_batch": waited}
        return {"status": "applied", "batch": min(through), "waited_since_batch": waited,
                **_last(change, keys, waited)}  # fmt: skip
    seq, order = change["seq"], (change["seq"] or "", change["queue_pos"] or "")
    before: str | None = None
    held_img: str | None = None  # the sequence of the values a soft-deleted row held before
    for row in keys:
        if row.written < change["ingest_time"]:
            before, held_img = row.seq, row.img_seq  # decided before the change arrived: the state its batch found
            continue
        if before is not None and seq is not None and seq < before:
            if not row.live and row.img_seq is not None and held_img is not None and held_img < seq <= row.img_seq:
                # late, older than the soft DELETE: it gave the deleted row its values (gold.decide, buried)
                return {"status": "applied", "batch": row.batch, "under_delete_seq": before}
            return {"status": "stale", "against_seq": before}
        if (row.seq or "", row.queue_pos or "") >= order:
            return {"status": "applied", "batch": row.batch, **_last(change, keys, row.batch)}
        before = row.seq
    if before is not None and seq is not None and seq < before:
        return {"status": "stale", "against_seq": before}
    if compacted_at is not None and change["ingest_time"] < compacted_at:
        return {"status": "compacted", "note": f"decided before key state was compacted at {_iso(compacted_at)}"}
    return {"status": "undecided", "note": "no decision kept: gold has not read it yet, or a where leaves it out"}


def _last(change: Mapping, keys: Sequence[KeyStateRow], batch: int) -> dict:
    row = next((r for r in keys if r.batch == batch), None)
    if row is None:
        return {}
    last = (row.seq, row.queue_pos) == (change["seq"], change["queue_pos"])
    return {"last": last} if last else {"last": False, "batch_seq": row.seq}


def explain_key(
    spark: SparkSession, wh: Warehouse, cfg: PipelineConfig | None, table: str, values: Mapping[str, str]
) -> WhyReport:
    """Every change of the key, oldest first (source sequence, then queue order), with its decision and
    the mirror version that applied it; the key's row now and its history rows."""
    from pyspark.sql import functions as F

    reads: dict[str, float] = {}

    def timed(name: str, fn):
        began = time.monotonic()
        result = fn()
        reads[name] = round(reads.get(name, 0.0) + time.monotonic() - began, 3)
        return result

    target = timed("mirror properties", lambda: key_target(spark, wh, table, values))
    columns = ["op", "seq", "queue_pos", "change_index", "event_time", "txn", "bronze_position", "ingest_time",
               "source", "format", "before", "after", "k_new", "k_old"]  # fmt: skip
    rows = timed("silver changes", lambda: key_changes(spark, wh, cfg, target).select(*columns).collect())
    rows = sorted(rows, key=lambda r: (r["seq"] or "", r["queue_pos"] or "", r["change_index"] or 0))
    positions = sorted({r["bronze_position"] for r in rows})
    quarantined: dict[str, dict] = {}
    if positions:
        quarantine = wh.silver("quarantine").read(spark)
        held = quarantine.where((F.col("stage") != "silver") & F.col("bronze_position").isin(positions))
        if target.table is not None:
            held = held.where(F.col("table") == target.table)
        for r in timed("quarantine", lambda: held.collect()):
            quarantined[r["bronze_position"]] = r.asDict()
    state = GoldState(wh)
    keys: list[KeyStateRow] = []
    pending: dict[tuple[str, str | None], int] = {}
    progress: list[int] = []
    compacted_at = None
    if state.keys.exists(spark):
        mine = (F.col("mirror") == target.state_key) & (F.col("k") == target.key_text)
        found = timed("key state", lambda: state.keys.read(spark).where(mine).collect())
        newest: dict[int, KeyStateRow] = {}
        for r in sorted(found, key=lambda r: r["written"]):
            newest[int(r["batch"])] = KeyStateRow(
                int(r["batch"]), r["seq"], r["queue_pos"], r["live"], r["written"], r["img_seq"]
            )
        keys = [newest[b] for b in sorted(newest)]
        compacted_at = timed("key state history", lambda: _compacted_at(spark, state.keys))
        waited = timed("pending", lambda: state.pending.read(spark).where(mine).collect())
        pending = {(r["bronze_position"], r["seq"]): int(r["batch"]) for r in waited}
        if pending:
            marks = state.progress.read(spark).where(F.col("mirror") == target.state_key)
            progress = sorted(int(r["batch"]) for r in timed("progress", lambda: marks.collect()))
    versions = timed("mirror log", lambda: batch_versions(spark, target.ref))
    times = timed("mirror history", lambda: version_times(spark, target.ref))
    report = WhyReport(target, reads=reads)
    for r in rows:
        change = r.asDict()
        decision = decide(change, keys, quarantined, pending, progress, compacted_at)
        version = versions.get(decision["batch"]) if decision.get("batch") is not None else None
        report.changes.append(
            {
                "op": r["op"],
                "bronze_position": r["bronze_position"],
                "seq": r["seq"],
                "queue_pos": r["queue_pos"],
                "change_index": r["change_index"],
                "event_time": _iso(r["event_time"]),
                "txn": r["txn"],
                "ingest_time": _iso(r["ingest_time"]),
                "source": r["source"],
                "format": r["format"],
                "moves": "from the key" if r["k_old"] == target.key_text and r["k_new"] != target.key_text
                else ("to the key" if r["k_old"] not in (None, target.key_text) else None),
                "after": dict(r["after"]) if r["after"] is not None else None,
                "decision": decision,
                "mirror_version": version,
                "version_time": times.get(version) if version is not None else None,
            }
        )  # fmt: skip
    now = timed("mirror row", lambda: target.ref.read(spark).where(target.typed_match()).collect())
    report.now = {k: _iso(v) if isinstance(v, dt.datetime) else v for k, v in now[0].asDict().items()} if now else None
    history = wh.side_of(target.ref, "history")
    if history.exists(spark):
        hist = timed("history", lambda: history.read(spark).where(target.typed_match()).collect())
        report.history = [
            {k: _iso(v) if isinstance(v, dt.datetime) else v for k, v in h.asDict().items()}
            for h in sorted(hist, key=lambda h: h["_valid_from_seq"] or "")
        ]
    return report


def _compacted_at(spark: SparkSession, keys: TableRef) -> dt.datetime | None:
    """When ``lakecdc maintain`` last rewrote key state (an overwrite), None if never."""
    rows = spark.sql(f"DESCRIBE HISTORY {keys.sql}").select("timestamp", "operation", "operationParameters")
    overwrites = [
        r["timestamp"]
        for r in rows.collect()
        if r["operation"] == "WRITE" and (r["operationParameters"] or {}).get("mode") == "Overwrite"
    ]
    return max(overwrites, default=None)


def render(report: WhyReport) -> str:
    t = report.target
    key = ", ".join(f"{c}={v}" for c, v in t.values.items())
    lines = [f"{t.name} key {key}: {len(report.changes)} changes, oldest first"]
    for c in report.changes:
        d = c["decision"]
        what = d["status"]
        if what == "applied":
            what += f" in batch {d['batch']}"
            if d.get("waited_since_batch") is not None:
                what += f" (waited since batch {d['waited_since_batch']})"
            if d.get("last") is False:
                what += f", folded before seq {d['batch_seq']}"
            if d.get("under_delete_seq") is not None:
                what += f", to the row its later DELETE (seq {d['under_delete_seq']}) keeps marked"
            if c["mirror_version"] is not None:
                what += f" -> mirror version {c['mirror_version']} ({c['version_time']})"
        elif what == "stale":
            what += f": older than seq {d['against_seq']} the key held"
        elif what == "quarantined":
            what += f" ({d['stage']}): {d['reason']}" + (f" [rule {d['rule']}]" if d.get("rule") else "")
        elif what == "waiting":
            what += f" since batch {d['since_batch']} (its mirror is not due yet)"
        else:
            what += f": {d['note']}"
        moves = f" (moves {c['moves']})" if c["moves"] else ""
        txn = f" txn {c['txn']}" if c["txn"] else ""
        lines.append(
            f"  {c['op']:<8} seq {c['seq']}  {c['bronze_position']}  event {c['event_time']}{txn}{moves}\n"
            f"           {what}"
        )
    if report.now is None:
        lines.append("now: no row for the key in the mirror")
    else:
        lines.append(
            f"now: row written by seq {report.now.get('_seq')} ({report.now.get('_op')}) "
            f"from {report.now.get('_position')}" + (" (soft-deleted)" if report.now.get("_deleted") else "")
        )
    if report.history:
        lines.append(f"history: {len(report.history)} versions")
    lines.append("read: " + ", ".join(f"{k} {v:.2f} s" for k, v in report.reads.items()))
    return "\n".join(lines)
