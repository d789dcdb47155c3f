# Databricks notebook source
# MAGIC %md
# MAGIC # Data quality over time: what was checked, what failed, what was quarantined
# MAGIC Every micro-batch writes one row per check to `dq_results`: the configured expectations
# MAGIC (`tables.<db.table>.expectations`, action `warn` / `drop` / `fail`) and the built-in CDC checks
# MAGIC (`cdc_key_not_null`, `cdc_key_unique`, `cdc_seq_not_backwards`, `cdc_source_drift`, `cdc_freshness`,
# MAGIC `cdc_invalid_value`, `cdc_reconcile_count`, `cdc_reconcile_checksum`). `lakecdc dq report` prints the
# MAGIC same summary on the command line.
# MAGIC
# MAGIC **Widgets**: `catalog` and `schema`, or `warehouse` (a path) instead; `days`: how far back to look.

# COMMAND ----------
import matplotlib.pyplot as plt

dbutils.widgets.text("catalog", "main", "Catalog")
dbutils.widgets.text("schema", "cdc", "Schema(s)")
dbutils.widgets.text("warehouse", "", "Warehouse path (instead of catalog)")
dbutils.widgets.text("days", "7", "Days to look back")

# COMMAND ----------
# MAGIC %run ./lakecdc_tables

# COMMAND ----------
lake = LakecdcTables(
    spark,
    warehouse=dbutils.widgets.get("warehouse"),
    catalog=dbutils.widgets.get("catalog"),
    schema=dbutils.widgets.get("schema"),
)
days = int(dbutils.widgets.get("days") or 7)
dq_results = lake.table("dq_results")
if dq_results is None:
    raise ValueError(f"no dq_results in {lake.where}: has gold run with quality checks (quality_checks: true)?")
spark.sql(f"""CREATE OR REPLACE TEMP VIEW lakecdc_dq AS
  SELECT * FROM {dq_results} WHERE checked_at >= current_timestamp() - INTERVAL {days} DAYS""")
print(f"dq_results: {dq_results}, last {days} days")

# COMMAND ----------
# MAGIC %md
# MAGIC ## Per table: checks run, pass rate, failures, quarantined changes
# MAGIC `quarantined` counts the changes `drop` expectations sent to quarantine. Worst pass rate first.

# COMMAND ----------
display(
    spark.sql("""
  SELECT `table`,
         count(*)                                                     AS checks,
         round(100 * avg(CASE WHEN success THEN 1.0 ELSE 0.0 END), 1) AS pass_rate_pct,
         count_if(NOT success OR success IS NULL)                     AS failures,
         sum(CASE WHEN action = 'drop' THEN coalesce(unexpected_count, 0) ELSE 0 END) AS quarantined,
         max(checked_at)                                              AS last_checked
  FROM lakecdc_dq GROUP BY `table` ORDER BY pass_rate_pct, `table`""")
)

# COMMAND ----------
# MAGIC %md
# MAGIC ## Pass rate and failures over time
# MAGIC One point per table and check run (a micro-batch of gold, or the checks after a pipeline run). The
# MAGIC top chart is the pass rate per table; the bottom one counts failing checks per rule, so a rule that
# MAGIC starts failing stands out. The table under the charts holds the same figures.

# COMMAND ----------
over_time = spark.sql("""
  SELECT `table`, run_id, batch_id, min(checked_at) AS checked_at, count(*) AS checks,
         round(100 * avg(CASE WHEN success THEN 1.0 ELSE 0.0 END), 1) AS pass_rate_pct,
         count_if(NOT success OR success IS NULL) AS failures,
         sum(CASE WHEN action = 'drop' THEN coalesce(unexpected_count, 0) ELSE 0 END) AS quarantined
  FROM lakecdc_dq GROUP BY `table`, run_id, batch_id ORDER BY checked_at, `table`""")
failing = spark.sql("""
  SELECT date_trunc('MINUTE', checked_at) AS checked_at, expectation, count(*) AS failures
  FROM lakecdc_dq WHERE NOT success OR success IS NULL GROUP BY ALL ORDER BY checked_at""").toPandas()
points = over_time.toPandas()
if points.empty:
    print(f"no checks in the last {days} days")
else:
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 7), sharex=True)
    for table, group in points.groupby("table"):
        top.plot(group["checked_at"], group["pass_rate_pct"], marker="o", label=table)
    top.set_ylabel("pass rate %")
    top.set_ylim(-5, 105)
    top.legend(fontsize="small")
    top.set_title("Data quality over time")
    if failing.empty:
        bottom.text(0.5, 0.5, "no failing checks", ha="center", transform=bottom.transAxes)
    else:
        per_rule = failing.pivot_table(index="checked_at", columns="expectation", values="failures", fill_value=0)
        for rule in per_rule.columns:
            bottom.plot(per_rule.index, per_rule[rule], marker="s", linestyle=":", label=rule)
        bottom.legend(fontsize="small")
    bottom.set_ylabel("failing checks")
    fig.autofmt_xdate()
    fig.tight_layout()
    display(fig)
    plt.close(fig)
display(over_time)

# COMMAND ----------
# MAGIC %md
# MAGIC ## Failing checks: which rule, how often, how many rows
# MAGIC Examples of the offending rows are in `latest_details` (JSON).

# COMMAND ----------
display(
    spark.sql("""
  SELECT `table`, expectation, expectation_type, action,
         count(*) AS times_failed, sum(coalesce(unexpected_count, 0)) AS unexpected_rows,
         max(checked_at) AS last_failed, max_by(details, checked_at) AS latest_details
  FROM lakecdc_dq WHERE NOT success OR success IS NULL
  GROUP BY ALL ORDER BY last_failed DESC, `table`, expectation""")
)

# COMMAND ----------
# MAGIC %md
# MAGIC ## Built-in CDC checks: the latest result of each, per table
# MAGIC Freshness, source drift, sequence order, key checks and reconciliation with the full load.

# COMMAND ----------
display(
    spark.sql("""
  SELECT `table`, expectation, max_by(success, checked_at) AS latest_success,
         max_by(unexpected_count, checked_at) AS latest_unexpected, max_by(details, checked_at) AS latest_details,
         max(checked_at) AS last_checked
  FROM lakecdc_dq WHERE startswith(expectation, 'cdc_')
  GROUP BY `table`, expectation ORDER BY `table`, expectation""")
)
