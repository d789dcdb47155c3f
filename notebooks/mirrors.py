# Databricks notebook source
# MAGIC %md
# MAGIC # CDC mirrors: what is there, how fresh it is, what was quarantined
# MAGIC Set the widgets to your catalog and schema (or a local warehouse path when run locally).

# COMMAND ----------
dbutils.widgets.text("catalog", "main")  # noqa: F821 - Databricks notebook globals
dbutils.widgets.text("schema", "cdc")  # noqa: F821
catalog, schema = dbutils.widgets.get("catalog"), dbutils.widgets.get("schema")  # noqa: F821

# COMMAND ----------
# MAGIC %md ## Mirror tables and their row counts

# COMMAND ----------
tables = spark.sql(f"SHOW TABLES IN {catalog}.{schema} LIKE 'gold_*'").where("tableName NOT LIKE 'gold_tombstones_%'")  # noqa: F821
display(tables)  # noqa: F821

# COMMAND ----------
# MAGIC %md ## Freshness: lag from the last source commit and the last heartbeat, per source

# COMMAND ----------
display(
    spark.sql(f"""  -- noqa
  SELECT source, max(event_time) AS last_event, timestampdiff(SECOND, max(event_time), current_timestamp()) AS lag_s
  FROM {catalog}.{schema}.silver_heartbeats GROUP BY source
  UNION ALL
  SELECT source, max(event_time), timestampdiff(SECOND, max(event_time), current_timestamp())
  FROM {catalog}.{schema}.silver_changes GROUP BY source ORDER BY lag_s DESC""")
)  # noqa: F821

# COMMAND ----------
# MAGIC %md ## Quarantine: what could not be applied, and why

# COMMAND ----------
display(
    spark.sql(f"""SELECT stage, source, format, reason, count(*) AS messages, max(ingest_time) AS last_seen
  FROM {catalog}.{schema}.silver_quarantine GROUP BY ALL ORDER BY messages DESC""")
)  # noqa: F821
