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
