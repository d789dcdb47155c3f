"""Dates, date-times, instants, zones and times: from epoch numbers and from text, to the canonical
ISO text. Fractions keep up to 9 digits with trailing zeros removed.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from pipelines.errors import InvalidValue, Reject
from pipelines.values.numbers import _decimal, canon_int

EPOCH_DATE = date(1970, 1, 1)


def _fraction(frac: str) -> str:
    frac = frac.rstrip("0")
    if len(frac) > 9:
        raise Reject(f"fraction of a second has more than 9 digits: {frac!r}")
    return f".{frac}" if frac else ""


def instant_from_epoch(value: object, unit: str = "s") -> str:
    """Epoch seconds or milliseconds, with an optional fraction of up to 9 digits → UTC ISO ``...Z``.

    OMS Default writes TIMESTAMP as ``1606233662.012345`` (seconds); DRS writes
    ``1624614713.201``; Canal ``es`` and DataWorks ``eventTime`` are milliseconds.
    """
    d = _decimal(str(value).strip(), "an epoch number")
    scaled = d * (10**9 if unit == "s" else 10**6 if unit == "ms" else 10**3)
    nanos = int(scaled)
    if scaled != nanos:
        raise Reject(f"epoch value finer than nanoseconds: {value!s:.60}")
    return _iso_from_epoch_nanos(nanos) + "Z"


def _iso_from_epoch_nanos(nanos: int) -> str:
    secs, frac = divmod(nanos, 10**9)
    try:
        dt = datetime(1970, 1, 1) + timedelta(seconds=secs)
    except OverflowError:
        raise Reject(f"epoch value out of range: {nanos}") from None
    return dt.strftime("%Y-%m-%dT%H:%M:%S") + _fraction(f"{frac:09d}")


def local_datetime_from_epoch(value: object, unit: str = "ms") -> str:
    """Debezium DATETIME: milliseconds since epoch of a zone-less wall clock."""
    return instant_from_epoch(value, unit)[:-1]


def date_from_epoch_days(value: object) -> str:
    return (EPOCH_DATE + timedelta(days=int(canon_int(value)))).isoformat()


def date_from_epoch_millis(value: object) -> str:
    return instant_from_epoch(value, "ms")[:10]


def time_from_micros(value: object) -> str:
    """Microseconds since midnight → ``[-]HH:MM:SS[.f]`` (a negative MySQL TIME keeps its sign)."""
    micros = int(canon_int(value))
    sign = "-" if micros < 0 else ""
    secs, frac = divmod(abs(micros), 10**6)
    hours, rest = divmod(secs, 3600)
    return f"{sign}{hours:02d}:{rest // 60:02d}:{rest % 60:02d}" + _fraction(f"{frac:06d}")


_DT_RE = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{1,2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?)?"
    r"\s*(Z|[+-]\d{2}:?\d{2}|[A-Za-z_]+(?:/[A-Za-z_+-]+)*)?$",
    re.ASCII,
)


def parse_datetime_text(text: str) -> tuple[datetime, str, str | None]:
    """``YYYY-MM-DD[ HH:MM[:SS[.f]]][ zone]`` → (naive wall clock, fraction digits, zone or None)."""
    m = _DT_RE.match(text.strip())
    if not m:
        raise Reject(f"not a date-time: {text[:60]!r}")
    y, mo, d, h, mi, s, frac, zone = m.groups()
    try:
        dt = datetime(int(y), int(mo), int(d), int(h or 0), int(mi or 0), int(s or 0))
    except ValueError:
        # the shape of a date-time with a day that does not exist (0000-00-00, 2021-02-30): what
        # MySQL stores as a zero date and OMS passes on as the original text
        raise InvalidValue(text, f"invalid date-time: {text[:60]!r}") from None
    return dt, frac or "", zone


@lru_cache(maxsize=1)
def _zone_names() -> frozenset[str]:
    return frozenset(available_timezones()) | {"UTC"}


@lru_cache(maxsize=512)
def time_zone(name: str) -> ZoneInfo:
    """The IANA zone ``name``, or Reject. Checked against the zone list first: ``ZoneInfo`` itself
    raises OSError / IsADirectoryError (whose text holds the interpreter's paths) for names such
    as ``America`` or ``../x``."""
    if name not in _zone_names():
        raise Reject(f"unknown time zone: {name[:60]!r}")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise Reject(f"unknown time zone: {name[:60]!r}") from None


def _zone_offset(zone: str, wall: datetime) -> timedelta:
    if zone == "Z":
        return timedelta(0)
    if zone[0] in "+-":
        digits = zone[1:].replace(":", "")
        hours, minutes = int(digits[:2]), int(digits[2:])
        if hours > 23 or minutes > 59:
            raise Reject(f"invalid zone offset: {zone!r}")
        delta = timedelta(hours=hours, minutes=minutes)
        return delta if zone[0] == "+" else -delta
    tz = time_zone(zone)
    try:
        return wall.replace(tzinfo=tz).utcoffset() or timedelta(0)
    except (OverflowError, ValueError):
        raise Reject(f"date-time out of range in time zone {zone!r}") from None


def canon_local_datetime(text: str) -> str:
    """A zone-less wall clock → ``YYYY-MM-DDTHH:MM:SS[.f]``. A value with a zone is rejected here."""
    dt, frac, zone = parse_datetime_text(text)
    if zone:
        raise Reject(f"zone-less date-time expected, got a zone: {text[:60]!r}")
    return dt.strftime("%Y-%m-%dT%H:%M:%S") + _fraction(frac)


def canon_instant(text: str, default_zone: str = "UTC") -> str:
    """A date-time with a zone (or in ``default_zone``) → UTC ``YYYY-MM-DDTHH:MM:SS[.f]Z``."""
    dt, frac, zone = parse_datetime_text(text)
    try:
        utc = dt - _zone_offset(zone or default_zone, dt)
    except OverflowError:
        raise Reject(f"date-time out of range once moved to UTC: {text[:60]!r}") from None
    return utc.strftime("%Y-%m-%dT%H:%M:%S") + _fraction(frac) + "Z"


def canon_date(text: str) -> str:
    dt, frac, zone = parse_datetime_text(text)
    if len(text.strip()) != 10:
        raise Reject(f"not a date: {text[:60]!r}")
    return dt.date().isoformat()


_TIME_RE = re.compile(r"^(-?)(\d{1,3}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?$", re.ASCII)


def canon_time(text: str) -> str:
    """``[-]H[HH]:MM[:SS[.f]]`` (MySQL TIME reaches 838 hours, and may be negative) → ``[-]HH:MM:SS[.f]``."""
    m = _TIME_RE.match(str(text).strip())
    if not m:
        raise Reject(f"not a time: {str(text)[:60]!r}")
    sign, h, mi, s, frac = m.groups()
    if int(mi) > 59 or int(s or 0) > 59:
        raise Reject(f"invalid time: {str(text)[:60]!r}")
    return f"{sign}{int(h):02d}:{mi}:{s or '00'}" + _fraction(frac or "")
