"""Hypothesis strategies shared by the OMS/SharePlex/DataWorks decoder round-trip tests."""

from __future__ import annotations

import base64
from datetime import datetime
from decimal import Decimal

from hypothesis import strategies as st

from pipelines.values import instant_from_epoch

TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=20)


def _frac(micros: int) -> str:
    frac = f"{micros:06d}".rstrip("0")
    return f".{frac}" if frac else ""


_DT = st.datetimes(min_value=datetime(1000, 1, 1), max_value=datetime(9999, 12, 31))

#: column type → strategy of canonical text (awkward values included)
VALUES = {
    "bigint": st.integers(-(2**63), 2**63 - 1).map(str),
    "bigint unsigned": st.integers(0, 2**64 - 1).map(str) | st.just("10223372036854775806"),
    "decimal(65,30)": st.tuples(st.integers(-(10**40), 10**40), st.integers(0, 30)).map(
        lambda t: format(Decimal(t[0]).scaleb(-t[1]), "f")
    ),
    "double": st.sampled_from(["1.5", "-0.25", "1e+300", "0", "9.999999999999999"]),
    "boolean": st.sampled_from(["true", "false"]),
    "blob": st.binary(max_size=24).map(lambda b: base64.b64encode(b).decode()),
    "date": st.dates().map(lambda d: d.isoformat()),
    "datetime": _DT.map(lambda d: d.strftime("%Y-%m-%dT%H:%M:%S") + _frac(d.microsecond)),
    "timestamp": _DT.map(lambda d: d.strftime("%Y-%m-%dT%H:%M:%S") + _frac(d.microsecond) + "Z"),
    "time": st.tuples(st.integers(0, 838), st.integers(0, 59), st.integers(0, 59), st.integers(0, 999999)).map(
        lambda t: f"{t[0]:02d}:{t[1]:02d}:{t[2]:02d}" + _frac(t[3])
    ),
    "varchar(64)": TEXT,
}
COL_TYPES = {"id": "bigint", **{f"c_{i}": t for i, t in enumerate(VALUES)}}


@st.composite
def rows(draw) -> dict:
    row = {}
    for col, typ in COL_TYPES.items():
        strat = VALUES[typ]
        row[col] = draw(strat if col == "id" else st.none() | strat)
    return row


epoch_instants = st.integers(10**9, 9_999_999_999).map(lambda n: instant_from_epoch(str(n), "s"))
ms_instants = st.integers(10**12, 9_999_999_999_999).map(lambda n: instant_from_epoch(str(n), "ms"))
