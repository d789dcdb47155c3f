"""Source simulator (a dev tool): random table histories, encoded in any format, delivered as a queue would.

Used by the property tests (tests/unit/test_simulator_model.py), the end-to-end gold checks
(tests/spark/test_gold_vs_model.py) and ``lakecdc soak``.

The flow::

    history = generate_history("oms_shareplex", seed=7, n_changes=60)
    history.changes        # canonical Changes in source order (what the vendor was told)
    history.messages       # each one encoded with the format's own encoder (its quirks included)
    history.decoded        # decode(encode(change)) in source order: exactly what the pipeline sees
    history.truth          # the source tables at the end of the history
    delivery = deliver(history, seed=7, partitions=3)
    delivery.messages      # [(partition, offset, raw bytes)] in arrival order: duplicated, reordered
    delivery.expected      # expected_rows(history): MirrorModel over the decoded source order
    compare(delivery.expected, model_rows(decode_delivery(history, delivery)))   # → [] when recoverable

A history runs over 1–3 tables keyed by ``id bigint`` (sometimes a second ``k2 varchar`` key
column) with nullable typed columns (``bigint unsigned``, ``decimal(38,24)`` with long digits,
``varchar`` with unicode and empty strings, ``blob``, ``datetime``, ``timestamp``). Rows may
exist before the captured stream starts; a full load (SNAPSHOT rows, read one by one while the
incremental stream goes on) then delivers them. Incremental changes are inserts, updates
(also of the key), deletes, truncates and ``ALTER TABLE ... ADD COLUMN`` (a DDL change, then
later images carry the column), each only where the format can say it (:data:`CAPABILITIES`).

Keyless tables (``keyless_tables=True``; off by default, so a seed keeps its history): some
tables have no primary key (``key=()``; their messages and configuration name none) and are
multisets. Their history: inserts (sometimes an exact copy of an existing row, so the source
holds equal rows), updates of one row with full before- and after-images, deletes of one row,
truncates and added columns. Never a key change or a partial image (neither could identify a
keyless row), and no full load: a full-load row of a keyless table cannot be told apart from
the same row inserted or updated by the stream, so with rows read while the stream goes on the
expected mirror would be ill-defined. Such tables therefore start empty. Only formats that can
carry them (``Capabilities.keyless``).

Ordering values: every change gets a commit time (strictly increasing milliseconds) and an
increment; each format's ``seq`` is made from them the way its vendor does (see ``SeqKind``).

Delivery (:func:`deliver`): messages go to ``partitions`` partitions by a hash of their key
(the new key for an update; DDL and TRUNCATE by table; a keyless table's changes all go to one
partition, as a queue keyed by table would put them), are duplicated (a consumer restart
re-reads a partition from an earlier offset; formats with a total order also get random
producer-retry duplicates), and interleaved across partitions. Within a partition the order is
kept, except for formats whose seq totally orders every change: there any order is allowed,
because the seq makes it recoverable.

Longer than 400 lines on purpose: the per-format capabilities, the history generator and the delivery
model describe one source together and change together.
"""

from __future__ import annotations

import base64
import json
import random
import time
import zlib
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from pipelines.formats import ALL_FORMAT_IDS, get_decoder
from pipelines.formats.base import Change, DecodeContext, Decoder, TableSpec
from pipelines.testing.model import MirrorModel, table_name
from pipelines.values import family, wall_text

Row = dict[str, "str | None"]

# ---------------------------------------------------------------- per-format capabilities


@dataclass(frozen=True)
class Capabilities:
    """What a format (its encoder and decoder) can carry; the simulator restricts histories to it.

    * ``seq`` – how the vendor orders changes (see :func:`_seq_for`): ``store`` (OMS
      storeDataSequence: seconds, increment), ``es`` (Canal source time in ms), ``id`` (one
      growing integer), ``scn_seq`` (SharePlex scn, seq), ``scn`` (DataWorks scn), ``seq_id``
      (DataWorks sequenceId; the decoder adds the phase), ``pos`` (Debezium ``A@B``), ``mongo``
      (clusterTime seconds, increment, id), ``binlog`` (MySQL binlog file number, pos, row),
      ``none`` (queue order only).
    * ``total_order`` – seq orders every change, so delivery may reorder anything.
    * ``snapshot`` – ``op``: a full-load op exists (→ SNAPSHOT); ``insert``: full load arrives
      as INSERT with an ordering value; ``none``: no full load in the history.
    * ``snapshot_seq`` – full-load rows carry an ordering value (else they have none (seq ()),
      or id 0, and sort before every incremental change).
    * ``truncate`` / ``ddl`` / ``add_column`` / ``key_change`` – can express TRUNCATE, a DDL
      statement, images that gain a column, an UPDATE that changes the primary key.
    * ``partial`` – updates carry only the changed columns: ``always`` (SharePlex ``data``),
      ``sometimes`` (Mongo ``$set`` / Avro EmptyObject NONE, next to full images).
    * ``split_update`` – updates arrive as UPDATE_BEFOR + UPDATE_AFTER (DataWorks Kafka).
    * ``multi_table`` – messages name their table (DebeziumSmt's do not: one configured table).
    * ``fixed_key`` – the key every table has (Mongo ``_id``).
    * ``keyless`` – can carry a table without a primary key: messages that name no key and
      full images to find a row by (``generate_history(keyless_tables=True)``).
    * ``ts_digits`` – fraction digits of time values the format keeps exactly.
    * ``ddl_detail`` / ``truncate_detail`` – vendor op text the encoder needs for them.
    * ``carried_types`` – a column type the format carries as another (DataWorks has one DATE type,
      epoch milliseconds, for every date and time: a DATETIME column arrives as an instant).
    """

    seq: str
    total_order: bool = True
    snapshot: str = "op"
    snapshot_seq: bool = True
    truncate: bool = True
    ddl: bool = True
    add_column: bool = True
    key_change: bool = True
    partial: str | None = None
    split_update: bool = False
    multi_table: bool = True
    fixed_key: tuple[str, ...] | None = None
    keyless: bool = True
    ts_digits: int = 6
    ddl_detail: str | None = "ALTER"
    truncate_detail: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    carried_types: dict[str, str] = field(default_factory=dict)


#: The reference schema of the source checkout this dev tool runs from (read only).
_DRS_AVRO_SCHEMA = str(Path(__file__).resolve().parents[2] / "conf" / "schemas" / "drs_record.avsc")

#: One row per format id. Restrictions, with the reason:
#: * oms_default(_extend): no TRUNCATE record type; full load ROW has no storeDataSequence.
#: * oms_canal, oms_dataworks, SharePlex, DataWorks Kafka: no full-load op, full load arrives as
#:   INSERT (with its ordering value).
#: * oms_shareplex: no TRUNCATE op (dts_shareplex has one); updates carry only changed columns.
#: * Debezium: no DDL message (images just gain the column); 'r' rows of an OMS full sync carry no pos.
#: * oms_debezium_smt: one configured table, no op, no position: no key change (an UPDATE has
#:   no before-image to delete), no TRUNCATE / DDL / full load overlap; queue order only.
#: * oms_avro: full migration records have id 0; OMS writes full images (no EmptyObject NONE), so
#:   no partial updates (dts_avro has them: its full-load rows carry ids, see model notes below).
#: * dts_avro: no TRUNCATE operation.
#: * drs_gaussdb: no TRUNCATE; its DDL op is DDL. drs_mongo: _id key never changes, no TRUNCATE.
#: * dataworks_kafka: DATE (our timestamps) is epoch milliseconds → 3 fraction digits.
#: Keyless tables (``keyless``), not in:
#: * oms_shareplex, dts_shareplex: updates carry only the changed columns, and a partial image
#:   cannot identify a keyless row (SharePlex keys such a table by its rowid, ``__rowid``).
#: * oms_debezium_smt: an UPDATE has no before-image (it is an upsert of the full row), so it
#:   cannot say which equal row it replaces; and with no seq a redelivered copy of an INSERT is
#:   indistinguishable from a second insert of an equal row.
#: * drs_mongo: every document has ``_id`` (its decoder rejects one without).
CAPABILITIES: dict[str, Capabilities] = {
    "oms_default": Capabilities(seq="store", snapshot_seq=False, truncate=False),
    "oms_default_extend": Capabilities(seq="store", snapshot_seq=False, truncate=False),
    "oms_canal": Capabilities(seq="es", snapshot="insert"),
    "oms_dataworks": Capabilities(seq="scn", snapshot="insert"),
    "oms_shareplex": Capabilities(seq="scn_seq", snapshot="insert", truncate=False, partial="always", keyless=False),
    "oms_debezium": Capabilities(seq="pos", snapshot_seq=False, ddl=False),
    "oms_debezium_flatten": Capabilities(seq="pos", snapshot_seq=False, ddl=False),
    "oms_debezium_smt": Capabilities(
        seq="none",
        total_order=False,
        snapshot="none",
        truncate=False,
        ddl=False,
        key_change=False,
        multi_table=False,
        keyless=False,
    ),
    "oms_avro": Capabilities(seq="id", snapshot_seq=False, truncate=False),
    "dataworks_kafka": Capabilities(
        seq="seq_id", snapshot="insert", split_update=True, ts_digits=3, carried_types={"datetime": "timestamp"}
    ),
    "drs_json": Capabilities(seq="id"),
    "drs_json_c": Capabilities(seq="id"),
    "drs_mongo": Capabilities(
        seq="mongo", truncate=False, key_change=False, partial="sometimes", fixed_key=("_id",), keyless=False
    ),
    "drs_gaussdb": Capabilities(seq="id", truncate=False, ddl_detail=None),
    "drs_avro": Capabilities(seq="id", options={"schema": _DRS_AVRO_SCHEMA}),
    "dts_avro": Capabilities(seq="id", truncate=False, partial="sometimes"),
    "dts_shareplex": Capabilities(
        seq="scn_seq", snapshot="insert", partial="always", truncate_detail="TRUNCATE", keyless=False
    ),
    "dts_canal": Capabilities(seq="id"),
    # canal: seq (es,); the simulator's es are distinct milliseconds (real Canal's are whole seconds,
    # ties keep queue order: tests/unit/test_fmt_canal_alibaba.py); INIT = full load with its es
    "canal": Capabilities(seq="es"),
    # maxwell: (binlog file, offset) from `position`; bootstrap-insert rows carry none; no TRUNCATE event
    "maxwell": Capabilities(seq="pos", snapshot_seq=False, truncate=False, ddl_detail="table-alter"),
    # ogg_json: no full-load op (initial load arrives as I with its pos), no DDL message (images gain the
    # column), compressed updates carry the key and the changed columns
    "ogg_json": Capabilities(seq="pos", snapshot="insert", ddl=False, partial="sometimes"),
    # aws_dms: load rows carry no transaction details (no seq), no TRUNCATE, ADD COLUMN as a control record
    "aws_dms": Capabilities(seq="pos", snapshot_seq=False, truncate=False, ddl_detail="add-column"),
    # debezium (MySQL connector): no DDL message (schema changes go to another topic; images gain the
    # column); full-load rows carry the placeholder "file": "" (no position), as Flink CDC writes them
    "debezium": Capabilities(seq="binlog", snapshot_seq=False, ddl=False),
}


def encodable_formats() -> list[str]:
    """Format ids (seed formats and EXTRA_FORMAT_IDS) with a capability row whose decoder has an encoder."""
    return [f for f in ALL_FORMAT_IDS if f in CAPABILITIES and has_encoder(f)]


def has_encoder(format_id: str) -> bool:
    """True where the format's decoder overrides ``encode``; False while its module is not written yet."""
    try:
        decoder = get_decoder(format_id)
    except ModuleNotFoundError as exc:
        if exc.name == f"pipelines.formats.{format_id}":
            return False
        raise
    return type(decoder).encode is not Decoder.encode


# ---------------------------------------------------------------- tables and values

BASE_TIME_MS = 1_700_000_000_000
_TEXTS = [
    "",
    "héllo wörld",
    "日本語テキスト",
    "emoji 😀🚀",
    'quote " and \\ backslash',
    "line\nbreak\ttab",
    "Ωmega ß ø",
    "  padded  ",
    "null",
    "0",
    "a" * 40,
]
_EXTRA_TYPES = ["bigint unsigned", "decimal(38,24)", "varchar(64)", "blob", "datetime", "timestamp", "bigint"]


@dataclass
class TableDef:
    db: str
    name: str
    key: tuple[str, ...]
    columns: dict[str, str]  # column → source type, in order (key first); grows with ADD COLUMN
    added: list[str] = field(default_factory=list)  # columns added during the history

    @property
    def qualified(self) -> str:
        return f"{self.db}.{self.name}"


def _frac(rng: random.Random, digits: int) -> str:
    if digits <= 0 or rng.random() < 0.4:
        return ""
    n = rng.randint(1, digits)
    text = "".join(rng.choice("0123456789") for _ in range(n)).rstrip("0")
    return f".{text}" if text else ""


def random_value(rng: random.Random, col_type: str, ts_digits: int = 6) -> str:
    """A canonical value of the type (text as in :mod:`pipelines.values`)."""
    fam = family(col_type)
    if fam == "int":
        return str(rng.choice([0, -1, 1, 2**63 - 1, -(2**63), rng.randint(-(10**12), 10**12)]))
    if fam == "uint64":
        return str(rng.choice([0, 1, 2**64 - 1, 10223372036854775806, 2**63, rng.randint(0, 2**64 - 1)]))
    if fam == "decimal":
        whole = "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 14))).lstrip("0") or "0"
        frac = "".join(rng.choice("0123456789") for _ in range(rng.randint(0, 24)))
        sign = "-" if rng.random() < 0.3 and (whole != "0" or frac.strip("0")) else ""
        return f"{sign}{whole}.{frac}" if frac else f"{sign}{whole}"
    if fam == "bytes":
        return base64.b64encode(bytes(rng.randrange(256) for _ in range(rng.randint(0, 16)))).decode("ascii")
    if fam in ("datetime", "timestamp"):
        dt = datetime(1970, 1, 2) + timedelta(seconds=rng.randint(0, 4_000_000_000))
        text = wall_text(dt) + _frac(rng, ts_digits)
        return text + "Z" if fam == "timestamp" else text
    if rng.random() < 0.5:
        return rng.choice(_TEXTS)
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz ÄÖÜé中文") for _ in range(rng.randint(0, 12)))


# ---------------------------------------------------------------- the history


@dataclass
class History:
    format_id: str
    seed: int
    tables: list[TableDef]
    changes: list[Change]  # source order, as handed to the encoder
    truth: dict[str, list[Row]]  # the source tables at the end (rows sorted by key)
    ctx: DecodeContext
    _messages: list[bytes] | None = None
    _decoded: list[list[Change]] | None = None

    @property
    def caps(self) -> Capabilities:
        return CAPABILITIES[self.format_id]

    @property
    def messages(self) -> list[bytes]:
        if self._messages is None:
            enc = get_decoder(self.format_id)
            self._messages = [enc.encode(ch, self.ctx) for ch in self.changes]
        return self._messages

    @property
    def decoded_per_message(self) -> list[list[Change]]:
        if self._decoded is None:
            dec = get_decoder(self.format_id)
            self._decoded = [dec.decode(raw, self.ctx) for raw in self.messages]
        return self._decoded

    @property
    def decoded(self) -> list[Change]:
        return [ch for chs in self.decoded_per_message for ch in chs]

    def keys(self) -> dict[str, tuple[str, ...]]:
        """Primary key per table (``()``: keyless, compared as a multiset)."""
        return {t.qualified: t.key for t in self.tables}

    def column_types(self) -> dict[str, dict[str, str]]:
        return {t.qualified: dict(t.columns) for t in self.tables}

    def config_tables(self) -> dict[str, dict[str, Any]]:
        """The ``tables:`` section of a pipeline YAML for these tables."""
        return {
            t.qualified: {"key": list(t.key), "columns": dict(t.columns)} if t.key else {"columns": dict(t.columns)}
            for t in self.tables
        }


class _Clock:
    """Commit time (strictly increasing ms) and an increment within the second."""

    def __init__(self, rng: random.Random) -> None:
        self.rng, self.ms, self.inc, self.counter = rng, BASE_TIME_MS, 0, 0

    def tick(self) -> tuple[int, int, int]:
        step = self.rng.choice([1, 1, 3, 17, 250, 999, 1000, 1500])
        old_sec = self.ms // 1000
        self.ms += step
        self.inc = self.inc + 1 if self.ms // 1000 == old_sec else 1
        self.counter += 1
        return self.ms, self.inc, self.counter


def _iso_ms(ms: int) -> str:
    dt = datetime(1970, 1, 1) + timedelta(milliseconds=ms)
    return wall_text(dt) + f".{ms % 1000:03d}".rstrip("0").rstrip(".") + "Z"


def _seq_for(kind: str, ms: int, inc: int, counter: int) -> tuple[int, ...]:
    if kind == "store":
        return (ms // 1000, inc)
    if kind == "es":
        return (ms,)
    if kind in ("id", "scn"):
        return (ms * 100_000 + inc,)
    if kind == "scn_seq":
        return (ms, inc)
    if kind == "seq_id":
        return (ms * 1_000_000 + inc,)
    if kind == "pos":
        return (ms // 1000, counter)
    if kind == "mongo":
        return (ms // 1000, inc, counter)
    if kind == "binlog":  # MySQL (binlog file number, pos, row): a new binlog file every 40 events
        return (1 + counter // 40, 154 + (counter % 40) * 250, 0)
    return ()


def _make_tables(
    rng: random.Random,
    caps: Capabilities,
    n_tables: int,
    composite_keys: bool = True,
    db: str = "shop",
    keyless: bool = False,
) -> list[TableDef]:
    """``keyless``: the first table has no key, each other one with probability 1/2."""
    tables = []
    for i in range(n_tables):
        if keyless and (i == 0 or rng.random() < 0.5):
            key_cols = {}
        elif caps.fixed_key:
            key_cols = {caps.fixed_key[0]: "bigint"}
        elif composite_keys and rng.random() < 0.25:
            key_cols = {"id": "bigint", "k2": "varchar(32)"}
        else:
            key_cols = {"id": "bigint"}
        extra = rng.sample(_EXTRA_TYPES, rng.randint(2, len(_EXTRA_TYPES)))
        cols = dict(key_cols)
        for j, t in enumerate(extra):
            cols[f"c{j}_{t.split('(')[0].replace(' ', '_')}"] = caps.carried_types.get(t, t)
        tables.append(TableDef(db=db, name=f"t{i}", key=tuple(key_cols), columns=cols))
    return tables


class _Generator:
    def __init__(
        self,
        format_id: str,
        seed: int,
        n_changes: int,
        n_tables: int | None,
        composite_keys: bool = True,
        initial_rows: bool = True,
        db: str = "shop",
        keyless_tables: bool = False,
    ) -> None:
        self.initial_rows = initial_rows
        self.fid, self.caps = format_id, CAPABILITIES[format_id]
        self.rng = random.Random(seed)
        self.seed, self.n_changes = seed, n_changes
        nt = n_tables or self.rng.randint(1, 3)
        self.tables = _make_tables(
            self.rng, self.caps, nt if self.caps.multi_table else 1, composite_keys, db, keyless_tables
        )
        # rows by key; a keyless table's rows by a row number (("#1",), ("#2",), ...) that no message carries
        self.state: dict[str, dict[tuple, Row]] = {t.qualified: {} for t in self.tables}
        self.row_numbers = 0
        self.clock = _Clock(self.rng)
        self.out: list[Change] = []
        self.scan: list[tuple[TableDef, tuple]] = []  # full-load cursor: keys still to read
        self.scan_started = False
        self.future_cols: dict[str, list[tuple[str, str]]] = {}
        for t in self.tables:
            if self.caps.add_column:
                n = self.rng.choice([0, 0, 1, 2])
                self.future_cols[t.qualified] = [
                    (f"added_{k}", self.rng.choice(["varchar(64)", "decimal(38,24)", "bigint", "timestamp"]))
                    for k in range(n)
                ]

    # -- values
    def key_value(self, col: str, col_type: str) -> str:
        if family(col_type) == "int":
            return str(self.rng.randint(1, 15))
        return self.rng.choice(["a", "b", "ü", ""])

    def row(self, t: TableDef, key: tuple | None = None) -> Row:
        out: Row = {}
        for i, k in enumerate(t.key):
            out[k] = key[i] if key is not None else self.key_value(k, t.columns[k])
        for c, typ in t.columns.items():
            if c not in t.key:
                out[c] = None if self.rng.random() < 0.2 else random_value(self.rng, typ, self.caps.ts_digits)
        return out

    def free_key(self, t: TableDef) -> tuple | None:
        rows = self.state[t.qualified]
        for _ in range(30):
            key = tuple(self.key_value(k, t.columns[k]) for k in t.key)
            if key not in rows:
                return key
        return None

    def any_row(self, t: TableDef) -> tuple | None:
        """The key (a keyless table: the row number) of a random row of ``t``; None when it is empty."""
        rows = self.state[t.qualified]
        return self.rng.choice(sorted(rows)) if rows else None

    # -- emitting
    def emit(self, op: str, t: TableDef, snapshot: bool = False, **kw: Any) -> Change:
        ms, inc, counter = self.clock.tick()
        seq = _seq_for(self.caps.seq, ms, inc, counter)
        if snapshot and not self.caps.snapshot_seq:
            seq = ()
        ch = Change(
            op=op,
            db=t.db,
            table=t.name,
            key_columns=t.key if op != "DDL" else (),
            col_types=dict(t.columns) if op != "DDL" else None,
            seq=seq,
            event_time=_iso_ms(ms),
            **kw,
        )
        self.out.append(ch)
        return ch

    # -- operations
    def insert(self, t: TableDef) -> bool:
        if not t.key:
            return self.insert_keyless(t)
        key = self.free_key(t)
        if key is None:
            return False
        row = self.row(t, key)
        self.state[t.qualified][key] = row
        self.emit("INSERT", t, after=dict(row))
        return True

    def insert_keyless(self, t: TableDef) -> bool:
        """A new row, or (sometimes) an exact copy of an existing one: a keyless table holds duplicates."""
        rows = self.state[t.qualified]
        copied = self.any_row(t) if rows and self.rng.random() < 0.3 else None
        row = dict(rows[copied]) if copied else self.row(t)
        self.row_numbers += 1
        rows[(f"#{self.row_numbers}",)] = row
        self.emit("INSERT", t, after=dict(row))
        return True

    def update(self, t: TableDef) -> bool:
        rows, old_key = self.state[t.qualified], self.any_row(t)
        if old_key is None:
            return False
        before = rows[old_key]
        new_key = old_key
        if self.caps.key_change and t.key and self.rng.random() < 0.25:
            new_key = self.free_key(t) or old_key
        data_cols = [c for c in t.columns if c not in t.key]
        changed = (
            self.rng.sample(data_cols, self.rng.randint(0 if new_key != old_key else 1, len(data_cols)))
            if data_cols
            else []
        )
        after = dict(before)
        for i, k in enumerate(t.key):
            after[k] = new_key[i]
        for c in changed:
            after[c] = None if self.rng.random() < 0.2 else random_value(self.rng, t.columns[c], self.caps.ts_digits)
        del rows[old_key]
        rows[new_key] = after
        # a keyless row is found by its full before-image, and its new value is the full after-image
        partial = bool(t.key) and (
            self.caps.partial == "always" or (self.caps.partial == "sometimes" and self.rng.random() < 0.5)
        )
        if partial:
            if self.caps.partial == "always":  # SharePlex: only the changed columns (a changed key too)
                carried = [*changed, *(k for k in t.key if before[k] != after[k])]
            else:  # Mongo $set / Avro NONE: the key, then the changed columns
                carried = [*t.key, *changed]
            img = {c: after[c] for c in dict.fromkeys(carried)}
            self.emit("UPDATE", t, before=dict(before), after=img, changed=tuple(img))
        elif self.caps.split_update and self.rng.random() < 0.7:
            ms, inc, counter = self.clock.tick()
            seq = _seq_for(self.caps.seq, ms, inc, counter)
            common = dict(
                db=t.db, table=t.name, key_columns=t.key, col_types=dict(t.columns), seq=seq, event_time=_iso_ms(ms)
            )
            self.out.append(Change("DELETE", before=dict(before), detail="UPDATE_BEFOR", **common))
            self.out.append(Change("UPDATE", after=dict(after), detail="UPDATE_AFTER", **common))
        else:
            self.emit("UPDATE", t, before=dict(before), after=dict(after))
        return True

    def delete(self, t: TableDef) -> bool:
        key = self.any_row(t)
        if key is None:
            return False
        self.emit("DELETE", t, before=dict(self.state[t.qualified].pop(key)))
        return True

    def truncate(self, t: TableDef) -> bool:
        if not self.caps.truncate:
            return False
        self.state[t.qualified].clear()
        self.emit("TRUNCATE", t, ddl=f"TRUNCATE TABLE {t.qualified}", detail=self.caps.truncate_detail)
        return True

    def add_column(self, t: TableDef) -> bool:
        pending = self.future_cols.get(t.qualified)
        if not pending:
            return False
        col, typ = pending.pop(0)
        t.columns[col] = typ
        t.added.append(col)
        for row in self.state[t.qualified].values():
            row[col] = None
        if self.caps.ddl:
            self.emit("DDL", t, ddl=f"ALTER TABLE {t.qualified} ADD COLUMN {col} {typ}", detail=self.caps.ddl_detail)
        return True

    def keyed_tables(self) -> list[TableDef]:
        """The tables a full load reads (a keyless table has none: see the module docstring)."""
        return [t for t in self.tables if t.key]

    def full_load_scan(self) -> list[tuple[TableDef, tuple]]:
        return [(t, k) for t in self.keyed_tables() for k in sorted(self.state[t.qualified])]

    def snapshot_step(self) -> None:
        """Read the next row of the full load (if it still exists) as SNAPSHOT."""
        while self.scan:
            t, key = self.scan.pop(0)
            row = self.state[t.qualified].get(key)
            if row is None:
                continue
            op = "SNAPSHOT" if self.caps.snapshot == "op" else "INSERT"
            self.emit(op, t, snapshot=True, after=dict(row))
            return

    def run(self) -> History:
        caps = self.caps
        # Rows that exist before the captured stream starts (only a full load can deliver them).
        if caps.snapshot != "none" and self.initial_rows:
            for t in self.keyed_tables():
                for _ in range(self.rng.randint(0, 5)):
                    key = self.free_key(t)
                    if key is not None:
                        self.state[t.qualified][key] = self.row(t, key)
        snapshot_at = self.rng.randint(0, max(0, self.n_changes // 2)) if caps.snapshot != "none" else None
        ops: list[tuple[Callable[[TableDef], bool], float]] = [
            (self.insert, 4),
            (self.update, 5),
            (self.delete, 2.5),
            (self.truncate, 0.25),
            (self.add_column, 0.5),
        ]
        while len(self.out) < self.n_changes:
            if snapshot_at is not None and not self.scan_started and len(self.out) >= snapshot_at:
                self.scan_started = True
                self.scan = self.full_load_scan()
            if self.scan and self.rng.random() < 0.35:
                self.snapshot_step()
                continue
            t = self.rng.choice(self.tables)
            fn = self.rng.choices([o for o, _ in ops], weights=[w for _, w in ops])[0]
            fn(t)
        if snapshot_at is not None and not self.scan_started:
            # the history reached its length first (a split update emits two messages): the full
            # load still happens, or rows that predate the stream would never be delivered
            self.scan_started = True
            self.scan = self.full_load_scan()
        while self.scan:  # the full load finishes
            self.snapshot_step()
        truth = {
            t.qualified: [self.state[t.qualified][k] for k in sorted(self.state[t.qualified], key=_key_order)]
            for t in self.tables
        }
        ctx = DecodeContext(
            tables={t.qualified.lower(): TableSpec(key=t.key, columns=dict(t.columns)) for t in self.tables},
            default_table=self.tables[0].qualified if not caps.multi_table else None,
            options=dict(caps.options),
        )
        return History(self.fid, self.seed, self.tables, self.out, truth, ctx)


def _key_order(key: tuple) -> tuple:
    return tuple((0, int(v), "") if v.lstrip("-").isdigit() else (1, 0, v) for v in key)


def generate_history(
    format_id: str,
    seed: int,
    n_changes: int = 40,
    n_tables: int | None = None,
    composite_keys: bool = True,
    initial_rows: bool = True,
    db: str = "shop",
    keyless_tables: bool = False,
) -> History:
    """A random history of about ``n_changes`` changes in what ``format_id`` can express.

    ``composite_keys=False`` keys every table by ``id`` alone; ``initial_rows=False`` starts
    from empty tables (the full load then reads only rows the stream inserted). Both avoid the
    histories of MODEL_GAPS in the checks against the source tables. ``db`` names the database
    of every table (the messages carry it): histories of several formats in one warehouse get
    one each, so their tables do not collide. ``keyless_tables=True`` makes some tables keyless
    (the first one always; see the module docstring), only for formats with ``keyless``.
    """
    if format_id not in CAPABILITIES:
        raise KeyError(f"no simulator capabilities for format {format_id!r}")
    if keyless_tables and not CAPABILITIES[format_id].keyless:
        raise ValueError(f"{format_id} cannot carry a table without a key (see CAPABILITIES)")
    return _Generator(format_id, seed, n_changes, n_tables, composite_keys, initial_rows, db, keyless_tables).run()


def truth_safe_options(format_id: str) -> dict[str, bool]:
    """generate_history options for the checks against the source tables: every kind of history,
    now that MODEL_GAPS is empty (kept so callers state the intent)."""
    if format_id not in CAPABILITIES:
        raise KeyError(f"no simulator capabilities for format {format_id!r}")
    return {"composite_keys": True, "initial_rows": True}


#: Where MirrorModel itself (not delivery) departs from the source tables. Empty since the model
#: takes a partial UPDATE's new key from before overlaid with after, and falls back to the
#: before-image when it does not hold the row (both pinned in tests/unit/test_simulator_model.py).
MODEL_GAPS: dict[str, str] = {}


# ---------------------------------------------------------------- delivery


@dataclass
class Delivery:
    messages: list[tuple[int, int, bytes]]  # (partition, offset, raw) in arrival order
    expected: dict[str, list[Row]]  # expected_rows(history)
    duplicates: int = 0
    partitions: int = 1


def _partition_of(change: Change, partitions: int) -> int:
    if change.op in ("TRUNCATE", "DDL"):
        ident = table_name(change)
    else:
        image = change.after if change.op != "DELETE" else change.before
        if change.op == "UPDATE" and change.before and change.changed is not None:
            image = {**change.before, **(change.after or {})}
        ident = table_name(change) + json.dumps([(image or {}).get(k) for k in change.key_columns])
    return zlib.crc32(ident.encode("utf-8")) % partitions


def deliver(history: History, seed: int, partitions: int = 3, dup_rate: float = 0.15) -> Delivery:
    """The history's messages as a queue delivers them (see the module docstring)."""
    rng = random.Random(seed * 7919 + 1)
    total = history.caps.total_order
    parts: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    for ch, raw in zip(history.changes, history.messages):
        parts[_partition_of(ch, partitions)].append(raw)
    streams: dict[int, list[tuple[int, bytes]]] = {}
    dups = 0
    for p, msgs in parts.items():
        seq = list(enumerate(msgs))
        if seq and rng.random() < dup_rate * 3:  # consumer restart: re-read from an earlier offset
            cut = rng.randint(1, len(seq))
            back = rng.randint(0, cut - 1)
            dups += cut - back
            seq = seq[:cut] + seq[back:]
        if total:
            for _ in range(sum(rng.random() < dup_rate for _ in msgs)):  # producer retries
                seq.insert(rng.randint(0, len(seq)), rng.choice(list(enumerate(msgs))))
                dups += 1
            if rng.random() < 0.5:
                rng.shuffle(seq)
        streams[p] = seq
    out: list[tuple[int, int, bytes]] = []
    cursors = {p: 0 for p in streams}
    while True:
        live = [p for p in streams if cursors[p] < len(streams[p])]
        if not live:
            break
        p = rng.choice(live)
        off, raw = streams[p][cursors[p]]
        cursors[p] += 1
        out.append((p, off, raw))
    return Delivery(out, expected_rows(history), dups, partitions)


def decode_delivery(history: History, delivery: Delivery) -> list[Change]:
    dec = get_decoder(history.format_id)
    return [ch for _p, _o, raw in delivery.messages for ch in dec.decode(raw, history.ctx)]


# ---------------------------------------------------------------- expectations and comparison


def model_rows(changes: Iterable[Change]) -> dict[str, list[Row]]:
    model = MirrorModel().add_all(changes)
    return {t: model.rows(t) for t in model.tables()}


def expected_rows(history: History) -> dict[str, list[Row]]:
    """The mirror the pipeline must produce: MirrorModel over the decoded changes in source order."""
    out = {t.qualified: [] for t in history.tables}
    out.update(model_rows(history.decoded))
    return out


_NUMERIC_FAMILIES = ("decimal", "int", "uint64", "float")


def _canonical(value: Any, col_type: str | None) -> str | None:
    """One text per value, so equal values are equal texts: numbers by value (``1.50`` = ``1.5``
    in a numeric column; JSON numbers of an export = their integer text), NULL as None."""
    if value is None:
        return None
    text = value if isinstance(value, str) else json.dumps(value) if isinstance(value, bool) else str(value)
    numeric = family(col_type) in _NUMERIC_FAMILIES if col_type else not isinstance(value, str)
    if not numeric:
        return text
    try:
        number = Decimal(text)
        return "0" if number.is_zero() else format(number.normalize(), "f")
    except InvalidOperation:
        return text


def _row_key(row: Row, key: tuple[str, ...]) -> tuple:
    return tuple(
        json.dumps(row.get(k) if isinstance(row.get(k), str) or row.get(k) is None else str(row.get(k))) for k in key
    )


def compare(
    expected: dict[str, list[Row]],
    exported: dict[str, list[dict]],
    keys: dict[str, tuple[str, ...]] | None = None,
    col_types: dict[str, dict[str, str]] | None = None,
) -> list[str]:
    """Differences between expected mirrors and exported (or modelled) ones, value for value.

    A column absent from a row equals NULL (a column added after the row was last written).
    Numbers compare by value (``1.50`` = ``1.5`` for DECIMAL; JSON integers = integer text).
    Rows are matched by ``keys[table]`` (default: every column of the table named
    ``id``/``k2``/``_id``). A table with no key (``keys[table] == ()``, or no such column) is a
    multiset: each distinct row must occur as often as expected.
    """
    diffs: list[str] = []
    for table in sorted(set(expected) | set(exported)):
        exp_rows, got_rows = expected.get(table, []), exported.get(table)
        if got_rows is None:
            if exp_rows:
                diffs.append(f"{table}: missing mirror ({len(exp_rows)} rows expected)")
            continue
        types = (col_types or {}).get(table, {})
        key = (
            keys[table]
            if keys and table in keys
            else tuple(c for c in ("id", "k2", "_id") if any(c in r for r in [*exp_rows, *got_rows]))
        )
        if not key:
            diffs += _multiset_diffs(table, exp_rows, got_rows, types)
            continue
        exp_by = {_row_key(r, key): r for r in exp_rows}
        got_by = {_row_key(r, key): r for r in got_rows}
        if len(got_by) != len(got_rows):
            diffs.append(f"{table}: exported rows repeat a key")
        for k in sorted(set(exp_by) - set(got_by)):
            diffs.append(f"{table} key {k}: expected row missing")
        for k in sorted(set(got_by) - set(exp_by)):
            diffs.append(f"{table} key {k}: unexpected row (deleted or never written): {got_by[k]}")
        for k in sorted(set(exp_by) & set(got_by)):
            e, g = exp_by[k], got_by[k]
            for c in sorted(set(e) | set(g)):
                if _canonical(e.get(c), types.get(c)) != _canonical(g.get(c), types.get(c)):
                    diffs.append(f"{table} key {k} column {c}: expected {e.get(c)!r}, got {g.get(c)!r}")
    return diffs


def _multiset_diffs(table: str, exp_rows: list[Row], got_rows: list[dict], types: dict[str, str]) -> list[str]:
    """Rows of a keyless table compared as multisets (absent column = NULL), with their counts."""
    columns = sorted({c for r in [*exp_rows, *got_rows] for c in r})

    def counted(rows: list) -> Counter:
        return Counter(tuple(_canonical(r.get(c), types.get(c)) for c in columns) for r in rows)

    exp, got = counted(exp_rows), counted(got_rows)
    return [
        f"{table} (no key): row {dict(zip(columns, row))} expected {exp[row]} times, got {got[row]}"
        for row in sorted(exp.keys() | got.keys(), key=lambda r: [(v is not None, v or "") for v in r])
        if exp[row] != got[row]
    ]


def truth_diffs(history: History) -> list[str]:
    """Where the expected mirror (model over decoded source order) differs from the source itself."""
    return compare(history.truth, expected_rows(history), keys=history.keys(), col_types=history.column_types())


# ---------------------------------------------------------------- landing file and config (Spark tests)


def landing_lines(history: History, delivery: Delivery) -> bytes:
    """One message per line (Base64 for binary formats), in arrival order."""
    binary = get_decoder(history.format_id).binary
    lines = [base64.b64encode(raw) if binary else raw for _p, _o, raw in delivery.messages]
    for line in lines:
        if b"\n" in line:
            raise ValueError("a message contains a newline; it cannot be a landing line")
    return b"\n".join(lines) + b"\n"


def pipeline_yaml(history: History, warehouse: str, quality_checks: bool = False) -> str:
    """A pipeline YAML for one history (its source path unused: ``lakecdc replay`` brings its own)."""
    return pipeline_yaml_many([history], warehouse, {history.format_id: warehouse + "/_unused"}, quality_checks)


def pipeline_yaml_many(
    histories: list[History], warehouse: str, landing_dirs: dict[str, str], quality_checks: bool = False
) -> str:
    """One pipeline over the histories of several formats: a ``path`` source per format (its
    landing directory ``landing_dirs[format_id]``), every table, each format's options.

    Tables must not collide (give each history its own ``db``); at most one history may need
    ``default_table`` (DebeziumSmt's messages name no table, and a pipeline has one default).
    """
    import yaml

    sources: list[dict[str, str]] = []
    tables: dict[str, dict[str, Any]] = {}
    format_options: dict[str, dict[str, Any]] = {}
    for h in histories:
        if any(s["format"] == h.format_id for s in sources):
            raise ValueError(f"two histories of format {h.format_id}: one source per format")
        clash = sorted(set(tables) & set(h.config_tables()))
        if clash:
            raise ValueError(f"{h.format_id}: tables {clash} are in another history too; give each its own db")
        sources.append({"name": f"sim_{h.format_id}", "format": h.format_id, "path": landing_dirs[h.format_id]})
        tables.update(h.config_tables())
        if h.caps.options:
            format_options[h.format_id] = dict(h.caps.options)
    default_tables = sorted({h.ctx.default_table for h in histories if h.ctx.default_table})
    if len(default_tables) > 1:
        raise ValueError(f"histories need different default tables {default_tables}; a pipeline has one")
    doc: dict[str, Any] = {
        "warehouse": warehouse,
        "quality_checks": quality_checks,
        "sources": sources,
        "tables": tables,
    }
    if default_tables:
        doc["default_table"] = default_tables[0]
    if format_options:
        doc["format_options"] = format_options
    return yaml.safe_dump(doc, allow_unicode=True, sort_keys=False)


# ---------------------------------------------------------------- soak


@dataclass
class SoakReport:
    format_id: str
    seed: int
    histories: int = 0
    changes: int = 0
    messages: int = 0
    duplicates: int = 0
    tables: int = 0
    keyless_tables: int = 0
    rows: int = 0
    mismatches: list[str] = field(default_factory=list)
    truth_mismatches: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.mismatches

    def summary(self) -> str:
        return (
            f"soak {self.format_id} seed {self.seed}: {self.histories} histories, {self.changes} changes, "
            f"{self.messages} messages delivered ({self.duplicates} duplicates), {self.tables} tables "
            f"({self.keyless_tables} without a key), "
            f"{self.rows} mirror rows; {len(self.mismatches)} delivery mismatches, "
            f"{len(self.truth_mismatches)} source mismatches; {self.seconds:.1f} s"
        )


def soak(
    format_id: str, changes: int, seed: int = 1, progress: Callable[[str], None] | None = print, history_size: int = 200
) -> SoakReport:
    """A long pure-Python check: encode → deliver → decode → model, against the model in source order.

    ``changes`` row changes in total, as histories of about ``history_size`` changes each
    (seeds ``seed``, ``seed + 1``, ...); every second history also has keyless tables where the
    format can express them. Each history is also checked against the source tables themselves
    (``truth_mismatches``). Returns (and reports through ``progress``) what it checked.
    """
    report = SoakReport(format_id, seed)
    began = time.monotonic()
    say = progress or (lambda _m: None)
    s = seed
    while report.changes < changes:
        size = min(history_size, changes - report.changes)
        keyless = CAPABILITIES[format_id].keyless and s % 2 == 1
        history = generate_history(
            format_id, s, n_changes=max(size, 1), keyless_tables=keyless, **truth_safe_options(format_id)
        )
        delivery = deliver(history, s, partitions=1 + s % 4)
        got = model_rows(decode_delivery(history, delivery))
        diffs = compare(
            delivery.expected,
            {t: got.get(t, []) for t in delivery.expected},
            keys=history.keys(),
            col_types=history.column_types(),
        )
        report.keyless_tables += sum(1 for t in history.tables if not t.key)
        report.mismatches += [f"seed {s}: {d}" for d in diffs]
        report.truth_mismatches += [f"seed {s}: {d}" for d in truth_diffs(history)]
        report.histories += 1
        report.changes += len(history.changes)
        report.messages += len(delivery.messages)
        report.duplicates += delivery.duplicates
        report.tables += len(history.tables)
        report.rows += sum(len(r) for r in delivery.expected.values())
        if report.histories % 10 == 0:
            say(f"soak {format_id}: {report.changes}/{changes} changes, {len(report.mismatches)} mismatches")
        s += 1
    report.seconds = time.monotonic() - began
    say(report.summary())
    for line in (report.mismatches + report.truth_mismatches)[:20]:
        say("  " + line)
    return report


__all__ = [
    "CAPABILITIES",
    "Capabilities",
    "Delivery",
    "History",
    "SoakReport",
    "TableDef",
    "compare",
    "decode_delivery",
    "deliver",
    "encodable_formats",
    "expected_rows",
    "generate_history",
    "landing_lines",
    "model_rows",
    "pipeline_yaml",
    "pipeline_yaml_many",
    "random_value",
    "soak",
    "truth_diffs",
    "truth_safe_options",
]
