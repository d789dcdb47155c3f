"""Every encoder writes a value exactly or refuses it (issue 26): never a silent change.

The simulator's histories, the gold end-to-end checks and the round-trip tests all trust
``decode(encode(change))`` to give the change back. So for every format with an encoder, a change
carrying times and date-times at their bounds (negative TIMEs, nine fraction digits, years 1 to
9999) either encodes to a message its own decoder reads back to the same values, or the encoder
raises ``ValueError`` (the format cannot carry that value: DTS Avro holds microseconds at most).
The one documented difference is what a format carries as another type (:data:`CARRIED`).
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipelines.formats import get_decoder
from pipelines.formats.base import Change, DecodeContext, TableSpec
from pipelines.testing.simulator import CAPABILITIES, _seq_for, encodable_formats
from pipelines.values import canon_instant, family

TYPES = {"id": "bigint", "t": "time", "dt": "datetime", "ts": "timestamp", "d": "date"}


def _frac(digits: str) -> str:
    digits = digits.rstrip("0")
    return f".{digits}" if digits else ""


FRACTIONS = st.text(alphabet="0123456789", max_size=9).map(_frac)
WALL = st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59)).map(
    lambda d: f"{d.year:04d}-{d.month:02d}-{d.day:02d}T{d.hour:02d}:{d.minute:02d}:{d.second:02d}"
)
TIMES = st.builds(
    lambda sign, h, m, s, f: ("-" if sign and (h or m or s or f) else "") + f"{h:02d}:{m:02d}:{s:02d}{f}",
    st.booleans(),
    st.integers(0, 838),
    st.integers(0, 59),
    st.integers(0, 59),
    FRACTIONS,
)
VALUES = {
    "t": TIMES,
    "dt": st.builds(lambda w, f: w + f, WALL, FRACTIONS),
    "ts": st.builds(lambda w, f: w + f + "Z", WALL, FRACTIONS),
    "d": WALL.map(lambda w: w[:10]),
}


def carried(fmt: str, column: str, value: str) -> tuple[str, str]:
    """(type, value) a format gives back for a column of TYPES: DataWorks has one DATE type (epoch
    milliseconds) for every date and time, read back as the UTC instant of the wall clock."""
    col_type = TYPES.get(column, "bigint")
    if fmt == "dataworks_kafka" and family(col_type) in ("date", "datetime"):
        return "timestamp", canon_instant(value if len(value) > 10 else value + " 00:00:00")
    return col_type, value


@st.composite
def changes(draw, fmt: str) -> Change:
    columns = draw(st.lists(st.sampled_from(sorted(VALUES)), min_size=1, max_size=4, unique=True))
    key = (CAPABILITIES[fmt].fixed_key or ("id",))[0]
    row = {key: "1", **{c: draw(VALUES[c]) for c in columns}}
    types = {c: TYPES.get(c, "bigint") for c in row}
    seq = _seq_for(CAPABILITIES[fmt].seq, 1_700_000_000_000, 1, 1)
    return Change(
        "INSERT",
        db="d",
        table="t",
        key_columns=(key,),
        after=row,
        col_types=types,
        seq=seq,
        event_time="2023-11-14T22:13:20Z",
    )


FORMATS = encodable_formats()


@pytest.mark.parametrize("fmt", FORMATS)
@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_encoders_write_times_exactly_or_refuse(fmt, data):
    change = data.draw(changes(fmt))
    caps = CAPABILITIES[fmt]
    ctx = DecodeContext(
        tables={"d.t": TableSpec(key=change.key_columns, columns=change.col_types)},
        default_table="d.t",
        options=caps.options,
    )
    decoder = get_decoder(fmt)
    try:
        raw = decoder.encode(change, ctx)
    except ValueError:
        return  # the format cannot carry one of the values: refused, not changed
    [got] = [c for c in decoder.decode(raw, ctx) if c.after]
    expected = {c: carried(fmt, c, v)[1] if c in TYPES else v for c, v in change.after.items()}
    assert got.after == expected, raw[:400]
    types = {c: carried(fmt, c, "0001-01-01")[0] for c in expected if c in TYPES}
    assert {c: (got.col_types or {}).get(c, TYPES[c]) for c in types} == types


@pytest.mark.parametrize(
    "fmt, column, value",
    [
        ("oms_debezium", "t", "-00:00:01.5"),
        ("oms_debezium", "t", "-10:00:01"),
        ("oms_debezium_flatten", "t", "-00:00:00.000001"),
        ("dts_avro", "t", "-01:02:03.000004"),
        ("dts_avro", "dt", "0999-12-31T23:59:59.123456"),
        ("dataworks_kafka", "d", "2020-01-01"),
        ("dataworks_kafka", "d", "0999-12-31"),
    ],
)
def test_the_campaigns_encoder_cases_round_trip(fmt, column, value):
    change = Change(
        "INSERT",
        db="d",
        table="t",
        key_columns=("id",),
        after={"id": "1", column: value},
        col_types={"id": "bigint", column: TYPES[column]},
        seq=_seq_for(CAPABILITIES[fmt].seq, 1_700_000_000_000, 1, 1),
        event_time="2023-11-14T22:13:20Z",
    )
    ctx = DecodeContext(tables={"d.t": TableSpec(key=("id",), columns=change.col_types)}, default_table="d.t")
    decoder = get_decoder(fmt)
    [got] = decoder.decode(decoder.encode(change, ctx), ctx)
    assert got.after[column] == carried(fmt, column, value)[1]


@pytest.mark.parametrize("value", ["10:00:01.123456789", "00:00:00.0000001"])
def test_dts_avro_refuses_what_it_cannot_carry(value):
    change = Change(
        "INSERT", db="d", table="t", after={"id": "1", "t": value}, col_types={"id": "bigint", "t": "time"}, seq=(1,)
    )
    with pytest.raises(ValueError, match="microseconds"):
        get_decoder("dts_avro").encode(change, DecodeContext())
    dt = (datetime(1, 1, 1) + timedelta(days=1)).isoformat()
    change.after, change.col_types = {"id": "1", "dt": dt + ".1234567"}, {"id": "bigint", "dt": "datetime"}
    with pytest.raises(ValueError, match="microseconds"):
        get_decoder("dts_avro").encode(change, DecodeContext())
