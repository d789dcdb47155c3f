"""Spark DDL → Arrow schema, for ``mapInArrow`` functions that run where no SparkContext exists.

Covers the column types silver and bronze use; each schema is written once, as Spark DDL.
"""

from __future__ import annotations

import re
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa


def _split_top(text: str) -> list[str]:
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        parts.append("".join(cur).strip())
    return parts


def _arrow_type(spec: str):
    import pyarrow as pa

    s = spec.strip()
    upper = s.upper()
    simple = {
        "STRING": pa.string(),
        "INT": pa.int32(),
        "BIGINT": pa.int64(),
        "BINARY": pa.binary(),
        "BOOLEAN": pa.bool_(),
        "DOUBLE": pa.float64(),
        "TIMESTAMP": pa.timestamp("us", tz="UTC"),
    }
    if upper in simple:
        return simple[upper]
    if upper.startswith("ARRAY<"):
        return pa.list_(_arrow_type(s[6:-1]))
    if upper.startswith("MAP<"):
        k, v = _split_top(s[4:-1])
        return pa.map_(_arrow_type(k), _arrow_type(v))
    if upper.startswith("STRUCT<"):
        return pa.struct([_field(f) for f in _split_top(s[7:-1])])
    raise ValueError(f"unsupported type in DDL: {spec}")


def _field(text: str):
    import pyarrow as pa

    m = re.match(r"^\s*`?([^`:\s]+)`?\s*:?\s+(.*)$", text, re.S)
    if not m:
        raise ValueError(f"bad field in DDL: {text}")
    return pa.field(m.group(1), _arrow_type(m.group(2)))


@cache
def arrow_schema_of(ddl: str) -> pa.Schema:
    import pyarrow as pa

    return pa.schema([_field(f) for f in _split_top(ddl)])
