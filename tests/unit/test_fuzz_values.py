"""Fuzzing the value classes of issue 26: generators that aim at each class, and an oracle for each.

test_fuzz_decoders mutates whole messages and checks that nothing but Reject escapes. Random
mutants never found what a person found by hand: a number in other digits, a width taken from the
message, a long type name, a negative or pre-1000 time, a duplicate Avro field, a schema that types
one image only, a confusable op. Here each class has a generator, and each generated message an
expected outcome computed independently of the decoders (``Decimal`` for numbers, integer
arithmetic for times), so a decoder that accepts what it should refuse, or changes a value, fails:

* numbers (int, decimal, float, Mongo NumberLong / NumberDecimal): ASCII text in the grammar is
  accepted with the same value; anything else (other scripts' digits, ``_``, fullwidth exponents,
  magnitudes no column holds) is quarantined;
* times and date-times as text, epoch numbers and Debezium NanoTime / MicroTime: signs, nine
  fraction digits, years 1 to 9999 kept exactly; other digits, five-digit years refused;
* op names with confusable letters (``ı``, ``ſ``, ``K``) are quarantined;
* widths (MySQL ``bit(n)``, Debezium Bits ``length``) at and past 64: within, the value's bytes;
  past, quarantined;
* long type names, up to 64 KiB messages: within the watchdog, and refused over 1,024 characters;
* duplicate Avro field names: quarantined;
* Debezium schemas that type one image, or the two images differently: never a mislabel;
* a silver batch of 1,000 good messages and one poison: one quarantine row, every good change as
  decoded alone.

Every message must also pass the per-message watchdog: 2 s for any message up to 64 KiB (far above
normal times: the slowest random message takes under 0.1 s); it detects hangs and superlinear cost.
``make fuzz`` runs these with LAKECDC_FUZZ_EXAMPLES examples each.
"""

from __future__ import annotations

import io
import json
import os
import re
import time
from decimal import Decimal

import fastavro
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines.formats import DecodeContext, Reject
from pipelines.formats._dts_record import PARSED_BORN, read_record
from pipelines.formats.base import Change
from tests.unit._carriers import (
    CANAL_FORMATS,
    after_of,
    canal,
    carry,
    context,
    debezium,
    decoded,
    gaussdb,
    silver,
)
from tests.unit.test_fuzz_decoders import EXAMPLES, FIXTURES, FUZZ

pytestmark = pytest.mark.fuzz

#: The watchdog: a message of up to 64 KiB gets this long (a larger one proportionally more).
WATCHDOG_SECONDS = 2.0
WATCHDOG_BYTES = 64 * 1024


def run(fmt: str, raw: bytes, ctx: DecodeContext) -> list[Change] | Reject:
    """``decode_message`` under the watchdog."""
    start = time.perf_counter()
    result = decoded(fmt, raw, ctx)
    took = time.perf_counter() - start
    limit = WATCHDOG_SECONDS * max(1.0, len(raw) / WATCHDOG_BYTES)
    assert took < limit, f"{fmt}: a {len(raw)}-byte message took {took:.2f}s (watchdog {limit:.1f}s)"
    return result


def refused(fmt: str, raw: bytes, ctx: DecodeContext, why: str) -> None:
    result = run(fmt, raw, ctx)
    assert isinstance(result, Reject), f"{fmt} accepted {why}: {[c.after for c in result]!a:.300}"


# ---------------------------------------------------------------- generators of text

#: Digit sets Python's Decimal and int read as 0-9: fullwidth, Arabic-Indic, Extended Arabic-Indic,
#: Devanagari, Bengali, Thai, mathematical bold / double-struck / monospace.
OTHER_DIGITS = [
    "".join(chr(start + d) for d in range(10))
    for start in (0xFF10, 0x0660, 0x06F0, 0x0966, 0x09E6, 0x0E50, 0x1D7CE, 0x1D7D8, 0x1D7F6)
]
#: Letters that str.upper() / str.lower() fold onto ASCII ones.
CONFUSABLES = {"i": "ı", "I": "ı", "s": "ſ", "S": "ſ", "k": "K", "K": "K", "T": "Ｔ"}


@st.composite
def disguised(draw, text: str) -> str:
    """``text`` with some ASCII digits from another script, or ``_`` between digits, or both."""
    digits = [i for i, ch in enumerate(text) if ch.isdigit()]
    if not digits:
        return text + draw(st.sampled_from(OTHER_DIGITS))[1]
    chars = list(text)
    script = draw(st.sampled_from(OTHER_DIGITS))
    for i in draw(st.lists(st.sampled_from(digits), min_size=1, max_size=len(digits), unique=True)):
        chars[i] = script[int(text[i])]
    if draw(st.booleans()) and len(digits) > 1:
        i = draw(st.sampled_from(digits[1:]))
        chars[i] = "_" + text[i]
    return "".join(chars)


ASCII_NUMBER = st.builds(
    lambda sign, whole, frac, exp: f"{sign}{whole}{frac}{exp}",
    st.sampled_from(["", "-", "+"]),
    st.from_regex(r"[0-9]{1,25}", fullmatch=True),
    st.sampled_from(["", "."]) | st.from_regex(r"\.[0-9]{1,12}", fullmatch=True),
    st.sampled_from(["", "e5", "E-3", "e+400", "e401", "E-401", "e308", "e309", "e-324", "e-330", "E18", "e1000000"]),
)
#: The campaign's exponents: a few digits of another script that Decimal reads as a huge magnitude.
HUGE_EXPONENTS = st.builds(lambda d, n: "1E" + d[1] + d[0] * n, st.sampled_from(OTHER_DIGITS), st.integers(2, 7))


@st.composite
def number_text(draw) -> tuple[str, bool]:
    """(text, ascii): a number as a vendor might write it, or one in disguise."""
    kind = draw(st.sampled_from(["ascii", "ascii", "disguised", "huge", "junk"]))
    if kind == "ascii":
        return draw(ASCII_NUMBER), True
    if kind == "disguised":
        return draw(disguised(draw(ASCII_NUMBER))), False
    if kind == "huge":
        return draw(HUGE_EXPONENTS), False
    return draw(st.sampled_from(["1_000", "0x1F", "1e", "--1", "1.2.3", "١٢٣", "Infinity1", "nan(1)"])), False


def _number(text: str) -> Decimal | None:
    """The value of ASCII number text by the grammar every source writes (None: not one)."""
    if not re.fullmatch(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", text):
        return None
    exponent = text.lower().partition("e")[2]
    if exponent and abs(int(exponent)) > 400:
        return None
    return Decimal(text)


def expected_number(family: str, text: str, unsigned_ok: bool = False) -> str | None:
    """The canonical text of a number for a column of ``family``, or None where it must be refused."""
    d = _number(text.strip())
    if d is None:
        return None
    if family == "decimal":
        return format(d, "f")
    if family == "int":
        if d != d.to_integral_value() or not -(2**63) <= d < (2**64 if unsigned_ok else 2**63):
            return None
        return str(int(d))
    as_float = float(text)
    if as_float in (float("inf"), float("-inf")) or (as_float == 0 and d != 0):
        return None
    return text.strip()


# ---------------------------------------------------------------- 1, 8. numbers in every numeric field

NUMBER_CARRIERS = [
    (fmt, column_type)
    for fmt in (*CANAL_FORMATS, "drs_gaussdb", "debezium", "oms_debezium", "oms_default", "oms_dataworks")
    for column_type in ("bigint", "decimal(65,30)", "double")
] + [(fmt, t) for fmt in ("dts_avro", "oms_avro", "drs_mongo") for t in ("bigint", "decimal(65,30)")]


@pytest.mark.parametrize("fmt, column_type", NUMBER_CARRIERS)
@FUZZ
@given(data=st.data())
def test_numbers_keep_their_value_or_are_refused(fmt, column_type, data):
    text, _ascii = data.draw(number_text(), label="number")
    family = {"bigint": "int", "double": "float"}.get(column_type, "decimal")
    kind = "Decimal" if family == "decimal" else "Integer"
    raw, ctx = carry(fmt, column_type, text, avro_kind=kind)
    promotes = fmt in (*CANAL_FORMATS, "dts_avro", "oms_avro")  # OMS drops UNSIGNED: the value proves it
    expected = expected_number(family, text, unsigned_ok=promotes)
    if family == "float" and text.strip().lower() in ("nan", "inf", "-inf", "infinity", "-infinity"):
        expected = "check"
    result = run(fmt, raw, ctx)
    if expected is None:
        assert isinstance(result, Reject), f"{fmt} {column_type} accepted {text!a} as {result[0].after['v']!a}"
    elif not isinstance(result, Reject) and expected != "check":
        assert result[0].after["v"] == expected, (text, result[0].after["v"])


# ---------------------------------------------------------------- 4, 5. times, dates, signs, years


@st.composite
def time_parts(draw) -> tuple[int, int, int, int, str]:
    """(sign, hours, minutes, seconds, fraction digits) of a TIME, at and past MySQL's bounds."""
    return (
        draw(st.sampled_from([1, -1])),
        draw(st.integers(0, 838) | st.sampled_from([0, 23, 838, 999])),
        draw(st.integers(0, 59)),
        draw(st.integers(0, 59)),
        draw(st.from_regex(r"[0-9]{0,9}", fullmatch=True)),
    )


def time_text(sign: int, h: int, m: int, s: int, frac: str) -> str:
    return f"{'-' if sign < 0 else ''}{h:02d}:{m:02d}:{s:02d}" + (f".{frac}" if frac else "")


def canonical_time(sign: int, h: int, m: int, s: int, frac: str) -> str:
    frac = frac.rstrip("0")
    zero = not (h or m or s or frac)
    return f"{'-' if sign < 0 and not zero else ''}{h:02d}:{m:02d}:{s:02d}" + (f".{frac}" if frac else "")


@pytest.mark.parametrize("fmt", [*CANAL_FORMATS, "drs_gaussdb", "oms_default", "oms_shareplex"])
@FUZZ
@given(data=st.data())
def test_time_text_keeps_its_sign_and_digits(fmt, data):
    parts = data.draw(time_parts(), label="time")
    text = time_text(*parts)
    disguise = data.draw(st.booleans(), label="disguise")
    if disguise:
        text = data.draw(disguised(text))
    raw, ctx = _text_carrier(fmt, "time", text)
    result = run(fmt, raw, ctx)
    if disguise:
        assert isinstance(result, Reject), f"{fmt} accepted {text!a}"
    else:
        assert not isinstance(result, Reject), f"{fmt}: {result}"
        assert result[0].after["v"] == canonical_time(*parts)


@pytest.mark.parametrize("fmt, field", [(f, u) for f in ("debezium", "oms_debezium") for u in ("Nano", "Micro")])
@FUZZ
@given(data=st.data())
def test_debezium_times_keep_their_sign(fmt, field, data):
    sign, h, m, s, frac = data.draw(time_parts(), label="time")
    digits = 9 if field == "Nano" else 6
    frac = frac[:digits].ljust(digits, "0")
    number = sign * ((h * 3600 + m * 60 + s) * 10**digits + int(frac))
    schema = {"id": {"type": "int64"}, "v": {"type": "int64", "name": f"io.debezium.time.{field}Time"}}
    raw = debezium(schema, {"id": 1, "v": number}, oms=fmt == "oms_debezium")
    result = run(fmt, raw, context())
    assert not isinstance(result, Reject), result
    assert result[0].after["v"] == canonical_time(sign if number else 1, h, m, s, frac)


@st.composite
def wall_clock(draw) -> tuple[str, str]:
    """(text as a vendor writes it, the canonical wall clock) with years 1 to 9999 and 0-9 fraction digits."""
    dt = draw(st.datetimes(min_value=__import__("datetime").datetime(1, 1, 1)))
    frac = draw(st.from_regex(r"[0-9]{0,9}", fullmatch=True))
    body = f"{dt.year:04d}-{dt.month:02d}-{dt.day:02d} {dt.hour:02d}:{dt.minute:02d}:{dt.second:02d}"
    tail = f".{frac}" if frac else ""
    canon_frac = frac.rstrip("0")
    return body + tail, body.replace(" ", "T") + (f".{canon_frac}" if canon_frac else "")


@pytest.mark.parametrize("fmt", [*CANAL_FORMATS, "drs_gaussdb", "oms_default", "oms_shareplex", "debezium"])
@pytest.mark.parametrize("column_type", ["datetime", "timestamp", "date"])
@FUZZ
@given(data=st.data())
def test_years_1_to_9999_keep_four_digits(fmt, column_type, data):
    text, canonical = data.draw(wall_clock(), label="wall clock")
    if column_type == "date":
        text, canonical = text[:10], canonical[:10]
    kind = data.draw(st.sampled_from(["plain", "plain", "disguised", "five-digit year"]), label="kind")
    if kind == "disguised":
        text = data.draw(disguised(text))
    elif kind == "five-digit year":
        text = "1" + text
    if fmt == "debezium" and column_type == "timestamp":
        text = text.replace(" ", "T") + "Z"  # ZonedTimestamp text
    raw, ctx = _text_carrier(fmt, column_type, text)
    result = run(fmt, raw, ctx)
    if kind != "plain":
        assert isinstance(result, Reject), f"{fmt} accepted {text!a}"
        return
    assert not isinstance(result, Reject), f"{fmt} {column_type} {text!a}: {result}"
    assert result[0].after["v"] == canonical + ("Z" if column_type == "timestamp" else "")


def _text_carrier(fmt: str, column_type: str, text: str) -> tuple[bytes, DecodeContext]:
    if fmt == "oms_shareplex":
        msg = {"data": {"id": "1", "v": text}, "meta": {"op": "ins", "table": "d.t", "scn": "7", "seq": 1}}
        return json.dumps(msg).encode(), context({"id": "bigint", "v": column_type})
    return carry(fmt, column_type, text)


# ---------------------------------------------------------------- 8. confusable op names


@st.composite
def confusable_op(draw, op: str) -> str:
    places = [i for i, ch in enumerate(op) if ch in CONFUSABLES]
    chars = list(op)
    for i in draw(st.lists(st.sampled_from(places), min_size=1, unique=True)):
        chars[i] = CONFUSABLES[op[i]]
    return "".join(chars)


@pytest.mark.parametrize("fmt", [*CANAL_FORMATS, "ogg_json"])
@FUZZ
@given(data=st.data())
def test_confusable_op_names_are_refused(fmt, data):
    if fmt == "ogg_json":
        op = data.draw(confusable_op(data.draw(st.sampled_from(["I", "INSERT", "insert"]))))
        msg = {"table": "d.t", "op_type": op, "op_ts": "2020-01-01 00:00:00", "pos": "1", "after": {"id": 1}}
        raw = json.dumps(msg).encode()
    else:
        names = ["INSERT", "insert", "ERASE", "CINDEX", "XACOMMIT", "TRANSACTIONBEGIN", "GTID", "HEARTBEAT"]
        op = data.draw(confusable_op(data.draw(st.sampled_from(names))))
        raw = canal({"id": "int"}, {"id": "1"}, type=op)
    refused(fmt, raw, context(), f"op {op!a}")


# ---------------------------------------------------------------- 2. widths and lengths


@pytest.mark.parametrize("fmt", ["canal"])
@FUZZ
@given(width=st.integers(0, 80) | st.sampled_from([800000000, 10**25]), number=st.integers(0, 2**70))
def test_bit_widths_are_capped(fmt, width, number):
    raw, ctx = carry(fmt, f"bit({width})", str(number))
    result = run(fmt, raw, ctx)
    if not 1 <= width <= 64 or number >> width:
        assert isinstance(result, Reject), f"bit({width}) holding {number}: {result[0].after}"
    else:
        import base64

        value = base64.b64decode(result[0].after["v"])
        assert value == number.to_bytes((width + 7) // 8, "big")


@FUZZ
@given(length=st.integers(-2, 80) | st.sampled_from([800000000, "６４", "1e2", ""]), data=st.binary(max_size=10))
def test_debezium_bits_lengths_are_capped(length, data):
    import base64

    field = {"type": "bytes", "name": "io.debezium.data.Bits", "parameters": {"length": str(length)}}
    raw = debezium({"id": {"type": "int64"}, "v": field}, {"id": 1, "v": base64.b64encode(data).decode()})
    result = run("debezium", raw, context())
    valid = length == "" or (isinstance(length, int) and 1 <= length <= 64)
    width = len(data) if length == "" else (length + 7) // 8 if valid else 0
    if not valid or len(data.rstrip(b"\0")) > width:
        if not valid:
            assert isinstance(result, Reject), f"Bits length {length!a}: {result[0].after}"
        return
    assert not isinstance(result, Reject), result
    assert len(base64.b64decode(result[0].after["v"])) == width


# ---------------------------------------------------------------- 3. long type names


@st.composite
def type_heavy_message(draw, fmt: str) -> tuple[bytes, int]:
    """A message of up to 256 KiB whose type names take a random share of it (ENUM / SET of up to
    tens of thousands of characters), the rest rows that use them; (message, longest name). The
    watchdog grows with the size, a superlinear cost faster: on the old code a 64 KiB Canal message
    took 2.2 s, a 256 KiB one 35 s."""
    size = draw(st.sampled_from([256 * 1024, 128 * 1024]) | st.integers(4 * 1024, 256 * 1024))
    share = draw(st.floats(0.02, 0.9))
    columns = draw(st.integers(1, 4))
    names = {}
    for i in range(columns):
        members = max(1, int(size * share / columns) // 6)
        kind = draw(st.sampled_from(["enum", "set"]))
        names[f"c{i}"] = f"{kind}(" + ",".join(f"'m{j}'" for j in range(members)) + ")"
    value = "1" if fmt == "canal" else "m0"
    row = {"id": "1", **dict.fromkeys(names, value)}
    rows = [row] * max(1, (size - sum(map(len, names.values()))) // len(json.dumps(row)))
    build = gaussdb if fmt == "drs_gaussdb" else canal
    raw = build({"id": "int", **names}, row)
    raw = raw.replace(json.dumps([row]).encode(), json.dumps(rows).encode())
    return raw, max(map(len, names.values()))


@pytest.mark.parametrize("fmt", [*CANAL_FORMATS, "drs_gaussdb", "auto"])
@settings(FUZZ, max_examples=max(5, EXAMPLES // 6))  # messages of up to 256 KiB: fewer of them
@given(data=st.data())
def test_long_type_names_cost_linear_time(fmt, data):
    raw, longest = data.draw(type_heavy_message(fmt))
    result = run(fmt, raw, context())
    if longest > 1024:
        assert isinstance(result, Reject) and "longer than 1024" in str(result), result


# ---------------------------------------------------------------- a budget per message


@pytest.mark.parametrize("fmt", [*CANAL_FORMATS, "drs_gaussdb"])
@FUZZ
@given(columns=st.integers(1, 3000), rows=st.integers(1, 20_000), name=st.sampled_from(["int", "varchar(255)"]))
def test_no_message_multiplies_itself(fmt, columns, rows, name):
    """Many column types over many short rows: each change carries every type. What silver would keep
    (col_types once per change) must stay within 64 × the message + 1 MiB, or the message is refused."""
    build = gaussdb if fmt == "drs_gaussdb" else canal
    raw = build({f"c{i}": name for i in range(columns)}, {}, pkNames=None)
    raw = raw.replace(b'"data": [{}]', b'"data": [' + b",".join([b"{}"] * rows) + b"]")
    kept = rows * sum(len(f"c{i}") + len(name) for i in range(columns))
    result = run(fmt, raw, DecodeContext())
    if kept > 64 * len(raw) + (1 << 20):
        assert isinstance(result, Reject), f"{len(raw)} bytes kept as {kept} characters"


# ---------------------------------------------------------------- 6. duplicate Avro fields


@pytest.mark.parametrize("fmt", ["dts_avro", "oms_avro"])
@FUZZ
@given(data=st.data())
def test_duplicate_avro_field_names_are_refused(fmt, data):
    record, _ = read_record(data.draw(st.sampled_from([r for r in FIXTURES[fmt] if _has_fields(r)])))
    fields = record["fields"]
    i, j = data.draw(st.integers(0, len(fields) - 1)), data.draw(st.integers(0, len(fields) - 1))
    if i == j:
        fields.append(dict(fields[i]))
        for part in ("beforeImages", "afterImages"):
            if isinstance(record.get(part), list):
                record[part].append(record[part][i])
    else:
        fields[j] = {**fields[j], "name": fields[i]["name"]}
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, PARSED_BORN, {**record, "bornTimestamp": 0})
    refused(fmt, buf.getvalue(), DecodeContext(), "a duplicate field name")


def _has_fields(raw: bytes) -> bool:
    """A row record with fields (a control or DDL record does not read its fields)."""
    try:
        record, _ = read_record(raw)
    except Reject:
        return False
    operation = record["operation"][1] if isinstance(record["operation"], tuple) else record["operation"]
    rows = operation in ("INSERT", "UPDATE", "DELETE", "INIT")
    return rows and isinstance(record.get("fields"), list) and bool(record["fields"])


# ---------------------------------------------------------------- 7. schema and payload disagree


def _with_schema(fmt: str) -> list[dict]:
    out = []
    for raw in FIXTURES[fmt]:
        obj = json.loads(raw)
        schema = obj.get("schema") if isinstance(obj, dict) else None
        parts = {f.get("field") for f in (schema or {}).get("fields") or [] if isinstance(f, dict)}
        if {"before", "after"} & parts and isinstance(obj.get("payload"), dict):
            out.append(obj)
    return out


@pytest.mark.parametrize("fmt", ["debezium", "oms_debezium"])
@FUZZ
@given(data=st.data())
def test_schema_and_payload_are_reconciled(fmt, data):
    obj = json.loads(json.dumps(data.draw(st.sampled_from(_with_schema(fmt)))))
    images = [f for f in obj["schema"]["fields"] if f.get("field") in ("before", "after")]
    action = data.draw(st.sampled_from(["drop image", "drop field", "retype field"]))
    target = data.draw(st.sampled_from(images))
    if action == "drop image":
        obj["schema"]["fields"].remove(target)
    elif target.get("fields"):
        k = data.draw(st.integers(0, len(target["fields"]) - 1))
        if action == "drop field":
            del target["fields"][k]
        else:
            target["fields"][k] = {**target["fields"][k], "type": "string", "name": "io.debezium.data.Json"}
    payload = obj["payload"]
    described = {
        f["field"]: {c.get("field") for c in f.get("fields") or []}
        for f in obj["schema"]["fields"]
        if f.get("field") in ("before", "after")
    }
    untyped = [
        (part, col)
        for part in ("before", "after")
        if described and isinstance(payload.get(part), dict)
        for col in payload[part]
        if col not in described.get(part, set())
    ]
    result = run(fmt, json.dumps(obj).encode(), DecodeContext())
    if untyped:
        assert isinstance(result, Reject), f"{fmt}: {untyped} untyped by the schema, yet decoded"
    if not isinstance(result, Reject):
        from pipelines.values import family

        for ch in result:  # the label fits both images: a column's two values share one type
            for part in (ch.before, ch.after):
                for col, value in (part or {}).items():
                    if value is not None and family((ch.col_types or {}).get(col)) == "bytes":
                        __import__("base64").b64decode(value, validate=True)


# ---------------------------------------------------------------- one poison among 1,000 good messages

GOOD = {fmt: [] for fmt in ("dts_canal", "drs_json", "oms_default", "debezium", "dts_avro", "drs_gaussdb")}
for _fmt in GOOD:
    for _raw in FIXTURES[_fmt]:
        _res = decoded(_fmt, _raw, DecodeContext())
        if not isinstance(_res, Reject) and any(c.op in ("INSERT", "UPDATE", "DELETE", "SNAPSHOT") for c in _res):
            GOOD[_fmt].append(_raw)


@st.composite
def poison(draw) -> tuple[str, bytes, DecodeContext]:
    kind = draw(st.sampled_from(["number", "huge exponent", "bits", "type name", "op", "year"]))
    if kind == "number":
        fmt = draw(st.sampled_from(["dts_canal", "drs_gaussdb", "oms_debezium"]))
        raw, ctx = carry(fmt, "bigint", draw(disguised(draw(ASCII_NUMBER))))
    elif kind == "huge exponent":
        fmt = draw(st.sampled_from(["dts_canal", "drs_mongo", "dts_avro"]))
        raw, ctx = carry(fmt, "decimal(65,30)", draw(HUGE_EXPONENTS), avro_kind="Decimal")
    elif kind == "bits":
        fmt = "canal"
        raw, ctx = carry(fmt, f"bit({draw(st.integers(65, 800000000))})", "1")
    elif kind == "type name":
        fmt = draw(st.sampled_from(CANAL_FORMATS))
        raw, ctx = canal({"id": "int", "c": "x" * draw(st.integers(1025, 60_000))}, {"id": "1", "c": "a"}), context()
    elif kind == "op":
        fmt = draw(st.sampled_from(CANAL_FORMATS))
        raw, ctx = canal({"id": "int"}, {"id": "1"}, type=draw(confusable_op("INSERT"))), context()
    else:
        fmt = "dts_canal"
        raw, ctx = carry(fmt, "datetime", "1" + draw(wall_clock())[0])
    return fmt, raw, ctx


@settings(max_examples=max(2, EXAMPLES // 20), deadline=None, derandomize="LAKECDC_FUZZ_EXAMPLES" not in os.environ)
@given(data=st.data())
def test_one_poison_among_a_thousand_good_messages(data):
    """Silver's batch: the poison is one quarantine row, and every good message's rows are what it gives alone."""
    fmt, raw, ctx = data.draw(poison(), label="poison")
    good = [(f, r) for f in GOOD for r in GOOD[f]]
    messages = [good[i % len(good)] for i in range(999)]
    at = data.draw(st.integers(0, 999), label="position")
    messages.insert(at, (fmt, raw))
    rows = silver(messages, ctx)
    quarantine = [r for r in rows if r["kind"] == "quarantine"]
    assert [r["bronze_position"] for r in quarantine] == [f"p#{at}"], [r["reason"] for r in quarantine][:3]
    alone = {}
    for f, r in set(good):
        alone[(f, r)] = [(x["kind"], x["op"], after_of(x)) for x in silver([(f, r)], ctx)]
    by_position: dict[str, list] = {}
    for r in rows:
        by_position.setdefault(r["bronze_position"], []).append((r["kind"], r["op"], after_of(r)))
    for i, message in enumerate(messages):
        if i != at:
            assert by_position[f"p#{i}"] == alone[message], message[0]
