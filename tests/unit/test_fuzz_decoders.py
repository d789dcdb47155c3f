"""Fuzzing every decoder and silver's batch function with mutated messages (issue 10).

Each format starts from its own fixtures (tests/fixtures/seeds, tests/fixtures/avro, the Flink
Maxwell corpus; ``auto`` from all of them) and hypothesis mutates them: byte flips, truncation,
values of the wrong JSON type, lone surrogates, huge numbers, deep and wide nesting, duplicated
keys, huge strings, hostile type names and zones; Avro records get wild charsets, date parts and
ids. For every message:

* the decoder returns changes or raises :class:`Reject`, nothing else;
* silver's path (``decode_message``) yields canonical changes — a known op, every string one
  UTF-8 can encode, images of text, ``seq`` integers of at most 20 digits — or a Reject;
* every value of a typed column has its family's canonical shape (ASCII digits, four-digit years,
  a finite DOUBLE, Base64 bytes: :data:`SHAPES`), and the text of all changes stays within the
  message's budget (64 × its bytes + 1 MiB);
* it takes less than :data:`SECONDS_PER_MESSAGE` for a message of up to 64 KiB, proportionally more
  for a larger one (a hang and superlinear-cost detector, not a benchmark: the slowest random
  message takes under 0.1 s);
* ``make_decode_batches`` never raises and gives every bronze row at least one silver row.

The poisons include issue 26's classes (other scripts' digits and ``_`` in numbers, confusable op
names, widths past 64 bits, long type names, negative and pre-1000 times); tests/unit/test_fuzz_values.py
aims at each class with an oracle. CI runs a short slice, derandomised so it is the same every
run; ``make fuzz`` sets ``LAKECDC_FUZZ_EXAMPLES`` for a longer, random one.
"""

from __future__ import annotations

import io
import json
import os
import re
import time
from pathlib import Path
from typing import Any

import fastavro
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from pipelines.formats import ALL_FORMAT_IDS, DecodeContext, Reject, get_decoder
from pipelines.formats._dts_record import PARSED_BORN, read_record
from pipelines.formats.base import OPS, Change, TableSpec
from pipelines.silver import decode_message
from tests.conftest import CONFORMANCE, ROOT, SEEDS_FIXTURES
from tests.unit._carriers import silver

pytestmark = pytest.mark.fuzz

#: Examples per format; ``make fuzz`` raises it (and turns derandomisation off).
EXAMPLES = int(os.environ.get("LAKECDC_FUZZ_EXAMPLES", "60"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize="LAKECDC_FUZZ_EXAMPLES" not in os.environ,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    # LAKECDC_FUZZ_NO_SHRINK=1: report the first failing example (for checking older, slower code)
    phases=[Phase.explicit, Phase.reuse, Phase.generate] if os.environ.get("LAKECDC_FUZZ_NO_SHRINK") else list(Phase),
)
#: The watchdog: this long for a message of up to WATCHDOG_BYTES, proportionally more for a larger one.
SECONDS_PER_MESSAGE = 2.0
WATCHDOG_BYTES = 64 * 1024
AVRO_DIR = ROOT / "tests" / "fixtures" / "avro"
BRONZE_DDL = "source STRING, format STRING, value BINARY, position STRING, queue_pos STRING, ingest_time TIMESTAMP"
CONTEXT = DecodeContext(
    default_table="shop.t",
    tables={
        "shop.t": TableSpec(key=("field1",), columns={"field1": "bigint", "ts": "timestamp", "d": "decimal(10,2)"}),
        "database.table": TableSpec(columns={"col1": "datetime", "col14": "timestamp"}),
    },
    options={"schema": str(ROOT / "conf" / "schemas" / "drs_record.avsc")},
)


# ---------------------------------------------------------------- fixtures per format


def _lines(path: Path) -> list[bytes]:
    return [line for line in path.read_bytes().splitlines() if line.strip()] if path.exists() else []


def _avro(fmt: str) -> list[bytes]:
    return [p.read_bytes() for p in sorted((AVRO_DIR / fmt).glob("*.avro"))]


def fixtures(fmt: str) -> list[bytes]:
    if fmt == "maxwell":
        return _lines(CONFORMANCE / "flink" / "maxwell-data.txt") or [
            b'{"database":"d","table":"t","type":"insert","ts":1,"data":{"id":1}}'
        ]
    if fmt == "auto":
        return [m for f in ALL_FORMAT_IDS if f not in ("auto", "drs_avro", "maxwell") for m in fixtures(f)]
    if get_decoder(fmt).binary:
        return _avro(fmt)
    return _lines(SEEDS_FIXTURES / f"{fmt}.jsonl")


FIXTURES = {fmt: fixtures(fmt) for fmt in ALL_FORMAT_IDS}


def test_every_format_has_fixtures_to_start_from():
    assert all(FIXTURES[fmt] for fmt in ALL_FORMAT_IDS), [f for f in ALL_FORMAT_IDS if not FIXTURES[f]]


# ---------------------------------------------------------------- JSON mutations


class Raw(str):
    """JSON text written as it is (numbers no float can hold, deep nesting)."""


class Pairs(list):
    """A JSON object written from its (key, value) pairs: the way to write a duplicated key."""


def dumps(value: Any) -> str:
    if isinstance(value, Pairs):
        return "{" + ",".join(f"{json.dumps(k)}:{dumps(v)}" for k, v in value) + "}"
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(str(k))}:{dumps(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(dumps(v) for v in value) + "]"
    if isinstance(value, Raw):
        return str.__str__(value)
    return json.dumps(value)  # lone surrogates are written as \ud800 escapes, as a hostile producer would


NASTY_TEXT = st.sampled_from(
    [
        "\ud800",
        "a\udfffb",
        "",
        " ",
        "null",
        "NaN",
        "0000-00-00 00:00:00",
        "2020-11-25 00:01:02 America",
        "2020-13-45 25:61:61",
        "-838:59:59",
        "1e999999999",
        "9" * 400,
        "-" + "9" * 30,
        "a" + " " * 70 + "!",
        "decimal(12,2",
        "varchar(" + "9" * 5000 + ")",
        "[106, 103, 999]",
        '{"$oid": 1}',
        "\x00",
        "%%%",
        "2147483648:1",
        "AAAA",
        'ObjectId("zz")',
        'NumberLong("x")',
        "ISODate(1e99)",
        "é\u0301",
        "\U0001f600",
        # issue 26: other scripts' digits, digit grouping, confusable letters, widths, signs and years
        "1E\uff11\uff10\uff10\uff10\uff10\uff10",
        "\u0661\u0662",
        "\U0001d7cf\U0001d7ce",
        "1_0",
        "\u0131NSERT",
        "IN\u017fERT",
        "bit(800000000)",
        "bit(65)",
        "enum(" + ",".join(f"'m{i}'" for i in range(300)) + ")",
        "-00:00:00.000001",
        "-838:59:59.999999999",
        "0999-12-31 23:59:59",
        "0001-01-01T00:00:00Z",
        "1e400",
        "4.9e-324",
    ]
)
NASTY_SCALAR = st.one_of(
    NASTY_TEXT,
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.sampled_from(
        [
            Raw("1e400"),
            Raw("-0"),
            Raw("1" + "0" * 30),
            Raw("0.000000000000000000001"),
            Raw("1E+999999999"),
            Raw("123456789012345678901234567890"),
            Raw("-1"),
            Raw("18446744073709551616"),
            Raw("-1000"),
            Raw("-62135596800000"),
            Raw("1e-400"),
        ]
    ),
    st.text(max_size=20),
)


def nested(depth: int) -> Raw:
    """``depth`` levels of arrays, as text (no recursion to write it)."""
    return Raw("[" * depth + "1" + "]" * depth)


def wide(n: int) -> Raw:
    return Raw("[" + "0," * (n - 1) + "0]")


#: Big poisons, written once (as JSON text) and reused by every example.
DEEP = {n: nested(n) for n in (10, 70, 500)}
WIDE = {n: wide(n) for n in (1000, 100_001, 600_000)}
HUGE = {(ch, n): Raw(json.dumps(ch * n)) for ch in ("x", "\u00e9", "9", ",[{") for n in (10_000, 1_000_000)}


@st.composite
def nasty_value(draw) -> Any:
    kind = draw(st.sampled_from(["scalar", "scalar", "scalar", "list", "dict", "deep", "wide", "huge", "dup"]))
    if kind == "scalar":
        return draw(NASTY_SCALAR)
    if kind == "list":
        return draw(st.lists(NASTY_SCALAR, max_size=4))
    if kind == "dict":
        return draw(st.dictionaries(st.text(max_size=5), NASTY_SCALAR, max_size=4))
    if kind == "deep":
        return DEEP[draw(st.sampled_from(sorted(DEEP)))]
    if kind == "wide":
        return WIDE[draw(st.sampled_from(sorted(WIDE)))]
    if kind == "huge":
        return HUGE[draw(st.sampled_from(sorted(HUGE)))]
    return Pairs([("a", 1), ("a", draw(NASTY_SCALAR))])


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value[:20]):
            out += _paths(v, prefix + (i,))
    return out


def _replace(value: Any, path: tuple, new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {k: (_replace(v, rest, new) if k == head else v) for k, v in value.items()}
    return [(_replace(v, rest, new) if i == head else v) for i, v in enumerate(value)]


def _duplicate_key(value: Any, path: tuple, other: Any) -> Any:
    """The object at ``path`` with its first key written twice (last one ``other``)."""
    target = value
    for part in path:
        target = target[part]
    if not isinstance(target, dict) or not target:
        return value
    key = next(iter(target))
    return _replace(value, path, Pairs([*target.items(), (key, other)]))


def _rename_key(value: Any, path: tuple, name: str) -> Any:
    target = value
    for part in path:
        target = target[part]
    if not isinstance(target, dict) or not target:
        return value
    key = next(iter(target))
    return _replace(value, path, Pairs([(name if k == key else k, v) for k, v in target.items()]))


@st.composite
def json_mutant(draw, raw: bytes) -> bytes:
    try:
        doc = json.loads(raw)
    except ValueError:
        return raw
    # documents nested as text (Mongo value/where, Avro-like strings) are mutated as text below
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(doc)
        path = draw(st.sampled_from(paths))
        action = draw(st.sampled_from(["value", "value", "value", "dup", "rename", "drop"]))
        if action == "value":
            doc = _replace(doc, path, draw(nasty_value()))
        elif action == "dup":
            doc = _duplicate_key(doc, path, draw(NASTY_SCALAR))
        elif action == "rename":
            doc = _rename_key(doc, path, draw(st.sampled_from(["\ud800", "", "a" * 1000, "type", "id", "op"])))
        elif path:
            parent = doc
            for part in path[:-1]:
                parent = parent[part]
            if isinstance(parent, dict):
                doc = _replace(doc, path[:-1], {k: v for k, v in parent.items() if k != path[-1]})
        if isinstance(doc, Pairs):
            break  # a duplicated key at the top: nothing more to walk
    return dumps(doc).encode("utf-8", "surrogatepass")


@st.composite
def byte_mutant(draw, raw: bytes) -> bytes:
    data = bytearray(raw)
    action = draw(st.sampled_from(["flip", "truncate", "insert", "repeat"]))
    if action == "truncate" or not data:
        return bytes(data[: draw(st.integers(0, max(0, len(data) - 1)))])
    if action == "flip":
        for _ in range(draw(st.integers(1, 8))):
            data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
        return bytes(data)
    at = draw(st.integers(0, len(data)))
    if action == "insert":
        poison = draw(st.sampled_from([b"\xff", b"\xed\xa0\x80", b"\\ud800", b'"', b"{", b",", b"\x00"]))
        return bytes(data[:at]) + poison + bytes(data[at:])
    return bytes(data) * draw(st.integers(2, 50))


# ---------------------------------------------------------------- Avro record mutations


def _datetime(draw) -> dict:
    part = st.one_of(st.none(), st.integers(-(2**31), 2**31 - 1), st.integers(-2, 70))
    return {k: draw(part) for k in ("year", "month", "day", "hour", "minute", "second", "millis")}


@st.composite
def avro_value(draw) -> Any:
    ns = "com.alibaba.dts.formats.avro."
    kind = draw(st.sampled_from(["Character", "DateTime", "Timestamp", "Integer", "Decimal", "TimestampWithTimeZone"]))
    if kind == "Character":
        charset = draw(
            st.sampled_from(
                [
                    "utf8mb4",
                    "gbk",
                    "binary",
                    "rot13",
                    "hex",
                    "zlib",
                    "unicode_escape",
                    "utf-7",
                    "raw_unicode_escape",
                    "utf16",
                    "latin1",
                    "",
                    "UTF-8",
                    "nope",
                ]
            )
        )
        return (ns + kind, {"charset": charset, "value": draw(st.binary(max_size=12))})
    if kind == "DateTime":
        return (ns + kind, _datetime(draw))
    if kind == "Timestamp":
        return (
            ns + kind,
            {"timestamp": draw(st.integers(-(2**63), 2**63 - 1)), "millis": draw(st.integers(-(2**31), 2**31 - 1))},
        )
    if kind == "TimestampWithTimeZone":
        return (
            ns + kind,
            {
                "value": _datetime(draw),
                "timezone": draw(
                    st.sampled_from(["+08:00", "Asia/Shanghai", "America", "../x", "\ud800", "GMT+8", ""])
                ),
            },
        )
    text = draw(NASTY_TEXT)
    if kind == "Integer":
        return (ns + kind, {"precision": 8, "value": text})
    return (ns + kind, {"value": text, "precision": draw(st.integers(-5, 80)), "scale": draw(st.integers(-5, 80))})


@st.composite
def avro_mutant(draw, raw: bytes) -> bytes:
    try:
        record, _newer = read_record(raw)
    except Reject:
        return raw
    record = dict(record, bornTimestamp=0)
    action = draw(st.sampled_from(["image", "image", "id", "names", "tags"]))
    if action == "id":
        record["id"] = draw(st.sampled_from([-1, -(2**63), 2**63 - 1, 0]))
    elif action == "names":
        record["objectName"] = draw(st.sampled_from(["a.b.c.d", "", ".", "x" * 5000, "db.t\ud800"]))
    elif action == "tags":
        record["tags"] = {"pk_uk_info": draw(st.sampled_from(['{"PRIMARY": ["nope"]}', "[", '{"PRIMARY": 5}', "{}"]))}
    else:
        for part in ("beforeImages", "afterImages"):
            items = record.get(part)
            if isinstance(items, list) and items:
                i = draw(st.integers(0, len(items) - 1))
                items[i] = draw(avro_value())
    buf = io.BytesIO()
    try:
        fastavro.schemaless_writer(buf, PARSED_BORN, record)
    except Exception:  # noqa: BLE001 - a value the writer cannot encode (e.g. a surrogate): keep the original
        return raw
    return buf.getvalue()


@st.composite
def mutant(draw, fmt: str) -> bytes:
    raw = draw(st.sampled_from(FIXTURES[fmt]))
    binary = raw.lstrip()[:1] not in (b"{", b"[")
    kinds = (
        ["bytes", "avro", "avro"]
        if binary and fmt in ("oms_avro", "dts_avro", "auto")
        else ["bytes"]
        if binary
        else ["bytes", "json", "json", "json"]
    )
    kind = draw(st.sampled_from(kinds))
    if kind == "json":
        return draw(json_mutant(raw))
    if kind == "avro":
        return draw(avro_mutant(raw))
    return draw(byte_mutant(raw))


# ---------------------------------------------------------------- what must hold


def _check_text(value: Any, what: str) -> None:
    assert isinstance(value, str), f"{what} is {type(value).__name__}"
    value.encode("utf-8")  # raises on a lone surrogate


def assert_canonical(changes: list[Change]) -> None:
    assert isinstance(changes, list)
    for ch in changes:
        assert ch.op in OPS, ch.op
        for name in ("db", "table", "schema", "event_time", "txn", "ddl", "detail"):
            if getattr(ch, name) is not None:
                _check_text(getattr(ch, name), name)
        for column in (*ch.key_columns, *(ch.changed or ())):
            _check_text(column, "a column name")
        for image in (ch.before, ch.after):
            for column, value in (image or {}).items():
                _check_text(column, "a column name")
                if value is not None:
                    _check_text(value, f"column {column!a}")
        for column, source_type in (ch.col_types or {}).items():
            _check_text(column, "a column name")
            _check_text(source_type, "a type")
        assert all(type(c) is int and 0 <= c < 10**20 for c in ch.seq), ch.seq


#: The canonical text of each family (pipelines.values' table), in ASCII.
SHAPES = {
    "int": r"-?[0-9]+",
    "uint64": r"[0-9]+",
    "decimal": r"-?[0-9]+(?:\.[0-9]+)?",
    "float": r"NaN|-?Infinity|[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?",
    "bool": r"true|false",
    "bytes": r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?",
    "date": r"[0-9]{4}-[0-9]{2}-[0-9]{2}(?:T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,9})?)?",  # Oracle DATE: its time
    "datetime": r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,9})?",
    "timestamp": r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,9})?Z",
    "time": r"-?[0-9]{2,3}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,9})?",
}


def assert_shapes(changes: list[Change], raw: bytes) -> None:
    """Typed values in their family's canonical shape; all text within the message's budget."""
    from pipelines.values import family

    text = 0
    for ch in changes:
        for image in (ch.before, ch.after):
            for column, value in (image or {}).items():
                text += len(column) + len(value or "")
                shape = SHAPES.get(family((ch.col_types or {}).get(column)))
                if value is not None and shape:
                    assert re.fullmatch(shape, value), f"{column!a} ({ch.col_types[column]}): {value[:80]!a}"
        text += sum(len(c) + len(t) for c, t in (ch.col_types or {}).items())
    assert text <= 64 * len(raw) + (1 << 20), f"{len(raw)}-byte message gave {text} characters of text"


def check_message(fmt: str, raw: bytes) -> None:
    decoder = get_decoder(fmt)
    start = time.perf_counter()
    try:
        decoder.decode(raw, CONTEXT)  # only Reject may escape: anything else fails the test here
    except Reject as exc:
        assert str(exc), "a reject must say why"
    try:
        changes = decode_message(decoder, raw, CONTEXT)
        assert_canonical(changes)
        assert_shapes(changes, raw)
    except Reject as exc:
        str(exc)
    took = time.perf_counter() - start
    limit = 2 * SECONDS_PER_MESSAGE * max(1.0, len(raw) / WATCHDOG_BYTES)  # decoded twice above
    assert took < limit, f"{fmt}: {len(raw)}-byte message took {took:.2f}s (watchdog {limit / 2:.1f}s per decode)"


def check_silver_batch(messages: list[tuple[str, bytes]]) -> None:
    out = silver(messages, CONTEXT)
    positions = {r["bronze_position"] for r in out}
    assert positions == {f"p#{i}" for i in range(len(messages))}
    for r in out:
        assert r["kind"] in ("change", "heartbeat", "ddl", "quarantine")
        if r["kind"] == "quarantine":
            assert r["reason"] and len(r["reason"]) < 2100


# ---------------------------------------------------------------- the fuzz tests


@pytest.mark.parametrize("fmt", ALL_FORMAT_IDS)
@FUZZ
@given(data=st.data())
def test_decoders_only_reject_and_emit_canonical_changes(fmt, data):
    check_message(fmt, data.draw(mutant(fmt), label="message"))


@FUZZ
@given(data=st.data())
def test_the_silver_batch_never_fails(data):
    messages = []
    for _ in range(data.draw(st.integers(1, 6))):
        fmt = data.draw(st.sampled_from(ALL_FORMAT_IDS))
        messages.append((fmt, data.draw(mutant(fmt), label=fmt)))
    check_silver_batch(messages)


@pytest.mark.parametrize("fmt", ALL_FORMAT_IDS)
def test_each_fixture_with_each_kind_of_poison(fmt):
    """A deterministic sweep next to the random one: fixtures × surrogate, dup key, deep, wide, huge, a type
    swap, in every top-level field of the message (``auto`` gets its own formats' fixtures already)."""
    poisons = ("\ud800", DEEP[500], WIDE[100_001], HUGE[("x", 1_000_000)], Raw("1e999999999"), {"k": None}, [])
    for raw in FIXTURES[fmt][:4] if fmt != "auto" else FIXTURES[fmt][::15]:
        check_message(fmt, raw)
        if raw.lstrip()[:1] != b"{":
            continue
        doc = json.loads(raw)
        for i, field in enumerate(doc):
            check_message(fmt, dumps(_replace(doc, (field,), poisons[i % len(poisons)])).encode())
        check_message(fmt, dumps(_duplicate_key(doc, (), "INSERT")).encode())
