# Databricks notebook source
# MAGIC %md
# MAGIC # Data quality: what was checked, what failed, what was quarantined
# MAGIC Every micro-batch writes one row per check to `dq_results`: configured expectations
# MAGIC (`tables.<db.table>.expectations`, action warn / drop / fail) and the built-in CDC checks
# MAGIC (`cdc_key_not_null`, `cdc_key_unique`, `cdc_seq_not_backwards`, `cdc_source_drift`, `cdc_freshness`,
# MAGIC `cdc_reconcile_count`, `cdc_reconcile_checksum`). Set the widgets to your catalog and schema, or
# MAGIC `warehouse` to a local warehouse directory (then catalog is ignored).

# COMMAND ----------
dbutils.widgets.text("catalog", "main")  # noqa: F821 - Databricks notebook globals
dbutils.widgets.text("schema", "cdc")  # noqa: F821
dbutils.widgets.text("warehouse", "")  # noqa: F821
dbutils.widgets.text("days", "7")  # noqa: F821
catalog, schema = dbutils.widgets.get("catalog"), dbutils.widgets.get("schema")  # noqa: F821
warehouse, days = dbutils.widgets.get("warehouse"), int(dbutils.widgets.get("days") or 7)  # noqa: F821

dq_results = f"delta.`{warehouse}/dq/dq_results`" if warehouse else f"{catalog}.{schema}.dq_results"
quarantine = f"delta.`{warehouse}/silver/quarantine`" if warehouse else f"{catalog}.{schema}.silver_quarantine"
spark.sql(f"""CREATE OR REPLACE TEMP VIEW dq AS SELECT * FROM {dq_results}
  WHERE checked_at >= current_timestamp() - make_interval(0, 0, 0, {days})""")  # noqa: F821

# COMMAND ----------
# MAGIC %md ## Per table: checks run, pass rate, failures, quarantined changes

# COMMAND ----------
display(
    spark.sql("""  -- noqa
  SELECT `table`,
         count(*)                                                     AS checks,
         round(100 * avg(CASE WHEN success THEN 1.0 ELSE 0.0 END), 1) AS pass_rate_pct,
         count_if(NOT success OR success IS NULL)                     AS failures,
         sum(CASE WHEN action = 'drop' THEN coalesce(unexpected_count, 0) ELSE 0 END) AS quarantined,
         max(checked_at)                                              AS last_checked
  FROM dq GROUP BY `table` ORDER BY pass_rate_pct, `table`""")
)  # noqa: F821

# COMMAND ----------
# MAGIC %md ## Failing checks: which rule, how often, how many rows (examples are in `details`)

# COMMAND ----------
display(
    spark.sql("""  -- noqa
  SELECT `table`, expectation, expectation_type, action,
         count(*) AS times_failed, sum(coalesce(unexpected_count, 0)) AS unexpected_rows,
         max(checked_at) AS last_failed, max_by(details, checked_at) AS latest_details
  FROM dq WHERE NOT success OR success IS NULL
  GROUP BY ALL ORDER BY last_failed DESC""")
)  # noqa: F821

# COMMAND ----------
# MAGIC %md ## Pass rate and quarantine volume over time (one point per table and batch)

# COMMAND ----------
display(
    spark.sql("""  -- noqa
  SELECT `table`, run_id, batch_id, min(checked_at) AS checked_at,
         round(100 * avg(CASE WHEN success THEN 1.0 ELSE 0.0 END), 1) AS pass_rate_pct,
         sum(CASE WHEN action = 'drop' THEN coalesce(unexpected_count, 0) ELSE 0 END) AS quarantined
  FROM dq GROUP BY `table`, run_id, batch_id ORDER BY checked_at""")
)  # noqa: F821

# COMMAND ----------
# MAGIC %md ## Built-in CDC checks: freshness, source drift, sequence order, reconciliation

# COMMAND ----------
display(
    spark.sql("""  -- noqa
  SELECT `table`, expectation, max_by(success, checked_at) AS latest_success,
         max_by(unexpected_count, checked_at) AS latest_unexpected, max_by(details, checked_at) AS latest_details,
         max(checked_at) AS last_checked
  FROM dq WHERE expectation LIKE 'cdc\\_%'
  GROUP BY `table`, expectation ORDER BY `table`, expectation""")
)  # noqa: F821

# COMMAND ----------
# MAGIC %md ## The quarantined changes themselves (stage gold, by rule), with the bad value

# COMMAND ----------
display(
    spark.sql(f"""  -- noqa
  SELECT `table`, rule, bad_value, reason, bronze_position, ingest_time
  FROM {quarantine} WHERE stage = 'gold' AND rule IS NOT NULL
  ORDER BY ingest_time DESC LIMIT 500""")
)  # noqa: F821

# COMMAND ----------
# MAGIC %md ## The same summary as `lakecdc dq report`, and the chart over time

# COMMAND ----------
from pipelines.quality.report import chart, report  # noqa: E402
from pipelines.warehouse import Warehouse  # noqa: E402

wh = Warehouse(warehouse) if warehouse else Warehouse(None, catalog, schema)
print(report(spark, wh))  # noqa: F821
png = chart(spark, wh, "/tmp/lakecdc_dq_chart.png")  # noqa: F821
displayHTML(f"<img src='data:image/png;base64,{__import__('base64').b64encode(open(png, 'rb').read()).decode()}'>")  # noqa: F821
