# Databricks notebook source
# MAGIC %md
# MAGIC # One mirror through time: its versions, the table as it was, and its change data feed
# MAGIC Every gold micro-batch is one Delta commit (a `MERGE`) on the mirror, so the mirror's history is the
# MAGIC history of what the pipeline applied. Delta keeps old versions (time travel, until `VACUUM` removes
# MAGIC their files) and every mirror has the change data feed on (`delta.enableChangeDataFeed`), which
# MAGIC lists each row inserted, updated (before and after) and deleted by each commit.
# MAGIC
# MAGIC **Widgets**: `catalog` and `schema`, or `warehouse` (a path); then `mirror` (its choices are filled
# MAGIC once the mirrors are found; blank: the first) and `version`: the version to compare with now (blank:
# MAGIC the one before the latest write).

# COMMAND ----------
dbutils.widgets.text("catalog", "main", "Catalog")
dbutils.widgets.text("schema", "cdc", "Schema(s)")
dbutils.widgets.text("warehouse", "", "Warehouse path (instead of catalog)")
dbutils.widgets.text("version", "", "Compare with version (blank: previous)")

# COMMAND ----------
# MAGIC %run ./lakecdc_tables

# COMMAND ----------
lake = LakecdcTables(
    spark,
    warehouse=dbutils.widgets.get("warehouse"),
    catalog=dbutils.widgets.get("catalog"),
    schema=dbutils.widgets.get("schema"),
)
names = [m.name for m in lake.mirrors()]
if not names:
    raise ValueError(f"no mirrors in {lake.where}")
# a combobox, not a dropdown: a widget keeps its choices when you point the notebook at another warehouse
dbutils.widgets.combobox("mirror", "", names, "Mirror (blank: the first)")
mirror = lake.mirror(dbutils.widgets.get("mirror").strip() or names[0])
print(f"mirror {mirror.name} (source table {mirror.source_table}, key {', '.join(mirror.key) or 'none'})")
print(f"at {mirror.location}")

# COMMAND ----------
# MAGIC %md
# MAGIC ## Versions: `DESCRIBE HISTORY`
# MAGIC Newest first: when each commit happened, what it was (`CREATE TABLE`, `MERGE` of a micro-batch,
# MAGIC `SET TBLPROPERTIES` or `ADD COLUMNS` when the source schema changed) and how many rows it inserted,
# MAGIC updated and deleted.

# COMMAND ----------
history = spark.sql(f"DESCRIBE HISTORY {mirror.sql}").selectExpr(
    "version",
    "timestamp",
    "operation",
    "CAST(operationMetrics['numTargetRowsInserted'] AS BIGINT) AS inserted",
    "CAST(operationMetrics['numTargetRowsUpdated'] AS BIGINT) AS updated",
    "CAST(operationMetrics['numTargetRowsDeleted'] AS BIGINT) AS deleted",
    "CAST(operationMetrics['numOutputRows'] AS BIGINT) AS output_rows",
    "operationParameters",
)
display(history)
latest = history.agg({"version": "max"}).first()[0]
chosen = dbutils.widgets.get("version").strip()
version = int(chosen) if chosen else max(latest - 1, 0)
print(f"latest version {latest}; comparing with version {version}")

# COMMAND ----------
# MAGIC %md
# MAGIC ## Time travel: the mirror at that version (`VERSION AS OF`) against now
# MAGIC Row counts then and now, then the rows that differ: `only then` is a row as it was and is no longer
# MAGIC (updated or deleted since), `only now` a row as it is now and was not then (inserted or updated).
# MAGIC Columns added later are left out of the comparison.

# COMMAND ----------
then_sql = f"SELECT * FROM {mirror.sql} VERSION AS OF {version}"
columns_then = spark.sql(then_sql).columns
now_columns = mirror.read(spark).columns
common = ", ".join(quote(c) for c in now_columns if c in columns_then)
display(
    spark.sql(f"""
  SELECT 'version {version}' AS at, count(*) AS rows FROM {mirror.sql} VERSION AS OF {version}
  UNION ALL SELECT 'now (version {latest})', count(*) FROM {mirror.sql}""")
)
order = ", ".join(quote(k) for k in mirror.key if k in columns_then) or "1"
differ = spark.sql(f"""
  SELECT * FROM (
    SELECT 'only then' AS side, * FROM (SELECT {common} FROM {mirror.sql} VERSION AS OF {version}
                                        EXCEPT ALL SELECT {common} FROM {mirror.sql})
    UNION ALL
    SELECT 'only now' AS side, * FROM (SELECT {common} FROM {mirror.sql}
                                       EXCEPT ALL SELECT {common} FROM {mirror.sql} VERSION AS OF {version}))
  ORDER BY {order}, side DESC""")
display(differ)

# COMMAND ----------
# MAGIC %md
# MAGIC ## Change data feed since that version
# MAGIC What each commit after version `version` did, row by row: `insert`, `update_preimage` /
# MAGIC `update_postimage` (the row before and after), `delete`. First per commit and kind, then a check that
# MAGIC the feed accounts for the difference (rows then + inserted - deleted = rows now), then the rows.
# MAGIC The feed is paused for the one commit that rewrites a column as text (`schema_changes: evolve` of an
# MAGIC incompatible type change); reading across it fails, so choose a `version` after it.

# COMMAND ----------
if version >= latest:
    print(f"version {version} is the latest: nothing changed since")
else:
    feed = mirror.read(spark, readChangeFeed="true", startingVersion=str(version + 1))
    feed.createOrReplaceTempView("lakecdc_feed")
    display(
        spark.sql("""
      SELECT _commit_version, _commit_timestamp, _change_type, count(*) AS rows
      FROM lakecdc_feed GROUP BY ALL ORDER BY _commit_version, _change_type""")
    )
    display(
        spark.sql(f"""
      SELECT t0.n AS rows_then, f.inserted, f.deleted, t1.n AS rows_now,
             t0.n + f.inserted - f.deleted = t1.n AS adds_up
      FROM (SELECT count(*) AS n FROM {mirror.sql} VERSION AS OF {version}) AS t0,
           (SELECT count(*) AS n FROM {mirror.sql}) AS t1,
           (SELECT count_if(_change_type = 'insert') AS inserted, count_if(_change_type = 'delete') AS deleted
            FROM lakecdc_feed) AS f""")
    )
    display(feed.orderBy("_commit_version", *[k for k in mirror.key if k in feed.columns], "_change_type").limit(200))
