"""The fold per key hands the MERGE named columns: ``vals`` and ``written`` have a field per data
column, named as the column is, whatever the name (the mirror may not take every such name, the
fold must)."""

from __future__ import annotations

from pipelines.gold.decide import fold_inputs
from pipelines.gold.fold import TOMB_DDL, VALUES, WRITTEN, fold_per_key, struct_field
from pipelines.gold.keyed import merge_source
from pipelines.gold.lookups import MIRROR
from pipelines.gold.order import with_order
from pipelines.gold.schema import MirrorShape

HOSTILE = ["a`b", "c d", "e.f", "$% ^,& *(", "g'h\\"]


def test_the_fold_names_every_column_however_hostile(spark):
    columns = {"id": "bigint", **{c: "int" for c in HOSTILE}}
    full = {"id": "1", **{c: str(i) for i, c in enumerate(HOSTILE)}}
    partial = {"id": "1", "c d": "20", "$% ^,& *(": None}
    rows = [  # seq, op, after, changed
        ("01", "INSERT", full, None),
        ("02", "UPDATE", partial, list(partial)),
    ]
    frame = spark.createDataFrame(
        [
            (seq, "f#1", i, op, after, None, changed, None, "s", "oms_canal", "p", None)
            for i, (seq, op, after, changed) in enumerate(rows)
        ],
        "seq STRING, queue_pos STRING, change_index INT, op STRING, after MAP<STRING,STRING>, "
        "before MAP<STRING,STRING>, changed ARRAY<STRING>, event_time STRING, source STRING, format STRING, "
        "bronze_position STRING, ingest_time TIMESTAMP",
    )
    keyed = with_order(frame).selectExpr(
        f"'m' AS {MIRROR}",
        "'[\"1\"]' AS k",
        "map('id', after['id']) AS kimg",
        "false AS prev_live",
        "false AS s_live",
        "CAST(NULL AS map<string,bigint>) AS s_vh",
        "CAST(NULL AS STRING) AS s_seq",
        "CAST(NULL AS STRING) AS s_img_seq",
        f"CAST(NULL AS {TOMB_DDL}) AS tomb",
        "*",  # a key the mirror never held
    )
    folded = merge_source(fold_per_key(fold_inputs(keyed, 0)), ("id",), MirrorShape(columns=columns))
    [row] = folded.selectExpr(
        "live",
        "_seq",
        "_op",
        *[f"{struct_field(VALUES, c)} AS v{i}" for i, c in enumerate(HOSTILE)],
        *[f"{struct_field(WRITTEN, c)} AS w{i}" for i, c in enumerate(HOSTILE)],
    ).collect()
    assert (row["live"], row["_seq"], row["_op"]) == (True, "02", "UPDATE")
    assert [row[f"v{i}"] for i in range(len(HOSTILE))] == [0, 20, 2, None, 4], "the partial UPDATE overlays"
    assert all(row[f"w{i}"] for i in range(len(HOSTILE))), "a full image was seen: every column is written"
    assert folded.select(f"{VALUES}.*").columns == HOSTILE


def test_the_fold_of_whole_images_is_each_keys_last_change(spark):
    """``whole``: one ``max_by`` per key gives what folding every change does, for keys inserted, updated, deleted,
    deleted and inserted again, lying under a tombstone (``buried``), held before (``held``)."""
    changes = [  # key, seq, op, after, the key's state before: live, its tombstone's sequence
        ("1", "03", "UPDATE", {"id": "1", "v": "c"}, True, None),
        ("1", "01", "UPDATE", {"id": "1", "v": "a"}, True, None),
        ("1", "02", "UPDATE", {"id": "1", "v": "b"}, True, None),
        ("2", "05", "DELETE", None, True, None),
        ("2", "04", "UPDATE", {"id": "2", "v": "x"}, True, None),
        ("3", "06", "DELETE", None, False, None),
        ("3", "07", "INSERT", {"id": "3", "v": "y"}, False, None),
        ("4", "08", "INSERT", {"id": "4", "v": "z"}, False, "09"),  # older than the key's tombstone
        ("5", "10", "INSERT", {"id": "5", "v": "w"}, False, None),
    ]
    frame = spark.createDataFrame(
        [
            (key, seq, "f#1", i, op, after, {"id": key, "v": "old"} if op == "DELETE" else None, live, tomb)
            for i, (key, seq, op, after, live, tomb) in enumerate(changes)
        ],
        "key STRING, seq STRING, queue_pos STRING, change_index INT, op STRING, after MAP<STRING,STRING>, "
        "before MAP<STRING,STRING>, s_live BOOLEAN, tomb_seq STRING",
    ).selectExpr(
        "*", "CAST(NULL AS array<string>) AS changed", "CAST(NULL AS STRING) AS event_time", "'s' AS source",
        "'oms_canal' AS format", "concat('p', change_index) AS bronze_position", "TIMESTAMP'2026-12-07 10:00:00' AS ingest_time",
    )  # fmt: skip
    keyed = with_order(frame).selectExpr(
        f"'m' AS {MIRROR}",
        "to_json(array(key)) AS k",
        "map('id', key) AS kimg",
        "s_live AS prev_live",
        "CASE WHEN s_live THEN map('v', 7L) END AS s_vh",
        "CASE WHEN s_live THEN '00' END AS s_seq",
        "CAST(NULL AS STRING) AS s_img_seq",
        f"CAST(CASE WHEN tomb_seq IS NOT NULL THEN named_struct('seq', tomb_seq, 'event_time', "
        f"CAST(NULL AS TIMESTAMP), 'queue_pos', 'f#0') END AS {TOMB_DDL}) AS tomb",
        "*",
    )
    inputs = fold_inputs(keyed, 0)
    folded = fold_per_key(inputs).orderBy("k").collect()
    whole = fold_per_key(inputs, whole=True).orderBy("k").collect()
    assert [r.asDict(recursive=True) for r in whole] == [r.asDict(recursive=True) for r in folded]
    by_key = {r["kimg"]["id"]: r for r in whole}
    assert by_key["1"]["st"]["img"]["v"] == "c", "the last UPDATE by sequence, not by arrival"
    assert not by_key["2"]["st"]["live"] and by_key["2"]["st"]["img"] == {}
    assert by_key["3"]["st"]["live"] and by_key["3"]["first_prev_live"] is False
    assert by_key["4"]["buried"] and not by_key["4"]["st"]["live"], "an insert older than its key's tombstone"
    assert by_key["1"]["held"] == {"v": 7}
