"""Numbers and booleans: ``canon_int``, ``canon_decimal``, ``canon_float`` and ``canon_bool``, parsed
exactly (never through a float) behind a guard on length and exponent.

Numeric text is ASCII: an optional sign, digits, an optional point and digits, an optional exponent
(:data:`NUMBER_RE`). Python's own readers accept more (``Decimal`` and ``int`` take any Unicode
digit and ``_`` between digits: ``"١٢"`` and ``"1_0"`` would silently become 12 and 10), so the text
is matched first, and the magnitude is read from the exponent's ASCII digits before anything is
converted: a number costs time linear in its text, and its plain form is at most
:data:`MAX_EXPONENT` characters longer than it.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation

from pipelines.errors import Reject
from pipelines.values.types import parse_type

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

#: Longest number text accepted; ``1e999999999`` must not expand into a billion digits.
MAX_NUMBER_CHARS = 4000
#: Largest exponent accepted (written, in absolute value): ``1E400`` is 401 digits in plain text.
MAX_EXPONENT = 400
#: A number as every source writes it, in ASCII only (no ``_``, no other script's digits).
NUMBER_RE = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_INT_RE = re.compile(r"[+-]?[0-9]+")
#: Epoch numbers as OMS, DRS and Canal write them: ``1606233662.012345``.
EPOCH_RE = re.compile(r"-?[0-9]+(?:\.[0-9]+)?")
#: The JSON number grammar: text an encoder may write as a bare number.
JSON_NUMBER_RE = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
#: The spellings of a DOUBLE's special values, and the one canonical text of each.
FLOAT_WORDS = {
    "nan": "NaN",
    "+nan": "NaN",
    "-nan": "NaN",
    "inf": "Infinity",
    "+inf": "Infinity",
    "infinity": "Infinity",
    "+infinity": "Infinity",
    "-inf": "-Infinity",
    "-infinity": "-Infinity",
}


def exact_decimal(text: str, what: str) -> Decimal:
    """Parse a number exactly, refusing non-ASCII text and texts or exponents that would blow up memory."""
    if len(text) > MAX_NUMBER_CHARS:
        raise Reject(f"{what} has more than {MAX_NUMBER_CHARS} characters: {text[:60]!a}...")
    if not NUMBER_RE.fullmatch(text):
        hint = "" if text.isascii() and "_" not in text else " (numbers are ASCII digits only)"
        raise Reject(f"not {what}: {text[:60]!a}{hint}")
    _mantissa, e, exponent = text.lower().partition("e")
    if e and (len(exponent.lstrip("+-").lstrip("0")) > 4 or abs(int(exponent)) > MAX_EXPONENT):
        raise Reject(f"{what} exponent out of range (at most {MAX_EXPONENT}): {text[:60]!a}")
    try:
        return Decimal(text)
    except InvalidOperation:  # pragma: no cover - NUMBER_RE admits only what Decimal reads
        raise Reject(f"not {what}: {text[:60]!a}") from None


def canon_int(value: object) -> str:
    text = str(value).strip()
    if len(text) <= MAX_NUMBER_CHARS and _INT_RE.fullmatch(text):
        return str(int(text))
    d = exact_decimal(text, "an integer")
    if d != d.to_integral_value():
        raise Reject(f"not an integer: {text[:60]!a}")
    if d and d.adjusted() >= MAX_NUMBER_CHARS:
        raise Reject(f"integer out of range (more than {MAX_NUMBER_CHARS} digits): {text[:60]!a}")
    return str(int(d))


def canon_int64(value: object) -> str:
    """An integer of the int family (BIGINT or narrower): within the signed 64-bit range."""
    text = canon_int(value)
    if not INT64_MIN <= int(text) <= INT64_MAX:
        raise Reject(f"out of range for BIGINT (signed 64-bit): {text[:60]}")
    return text


def canon_uint64(value: object) -> str:
    text = canon_int(value)
    if not 0 <= int(text) < 2**64:
        raise Reject(f"out of range for BIGINT UNSIGNED: {text[:60]}")
    return text


def canon_decimal(value: object) -> str:
    """Exact plain decimal text: ``1E+2`` → ``100``; ``1.10`` stays ``1.10``."""
    return format(exact_decimal(str(value).strip(), "a decimal number"), "f")


def canon_float(value: object) -> str:
    """A DOUBLE's text, kept as written when it is a finite double (``1e308``, ``4.9e-324``); NaN and
    ±Infinity only as words, spelled ``NaN`` / ``Infinity`` / ``-Infinity``. A number a DOUBLE cannot
    hold (``1e400`` would be Infinity, ``1e-400`` zero) is refused: gold's cast would change it."""
    text = str(value).strip()
    word = FLOAT_WORDS.get(text.lower()) if len(text) <= 9 else None
    if word:
        return word
    d = exact_decimal(text, "a floating-point number")
    as_double = float(text)  # ASCII and bounded by now: cheap and exact enough to tell the range
    if math.isinf(as_double) or (as_double == 0 and d != 0):
        raise Reject(f"a DOUBLE cannot hold {text[:60]!a}: outside its finite range")
    return text


def canon_bool(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    text = str(value).strip().lower()
    if text in ("true", "1", "t", "y", "yes"):
        return "true"
    if text in ("false", "0", "f", "n", "no"):
        return "false"
    raise Reject(f"not a boolean: {text[:60]!a}")


#: Signed bit width of the MySQL integer types; a value up to the unsigned range of the width is
#: accepted (OMS drops UNSIGNED from the types it writes).
INT_BITS = {
    "tinyint": 8,
    "smallint": 16,
    "mediumint": 24,
    "int": 32,
    "integer": 32,
    "bigint": 64,
    "int64": 64,
    "long": 64,
}


def canon_int_of_type(value: object, source_type: str) -> tuple[str, str | None]:
    """An integer of a column typed ``source_type`` → (canonical text, the type the value proves).

    The range is the type's (:data:`INT_BITS`; any other integer type: BIGINT's). A BIGINT without
    UNSIGNED holding a value above 2^63 - 1 and below 2^64 proves the column is BIGINT UNSIGNED, since
    OMS drops UNSIGNED from the type (seed 000/001 col13 = 10223372036854775806): the second item is
    then ``"bigint unsigned"``, else None.
    """
    text = canon_int(value)
    base, _args, unsigned = parse_type(source_type)
    bits = INT_BITS.get(base, 64)
    n = int(text)
    if bits == 64 and not unsigned and INT64_MAX < n < 2**64 and base in INT_BITS:
        return text, "bigint unsigned"
    low, high = (0, 2**bits) if unsigned else (-(2 ** (bits - 1)), 2**bits if base in INT_BITS else 2**63)
    if not low <= n < high:
        raise Reject(f"out of range for {source_type.upper()[:60]}: {text[:60]}")
    return text, None
