"""The one small interface every vendor format implements.

A decoder turns one raw queue message (bytes) into zero or more canonical
:class:`Change` records, or rejects it by raising :class:`Reject` with a reason
that a person can act on. Silver routes the records: row changes to ``changes``,
``HEARTBEAT`` to ``heartbeats``, ``DDL`` to ``ddl_log``, rejects to
``quarantine``. The same decoder object serves ``lakecdc decode``, unit tests and
the Spark silver job, so each format has exactly one definition.

Canonical values (the text every decoder must produce for each column, whatever
the vendor wrote) are defined in :mod:`pipelines.values`.

The exact JSON reader every text format uses (duplicate keys, depth, width, numbers kept as text)
is :mod:`pipelines.formats.exact_json`; its names are importable from here too. Longer than 400 lines
because the decoder contract and the checks silver relies on for every change (storable text, names a
Delta mirror can hold apart, the message's budget) are defined together.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from pipelines.errors import InvalidValue, Reject
from pipelines.formats.exact_json import (  # noqa: F401 - served from here as before
    DEFAULT_MAX_DEPTH,
    DEFAULT_MAX_ELEMENTS,
    DEFAULT_MAX_WIDTH,
    Num,
    check_shape,
    dumps_exact,
    json_kind,
    loads_exact,
)
from pipelines.values import MAX_TYPE_CHARS

#: Row-change operations that go to the ``changes`` table.
ROW_OPS = ("INSERT", "UPDATE", "DELETE", "SNAPSHOT", "TRUNCATE")
#: Every op a decoder may emit.
OPS = ROW_OPS + ("DDL", "HEARTBEAT")

#: Default limit on one raw message. Kafka's own default ``message.max.bytes`` is
#: about 1 MiB; LOB-heavy OMS tables can exceed it, so we allow 16 MiB and
#: quarantine anything larger (``limits.max_message_bytes`` in the YAML).
DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024
#: Longest ordering component: silver sorts sequences as 20-digit zero-padded text.
MAX_SEQ_DIGITS = 20
#: The text one message may give silver (every name, value, type and statement of its changes, as
#: silver stores them: col_types once per change) is at most OUTPUT_RATIO × its bytes + OUTPUT_SLACK
#: characters. Real messages stay below: an UPDATE of short values is about 2× (two images), and
#: the extreme real shape, thousands of one-character rows of a table whose one column is a
#: 900-character ENUM, about 40× (its type repeated per row). A message of 1,000 column types and
#: 10,000 empty rows asked for 10 million col_types entries (1,270×).
OUTPUT_RATIO = 64
OUTPUT_SLACK = 1 << 20


class Image(dict):
    """A row image (column → canonical text) that also remembers the columns whose value the source
    holds as invalid (:class:`~pipelines.errors.InvalidValue`): they read NULL here, and ``invalid``
    keeps their raw text."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.invalid: dict[str, str] = {}


def canon_image(items: Iterable[tuple[str, Any]], convert: Callable[[str, Any], str | None]) -> Image:
    """Convert each (column, value); a value the source holds as invalid becomes NULL, noted in ``invalid``."""
    image = Image()
    for column, value in items:
        try:
            image[column] = convert(column, value)
        except InvalidValue as exc:
            image[column] = None
            image.invalid[column] = exc.raw
    return image


@dataclass(frozen=True)
class TableSpec:
    """What configuration knows about a source table (used where messages are silent).

    ``columns`` maps column name to the source type as the vendor writes it
    (``decimal(38,24)``, ``bigint unsigned``, ``datetime``, ``blob`` ...).
    """

    key: tuple[str, ...] = ()
    columns: Mapping[str, str] = field(default_factory=dict)


@dataclass
class DecodeContext:
    """Everything a decoder may consult besides the message itself."""

    tables: Mapping[str, TableSpec] = field(default_factory=dict)  # key: "db.table", lower case
    default_table: str | None = None  # "db.table" for formats whose messages name none (DebeziumSmt)
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    max_depth: int = DEFAULT_MAX_DEPTH
    options: Mapping[str, Any] = field(default_factory=dict)  # per-format options (e.g. drs_avro schema)
    max_width: int = DEFAULT_MAX_WIDTH  # elements of one JSON array / object
    max_elements: int = DEFAULT_MAX_ELEMENTS  # elements of one message, all levels

    def table_spec(self, db: str | None, table: str | None) -> TableSpec | None:
        if table is None:
            return None
        name = f"{db}.{table}" if db else table
        return self.tables.get(name.lower())

    def column_types(self, db: str | None, table: str | None) -> dict[str, str]:
        spec = self.table_spec(db, table)
        return dict(spec.columns) if spec else {}

    def key_columns(self, db: str | None, table: str | None) -> tuple[str, ...]:
        spec = self.table_spec(db, table)
        return tuple(spec.key) if spec else ()


@dataclass
class Budget:
    """What one message may make silver store (see :data:`OUTPUT_RATIO`), spent change by change."""

    size: int  # bytes of the message (value and key)
    value_chars: int  # longest value: the limits' max_message_bytes
    spent: int = 0
    #: id → (change, its text, its longest value) of each change charged (held: its id stays its own)
    charged: dict[int, tuple[Change, int, int]] = field(default_factory=dict)

    @property
    def limit(self) -> int:
        return OUTPUT_RATIO * self.size + OUTPUT_SLACK

    def spend(self, change: Change) -> None:
        chars, longest = change_text(change)
        self.charged[id(change)] = (change, chars, longest)
        self.spent += chars
        self.check(self.spent, longest)

    def sizes(self, change: Change) -> tuple[int, int]:
        """(text, longest value) of a change, as charged when it was made (decoders do not change a
        change's images afterwards), else counted now."""
        hit = self.charged.get(id(change))
        return (hit[1], hit[2]) if hit is not None and hit[0] is change else change_text(change)

    def check(self, chars: int, longest: int) -> None:
        """Reject when ``chars`` of text in all or one value of ``longest`` characters exceed the budget."""
        if longest > self.value_chars:
            raise Reject(
                f"a decoded value is longer than {self.value_chars} characters (limits.max_message_bytes): "
                "the message's values would outgrow the message"
            )
        if chars > self.limit:
            raise Reject(
                f"the message's changes come to over {self.limit} characters of text, its budget "
                f"({OUTPUT_RATIO} × its {self.size} bytes + {OUTPUT_SLACK}): a message may not multiply itself"
            )


_BUDGET: ContextVar[Budget | None] = ContextVar("lakecdc_message_budget", default=None)


@contextmanager
def message_budget(size: int, max_value_chars: int) -> Iterator[Budget]:
    """While one message is decoded: every :class:`Change` created is charged to its budget (so a
    message that would outgrow it stops at the change that crosses it, before the rest is built)."""
    budget = Budget(size, max_value_chars)
    token = _BUDGET.set(budget)
    try:
        yield budget
    finally:
        _BUDGET.reset(token)


def change_text(ch: Change) -> tuple[int, int]:
    """(characters of text silver stores for a change, longest value): names, values, types, statement,
    invalid texts. (0, 0) for a change that is not text where it should be: :func:`check_changes` names it."""
    try:
        total = sum(len(t) for t in (ch.db, ch.table, ch.schema, ch.event_time, ch.txn, ch.ddl, ch.detail) if t)
        total += sum(map(len, ch.key_columns)) + sum(map(len, ch.changed or ()))
        longest = 0
        for image in (ch.before, ch.after):
            if image:
                lengths = list(map(len, filter(None, image.values())))  # NULL (and "") add nothing
                total += sum(map(len, image)) + sum(lengths)
                longest = max(longest, max(lengths, default=0))
        for mapping in (ch.col_types, ch.invalid):
            if mapping:
                total += sum(map(len, mapping)) + sum(map(len, mapping.values()))
        return total, longest
    except (TypeError, AttributeError):
        return 0, 0


#: When a field of :class:`Change` shows in its JSON view (the ``json_when`` of the field's metadata).
JSON_ALWAYS, JSON_ROW_OPS, JSON_DDL, JSON_WHEN_SET = "always", "row ops", "ddl", "when set"


def _shown(when: str, *, key: str | None = None) -> dict[str, str]:
    """A field's metadata for the JSON view: when it shows, and its key there (its name unless ``key``)."""
    return {"json_when": when, "json_key": key} if key else {"json_when": when}


@dataclass
class Change:
    """One canonical record (silver's contract, see DESIGN.md).

    Images map column name to canonical text (:mod:`pipelines.values`) or ``None``
    for SQL NULL. A column that is *absent* from an image was not carried by the
    message (partial image); a column present with ``None`` was set to NULL.

    The fields are declared once, here: silver stores each under its name (their Spark types are
    :data:`pipelines.layout.DECODED_FIELDS`), and the JSON view (:meth:`to_json_dict`) shows them in
    this order, as each field's metadata says.
    """

    op: str  # one of OPS
    db: str | None = None
    schema: str | None = None
    table: str | None = None
    key_columns: tuple[str, ...] = field(default=(), metadata=_shown(JSON_ROW_OPS, key="key"))
    before: dict[str, str | None] | None = field(default=None, metadata=_shown(JSON_ROW_OPS))
    after: dict[str, str | None] | None = field(default=None, metadata=_shown(JSON_ROW_OPS))
    #: columns a partial image carries; None for full images
    changed: tuple[str, ...] | None = field(default=None, metadata=_shown(JSON_ROW_OPS))
    #: source types the message (or config) states
    col_types: dict[str, str] | None = field(default=None, metadata=_shown(JSON_ROW_OPS))
    ddl: str | None = field(default=None, metadata=_shown(JSON_DDL))  # DDL statement text (op DDL)
    #: column → raw text of a value the source holds as invalid
    invalid: dict[str, str] | None = field(default=None, metadata=_shown(JSON_WHEN_SET))
    seq: tuple[int, ...] = ()  # vendor ordering components, compared as a tuple of integers
    event_time: str | None = None  # commit time at the source: ISO-8601 UTC ending in Z
    txn: str | None = None
    detail: str | None = None  # vendor's own op/ddlType/heartbeat kind, for the logs

    def __post_init__(self) -> None:
        if self.invalid is None:
            found = {**getattr(self.before, "invalid", {}), **getattr(self.after, "invalid", {})}
            self.invalid = found or None
        budget = _BUDGET.get()
        if budget is not None:  # decoding one message: its budget pays for the change as it is made
            budget.spend(self)

    def to_json_dict(self) -> dict[str, Any]:
        """The stable JSON shape printed by ``lakecdc decode``: the fields in their declared order, tuples
        as lists; the row fields for a row op only, the statement for DDL only, ``invalid`` when set."""
        shown = {JSON_ALWAYS: True, JSON_ROW_OPS: self.op in ROW_OPS, JSON_DDL: self.op == "DDL"}
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            when = f.metadata.get("json_when", JSON_ALWAYS)
            if bool(value) if when == JSON_WHEN_SET else shown[when]:
                out[f.metadata.get("json_key", f.name)] = list(value) if isinstance(value, tuple) else value
        return out


def check_changes(changes: Any, budget: Budget | None = None) -> list[Change]:
    """The decoded changes if silver can store every one of them exactly, else Reject naming the field.

    One check for every decoder (silver's ``decode_message`` calls it): a list of :class:`Change`,
    each op known, every name, value, type, key, detail and statement a ``str`` that UTF-8 can
    encode (a lone surrogate such as ``"t\\ud800"`` cannot; it would fail the whole Arrow batch),
    type names at most :data:`MAX_TYPE_CHARS` long, and ``seq`` non-negative integers of at most
    :data:`MAX_SEQ_DIGITS` digits (silver sorts them as fixed-width text). With the message's
    ``budget``, the text of all changes (counted again, whatever happened to them after they were
    made) within it, and no value longer than its per-value limit.
    """
    if not isinstance(changes, list) or not all(isinstance(ch, Change) for ch in changes):
        raise Reject(f"decoder returned {type(changes).__name__}, not a list of changes")
    if budget is not None:
        sizes = [budget.sizes(ch) for ch in changes]
        budget.check(sum(chars for chars, _ in sizes), max((longest for _, longest in sizes), default=0))
    named: set[tuple] = set()  # the names of changes checked already: a message's rows share them
    for ch in changes:
        if not _storable(ch):
            _check_change(ch)
        if ch.op in ROW_OPS:
            names = (ch.key_columns, tuple(ch.before or ()), tuple(ch.after or ()))
            if names not in named:
                check_names(ch)
                named.add(names)
    return changes


def check_names(ch: Change) -> None:
    """Reject a change whose columns a Delta mirror cannot hold apart: two names that differ only in case
    (``Name`` and ``name``: Delta compares column names without case, and CREATE TABLE would fail with
    COLUMN_ALREADY_EXISTS), or a key that names one column twice (``pkNames: ["id","Id"]``: the MERGE
    would fail with AMBIGUOUS_REFERENCE_TO_FIELDS). Across messages gold refuses the same
    (:func:`pipelines.gold.schema.refuse_name_clashes`)."""
    seen: dict[str, str] = {}
    for name in ch.key_columns:
        other = seen.setdefault(name.upper().lower(), name)
        if other != name or ch.key_columns.count(name) > 1:
            raise Reject(
                f"the key names one column twice: {other[:60]!a} and {name[:60]!a} (Delta compares column names "
                "without case)"
            )
    seen = {}
    for image in (ch.before, ch.after):
        for name in image or ():
            other = seen.setdefault(name.upper().lower(), name)
            if other != name:
                raise Reject(
                    f"columns {other[:60]!a} and {name[:60]!a} differ only in case: a Delta mirror cannot hold both "
                    "(it compares column names without case)"
                )


def _storable(ch: Change) -> bool:
    """The common case of :func:`check_changes` at the cost of a few joins: every text of the change
    is a ``str`` that encodes (joined, since a text encodes exactly when each of its pieces does), its
    types are short enough and its ``seq`` sortable. False sends the change to :func:`_check_change`,
    which names what is wrong."""
    try:
        texts = [
            "".join(t for t in (ch.db, ch.table, ch.schema, ch.event_time, ch.txn, ch.ddl, ch.detail) if t is not None),
            "".join(ch.key_columns),
            "".join(ch.changed or ()),
            "".join(ch.col_types or {}),
            "".join((ch.col_types or {}).values()),
            "".join(ch.invalid or {}),
            "".join((ch.invalid or {}).values()),
        ]
        for image in (ch.before, ch.after):
            if image is not None:
                texts.append("".join(image))
                texts.append("".join(v for v in image.values() if v is not None))
    except (TypeError, AttributeError):  # something is not text, or not the container it should be
        return False
    if not isinstance(ch.key_columns, tuple) or not isinstance(ch.changed, (tuple, type(None))):
        return False
    if any(not (isinstance(i, dict) or i is None) for i in (ch.before, ch.after)):
        return False
    if ch.op not in OPS or not isinstance(ch.seq, tuple):
        return False
    if any(type(part) is not int or not 0 <= part < 10**MAX_SEQ_DIGITS for part in ch.seq):
        return False
    if ch.col_types and max(map(len, ch.col_types.values())) > MAX_TYPE_CHARS:
        return False
    text = "".join(texts)
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _check_change(ch: Change) -> None:
    """Reject naming the first thing silver cannot store about ``ch`` (:func:`check_changes`)."""
    if ch.op not in OPS:
        raise Reject(f"decoder returned an unknown op {str(ch.op)[:40]!a}")
    for name in ("db", "table", "schema", "event_time", "txn", "ddl", "detail"):
        _check_text(getattr(ch, name), name, optional=True)
    for name in ("key_columns", "changed"):
        names = getattr(ch, name)
        if names is None and name == "changed":
            continue
        if not isinstance(names, tuple):
            raise Reject(f"{name} should be a tuple of column names")
        for column in names:
            _check_text(column, f"a column name in {name}")
    for name in ("before", "after"):
        image = getattr(ch, name)
        if image is None:
            continue
        if not isinstance(image, dict):
            raise Reject(f"the {name} image should be a mapping of column → value")
        for column, value in image.items():
            _check_text(column, f"a column name in the {name} image")
            _check_text(value, f"column {column[:60]!a} in the {name} image", optional=True)
    for column, text in (ch.invalid or {}).items():
        _check_text(column, "a column name in invalid")
        _check_text(text, f"the invalid value of column {column[:60]!a}")
    for column, source_type in (ch.col_types or {}).items():
        _check_text(column, "a column name in col_types")
        _check_text(source_type, f"the type of column {column[:60]!a}")
        if len(source_type) > MAX_TYPE_CHARS:
            raise Reject(
                f"the type of column {column[:60]!a} is longer than {MAX_TYPE_CHARS} characters: "
                f"{source_type[:60]!a}..."
            )
    if not isinstance(ch.seq, tuple):
        raise Reject("seq should be a tuple of integers")
    for part in ch.seq:
        if isinstance(part, bool) or not isinstance(part, int) or part < 0 or part >= 10**MAX_SEQ_DIGITS:
            raise Reject(
                f"ordering component {str(part)[:40]!a} is not a non-negative integer of at most "
                f"{MAX_SEQ_DIGITS} digits"
            )


def _check_text(value: Any, what: str, optional: bool = False) -> None:
    if value is None and optional:
        return
    if not isinstance(value, str):
        raise Reject(f"{what} should be text, got {type(value).__name__}")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise Reject(
                f"{what} is not valid Unicode ({exc.reason} at character {exc.start}): "
                f"{value[max(0, exc.start - 20) : exc.start + 20]!a}"
            ) from None


class Decoder(ABC):
    """One vendor format. Subclasses fill the class attributes that docs/formats.md shows (``lakecdc formats``)."""

    format_id: ClassVar[str]
    seeds: ClassVar[str]  # seed files that specify it, e.g. "000, 001"
    ordering: ClassVar[str]  # the ordering the decoder extracts into Change.seq
    table_and_key: ClassVar[str]  # where it finds the table and the key
    type_mapping: ClassVar[str]  # how it maps source types to canonical values
    quirks: ClassVar[tuple[str, ...]] = ()  # "quirk handled (seed NNN)"
    binary: ClassVar[bool] = False  # True for Avro formats: the message is not text
    #: True where a field missing from a full image means NULL, not a dropped column (documents).
    schemaless: ClassVar[bool] = False

    @abstractmethod
    def decode(self, raw: bytes, ctx: DecodeContext) -> list[Change]:
        """Decode one message, or raise Reject(reason)."""

    def decode_record(self, key: bytes | None, value: bytes | None, ctx: DecodeContext) -> list[Change]:
        """Decode one queue record (its key and value, as bronze keeps them), or raise Reject(reason).

        Most formats read the value only, and a null value (a Kafka tombstone, an empty landing
        line) is rejected. A format whose records use the key (Debezium: the key when the value
        has none; tombstones) overrides this.
        """
        if value is None:
            raise Reject("message value is null (a Kafka tombstone or an empty landing line)")
        return self.decode(value, ctx)

    def encode(self, change: Change, ctx: DecodeContext) -> bytes:
        """Write a Change the way the vendor would (simulator, round-trip tests)."""
        raise NotImplementedError(f"{self.format_id} has no encoder")

    def check_size(self, raw: bytes, ctx: DecodeContext) -> None:
        if len(raw) > ctx.max_message_bytes:
            raise Reject(f"message is {len(raw)} bytes, over the limit of {ctx.max_message_bytes}")


class JsonDecoder(Decoder):
    """Base for text formats: size, UTF-8, exact JSON, top-level object, then ``decode_object``.

    A message of the wrong shape that trips a lookup inside ``decode_object`` (a list where an
    object belongs, a missing nested field) is rejected here, naming the format and the error.
    """

    def decode(self, raw: bytes, ctx: DecodeContext) -> list[Change]:
        self.check_size(raw, ctx)
        obj = loads_exact(raw, ctx.max_depth, ctx.max_width, ctx.max_elements)
        if not isinstance(obj, dict):
            raise Reject(f"expected a JSON object, got {json_kind(obj)}")
        try:
            return self.decode_object(obj, ctx)
        except Reject:
            raise
        except (LookupError, TypeError, ValueError, AttributeError, ArithmeticError) as exc:
            raise Reject(f"malformed {self.format_id} message: {type(exc).__name__}: {exc}") from None

    @abstractmethod
    def decode_object(self, obj: dict[str, Any], ctx: DecodeContext) -> list[Change]:
        """Decode one parsed message object, or raise Reject(reason)."""


# ---------------------------------------------------------------- small shared helpers


def is_kind(value: Any, kind: type | tuple[type, ...]) -> bool:
    """isinstance, except that a JSON number (:class:`Num`, a str subclass) is not a string."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if isinstance(value, Num):
        return Num in kinds
    if isinstance(value, bool):
        return bool in kinds
    return isinstance(value, kinds)


def require(obj: Mapping[str, Any], name: str, kind: type | tuple[type, ...] = str) -> Any:
    """Fetch a field that must be present and non-null, or Reject naming it."""
    value = obj.get(name)
    if value is None:
        raise Reject(f"missing field '{name}'")
    if not is_kind(value, kind):
        raise Reject(f"field '{name}' should be {_kind_name(kind)}, got {json_kind(value)}")
    return value


def optional(obj: Mapping[str, Any], name: str, kind: type | tuple[type, ...] = str) -> Any:
    """Fetch a field that may be absent or null; Reject if present with the wrong kind."""
    value = obj.get(name)
    if value is not None and not is_kind(value, kind):
        raise Reject(f"field '{name}' should be {_kind_name(kind)}, got {json_kind(value)}")
    return value


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    names = {dict: "an object", list: "an array", str: "a string", Num: "a number", bool: "a boolean"}
    return " or ".join(names.get(k, k.__name__) for k in kinds)


def seq_int(value: Any, field_name: str) -> int:
    """An ordering field (number or digit string of at most 20 digits) as an int, or Reject."""
    text = str(value).strip() if value is not None and not isinstance(value, bool) else ""
    if not (text.isascii() and text.isdigit()):
        raise Reject(f"ordering field '{field_name}' is not a non-negative integer: {str(value)[:40]!r}")
    if len(text.lstrip("0")) > MAX_SEQ_DIGITS:
        raise Reject(f"ordering field '{field_name}' has more than {MAX_SEQ_DIGITS} digits: {text[:40]!r}...")
    return int(text)


def op_name(text: str) -> str:
    """A vendor op name a decoder folds to its table's case: ASCII only, else Reject. ``str.upper()``
    maps ``ı`` to ``I`` and ``ſ`` to ``S``, so ``ıNSERT`` and ``INſERT`` would read as INSERT."""
    if not text.isascii():
        raise Reject(f"unknown op {text[:40]!a}: op names are ASCII")
    return text


def split_table(qualified: str) -> tuple[str | None, str]:
    """``db.table`` → (db, table); a name without a dot has no db."""
    db, dot, table = qualified.rpartition(".")
    return (db or None, table) if dot else (None, qualified)


def iter_nonnull(values: Iterable[Any]) -> Iterable[Any]:
    return (v for v in values if v is not None)
