"""The last version that passed (issue 43) and a new rule on old rows (issue 42), through real gold batches:
a batch that fails a ``warn`` rule leaves the last certified version in place, for ``export --certified``,
the table property and the view alike; ``dq check --rules`` checks the mirror's current rows and, once they
pass, certifies the version it read. Data Docs then list every check of the mirror, the passing ones too."""

from __future__ import annotations

from pathlib import Path

from pipelines.export import export_warehouse
from pipelines.mirror_columns import table_properties
from pipelines.quality.certify import CERTIFIED_VERSION_PROPERTY, certified_versions, certify, view_sql
from pipelines.quality.rows import check_rows
from pipelines.quality.storage import dq_results_ref
from pipelines.runner import RunSummary, check_every_mirror
from tests.spark.test_gold_semantics import Gold, _row, change

RULES = [
    {"name": "a_small", "sql": "a < 100", "action": "warn"},
    {"name": "id_set", "expect": "not_null", "column": "id"},
]


def _dq(gold: Gold, batch: int) -> list[dict]:
    return [r.asDict() for r in dq_results_ref(gold.wh).read(gold.spark).where(f"batch_id = {batch}").collect()]


def _ids(rows: list[dict]) -> list[tuple]:
    return [(r["id"], r["a"]) for r in rows]


def test_a_failing_warn_rule_keeps_the_last_certified_version_until_the_rows_pass(spark, tmp_path):
    gold = Gold(spark, tmp_path, expectations=RULES)
    ref = gold.wh.mirror("shop.t")
    gold.apply([change("INSERT", 1, after=_row(1, a="5")), change("INSERT", 2, after=_row(2, a="7"))])
    [v] = certify(spark, gold.wh, _dq(gold, 0))
    assert v.certified and v.mirror == "shop.t", v
    good = v.version
    assert table_properties(spark, ref)[CERTIFIED_VERSION_PROPERTY] == str(good)
    assert not certify(spark, gold.wh, _dq(gold, 0))[0].certified  # the same version: nothing new recorded

    # a batch whose change fails the warn rule: applied, and the certified version stays
    gold.apply([change("UPDATE", 3, before=_row(1, a="5"), after=_row(1, a="500"))])
    [v] = certify(spark, gold.wh, _dq(gold, 1))
    assert (v.certified, v.version) == (False, good) and "a_small (warn)" in v.reason, v
    # a clean batch after it: its change passes, but the bad row is still in the mirror
    gold.apply([change("INSERT", 4, after=_row(3, a="1"))])
    assert certify(spark, gold.wh, _dq(gold, 2))[0].version == good
    assert table_properties(spark, ref)[CERTIFIED_VERSION_PROPERTY] == str(good)
    assert _ids(gold.rows()) == [(1, 500), (2, 7), (3, 1)]
    assert _ids(export_warehouse(spark, gold.wh, certified=True)["shop.t"]) == [(1, 5), (2, 7)]
    spark.sql(view_sql(ref, certified_versions(spark, gold.wh)["shop.t"].version, "default.shop_t_certified"))
    assert sorted(r["a"] for r in spark.table("default.shop_t_certified").collect()) == [5, 7]

    # the rule on the current rows (what dq check --rules runs) finds the row the change checks let in
    rows = check_rows(spark, "shop.t", gold.mirror(), gold.cfg.tables["shop.t"].expectations, "rows-1", ("id",))
    [rule] = [r for r in rows if r["expectation"] == "a_small"]
    assert (rule["success"], rule["element_count"], rule["unexpected_count"], rule["action"]) == (False, 3, 1, "warn")
    assert not certify(spark, gold.wh, rows, whole=True)[0].certified

    # fixed at the source: the rows pass, and the version the check read is certified
    gold.apply([change("UPDATE", 5, before=_row(1, a="500"), after=_row(1, a="6"))])
    summary = RunSummary()
    check_every_mirror(spark, gold.cfg, gold.wh, summary, rules=True)
    [v] = summary.certified
    assert v.certified and v.version > good, v
    assert _ids(export_warehouse(spark, gold.wh, certified=True)["shop.t"]) == [(1, 6), (2, 7), (3, 1)]
    assert table_properties(spark, ref)[CERTIFIED_VERSION_PROPERTY] == str(v.version)

    # Data Docs list every check of the mirror under its name and action, the passing ones too
    index = Path(summary.data_docs)
    pages = "".join(p.read_text() for p in (index.parent / "validations").rglob("*.html"))
    for text in ("a_small: a &lt; 100", "id_set: id is not NULL", "cdc_key_unique: no two rows of the mirror"):
        assert text in pages or text.replace("&lt;", "<") in pages, text
    assert "warn: recorded, every change applied" in pages
    assert "total rows" not in "".join(
        p.read_text() for p in (index.parent / "validations").rglob("*.html") if "changes" in p.parts
    )
