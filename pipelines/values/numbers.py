"""Numbers and booleans: ``canon_int``, ``canon_decimal``, ``canon_float`` and ``canon_bool``, parsed
exactly (never through a float) behind a guard on length and exponent.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from pipelines.errors import Reject

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

#: Longest number text accepted; ``1e999999999`` must not expand into a billion digits.
MAX_NUMBER_CHARS = 4000
_EXPONENT_RE = re.compile(r"[eE]([+-]?\d+)$", re.ASCII)


def _decimal(text: str, what: str) -> Decimal:
    """Parse a number exactly, refusing texts and exponents that would blow up memory."""
    if len(text) > MAX_NUMBER_CHARS:
        raise Reject(f"{what} has more than {MAX_NUMBER_CHARS} characters: {text[:60]!r}...")
    m = _EXPONENT_RE.search(text)
    if m and abs(int(m.group(1))) > 400:
        raise Reject(f"{what} exponent out of range: {text[:60]!r}")
    try:
        d = Decimal(text)
    except InvalidOperation:
        raise Reject(f"not {what}: {text[:60]!r}") from None
    if not d.is_finite():
        raise Reject(f"not a finite {what}: {text[:60]!r}")
    return d


def canon_int(value: object) -> str:
    text = str(value).strip()
    if re.fullmatch(rf"[+-]?\d{{1,{MAX_NUMBER_CHARS}}}", text, re.ASCII):
        return str(int(text))
    d = _decimal(text, "an integer")
    if d != d.to_integral_value():
        raise Reject(f"not an integer: {text[:60]!r}")
    return str(int(d))


def canon_decimal(value: object) -> str:
    """Exact plain decimal text: ``1E+2`` → ``100``; ``1.10`` stays ``1.10``."""
    return format(_decimal(str(value).strip(), "a decimal number"), "f")


def canon_float(value: object) -> str:
    text = str(value).strip()
    if text.lower() not in ("nan", "infinity", "-infinity", "inf", "-inf"):
        _decimal(text, "a floating-point number")
    return text


def canon_bool(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    text = str(value).strip().lower()
    if text in ("true", "1", "t", "y", "yes"):
        return "true"
    if text in ("false", "0", "f", "n", "no"):
        return "false"
    raise Reject(f"not a boolean: {text[:60]!r}")
