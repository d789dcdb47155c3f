"""Every notebook in notebooks/ runs, as Databricks would run it, against a small demo warehouse.

The notebooks are Databricks source files; :mod:`tests.notebook_shim` runs them as plain Python with
``dbutils`` / ``display`` shims (``display`` renders: a DataFrame through ``limit(n).toPandas()``, a
matplotlib figure as PNG). The demo warehouse is built once: the demo traffic (two sources, three
tables, broken messages, rows that break the expectations) in two pipeline runs, so mirrors have
several versions and data quality has more than one point in time. The figures the notebooks show are
held against the tables themselves and against what ``lakecdc export`` lists; then the same notebooks
run on catalog names (the tables registered in Spark's own catalog) and must show the same figures.
"""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT
from tests.notebook_shim import run_notebook, split_cells

pytestmark = pytest.mark.spark

NOTEBOOK_DIR = ROOT / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.py"))
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def demo(spark, tmp_path_factory):
    """The demo pipeline over two runs, half the landing files each; returns the Warehouse."""
    from pipelines.config import load_config
    from pipelines.runner import run_pipeline
    from pipelines.testing.demo import demo_config, generate, write_landing
    from pipelines.warehouse import Warehouse

    work = tmp_path_factory.mktemp("notebooks")
    staged = work / "staged"
    # seed 5: its 80 changes include negative amounts (a `drop` rule: gold quarantine) and an unknown status
    write_landing(staged, generate(80, seed=5, dq_faults=True), files_per_source=4)
    conf_path = work / "pipeline.yaml"
    conf_path.write_text(yaml.safe_dump(demo_config(work)))
    cfg = load_config(conf_path)
    for run in (0, 1):
        for source in sorted((staged / "landing").iterdir()):
            files = sorted(source.iterdir())
            half = files[: len(files) // 2] if run == 0 else files[len(files) // 2 :]
            target = work / "landing" / source.name
            target.mkdir(parents=True, exist_ok=True)
            for f in half:
                shutil.copy(f, target / f.name)
        run_pipeline(spark, cfg)
    return Warehouse(cfg.warehouse)


@pytest.fixture(scope="module")
def runs(spark, demo):
    """Run a notebook (once per set of widget values) against the demo warehouse's path."""
    cache = {}

    def run(stem: str, **widgets: str):
        values = {"warehouse": demo.root, **widgets}
        key = (stem, tuple(sorted(values.items())))
        if key not in cache:
            cache[key] = run_notebook(NOTEBOOK_DIR / f"{stem}.py", spark, values)
        return cache[key]

    return run


def test_the_notebooks_are_databricks_source_notebooks():
    assert {p.stem for p in NOTEBOOKS} >= {"mirrors", "mirror_history", "quarantine", "data_quality"}
    for path in NOTEBOOKS:
        cells = split_cells(path.read_text())
        assert len(cells) >= 2, path
        markdown = [c for c in cells if c.startswith("# MAGIC %md")]
        assert markdown, f"{path.name}: no markdown cell"


@pytest.mark.long  # make test-all: the demo warehouse and every notebook on it cost minutes on 2 cores (CI checks their shape)
@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_notebook_runs_on_the_demo_warehouse(runs, notebook):
    run = runs(notebook.stem)  # raises NotebookError naming the cell on any error
    if notebook.stem != "lakecdc_tables":
        assert run.tables(), f"{notebook.name} displayed nothing"
        for shown in run.tables():
            assert len(shown.value.columns), f"{notebook.name} cell {shown.cell} displayed no columns"


@pytest.mark.long  # make test-all: the demo warehouse and every notebook on it cost minutes on 2 cores (CI checks their shape)
def test_mirrors_show_real_row_counts_freshness_and_lag(spark, demo, runs):
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    from pipelines.export import mirror_refs

    run = runs("mirrors")
    overview = run.table_with("mirror", "rows", "last_seq", "freshness_s", "lag_s")
    refs = mirror_refs(spark, demo)
    # the mirrors are those export lists: gold's state tables (key state, pending, progress) exist but are not among them
    assert sorted(overview["mirror"]) == sorted(refs)
    assert any((Path(demo.root) / "gold" / "_state").iterdir())
    assert len(refs) == 3
    for row in overview.to_dict("records"):
        ref = refs[row["mirror"]]
        mirror = ref.read(spark)
        expect = mirror.agg(F.count("*"), F.max("_seq"), F.max("_event_time")).first()
        assert row["rows"] == expect[0] > 0, row
        assert row["last_seq"] == expect[1], row
        assert row["last_event_time"] == mirror.agg(F.max("_event_time")).toPandas().iloc[0, 0], row
        last = DeltaTable.forPath(spark, ref.path).history(1).first()
        assert row["version"] == last["version"] >= 2, row  # created, then one MERGE per run at least
        assert row["lag_s"] == int((last["timestamp"] - expect[2]).total_seconds()), row
        # counted from now, while the notebook ran
        assert (run.started - expect[2]).total_seconds() - 1 <= row["freshness_s"], row
        assert row["freshness_s"] <= (run.finished - expect[2]).total_seconds() + 1, row

    sources = run.table_with("source", "last_change_event", "last_heartbeat", "changes")
    changes = demo.silver("changes").read(spark).groupBy("source").count().collect()
    assert dict(zip(sources["source"], sources["changes"])) == {r["source"]: r["count"] for r in changes}
    heartbeats = demo.silver("heartbeats").read(spark).select("source").distinct().collect()
    with_heartbeat = set(sources.loc[sources["last_heartbeat"].notna(), "source"])
    assert with_heartbeat == {r["source"] for r in heartbeats} and with_heartbeat
    assert len(run.figures()) == 1 and run.figures()[0].value.startswith(PNG)


@pytest.mark.long  # make test-all: the demo warehouse and every notebook on it cost minutes on 2 cores (CI checks their shape)
def test_quarantine_by_reason_matches_the_quarantine_table(spark, demo, runs):
    run = runs("quarantine")
    rows = demo.silver("quarantine").read(spark).groupBy("stage", "reason").count().collect()
    expected = {(r["stage"], r["reason"]): r["count"] for r in rows}
    assert {s for s, _ in expected} == {"silver", "gold"}  # the demo quarantines in both stages
    shown = run.table_with("stage", "reason", "messages")
    assert dict(zip(zip(shown["stage"], shown["reason"]), shown["messages"])) == expected
    gold = run.table_with("db", "table", "rule", "changes", "example_values")
    assert gold["changes"].sum() == sum(n for (stage, _), n in expected.items() if stage == "gold")
    assert "amount_positive" in set(gold["rule"])
    latest = run.table_with("bronze_position", "raw_excerpt")
    assert len(latest) == sum(expected.values())
    assert any("not json at all" in (text or "") for text in latest["raw_excerpt"])
    assert run.figures() and run.figures()[0].value.startswith(PNG)


def _keys(frame, key):
    return {tuple(str(v) for v in row) for row in frame[list(key)].itertuples(index=False)}


@pytest.mark.long  # make test-all: the demo warehouse and every notebook on it cost minutes on 2 cores (CI checks their shape)
@pytest.mark.parametrize("widgets", [{}, {"mirror": "inventory.stock", "version": "0"}], ids=["default", "v0"])
def test_time_travel_and_change_data_feed_of_a_mirror(spark, demo, runs, widgets):
    from delta.tables import DeltaTable

    from pipelines.export import mirror_refs

    run = runs("mirror_history", **widgets)
    mirror = run.namespace["mirror"]
    version, latest = run.namespace["version"], run.namespace["latest"]
    ref = mirror_refs(spark, demo)[mirror.name]
    history = run.table_with("version", "operation", "inserted", "updated", "deleted")
    assert list(history["version"]) == [r["version"] for r in DeltaTable.forPath(spark, ref.path).history().collect()]
    assert version == (int(widgets["version"]) if widgets else latest - 1)

    counts = run.table_with("at", "rows")
    then = spark.read.format("delta").option("versionAsOf", version).load(ref.path)
    assert list(counts["rows"]) == [then.count(), ref.read(spark).count()]

    adds_up = run.table_with("rows_then", "inserted", "deleted", "rows_now", "adds_up").iloc[0]
    assert bool(adds_up["adds_up"]) and adds_up["rows_now"] == ref.read(spark).count()
    feed = spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", version + 1)
    feed = feed.load(ref.path)
    per_commit = run.table_with("_commit_version", "_change_type", "rows")
    expected = feed.groupBy("_commit_version", "_change_type").count().collect()
    assert sorted(zip(per_commit["_commit_version"], per_commit["_change_type"], per_commit["rows"])) == sorted(
        (r[0], r[1], r[2]) for r in expected
    )

    differ = run.table_with("side")
    key = mirror.key
    feed_rows = feed.toPandas()
    now_keys = _keys(feed_rows[feed_rows["_change_type"].isin(["insert", "update_postimage"])], key)
    gone_keys = _keys(feed_rows[feed_rows["_change_type"].isin(["delete", "update_preimage"])], key)
    assert _keys(differ[differ["side"] == "only now"], key) <= now_keys
    assert _keys(differ[differ["side"] == "only then"], key) <= gone_keys
    assert len(differ), "nothing changed between the versions compared: the demo should change every mirror"


@pytest.mark.long  # make test-all: the demo warehouse and every notebook on it cost minutes on 2 cores (CI checks their shape)
def test_data_quality_over_time_with_plots(spark, demo, runs):
    from pyspark.sql import functions as F

    from pipelines.quality.storage import dq_results_ref

    run = runs("data_quality")
    results = dq_results_ref(demo).read(spark)
    per_table = results.groupBy("table").agg(
        F.count("*").alias("checks"), F.count_if(~F.coalesce(F.col("success"), F.lit(False))).alias("failures")
    )
    summary = run.table_with("table", "checks", "pass_rate_pct", "failures", "quarantined", "last_checked")
    assert {r["table"]: (r["checks"], r["failures"]) for r in per_table.collect()} == {
        r["table"]: (r["checks"], r["failures"]) for r in summary.to_dict("records")
    }
    over_time = run.table_with("table", "run_id", "batch_id", "checked_at", "pass_rate_pct")
    assert over_time["run_id"].nunique() >= 2  # both pipeline runs' checks
    assert over_time.groupby("table")["checked_at"].nunique().min() >= 2  # a line, not a point, per table
    failing = run.table_with("expectation", "times_failed", "unexpected_rows")
    assert failing["times_failed"].sum() == summary["failures"].sum()
    cdc = run.table_with("expectation", "latest_success", "latest_unexpected")
    assert set(cdc["expectation"]) >= {"cdc_key_not_null", "cdc_key_unique", "cdc_freshness"}
    [figure] = run.figures()
    assert figure.value.startswith(PNG) and len(figure.value) > 20_000  # two panels with lines, not a blank


def _register(spark, demo, catalog: str, layered: bool) -> str:
    """The demo warehouse's tables as catalog tables (external, at their paths): one schema with the
    names a catalog warehouse gives them (``silver_changes``, ``gold_<mirror>``, ``dq_results``),
    or (``layered``) a schema per layer with plain names. Returns the widget value for ``schema``."""
    from pipelines.quality.storage import dq_results_ref

    base = f"nb_{uuid.uuid4().hex[:8]}"
    schemas = [f"{base}_silver", f"{base}_gold"] if layered else [base]
    for s in schemas:
        spark.sql(f"CREATE SCHEMA {catalog}.{s}")
    silver, gold = schemas[0], schemas[-1]
    tables = {
        f"{silver}.{name if layered else f'silver_{name}'}": demo.silver(name).path
        for name in ("changes", "quarantine", "heartbeats", "ddl_log")
    }
    tables[f"{silver}.dq_results"] = dq_results_ref(demo).path
    prefix = "" if layered else "gold_"
    for path in sorted((Path(demo.root) / "gold").iterdir()):
        if (path / "_delta_log").is_dir():  # a mirror
            tables[f"{gold}.{prefix}{path.name}"] = str(path)
        else:  # a folder of state tables: _state/keys is [gold_]_state_keys in a catalog
            for table in sorted(path.iterdir()):
                tables[f"{gold}.{prefix}{path.name}_{table.name}"] = str(table)
    for name, location in tables.items():
        spark.sql(f"CREATE TABLE {catalog}.{name} USING DELTA LOCATION '{location}'")
    return ", ".join(schemas)


@pytest.mark.long  # make test-all: the demo warehouse and every notebook on it cost minutes on 2 cores (CI checks their shape)
@pytest.mark.parametrize(
    "layered",
    [False, pytest.param(True, marks=pytest.mark.long)],  # CI's slice: one schema (test_catalog_layers runs both)
    ids=["one_schema", "schema_per_layer"],
)
def test_catalog_names_show_the_same_as_the_path(spark, demo, runs, layered):
    catalog = "spark_catalog"
    schema = _register(spark, demo, catalog, layered)
    try:
        widgets = {"warehouse": "", "catalog": catalog, "schema": schema}
        by_path, by_name = runs("mirrors"), runs("mirrors", **widgets)
        columns = ["mirror", "source_table", "key", "rows", "last_seq", "last_event_time", "version"]
        path_view = by_path.table_with(*columns)[columns].sort_values("mirror").reset_index(drop=True)
        name_view = by_name.table_with(*columns)[columns].sort_values("mirror").reset_index(drop=True)
        assert name_view.equals(path_view), (name_view, path_view)
        assert all(loc.startswith(f"{catalog}.") for loc in by_name.table_with("location")["location"])

        for stem, columns in (
            ("quarantine", ["stage", "reason", "messages"]),
            ("data_quality", ["table", "checks", "failures", "last_checked"]),
        ):
            assert (
                runs(stem, **widgets).table_with(*columns)[columns].equals(runs(stem).table_with(*columns)[columns])
            ), stem
        if not layered:
            history = runs("mirror_history", **widgets)
            assert history.table_with("rows_then", "adds_up").iloc[0]["adds_up"]
            assert history.namespace["mirror"].location.startswith(f"{catalog}.")
    finally:
        for s in schema.split(", "):
            spark.sql(f"DROP SCHEMA IF EXISTS {catalog}.{s} CASCADE")  # external tables: the files stay


def test_a_relative_warehouse_path_is_read_from_where_the_notebook_runs(tmp_path, monkeypatch):
    """``delta.`path` `` names resolve only absolute paths: a relative widget value (docs/analysts.md's local example)
    is made absolute; cloud URIs and /Volumes paths are kept as given."""
    import runpy

    tables = runpy.run_path(str(Path(__file__).resolve().parents[2] / "notebooks" / "lakecdc_tables.py"))
    monkeypatch.chdir(tmp_path)
    assert tables["LakecdcTables"](None, warehouse="build/wh/").warehouse == str(tmp_path / "build" / "wh")
    for given in ("dbfs:/mnt/wh", "s3://bucket/wh", "/Volumes/main/cdc/files/wh"):
        assert tables["LakecdcTables"](None, warehouse=given).warehouse == given
