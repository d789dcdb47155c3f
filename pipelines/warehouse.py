"""Where every table lives: Delta paths under a local warehouse directory, or Unity Catalog names.

Local layout (the embedded default)::

    <warehouse>/bronze/raw_messages
    <warehouse>/silver/{changes,quarantine,heartbeats,ddl_log}
    <warehouse>/gold/<mirror>             one mirror per source table (live rows only)
    <warehouse>/gold/_tombstones/<mirror> deleted keys and their sequence (no resurrection)
    <warehouse>/gold/_applied/<mirror>    ids of changes applied to a keyless (multiset) mirror
    <warehouse>/gold/_history/<mirror>    SCD type 2 versions, where configured
    <warehouse>/_checkpoints/<stage>/<name>

Source table names come from messages, so they are hostile until proven otherwise:
:func:`safe_name` turns any name into ``[a-z0-9_]`` plus a hash when anything was
changed, so a name can neither leave the warehouse (``..``, ``/``) nor break SQL.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from pipelines.sql import q as quote_ident

_SAFE_RE = re.compile(r"[^a-z0-9_]")


def safe_name(name: str, max_len: int = 96) -> str:
    """``shop.orders`` → ``shop__orders``; anything odd → a slug plus a stable hash."""
    slug = _SAFE_RE.sub("_", name.lower().replace(".", "__"))
    clean = slug == name.lower().replace(".", "__") and "___" not in slug and len(slug) <= max_len
    if clean and slug and not slug.startswith("_"):
        return slug
    digest = hashlib.sha256(name.encode("utf-8")).hexdigest()[:12]
    return f"t_{slug.strip('_')[: max_len - 16]}_{digest}"


@dataclass(frozen=True)
class TableRef:
    """A Delta table by path (local) or by catalog name (Databricks)."""

    path: str | None = None
    name: str | None = None

    @property
    def sql(self) -> str:
        if self.path is not None:
            return "delta." + quote_ident(self.path)
        return ".".join(quote_ident(p) for p in self.name.split("."))

    def exists(self, spark) -> bool:
        from delta.tables import DeltaTable

        if self.path is not None:
            return DeltaTable.isDeltaTable(spark, self.path)
        return spark.catalog.tableExists(self.name)

    def delta(self, spark):
        from delta.tables import DeltaTable

        return DeltaTable.forPath(spark, self.path) if self.path is not None else DeltaTable.forName(spark, self.name)

    def read(self, spark):
        reader = spark.read.format("delta")
        return reader.load(self.path) if self.path is not None else reader.table(self.name)

    def read_stream(self, spark, **options):
        reader = spark.readStream.format("delta").options(**options)
        return reader.load(self.path) if self.path is not None else reader.table(self.name)

    def save(self, writer) -> None:
        """Finish a DataFrameWriter (format and mode already set)."""
        if self.path is not None:
            writer.save(self.path)
        else:
            writer.saveAsTable(self.name)

    def start_stream(self, writer):
        return writer.start(self.path) if self.path is not None else writer.toTable(self.name)


class Warehouse:
    def __init__(self, root: str | None = "./warehouse", catalog: str | None = None, schema: str | None = None,
                 checkpoints: str | None = None) -> None:
        self.catalog, self.schema = catalog, schema
        self.root = str(Path(root).resolve()) if root and not catalog else root
        self.checkpoint_root = checkpoints or f"{self.root}/_checkpoints"

    @classmethod
    def from_config(cls, cfg) -> "Warehouse":
        return cls(cfg.warehouse, cfg.catalog, cfg.schema, cfg.checkpoints)

    def _ref(self, layer: str, name: str) -> TableRef:
        if self.catalog:
            return TableRef(name=f"{self.catalog}.{self.schema}.{layer}_{name}")
        return TableRef(path=f"{self.root}/{layer}/{name}")

    @property
    def bronze(self) -> TableRef:
        return self._ref("bronze", "raw_messages")

    def silver(self, name: str) -> TableRef:
        assert name in ("changes", "quarantine", "heartbeats", "ddl_log"), name
        return self._ref("silver", name)

    def mirror(self, mirror_name: str) -> TableRef:
        return self._ref("gold", safe_name(mirror_name))

    def tombstones(self, mirror_name: str) -> TableRef:
        return self._gold_side("tombstones", mirror_name)

    def applied_changes(self, mirror_name: str) -> TableRef:
        """Ids of the changes applied to a keyless mirror (a redelivered copy is applied once)."""
        return self._gold_side("applied", mirror_name)

    def history(self, mirror_name: str) -> TableRef:
        """The SCD type 2 history of a mirror (``tables.<name>.history: true``)."""
        return self._gold_side("history", mirror_name)

    def _gold_side(self, kind: str, mirror_name: str) -> TableRef:
        if self.catalog:
            return TableRef(name=f"{self.catalog}.{self.schema}.gold_{kind}_{safe_name(mirror_name)}")
        return TableRef(path=f"{self.root}/gold/_{kind}/{safe_name(mirror_name)}")

    def derived(self, spark) -> list[str]:
        """What a rebuild drops: the silver and gold tables and their checkpoints (bronze stays)."""
        tables, paths = self._derived(spark)
        return [t.name for t in tables] + paths

    def drop_derived(self, spark) -> list[str]:
        """Drop silver, gold and their checkpoints; returns what was dropped."""
        import shutil

        tables, paths = self._derived(spark)
        for table in tables:
            spark.sql(f"DROP TABLE IF EXISTS {table.sql}")
        for path in paths:
            shutil.rmtree(path)
        return [t.name for t in tables] + paths

    def _derived(self, spark) -> tuple[list[TableRef], list[str]]:
        """Catalog tables of silver and gold, and the directories to remove (local layers, checkpoints)."""
        layers = ("silver", "gold")
        tables, paths = [], [f"{self.checkpoint_root}/{layer}" for layer in layers]
        if self.catalog:
            rows = spark.sql(f"SHOW TABLES IN {quote_ident(self.catalog)}.{quote_ident(self.schema)}").collect()
            tables = [TableRef(name=f"{self.catalog}.{self.schema}.{r['tableName']}") for r in rows
                      if r["tableName"].startswith(tuple(f"{layer}_" for layer in layers))]
        else:
            paths = [str(Path(self.root) / layer) for layer in layers] + paths
        return tables, [p for p in paths if Path(p).exists()]

    def checkpoint(self, stage: str, name: str) -> str:
        return f"{self.checkpoint_root}/{stage}/{safe_name(name)}"

    def mirror_paths(self) -> list[str]:
        """Local mirrors that exist (for export and the demo summary)."""
        gold = Path(self.root or ".") / "gold"
        if not gold.is_dir():
            return []
        return sorted(str(p) for p in gold.iterdir() if p.is_dir() and not p.name.startswith("_")
                      and (p / "_delta_log").is_dir())
