"""Huawei Cloud DRS, MongoDB (DDS) to Kafka, JSON (seed 003, MongoDB section).

Shape: ``id`` (DRS sequence), ``op`` (INSERT/UPDATE/DELETE/DDL), ``db``, ``coll``,
``value`` / ``where`` (documents as MongoDB shell-style extended JSON *text*, e.g.
``{"_id": ObjectId("64650cf6..."), "n": NumberLong(5)}``), ``recordType``
(insert/update/replace/doc), ``es`` (commit ms), ``clusterTime`` ("seconds:increment").

Decisions (each pinned by a test in tests/unit/test_fmt_drs_mongo.py):

* The mirror is keyed by ``_id``; each top-level field is a column. ``_id`` and every other
  top-level value take canonical text: ObjectId → its 24-digit lower-case hex, NumberLong /
  NumberInt → integer, NumberDecimal → decimal text, ISODate / Date → UTC instant ``...Z``,
  BinData → Base64, numbers → exact text, booleans → true/false. Nested documents and arrays
  → exact JSON text, with special values written as relaxed extended JSON v2
  (``{"$oid": ...}``, ``{"$date": ...}``, ``{"$numberLong": ...}`` ...). Canonical extended JSON
  input (``{"$oid": "..."}``) is read the same way. A value BSON cannot hold is refused, not read as
  something else (issue 35): a constructor with the wrong number of arguments (``NumberLong(1, 2)``), a
  ``$numberDouble`` that is neither a finite number nor ``Infinity`` / ``-Infinity`` / ``NaN``, a
  BinData subtype outside 0..255, a UUID not of 32 hex digits, a Timestamp part outside 0..2^32-1.
  ``{"$numberDouble": "NaN"}`` in a sub-document stays that object in the document's text (relaxed
  extended JSON v2 writes a non-finite double so; JSON has no such number), never the string ``"NaN"``.
  col_types comes from configuration (a collection
  has no schema; configured types are applied to top-level scalar values), and types a sub-document
  ``object`` and an array ``array`` where configuration types the field not: a mirror holds them as VARIANT.
* INSERT: after = the document. UPDATE recordType ``replace``: after = the whole new document
  (changed None); columns configured for the collection but absent from it become NULL
  (a replace removes them). UPDATE recordType ``update``: ``$set`` fields carry their values,
  ``$unset`` fields become NULL, after = {_id, those}, changed = their names (partial image);
  the MongoDB 5+ ``{"$v": 2, "diff": {"u"/"i": set, "d": unset}}`` form is read the same way.
  A dotted path (``a.b``), a nested diff or any other operator cannot be applied to a
  top-level-column mirror: Reject. before = the ``where`` document (its ``_id``).
* DELETE: the seed's remove example carries the deleted ``_id`` in ``value`` (where null):
  before = value, else where. recordType ``doc`` on DELETE means a document (not a view)
  was removed (seed 003). recordType ``doc`` on INSERT, and op INIT, are full-sync rows →
  SNAPSHOT (the seed does not show full sync; this reading is ours).
* Ordering: seq = (clusterTime seconds, clusterTime increment, id): the oplog time first, the
  DRS sequence breaks ties. Both are required on row changes. ``es`` (13-digit ms, "commit
  time") is event_time; in the seed it differs from clusterTime by hours (a zone shift on
  one of them), which is why it is not used for ordering.

MongoDB's shell-style extended JSON parser and the document → image rules are in
:mod:`pipelines.formats.mongo_images` (Debezium's MongoDB connector shares them); the writer is here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pipelines import values
from pipelines.formats.base import Change, DecodeContext, JsonDecoder, Num, Reject, dumps_exact, optional, seq_int
from pipelines.formats.mongo_images import (
    HEX24,
    ShellJsonParser,
    column_value,
    document_col_types,
    image,
    parse_document,
    update_fields,
)
from pipelines.values.times import epoch_ms_text

__all__ = ["DECODER", "DrsMongoDecoder", "column_value", "parse_document"]

KEY = ("_id",)


# ---------------------------------------------------------------- decoder


class DrsMongoDecoder(JsonDecoder):
    format_id = "drs_mongo"
    schemaless = True  # a document may lack any field (seed 003): gold never reads that as DROP COLUMN
    seeds = "003"
    ordering = "clusterTime 'seconds:increment' then the DRS id: (seconds, increment, id)"
    table_and_key = "db, coll; the key is always _id"
    type_mapping = (
        "top-level fields are columns: ObjectId → hex, NumberLong/Int → int, NumberDecimal → "
        "decimal, ISODate → UTC instant, BinData → Base64; nested values → exact relaxed "
        "extended JSON text, typed object / array (VARIANT in a mirror); configured types applied when given"
    )
    quirks = (
        'value/where are MongoDB shell extended JSON text (ObjectId("..."), NumberLong ...) (seed 003)',
        "recordType update: $set → values, $unset → NULL, partial image; replace: whole document (seed 003)",
        "DELETE carries the removed _id in value, where null (seed 003)",
        "clusterTime 'sec:inc' orders; es is the commit time in ms (seed 003)",
    )

    def decode_object(self, obj: dict[str, Any], ctx: DecodeContext) -> list[Change]:
        vendor_op = optional(obj, "op", str)
        if vendor_op is None:
            raise Reject("missing field 'op'")
        record_type = optional(obj, "recordType", str)
        db = optional(obj, "db", str)
        coll = optional(obj, "coll", str)
        es = obj.get("es")
        common = dict(
            db=db,
            table=coll,
            event_time=values.instant_from_epoch(es, "ms") if es is not None else None,
            detail=f"{vendor_op}/{record_type}" if record_type else vendor_op,
        )
        seq = self._seq(obj, required=vendor_op != "DDL")
        if vendor_op == "DDL":
            value = obj.get("value")
            ddl = value if isinstance(value, str) or value is None else dumps_exact(value)
            return [Change(op="DDL", seq=seq, ddl=ddl, **common)]
        if vendor_op not in ("INSERT", "INIT", "UPDATE", "DELETE"):
            raise Reject(f"unknown op '{vendor_op}'")
        if not coll:
            raise Reject("missing collection name (field 'coll')")
        types = ctx.column_types(db, coll)
        limits = (ctx.max_depth, ctx.max_width, ctx.max_elements)
        value = parse_document(obj.get("value"), "value", *limits)
        where = parse_document(obj.get("where"), "where", *limits)
        fields = None if vendor_op != "UPDATE" or value is None or record_type == "replace" else update_fields(value)
        documents = (where, *fields[:1]) if fields is not None else (value, where)
        row = dict(key_columns=KEY, col_types=document_col_types(types, documents), seq=seq, **common)

        if vendor_op in ("INSERT", "INIT"):
            if value is None:
                raise Reject(f"{vendor_op} without a document in 'value'")
            after = image(value, types)
            _need_id(after, "value")
            snapshot = vendor_op == "INIT" or record_type == "doc"
            return [Change(op="SNAPSHOT" if snapshot else "INSERT", after=after, **row)]
        if vendor_op == "DELETE":
            doc = value if value is not None else where
            if doc is None:
                raise Reject("DELETE without the removed document in 'value' or 'where'")
            before = image(doc, types)
            _need_id(before, "value")
            return [Change(op="DELETE", before=before, **row)]
        # UPDATE
        if where is None or value is None:
            raise Reject("UPDATE needs both 'where' and 'value'")
        before = image(where, types)
        _need_id(before, "where")
        if fields is None:  # replace: the whole new document
            after = {c: None for c in types}
            after.update(image(value, types))
            after.setdefault("_id", before["_id"])
            return [Change(op="UPDATE", before=before, after=after, **row)]
        sets, unsets = fields
        after = {"_id": before["_id"]}
        after.update(image(sets, types))
        after.update({name: None for name in unsets})
        return [Change(op="UPDATE", before=before, after=after, changed=tuple(after), **row)]

    @staticmethod
    def _seq(obj: dict, required: bool) -> tuple[int, ...]:
        cluster_time = obj.get("clusterTime")
        seq_id = obj.get("id")
        if cluster_time is None or seq_id is None:
            if required:
                raise Reject("missing ordering field 'clusterTime' or 'id'")
            return ()
        secs, colon, inc = str(cluster_time).partition(":")
        if not colon:
            raise Reject(f"clusterTime should be 'seconds:increment', got {str(cluster_time)[:40]!r}")
        return (seq_int(secs, "clusterTime"), seq_int(inc, "clusterTime"), seq_int(seq_id, "id"))

    # ------------------------------------------------------------ encoder

    def encode(self, change: Change, ctx: DecodeContext) -> bytes:
        vendor_op, _, record_type = (change.detail or "").partition("/")
        out: dict[str, Any] = {"id": Num(str(change.seq[2])) if len(change.seq) == 3 else None}
        if change.op == "INSERT":
            vendor_op, record_type, value, where = "INSERT", "insert", change.after, None
        elif change.op == "SNAPSHOT":
            vendor_op = "INIT" if vendor_op == "INIT" else "INSERT"
            record_type, value, where = "doc", change.after, None
        elif change.op == "DELETE":
            vendor_op, record_type, value, where = "DELETE", "doc", change.before, None
        elif change.op == "UPDATE":
            after = change.after or {}
            where = change.before or {"_id": after.get("_id")}
            vendor_op = "UPDATE"
            if change.changed is None:
                record_type, value = "replace", after
            else:
                record_type = "update"
                sets = {c: v for c, v in after.items() if c != "_id" and v is not None}
                unsets = [c for c, v in after.items() if c != "_id" and v is None]
                value = _UpdateDoc(sets, unsets)
        elif change.op == "DDL":
            out.update(op="DDL", dbType="MongoDB", db=change.db, coll=change.table, value=change.ddl, where=None)
            self._meta(out, change, record_type or None)
            return dumps_exact(out).encode("utf-8")
        else:
            raise ValueError(f"drs_mongo cannot express op {change.op}")
        out.update(
            op=vendor_op,
            dbType="MongoDB",
            db=change.db,
            coll=change.table,
            value=_write(value, change.col_types),
            where=_write(where, change.col_types) if where is not None else None,
        )
        self._meta(out, change, record_type)
        return dumps_exact(out).encode("utf-8")

    @staticmethod
    def _meta(out: dict, change: Change, record_type: str | None) -> None:
        out.update(recordType=record_type, extra=record_type)
        if change.event_time:
            out["es"] = Num(epoch_ms_text(change.event_time))
        if len(change.seq) == 3:
            out["clusterTime"] = f"{change.seq[0]}:{change.seq[1]}"


def _need_id(image: dict, field: str) -> None:
    if "_id" not in image or image["_id"] is None:
        raise Reject(f"document in '{field}' has no _id")


@dataclass
class _UpdateDoc:
    sets: dict
    unsets: list


def _write(doc: Any, types: dict[str, str] | None = None) -> str:
    """A canonical image (or an update) → shell-style extended JSON text as DRS writes it; a field typed
    ``object`` / ``array`` is written as the document its text is, any other as a value."""
    types = types or {}
    if isinstance(doc, _UpdateDoc):
        parts = []
        if doc.sets or not doc.unsets:
            parts.append('"$set": ' + _write(doc.sets, types))
        if doc.unsets:
            parts.append(
                '"$unset": {' + ", ".join(f"{json.dumps(c, ensure_ascii=False)}: true" for c in doc.unsets) + "}"
            )
        return "{" + ", ".join(parts) + "}"
    items = []
    for col, text in doc.items():
        items.append(f"{json.dumps(col, ensure_ascii=False)}: {_write_value(col, text, types.get(col))}")
    return "{" + ", ".join(items) + "}"


def _write_value(col: str, text: str | None, col_type: str | None = None) -> str:
    if text is None:
        return "null"
    if col == "_id" and HEX24.fullmatch(text) and text == text.lower():
        return f'ObjectId("{text}")'
    # Write the text as a native value when reading it back gives the same canonical text (a document or
    # an array only where typed so: read back, it is typed so).
    try:
        native = ShellJsonParser(text, 64).parse()
        nested = isinstance(native, (dict, list))
        if nested == (col_type in ("object", "array")) and (not isinstance(native, str) or isinstance(native, Num)):
            if column_value(native) == text:
                return text
    except Reject:
        pass
    return json.dumps(text, ensure_ascii=False)


DECODER = DrsMongoDecoder()
