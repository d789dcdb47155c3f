"""The order in which gold applies changes: the struct column ``ord``.

``ord`` is ``(seq, queue_pos, change_index, step)`` and Spark compares structs field by field:

* ``seq``: the format's own sequence as sortable text (``silver.seq_text``: zero-padded numbers
  joined by ``.``). An empty sequence (full-load rows) sorts before every incremental change, and a
  sequence sorts before the longer ones it prefixes (``"00..1" < "00..1.00..2"``);
* ``queue_pos``: the queue's own order, the tie-break between messages;
* ``change_index``: the place of the change in its message;
* ``step``: :data:`CHANGE_STEP` for a change itself; :data:`DELETE_STEP` for the delete half that
  goes just before it (the delete of a key a change moves away from; the removal of a multiset
  UPDATE's before-image).

Until the struct, ``ord`` was the text ``seq␁queue_pos␁change_index(6 digits)␁step`` with a
separator below every digit and ``.``; the struct sorts the same (tests/spark/test_gold_order.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pipelines.sql import lit

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

#: The column that orders a batch's changes.
ORD = "ord"
#: ``ord``'s fields and their Spark types, in comparison order.
ORD_FIELDS: tuple[tuple[str, str], ...] = (
    ("seq", "string"),
    ("queue_pos", "string"),
    ("change_index", "int"),
    ("step", "int"),
)
#: The step of a change itself.
CHANGE_STEP = 1
#: The step of the delete that goes just before a change (its moved key, its multiset before-image).
DELETE_STEP = 0


def with_order(changes: DataFrame) -> DataFrame:
    """``changes`` with ``ord``: vendor sequence, queue position, place in the message, step."""
    from pyspark.sql import functions as F

    return changes.withColumn(
        ORD,
        F.struct(
            F.col("seq").alias("seq"),
            F.col("queue_pos").alias("queue_pos"),
            F.col("change_index").cast("int").alias("change_index"),
            F.lit(CHANGE_STEP).alias("step"),
        ),
    )


def delete_first(ord_col: Column | str = ORD) -> Column:
    """The ``ord`` of the delete half of a change: just before the change itself."""
    from pyspark.sql import functions as F

    column = F.col(ord_col) if isinstance(ord_col, str) else ord_col
    return column.withField("step", F.lit(DELETE_STEP))


def ord_literal(value: Mapping[str, Any]) -> Column:
    """An ``ord`` as a literal struct, from its fields as collected (``to_json``: a NULL field is absent)."""
    from pyspark.sql import functions as F

    return F.struct(*[F.lit(value.get(name)).cast(spark_type).alias(name) for name, spark_type in ORD_FIELDS])


def ord_sql(value: Mapping[str, Any]) -> str:
    """An ``ord`` as a SQL literal struct, from its fields as collected (``to_json``: a NULL field is absent)."""
    fields = []
    for name, spark_type in ORD_FIELDS:
        v = value.get(name)
        text = "NULL" if v is None else (lit(str(v)) if spark_type == "string" else str(int(v)))
        fields.append(f"{lit(name)}, CAST({text} AS {spark_type})")
    return f"named_struct({', '.join(fields)})"


#: SQL comparator of two elements ``l``, ``r`` of an array of structs with ``ord``, for ``array_sort``.
BY_ORD = "(l, r) -> CASE WHEN l.ord < r.ord THEN -1 WHEN l.ord > r.ord THEN 1 ELSE 0 END"
