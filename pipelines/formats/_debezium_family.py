"""Shared code of the OMS Debezium family (seed 000 and 001): Debezium, DebeziumFlatten, DebeziumSmt.

Values: :mod:`pipelines.formats._debezium_values` (the seeds' type tables, Debezium's logical types,
typed arrays, the unavailable-value placeholder); this module reads the envelope around them.

"""

from __future__ import annotations

from typing import Any, ClassVar

from pipelines import values as V
from pipelines.formats._debezium_values import (
    OMS_DIALECT,
    Dialect,
    canonical_image,
    epoch_ms,
    from_canonical,
    primitive_of,
    schema_types,
)
from pipelines.formats.base import (
    Change,
    DecodeContext,
    JsonDecoder,
    Num,
    Reject,
    op_name,
    optional,
    seq_int,
)

#: The value layer's names the family's members import from here.
__all__ = ["OPS", "DebeziumEnvelopeDecoder", "canonical_image", "from_canonical", "schema_for", "schema_types"]

#: Debezium ``op`` → canonical op (seed 000: c, u, d, HEARTBEAT; r and t are standard Debezium).
OPS = {"c": "INSERT", "u": "UPDATE", "d": "DELETE", "r": "SNAPSHOT", "t": "TRUNCATE", "heartbeat": "HEARTBEAT"}

# ---------------------------------------------------------------- envelope


class DebeziumEnvelopeDecoder(JsonDecoder):
    """Decodes one Debezium envelope {op, before, after, source, ts_ms}; subclasses find it in the message.

    Hooks where the family's members differ (OMS's defaults here; :mod:`pipelines.formats.debezium`
    overrides them for Debezium as the Debezium project writes it):

    * :attr:`ops` – op codes (Debezium adds ``m``, a logical-decoding message);
    * :meth:`dialect` – value encodings the schema does not state (:class:`Dialect`);
    * :meth:`ordering_of` – ``source`` → seq (OMS: ``pos`` "A@B"; Debezium: per connector);
    * :attr:`position_required` – whether an incremental change without a position is rejected
      (OMS: yes; Debezium: no, queue order decides);
    * :meth:`key_columns` – where the key comes from (OMS: configuration only).
    """

    ordering = (
        "source.pos 'A@B' → (B, A): B is the checkpoint's epoch seconds; or standard "
        "Debezium source.file/pos/row → (binlog file number, pos, row); required on c/u/d/t, "
        "none on snapshot rows (r) and heartbeats"
    )
    table_and_key = "source.db / source.table; key from configuration (the message carries none)"
    type_mapping = (
        "Debezium logical schema names, else configured source types, else the schema's "
        "primitive types; BYTES Base16, DATE days, TIME µs, DATETIME ms, TIMESTAMP ...Z, DECIMAL text"
    )
    ops: ClassVar[dict[str, str]] = OPS
    position_required: ClassVar[bool] = True

    def envelope(self, obj: dict[str, Any]) -> tuple[dict[str, Any], Any]:
        """(envelope, schema or None) of a message."""
        raise NotImplementedError

    def dialect(self, ctx: DecodeContext) -> Dialect:
        return OMS_DIALECT

    def ordering_of(self, source: dict[str, Any]) -> tuple[int, ...]:
        return _ordering(source)

    def key_columns(self, ctx: DecodeContext, db: str | None, table: str | None, key: dict | None) -> tuple[str, ...]:
        """The table's key: configuration (``key`` is the record key's image, unused by OMS)."""
        return ctx.key_columns(db, table)

    def decode_object(self, obj: dict[str, Any], ctx: DecodeContext) -> list[Change]:
        env, schema = self.envelope(obj)
        return self.envelope_changes(env, schema, ctx)

    def envelope_changes(
        self, env: dict[str, Any], schema: Any, ctx: DecodeContext, key: tuple[dict, dict] | None = None
    ) -> list[Change]:
        """The change of one envelope; ``key`` is the record key as (canonical image, types), if any."""
        op_text = env.get("op")
        if not isinstance(op_text, str):
            raise Reject("missing field 'op'")
        op = self.ops.get(op_text if op_text in self.ops else op_name(op_text).lower())
        if op is None:
            raise Reject(f"unknown op '{op_text}'")
        source = optional(env, "source", dict) or {}
        db = optional(source, "db")
        table = optional(source, "table")
        pg_schema = optional(source, "schema")
        seq = self.ordering_of(source)
        event_time = _event_time(source, env)
        txn_obj = optional(env, "transaction", dict)
        txn = str(txn_obj["id"]) if txn_obj and txn_obj.get("id") is not None else None
        if op == "HEARTBEAT":
            return [
                Change(
                    op="HEARTBEAT",
                    db=db,
                    table=table,
                    schema=pg_schema,
                    seq=seq,
                    event_time=event_time,
                    txn=txn,
                    detail=op_text,
                )
            ]
        if not table:
            raise Reject(f"row change ({op_text}) without source.table")
        if not seq and op != "SNAPSHOT" and self.position_required:
            # full-sync 'r' rows carry no position (seed 000); an incremental change must, or it would
            # sort before every ordered one
            raise Reject(f"row change ({op_text}) without source.pos: an incremental change needs it to be ordered")
        configured = {k: v for k, v in ctx.column_types(db, table).items()}
        dialect = self.dialect(ctx)
        declared = {part: schema_types(schema, part) for part in ("before", "after")}
        described = any(d is not None for d in declared.values())  # else payload-only (or a schema of neither)
        # a placeholder (unavailable.value.placeholder) is no value: the column is left out, as not carried
        unavailable: set[str] = set()
        before, tb = canonical_image(
            env.get("before"), "before", declared["before"], configured, dialect, described, set()
        )
        after, ta = canonical_image(
            env.get("after"), "after", declared["after"], configured, dialect, described, unavailable
        )
        for col in tb.keys() & ta.keys():
            if V.family(tb[col]) != V.family(ta[col]):
                raise Reject(
                    f"column {col[:60]!a} is typed differently in 'before' ({tb[col]}) and 'after' ({ta[col]})"
                )
        if key is not None and op == "DELETE" and before is None:
            before, tb = dict(key[0]), dict(key[1])  # no before-image (MongoDB, REPLICA IDENTITY NOTHING): the key
        if op in ("INSERT", "SNAPSHOT", "UPDATE") and after is None:
            raise Reject(f"op '{op_text}' without an 'after' image")
        if op == "DELETE" and before is None:
            raise Reject(f"op '{op_text}' without a 'before' image")
        if op == "INSERT" or op == "SNAPSHOT":
            before = None
        if op == "DELETE":
            after = None
        types = {**tb, **ta}
        changed = None
        if unavailable and op == "UPDATE" and after is not None:
            changed = tuple(after)  # a partial image: the mirror keeps what the change does not carry
        elif unavailable and after is not None:  # an insert has every value: the placeholder was one
            after, ta = canonical_image(env.get("after"), "after", declared["after"], configured, dialect, described)
            types = {**tb, **ta}
        return [
            Change(
                op=op,
                db=db,
                table=table,
                schema=pg_schema,
                key_columns=self.key_columns(ctx, db, table, key[0] if key else None),
                before=before,
                after=after,
                changed=changed,
                col_types=types or None,
                seq=seq,
                event_time=event_time,
                txn=txn,
                detail=op_text,
            )
        ]

    # ------------------------------------------------------------ encode

    def build_envelope(self, change: Change) -> dict[str, Any]:
        op_text = (
            change.detail
            if change.detail and OPS.get(change.detail.lower()) == change.op
            else {v: k for k, v in OPS.items()}.get(change.op)
        )
        if op_text is None:
            raise ValueError(f"Debezium cannot express op {change.op}")
        if op_text == "heartbeat":
            op_text = "HEARTBEAT"
        types = change.col_types or {}
        source: dict[str, Any] = {"version": "", "connector": "OB_MYSQL", "name": "OMS"}
        source["ts_ms"] = Num(epoch_ms(change.event_time)) if change.event_time else Num("0")
        if change.db is not None:
            source["db"] = change.db
        if change.schema is not None:
            source["schema"] = change.schema
        if change.table is not None:
            source["table"] = change.table
        if len(change.seq) == 2:
            source["pos"] = f"{change.seq[1]}@{change.seq[0]}"
        elif len(change.seq) == 3:
            source.update(
                file=f"mysql-bin.{change.seq[0]:06d}", pos=Num(str(change.seq[1])), row=Num(str(change.seq[2]))
            )
        elif len(change.seq) == 1:
            source["pos"] = Num(str(change.seq[0]))
        env: dict[str, Any] = {"op": op_text, "source": source}
        if change.op != "HEARTBEAT":
            env["before"] = _encode_image(change.before, types)
            env["after"] = _encode_image(change.after, types)
        if change.txn is not None:
            env["transaction"] = {"id": change.txn}
        env["ts_ms"] = source["ts_ms"]
        return env


def _encode_image(image: dict | None, types: dict[str, str]) -> dict | None:
    if image is None:
        return None
    return {c: from_canonical(v, types.get(c)) for c, v in image.items()}


def schema_for(change: Change) -> dict[str, Any]:
    """A Debezium ``schema`` describing the images of a change (primitive types, as OMS writes)."""
    types = change.col_types or {}
    cols = list(dict.fromkeys([*(change.before or {}), *(change.after or {})]))
    fields = [{"field": c, "optional": True, "type": primitive_of(types[c])} for c in cols if c in types]
    image = [{"field": part, "optional": True, "type": "struct", "fields": fields} for part in ("before", "after")]
    source = {
        "field": "source",
        "optional": False,
        "type": "struct",
        "fields": [
            {"field": f, "optional": False, "type": t}
            for f, t in (
                ("version", "string"),
                ("connector", "string"),
                ("name", "string"),
                ("ts_ms", "int64"),
                ("db", "string"),
                ("table", "string"),
                ("pos", "string"),
            )
        ],
    }
    return {
        "optional": False,
        "type": "struct",
        "fields": [
            *image,
            source,
            {"field": "op", "optional": False, "type": "string"},
            {"field": "ts_ms", "optional": False, "type": "int64"},
        ],
    }


def _ordering(source: dict[str, Any]) -> tuple[int, ...]:
    """OMS ``pos`` "A@B" → (B, A); standard Debezium file/pos/row → (file number, pos, row).

    Seed 000 calls pos "[binlog file name]@[binlog file offset]", but its own values contradict
    that: B equals source.ts_ms in seconds (553132@1668496109 with ts_ms 1668496109000; a MySQL
    binlog offset cannot exceed 1 GiB) and A is not monotonic (insert 703223, later update 436999).
    So B (checkpoint seconds) orders first and A breaks ties within the second.
    """
    pos = source.get("pos")
    file_name = source.get("file")
    if isinstance(file_name, str) and pos is not None:
        digits = file_name.rpartition(".")[2]
        return (
            seq_int(digits, "source.file"),
            seq_int(pos, "source.pos"),
            seq_int(source.get("row") if source.get("row") is not None else 0, "source.row"),
        )
    if pos is None or pos == "":
        return ()
    if isinstance(pos, str) and "@" in pos:
        first, _, second = pos.partition("@")
        return (seq_int(second, "source.pos"), seq_int(first, "source.pos"))
    return (seq_int(pos, "source.pos"),)


def _event_time(source: dict[str, Any], env: dict[str, Any]) -> str | None:
    """source.ts_ms (milliseconds, despite seed 000 saying seconds; 0 in full sync), else envelope ts_ms."""
    for value in (source.get("ts_ms"), env.get("ts_ms")):
        if value is not None and str(value) not in ("0", ""):
            return V.instant_from_epoch(seq_int(value, "ts_ms"), "ms")
    return None
