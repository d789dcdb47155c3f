"""AWS DMS JSON to Kinesis Data Streams or Kafka (not in the seeds; AWS DMS User Guide, "Using Apache Kafka
as a target" / "Kinesis as a target"; real messages: Apache Paimon ``kafka/aws-dms/**``, in
tests/fixtures/real/aws_dms).

One message per row: ``data`` (the row after the change; for a delete, the deleted row) and
``metadata``: ``timestamp`` (when DMS built the message), ``record-type`` ``data`` | ``control``,
``operation``, ``partition-key-type``, ``schema-name``, ``table-name``, and with
``IncludeTransactionDetails`` also ``transaction-id``, ``transaction-record-id``, ``commit-timestamp``,
``stream-position``, ``prev-transaction-id``, ``prev-transaction-record-id``.

Quirks:
* ``load`` (full load) → SNAPSHOT, with no sequence (it loses to any change of the stream).
* Control records: ``create-table``, ``drop-table``, ``add-column``, ``drop-column``, ``rename-column``,
  ``column-type-change``, ``change-columns`` on a source table → DDL (``control``, with
  ``IncludeControlDetails`` a ``table-def``, kept as the DDL text); control records on DMS's own tables
  (``awsdms_apply_exceptions``, ...) and unknown ones → HEARTBEAT; a control record that truncates is
  quarantined (it carries no position, so it could not be ordered against the rows it would remove).
* Before-image (UPDATE only): ``BeforeImageSettings`` writes it as its own attribute (``FieldName``,
  option ``before_image_field``, default ``before-image``); the ``add-before-image-columns`` mapping
  rule writes it into ``data`` as prefixed columns (``column-prefix`` ``BI_``, options
  ``before_image_prefix`` / ``before_image_suffix``; a prefixed column counts only if its base name
  is a column of ``data`` too; ``before_image_prefix: ""`` turns this off). ``ColumnFilter`` pk-only
  gives a key-only before-image, enough to move a changed key; a table without a key needs ``all``.
* Key: not in the message (``partition-key-type`` primary-key hashes the values, it names no columns):
  configured key (``tables.<t>.key``), else the table is keyless (a multiset).
* Ordering: ``transaction-id`` is not monotonic; ``stream-position`` is source specific and not
  documented. lakecdc reads the shapes whose order it knows: MySQL ``<binlog>.<n>:<offset>:...``
  → (binlog file number, offset, ``transaction-record-id``) (the binlog is in commit order);
  PostgreSQL ``<hi>/<lo>...`` (an LSN) → (LSN, ``transaction-record-id``). Any other source, or a
  stream without transaction details (the default, and Paimon's resources): queue order (seq ()).
* NULL columns are left out of ``data`` unless ``IncludeNullAndEmpty`` is on, so a column missing
  from a full row is NULL (``schemaless``). Binary values are hexadecimal, with or without ``0x``
  (``NoHexPrefix``). No types in the message: configured types decide, else the exact JSON text.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from typing import Any

from pipelines.errors import InvalidValue
from pipelines.formats._canal_family import RowCodec, check_key
from pipelines.formats.base import (
    Change,
    DecodeContext,
    JsonDecoder,
    Num,
    Reject,
    dumps_exact,
    optional,
    require,
    seq_int,
)
from pipelines.values import base64_from_hex, canon_instant

_ROW_OPS = {"load": "SNAPSHOT", "insert": "INSERT", "update": "UPDATE", "delete": "DELETE"}
_DDL_OPS = frozenset(
    {
        "create-table",
        "drop-table",
        "rename-table",
        "add-column",
        "drop-column",
        "rename-column",
        "column-type-change",
        "change-columns",
    }
)
#: DMS's own control tables (apply exceptions, history, status, suspended tables, validation).
DMS_TABLE_PREFIX = "awsdms_"
_MYSQL_POSITION = re.compile(r"^[^:]*\.(\d{1,10}):(\d{1,20}):", re.ASCII)
_LSN_POSITION = re.compile(r"^([0-9A-Fa-f]{1,8})/([0-9A-Fa-f]{1,8})(?![0-9A-Fa-f])", re.ASCII)


def stream_position_seq(position: str, record_id: int) -> tuple[int, ...]:
    """The order of a ``stream-position`` whose shape is known (MySQL binlog, PostgreSQL LSN), else ()."""
    m = _MYSQL_POSITION.match(position)
    if m:
        return (int(m.group(1)), seq_int(m.group(2), "stream-position (binlog offset)"), record_id)
    m = _LSN_POSITION.match(position)
    if m:
        return ((int(m.group(1), 16) << 32) | int(m.group(2), 16), record_id)
    return ()


class AwsDmsDecoder(RowCodec, JsonDecoder):
    format_id = "aws_dms"
    seeds = "none (AWS DMS User Guide, Kafka / Kinesis targets; real: paimon kafka/aws-dms)"
    ordering = (
        "`stream-position`: MySQL (binlog file, offset, transaction-record-id), PostgreSQL (LSN, "
        "transaction-record-id); other sources and streams without transaction details: queue order"
    )
    table_and_key = "`metadata.schema-name` / `table-name`; key from configuration (the message names none)"
    type_mapping = "no types in the message: configured column types, else exact JSON text; binary as hex"
    quirks = (
        "load → SNAPSHOT; control records → DDL (source tables) or HEARTBEAT (awsdms_* tables)",
        "before-image from BeforeImageSettings (`before-image`) or BI_ columns in `data`",
        "NULL columns left out of `data` (IncludeNullAndEmpty off): missing = NULL",
        "`transaction-id` is not an order; unknown `stream-position` shapes: queue order",
    )
    schemaless = True

    def decode_object(self, obj: dict[str, Any], ctx: DecodeContext) -> list[Change]:
        meta = require(obj, "metadata", dict)
        record_type = require(meta, "record-type", str)
        operation = require(meta, "operation", str)
        db = optional(meta, "schema-name", str) or None
        table = optional(meta, "table-name", str) or None
        common: dict[str, Any] = dict(db=db, table=table, txn=_text(meta.get("transaction-id")), detail=operation)
        if record_type == "control":
            return [self._control(obj, operation, common)]
        if record_type != "data":
            raise Reject(f"unknown record-type {record_type[:40]!r}")
        op = _ROW_OPS.get(operation)
        if op is None:
            raise Reject(f"unknown data operation {operation[:40]!r}")
        if not table:
            raise Reject("missing field 'metadata.table-name'")
        common["event_time"] = self._commit_time(meta) if op != "SNAPSHOT" else None
        common["seq"] = self._seq(meta) if op != "SNAPSHOT" else ()
        types = {k: v.lower() for k, v in ctx.column_types(db, table).items()}
        key = ctx.key_columns(db, table)
        data = dict(require(obj, "data", dict))
        prefixed = self._split_prefixed(data, ctx)
        overrides: dict[str, str] = {}
        row = self.canon_row(data, types, ctx, "data", overrides)
        check_key(key, row, "configuration")
        for col in types:  # a configured column left out of the row is NULL (IncludeNullAndEmpty off)
            row.setdefault(col, None)
        if op == "DELETE" and not row:
            raise Reject("delete carries an empty 'data' row and no columns are configured: no row to find")
        before = after = None
        if op == "DELETE":
            before = row
        else:
            after = row
        if op == "UPDATE":
            field = str(ctx.options.get("before_image_field", "before-image"))
            image = {**(optional(obj, field, dict) or {}), **prefixed}
            before = self.canon_row(image, types, ctx, field, overrides) or None
            if not key and before is None:
                raise Reject(
                    "UPDATE of a table without a key carries no before-image, so the row it changes cannot be "
                    "found (BeforeImageSettings with ColumnFilter 'all', or a configured key)"
                )
        return [
            Change(op, key_columns=key, before=before, after=after, col_types={**types, **overrides} or None, **common)
        ]

    def _control(self, obj: dict[str, Any], operation: str, common: dict[str, Any]) -> Change:
        table = common["table"]
        control = optional(obj, "control", dict)
        if "truncate" in operation.lower():
            raise Reject(
                f"control record {operation[:40]!r}: it carries no stream position, so lakecdc cannot order "
                "it against the rows it would remove"
            )
        if table and not table.startswith(DMS_TABLE_PREFIX) and operation in _DDL_OPS:
            return Change("DDL", ddl=dumps_exact(control) if control else None, **common)
        detail = f"control {operation} {table}" if table else f"control {operation}"
        return Change("HEARTBEAT", **{**common, "detail": detail})

    def _split_prefixed(self, data: dict[str, Any], ctx: DecodeContext) -> dict[str, Any]:
        """Remove the ``add-before-image-columns`` columns from ``data``; return them by base name."""
        prefix = str(ctx.options.get("before_image_prefix", "BI_"))
        suffix = str(ctx.options.get("before_image_suffix", ""))
        if not prefix and not suffix:
            return {}
        out = {}
        for col in list(data):
            if len(col) > len(prefix) + len(suffix) and col.startswith(prefix) and col.endswith(suffix):
                base = col[len(prefix) : len(col) - len(suffix)]
                if base in data:
                    out[base] = data.pop(col)
        return out

    @staticmethod
    def _seq(meta: Mapping[str, Any]) -> tuple[int, ...]:
        position = optional(meta, "stream-position", str)
        if not position:
            return ()
        record = meta.get("transaction-record-id")
        record_id = seq_int(record, "transaction-record-id") if record is not None else 0
        return stream_position_seq(position, record_id)

    @staticmethod
    def _commit_time(meta: Mapping[str, Any]) -> str | None:
        text = optional(meta, "commit-timestamp", str)
        if not text:
            return None
        try:
            return canon_instant(text)
        except (Reject, InvalidValue) as exc:
            raise Reject(f"field 'commit-timestamp': {exc}") from None

    # ---------------------------------------------------------------- values
    def decode_bytes(self, value: Any) -> str:
        """DMS writes binary as hexadecimal, ``0x``-prefixed unless ``NoHexPrefix``."""
        return base64_from_hex(str(value))

    def encode_bytes(self, b64: str) -> Any:
        return "0x" + base64.b64decode(b64).hex().upper()

    def encode_timestamp(self, instant: str, ctx: DecodeContext) -> str:
        return instant

    # ---------------------------------------------------------------- encode (simulator)
    def encode(self, change: Change, ctx: DecodeContext) -> bytes:
        meta: dict[str, Any] = {
            "timestamp": change.event_time or "1970-01-01T00:00:00Z",
            "record-type": "data",
            "operation": "",
            "partition-key-type": "schema-table",
            "schema-name": change.db or "",
            "table-name": change.table or "",
        }
        if change.op in ("DDL", "HEARTBEAT"):
            meta.update({"record-type": "control", "partition-key-type": "task-id"})
            meta["operation"] = change.detail or ("add-column" if change.op == "DDL" else "create-table")
            return dumps_exact({"control": {}, "metadata": meta}).encode("utf-8")
        ops = {v: k for k, v in _ROW_OPS.items()}
        if change.op not in ops:
            raise ValueError(f"aws_dms has no message for {change.op}")
        meta["operation"] = ops[change.op]
        if change.seq:
            if len(change.seq) != 2:
                raise ValueError(f"no stream position for seq {change.seq}")
            binlog = f"mysql-bin-changelog.{change.seq[0]:06d}"
            meta["transaction-id"] = Num(change.txn) if change.txn and change.txn.isdigit() else Num("1")
            meta["transaction-record-id"] = Num("1")
            meta["commit-timestamp"] = change.event_time
            meta["stream-position"] = f"{binlog}:{change.seq[1]}:-1:{change.seq[1] + 1}:1:{binlog}:{change.seq[1]}"
        types = dict(change.col_types or {})
        image = change.before if change.op == "DELETE" else change.after
        msg: dict[str, Any] = {
            "data": {c: v for c, v in self.encode_row(image or {}, types, ctx, numbers=True).items() if v is not None}
        }
        if change.op == "UPDATE" and change.before:
            msg[str(ctx.options.get("before_image_field", "before-image"))] = self.encode_row(
                change.before, types, ctx, numbers=True
            )
        msg["metadata"] = meta
        return dumps_exact(msg).encode("utf-8")


def _text(value: Any) -> str | None:
    return None if value is None or isinstance(value, (dict, list, bool)) else str(value) or None


DECODER = AwsDmsDecoder()
