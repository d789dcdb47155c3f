"""Gold's per-table choices through the real gold stage: the history of chosen columns (against the
reference model), ``ignore_null_updates``, and liquid clustering of a mirror."""

from __future__ import annotations

import json

import pytest

from pipelines.config import parse_config
from pipelines.formats.base import Change
from pipelines.silver import seq_text
from pipelines.testing.model import history_versions
from tests.spark.test_gold_semantics import Gold, _row, change


def _history(gold: Gold) -> list[tuple]:
    rows = gold.wh.history("shop.t").read(gold.spark).collect()
    return sorted((r["id"], r["a"], r["b"], r["_valid_from_seq"], r["_valid_to_seq"], r["_current"]) for r in rows)


def _expected(changes: list[Change], tracked) -> list[tuple]:
    out = []
    for key, row, since, until in history_versions(changes, ("id",), tracked):
        out.append((int(key[0]), int(row["a"]), row["b"], seq_text(since), until and seq_text(until), until is None))
    return sorted(out)


BATCHES = [
    [
        change("INSERT", 1, after=_row(1, a="1", b="x")),
        change("UPDATE", 2, before=_row(1, a="1", b="x"), after=_row(1, a="1", b="y")),  # b only
        change("UPDATE", 3, before=_row(1, a="1", b="y"), after=_row(1, a="2", b="y")),  # a: a version
        change("INSERT", 4, after=_row(2, a="5", b="x")),
    ],
    [
        change("UPDATE", 5, before=_row(1, a="2", b="y"), after=_row(1, a="2", b="z")),  # b only: in place
        change("DELETE", 6, before=_row(2, a="5", b="x")),
        change("INSERT", 7, after=_row(2, a="5", b="x")),  # back after a delete: a version
        change("UPDATE", 8, before=_row(2, a="5", b="x"), after=_row(2, a="5", b="w")),  # b only
        change("UPDATE", 9, before=_row(1, a="2", b="z"), after=_row(1, a="3", b="q")),  # a and b
    ],
]


@pytest.mark.parametrize(
    "history", [{"columns": ["a"]}, {"except_columns": ["b", "d"]}, True], ids=["columns", "except", "all"]
)
def test_the_history_of_chosen_columns_equals_the_model(spark, tmp_path, history):
    """A change of a column the history does not track updates the current version in place; one of a
    tracked column (or a key back after its DELETE) opens a version. ``history: true`` keeps every
    sequence's version."""
    gold = Gold(spark, tmp_path, history=history)
    for batch in BATCHES:
        gold.apply(batch)
    tracked = None if history is True else ["a"]
    assert _history(gold) == _expected([c for b in BATCHES for c in b], tracked)
    # the in-place updates: key 1 has three versions of five changes, key 2 two of three (its DELETE aside)
    assert len(_history(gold)) == (8 if history is True else 5)


def test_nulls_of_an_update_mean_unchanged_where_configured(spark, tmp_path):
    """``ignore_null_updates``: an UPDATE's NULL columns keep the row's values (a table without the setting
    writes the NULLs); the key state the update leaves holds the values kept, so the next before-image that
    carries them is no drift."""
    full = _row(1, a="1", b="x", d="1.00")
    nulls = _row(1, a="2", b=None, d=None)
    kept = Gold(spark, tmp_path / "kept", quality_checks=True, ignore_null_updates=True)
    plain = Gold(spark, tmp_path / "plain", quality_checks=True)
    for gold in (kept, plain):
        gold.apply([change("INSERT", 1, after=full)])
        gold.apply([change("UPDATE", 2, before=full, after=nulls)])
    assert kept.rows() == [{"id": 1, "a": 2, "b": "x", "d": "1.00"}]
    assert plain.rows() == [{"id": 1, "a": 2, "b": None, "d": None}]
    kept.apply([change("UPDATE", 3, before=_row(1, a="2", b="x", d="1.00"), after=_row(1, a="3", b="x", d="1.00"))])
    from pipelines.quality.storage import dq_results_ref

    drift = dq_results_ref(kept.wh).read(spark).where("batch_id = 2 AND expectation = 'cdc_source_drift'").first()
    assert (drift["success"], drift["element_count"]) == (True, 1)


def test_ignore_null_updates_of_a_source_and_a_table_overriding_it(spark, tmp_path):
    doc = {
        "warehouse": str(tmp_path / "wh"),
        "quality_checks": False,
        "sources": [{"name": "s", "format": "oms_canal", "path": str(tmp_path / "none"), "ignore_null_updates": True}],
        "tables": {"shop.u": {"ignore_null_updates": False}},
    }
    gold = Gold(spark, tmp_path)
    gold.cfg = parse_config(doc)
    for table in ("t", "u"):
        gold.apply([change("INSERT", 1, after=_row(1, a="1", b="x"), table=table)])
        gold.apply([change("UPDATE", 2, before=_row(1, a="1", b="x"), after=_row(1, a="2", b=None), table=table)])
    assert [r["b"] for r in gold.rows("shop.t")] == ["x"], "the source's setting"
    assert [r["b"] for r in gold.rows("shop.u")] == [None], "the table's own overrides it"


def test_a_mirror_is_clustered_as_configured_and_again_when_the_columns_change(spark, tmp_path):
    gold = Gold(spark, tmp_path, cluster_by=["a"])
    gold.apply([change("INSERT", n, after=_row(n, a=str(n), b="x")) for n in (1, 2, 3)])
    mirror = gold.wh.mirror("shop.t")

    def clustering() -> list[str]:
        return list(spark.sql(f"DESCRIBE DETAIL {mirror.sql}").first()["clusteringColumns"])

    assert clustering() == ["a"]
    gold.cfg = parse_config({**json.loads(json.dumps(_doc(gold))), "tables": {"shop.t": {"cluster_by": ["b"]}}})
    gold.apply([change("UPDATE", 4, before=_row(1, a="1", b="x"), after=_row(1, a="1", b="y"))])
    assert clustering() == ["b"]
    assert [(r["id"], r["b"]) for r in gold.rows()] == [(1, "y"), (2, "x"), (3, "x")]


def _doc(gold: Gold) -> dict:
    return {
        "warehouse": gold.cfg.warehouse,
        "quality_checks": False,
        "sources": [{"name": "s", "format": "oms_canal", "path": "/none"}],
    }


# ---------------------------------------------------------------- documents as VARIANT

OID = "64650cf67dc36a464e76e5"


def _mongo(n: int, doc: str, op: str = "INSERT", record: str = "insert", where: str | None = None) -> bytes:
    """A DRS MongoDB message (seed 003): the document is shell-style extended JSON text."""
    return json.dumps(
        {"id": n, "op": op, "dbType": "MongoDB", "db": "shop", "coll": "t", "value": doc, "where": where,
         "recordType": record, "es": 1_700_000_000_000 + n, "clusterTime": f"1700000000:{n}"}
    ).encode()  # fmt: skip


def _document(n: int, fields: str = "") -> str:
    """A document of the collection, as DRS writes it: ``{"_id": ObjectId("..."), <fields>}``."""
    return '{"_id": ObjectId("' + f"{OID}{n:02d}" + '")' + (", " + fields if fields else "") + "}"


DOC = '{"address": {"city": "Oslo", "zip": "0150"}, "n": 9.999999999999999093266253, "big": 10223372036854775806}'


def test_mongodb_sub_documents_are_variant_queried_with_paths(spark, tmp_path):
    """A sub-document and an array of a DRS MongoDB collection land as VARIANT: analysts write
    ``doc:address.city::string``, numbers keep every digit, ``export`` prints the JSON (keys sorted), the
    history keeps each version. A document VARIANT would hold inexactly (a number with an exponent) is
    quarantined, and the others apply."""
    from pipelines.export import variant_json

    gold = Gold(spark, tmp_path, fmt="drs_mongo", history=True)
    first = _document(1, '"name": "a", "doc": ' + DOC + ', "tags": ["x", 2.50]')
    inexact = _document(2, '"name": "b", "doc": {"n": 1.5e400}')
    gold.apply_messages([_mongo(1, first), _mongo(2, inexact)])
    mirror = gold.wh.mirror("shop.t")
    types = {f.name: f.dataType.simpleString() for f in mirror.read(spark).schema.fields}
    assert (types["doc"], types["tags"], types["name"]) == ("variant", "variant", "string")
    row = spark.sql(
        f"SELECT doc:address.city::string AS city, doc:n::string AS n, doc:big::string AS big, "
        f"tags:[1]::string AS second FROM {mirror.sql}"
    ).first()
    assert row.asDict() == {"city": "Oslo", "n": "9.999999999999999093266253", "big": "10223372036854775806",
                            "second": "2.5"}  # fmt: skip
    [exported] = gold.rows()
    assert (
        exported["doc"]
        == variant_json(DOC)
        == ('{"address":{"city":"Oslo","zip":"0150"},"big":10223372036854775806,"n":9.999999999999999093266253}')
    )
    [refused] = gold.quarantine()
    assert "VARIANT" in refused["reason"] and "doc" in refused["reason"], refused["reason"]

    replaced = _document(1, '"name": "a", "doc": {"address": {"city": "Bergen"}}')
    gold.apply_messages([_mongo(3, replaced, op="UPDATE", record="replace", where=_document(1))])
    assert spark.sql(f"SELECT doc:address.city::string FROM {mirror.sql}").first()[0] == "Bergen"
    assert gold.rows()[0]["tags"] is None, "a replace removes what the new document lacks"
    history = spark.sql(
        f"SELECT doc:address.city::string AS city, _current FROM {gold.wh.history('shop.t').sql} ORDER BY _valid_from_seq"
    ).collect()
    assert [(r.city, r._current) for r in history] == [("Oslo", False), ("Bergen", True)], "SCD2 versions of documents"


def test_a_mirror_that_holds_documents_as_text_keeps_them_so(spark, tmp_path):
    """A mirror an earlier version wrote (documents in a STRING column; here by configuration) keeps the
    column and its exact text when the configuration no longer types it: no retype, no quarantine."""
    doc = _document(1, '"doc": {"b": 1.10, "a": [1]}')
    older = Gold(spark, tmp_path, fmt="drs_mongo", columns={"doc": "string"})
    older.apply_messages([_mongo(1, doc)])
    newer = Gold(spark, tmp_path, fmt="drs_mongo")
    newer.batches = older.batches
    doc2 = _document(2, '"doc": {"b": 2.20}')
    newer.apply_messages([_mongo(2, doc2)])
    types = {f.name: f.dataType.simpleString() for f in newer.mirror().schema.fields}
    assert types["doc"] == "string"
    assert [r["doc"] for r in newer.rows()] == ['{"b":1.10,"a":[1]}', '{"b":2.20}'], "the exact text, as before"
    assert newer.quarantine() == []
