"""``lakecdc demo`` (a dev tool): realistic CDC traffic for a small shop database, through the whole pipeline.

Two sources, as a migration service would write them:

* ``shop_oms`` in OMS Default format (seed 000): ``shop.customers`` and ``shop.orders``,
  with exact decimals, an unsigned BIGINT above 2^63, bytes, DATETIME and TIMESTAMP,
  heartbeats, and one ``ALTER TABLE ... ADD COLUMN`` half way through;
* ``inventory_canal`` in OMS Canal format (seed 000): ``inventory.stock``, sharded at the source as
  ``inventory.stock_0`` and ``inventory.stock_1`` (by SKU) and mirrored as one table (``from``, each row's
  shard in ``_source_table``), whose deleted rows stay, marked (``deletes: soft``).

A few malformed messages are mixed in (truncated JSON, not JSON, an unknown op): they
land in quarantine while their neighbours apply.
"""

from __future__ import annotations

import random
import shutil
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path

import yaml

from pipelines.config import load_config
from pipelines.export import mirror_refs
from pipelines.formats import Change, DecodeContext, get_decoder
from pipelines.quality.report import report
from pipelines.runner import run_pipeline
from pipelines.silver import reconcile
from pipelines.spark import get_spark
from pipelines.testing.dq_assets import fetch_assets
from pipelines.testing.kafka_broker import LocalBroker, create_topic, list_topics
from pipelines.testing.kafka_client import produce
from pipelines.warehouse import Warehouse

CUSTOMERS = "shop.customers"
ORDERS = "shop.orders"
STOCK = "inventory.stock"
TENANT_DB = "demo_tenant.shop"  # OMS names OceanBase databases tenant.database

TABLE_TYPES = {
    f"demo_tenant.{CUSTOMERS}": {
        "id": "bigint",
        "name": "varchar(64)",
        "email": "varchar(128)",
        "balance": "decimal(38,24)",
        "avatar": "blob",
        "created_at": "datetime(6)",
        "updated_at": "timestamp(6)",
        "tier": "varchar(8)",
    },
    f"demo_tenant.{ORDERS}": {
        "order_id": "bigint unsigned",
        "customer_id": "bigint",
        "amount": "decimal(12,2)",
        "status": "varchar(16)",
        "placed_at": "datetime",
    },
    STOCK: {"sku": "varchar(32)", "qty": "int", "price": "decimal(10,2)", "updated_at": "datetime"},
}
KEYS = {f"demo_tenant.{CUSTOMERS}": ["id"], f"demo_tenant.{ORDERS}": ["order_id"], STOCK: ["sku"]}
NAMES = ["Ada", "Björn", "Chen Wei", "Dana", "Émile", "Farah", "Gō", "Hana", "Ivo", "Jun"]
STATUSES = ["NEW", "PAID", "SHIPPED", "CANCELLED"]


class _Clock:
    """Source commit time and the OMS storeDataSequence (timestamp + increment) that goes with it.

    Starts half an hour before ``start`` (default: now), so freshness checks (default: 1 hour) see recent traffic
    even when the demo itself takes minutes on a busy machine."""

    def __init__(self, start: datetime | None = None) -> None:
        start = start or datetime.now(timezone.utc).replace(tzinfo=None, microsecond=0)
        self.now = start - timedelta(minutes=30)
        self.increment = 0

    def tick(self, rng: random.Random) -> tuple[str, tuple[int, int]]:
        self.now += timedelta(milliseconds=rng.randint(0, 1500))
        self.increment += 1
        epoch = int((self.now - datetime(1970, 1, 1)).total_seconds())
        return self.now.strftime("%Y-%m-%dT%H:%M:%S") + "Z", (epoch, self.increment % 100000)


def generate(changes: int, seed: int, dq_faults: bool = False) -> dict[str, list[bytes]]:
    """Messages per source, in queue order."""
    return {
        source: [value for _key, value in pairs] for source, pairs in generate_keyed(changes, seed, dq_faults).items()
    }


def generate_keyed(changes: int, seed: int, dq_faults: bool = False) -> dict[str, list[tuple[bytes | None, bytes]]]:
    """(Kafka key, message) per source in queue order; keyed by table and primary key, as the vendors do.

    ``dq_faults`` adds rows that break the demo's expectations (a negative amount, an unknown
    status, a malformed e-mail), as real sources do."""
    rng = random.Random(seed)
    fault = (lambda: rng.random() < 0.04) if dq_faults else (lambda: False)
    clock = _Clock()
    oms, canal = get_decoder("oms_default"), get_decoder("oms_canal")
    ctx = DecodeContext()
    out: dict[str, list[tuple[bytes | None, bytes]]] = {"shop_oms": [], "inventory_canal": []}
    customers: dict[int, dict] = {}
    orders: dict[int, dict] = {}
    stock: dict[str, dict] = {}
    canal_id = 1000
    altered = False

    def emit_oms(op, table, key, before, after, extra_types=None):
        event_time, seq = clock.tick(rng)
        types = dict(TABLE_TYPES[f"demo_tenant.{table}"])
        ch = Change(
            op=op,
            db=TENANT_DB,
            table=table.split(".")[1],
            key_columns=tuple(key),
            before=before,
            after=after,
            col_types=types,
            seq=seq,
            event_time=event_time,
            txn=f"1001_{seq[1]}",
        )
        row = after or before
        out["shop_oms"].append((f"{table}:{row[key[0]]}".encode(), oms.encode(ch, ctx)))

    def emit_canal(op, before, after):
        nonlocal canal_id
        event_time, _seq = clock.tick(rng)
        canal_id += 1
        ch = Change(
            op=op,
            db="inventory",
            table=f"stock_{_shard((after or before)['sku'])}",
            key_columns=("sku",),
            before=before,
            after=after,
            col_types=dict(TABLE_TYPES[STOCK]),
            seq=(canal_id,),
            event_time=event_time,
        )
        out["inventory_canal"].append((f"{STOCK}:{(after or before)['sku']}".encode(), canal.encode(ch, ctx)))

    for step in range(changes):
        if step == changes // 2 and not altered:
            altered = True
            event_time, seq = clock.tick(rng)
            ddl = Change(
                op="DDL",
                db=TENANT_DB,
                table="customers",
                seq=seq,
                event_time=event_time,
                ddl="ALTER TABLE shop.customers ADD COLUMN tier VARCHAR(8)",
                detail="ALTER_TABLE",
            )
            out["shop_oms"].append((None, oms.encode(ddl, ctx)))
        if step % 40 == 39:
            event_time, seq = clock.tick(rng)
            out["shop_oms"].append((None, oms.encode(Change(op="HEARTBEAT", seq=seq, event_time=event_time), ctx)))
        roll = rng.random()
        if roll < 0.4:
            _customer_change(rng, customers, altered, clock, emit_oms, fault)
        elif roll < 0.75:
            _order_change(rng, orders, customers, clock, emit_oms, fault)
        else:
            _stock_change(rng, stock, clock, emit_canal)
    # What a broken producer or a bad network hop leaves behind: quarantined, never applied.
    bad = [
        b'{"allMetaData": {"db": "demo_tenant.shop", "table_name": "orders"',
        b"not json at all",
        b'{"allMetaData": {"db": "demo_tenant.shop", "table_name": "orders", '
        b'"storeDataSequence": "176198400000001"},'
        b' "recordType": "UPSERT", "postStruct": {"order_id": 1}}',
    ]
    for i, raw in enumerate(bad):
        pos = (i + 1) * len(out["shop_oms"]) // (len(bad) + 1)
        out["shop_oms"].insert(pos, (b"orders:?", raw))
    return out


def _customer_change(rng, customers, altered, clock, emit, fault):
    if customers and rng.random() < 0.55:
        cid = rng.choice(sorted(customers))
        before = dict(customers[cid])
        if rng.random() < 0.2:
            del customers[cid]
            emit("DELETE", CUSTOMERS, ["id"], before, None)
            return
        after = dict(before)
        after["balance"] = f"{rng.randint(0, 10**9)}.{rng.randint(0, 10**24 - 1):024d}"
        after["updated_at"] = clock.now.strftime("%Y-%m-%dT%H:%M:%S.%f") + "Z"
        if altered:
            after["tier"] = rng.choice(["gold", "silver", None])
        customers[cid] = after
        emit("UPDATE", CUSTOMERS, ["id"], before, after)
        return
    cid = max(customers, default=0) + 1
    row = {
        "id": str(cid),
        "name": rng.choice(NAMES),
        "email": f"user{cid}.example.com" if fault() else f"user{cid}@example.com" if rng.random() > 0.1 else None,
        "balance": f"{rng.randint(0, 10**6)}.{rng.randint(0, 10**24 - 1):024d}",
        "avatar": rng.choice(["aGVsbG8gd29ybGQ=", "AAECAwQF/w==", ""]),
        "created_at": clock.now.strftime("%Y-%m-%dT%H:%M:%S.%f"),
        "updated_at": clock.now.strftime("%Y-%m-%dT%H:%M:%S.%f") + "Z",
    }
    if altered:
        row["tier"] = rng.choice(["gold", "silver"])
    customers[cid] = row
    emit("INSERT", CUSTOMERS, ["id"], None, row)


def _order_change(rng, orders, customers, clock, emit, fault):
    if orders and rng.random() < 0.5:
        oid = rng.choice(sorted(orders))
        before = dict(orders[oid])
        if rng.random() < 0.25:
            del orders[oid]
            emit("DELETE", ORDERS, ["order_id"], before, None)
            return
        after = {**before, "status": "LOST" if fault() else rng.choice(STATUSES)}
        orders[oid] = after
        emit("UPDATE", ORDERS, ["order_id"], before, after)
        return
    oid = 2**63 + rng.randint(1, 10**12)  # unsigned BIGINT above the signed range
    row = {
        "order_id": str(oid),
        "customer_id": str(rng.choice(sorted(customers)) if customers else 1),
        "amount": f"{'-' if fault() else ''}{rng.randint(1, 99999)}.{rng.randint(0, 99):02d}",
        "status": "NEW",
        "placed_at": clock.now.strftime("%Y-%m-%dT%H:%M:%S"),
    }
    orders[oid] = row
    emit("INSERT", ORDERS, ["order_id"], None, row)


def _stock_change(rng, stock, clock, emit):
    if stock and rng.random() < 0.6:
        sku = rng.choice(sorted(stock))
        before = dict(stock[sku])
        if rng.random() < 0.15:
            del stock[sku]
            emit("DELETE", before, None)
            return
        after = {
            **before,
            "qty": str(max(0, int(before["qty"]) + rng.randint(-5, 20))),
            "updated_at": clock.now.strftime("%Y-%m-%dT%H:%M:%S"),
        }
        stock[sku] = after
        emit("UPDATE", before, after)
        return
    sku = f"SKU-{len(stock) + rng.randint(1, 10**6):07d}"
    row = {
        "sku": sku,
        "qty": str(rng.randint(0, 500)),
        "price": f"{rng.randint(1, 9999)}.{rng.randint(0, 99):02d}",
        "updated_at": clock.now.strftime("%Y-%m-%dT%H:%M:%S"),
    }
    stock[sku] = row
    emit("INSERT", None, row)


def _shard(sku: str) -> int:
    """The source shard of a SKU: ``inventory.stock_0`` or ``inventory.stock_1``."""
    return int(sku.rsplit("-", 1)[-1]) % 2


SOURCES = {"shop_oms": "oms_default", "inventory_canal": "oms_canal"}
#: The stock mirror's options: fed by both shards, deleted rows kept (docs/row-options.md).
ROW_OPTIONS = {STOCK: {"from": [r"inventory\.stock_[0-9]+"], "deletes": "soft"}}
#: What the shop's analysts expect; broken rows in the traffic make the first two visible.
EXPECTATIONS = {
    f"demo_tenant.{ORDERS}": [
        {"name": "amount_positive", "expect": "between", "column": "amount", "min": 0, "action": "drop"},
        {"name": "status_known", "expect": "in_set", "column": "status", "values": STATUSES, "action": "warn"},
    ],
    f"demo_tenant.{CUSTOMERS}": [
        {"name": "email_shape", "expect": "regex", "column": "email", "pattern": "^[^@]+@[^@]+$", "action": "warn"},
        # a SQL expectation: any Spark SQL boolean over the mirror's columns (a row passes when it is true)
        {"name": "balance_under_900m", "sql": "balance IS NULL OR balance < 900000000", "action": "warn"},
    ],
}
#: Readable mirror names: OMS's ``tenant.database`` is two name parts, so the OMS tables' mirrors are
#: ``demo_tenant__shop__customers`` and ``demo_tenant__shop__orders``, the Canal one ``inventory__stock``.
NAMING = {"template": "{db}__{table}"}


def demo_config(
    workdir: Path, bootstrap: str | None = None, topics: dict[str, str] | None = None, quality: bool = True
) -> dict:
    """The demo's pipeline YAML: landing directories, or Kafka topics when ``bootstrap`` is given.
    ``quality=False`` leaves out expectations and the built-in checks (fast tests)."""

    def where(source: str) -> dict:
        if bootstrap:
            return {"kafka": {"bootstrap_servers": bootstrap, "topics": [(topics or {}).get(source, source)]}}
        return {"path": str(workdir / "landing" / source)}

    return {
        "warehouse": str(workdir / "warehouse"),
        "sources": [{"name": name, "format": fmt, **where(name)} for name, fmt in SOURCES.items()],
        "tables": {
            name: {
                "key": KEYS[name],
                "columns": types,
                **ROW_OPTIONS.get(name, {}),
                **({"expectations": EXPECTATIONS[name]} if quality and name in EXPECTATIONS else {}),
            }
            for name, types in TABLE_TYPES.items()
        },
        "quality_checks": quality,
        "gold": {"naming": NAMING},
    }


def write_landing(workdir: Path, messages: dict[str, list[bytes]], files_per_source: int = 3) -> None:
    for source, lines in messages.items():
        folder = workdir / "landing" / source
        folder.mkdir(parents=True, exist_ok=True)
        size = max(1, -(-len(lines) // files_per_source))
        for i in range(0, len(lines), size):
            (folder / f"{source}-{i // size:04d}.jsonl").write_bytes(b"\n".join(lines[i : i + size]) + b"\n")


def produce_to_kafka(
    bootstrap: str, messages: dict[str, list[tuple[bytes | None, bytes]]], topics: dict[str, str] | None = None
) -> None:
    """Publish each source's messages to its topic (3 partitions), keyed as the vendors key them."""
    existing = set(list_topics(bootstrap))
    for source, pairs in messages.items():
        topic = (topics or {}).get(source, source)
        if topic not in existing:
            create_topic(bootstrap, topic, partitions=3)
        produce(bootstrap, topic, pairs)


def run_demo(
    workdir: Path, changes: int = 400, seed: int = 7, progress: Callable[[str], None] = print, kafka: bool = False
) -> int:
    workdir = workdir.resolve()
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    keyed = generate_keyed(changes, seed, dq_faults=True)
    broker = None
    if kafka:
        progress("starting a local Kafka broker on 127.0.0.1 (first run downloads its jars) ...")
        broker = LocalBroker(data_dir=workdir / "kafka", fresh=True).start()
        produce_to_kafka(broker.bootstrap, keyed)
        where = f"Kafka topics {', '.join(keyed)} at {broker.bootstrap}"
    else:
        write_landing(workdir, {s: [v for _k, v in pairs] for s, pairs in keyed.items()})
        where = str(workdir / "landing")
    try:
        conf_path = workdir / "pipeline.yaml"
        conf_path.write_text(
            "# written by `lakecdc demo`; run it again with: lakecdc run --conf "
            + str(conf_path)
            + "\n"
            + yaml.safe_dump(demo_config(workdir, broker.bootstrap if broker else None), sort_keys=False)
        )
        progress(f"generated {sum(map(len, keyed.values()))} messages for {len(keyed)} sources into {where}")
        cfg = load_config(conf_path)
        fetch_assets()  # the Data Docs' CSS and scripts, cached once, so the demo's docs render offline
        spark = get_spark("lakecdc-demo")
        summary = run_pipeline(spark, cfg, progress=progress)
        _print_summary(spark, cfg, summary, conf_path)
    finally:
        if broker is not None:
            broker.stop()
    return 0


def _print_summary(spark, cfg, summary, conf_path: Path) -> None:
    wh = Warehouse.from_config(cfg)
    counts = reconcile(spark, wh)
    print()
    print("lakecdc demo summary")
    print(f"  messages in bronze      {counts['bronze_messages']:>6}")
    print(f"  with row changes        {counts['changes']:>6}")
    print(f"  heartbeats              {counts['heartbeats']:>6}")
    print(f"  DDL                     {counts['ddl_log']:>6}")
    print(f"  quarantined             {counts['quarantine']:>6}")
    print(f"  skipped (include/exclude) {counts['skipped']:>4}")
    print(
        f"  reconciled              {'yes' if counts['accounted'] == counts['bronze_messages'] else 'NO'}"
        f" ({counts['accounted']} of {counts['bronze_messages']} messages accounted for)"
    )
    print(
        f"  changes applied         {summary.applied:>6}  ({summary.stale} stale skipped, "
        f"{summary.gold_quarantined} quarantined in gold)"
    )
    print("  mirror rows")
    for name, ref in sorted(mirror_refs(spark, wh).items()):
        print(f"    {name:28} {ref.read(spark).count():>6}   {ref.path}")
    if summary.data_docs:
        print("\ndata quality")
        print(report(spark, wh))
        print(f"  Data Docs: {summary.data_docs}\n  chart: lakecdc dq report --warehouse {wh.root}")
    print(
        f"\nwarehouse: {wh.root}\nconfiguration: {conf_path}\n"
        f"see the rows: lakecdc export --warehouse {wh.root} --table demo_tenant.shop.orders"
    )
