"""Probe: what a native (Spark SQL) decode of OMS Canal would cost, and how far it is from exact.

Issue 14 asks for decode at 0.7× bare ``from_json``; silver's Python decoder runs at about 0.1×. A native
path would parse with ``from_json`` into VARIANT values (exact: a VARIANT keeps every digit) and apply the
vendor's rules as SQL. This probe builds that path for one format, OMS Canal, with the rules its simulated
stream needs (integers, unsigned BIGINT, DECIMAL, DATETIME, epoch TIMESTAMP, Base64 BLOB, text; the UPDATE
before-image as ``data`` overlaid with ``old``; ``es`` as sequence and event time), and measures it twice:

* **speed**: messages/s to the ``noop`` sink beside bare ``from_json`` and ``silver.decode_frame`` on the
  same cached bronze (the decode section's bronze, best of ``--repeat`` runs after a warm-up), in three
  variants: the value rules in a ``transform_values`` lambda, the same rules generated per known column, and
  no value rule at all (each value its VARIANT's text: what the structure alone costs, not exact);
* **agreement**: every change it yields is compared, field by field, with what the Python decoder (the
  reference) yields for the same message; the first differences of each field are printed
  (``tests/spark/test_native_decode_probe.py`` requires them equal).

It is a measurement, not a decoder: it quarantines nothing and checks no range (a value a rule does not
accept becomes NULL), and it knows one format. What a production native path would add is listed in the
docs/benchmark.md, *Decode: what limits it*.

    PYTHONPATH=. LAKECDC_BUILD_DIR=/work/main/build python bench/native_decode_probe.py --messages 200000
"""

from __future__ import annotations

import argparse
import json
import re

import yaml

from bench.decode import bronze_frame, decode_histories, decode_methods, noop_seconds
from pipelines.config import parse_config
from pipelines.silver import decode_frame
from pipelines.spark import get_spark
from pipelines.sql import lit
from pipelines.testing.simulator import pipeline_yaml_many

#: ``from_json`` schema of an OMS Canal message: every value a VARIANT (exact), the structure typed.
CANAL_VARIANT_SCHEMA = (
    "database STRING, table STRING, type STRING, isDdl BOOLEAN, pkNames ARRAY<STRING>, "
    "mysqlType MAP<STRING, STRING>, data ARRAY<MAP<STRING, VARIANT>>, old ARRAY<MAP<STRING, VARIANT>>, "
    "es VARIANT, id VARIANT"
)

#: The family of a MySQL type ``t`` (lower case), once per column and message: 1 integer, 2 decimal,
#: 3 datetime, 4 timestamp (epoch seconds), 5 bytes (Base64), 0 text.
_FAMILY_SQL = """CASE
  WHEN t RLIKE '^(tinyint|smallint|mediumint|int|integer|bigint)' THEN 1
  WHEN t RLIKE '^(decimal|numeric)' THEN 2
  WHEN t RLIKE '^datetime' THEN 3
  WHEN t RLIKE '^timestamp' THEN 4
  WHEN t RLIKE '(blob|binary)' THEN 5
  ELSE 0
END"""

#: Canonical text of one value ``v`` (VARIANT) of a column of family ``f``: the rules of
#: ``pipelines.formats._canal_family.RowCodec._canon`` for the types the simulator writes.
_VALUE_SQL = """CASE
  WHEN v IS NULL OR is_variant_null(v) THEN NULL
  WHEN f = 1 THEN
    CASE WHEN trim(CAST(v AS STRING)) RLIKE '^[+-]?[0-9]{1,38}$'
         THEN CAST(CAST(trim(CAST(v AS STRING)) AS DECIMAL(38, 0)) AS STRING) END
  WHEN f = 2 THEN
    CASE WHEN CAST(v AS STRING) RLIKE '^-?(0|[1-9][0-9]*)([.][0-9]+)?$' THEN CAST(v AS STRING) END
  WHEN f = 3 THEN
    regexp_replace(CAST(v AS STRING),
      '^([0-9]{4}-[0-9]{2}-[0-9]{2}) ([0-9]{2}:[0-9]{2}:[0-9]{2})([.][0-9]*[1-9])?[.]?0*$', '$1T$2$3')
  WHEN f = 4 THEN
    concat(date_format(timestamp_seconds(CAST(CAST(v AS STRING) AS DECIMAL(30, 9))), "yyyy-MM-dd'T'HH:mm:ss"),
           regexp_extract(CAST(v AS STRING), '([.][0-9]*[1-9])0*$', 1), 'Z')
  WHEN f = 5 THEN base64(try_to_binary(CAST(v AS STRING), 'base64'))
  ELSE CAST(v AS STRING)
END"""


def _image(rows_sql: str) -> str:
    """SQL of a row image: every value of the map ``rows_sql`` canonical by its column's family (``fam``)."""
    return f"transform_values({rows_sql}, (k, v) -> {_VALUE_SQL.replace('f = ', 'coalesce(fam[k], 0) = ')})"


def configured_sql(ctx, tables: list[tuple[str, str]]) -> tuple[str, str]:
    """SQL of what the configuration gives each table, by ``m.database`` and ``m.table``: its column types
    (the decoder starts from them) and its key (a message without ``pkNames`` uses it)."""
    types, keys = [], []
    for db, table in tables:
        when = f"WHEN m.database = {lit(db)} AND m.table = {lit(table)}"
        column_types, key = ctx.column_types(db, table), ctx.key_columns(db, table)
        if column_types:
            entries = ", ".join(f"{lit(c)}, {lit(t.lower())}" for c, t in column_types.items())
            types.append(f"{when} THEN map({entries})")
        if key:
            keys.append(f"{when} THEN array({', '.join(lit(c) for c in key)})")
    return (
        f"CASE {' '.join(types)} ELSE map() END" if types else "map()",
        f"CASE {' '.join(keys)} ELSE array() END" if keys else "array()",
    )


def _generated_image(row: str, columns: dict[str, int]) -> str:
    """:func:`_image` without a lambda: one expression per known column (``columns``: name → family), which
    Spark compiles (a higher-order function such as ``transform_values`` is interpreted, row by row)."""
    entries = []
    for name, fam in columns.items():
        value = re.sub(r"\bv\b", f"{row}[{lit(name)}]", _VALUE_SQL.replace("f = ", f"{fam} = "))
        entries.append(
            f"CASE WHEN map_contains_key({row}, {lit(name)}) THEN named_struct('k', {lit(name)}, 'v', {value}) END"
        )
    return f"CASE WHEN {row} IS NOT NULL THEN map_from_entries(array_compact(array({', '.join(entries)}))) END"


def native_canal(
    bronze,
    configured: tuple[str, str] = ("map()", "array()"),
    columns: dict[str, int] | None = None,
    rules: bool = True,
):
    """OMS Canal bronze → silver change columns, in Spark SQL only (see the module docstring).
    ``configured``: SQL of the configured column types and key of a message's table (:func:`configured_sql`);
    ``columns``: every column name the stream carries, with its family (:func:`column_families`): the images
    are then generated per column (:func:`_generated_image`) instead of mapped by a lambda; ``rules=False``:
    every value as the text of its VARIANT, no vendor rule (what the structure alone costs; not exact)."""
    from pyspark.sql import functions as F

    def image(row: str) -> str:
        if not rules:
            return f"transform_values({row}, (k, v) -> CAST(v AS STRING))"
        return _generated_image(row, columns) if columns is not None else _image(row)

    parsed = (
        bronze.select("position", F.from_json(F.col("value").cast("string"), CANAL_VARIANT_SCHEMA).alias("m"))
        .where("upper(m.type) IN ('INSERT', 'UPDATE', 'DELETE', 'TRUNCATE')")
        .selectExpr(
            "position",
            "m",
            f"transform_values(m.mysqlType, (k, t) -> {_FAMILY_SQL.replace('t RLIKE', 'lower(t) RLIKE')}) AS fam",
        )
    )
    # a TRUNCATE is one change with no row image
    row_images = "CASE WHEN upper(m.type) = 'TRUNCATE' THEN array(CAST(NULL AS MAP<STRING, VARIANT>)) ELSE m.data END"
    rows = parsed.select("position", "m", "fam", F.posexplode(F.expr(row_images)).alias("i", "row"))
    # the row's before-image columns (an UPDATE's), NULL if none
    rows = rows.withColumn("old_row", F.expr("try_element_at(m.old, i + 1)"))
    images = rows.selectExpr(
        "position",
        "m",
        "i",
        f"{image('row')} AS img",
        f"{image('old_row')} AS old_img",
        "map_from_entries(transform(filter(map_entries(row), e -> lower(m.mysqlType[e.key]) = 'bigint' "
        "AND TRY_CAST(CAST(e.value AS STRING) AS DECIMAL(38, 0)) > 9223372036854775807), "
        "e -> struct(e.key, 'bigint unsigned'))) AS unsigned",
    )
    es = "CAST(m.es AS STRING)"
    return images.selectExpr(
        "position AS bronze_position",
        "CAST(i AS INT) AS change_index",
        "upper(m.type) AS op",
        "nullif(m.database, '') AS db",
        "nullif(m.table, '') AS `table`",
        f"CASE WHEN size(m.pkNames) > 0 THEN m.pkNames ELSE {configured[1]} END AS key_columns",
        "CASE WHEN upper(m.type) = 'DELETE' THEN img "
        "WHEN upper(m.type) = 'UPDATE' THEN CASE WHEN old_img IS NULL THEN img ELSE map_concat(img, old_img) END "
        "END AS before",
        "CASE WHEN upper(m.type) != 'DELETE' THEN img END AS after",
        f"map_concat({configured[0]}, transform_values(m.mysqlType, (k, v) -> lower(v)), unsigned) AS col_types",
        f"lpad({es}, 20, '0') AS seq",
        f"concat(date_format(timestamp_millis(CAST({es} AS BIGINT)), \"yyyy-MM-dd'T'HH:mm:ss\"), "
        f"regexp_replace(concat('.', lpad(CAST(pmod(CAST({es} AS BIGINT), 1000) AS STRING), 3, '0')), '[.]?0+$', ''), "
        "'Z') AS event_time",
    )


#: The fields compared with the Python decoder.
COMPARED = ("op", "db", "table", "key_columns", "before", "after", "col_types", "seq", "event_time")


def column_families(bronze) -> dict[str, int] | None:
    """Every column name the messages' ``mysqlType`` names, with its family; None when one name has two."""
    from pyspark.sql import functions as F

    pairs = (
        bronze.select(F.explode(F.from_json(F.col("value").cast("string"), "mysqlType MAP<STRING, STRING>").mysqlType))
        .selectExpr("key", f"{_FAMILY_SQL.replace('t RLIKE', 'lower(value) RLIKE')} AS f")
        .distinct()
        .collect()
    )
    out: dict[str, int] = {}
    for name, fam in pairs:
        if out.setdefault(name, fam) != fam:
            return None
    return out


def configured_of(bronze, cfg) -> tuple[str, str]:
    """:func:`configured_sql` for the tables the bronze messages name."""
    tables = bronze.selectExpr("from_json(CAST(value AS STRING), 'database STRING, table STRING') AS t").distinct()
    return configured_sql(cfg.decode_context(), [(r.t.database, r.t.table) for r in tables.collect() if r.t])


def agreement(spark, bronze, cfg, generated: bool = False) -> dict:
    """Each change of the native path beside the Python decoder's change of the same message and index."""
    from pyspark.sql import functions as F

    python = decode_frame(bronze, cfg).where("kind = 'change'").select("bronze_position", "change_index", *COMPARED)
    native = native_canal(bronze, configured_of(bronze, cfg), column_families(bronze) if generated else None)
    sorted_maps = {c: F.array_sort(F.map_entries(c)) for c in ("before", "after", "col_types")}

    def canon(df, side):
        return df.select(
            "bronze_position",
            "change_index",
            *[(sorted_maps[c] if c in sorted_maps else F.col(c)).alias(f"{side}_{c}") for c in COMPARED],
        )

    both = canon(python, "py").join(canon(native, "sql"), ["bronze_position", "change_index"], "full_outer").cache()
    out = {"python_changes": python.count(), "native_changes": native.count(), "fields": {}}
    for c in COMPARED:
        differ = both.where(~F.col(f"py_{c}").eqNullSafe(F.col(f"sql_{c}")))
        n = differ.count()
        out["fields"][c] = n
        if n:
            for row in differ.select(f"py_{c}", f"sql_{c}").limit(3).collect():
                print(f"  {c} differs: python {row[0]!s:.300}\n  {' ' * len(c)}         native {row[1]!s:.300}")
    out["changes_equal"] = both.where(" AND ".join(f"py_{c} <=> sql_{c}" for c in COMPARED)).count()
    both.unpersist()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--pool", type=int, default=5_000, help="distinct simulated messages, repeated")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    spark = get_spark("native-decode-probe")
    fmt = "oms_canal"
    history = decode_histories(args.pool, seed=11)[fmt]
    doc = yaml.safe_load(pipeline_yaml_many([history], "/tmp/native-probe-wh", {fmt: "/tmp/native-probe-none"}))
    cfg = parse_config(doc, origin="native-probe")
    pool_bronze, _ = bronze_frame(spark, {fmt: history.messages}, len(history.messages))
    print(json.dumps({"agreement, lambdas": agreement(spark, pool_bronze, cfg)}), flush=True)
    print(json.dumps({"agreement, generated": agreement(spark, pool_bronze, cfg, generated=True)}), flush=True)
    pool_bronze.unpersist()

    bronze, n = bronze_frame(spark, {fmt: history.messages}, args.messages)
    configured, columns = configured_of(bronze, cfg), column_families(bronze)
    section = decode_methods(fmt, cfg)  # the decode section's own: bare from_json, decode_frame
    methods = {
        "from_json": section["from_json"],
        "native_sql": lambda df: native_canal(df, configured),
        "native_sql_generated": lambda df: native_canal(df, configured, columns),
        "native_sql_no_value_rules": lambda df: native_canal(df, configured, rules=False),
        "lakecdc": section["lakecdc"],
    }
    rates = {}
    for name, make in methods.items():
        noop_seconds(make(bronze.limit(2000)))  # warm: classes, code, Python workers
        best = min(noop_seconds(make(bronze)) for _ in range(args.repeat))
        rates[name] = round(n / best)
    rates["native_vs_from_json"] = round(rates["native_sql"] / rates["from_json"], 3)
    rates["native_generated_vs_from_json"] = round(rates["native_sql_generated"] / rates["from_json"], 3)
    rates["native_no_value_rules_vs_from_json"] = round(rates["native_sql_no_value_rules"] / rates["from_json"], 3)
    rates["lakecdc_vs_from_json"] = round(rates["lakecdc"] / rates["from_json"], 3)
    print(json.dumps({"messages": n, "msg_per_s": rates}), flush=True)


if __name__ == "__main__":
    main()
