"""Delta MERGE, UPDATE and DELETE, written once for both kinds of session.

Delta's Python API (``DeltaTable``) drives a classic session's JVM. Over Spark Connect (Databricks serverless,
Unity Catalog standard access mode) the same API needs Delta's Connect plugin on the server, which open-source
servers rarely have; ``MERGE INTO``, ``UPDATE`` and ``DELETE`` SQL need nothing but Delta's session extension.
So gold states each statement once, as SQL texts (conditions and assignments), and :meth:`DeltaMerge.execute`,
:func:`update_rows` and :func:`delete_rows` run it through the API on a classic session and as SQL over Connect.
Both return the same metrics (``num_affected_rows``, ``num_updated_rows``, ...), and both honour the session's
``txnAppId``/``txnVersion`` stamp (:mod:`pipelines.delta_writes`).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pipelines.spark_logs import is_connect

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Row, SparkSession

    from pipelines.warehouse import TableRef

#: The kinds of MERGE clause: a matched row updated or deleted, an unmatched source row inserted.
UPDATE, DELETE, INSERT = "update", "delete", "insert"


@dataclass
class DeltaMerge:
    """``MERGE INTO target AS t USING source AS s ON on`` and its clauses, in order. Each clause is (kind,
    condition or None, assignments: column → SQL expression; column names as SQL, quoted where needed)."""

    target: TableRef
    source: DataFrame
    on: str
    clauses: list[tuple[str, str | None, dict[str, str]]] = field(default_factory=list)

    def when_matched_update(self, condition: str | None, assignments: dict[str, str]) -> DeltaMerge:
        self.clauses.append((UPDATE, condition, assignments))
        return self

    def when_matched_delete(self, condition: str | None) -> DeltaMerge:
        self.clauses.append((DELETE, condition, {}))
        return self

    def when_not_matched_insert(self, condition: str | None, values: dict[str, str]) -> DeltaMerge:
        self.clauses.append((INSERT, condition, values))
        return self

    def execute(self, spark: SparkSession) -> list[Row]:
        """Run the MERGE: its metrics row, or no row where Delta skipped it as already committed."""
        if is_connect(spark):
            return _with_view(spark, self.source, lambda view: spark.sql(self.sql(view)).collect())
        merge = self.target.delta(spark).alias("t").merge(self.source.alias("s"), self.on)
        for kind, condition, assignments in self.clauses:
            if kind == UPDATE:
                merge = merge.whenMatchedUpdate(condition=condition, set=assignments)
            elif kind == DELETE:
                merge = merge.whenMatchedDelete(condition=condition)
            else:
                merge = merge.whenNotMatchedInsert(condition=condition, values=assignments)
        return merge.execute().collect()

    def sql(self, source_view: str) -> str:
        """The statement as SQL, reading the source from the temporary view ``source_view``."""
        parts = [f"MERGE INTO {self.target.sql} AS t USING {source_view} AS s ON {self.on}"]
        for kind, condition, assignments in self.clauses:
            when = ("WHEN NOT MATCHED" if kind == INSERT else "WHEN MATCHED") + (
                f" AND ({condition})" if condition else ""
            )
            if kind == UPDATE:
                parts.append(f"{when} THEN UPDATE SET {_assign(assignments)}")
            elif kind == DELETE:
                parts.append(f"{when} THEN DELETE")
            else:
                columns, values = ", ".join(assignments), ", ".join(assignments.values())
                parts.append(f"{when} THEN INSERT ({columns}) VALUES ({values})")
        return "\n".join(parts)


def update_rows(spark: SparkSession, target: TableRef, condition: str, assignments: dict[str, str]) -> None:
    """``UPDATE target SET assignments WHERE condition``."""
    if is_connect(spark):
        spark.sql(f"UPDATE {target.sql} SET {_assign(assignments)} WHERE {condition}").collect()
    else:
        target.delta(spark).update(condition=condition, set=assignments)


def delete_rows(spark: SparkSession, target: TableRef, condition: str) -> None:
    """``DELETE FROM target WHERE condition``."""
    if is_connect(spark):
        spark.sql(f"DELETE FROM {target.sql} WHERE {condition}").collect()
    else:
        target.delta(spark).delete(condition)


def _assign(assignments: dict[str, str]) -> str:
    return ", ".join(f"{column} = {value}" for column, value in assignments.items())


def _with_view(spark: SparkSession, frame: DataFrame, run):
    """``run(view)`` with ``frame`` as a temporary view of a name no other statement uses, dropped after."""
    view = f"lakecdc_source_{uuid.uuid4().hex}"
    frame.createOrReplaceTempView(view)
    try:
        return run(view)
    finally:
        spark.catalog.dropTempView(view)
