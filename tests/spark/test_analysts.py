"""What analysts choose, on real Delta tables through the real stages: SQL expectations (warn, drop,
fail, Data Docs, checked when a run starts), tables kept by include / exclude with a reconciliation
that adds up (and ``rebuild`` replaying bronze under new lists), an excluded column absent from
everything silver and gold write, and the guard that a new ``gold.naming`` never forks a live mirror.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipelines.config import ConfigError, parse_config
from pipelines.export import mirror_refs
from pipelines.mirror_names import check_mirror_names, mirror_of, mirror_renames
from pipelines.preflight import preflight
from pipelines.quality.batch import QualityFailure, check_batch, typed_changes
from pipelines.quality.docs import build_data_docs
from pipelines.quality.rules import parse_expectations
from pipelines.quality.sql_rules import validate_sql_rules
from pipelines.quality.storage import dq_results_ref
from pipelines.runner import rebuild, run_pipeline
from pipelines.silver import reconcile
from pipelines.testing.demo import demo_config, generate, write_landing
from pipelines.warehouse import SourceTable, Warehouse
from tests.spark.test_gold_semantics import Gold, _row, change

# ---------------------------------------------------------------- SQL expectations through gold

SQL_RULES = [
    {"name": "a_not_negative", "sql": "a >= 0", "action": "drop"},
    {"name": "b_not_bad", "sql": "b IS NULL OR b <> 'bad'", "action": "warn"},
    {"name": "d_below_a", "sql": "d IS NULL OR a IS NULL OR d < a * 100", "action": "warn"},
]


def _dq(gold: Gold, batch: int) -> dict[str, dict]:
    rows = dq_results_ref(gold.wh).read(gold.spark).where(f"batch_id = {batch}").collect()
    return {r["expectation"]: r.asDict() for r in rows}


def test_sql_expectations_warn_and_drop_through_gold_and_data_docs_list_them(spark, tmp_path):
    gold = Gold(spark, tmp_path, expectations=SQL_RULES)
    stats = gold.apply(
        [
            change("INSERT", 1, after=_row(1, a="5", b="ok", d="1.00")),
            change("INSERT", 2, after=_row(2, a="-1", b="ok", d="1.00")),  # dropped: a < 0
            change("INSERT", 3, after=_row(3, a=None, b="ok", d="1.00")),  # dropped: NULL is not true
            change("INSERT", 4, after=_row(4, a="1", b="bad", d="500.00")),  # two warnings
            change("INSERT", 5, after=_row(5, a="2", b="x", d="1.00")),
        ]
    )
    assert (stats.applied, stats.quarantined) == (3, 2)
    assert [r["id"] for r in gold.rows()] == [1, 4, 5]
    quarantined = sorted((r["rule"], r["bad_value"]) for r in gold.quarantine())
    assert quarantined == [("a_not_negative", '{"a": -1}'), ("a_not_negative", '{"a": null}')]
    assert all("sql: a >= 0" in r["reason"] for r in gold.quarantine())
    results = _dq(gold, 0)
    for name, (ok, checked, unexpected) in {
        "a_not_negative": (False, 5, 2),
        "b_not_bad": (False, 5, 1),
        "d_below_a": (False, 5, 2),  # a = -1 too
    }.items():
        row = results[name]
        assert (row["success"], row["element_count"], row["unexpected_count"]) == (ok, checked, unexpected), row
        assert row["expectation_type"] == "unexpected_rows_expectation"
    assert json.loads(results["b_not_bad"]["details"])["examples"][0]["b"] == "bad"

    # a DELETE is never checked (it carries no new row); a clean batch passes every rule
    gold.apply(
        [
            change("DELETE", 6, before=_row(4, a="1", b="bad", d="500.00")),
            change("INSERT", 7, after=_row(6, a="3", b="ok", d="1.00")),
        ]
    )
    results = _dq(gold, 1)
    assert {n: (r["success"], r["element_count"]) for n, r in results.items()} == {
        "a_not_negative": (True, 1),
        "b_not_bad": (True, 1),
        "d_below_a": (True, 1),
    }

    index = build_data_docs(warehouse=gold.wh)
    pages = "".join(p.read_text() for p in (Path(index).parent / "validations").rglob("*.html"))
    # listed like the fixed rules: the rule's name and expression, and the count of unexpected rows
    assert "a_not_negative: a &gt;= 0" in pages or "a_not_negative: a >= 0" in pages
    assert "b_not_bad: b IS NULL OR b &lt;&gt; &#39;bad&#39;" in pages or "b_not_bad: b IS NULL" in pages


def test_a_failing_sql_rule_stops_the_batch_and_its_result_is_kept(spark, tmp_path):
    gold = Gold(spark, tmp_path, expectations=[{"name": "a_small", "sql": "a < 100", "action": "fail"}])
    gold.apply([change("INSERT", 1, after=_row(1, a="1"))])
    with pytest.raises(QualityFailure, match=r"'a_small' \(sql: a < 100\).*1 of 1 changes unexpected"):
        gold.apply([change("UPDATE", 2, before=_row(1, a="1"), after=_row(1, a="500"))])
    row = _dq(gold, 1)["a_small"]
    assert row["success"] is False and json.loads(row["details"])["examples"][0]["a"] == 500
    assert [(r["id"], r["a"]) for r in gold.rows()] == [(1, 1)]  # nothing of the batch applied


def test_a_partial_update_is_checked_only_when_it_carries_every_column_named(spark):
    """Like the fixed rules: a partial image (SharePlex, Mongo $set) that does not carry a column the
    expression names is not judged on a value it does not hold."""
    ddl = (
        "op STRING, key_columns ARRAY<STRING>, before MAP<STRING, STRING>, after MAP<STRING, STRING>, "
        "changed ARRAY<STRING>, seq STRING, change_index INT, bronze_position STRING"
    )
    rows = [
        ("UPDATE", ["id"], None, {"id": "1", "a": "-5"}, ["a"], "1", 0, "p0"),  # carries a, not b: not checked
        ("UPDATE", ["id"], None, {"id": "2", "b": "x"}, ["b"], "2", 0, "p1"),  # carries b, not a: not checked
        ("UPDATE", ["id"], None, {"id": "3", "a": "-5", "b": "y"}, None, "3", 0, "p2"),  # a full image: fails
        ("UPDATE", ["id"], None, {"id": "4", "a": "5", "b": "z"}, ["a", "b"], "4", 0, "p3"),  # carries both: passes
    ]
    typed = typed_changes(spark.createDataFrame(rows, ddl), {"id": "bigint", "a": "int", "b": "varchar(8)"})
    rules = parse_expectations([{"name": "a_pos", "sql": "a > 0 OR b = 'never'", "action": "drop"}], "t")
    bq = check_batch(spark, "shop.t", typed, rules, "r", 0)
    [result] = bq.results
    assert (result["element_count"], result["unexpected_count"]) == (2, 1)
    assert [r.bronze_position for r in bq.dropped.collect()] == ["p2"]


def test_sql_rules_are_checked_when_a_run_starts(spark, tmp_path):
    def doc(rules, **table):
        return parse_config(
            {
                "warehouse": str(tmp_path / "wh"),
                "sources": [{"name": "s", "format": "oms_canal", "path": str(tmp_path / "none")}],
                "tables": {
                    "shop.t": {
                        "key": ["id"],
                        "columns": {"id": "bigint", "a": "int", "ssn": "text"},
                        **table,
                        "expectations": rules,
                    },
                    "shop.u": {"expectations": [{"name": "free", "sql": "anything_here > 1"}]},
                },
            },
            origin="conf.yaml",
        )

    good = doc([{"name": "ok", "sql": "a > 0 AND id IS NOT NULL"}])
    assert validate_sql_rules(spark, good, Warehouse.from_config(good)) == []
    bad = doc(
        [
            {"name": "typo", "sql": "amout > 0"},
            {"name": "not_boolean", "sql": "a + 1"},
            {"name": "aggregate", "sql": "sum(a) > 0"},
            {"name": "random", "sql": "rand() > a"},
            {"name": "subquery", "sql": "a IN (SELECT 1)"},
            {"name": "left_out", "sql": "ssn IS NOT NULL"},
            {"name": "system", "sql": "op = 'INSERT'"},
        ],
        columns_exclude=["ssn"],
    )
    errors = validate_sql_rules(spark, bad, Warehouse.from_config(bad))
    assert len(errors) == 7, errors
    for i, name in enumerate(["typo", "not_boolean", "aggregate", "random", "subquery", "left_out", "system"]):
        assert errors[i].startswith(f"conf.yaml: tables.shop.t.expectations[{i}] ({name}).sql: "), errors[i]
    assert "`amout` cannot be resolved" in errors[0] and "deterministic" in errors[3] and "subquery" in errors[4]
    assert "left out by tables.shop.t.columns_exclude" in errors[5]
    unparsable = doc([{"name": "broken", "sql": "a >> > 1"}])
    [error] = validate_sql_rules(spark, unparsable, Warehouse.from_config(unparsable))
    assert error.startswith("conf.yaml: tables.shop.t.expectations[0] (broken).sql: ") and "PARSE_SYNTAX_ERROR" in error


def test_a_sql_rule_may_name_a_column_only_the_mirror_has(spark, tmp_path):
    """Columns its messages brought (not configured) are the table's too, once its mirror has them."""
    gold = Gold(spark, tmp_path)
    gold.apply([change("INSERT", 1, after=_row(1, a="1", b="x"))])
    cfg = parse_config(
        {
            "warehouse": str(tmp_path / "wh"),
            "sources": [{"name": "s", "format": "oms_canal", "path": str(tmp_path / "none")}],
            "tables": {"shop.t": {"columns": {"id": "bigint"}, "expectations": [{"name": "b", "sql": "b <> 'y'"}]}},
        }
    )
    assert validate_sql_rules(spark, cfg, gold.wh) == []


# ---------------------------------------------------------------- tables and columns kept, end to end

SECRET = "@example.com"  # every demo e-mail address ends so


def _config(root: Path, *, exclude_orders: bool):
    doc = demo_config(root, quality=False)
    doc.pop("gold")  # the old names: this warehouse also serves the naming guard's test
    customers = doc["tables"]["demo_tenant.shop.customers"]
    customers.update(
        columns_exclude=["email"],
        history=True,
        expectations=[
            {"name": "not_ada", "sql": "name <> 'Ada'", "action": "drop"},
            {"name": "name_short", "expect": "regex", "column": "name", "pattern": "^.{1,4}$", "action": "warn"},
        ],
    )
    if exclude_orders:
        doc["exclude"] = ["demo_tenant.shop.orders"]
        del doc["tables"]["demo_tenant.shop.orders"]
    doc["sources"][1]["exclude"] = ["inventory.tmp_*"]  # a source's own list (no such table: nothing skipped)
    return parse_config(doc, origin=str(root / "pipeline.yaml"))


def _text_of(df) -> str:
    return "\n".join(json.dumps(r.asDict(recursive=True), default=str) for r in df.collect())


@pytest.fixture(scope="module")
def chosen(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("chosen")
    write_landing(root, generate(90, seed=11))
    cfg = _config(root, exclude_orders=True)
    run_pipeline(spark, cfg)
    return root, cfg, Warehouse.from_config(cfg)


def test_skipped_tables_are_counted_never_applied_and_reconciliation_adds_up(spark, chosen):
    _root, _cfg, wh = chosen
    counts = reconcile(spark, wh)
    kinds = ("changes", "heartbeats", "ddl_log", "quarantine", "skipped")
    assert counts["skipped"] > 0
    assert counts["bronze_messages"] == sum(counts[k] for k in kinds) == counts["accounted"], counts
    skipped = wh.silver("skipped").read(spark)
    assert {(r["db"], r["table"], r["reason"]) for r in skipped.collect()} == {
        ("demo_tenant.shop", "orders", "excluded by exclude pattern 'demo_tenant.shop.orders'")
    }
    assert wh.silver("changes").read(spark).where("`table` = 'orders'").count() == 0
    assert not any("orders" in name for name in mirror_refs(spark, wh))
    # never quarantined: silver's quarantine holds only the messages it could not decode
    assert {r["table"] for r in wh.silver("quarantine").read(spark).where("stage = 'silver'").collect()} == {None}
    assert wh.silver("quarantine").read(spark).where("stage = 'gold' AND `table` = 'orders'").count() == 0


def test_an_excluded_column_is_absent_from_everything_silver_and_gold_write(spark, chosen):
    _root, _cfg, wh = chosen
    assert SECRET in _text_of(wh.bronze.read(spark).selectExpr("CAST(value AS STRING) AS v")), "bronze keeps it"
    refs = mirror_refs(spark, wh)
    [customers] = [ref for name, ref in refs.items() if "customers" in name]
    mirror, history = customers.read(spark), wh.side_of(customers, "history").read(spark)
    assert "email" not in mirror.columns and "email" not in history.columns and mirror.count() > 0
    written = {
        "silver changes": wh.silver("changes").read(spark),
        "quarantine": wh.silver("quarantine").read(spark).where("stage = 'gold'"),
        "dq_results": dq_results_ref(wh).read(spark),
        "mirror": mirror,
        "history": history,
    }
    for what, df in written.items():
        text = _text_of(df)
        assert SECRET not in text and '"email"' not in text, what
    # the rules did run and write what they found, without the column
    assert wh.silver("quarantine").read(spark).where("rule = 'not_ada'").count() > 0
    assert dq_results_ref(wh).read(spark).where("expectation = 'name_short' AND NOT success").count() > 0


def test_rebuild_replays_bronze_under_new_lists(spark, chosen):
    root, _cfg, wh = chosen
    cfg = _config(root, exclude_orders=False)
    rebuild(spark, cfg)
    counts = reconcile(spark, wh)
    assert counts["skipped"] == 0
    assert (
        counts["bronze_messages"]
        == counts["accounted"]
        == sum(counts[k] for k in ("changes", "heartbeats", "ddl_log", "quarantine"))
    )
    assert any("orders" in name for name in mirror_refs(spark, wh))


# ---------------------------------------------------------------- gold.naming never forks a live mirror


def test_a_new_naming_of_live_mirrors_is_refused_naming_each(spark, chosen):
    root, cfg, wh = chosen
    assert mirror_renames(spark, cfg, wh) == []  # the names the mirrors were made under
    check_mirror_names(spark, cfg, wh)
    readable = parse_config(
        {**demo_config(root, quality=False), "gold": {"naming": {"template": "{db}__{table}"}}},
        origin="new.yaml",
    )
    renames = mirror_renames(spark, readable, wh)
    assert {r.source.name: Path(r.wanted.path).name for r in renames} == {
        "demo_tenant.shop.customers": "demo_tenant__shop__customers",
        "demo_tenant.shop.orders": "demo_tenant__shop__orders",
    }  # inventory.stock: inventory__stock under either naming
    with pytest.raises(ConfigError, match=r"new\.yaml: gold\.naming: 2 live mirror\(s\)") as refused:
        check_mirror_names(spark, readable, wh)
    assert "demo_tenant.shop.customers: " in str(refused.value) and "lakecdc rebuild" in str(refused.value)
    assert Path(mirror_of(readable, wh, SourceTable.of("demo_tenant.shop", None, "orders")).path).name == (
        "demo_tenant__shop__orders"
    )
    # what a run checks before it starts: every problem at once, each naming the file and the field
    doc = {**demo_config(root, quality=False), "gold": {"naming": {"template": "{db}__{table}"}}}
    doc["tables"]["inventory.stock"]["expectations"] = [{"name": "qty_ok", "sql": "qtty >= 0"}]
    with pytest.raises(ConfigError) as both:
        preflight(spark, parse_config(doc, origin="both.yaml"), wh)
    message = str(both.value)
    assert "both.yaml: 2 configuration errors" in message
    assert "both.yaml: tables.inventory.stock.expectations[0] (qty_ok).sql: " in message
    assert "both.yaml: gold.naming: 2 live mirror(s)" in message
