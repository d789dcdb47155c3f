"""``lakecdc export``: mirrors as canonical JSON, rows sorted by primary key.

Canonical values: integers as JSON integers when they fit in int64 (else strings),
DECIMAL as exact decimal strings, binary as Base64, dates ``YYYY-MM-DD``, instants
as ISO-8601 UTC ending in ``Z``, zone-less DATETIME without a zone, TIME as
``HH:MM:SS[.fraction]``, booleans, NULL as null. Lineage columns only on request.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipelines.layout import SYSTEM_COLUMNS
from pipelines.mirror_columns import SOURCE_TYPE_PREFIX, table_properties
from pipelines.sql import export_expr, q
from pipelines.values import INT64_MAX, INT64_MIN, family, parse_type, spark_type
from pipelines.warehouse import TableRef, Warehouse

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_INTEGER_TYPES = ("tinyint", "smallint", "int", "bigint")


def mirror_refs(spark: SparkSession, wh: Warehouse) -> dict[str, TableRef]:
    """Mirror name → table, for every mirror in the warehouse."""
    out = {}
    for ref in _catalog_mirrors(spark, wh) if wh.catalog else [TableRef(path=p) for p in wh.mirror_paths()]:
        path = ref.path or ref.name
        props = table_properties(spark, ref)
        if wh.catalog and "lakecdc.mirror_name" not in props:
            continue  # a side table (tombstones, applied, history) or another table of the schema
        name = props.get("lakecdc.mirror_name") or props.get("lakecdc.source_table") or path
        if name in out:  # two source tables whose names read alike (a.b + c, a + b.c): the path tells them apart
            name = f"{name} ({path.rsplit('/', 1)[-1]})"
        out[name] = ref
    return out


def _catalog_mirrors(spark: SparkSession, wh: Warehouse) -> list[TableRef]:
    """The catalog tables where the warehouse puts mirrors: the namespace and name prefix of
    ``wh.mirror(...)``, read off a probe name, so this follows the warehouse's naming."""
    probe = wh.mirror("probe").name
    namespace, table = probe.rsplit(".", 1)
    prefix = table[: -len("probe")]
    rows = spark.sql(f"SHOW TABLES IN {'.'.join(q(p) for p in namespace.split('.'))}").collect()
    names = sorted(r["tableName"] for r in rows if not r["isTemporary"] and r["tableName"].startswith(prefix))
    return [TableRef(name=f"{namespace}.{n}") for n in names]


def export_table(spark: SparkSession, ref: TableRef, with_system_columns: bool = False) -> list[dict]:
    df = ref.read(spark)
    key = [k for k in table_properties(spark, ref).get("lakecdc.key", "").split(",") if k]
    fields = [f for f in df.schema.fields if with_system_columns or f.name not in SYSTEM_COLUMNS]
    exprs = [f"{export_expr(f.name, f.dataType.simpleString())} AS `c{i}`" for i, f in enumerate(fields)]
    rows = []
    for r in df.selectExpr(*exprs).collect():
        row = {}
        for i, f in enumerate(fields):
            row[f.name] = canonical_json_value(r[f"c{i}"], f.dataType.simpleString(), f.metadata.get("comment", ""))
        rows.append(row)
    rows.sort(key=lambda row: tuple(_sort_value(row.get(k)) for k in key))
    return rows


def canonical_json_value(text: str | None, spark_type: str, comment: str) -> object:
    if text is None:
        return None
    t = spark_type.lower()
    if t in _INTEGER_TYPES:
        return int(text)
    if t == "boolean":
        return text == "true"
    if t.startswith("decimal") and family(comment.removeprefix(SOURCE_TYPE_PREFIX)) == "uint64":
        n = int(text)
        return n if INT64_MIN <= n <= INT64_MAX else text
    if t in ("double", "float"):
        return float(text)
    return text


def _sort_value(v):
    if v is None:
        return (0, 0, "")
    if isinstance(v, bool):
        return (1, int(v), "")
    if isinstance(v, int):
        return (1, v, "")
    try:
        return (1, int(v), "")
    except (TypeError, ValueError):
        try:
            from decimal import Decimal

            return (1, Decimal(v), "")
        except Exception:  # noqa: BLE001
            return (2, 0, str(v))


def export_warehouse(
    spark: SparkSession, wh: Warehouse, table: str | None = None, with_system_columns: bool = False
) -> dict:
    refs = mirror_refs(spark, wh)
    if table is not None:
        matches = {n: r for n, r in refs.items() if n.lower() == table.lower()}
        if not matches:
            where = f"{wh.catalog}.{wh.schema}" if wh.catalog else wh.root
            raise KeyError(f"no mirror named {table!r} in {where}; mirrors: {', '.join(sorted(refs)) or 'none'}")
        refs = matches
    return {name: export_table(spark, ref, with_system_columns) for name, ref in sorted(refs.items())}


def expected_value(text: str | None, source_type: str | None) -> object:
    """What ``export`` prints for a canonical value of a column of ``source_type``.

    Lets tests and the simulator compare a mirror with the reference model value for value: the
    value as the mirror stores it (a DECIMAL shows its full scale), rendered by
    :func:`canonical_json_value`, as export renders the mirror itself.
    """
    from decimal import Context, Decimal, localcontext

    target = spark_type(source_type)
    if text is not None and target.startswith("DECIMAL") and family(source_type) != "uint64":
        scale = (list(parse_type(source_type or "")[1]) + [0, 0])[1]
        with localcontext(Context(prec=100)):
            text = str(Decimal(text).quantize(Decimal(1).scaleb(-scale)))
    return canonical_json_value(text, target, SOURCE_TYPE_PREFIX + (source_type or ""))


def expected_rows(rows: list[dict], column_types: dict[str, str], key: list[str]) -> list[dict]:
    """Reference-model rows in export form (all mirror columns, NULL where absent), sorted by key."""
    out = [{c: expected_value(r.get(c), t) for c, t in column_types.items()} for r in rows]
    out.sort(key=lambda row: tuple(_sort_value(row.get(k)) for k in key))
    return out
