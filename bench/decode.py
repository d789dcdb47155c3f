"""Decode: messages/s per format through silver's decode path, beside Spark's own JSON parsers.

Bronze is built once per format from the simulator's encoded messages (a pool of distinct messages,
repeated to the wanted count, each row with its own position), cached and counted, so every method
reads the same rows from memory. Each method writes to the ``noop`` sink, which evaluates every column:

* ``lakecdc``: :func:`pipelines.silver.decode_frame` (the decoder of the format, exact values);
* ``from_json``: bare ``from_json`` with a hand-written schema of the same fields (lossy: a number is
  whatever Spark makes of it, no vendor quirk handled, nothing quarantined);
* ``try_parse_json``: ``try_parse_json`` + one ``variant_get`` per top-level field, cast to the same types;
* ``python_floor``: the bronze columns through ``mapInArrow`` and one silver row back per message,
  nothing decoded: the floor of any decode path in a Python worker;
* ``from_json_variant``: ``from_json`` with the same schema, every scalar field typed ``VARIANT``: the parse
  a native decode path would start from. It is exact (a VARIANT keeps a number's every digit, where
  ``from_json`` into STRING or BIGINT rounds it or turns it NULL), so it is the floor of such a path,
  before any vendor rule.

Each method runs once on a slice (Python workers up, code generated, classes loaded), then ``repeat`` times
on the whole bronze; the best run counts.

Avro (``oms_avro``) has no Spark-native comparison here (``spark-avro`` is not on the classpath), so
only its own rate is given; the target (issue 41: ≥ 0.5× bare ``from_json``) is for the JSON formats.
"""

from __future__ import annotations

import time
from pathlib import Path

import yaml

from pipelines.config import parse_config
from pipelines.layout import DECODED_DDL
from pipelines.silver import bronze_input, decode_frame
from pipelines.testing.simulator import generate_history, pipeline_yaml_many

#: Issue 41's target: the worst JSON format's decode at least this fraction of bare ``from_json``'s rate.
MIN_RATIO = 0.5

FORMATS = ("oms_default", "oms_canal", "dataworks_kafka", "dts_canal", "oms_avro")

_MAP = "MAP<STRING, STRING>"
_CANAL = (
    f"database STRING, table STRING, type STRING, isDdl BOOLEAN, sql STRING, pkNames ARRAY<STRING>, "
    f"mysqlType {_MAP}, sqlType MAP<STRING, INT>, data ARRAY<{_MAP}>, old ARRAY<{_MAP}>, es BIGINT, ts BIGINT"
)
#: Hand-written schemas: the fields each decoder reads (seed 000/002/004 shapes; the simulator's encoders).
SCHEMAS = {
    "oms_default": (
        "allMetaData STRUCT<db: STRING, table_name: STRING, storeDataSequence: STRING, record_primary_key: STRING, "
        "record_primary_value: STRING, timestamp: STRING, transId: STRING, dbType: STRING>, "
        f"prevStruct {_MAP}, postStruct {_MAP}, recordType STRING"
    ),
    "oms_canal": _CANAL + ", id BIGINT",
    "dts_canal": _CANAL + ", id BIGINT, gtid STRING",
    "dataworks_kafka": (
        "schema STRUCT<dataColumn: ARRAY<STRUCT<name: STRING, type: STRING>>, primaryKey: ARRAY<STRING>, "
        "source: STRUCT<dbType: STRING, dbName: STRING, schemaName: STRING, tableName: STRING>>, "
        f"payload STRUCT<before: STRUCT<dataColumn: {_MAP}>, after: STRUCT<dataColumn: {_MAP}>, sequenceId: STRING, "
        "scn: STRING, op: STRING, timestamp: STRUCT<eventTime: BIGINT>, ddl: STRING>, version STRING"
    ),
}


def _say(msg: str) -> None:
    print(f"[bench] {msg}", flush=True)


def decode_histories(pool: int, seed: int):
    return {
        fmt: generate_history(fmt, seed, n_changes=pool, n_tables=4, composite_keys=False, db=f"bench_{fmt}")
        for fmt in FORMATS
    }


def bronze_frame(spark, messages: dict[str, list[bytes]], count: int):
    """``count`` bronze rows per format, cycling through each format's ``messages``; cached and counted."""
    from pyspark.sql import functions as F

    pool = spark.createDataFrame(
        [(fmt, i, len(raws), raw) for fmt, raws in messages.items() for i, raw in enumerate(raws)],
        "format STRING, m INT, size INT, value BINARY",
    )
    reps = max(-(-count // len(raws)) for raws in messages.values())
    rows = (
        spark.range(reps)
        .withColumnRenamed("id", "rep")
        .crossJoin(F.broadcast(pool))
        .where(F.col("rep") * F.col("size") + F.col("m") < count)
        .select(
            F.concat(F.lit("sim_"), "format").alias("source"),
            "format",
            "value",
            F.format_string("bench://%s#%d.%d", "format", "rep", "m").alias("position"),
            F.format_string("bench:%06d:%020d", "rep", "m").alias("queue_pos"),
            F.current_timestamp().alias("ingest_time"),
        )
        .repartition(spark.sparkContext.defaultParallelism)
        .cache()
    )
    return rows, rows.count()


def decode_methods(fmt: str, cfg):
    from pyspark.sql import functions as F

    out = {"lakecdc": lambda df: decode_frame(df, cfg), "python_floor": python_floor}
    schema = SCHEMAS.get(fmt)
    if schema is not None:
        out["from_json"] = lambda df: df.select(F.from_json(F.col("value").cast("string"), schema).alias("j")).select(
            "j.*"
        )
        exact = exact_schema(schema)
        out["from_json_variant"] = lambda df: df.select(
            F.from_json(F.col("value").cast("string"), exact).alias("j")
        ).select("j.*")
        fields = _top_level(schema)
        out["try_parse_json"] = lambda df: df.select(F.expr("try_parse_json(CAST(value AS STRING))").alias("v")).select(
            *[F.expr(f"variant_get(v, '$.{name}', '{typ}')").alias(name) for name, typ in fields]
        )
    return out


def python_floor(df):
    """What any decode through a Python worker costs before it decodes anything: the bronze columns
    ``decode_frame`` sends through ``mapInArrow`` (:func:`~pipelines.silver.bronze_input`), one silver
    row back per message (Arrow columns passed through or NULL, never a Python object per row)."""

    def passthrough(batches):
        import pyarrow as pa

        from pipelines.spark_schema import arrow_schema_of

        schema = arrow_schema_of(DECODED_DDL)
        for batch in batches:
            names = batch.schema.names
            yield pa.RecordBatch.from_arrays(
                [
                    batch.column(f.name)
                    if f.name in names and batch.schema.field(f.name).type == f.type
                    else pa.nulls(batch.num_rows, f.type)
                    for f in schema
                ],
                schema=schema,
            )

    return bronze_input(df).mapInArrow(passthrough, DECODED_DDL)


def exact_schema(schema: str):
    """``schema`` with every scalar field (a map's values too) typed VARIANT; structs, arrays and map keys kept."""
    from pyspark.sql.types import ArrayType, MapType, StructField, StructType, VariantType

    def exact(t):
        if isinstance(t, StructType):
            return StructType([StructField(f.name, exact(f.dataType)) for f in t.fields])
        if isinstance(t, ArrayType):
            return ArrayType(exact(t.elementType))
        if isinstance(t, MapType):
            return MapType(t.keyType, exact(t.valueType))
        return VariantType()

    return exact(StructType.fromDDL(schema))


def _top_level(schema: str) -> list[tuple[str, str]]:
    from pyspark.sql.types import StructType

    parsed = StructType.fromDDL(schema)
    return [(f.name, f.dataType.simpleString()) for f in parsed.fields]


def noop_seconds(frame) -> float:
    began = time.perf_counter()
    frame.write.format("noop").mode("overwrite").save()
    return time.perf_counter() - began


def run_decode(spark, work: Path, sizes: dict) -> dict:
    messages_per_format = sizes["messages"]
    pool = min(sizes["pool"], messages_per_format)
    histories = decode_histories(pool, seed=11)
    doc = yaml.safe_load(
        pipeline_yaml_many(list(histories.values()), str(work / "warehouse"), {f: str(work / f) for f in FORMATS})
    )
    cfg = parse_config(doc, origin="bench-decode")
    cases = []
    all_bronze, _ = bronze_frame(spark, {fmt: h.messages for fmt, h in histories.items()}, messages_per_format)
    warmed: set[str] = set()
    for fmt in FORMATS:
        messages = histories[fmt].messages
        methods = decode_methods(fmt, cfg)
        bronze = all_bronze.where(f"format = '{fmt}'")
        for name, make in methods.items():  # once per method: Python workers up, code generated, classes loaded
            if name not in warmed:
                warmed.add(name)
                noop_seconds(make(bronze.limit(2000)))
        case = {"format": fmt, "messages": messages_per_format, "distinct_messages": len(messages)}
        case["avg_message_bytes"] = round(sum(map(len, messages)) / len(messages))
        n = messages_per_format
        for name, make in methods.items():
            best = min(noop_seconds(make(bronze)) for _ in range(sizes["repeat"]))
            case[f"{name}_seconds"] = round(best, 3)
            case[f"{name}_msg_per_s"] = round(n / best) if best else None
        if "from_json_msg_per_s" in case:
            case["ratio_vs_from_json"] = round(case["lakecdc_msg_per_s"] / case["from_json_msg_per_s"], 3)
            case["ratio_vs_try_parse_json"] = round(case["lakecdc_msg_per_s"] / case["try_parse_json_msg_per_s"], 3)
            case["python_floor_vs_from_json"] = round(case["python_floor_msg_per_s"] / case["from_json_msg_per_s"], 3)
            case["ratio_vs_from_json_variant"] = round(
                case["lakecdc_msg_per_s"] / case["from_json_variant_msg_per_s"], 3
            )
        _say(
            f"decode {fmt}: lakecdc {case['lakecdc_msg_per_s']} msg/s, python_floor {case['python_floor_msg_per_s']}"
            + (
                f", from_json {case['from_json_msg_per_s']}, try_parse_json {case['try_parse_json_msg_per_s']}"
                f", from_json_variant {case['from_json_variant_msg_per_s']}"
                if "from_json_msg_per_s" in case
                else ""
            )
        )
        cases.append(case)
    all_bronze.unpersist()
    json_ratios = [c["ratio_vs_from_json"] for c in cases if "ratio_vs_from_json" in c]
    worst = min(json_ratios) if json_ratios else None
    figures = []
    for c in cases:
        figures.append(
            {
                "name": f"decode {c['format']}",
                "value": c["lakecdc_msg_per_s"],
                "unit": "msg/s",
                "compare_name": "bare from_json" if "from_json_msg_per_s" in c else "(no Spark-native Avro parser)",
                "compare_value": c.get("from_json_msg_per_s"),
                "ratio": c.get("ratio_vs_from_json"),
                "ratio_meaning": "lakecdc / from_json",
            }
        )
        if "try_parse_json_msg_per_s" in c:
            figures.append(
                {
                    "name": f"decode {c['format']}",
                    "value": c["lakecdc_msg_per_s"],
                    "unit": "msg/s",
                    "compare_name": "try_parse_json + variant_get",
                    "compare_value": c["try_parse_json_msg_per_s"],
                    "ratio": c["ratio_vs_try_parse_json"],
                    "ratio_meaning": "lakecdc / try_parse_json",
                }
            )
        figures.append(
            {
                "name": f"python floor {c['format']}",
                "value": c["python_floor_msg_per_s"],
                "unit": "msg/s",
                "compare_name": "bare from_json" if "from_json_msg_per_s" in c else "lakecdc",
                "compare_value": c.get("from_json_msg_per_s") or c["lakecdc_msg_per_s"],
                "ratio": c.get("python_floor_vs_from_json"),
                "ratio_meaning": "mapInArrow passthrough / from_json",
            }
        )
        if "from_json_variant_msg_per_s" in c:
            figures.append(
                {
                    "name": f"decode {c['format']}",
                    "value": c["lakecdc_msg_per_s"],
                    "unit": "msg/s",
                    "compare_name": "from_json, scalars as VARIANT (exact parse)",
                    "compare_value": c["from_json_variant_msg_per_s"],
                    "ratio": c["ratio_vs_from_json_variant"],
                    "ratio_meaning": "lakecdc / from_json_variant",
                }
            )
    return {
        "cases": cases,
        "figures": figures,
        "ratio": worst,
        "target": {
            "text": f"≥ {MIN_RATIO}× bare from_json for every JSON format (the worst one shown)",
            "min": MIN_RATIO,
        },
        "verdict": "PASS" if worst is not None and worst >= MIN_RATIO else "FAIL",
    }
