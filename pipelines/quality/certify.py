"""The certified version of each mirror: its last Delta version whose checks passed (issue 43).

A job downstream reads a mirror as of that version (``lakecdc export --certified``, the view
``<mirror>__certified`` in a catalog, or ``VERSION AS OF`` the table property), never a version whose
checks found something. :func:`certify` decides, after the checks ran, for each mirror they checked:

* the mirror is certified when no check of it failed since its last certification: the results given
  and, unless the check read the whole mirror (``whole``), every ``dq_results`` row of it stored since
  then (a ``warn`` rule that failed in an earlier batch let its change in, and that change may still be
  there). ``lakecdc dq check --rules`` checks the current rows themselves, so it can certify again a
  mirror whose earlier batch failed, once its rows pass.
* failures that say nothing against the version's rows do not count: ``cdc_freshness`` (how recently a
  source was heard from), ``cdc_invalid_value`` (values the configured ``invalid_values`` policy
  handled) and, in a batch, a ``drop`` rule (its changes went to quarantine, not into the mirror).
* a certification is a row of ``dq_certified`` (:func:`pipelines.quality.storage.dq_certified_ref`) and
  the table properties :data:`CERTIFIED_VERSION_PROPERTY` / :data:`CERTIFIED_AT_PROPERTY` on the mirror;
  a failing check writes neither, so the last good version stays in place. Setting the property is a
  commit of its own (metadata only): that commit is never what gets certified.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pipelines.delta_writes import append_idempotent
from pipelines.lock import EXPIRY_SECONDS, LEASE_NAME
from pipelines.mirror_columns import properties_sql
from pipelines.mirror_names import existing_mirrors
from pipelines.quality.gx_session import utc_now
from pipelines.quality.storage import dq_certified_ref, dq_results_ref
from pipelines.sql import q
from pipelines.warehouse import TableRef, Warehouse

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

CERTIFIED_VERSION_PROPERTY = "lakecdc.certified.version"
CERTIFIED_AT_PROPERTY = "lakecdc.certified.at"
DQ_CERTIFIED_DDL = (
    "mirror STRING, version BIGINT, certified_at TIMESTAMP, run_id STRING, checks BIGINT, `table` STRING, "
    "table_id STRING"
)
#: Checks whose failure says nothing against a version's rows.
NOT_BLOCKING = ("cdc_freshness",)
NOT_BLOCKING_TYPES = ("cdc_invalid_value",)
#: The suffix of the view that reads a mirror's certified version (in a catalog).
VIEW_SUFFIX = "__certified"
#: How many of a mirror's newest commits are searched for the newest one that is not a certification's.
HISTORY_LOOKBACK = 20


@dataclass(frozen=True)
class Certified:
    """A mirror's certified version, as ``dq_certified`` records it."""

    mirror: str
    version: int
    certified_at: _dt.datetime
    run_id: str
    table: str  # the mirror's table: its path, or its catalog name
    table_id: str | None = None  # the Delta table's id: a mirror dropped and made again is another table

    def to_json(self) -> dict:
        return {
            "mirror": self.mirror,
            "version": self.version,
            "certified_at": self.certified_at.isoformat() if self.certified_at else None,
            "run_id": self.run_id,
            "table": self.table,
        }


@dataclass(frozen=True)
class Verdict:
    """What :func:`certify` decided for one mirror."""

    mirror: str
    certified: bool  # this call certified ``version``
    version: int | None  # the version certified now, or the one that stays certified (None: none)
    reason: str  # why, for people

    def to_json(self) -> dict:
        return {"mirror": self.mirror, "certified": self.certified, "version": self.version, "reason": self.reason}


def blocks(row: Mapping, *, whole: bool = False) -> bool:
    """Whether a ``dq_results`` row keeps its mirror's version from being certified."""
    if row.get("success") is True:
        return False
    if row.get("expectation") in NOT_BLOCKING or row.get("expectation_type") in NOT_BLOCKING_TYPES:
        return False
    return whole or row.get("action") != "drop"


def certified_versions(
    spark: SparkSession, wh: Warehouse | str, refs: Mapping[str, TableRef] | None = None
) -> dict[str, Certified]:
    """Each mirror's newest certification (mirror name → :class:`Certified`); empty before the first. With
    ``refs`` (mirror name → its table), only certifications of the tables as they are: a mirror rebuilt
    (dropped and made again: another Delta table id) has none until it is certified again."""
    ref = dq_certified_ref(wh)
    if not ref.exists(spark):
        return {}
    out: dict[str, Certified] = {}
    for r in ref.read(spark).collect():
        d = r.asDict()
        c = Certified(d["mirror"], int(d["version"]), d["certified_at"], d["run_id"] or "", d["table"] or "",
                      d.get("table_id"))  # fmt: skip
        if c.mirror not in out or (c.certified_at, c.version) > (out[c.mirror].certified_at, out[c.mirror].version):
            out[c.mirror] = c
    if refs is not None:
        out = {m: c for m, c in out.items() if m in refs and c.table_id == table_id(spark, refs[m])}
    return out


def table_id(spark: SparkSession, ref: TableRef) -> str | None:
    """The Delta table's id (its ``metaData.id``): from a local table's first commit, else ``DESCRIBE DETAIL``."""
    path = (ref.path or "").removeprefix("file:")
    first = Path(path) / "_delta_log" / f"{0:020d}.json" if path and "://" not in path else None
    if first is not None and first.is_file():
        try:
            for line in first.read_text().splitlines():
                if '"metaData"' in line:
                    return json.loads(line)["metaData"]["id"]
        except (OSError, ValueError, KeyError):
            pass
    try:
        return spark.sql(f"DESCRIBE DETAIL {ref.sql}").first()["id"]
    except Exception:  # noqa: BLE001 - no id to tell: a record without one matches none
        return None


def newest_version(spark: SparkSession, ref: TableRef) -> int:
    """The mirror's newest version that is not a certification's own property commit (a local mirror:
    read from its Delta log's newest commit files, no Spark job)."""
    local = _local_newest(ref)
    if local is not None:
        return local
    rows = spark.sql(f"DESCRIBE HISTORY {ref.sql} LIMIT {HISTORY_LOOKBACK}").collect()
    for r in sorted(rows, key=lambda r: -int(r["version"])):
        if not _is_certification(r):
            return int(r["version"])
    return int(min(int(r["version"]) for r in rows))


def _local_newest(ref: TableRef) -> int | None:
    """:func:`newest_version` from a local table's ``_delta_log`` (None: not a local path, or unreadable)."""
    path = ref.path or ""
    if path.startswith("file:"):
        path = path[len("file:") :]
    log_dir = Path(path) / "_delta_log" if path and "://" not in path else None
    if log_dir is None or not log_dir.is_dir():
        return None
    versions = sorted((int(p.stem) for p in log_dir.glob("*.json") if p.stem.isdigit()), reverse=True)
    for v in versions[:HISTORY_LOOKBACK]:
        try:
            info = next(
                (json.loads(line)["commitInfo"] for line in (log_dir / f"{v:020d}.json").read_text().splitlines()
                 if '"commitInfo"' in line),
                None,
            )  # fmt: skip
        except (OSError, ValueError, KeyError):
            return None
        if info is None or not _is_certification(info):
            return v
    return versions[-1] if versions else None


def _is_certification(commit) -> bool:
    if commit["operation"] != "SET TBLPROPERTIES":
        return False
    try:
        props = json.loads((commit["operationParameters"] or {}).get("properties") or "{}")
    except ValueError:
        return False
    return bool(props) and set(props) <= {CERTIFIED_VERSION_PROPERTY, CERTIFIED_AT_PROPERTY}


def _mirror_tables(spark: SparkSession, wh: Warehouse) -> dict[str, TableRef]:
    """Mirror name (as ``dq_results`` names it) → its table."""
    out = {}
    for m in existing_mirrors(spark, wh):
        name = m.props.get("lakecdc.mirror_name") or m.props.get("lakecdc.source_table")
        if name:
            out.setdefault(name, m.ref)
    return out


def _stored_failures(
    spark: SparkSession, wh: Warehouse, mirrors: Iterable[str], since: Mapping[str, _dt.datetime]
) -> dict[str, list[dict]]:
    """The failed ``dq_results`` rows of ``mirrors`` checked after each one's last certification."""
    from pyspark.sql import functions as F

    ref = dq_results_ref(wh)
    mirrors = sorted(set(mirrors))
    if not mirrors or not ref.exists(spark):
        return {}
    failed = ref.read(spark).where(F.col("table").isin(mirrors) & ~F.coalesce(F.col("success"), F.lit(False)))
    out: dict[str, list[dict]] = {}
    for r in failed.select("table", "expectation", "expectation_type", "action", "success", "checked_at").collect():
        at = since.get(r["table"])
        if at is not None and r["checked_at"] is not None and _aware(r["checked_at"]) <= at:
            continue
        out.setdefault(r["table"], []).append(r.asDict())
    return out


def _aware(t: _dt.datetime) -> _dt.datetime:
    """A timestamp Spark returned (naive, the session's local time) as UTC."""
    return t.astimezone(_dt.timezone.utc) if t.tzinfo else t.astimezone().astimezone(_dt.timezone.utc)


def certify(
    spark: SparkSession,
    wh: Warehouse | str,
    results_rows: Sequence[Mapping],
    *,
    mirrors: Iterable[str] | None = None,
    whole: bool = False,
    run_id: str | None = None,
    versions: Mapping[str, int] | None = None,
    set_property: bool = True,
    refs: Mapping[str, TableRef] | None = None,
) -> list[Verdict]:
    """Certify the mirrors whose checks passed; returns one :class:`Verdict` per mirror checked.

    results_rows  the ``dq_results`` rows of the checks just run (a mirror is the rows' ``table``).
    mirrors       the mirrors to decide (default: those the rows name; the runner gives every mirror a
                  run wrote, whose batches' rows gold stored).
    whole         the rows checked the mirror's current rows themselves (``dq check --rules``): earlier
                  failures no longer count.
    versions      the version each mirror's checks read (default: its newest, as after a run).
    set_property  also record the version as the mirror's table property (a commit to the mirror: off
                  while a pipeline may be writing it).
    refs          mirror name → its table, where the caller knows them (default: read from the warehouse).
    """
    wh = wh if isinstance(wh, Warehouse) else Warehouse(str(wh))
    by_mirror: dict[str, list[Mapping]] = {}
    for r in results_rows:
        by_mirror.setdefault(r["table"], []).append(r)
    names = sorted(set(mirrors) if mirrors is not None else set(by_mirror))
    if not names:
        return []
    tables = dict(refs) if refs is not None else _mirror_tables(spark, wh)
    before = certified_versions(spark, wh, {n: t for n, t in tables.items() if n in names})
    stored = {} if whole else _stored_failures(spark, wh, names, {m: _aware(c.certified_at) for m, c in before.items()})
    now, run_id = utc_now(), run_id or next((str(r.get("run_id")) for r in results_rows if r.get("run_id")), "")
    verdicts, records = [], []
    for name in names:
        last = before.get(name)
        kept = last.version if last else None
        ref = tables.get(name)
        if ref is None:
            verdicts.append(Verdict(name, False, kept, "no such mirror in the warehouse"))
            continue
        failing = [r for r in by_mirror.get(name, []) if blocks(r, whole=whole)] + stored.get(name, [])
        failing = [r for r in failing if blocks(r, whole=whole)]
        if failing:
            checks = ", ".join(sorted({f"{r['expectation']} ({r['action']})" for r in failing}))
            what = f"version {kept} stays certified" if kept is not None else "no version is certified"
            verdicts.append(Verdict(name, False, kept, f"failed since the last certification: {checks}; {what}"))
            continue
        version = (versions or {}).get(name)
        version = newest_version(spark, ref) if version is None else int(version)  # local: no Spark job
        if last is not None and last.version == version:
            verdicts.append(Verdict(name, False, version, "checks passed; this version was certified already"))
            continue
        ident = before[name].table_id if last is not None else table_id(spark, ref)
        records.append((name, version, now, run_id, len(by_mirror.get(name, [])), ref.path or ref.name, ident))
        verdicts.append(Verdict(name, True, version, "checks passed"))
        log.info("quality: %s: version %d certified", name, version)
    if records:
        append_idempotent(spark.createDataFrame(records, DQ_CERTIFIED_DDL), dq_certified_ref(wh), None, None)
        if set_property:  # one metadata commit per mirror, a few side by side (each is driver work)
            from concurrent.futures import ThreadPoolExecutor

            at = now.isoformat()
            with ThreadPoolExecutor(max_workers=min(8, len(records))) as pool:
                list(pool.map(lambda r: _set_property(spark, tables[r[0]], r[1], at), records))
            try:
                refresh_views(spark, wh, verdicts, tables)
            except Exception as exc:  # noqa: BLE001 - a view is a reader's aid: the certification stands
                log.warning("quality: certified views not replaced: %s", exc)
    return verdicts


def _set_property(spark: SparkSession, ref: TableRef, version: int, at: str) -> None:
    """The mirror's certification properties; a commit that fails (a concurrent writer) is logged, never the
    run's failure: ``dq_certified`` has the record, and the next certification sets them."""
    props = {CERTIFIED_VERSION_PROPERTY: str(version), CERTIFIED_AT_PROPERTY: at}
    try:
        spark.sql(f"ALTER TABLE {ref.sql} SET TBLPROPERTIES ({properties_sql(props)})")
    except Exception as exc:  # noqa: BLE001 - the record is written; the property follows next time
        log.warning("quality: %s: certified version %d not set as a property: %s", ref.path or ref.name, version, exc)


def view_name(ref: TableRef) -> str | None:
    """The catalog view of a mirror's certified version (None: a mirror by path has no catalog for one)."""
    return f"{ref.name}{VIEW_SUFFIX}" if ref.name else None


def view_sql(ref: TableRef, version: int, name: str) -> str:
    """``CREATE OR REPLACE VIEW`` ``name`` reading ``ref`` as of ``version``."""
    quoted = ".".join(q(p) for p in name.split("."))
    return f"CREATE OR REPLACE VIEW {quoted} AS SELECT * FROM {ref.sql} VERSION AS OF {int(version)}"


def refresh_views(
    spark: SparkSession,
    wh: Warehouse | str,
    verdicts: Iterable[Verdict],
    tables: Mapping[str, TableRef] | None = None,
    *,
    create: bool = False,
) -> list[str]:
    """In a catalog, point each certified mirror's view ``<mirror>__certified`` at its version; the views
    replaced. A certification keeps the views that exist current; ``create`` (``lakecdc dq certified
    --views``) makes them (they sit in the mirrors' schemas, beside tables lakecdc does not own)."""
    wh = wh if isinstance(wh, Warehouse) else Warehouse(str(wh))
    if not wh.catalog:
        return []
    tables, done = tables if tables is not None else _mirror_tables(spark, wh), []
    for v in verdicts:
        ref = tables.get(v.mirror)
        name = view_name(ref) if ref is not None and v.certified and v.version is not None else None
        if name and (create or spark.catalog.tableExists(name)):
            spark.sql(view_sql(ref, v.version, name))
            done.append(name)
    return done


def pipeline_running(wh: Warehouse | str) -> bool:
    """Whether a run holds the warehouse now (its lease, :mod:`pipelines.lock`, renewed lately): a
    property commit to a mirror could then meet gold's write to it, so a check outside the run records its
    certification in ``dq_certified`` only."""
    wh = wh if isinstance(wh, Warehouse) else Warehouse(str(wh))
    try:
        lease = Path(wh.checkpoint_root) / LEASE_NAME
        return lease.exists() and time.time() - lease.stat().st_mtime < EXPIRY_SECONDS
    except (OSError, TypeError, ValueError):
        return False
