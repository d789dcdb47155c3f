"""OMS text-format value rules, shared by OMS Default(+Extend), SharePlex and DataWorks.

Seeds 000/001 "data types and mappings" (Default, Canal, DataWorks, SharePlex,
DefaultExtendColumnType): integers plain, DECIMAL exact (maybe scientific), BOOL 1/0,
bytes (BLOB/BINARY/BIT...) Base64, DATE ``YYYY-MM-DD``, TIME ``HH:mm:ss[.n{1,9}]``,
DATETIME ``YYYY-MM-DD HH:mm:ss[.n{1,9}] [zoneId]`` (``YYYY-MM-DDTHH:mm[:ss]`` before
OMS CE V3.3.0), TIMESTAMP ``sec[.fraction]`` epoch seconds, "invalid dates display the
original string" (→ Reject naming column and value). DataWorks 2.0 (seed 000/001) also
writes time values as 13-digit epoch milliseconds with an optional 9-digit fraction.

Decisions:
* DATETIME with a zone id: the zone is OMS's annotation of the session zone; the
  column is a zone-less wall clock, so the wall clock digits are kept and the zone dropped.
* ``13.9`` epoch form (integer part of 13+ digits): read as Java ``Timestamp``
  ``getTime()`` milliseconds + ``.`` + ``getNanos()``: seconds = ms // 1000 and the 9
  fraction digits are the whole nano-of-second (the seed's ``1590315269000.123456789``
  → ``...:29.123456789``). A shorter integer part is epoch seconds (OMS ``sec.fraction``).
* Oracle DATE carries a time of day (seed 000 Oracle table: DATE → DateTime): with
  ``oracle=True`` a DATE value with a time part keeps the wall clock as datetime text.
* Without a known type the exact text is kept (JSON number text, string, nested JSON text).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from pipelines.errors import InvalidValue
from pipelines.formats.base import Image, Num, Reject, canon_image, dumps_exact
from pipelines.values import (
    EPOCH_RE,
    JSON_NUMBER_RE,
    canon_base64,
    canon_date,
    canon_instant,
    canonical,
    epoch_seconds_text,
    family,
    instant_from_epoch,
    parse_datetime_text,
    wall_text,
)


def exact_text(value: Any) -> str | None:
    """A value with no known type: its exact JSON text (strings as they are)."""
    if value is None:
        return None
    return value if isinstance(value, str) else dumps_exact(value)


def to_canonical(column: str, source_type: str | None, value: Any, *, oracle: bool = False) -> str | None:
    """One column value → canonical text; a value that does not fit its type → Reject naming the column."""
    try:
        return _convert(source_type, value, oracle)
    except InvalidValue:
        raise
    except Reject as exc:
        raise Reject(f"column '{column}' ({source_type or 'untyped'}): {exc}") from None


def convert_image(
    image: Any, col_types: dict[str, str] | None, what: str, *, oracle: bool = False, skip: tuple[str, ...] = ()
) -> Image:
    """A JSON object of column → value as a canonical image (``skip`` names are dropped)."""
    if not isinstance(image, dict):
        raise Reject(f"'{what}' should be an object of column values")
    types = col_types or {}
    return canon_image(
        ((col, val) for col, val in image.items() if col not in skip),
        lambda col, val: to_canonical(col, types.get(col), val, oracle=oracle),
    )


def _convert(source_type: str | None, value: Any, oracle: bool) -> str | None:
    if value is None:
        return None
    if not source_type:
        return exact_text(value)
    fam = family(source_type)
    if isinstance(value, (dict, list)):
        if fam in ("json", "string"):
            return dumps_exact(value)
        raise Reject(f"expected a {fam} value, got nested JSON {dumps_exact(value)[:60]}")
    if fam == "bool" and isinstance(value, bool):
        return "true" if value else "false"
    text = value if isinstance(value, str) else dumps_exact(value)
    if fam == "timestamp":
        return _instant_from_epoch_text(text) if EPOCH_RE.fullmatch(text.strip()) else canon_instant(text)
    if fam == "datetime":
        if EPOCH_RE.fullmatch(text.strip()):
            return _instant_from_epoch_text(text)[:-1]
        return wall_clock(text)
    if fam == "date" and oracle and len(text.strip()) > 10:
        return wall_clock(text)
    if fam == "date":
        return canon_date(text)
    if fam == "bytes":
        return canon_base64(text)
    return canonical(fam, text)


def epoch_field(value: Any, unit: str, name: str) -> str | None:
    """A message-level epoch time field (seconds or ms, optional fraction) → UTC instant, or Reject."""
    if value is None:
        return None
    text = value.strip() if isinstance(value, str) else dumps_exact(value)
    if not text:
        return None
    if len(text) > 40 or not EPOCH_RE.fullmatch(text):
        raise Reject(f"field '{name}' is not an epoch time: {text[:60]!r}")
    return instant_from_epoch(text, unit)


def wall_clock(text: str) -> str:
    """``YYYY-MM-DD HH:mm:ss[.f] [zoneId]`` → ``YYYY-MM-DDTHH:MM:SS[.f]`` (zone dropped, see module doc)."""
    dt, frac, _zone = parse_datetime_text(text)
    frac = frac.rstrip("0")
    return wall_text(dt) + (f".{frac}" if frac else "")


def _instant_from_epoch_text(text: str) -> str:
    text = text.strip()
    whole, _, frac = text.partition(".")
    if len(whole.lstrip("-")) < 13:
        return instant_from_epoch(text, "s")
    if not frac:
        return instant_from_epoch(whole, "ms")
    if len(frac) > 9:
        raise Reject(f"epoch fraction has more than 9 digits: {text[:60]!r}")
    nanos = (int(whole) // 1000) * 10**9 + int(frac.ljust(9, "0"))
    return instant_from_epoch(format(Decimal(nanos).scaleb(-9), "f"), "s")


# ---------------------------------------------------------------- encoding (simulator, round trips)


def to_vendor(source_type: str | None, canon: str | None) -> Any:
    """The inverse of :func:`to_canonical`: canonical text → the JSON value OMS writes."""
    if canon is None:
        return None
    if not source_type:
        return canon
    fam = family(source_type)
    if fam == "bool":
        return Num("1" if canon == "true" else "0")
    if fam in ("int", "uint64", "decimal", "float"):
        return Num(canon) if JSON_NUMBER_RE.fullmatch(canon) else canon
    if fam == "timestamp":
        return epoch_seconds_text(canon)
    if fam == "datetime":
        return canon.replace("T", " ", 1)
    return canon


def text_field(meta: dict, name: str) -> str | None:
    """A metadata field that should be text; numbers and objects give their exact JSON text."""
    value = meta.get(name)
    if value is None or isinstance(value, str):
        return value
    return dumps_exact(value)
