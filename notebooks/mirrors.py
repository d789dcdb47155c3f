# Databricks notebook source
# MAGIC %md
# MAGIC # CDC mirrors: what is there, how many rows, how fresh
# MAGIC One row per mirror table (one mirror per source table), with its row count, the last change it
# MAGIC applied, and how far behind the source it is; then per source, the newest change and heartbeat.
# MAGIC
# MAGIC **Widgets**: `catalog` and `schema` (Unity Catalog; `schema` may be a comma-separated list), or
# MAGIC `warehouse`, a warehouse path such as `/Volumes/main/cdc/warehouse` or a local directory (then the
# MAGIC catalog is not used). Nothing here writes.

# COMMAND ----------
import matplotlib.pyplot as plt
import pandas as pd

dbutils.widgets.text("catalog", "main", "Catalog")
dbutils.widgets.text("schema", "cdc", "Schema(s)")
dbutils.widgets.text("warehouse", "", "Warehouse path (instead of catalog)")

# COMMAND ----------
# MAGIC %run ./lakecdc_tables

# COMMAND ----------
# MAGIC %md
# MAGIC ## Mirrors, row counts, freshness and lag
# MAGIC Every row of a mirror carries the lineage of the change that last wrote it (`_seq`, `_event_time`,
# MAGIC `_ingest_time`, ...), so per mirror:
# MAGIC * `rows`: live rows now (`count(*)`; deleted rows are gone, their keys stay in gold's key state);
# MAGIC * `last_seq`: the newest source sequence among the rows (sortable text), `last_event_time`: the
# MAGIC   newest source commit time among them, `last_ingest_time`: when that data reached bronze;
# MAGIC * `version`, `last_commit`: the mirror's Delta version and when gold last wrote it;
# MAGIC * `freshness_s`: seconds from the newest source commit held to now (how old the data you read is);
# MAGIC * `lag_s`: seconds from that commit to gold's last write (how long the pipeline took to apply it).
# MAGIC
# MAGIC The most stale mirror comes first.

# COMMAND ----------
lake = LakecdcTables(
    spark,
    warehouse=dbutils.widgets.get("warehouse"),
    catalog=dbutils.widgets.get("catalog"),
    schema=dbutils.widgets.get("schema"),
)
mirrors = lake.mirrors()
print(f"{len(mirrors)} mirrors in {lake.where}")

rows = []
for m in mirrors:
    stats = spark.sql(
        f"SELECT count(*) AS n, max(_seq) AS last_seq, max(_event_time) AS last_event_time, "
        f"max(_ingest_time) AS last_ingest_time FROM {m.sql}"
    ).first()
    last = spark.sql(f"DESCRIBE HISTORY {m.sql} LIMIT 1").first()
    rows.append(
        (m.name, m.source_table, ", ".join(m.key), stats["n"], stats["last_seq"], stats["last_event_time"])
        + (stats["last_ingest_time"], last["version"], last["timestamp"], m.location)
    )
overview = spark.createDataFrame(
    rows,
    "mirror STRING, source_table STRING, key STRING, rows BIGINT, last_seq STRING, last_event_time TIMESTAMP, "
    "last_ingest_time TIMESTAMP, version BIGINT, last_commit TIMESTAMP, location STRING",
).selectExpr(
    "mirror",
    "source_table",
    "key",
    "rows",
    "last_seq",
    "last_event_time",
    "timestampdiff(SECOND, last_event_time, current_timestamp()) AS freshness_s",
    "timestampdiff(SECOND, last_event_time, last_commit) AS lag_s",
    "last_ingest_time",
    "version",
    "last_commit",
    "location",
)
overview.createOrReplaceTempView("lakecdc_mirrors")
display(overview.orderBy("freshness_s", ascending=False))

# COMMAND ----------
# MAGIC %md
# MAGIC ## Sources: newest change and newest heartbeat
# MAGIC A mirror can look stale because its source table is quiet. Heartbeats (where the source sends them)
# MAGIC show that the source and the pipeline are alive: `freshness_s` per source counts from the newest of
# MAGIC both. Event times are the source's commit times as silver decoded them.

# COMMAND ----------
changes, heartbeats = lake.table("changes"), lake.table("heartbeats")
parts = [
    f"SELECT source, '{kind}' AS kind, try_cast(event_time AS TIMESTAMP) AS event_time, ingest_time FROM {ref}"
    for kind, ref in (("change", changes), ("heartbeat", heartbeats))
    if ref is not None
]
if not parts:
    raise ValueError(f"no silver changes or heartbeats in {lake.where}: add silver's schema to the widget `schema`")
sources = spark.sql(
    f"""SELECT source,
         max(CASE WHEN kind = 'change' THEN event_time END)    AS last_change_event,
         max(CASE WHEN kind = 'heartbeat' THEN event_time END) AS last_heartbeat,
         max(ingest_time)                                      AS last_ingest,
         count_if(kind = 'change')                             AS changes,
         timestampdiff(SECOND, max(event_time), current_timestamp()) AS freshness_s
  FROM ({" UNION ALL ".join(parts)}) GROUP BY source ORDER BY freshness_s DESC"""
)
display(sources)

# COMMAND ----------
# MAGIC %md
# MAGIC ## Rows per mirror and how old its newest data is
# MAGIC The same figures as the first table, as a chart: bars are live rows, the label is the freshness.

# COMMAND ----------
pdf = overview.orderBy("mirror").toPandas()
fig, ax = plt.subplots(figsize=(8, 0.5 + 0.5 * max(len(pdf), 1)))
ax.barh(pdf["mirror"], pdf["rows"], color="#4C72B0")
for y, (n, age) in enumerate(zip(pdf["rows"], pdf["freshness_s"])):
    label = "no rows" if pd.isna(age) else f"{n} rows, newest {age / 60:.0f} min old"
    ax.annotate(label, (n, y), xytext=(4, 0), textcoords="offset points", va="center")
ax.set_xlim(0, max(pdf["rows"].max() if len(pdf) else 0, 1) * 1.8)  # room for the labels
ax.set_xlabel("live rows")
ax.set_title("Mirrors")
fig.tight_layout()
display(fig)
plt.close(fig)
