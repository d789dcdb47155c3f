"""Where every table lives: Delta paths under a local warehouse directory, or Unity Catalog names.

Local layout (the embedded default)::

    <warehouse>/bronze/raw_messages
    <warehouse>/silver/{changes,quarantine,heartbeats,ddl_log}
    <warehouse>/gold/<mirror>             one mirror per source table (live rows only)
    <warehouse>/gold/_tombstones/<mirror> deleted keys and their sequence (no resurrection)
    <warehouse>/gold/_applied/<mirror>    ids of changes applied to a keyless (multiset) mirror
    <warehouse>/gold/_history/<mirror>    SCD type 2 versions, where configured
    <warehouse>/_checkpoints/<stage>/<name>

Source table names come from messages, so they are hostile until proven otherwise. A source table
is :class:`SourceTable` (db, schema, table) exactly as the source names it, case kept, and
:func:`safe_name` maps it to ``[a-z0-9_]`` INJECTIVELY: two different source tables never share a
mirror, and no name can leave the warehouse (``..``, ``/``) or break SQL.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pipelines.sql import q as quote_ident

if TYPE_CHECKING:
    from delta.tables import DeltaTable
    from pyspark.sql import DataFrame, DataFrameWriter, SparkSession
    from pyspark.sql.streaming import DataStreamWriter, StreamingQuery

    from pipelines.config import PipelineConfig

#: A part that maps to itself: lowercase letters and digits, single ``_`` inside (never ``__``).
_PLAIN_PART = re.compile(r"[a-z0-9]+(?:_[a-z0-9]+)*")
_NOT_SLUG = re.compile(r"[^a-z0-9]+")
#: Only hashed names contain it: plain names join plain parts with ``__``, so never hold ``___``.
HASH_MARK = "___"


@dataclass(frozen=True)
class SourceTable:
    """A source table as its messages name it: database, schema (PostgreSQL, Oracle, GaussDB) and
    table, case kept. MySQL-family formats report the database again as the schema; a schema equal
    to the database is the same table as no schema (:meth:`of` folds it)."""

    db: str | None
    schema: str | None
    table: str

    @classmethod
    def of(cls, db: str | None, schema: str | None, table: str) -> SourceTable:
        db, schema = db or None, schema or None
        return cls(db, None if schema == db else schema, table)

    @property
    def parts(self) -> tuple[str, ...]:
        return tuple(p for p in (self.db, self.schema, self.table) if p is not None)

    @property
    def name(self) -> str:
        """``db.schema.table`` for people and configuration (ambiguous where a part holds a dot)."""
        return ".".join(self.parts)

    @property
    def key(self) -> str:
        """The exact identity as text (JSON): equal for the same table only."""
        return json.dumps([self.db, self.schema, self.table], ensure_ascii=False)

    @classmethod
    def from_key(cls, key: str) -> SourceTable:
        db, schema, table = json.loads(key)
        return cls(db, schema, table)


def safe_name(name: str | Sequence[str], max_len: int = 96) -> str:
    """A mirror's file and catalog name, injective over names.

    ``name`` is the parts of a name (``("shop", "orders")``), or a dotted string split at its dots.
    Parts that are plain (lowercase, digits, single ``_`` inside) join with ``__``: ``shop__orders``.
    Anything else (case, other characters, ``__`` inside, too long) becomes a slug plus ``___`` and
    a 64-bit hash of the exact parts: ``Shop.Orders`` → ``shop_orders___<hash>``. Plain names never
    contain ``___``, so the two kinds cannot meet, and a crafted plain name cannot equal a hashed one.
    """
    parts = tuple(name.split(".")) if isinstance(name, str) else tuple(name)
    plain = "__".join(parts)
    if parts and all(_PLAIN_PART.fullmatch(p) for p in parts) and len(plain) <= max_len:
        return plain
    exact = json.dumps(list(parts), ensure_ascii=False).encode("utf-8", "surrogatepass")
    digest = hashlib.sha256(exact).hexdigest()[:16]
    slug = _NOT_SLUG.sub("_", "_".join(parts).lower()).strip("_")[: max_len - len(HASH_MARK) - 16] or "t"
    return f"{slug}{HASH_MARK}{digest}"


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

    def exists(self, spark: SparkSession) -> bool:
        from delta.tables import DeltaTable

        if self.path is not None:
            return DeltaTable.isDeltaTable(spark, self.path)
        return spark.catalog.tableExists(self.name)

    def delta(self, spark: SparkSession) -> DeltaTable:
        from delta.tables import DeltaTable

        return DeltaTable.forPath(spark, self.path) if self.path is not None else DeltaTable.forName(spark, self.name)

    def read(self, spark: SparkSession) -> DataFrame:
        reader = spark.read.format("delta")
        return reader.load(self.path) if self.path is not None else reader.table(self.name)

    def read_stream(self, spark: SparkSession, **options: str) -> DataFrame:
        reader = spark.readStream.format("delta").options(**options)
        return reader.load(self.path) if self.path is not None else reader.table(self.name)

    def save(self, writer: DataFrameWriter) -> None:
        """Finish a DataFrameWriter (format and mode already set)."""
        if self.path is not None:
            writer.save(self.path)
        else:
            writer.saveAsTable(self.name)

    def start_stream(self, writer: DataStreamWriter) -> StreamingQuery:
        return writer.start(self.path) if self.path is not None else writer.toTable(self.name)


class Warehouse:
    def __init__(
        self,
        root: str | None = "./warehouse",
        catalog: str | None = None,
        schema: str | None = None,
        checkpoints: str | None = None,
    ) -> None:
        self.catalog, self.schema = catalog, schema
        self.root = str(Path(root).resolve()) if root and not catalog else root
        self.checkpoint_root = checkpoints or f"{self.root}/_checkpoints"

    @classmethod
    def from_config(cls, cfg: PipelineConfig) -> Warehouse:
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

    def mirror(self, mirror_name: str | Sequence[str]) -> TableRef:
        return self._ref("gold", safe_name(mirror_name))

    def tombstones(self, mirror_name: str | Sequence[str]) -> TableRef:
        return self._gold_side("tombstones", mirror_name)

    def applied_changes(self, mirror_name: str | Sequence[str]) -> TableRef:
        """Ids of the changes applied to a keyless mirror (a redelivered copy is applied once)."""
        return self._gold_side("applied", mirror_name)

    def history(self, mirror_name: str | Sequence[str]) -> TableRef:
        """The SCD type 2 history of a mirror (``tables.<name>.history: true``)."""
        return self._gold_side("history", mirror_name)

    def _gold_side(self, kind: str, mirror_name: str | Sequence[str]) -> TableRef:
        if self.catalog:
            return TableRef(name=f"{self.catalog}.{self.schema}.gold_{kind}_{safe_name(mirror_name)}")
        return TableRef(path=f"{self.root}/gold/_{kind}/{safe_name(mirror_name)}")

    def derived(self, spark: SparkSession) -> list[str]:
        """What a rebuild drops: the silver and gold tables and their checkpoints (bronze stays)."""
        tables, paths = self._derived(spark)
        return [t.name for t in tables] + paths

    def drop_derived(self, spark: SparkSession) -> list[str]:
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
            tables = [
                TableRef(name=f"{self.catalog}.{self.schema}.{r['tableName']}")
                for r in rows
                if r["tableName"].startswith(tuple(f"{layer}_" for layer in layers))
            ]
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
        return sorted(
            str(p) for p in gold.iterdir() if p.is_dir() and not p.name.startswith("_") and (p / "_delta_log").is_dir()
        )
