"""``lakecdc export``: mirrors as canonical JSON, rows sorted by primary key.

Canonical values: integers as JSON integers when they fit in int64 (else strings),
DECIMAL as exact decimal strings, binary as Base64, dates ``YYYY-MM-DD``, instants
as ISO-8601 UTC ending in ``Z``, zone-less DATETIME without a zone, TIME as
``HH:MM:SS[.fraction]``, booleans, a VARIANT as its JSON text (keys sorted, no spaces, numbers by value),
NULL as null. Lineage columns only on request; a ``deletes: soft`` mirror's ``_deleted`` and ``_deleted_at``
always.
"""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING

from pipelines.layout import SOFT_DELETE_COLUMNS, SYSTEM_COLUMNS
from pipelines.mirror_columns import source_types, table_properties
from pipelines.mirror_key import key_of
from pipelines.quality.certify import certified_versions
from pipelines.sql import export_expr
from pipelines.values import INT64_MAX, INT64_MIN, family, parse_type, spark_type
from pipelines.warehouse import TableRef, Warehouse

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_INTEGER_TYPES = ("tinyint", "smallint", "int", "bigint")


def mirror_refs(spark: SparkSession, wh: Warehouse, table: str | None = None) -> dict[str, TableRef]:
    """Mirror name → table, for every mirror in the warehouse (``table``: only the mirror of that name, or
    of that source table; KeyError naming the mirrors there are when none is)."""
    out, sources = {}, {}
    for ref in wh.catalog_gold_tables(spark)[0] if wh.catalog else [TableRef(path=p) for p in wh.mirror_paths()]:
        path = ref.path or ref.name
        props = table_properties(spark, ref)
        name = props.get("lakecdc.mirror_name") or props.get("lakecdc.source_table") or path
        if name in out:  # two source tables whose names read alike (a.b + c, a + b.c): the path tells them apart
            name = f"{name} ({path.rsplit('/', 1)[-1]})"
        out[name] = ref
        sources[name] = props.get("lakecdc.source_table") or ""
    if table is None:
        return out
    wanted = table.lower()
    matches = {n: r for n, r in out.items() if n.lower() == wanted} or {
        n: r for n, r in out.items() if sources[n].lower() == wanted
    }
    if not matches:
        where = ", ".join(f"{wh.catalog}.{s}" for s in wh.mirror_schemas) if wh.catalog else wh.root
        raise KeyError(f"no mirror named {table!r} in {where}; mirrors: {', '.join(sorted(out)) or 'none'}")
    return matches


def export_table(
    spark: SparkSession, ref: TableRef, with_system_columns: bool = False, version: int | None = None
) -> list[dict]:
    """A mirror's rows in canonical form, sorted by key (``version``: as of that Delta version)."""
    df = ref.read(spark) if version is None else spark.sql(f"SELECT * FROM {ref.sql} VERSION AS OF {int(version)}")
    props = table_properties(spark, ref)
    key = list(key_of(props))
    types = source_types(df, props)
    # a soft-deleted row is exported with its marks (``_deleted``, ``_deleted_at``: deletes: soft)
    fields = [
        f
        for f in df.schema.fields
        if with_system_columns or f.name not in SYSTEM_COLUMNS or f.name in SOFT_DELETE_COLUMNS
    ]
    exprs = [f"{export_expr(f.name, f.dataType.simpleString())} AS `c{i}`" for i, f in enumerate(fields)]
    rows = []
    for r in df.selectExpr(*exprs).collect():
        row = {}
        for i, f in enumerate(fields):
            row[f.name] = canonical_json_value(r[f"c{i}"], f.dataType.simpleString(), types.get(f.name))
        rows.append(row)
    rows.sort(key=lambda row: tuple(_sort_value(row.get(k)) for k in key))
    return rows


def canonical_json_value(text: str | None, spark_type: str, source_type: str | None) -> object:
    """A mirror value's canonical text (:func:`~pipelines.sql.export_expr`) as export prints it, by the
    column's Delta type and its source type (``bigint unsigned`` is a DECIMAL(20,0) printed as an integer)."""
    if text is None:
        return None
    t = spark_type.lower()
    if t in _INTEGER_TYPES:
        return int(text)
    if t == "boolean":
        return text == "true"
    if t.startswith("decimal") and family(source_type) == "uint64":
        n = int(text)
        return n if INT64_MIN <= n <= INT64_MAX else text
    if t in ("double", "float"):
        return float(text)
    return text


def _sort_value(v: object) -> tuple:
    """Export's row order by key: NULL first, then numbers by value (a DOUBLE's -Infinity and Infinity
    at the ends, NaN after them, as Spark sorts it), then any other text."""
    if v is None:
        return (0, 0, "")
    if isinstance(v, bool):
        return (1, int(v), "")
    if isinstance(v, (int, float)):
        return (2, 0, "") if v != v else (1, v, "")
    try:
        number = Decimal(str(v))
    except ArithmeticError:
        return (3, 0, str(v))
    return (2, 0, "") if number.is_nan() else (1, number, "")


def export_warehouse(
    spark: SparkSession,
    wh: Warehouse,
    table: str | None = None,
    with_system_columns: bool = False,
    certified: bool = False,
) -> dict:
    """Every mirror (or ``table``) as export prints it. ``certified``: each mirror as of its certified
    version (:mod:`pipelines.quality.certify`); a mirror never certified is left out, and a ``table`` never
    certified is a KeyError."""
    refs = mirror_refs(spark, wh, table)
    if not certified:
        return {name: export_table(spark, ref, with_system_columns) for name, ref in sorted(refs.items())}
    versions = certified_versions(spark, wh, refs)  # of the tables as they are (a rebuilt mirror: none)
    if table is not None and not any(n in versions for n in refs):
        raise KeyError(f"mirror {', '.join(sorted(refs))} has no certified version yet (lakecdc dq certified)")
    return {
        name: export_table(spark, ref, with_system_columns, versions[name].version)
        for name, ref in sorted(refs.items())
        if name in versions
    }


def expected_value(text: str | None, source_type: str | None) -> object:
    """What ``export`` prints for a canonical value of a column of ``source_type``.

    Lets tests and the simulator compare a mirror with the reference model value for value: the
    value as the mirror stores it (a DECIMAL shows its full scale), rendered by
    :func:`canonical_json_value`, as export renders the mirror itself.
    """
    from decimal import Context, Decimal, localcontext

    target = spark_type(source_type)
    if text is not None and target == "VARIANT":
        return variant_json(text)
    if text is not None and target.startswith("DECIMAL") and family(source_type) != "uint64":
        scale = (list(parse_type(source_type or "")[1]) + [0, 0])[1]
        with localcontext(Context(prec=100)):
            text = str(Decimal(text).quantize(Decimal(1).scaleb(-scale)))
    return canonical_json_value(text, target, source_type)


def variant_json(text: str) -> str:
    """The JSON text ``to_json`` gives of a VARIANT parsed from ``text`` (what export prints): object keys
    sorted, no spaces, a number by its value (``1.10`` is ``1.1``, ``100.0`` is ``100``, ``-0`` is ``0``),
    every digit kept, strings as written. Read with :class:`~decimal.Decimal`, never a float."""
    import json
    from decimal import Context, Decimal

    exact = Context(prec=len(text) + 1)  # normalize() rounds to its context's precision: never here

    def number(n: Decimal) -> str:
        return "0" if n == 0 else format(n.normalize(exact), "f")

    def render(v: object) -> str:
        if isinstance(v, dict):
            return "{" + ",".join(json.dumps(k, ensure_ascii=False) + ":" + render(v[k]) for k in sorted(v)) + "}"
        if isinstance(v, list):
            return "[" + ",".join(render(x) for x in v) + "]"
        if isinstance(v, Decimal):
            return number(v)
        return json.dumps(v, ensure_ascii=False)

    return render(json.loads(text, parse_float=Decimal, parse_int=Decimal))


def expected_rows(rows: list[dict], column_types: dict[str, str], key: list[str]) -> list[dict]:
    """Reference-model rows in export form (all mirror columns, NULL where absent), sorted by key."""
    out = [{c: expected_value(r.get(c), t) for c, t in column_types.items()} for r in rows]
    out.sort(key=lambda row: tuple(_sort_value(row.get(k)) for k in key))
    return out
