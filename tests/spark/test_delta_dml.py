"""Delta DML stated once, run two ways (pipelines.delta_dml): Delta's Python API on a classic session and the
SQL text a Spark Connect session runs. Both run here against real Delta tables, and must leave the same rows,
return the same metrics and honour the same ``txnAppId`` stamp."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.spark

ROWS = [(1, "a", False), (2, "b", False), (3, "c", False), (4, "d", True)]
SOURCE = [(1, "A", True), (2, None, False), (5, "E", True), (6, "F", False), (4, "D", True)]


def _statements(spark, ref):
    from pipelines.delta_dml import DeltaMerge, delete_rows, update_rows

    source = spark.createDataFrame(SOURCE, "id INT, v STRING, live BOOLEAN")
    merge = DeltaMerge(ref, source, "t.`id` <=> s.`id`")
    merge.when_matched_delete("NOT s.live").when_matched_update("s.live AND t.gone", {"`v`": "'revived'"})
    merge.when_matched_update("s.live", {"`v`": "s.v", "gone": "false"})
    merge.when_not_matched_insert("s.live", {"`id`": "s.`id`", "`v`": "s.v", "gone": "false"})
    metrics = merge.execute(spark)
    update_rows(spark, ref, "id >= 5", {"`v`": "concat(v, '!')"})
    delete_rows(spark, ref, "id = 3")
    return [row.asDict() for row in metrics]


def _table(spark, tmp_path, name):
    from pipelines.warehouse import TableRef

    ref = TableRef(path=str(tmp_path / name))
    spark.createDataFrame(ROWS, "id INT, v STRING, gone BOOLEAN").write.format("delta").save(ref.path)
    return ref


def _rows(spark, ref):
    return sorted(tuple(r) for r in ref.read(spark).collect())


def test_the_api_and_the_sql_leave_the_same_rows_and_metrics(spark, tmp_path, monkeypatch):
    from pipelines import delta_dml

    api = _table(spark, tmp_path, "api")
    api_metrics = _statements(spark, api)
    monkeypatch.setattr(delta_dml, "is_connect", lambda _spark: True)  # the path a Connect session takes
    sql = _table(spark, tmp_path, "sql")
    sql_metrics = _statements(spark, sql)
    assert _rows(spark, sql) == _rows(spark, api) == [(1, "A", False), (4, "revived", True), (5, "E!", False)]
    assert sql_metrics == api_metrics
    assert api_metrics[0]["num_deleted_rows"] == 1 and api_metrics[0]["num_inserted_rows"] == 1


def test_the_sql_honours_the_batch_stamp_and_leaves_no_view(spark, tmp_path, monkeypatch):
    from pipelines import delta_dml
    from pipelines.delta_writes import idempotent_dml

    monkeypatch.setattr(delta_dml, "is_connect", lambda _spark: True)
    ref = _table(spark, tmp_path, "stamped")
    with idempotent_dml(spark, "dml-test", 7):
        _statements(spark, ref)
    once = _rows(spark, ref)
    with idempotent_dml(spark, "dml-test", 7):  # the same batch again: Delta skips each statement
        assert _statements(spark, ref) == []
    assert _rows(spark, ref) == once
    assert not [t for t in spark.catalog.listTables() if t.name.startswith("lakecdc_source_")]
