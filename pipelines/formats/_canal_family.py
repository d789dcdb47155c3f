"""The Canal JSON shape, defined once for Alibaba Canal, OMS Canal, DTS Canal Json, DRS JSON / JSON-C and Maxwell.

One Canal message: ``type``, ``database``, ``table``, ``isDdl``, ``sql``, ``pkNames``,
``mysqlType`` / ``sqlType`` (column types), ``data`` (array of full rows), ``old`` (array of
the changed columns' OLD values, same length as ``data``), ``es`` (source time, epoch ms),
``ts`` (write time), and for most vendors ``id`` (ordering). One change per ``data`` row.

Rules shared by every format of the family (format modules override the small hooks):

* UPDATE: after = the ``data`` row (full); before = the ``data`` row overlaid with the ``old``
  row. An ``old`` column that is not in ``data`` is rejected (the before-image would be
  invented): seed 000/001 UPDATE example names ``"string"``, fixed in the fixture.
* Key: ``pkNames``, else configured key; every key column must be in the row image, else
  Reject (seed 000/001 DELETE example names ``int8``/``int16``, which are not columns).
* Types: ``mysqlType`` (lower-cased) first, then ``sqlType`` (java.sql.Types) mapped to the
  nearest MySQL name, then configured types. Values are often text even for numbers.
* ``bigint`` / ``int64`` above 2^63-1: OMS writes ``bigint`` even for ``BIGINT UNSIGNED``
  (seed 000/001 col13 = 10223372036854775806), so such a value is kept as uint64 and the
  column's type is recorded as ``bigint unsigned``. Other out-of-range integers → Reject.
* DATETIME with a zone id (seed 000 type table): the wall clock is kept, the zone dropped.
  TIMESTAMP: epoch ``sec[.fraction]`` or date-time text in ``options['source_time_zone']``
  (default UTC). Invalid dates (``0000-00-00``) → Reject naming the column.

Where the writers differ, a class attribute says how (documented next to each attribute):
``binary_text`` (Base64, or ISO-8859-1 text of the bytes as Alibaba Canal writes them),
``numeric_enum_bit`` (ENUM / SET as index / bit mask, BIT as a number), ``id_orders`` (whether
``id`` is an ordering value or only a batch id), ``key_case_insensitive``, ``table_from_config``
and ``queue_order_option``; plus the older ``delete_row_in``, ``id_required``, ``snapshot_types``.

The single definition (decoder and encoder) of the shape that six formats share; the values, which
Maxwell, AWS DMS and GoldenGate JSON read the same way, are :mod:`pipelines.formats.mysql_rows`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from pipelines.formats.base import (
    Change,
    DecodeContext,
    JsonDecoder,
    Num,
    Reject,
    dumps_exact,
    op_name,
    optional,
    seq_int,
    split_table,
)
from pipelines.formats.mysql_rows import (  # noqa: F401 - served from here as before
    RowCodec,
    base64_from_latin1,
    check_key,
    epoch_ms,
    lower_type,
    mysql_number_text,
    mysql_number_value,
    overlay_before,
    wall_text_in_zone,
)
from pipelines.values import (
    checked_type,
    configured_over,
    family,
    instant_from_epoch,
)

#: java.sql.Types → the nearest MySQL type name (used only where mysqlType is silent).
JDBC_TYPES = {
    -7: "bit",
    -6: "tinyint",
    5: "smallint",
    4: "integer",
    -5: "bigint",
    6: "float",
    7: "real",
    8: "double",
    2: "numeric",
    3: "decimal",
    1: "char",
    12: "varchar",
    -1: "text",
    -15: "nchar",
    -9: "nvarchar",
    -16: "text",
    2005: "clob",
    2011: "nclob",
    -2: "binary",
    -3: "varbinary",
    -4: "longblob",
    2004: "blob",
    91: "date",
    92: "time",
    93: "timestamp",
    16: "boolean",
    2014: "timestamp with time zone",
}
_JDBC_BY_FAMILY = {
    "int": -5,
    "uint64": -5,
    "decimal": 3,
    "float": 8,
    "bool": 16,
    "bytes": 2004,
    "date": 91,
    "datetime": 93,
    "timestamp": 93,
    "time": 92,
}

ROW_TYPES = {"INSERT": "INSERT", "UPDATE": "UPDATE", "DELETE": "DELETE"}
DDL_TYPES = frozenset({"CREATE", "ALTER", "ERASE", "DROP", "RENAME", "CINDEX", "DINDEX", "QUERY", "DDL"})
HEARTBEAT_TYPES = frozenset(
    {
        "MHEARTBEAT",
        "HEARTBEAT",
        "GTID",
        "XACOMMIT",
        "XAROLLBACK",
        "BEGIN",
        "COMMIT",
        "TRANSACTIONBEGIN",
        "TRANSACTIONEND",
    }
)


# ---------------------------------------------------------------- the Canal decoder


class CanalFamilyDecoder(RowCodec, JsonDecoder):
    """Canal JSON; subclasses set the hooks below."""

    #: vendor op names for full-load rows (→ SNAPSHOT) and extra DDL names.
    snapshot_types: ClassVar[frozenset[str]] = frozenset()
    extra_ddl_types: ClassVar[frozenset[str]] = frozenset()
    #: where a DELETE carries its row: "data", "old", or "either" (decided per message).
    delete_row_in: ClassVar[str] = "data"
    #: True: ``id`` is required and is the seq. False (OMS Canal, whose messages carry no ``id``):
    #: seq = (es,), or (es, id) when a producer writes ``id`` too, so every message of the format is
    #: ordered on one scale; a row change without ``es`` is rejected.
    id_required: ClassVar[bool] = True
    #: field holding the transaction id, if the format has one.
    txn_field: ClassVar[str | None] = None
    #: op name written for SNAPSHOT by the encoder (None: written as INSERT).
    snapshot_name: ClassVar[str | None] = None
    #: appended to the reject reason when a DELETE's row is in the other array.
    delete_hint: ClassVar[str] = ""
    #: False (Alibaba Canal): ``id`` is the server's batch id (one per batch, shared by the DDL and
    #: rows of a batch, restarting with the instance), never an order: seq = (es,) (see canal.py).
    id_orders: ClassVar[bool] = True
    #: True: a ``pkNames`` entry the row does not carry names the one row column equal to it ignoring
    #: case (MySQL column names are case-insensitive; Paimon's case-insensitive resource).
    key_case_insensitive: ClassVar[bool] = False
    #: True: a row message naming neither ``database`` nor ``table`` belongs to ``ctx.default_table``.
    table_from_config: ClassVar[bool] = False
    #: True: the format option ``ordering: queue`` orders by queue position only (seq () for every
    #: message), so a stream whose messages carry no ``es`` decodes; without it such a row change is Reject.
    queue_order_option: ClassVar[bool] = False

    # ---------------------------------------------------------------- decode
    def decode_object(self, obj: dict[str, Any], ctx: DecodeContext) -> list[Change]:
        vendor_op = optional(obj, "type", str)
        if not vendor_op:
            raise Reject("missing field 'type'")
        name = op_name(vendor_op).upper()
        db = optional(obj, "database", str) or None
        table = optional(obj, "table", str) or None
        if self.table_from_config and db is None and table is None and ctx.default_table and obj.get("data"):
            db, table = split_table(ctx.default_table)
        queue = self.queue_ordered(ctx)
        common = dict(
            db=db,
            table=table,
            seq=() if queue else self.seq(obj),
            event_time=self.event_time(obj),
            txn=self.txn(obj),
            detail=vendor_op,
        )
        if name in HEARTBEAT_TYPES:
            return [Change("HEARTBEAT", **common)]
        if name in DDL_TYPES or name in self.extra_ddl_types:
            return [Change("DDL", ddl=optional(obj, "sql", str) or None, **common)]
        if name == "TRUNCATE":
            if not table:
                raise Reject("missing field 'table'")
            if not queue:
                self.require_order(common["seq"], vendor_op)
            key = self.key(obj, db, table, ctx)
            return [Change("TRUNCATE", key_columns=key, ddl=optional(obj, "sql", str) or None, **common)]
        if name in ROW_TYPES:
            op = ROW_TYPES[name]
        elif name in self.snapshot_types:
            op = "SNAPSHOT"
        elif obj.get("isDdl") is True:  # a DDL kind we do not list: the message says it is DDL
            return [Change("DDL", ddl=optional(obj, "sql", str) or None, **common)]
        else:
            raise Reject(f"unknown op '{vendor_op}'")
        if not table:
            raise Reject(
                "missing field 'table'" + (" (and no default_table is configured)" if self.table_from_config else "")
            )
        if not queue:
            self.require_order(common["seq"], vendor_op)
        return self._rows(op, obj, ctx, common)

    def _rows(self, op: str, obj: dict[str, Any], ctx: DecodeContext, common: dict[str, Any]) -> list[Change]:
        db, table = common["db"], common["table"]
        data = optional(obj, "data", list)
        old = optional(obj, "old", list)
        key = self.key(obj, db, table, ctx)
        key_source = "pkNames" if obj.get("pkNames") else "configuration"
        types = self.types(obj, db, table, ctx)
        changes = []
        if op == "DELETE":
            rows, where = self.delete_rows(data, old)
            for raw in rows:
                overrides: dict[str, str] = {}
                before = self.canon_row(raw, types, ctx, where, overrides)
                row_key = self.row_key(key, before)
                check_key(row_key, before, key_source)
                changes.append(
                    Change(
                        "DELETE", key_columns=row_key, before=before, col_types={**types, **overrides} or None, **common
                    )
                )
            return changes
        if not data:
            raise Reject(f"{common['detail']} message carries no row in 'data'")
        if op == "UPDATE" and old is not None and len(old) != len(data):
            raise Reject(f"'old' has {len(old)} rows but 'data' has {len(data)}")
        for i, raw in enumerate(data):
            overrides = {}
            after = self.canon_row(raw, types, ctx, "data", overrides)
            before = None
            if op == "UPDATE":
                old_row = self.canon_row(old[i], types, ctx, "old", overrides) if old else {}
                before = overlay_before(after, old_row, "old")
            row_key = self.row_key(key, after)
            check_key(row_key, after, key_source)
            changes.append(
                Change(
                    op,
                    key_columns=row_key,
                    before=before,
                    after=after,
                    col_types={**types, **overrides} or None,
                    **common,
                )
            )
        return changes

    def delete_rows(self, data: list | None, old: list | None) -> tuple[list, str]:
        """Where the deleted rows are (hook: ``delete_row_in``)."""
        if self.delete_row_in == "either":
            if data:
                return data, "data"
            if old:
                return old, "old"
            raise Reject("DELETE carries no row in 'data' or 'old'")
        rows = data if self.delete_row_in == "data" else old
        if not rows:
            other = "old" if self.delete_row_in == "data" else "data"
            raise Reject(
                f"{self.format_id} DELETE carries the deleted row in '{self.delete_row_in}', which is "
                f"empty{self.delete_hint if (data if other == 'data' else old) else ''}"
            )
        return rows, self.delete_row_in

    def key(self, obj: dict[str, Any], db: str | None, table: str | None, ctx: DecodeContext) -> tuple[str, ...]:
        names = optional(obj, "pkNames", list)
        if names:
            if not all(isinstance(n, str) for n in names):
                raise Reject("field 'pkNames' should be an array of column names")
            return tuple(names)
        return ctx.key_columns(db, table)

    def row_key(self, key: tuple[str, ...], image: Mapping[str, Any]) -> tuple[str, ...]:
        """The key columns as this row names them (hook: ``key_case_insensitive``)."""
        if not self.key_case_insensitive or all(col in image for col in key):
            return key
        folded: dict[str, list[str]] = {}
        for col in image:
            folded.setdefault(col.casefold(), []).append(col)
        out = []
        for col in key:
            same = folded.get(col.casefold(), [])
            out.append(col if col in image or len(same) != 1 else same[0])
        return tuple(out)

    def queue_ordered(self, ctx: DecodeContext) -> bool:
        """True where the format option ``ordering: queue`` is set (hook: ``queue_order_option``)."""
        return self.queue_order_option and str(ctx.options.get("ordering", "")).lower() == "queue"

    def types(self, obj: dict[str, Any], db: str | None, table: str | None, ctx: DecodeContext) -> dict[str, str]:
        """Configured types first (they decide, :func:`~pipelines.values.configured_over`), then mysqlType,
        then sqlType (java.sql.Types)."""
        out: dict[str, str] = {}
        sql_types = optional(obj, "sqlType", dict) or {}
        for col, code in sql_types.items():
            if isinstance(code, Num) and code.lstrip("-").isdigit() and int(code) in JDBC_TYPES:
                out[col] = JDBC_TYPES[int(code)]
        for col, name in (optional(obj, "mysqlType", dict) or {}).items():
            if not isinstance(name, str) or isinstance(name, Num):
                raise Reject(f"mysqlType of column '{col}' should be a type name")
            out[col] = lower_type(checked_type(name, col))
        return configured_over(out, ctx.column_types(db, table))

    def seq(self, obj: dict[str, Any]) -> tuple[int, ...]:
        """(id,) where ``id`` is required; else (es,) or (es, id), () without ``es`` (see ``id_required``)."""
        if self.id_required:
            if obj.get("id") is None:
                raise Reject("missing field 'id'")
            return (seq_int(obj["id"], "id"),)
        if obj.get("es") is None:
            return ()
        es = (seq_int(obj["es"], "es"),)
        return es + (seq_int(obj["id"], "id"),) if self.id_orders and obj.get("id") is not None else es

    def require_order(self, seq: tuple[int, ...], vendor_op: str) -> None:
        """A row change or TRUNCATE needs an ordering: () would sort it before every real one."""
        if not seq:
            raise Reject(f"{vendor_op[:40]} without 'es': {self.format_id} orders row changes by it")

    def event_time(self, obj: dict[str, Any]) -> str | None:
        es = obj.get("es")
        if es is None:
            return None
        seq_int(es, "es")
        return instant_from_epoch(es, "ms")

    def txn(self, obj: dict[str, Any]) -> str | None:
        if not self.txn_field:
            return None
        value = obj.get(self.txn_field)
        return str(value) if value not in (None, "") else None

    # ---------------------------------------------------------------- encode
    def encode(self, change: Change, ctx: DecodeContext) -> bytes:
        types = dict(change.col_types or {})
        es = epoch_ms(change.event_time) if change.event_time else None
        msg: dict[str, Any] = {}
        if not self.id_orders:
            msg["id"] = Num("1")  # a batch id, as Canal writes one; the decoder never orders by it
        elif not self.id_required and len(change.seq) == 2:  # (es, id)
            msg["id"] = Num(str(change.seq[1]))
        elif change.seq and not (not self.id_required and es is not None and change.seq == (es,)):
            msg["id"] = Num(str(change.seq[0]))  # OMS Canal decodes it as (es, id): the same order for one es
        msg.update(database=change.db or "", table=change.table or "", type=self._vendor_op(change))
        msg["isDdl"] = change.op == "DDL"
        msg["sql"] = change.ddl or "" if change.op in ("DDL", "TRUNCATE") else ""
        rows_ok = change.op in ("INSERT", "UPDATE", "DELETE", "SNAPSHOT")
        msg["pkNames"] = list(change.key_columns) if rows_ok and change.key_columns else None
        msg["mysqlType"] = types if rows_ok and types else None
        msg["sqlType"] = (
            {c: Num(str(_JDBC_BY_FAMILY.get(family(t), 12))) for c, t in types.items()} if rows_ok and types else None
        )
        data = old = None
        if change.op == "DELETE":
            row = [self.encode_row(change.before or {}, types, ctx)]
            data, old = self.encode_delete(row)
        elif rows_ok:
            after = change.after or {}
            data = [self.encode_row(after, types, ctx)]
            if change.op == "UPDATE":
                before = change.before or {}
                changed = {c: v for c, v in before.items() if c not in after or after[c] != v}
                old = [self.encode_row(changed, types, ctx)]
        msg["data"], msg["old"] = data, old
        if es is not None:
            msg["es"] = Num(str(es))
            msg["ts"] = Num(str(es))
        if self.txn_field and change.txn:
            msg[self.txn_field] = change.txn
        return dumps_exact(msg).encode("utf-8")

    def encode_delete(self, row: list) -> tuple[list | None, list | None]:
        """(data, old) for a DELETE; the default writes the row in ``data``."""
        return (row, None) if self.delete_row_in != "old" else (None, row)

    def _vendor_op(self, change: Change) -> str:
        if change.op in ("INSERT", "UPDATE", "DELETE"):
            return change.op
        if change.op == "SNAPSHOT":
            return self.snapshot_name or "INSERT"
        if change.op == "TRUNCATE":
            return "TRUNCATE"
        if change.detail:
            return change.detail
        return "ALTER" if change.op == "DDL" else "MHEARTBEAT"
