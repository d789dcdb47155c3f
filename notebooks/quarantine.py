# Databricks notebook source
# MAGIC %md
# MAGIC # Quarantine: what could not be applied, and why
# MAGIC Nothing is dropped silently. A message silver cannot decode (not JSON, an unknown operation, a
# MAGIC truncated record) and a change gold may not apply (a value that does not fit its column, a `drop`
# MAGIC expectation, a schema change held back by `schema_changes: quarantine`) land in the quarantine
# MAGIC table, one row each, with `stage` saying which did it, the `reason`, and for data-quality rules
# MAGIC the `rule` and `bad_value`. `bronze_position` finds the original message in bronze.
# MAGIC
# MAGIC **Widgets**: `catalog` and `schema`, or `warehouse` (a path) instead.

# COMMAND ----------
import matplotlib.pyplot as plt

dbutils.widgets.text("catalog", "main", "Catalog")
dbutils.widgets.text("schema", "cdc", "Schema(s)")
dbutils.widgets.text("warehouse", "", "Warehouse path (instead of catalog)")

# COMMAND ----------
# MAGIC %run ./lakecdc_tables

# COMMAND ----------
lake = LakecdcTables(
    spark,
    warehouse=dbutils.widgets.get("warehouse"),
    catalog=dbutils.widgets.get("catalog"),
    schema=dbutils.widgets.get("schema"),
)
quarantine = lake.table("quarantine")
if quarantine is None:
    raise ValueError(f"no quarantine table in {lake.where}: add silver's schema to the widget `schema`")
spark.sql(f"CREATE OR REPLACE TEMP VIEW lakecdc_quarantine AS SELECT * FROM {quarantine}")
print(f"quarantine: {quarantine}")

# COMMAND ----------
# MAGIC %md
# MAGIC ## By stage and reason
# MAGIC One row per stage (`silver`: could not decode, `gold`: could not apply) and exact reason, most
# MAGIC frequent first, with the sources it came from and when it was first and last seen.

# COMMAND ----------
by_reason = spark.sql("""
  SELECT stage, reason, count(*) AS messages,
         concat_ws(', ', sort_array(collect_set(source))) AS sources,
         min(ingest_time) AS first_seen, max(ingest_time) AS last_seen
  FROM lakecdc_quarantine GROUP BY stage, reason ORDER BY messages DESC, stage, reason""")
display(by_reason)

# COMMAND ----------
# MAGIC %md
# MAGIC ## The kinds of reason, as a chart
# MAGIC The reason up to its first `:` (e.g. `not valid JSON`), or the data-quality rule that quarantined
# MAGIC the change, counted per stage.

# COMMAND ----------
kinds = spark.sql("""
  SELECT stage, coalesce(rule, trim(regexp_extract(reason, '^[^:]*', 0))) AS kind, count(*) AS messages
  FROM lakecdc_quarantine GROUP BY ALL ORDER BY kind, stage""").toPandas()
if kinds.empty:
    print("nothing is quarantined")
else:
    fig, ax = plt.subplots(figsize=(8, 0.8 + 0.45 * kinds["kind"].nunique()))
    pivot = kinds.pivot_table(index="kind", columns="stage", values="messages", aggfunc="sum", fill_value=0)
    pivot.plot.barh(stacked=True, ax=ax)
    ax.set_xlabel("quarantined messages")
    ax.set_ylabel("")
    ax.set_title("Quarantine by reason")
    fig.tight_layout()
    display(fig)
    plt.close(fig)

# COMMAND ----------
# MAGIC %md
# MAGIC ## Gold: which table, which rule, which values
# MAGIC Changes decoded fine but not applied: the source table, the rule (or `NULL` for a value that does
# MAGIC not fit its column), how many, and up to five of the offending values.

# COMMAND ----------
display(
    spark.sql("""
  SELECT db, `table`, rule, count(*) AS changes, slice(sort_array(collect_set(bad_value)), 1, 5) AS example_values,
         max(ingest_time) AS last_seen
  FROM lakecdc_quarantine WHERE stage = 'gold'
  GROUP BY db, `table`, rule ORDER BY changes DESC""")
)

# COMMAND ----------
# MAGIC %md
# MAGIC ## The latest quarantined messages
# MAGIC Newest first, with the start of the raw message as text and its place in bronze
# MAGIC (`bronze_position`: a Kafka topic/partition/offset or a landing file and line).

# COMMAND ----------
display(
    spark.sql("""
  SELECT ingest_time, stage, source, format, db, `table`, reason, rule, bad_value, bronze_position,
         CAST(raw_excerpt AS STRING) AS raw_excerpt
  FROM lakecdc_quarantine ORDER BY ingest_time DESC, bronze_position LIMIT 200""")
)
