# Databricks notebook source
# MAGIC %md
# MAGIC # Where the lakecdc tables are (shared by the other notebooks)
# MAGIC The other notebooks start with `%run ./lakecdc_tables`; you do not need to open this one.
# MAGIC
# MAGIC It finds the tables from what the warehouse records about itself, not from their names:
# MAGIC * a **mirror** is a table whose properties carry `lakecdc.source_identity` (the source table it holds,
# MAGIC   as JSON `[db, schema, table]`), written by gold when it creates the mirror. Side and state tables (key state,
# MAGIC   ids of applied changes, SCD2 history) do not carry it, so they are never listed as mirrors. Mirrors
# MAGIC   written before identities were recorded carry only `lakecdc.source_table` and are listed too.
# MAGIC * a mirror's name is `lakecdc.mirror_name` (the configured `target`, else the source table), as
# MAGIC   `lakecdc export` names it;
# MAGIC * silver tables (`changes`, `quarantine`, `heartbeats`, `ddl_log`) and `dq_results` by their place:
# MAGIC   `<warehouse>/silver/<name>` and `<warehouse>/dq/dq_results` for a local warehouse; in a catalog,
# MAGIC   `silver_<name>` or `<name>`, and `dq_results`, in the schemas given.
# MAGIC
# MAGIC Give either `warehouse` (a path, read as ``delta.`path` ``) or `catalog` and `schema` (one schema, or a
# MAGIC comma-separated list when bronze, silver and gold have schemas of their own).

# COMMAND ----------
import json
import os
from dataclasses import dataclass

SOURCE_IDENTITY = "lakecdc.source_identity"
SOURCE_TABLE = "lakecdc.source_table"  # mirrors written before identities were recorded
MIRROR_NAME = "lakecdc.mirror_name"
KEY = "lakecdc.key"
SILVER_TABLES = ("changes", "quarantine", "heartbeats", "ddl_log")


def key_of(text: str) -> tuple:
    """A mirror's key columns: the JSON array gold writes, or the comma-joined text of older mirrors
    (pipelines.mirror_key; notebooks do not import the package)."""
    try:
        names = json.loads(text) if text.startswith("[") else None
    except ValueError:
        names = None
    return tuple(map(str, names)) if isinstance(names, list) else tuple(k for k in text.split(",") if k)


def quote(name: str) -> str:
    """One identifier, backtick-quoted (a source table name may hold anything)."""
    return "`" + name.replace("`", "``") + "`"


@dataclass(frozen=True)
class Mirror:
    name: str  # as `lakecdc export` prints it
    sql: str  # how SQL names it: `catalog`.`schema`.`table` or delta.`/path`
    location: str  # the catalog name or the path
    source: tuple  # the source table: (db, schema, table); schema is None for MySQL-family sources
    key: tuple
    is_path: bool

    @property
    def source_table(self) -> str:
        return ".".join(p for p in self.source if p)

    def read(self, spark, **options):
        reader = spark.read.format("delta").options(**options)
        return reader.load(self.location) if self.is_path else reader.table(self.location)


class LakecdcTables:
    """The warehouse's tables, from a local/cloud path or from catalog + schema(s)."""

    def __init__(self, spark, warehouse: str = "", catalog: str = "", schema: str = "") -> None:
        self.spark = spark
        self.warehouse = (warehouse or "").strip().rstrip("/")
        if self.warehouse and ":" not in self.warehouse and not self.warehouse.startswith("/"):
            # a relative local path: Delta's ``delta.`path` `` names resolve only absolute ones
            self.warehouse = os.path.abspath(self.warehouse)
        self.catalog = (catalog or "").strip()
        self.schemas = [s.strip() for s in (schema or "").split(",") if s.strip()]
        if not self.warehouse and not (self.catalog and self.schemas):
            raise ValueError("set the widget `warehouse` to a warehouse path, or `catalog` and `schema`")
        self._props: dict[str, dict[str, str]] = {}
        self._mirrors: list[Mirror] | None = None
        self._catalog_tables: list[str] | None = None

    @property
    def where(self) -> str:
        if self.warehouse:
            return f"warehouse {self.warehouse}"
        return f"catalog {self.catalog}, schema {', '.join(self.schemas)}"

    def properties(self, sql: str) -> dict[str, str]:
        if sql not in self._props:
            rows = self.spark.sql(f"SHOW TBLPROPERTIES {sql}").collect()
            self._props[sql] = {r["key"]: r["value"] for r in rows}
        return self._props[sql]

    # ---- listing
    def _ls(self, path: str) -> list:
        try:
            return dbutils.fs.ls(path)
        except Exception:  # noqa: BLE001 - a missing directory lists as empty (Databricks raises a Java error)
            return []

    def _is_delta(self, path: str) -> bool:
        return bool(self._ls(f"{path}/_delta_log"))

    def _delta_paths(self, root: str) -> list[str]:
        """Delta tables directly under ``root`` and one level deeper (side tables live in sub-folders)."""
        found = []
        for entry in self._ls(root):
            path = f"{root}/{entry.name.rstrip('/')}"
            if not entry.name.endswith("/"):
                continue
            if self._is_delta(path):
                found.append(path)
                continue
            for sub in self._ls(path):
                sub_path = f"{path}/{sub.name.rstrip('/')}"
                if sub.name.endswith("/") and self._is_delta(sub_path):
                    found.append(sub_path)
        return sorted(found)

    def catalog_tables(self) -> list[str]:
        """Every table of the schemas, as ``catalog.schema.table``."""
        if self._catalog_tables is None:
            names = []
            for schema in self.schemas:
                rows = self.spark.sql(f"SHOW TABLES IN {quote(self.catalog)}.{quote(schema)}").collect()
                names += [f"{self.catalog}.{schema}.{r['tableName']}" for r in rows if not r["isTemporary"]]
            self._catalog_tables = names
        return self._catalog_tables

    def _sql_of_name(self, name: str) -> str:
        return ".".join(quote(p) for p in name.split(".", 2))

    def mirrors(self) -> list[Mirror]:
        """Every mirror, in the order and with the names `lakecdc export` gives them."""
        if self._mirrors is not None:
            return self._mirrors
        if self.warehouse:
            candidates = [(f"delta.{quote(p)}", p, True) for p in self._delta_paths(f"{self.warehouse}/gold")]
        else:
            candidates = [(self._sql_of_name(n), n, False) for n in self.catalog_tables()]
        found, names = [], set()
        for sql, location, is_path in candidates:
            props = self.properties(sql)
            if SOURCE_IDENTITY in props:
                source = tuple(json.loads(props[SOURCE_IDENTITY]))
            elif SOURCE_TABLE in props:
                source = tuple(props[SOURCE_TABLE].split(".", 2))
            else:
                continue  # not a mirror: a side table, or a table lakecdc did not write
            name = props.get(MIRROR_NAME) or props.get(SOURCE_TABLE) or location
            if name in names:  # two source tables whose names read alike (a.b + c, a + b.c)
                name = f"{name} ({location.rsplit('/' if is_path else '.', 1)[-1]})"
            names.add(name)
            key = key_of(props.get(KEY, ""))
            found.append(Mirror(name, sql, location, source, key, is_path))
        self._mirrors = sorted(found, key=lambda m: m.name)
        return self._mirrors

    def mirror(self, name: str) -> Mirror:
        for m in self.mirrors():
            if m.name == name:
                return m
        raise KeyError(f"no mirror named {name!r} in {self.where}; mirrors: {[m.name for m in self.mirrors()]}")

    def table(self, name: str) -> str | None:
        """SQL reference of a silver table (``changes``, ``quarantine``, ...) or ``dq_results``; None if absent."""
        if self.warehouse:
            path = f"{self.warehouse}/dq/dq_results" if name == "dq_results" else f"{self.warehouse}/silver/{name}"
            return f"delta.{quote(path)}" if self._is_delta(path) else None
        mirrors = {m.location for m in self.mirrors()}
        wanted = [name] if name == "dq_results" else [f"silver_{name}", name]
        for short in wanted:  # `silver_<name>` in one shared schema, `<name>` in a schema of silver's own
            for full in self.catalog_tables():
                if full.rsplit(".", 1)[-1] == short and full not in mirrors:
                    return self._sql_of_name(full)
        return None
