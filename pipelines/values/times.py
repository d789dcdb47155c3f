"""Dates, date-times, instants, zones and times: from epoch numbers and from text, to the canonical
ISO text. Fractions keep up to 9 digits with trailing zeros removed.

Years are always four digits, 0001 to 9999 (Python's range): :func:`wall_text` is the one writer of
date-time text (``strftime("%Y")`` does not pad a year before 1000 on Linux), and
:func:`parse_datetime_text` reads every such year back. Times keep their sign whatever the unit
(:func:`time_from_nanos`). The encoders' inverses are here too (:func:`epoch_nanos`,
:func:`epoch_seconds_text`, :func:`time_nanos`), so a writer and its reader agree.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta
from decimal import Decimal
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from pipelines.errors import InvalidValue, Reject
from pipelines.values.numbers import canon_int, exact_decimal

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
    d = exact_decimal(str(value).strip(), "an epoch number")
    scaled = d * (10**9 if unit == "s" else 10**6 if unit == "ms" else 10**3)
    nanos = int(scaled)
    if scaled != nanos:
        raise Reject(f"epoch value finer than nanoseconds: {value!s:.60}")
    return _iso_from_epoch_nanos(nanos) + "Z"


def wall_text(dt: datetime, sep: str = "T") -> str:
    """``YYYY-MM-DD<sep>HH:MM:SS`` of a date-time, the year in four digits (0001 to 9999)."""
    return f"{dt.year:04d}-{dt.month:02d}-{dt.day:02d}{sep}{dt.hour:02d}:{dt.minute:02d}:{dt.second:02d}"


def _iso_from_epoch_nanos(nanos: int) -> str:
    secs, frac = divmod(nanos, 10**9)
    try:
        dt = datetime(1970, 1, 1) + timedelta(seconds=secs)
    except OverflowError:
        raise Reject(f"epoch value out of range: {str(nanos)[:40]}") from None
    return wall_text(dt) + _fraction(f"{frac:09d}")


def epoch_nanos(text: str) -> int:
    """The inverse of :func:`instant_from_epoch` for encoders: canonical date-time text (an instant's
    ``Z`` or a wall clock read as UTC) → nanoseconds since the epoch."""
    dt, frac, _zone = parse_datetime_text(text.rstrip("Z"))
    delta = dt - datetime(1970, 1, 1)
    return (delta.days * 86400 + delta.seconds) * 10**9 + int(frac.ljust(9, "0") or 0)


def epoch_seconds_text(text: str) -> str:
    """The inverse of :func:`instant_from_epoch` (``"s"``) for encoders: canonical date-time text →
    exact epoch seconds, ``1606233662.012345`` (floor-based: before 1970 ``-0.5`` is half a second before)."""
    nanos = epoch_nanos(text)
    if not nanos % 10**9:
        return str(nanos // 10**9)
    return format(Decimal(nanos).scaleb(-9).normalize(), "f")


def epoch_ms_text(text: str) -> str:
    """A change's commit time (canonical date-time text) → whole epoch milliseconds, as every vendor writes
    it: OMS ``es`` / DataWorks ``eventTime`` (seed 000, 001, 002: "13-digit, millisecond precision"), DRS
    ``es`` (seed 003: 13位Unix时间戳,单位为毫秒), DTS (seed 004), Debezium ``ts_ms``. A finer commit time
    has no place in that field: it is truncated to its millisecond (floor, so before 1970 too), as the
    vendor's own writer does with a source's microsecond commit time. A *column value* in milliseconds is
    a different rule (encoders write a value exactly or refuse it): see ``dataworks_kafka``'s DATE."""
    return str(epoch_nanos(text) // 10**6)


def local_datetime_from_epoch(value: object, unit: str = "ms") -> str:
    """Debezium DATETIME: milliseconds since epoch of a zone-less wall clock."""
    return instant_from_epoch(value, unit)[:-1]


def date_from_epoch_days(value: object) -> str:
    return (EPOCH_DATE + timedelta(days=int(canon_int(value)))).isoformat()


def date_from_epoch_millis(value: object) -> str:
    return instant_from_epoch(value, "ms")[:10]


def time_from_micros(value: object) -> str:
    """Microseconds since midnight → ``[-]HH:MM:SS[.f]`` (a negative MySQL TIME keeps its sign)."""
    return time_from_nanos(int(canon_int(value)) * 1000)


def time_from_nanos(value: object) -> str:
    """Nanoseconds since midnight → ``[-]HH:MM:SS[.f]``: the sign applies to the whole time, never to
    a floor division of it (-1000 ns is ``-00:00:00.000001``, not ``-00:00:01.999999``)."""
    nanos = int(canon_int(value))
    sign = "-" if nanos < 0 else ""
    secs, frac = divmod(abs(nanos), 10**9)
    hours, rest = divmod(secs, 3600)
    if hours > 999:  # canon_time reads up to three hour digits (MySQL TIME reaches 838)
        raise Reject(f"time of {sign}{hours} hours is out of range")
    return f"{sign}{hours:02d}:{rest // 60:02d}:{rest % 60:02d}" + _fraction(f"{frac:09d}")


def time_nanos(text: str) -> int:
    """The inverse of :func:`time_from_nanos` for encoders: canonical ``[-]HH:MM:SS[.f]`` → signed nanoseconds."""
    sign = -1 if text.startswith("-") else 1
    h, m, rest = text.lstrip("-").split(":")
    secs, _, frac = rest.partition(".")
    return sign * ((int(h) * 3600 + int(m) * 60 + int(secs)) * 10**9 + int(frac.ljust(9, "0") or 0))


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
    return wall_text(dt) + _fraction(frac)


def canon_instant(text: str, default_zone: str = "UTC") -> str:
    """A date-time with a zone (or in ``default_zone``) → UTC ``YYYY-MM-DDTHH:MM:SS[.f]Z``."""
    dt, frac, zone = parse_datetime_text(text)
    try:
        utc = dt - _zone_offset(zone or default_zone, dt)
    except OverflowError:
        raise Reject(f"date-time out of range once moved to UTC: {text[:60]!r}") from None
    return wall_text(utc) + _fraction(frac) + "Z"


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
    if not (int(h) or int(mi) or int(s or 0) or (frac or "").strip("0")):
        sign = ""  # -00:00:00 is midnight, written one way
    return f"{sign}{int(h):02d}:{mi}:{s or '00'}" + _fraction(frac or "")
