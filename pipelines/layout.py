"""The columns of the warehouse's own tables, declared once.

* Silver: every field of a decoded row with its Spark type, in the stored order
  (:data:`DECODED_FIELDS`); the Arrow schema of ``mapInArrow``, the DDL and the four silver tables'
  columns derive from it. The fields a decoder fills (:data:`CHANGE_FIELDS`) are those of
  :class:`pipelines.formats.base.Change`, read from the dataclass (whose order is that of the JSON
  view of ``lakecdc decode``); each must have a type here.
* Gold: the lineage columns every mirror row carries, and where each comes from in silver.
"""

from __future__ import annotations

from dataclasses import fields

from pipelines.formats.base import Change

#: The warehouse's layers, bottom up; each is written by the stage of the same name.
LAYERS = ("bronze", "silver", "gold")

#: A decoded silver row: (name, Spark type). ``kind`` says which silver table it goes to.
DECODED_FIELDS: tuple[tuple[str, str], ...] = (
    ("kind", "STRING"),
    ("source", "STRING"),
    ("format", "STRING"),
    ("db", "STRING"),
    ("schema", "STRING"),
    ("table", "STRING"),
    ("op", "STRING"),
    ("key_columns", "ARRAY<STRING>"),
    ("before", "MAP<STRING, STRING>"),
    ("after", "MAP<STRING, STRING>"),
    ("changed", "ARRAY<STRING>"),
    ("col_types", "MAP<STRING, STRING>"),
    ("seq", "STRING"),
    ("queue_pos", "STRING"),
    ("change_index", "INT"),
    ("event_time", "STRING"),
    ("txn", "STRING"),
    ("ddl", "STRING"),
    ("detail", "STRING"),
    ("invalid", "MAP<STRING, STRING>"),
    ("reason", "STRING"),
    ("raw_excerpt", "BINARY"),
    ("bronze_position", "STRING"),
    ("ingest_time", "TIMESTAMP"),
)
#: The fields a decoder's :class:`~pipelines.formats.base.Change` fills (the rest come from bronze
#: or from silver itself).
CHANGE_FIELDS = tuple(f.name for f in fields(Change))
#: Bronze columns silver reads (``key``: the Kafka record key, NULL for landing files).
BRONZE_COLUMNS = ("source", "format", "key", "value", "position", "queue_pos", "ingest_time")


def ddl(fields: tuple[tuple[str, str], ...]) -> str:
    """``name TYPE, ...`` with every name quoted."""
    return ", ".join(f"`{name}` {spark_type}" for name, spark_type in fields)


DECODED_DDL = ddl(DECODED_FIELDS)
_TYPES = dict(DECODED_FIELDS)

#: ``changes``: a decoded row but its kind, a DDL statement and a quarantine's reason and excerpt.
CHANGES_COLUMNS = tuple(name for name, _ in DECODED_FIELDS if name not in ("kind", "ddl", "reason", "raw_excerpt"))
#: ``heartbeats`` and ``ddl_log``: where from, the op or the statement, then when (their stored order).
_ORIGIN = ("source", "format", "db", "schema", "table")
_EVENT = ("detail", "seq", "queue_pos", "event_time", "txn", "bronze_position", "ingest_time")
HEARTBEAT_COLUMNS = (*_ORIGIN, "op", *_EVENT)
DDL_COLUMNS = (*_ORIGIN, "ddl", *_EVENT)
#: ``skipped``: a change (or DDL) of a table ``include`` / ``exclude`` skips: where from, which change of
#: its message, why, then when; never its images (pipelines.selection).
SKIPPED_COLUMNS = (*_ORIGIN, "op", "change_index", "reason", *_EVENT)
#: The quarantine table: silver and gold both write it. ``stage`` says which; ``rule`` and
#: ``bad_value`` name the data-quality rule and value that sent a change there.
QUARANTINE_FIELDS: tuple[tuple[str, str], ...] = (
    ("stage", "STRING"),
    *((c, _TYPES[c]) for c in ("source", "format", "db", "table", "reason")),
    ("rule", "STRING"),
    ("bad_value", "STRING"),
    *((c, _TYPES[c]) for c in ("bronze_position", "queue_pos", "raw_excerpt", "ingest_time")),
)
QUARANTINE_COLUMNS = tuple(name for name, _ in QUARANTINE_FIELDS)

#: The lineage of a mirror row: the last change that wrote it, as (column, type, silver column).
LINEAGE: tuple[tuple[str, str, str], ...] = (
    ("_seq", "STRING", "seq"),
    ("_queue_pos", "STRING", "queue_pos"),
    ("_op", "STRING", "op"),
    ("_event_time", "TIMESTAMP", "event_time"),
    ("_source", "STRING", "source"),
    ("_format", "STRING", "format"),
    ("_position", "STRING", "bronze_position"),
    ("_ingest_time", "TIMESTAMP", "ingest_time"),
)
LINEAGE_DDL = tuple((name, spark_type) for name, spark_type, _ in LINEAGE)
LINEAGE_COLUMNS = tuple(name for name, _, _ in LINEAGE)
LINEAGE_SOURCES = tuple((name, source) for name, _, source in LINEAGE)
#: The identity of a row of a table without a key (multiset): the change that inserted it.
ROW_ID_COLUMN = "_row_id"
#: The columns of a mirror with ``deletes: soft``: a DELETE keeps the row, marked deleted as of its event time.
SOFT_DELETE_DDL: tuple[tuple[str, str], ...] = (("_deleted", "BOOLEAN"), ("_deleted_at", "TIMESTAMP"))
SOFT_DELETE_COLUMNS = tuple(name for name, _ in SOFT_DELETE_DDL)
SYSTEM_COLUMNS = (*LINEAGE_COLUMNS, ROW_ID_COLUMN, *SOFT_DELETE_COLUMNS)

for _columns in (CHANGE_FIELDS, HEARTBEAT_COLUMNS, DDL_COLUMNS, SKIPPED_COLUMNS):
    assert set(_columns) <= set(_TYPES), set(_columns) - set(_TYPES)
