"""Where every table lives: Delta paths under a local warehouse directory, or Unity Catalog names.

Local layout (the embedded default)::

    <warehouse>/bronze/raw_messages
    <warehouse>/silver/{changes,quarantine,heartbeats,ddl_log,skipped}
    <warehouse>/gold/<mirror>             one mirror per source table (live rows only)
    <warehouse>/gold/_state/{keys,pending,progress}  gold's shared state for all mirrors (pipelines.gold.state)
    <warehouse>/gold/_tombstones/<mirror> deleted keys, as versions before key state kept them (read once)
    <warehouse>/gold/_applied/<mirror>    ids of changes applied to a keyless (multiset) mirror
    <warehouse>/gold/_history/<mirror>    SCD type 2 versions, where configured
    <warehouse>/_checkpoints/<stage>/<name>

A mirror's name is :func:`~pipelines.names.safe_name` of its name parts (:mod:`pipelines.names`):
injective, so two different source tables never share a mirror, and no name can leave the warehouse.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pipelines.layout import LAYERS
from pipelines.names import (  # noqa: F401 - re-exported: where tables live names them
    DEFAULT_NAMING_TEMPLATE,
    HASH_MARK,
    MirrorNaming,
    SourceTable,
    mirror_parts,
    naming_errors,
    safe_name,
)
from pipelines.spark_logs import is_connect
from pipelines.sql import q as quote_ident

if TYPE_CHECKING:
    from delta.tables import DeltaTable
    from pyspark.sql import DataFrame, DataFrameWriter, SparkSession
    from pyspark.sql.streaming import DataStreamWriter, StreamingQuery

    from pipelines.config import PipelineConfig


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

        if self.path is None:
            return spark.catalog.tableExists(self.name)
        if is_connect(spark):  # Delta's Python API needs the server's Delta Connect plugin: SQL needs none
            from pyspark.errors import AnalysisException

            try:
                return spark.sql(f"DESCRIBE DETAIL {self.sql}").first()["format"] == "delta"
            except AnalysisException:  # no table there, or not a Delta one
                return False
        return DeltaTable.isDeltaTable(spark, self.path)

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


#: The tables silver writes: one per kind of decoded row (``skipped``: changes of tables ``include`` /
#: ``exclude`` leave out), and each batch's counts and high-water marks (``batch_counts``).
SILVER_TABLES = ("changes", "quarantine", "heartbeats", "ddl_log", "skipped", "batch_counts", "quarantine_resolved")
#: The tables gold keeps next to a mirror: deleted keys, ids of applied changes (keyless), SCD2 history.
SIDE_TABLES = ("tombstones", "applied", "history")
#: Gold's shared state tables, one each for all mirrors (pipelines.gold.state).
STATE_TABLES = ("keys", "pending", "progress", "later")
#: A state table's catalog name after the gold schema's prefix: mirror names never start with ``_``.
STATE_PREFIX = "_lakecdc_"


class Warehouse:
    """Where the tables of one pipeline live.

    In a catalog each layer has a schema (``schemas:``, else ``schema:``). A layer with a schema of
    its own names its tables plainly (``<bronze>.raw_messages``, ``<silver>.changes``, ``<gold>.<mirror>``);
    layers that share a schema prefix their tables with the layer (``bronze_raw_messages``,
    ``gold_<mirror>``), so no name is claimed twice. A side table sits next to its mirror as
    ``[gold_]_<kind>_<mirror>``: mirror names never start with ``_``, so the two never meet.
    ``dq_results`` lives in the silver schema. A configured ``target`` ``schema.table`` puts its
    mirror (and side tables) in that schema, by that name.
    """

    def __init__(
        self,
        root: str | None = "./warehouse",
        catalog: str | None = None,
        schema: str | None = None,
        checkpoints: str | None = None,
        schemas: Mapping[str, str] | None = None,
        target_schemas: Sequence[str] = (),
    ) -> None:
        self.catalog, self.schema = catalog, schema
        self.root = str(Path(root).resolve()) if root and not catalog else root
        self.checkpoint_root = checkpoints or f"{self.root}/_checkpoints"
        given = dict(schemas or {})
        self.schemas = {layer: given.get(layer) or schema for layer in LAYERS} if catalog else {}
        #: the schemas that hold mirrors: gold's, and those configured targets name
        self.mirror_schemas = tuple(dict.fromkeys([self.schemas["gold"], *target_schemas])) if catalog else ()

    @classmethod
    def from_config(cls, cfg: PipelineConfig) -> Warehouse:
        targets = [t.target.split(".")[0] for t in cfg.tables.values() if t.target and t.target.count(".") == 1]
        return cls(cfg.warehouse, cfg.catalog, cfg.schema, cfg.checkpoints, cfg.schemas, targets)

    def prefix(self, layer: str) -> str:
        """``<layer>_`` where the layer shares its schema with another layer, else ``""``."""
        return f"{layer}_" if list(self.schemas.values()).count(self.schemas[layer]) > 1 else ""

    def _ref(self, layer: str, name: str) -> TableRef:
        if self.catalog:
            return TableRef(name=f"{self.catalog}.{self.schemas[layer]}.{self.prefix(layer)}{name}")
        return TableRef(path=f"{self.root}/{layer}/{name}")

    @property
    def bronze(self) -> TableRef:
        return self._ref("bronze", "raw_messages")

    def silver(self, name: str) -> TableRef:
        assert name in (*SILVER_TABLES, "dq_results"), name
        return self._ref("silver", name)

    def mirror(self, mirror_name: str | Sequence[str], *, target: bool = False) -> TableRef:
        """The mirror of a source table's name parts, or of a configured ``target`` (``target=True``:
        in a catalog, a target ``schema.table`` chooses the mirror's schema)."""
        if not self.catalog:
            return TableRef(path=f"{self.root}/gold/{safe_name(mirror_name)}")
        schema, prefix, name = self._mirror_place(mirror_name, target)
        return TableRef(name=f"{self.catalog}.{schema}.{prefix}{name}")

    def tombstones(self, mirror_name: str | Sequence[str], *, target: bool = False) -> TableRef:
        return self._gold_side("tombstones", mirror_name, target)

    def applied_changes(self, mirror_name: str | Sequence[str], *, target: bool = False) -> TableRef:
        """Ids of the changes applied to a keyless mirror (a redelivered copy is applied once)."""
        return self._gold_side("applied", mirror_name, target)

    def history(self, mirror_name: str | Sequence[str], *, target: bool = False) -> TableRef:
        """The SCD type 2 history of a mirror (``tables.<name>.history: true``)."""
        return self._gold_side("history", mirror_name, target)

    def gold_state(self, name: str) -> TableRef:
        """One of gold's shared state tables (:data:`STATE_TABLES`): ``gold/_state/<name>``, or
        ``[gold_]_lakecdc_<name>`` in the gold schema."""
        assert name in STATE_TABLES, name
        if not self.catalog:
            return TableRef(path=f"{self.root}/gold/_state/{name}")
        return TableRef(name=f"{self.catalog}.{self.schemas['gold']}.{self.prefix('gold')}{STATE_PREFIX}{name}")

    def mirror_of_state_key(self, state_key: str) -> TableRef:
        """The mirror a state key names (:func:`state_key`)."""
        if not self.catalog:
            return TableRef(path=f"{self.root}/gold/{state_key}")
        return TableRef(name=f"{self.catalog}.{state_key}")

    def _mirror_place(self, mirror_name: str | Sequence[str], target: bool) -> tuple[str, str, str]:
        """(schema, prefix, name) of a mirror in the catalog."""
        parts = tuple(mirror_name.split(".")) if isinstance(mirror_name, str) else tuple(mirror_name)
        if target and len(parts) == 2:
            return parts[0], "", safe_name(parts[1:])
        return self.schemas["gold"], self.prefix("gold"), safe_name(parts)

    def _gold_side(self, kind: str, mirror_name: str | Sequence[str], target: bool) -> TableRef:
        assert kind in SIDE_TABLES, kind
        if not self.catalog:
            return TableRef(path=f"{self.root}/gold/_{kind}/{safe_name(mirror_name)}")
        schema, prefix, name = self._mirror_place(mirror_name, target)
        return TableRef(name=f"{self.catalog}.{schema}.{prefix}_{kind}_{name}")

    def side_of(self, mirror: TableRef, kind: str) -> TableRef:
        """The side table of ``kind`` next to an existing mirror (as :meth:`tombstones` and the like lay
        them out), from the mirror's own location."""
        assert kind in SIDE_TABLES, kind
        if mirror.path is not None:
            parent, name = mirror.path.rsplit("/", 1)
            return TableRef(path=f"{parent}/_{kind}/{name}")
        catalog, schema, table = mirror.name.split(".")
        prefix = self.prefix("gold") if self.catalog and schema == self.schemas["gold"] else ""
        return TableRef(name=f"{catalog}.{schema}.{prefix}_{kind}_{table[len(prefix) :]}")

    def catalog_gold_tables(self, spark: SparkSession) -> tuple[list[TableRef], list[TableRef]]:
        """(mirrors, side tables) in the catalog's mirror schemas. A mirror is known by the identity it
        records (:data:`MIRROR_PROPERTIES`), a side table by its name; other tables of a schema are left
        alone (a target's schema may hold tables lakecdc did not write)."""
        mirrors, sides = [], []
        for schema in self.mirror_schemas:
            prefix = self.prefix("gold") if schema == self.schemas["gold"] else ""
            side_prefixes = tuple(f"{prefix}_{kind}_" for kind in SIDE_TABLES) + (f"{prefix}{STATE_PREFIX}",)
            rows = spark.sql(f"SHOW TABLES IN {quote_ident(self.catalog)}.{quote_ident(schema)}").collect()
            for name in sorted(r["tableName"] for r in rows if not r["isTemporary"]):
                ref = TableRef(name=f"{self.catalog}.{schema}.{name}")
                if name.startswith(side_prefixes):
                    sides.append(ref)
                elif name.startswith(prefix) and _records_identity(spark, ref):
                    mirrors.append(ref)
        return mirrors, sides

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
        """Catalog tables of silver and gold, and the directories to remove (local layers, checkpoints).
        ``dq_results`` stays: the record of past checks outlives a rebuild."""
        layers = ("silver", "gold")
        tables, paths = [], [f"{self.checkpoint_root}/{layer}" for layer in layers]
        if self.catalog:
            silver = [self.silver(n) for n in SILVER_TABLES]
            mirrors, sides = self.catalog_gold_tables(spark)
            tables = [t for t in silver if t.exists(spark)] + mirrors + sides
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


def state_key(mirror: TableRef) -> str:
    """A mirror's id in gold's shared state (key state, pending changes, progress): its directory's name,
    or in a catalog ``schema.table`` (a configured target may sit in a schema of its own). A warehouse
    directory moved elsewhere keeps its ids."""
    if mirror.name is not None:
        return ".".join(mirror.name.split(".")[1:])
    return mirror.path.rstrip("/").rsplit("/", 1)[-1]


#: The table property that records which source table a mirror holds (JSON ``[db, schema, table]``).
SOURCE_IDENTITY_PROPERTY = "lakecdc.source_identity"
#: The properties by which gold's mirrors record their source table (identity; its name, before identities).
MIRROR_PROPERTIES = (SOURCE_IDENTITY_PROPERTY, "lakecdc.source_table")


def _records_identity(spark: SparkSession, ref: TableRef) -> bool:
    rows = spark.sql(f"SHOW TBLPROPERTIES {ref.sql}").collect()
    return any(r["key"] in MIRROR_PROPERTIES for r in rows)
