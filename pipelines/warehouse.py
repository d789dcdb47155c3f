"""Where every table lives: Delta paths under a local warehouse directory, or Unity Catalog names.

Local layout (the embedded default)::

    <warehouse>/bronze/raw_messages
    <warehouse>/silver/{changes,quarantine,heartbeats,ddl_log,skipped}
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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pipelines.layout import LAYERS
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


#: The placeholders of a ``gold.naming`` template, and the template that gives every mirror the name it
#: had before templates (``safe_name`` of the source table's parts).
NAMING_FIELDS = ("db", "schema", "table")
DEFAULT_NAMING_TEMPLATE = "{db}__{schema}__{table}"
#: A prefix: a plain part, optionally ending in one ``_``; a suffix: the same, optionally starting with one.
_NAMING_PREFIX = re.compile(r"(?:[a-z0-9]+(?:_[a-z0-9]+)*_?)?")
_NAMING_SUFFIX = re.compile(r"(?:_?[a-z0-9]+(?:_[a-z0-9]+)*)?")


@dataclass(frozen=True)
class MirrorNaming:
    """How a mirror is named after its source table (``gold.naming``): a template of ``{db}``,
    ``{schema}`` and ``{table}`` joined by ``__``, plus a constant prefix and suffix.

    The default template names every mirror as it was named before templates existed."""

    template: str = DEFAULT_NAMING_TEMPLATE
    prefix: str = ""
    suffix: str = ""

    @property
    def fields(self) -> tuple[str, ...]:
        """The template's placeholders in order (``("db", "table")`` for ``{db}__{table}``)."""
        return tuple(piece[1:-1] for piece in self.template.split("__"))

    @property
    def is_default(self) -> bool:
        return (self.template, self.prefix, self.suffix) == (DEFAULT_NAMING_TEMPLATE, "", "")


def naming_errors(naming: MirrorNaming) -> list[tuple[str, str]]:
    """(field, message) for each thing wrong with a naming (``gold.naming.<field>``): the template is
    placeholders joined by ``__``, each at most once, ``{db}`` and ``{table}`` among them (a name
    without the database would give two databases' tables one mirror); prefix and suffix keep names
    plain (lowercase letters, digits, single ``_``) and never start a name with ``_`` (side tables do)."""
    errors = []
    pieces = naming.template.split("__")
    fields = naming.fields
    if any(not (p.startswith("{") and p.endswith("}")) or p[1:-1] not in NAMING_FIELDS for p in pieces):
        errors.append(
            (
                "template",
                "must be placeholders {db}, {schema} and {table} joined by __ (such as {db}__{table}), "
                f"got {naming.template!r:.80}; put fixed text in prefix or suffix",
            )
        )
    elif len(set(fields)) != len(fields):
        errors.append(("template", f"names a placeholder twice: {naming.template!r:.80}"))
    elif not {"db", "table"} <= set(fields):
        errors.append(
            (
                "template",
                f"must contain {{db}} and {{table}}, got {naming.template!r:.80}: without one of them two source "
                "tables could get one mirror (a hand-picked name is tables.<name>.target)",
            )
        )
    if not _NAMING_PREFIX.fullmatch(naming.prefix):
        errors.append(("prefix", f"lowercase letters, digits and single _ (may end with _), got {naming.prefix!r:.80}"))
    if not _NAMING_SUFFIX.fullmatch(naming.suffix):
        errors.append(
            ("suffix", f"lowercase letters, digits and single _ (may start with _), got {naming.suffix!r:.80}")
        )
    return errors


def mirror_parts(source: SourceTable, naming: MirrorNaming | None = None) -> tuple[str, ...]:
    """The name parts of a source table's mirror under ``naming``; :func:`safe_name` of them is the
    mirror's file and catalog name (as of any parts). The default naming gives ``source.parts``: every
    mirror keeps the name it had before namings existed.

    ``{db}`` stands for the database; in a template without ``{schema}`` a database written with dots
    (OceanBase's ``tenant.database`` in OMS messages) is one part per piece, so ``demo_tenant.shop`` +
    ``customers`` under ``{db}__{table}`` is ``demo_tenant__shop__customers``. Injective for every
    configured naming, with the guarantees of :func:`safe_name`: the template fixes where each part of
    a plain name comes from, so a plain name names one source table. Where a name would be ambiguous
    it is hashed, as any name :func:`safe_name` cannot keep: a database with dots under a template with
    ``{schema}`` (is ``a__b__c`` the database ``a.b`` or the schema ``b`` of ``a``?), a source table
    with a schema under a template without ``{schema}``, and one with a schema but no database (the
    default naming keeps its old name, which a table of that name as database can share: the mirror's
    identity guard refuses the second)."""
    naming = naming or MirrorNaming()
    if naming.is_default:
        return source.parts
    fields = naming.fields
    if source.schema is not None and ("schema" not in fields or source.db is None):
        return _unmappable(source, naming)
    if source.db is None:
        db: tuple[str, ...] = ()
    else:
        db = (source.db,) if "schema" in fields else tuple(source.db.split("."))
    values = {"db": db, "schema": () if source.schema is None else (source.schema,), "table": (source.table,)}
    parts = [part for f in fields for part in values[f]]
    parts[0] = naming.prefix + parts[0]
    parts[-1] = parts[-1] + naming.suffix
    return tuple(parts)


def _unmappable(source: SourceTable, naming: MirrorNaming) -> tuple[str, ...]:
    """Parts no source table gets from :func:`mirror_parts` otherwise, which :func:`safe_name` hashes:
    four parts, each with a dot. Under a template with ``{schema}`` other parts are at most three; under
    one without, at most one of them holds a dot (the table; database pieces are split at dots)."""
    return (f"{naming.prefix}.", ".", ".", f".{source.key}{naming.suffix}")


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


#: The tables silver writes: one per kind of decoded row (``skipped``: changes of tables ``include`` /
#: ``exclude`` leave out).
SILVER_TABLES = ("changes", "quarantine", "heartbeats", "ddl_log", "skipped")
#: The tables gold keeps next to a mirror: deleted keys, ids of applied changes (keyless), SCD2 history.
SIDE_TABLES = ("tombstones", "applied", "history")


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
            side_prefixes = tuple(f"{prefix}_{kind}_" for kind in SIDE_TABLES)
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


#: The table property that records which source table a mirror holds (JSON ``[db, schema, table]``).
SOURCE_IDENTITY_PROPERTY = "lakecdc.source_identity"
#: The properties by which gold's mirrors record their source table (identity; its name, before identities).
MIRROR_PROPERTIES = (SOURCE_IDENTITY_PROPERTY, "lakecdc.source_table")


def _records_identity(spark: SparkSession, ref: TableRef) -> bool:
    rows = spark.sql(f"SHOW TBLPROPERTIES {ref.sql}").collect()
    return any(r["key"] in MIRROR_PROPERTIES for r in rows)
