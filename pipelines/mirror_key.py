"""The mirror's key as a table property (``lakecdc.key``): written as a JSON array, so any column name
survives (``"a,b"`` is one column); read in that form and in the comma-joined text mirrors written
before it (where a name with a comma could not be told from two names).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

#: The table property that records a mirror's key columns, in order.
KEY_PROPERTY = "lakecdc.key"


def key_property(key: Iterable[str]) -> str:
    """The property's value for ``key``: a JSON array of the column names."""
    return json.dumps(list(key), ensure_ascii=False)


def key_of(props: Mapping[str, str] | None) -> tuple[str, ...]:
    """The key a mirror's properties record (empty: none, or no mirror). A value that is not a JSON array
    of names is the older comma-joined form."""
    text = (props or {}).get(KEY_PROPERTY) or ""
    if text.startswith("["):
        try:
            names = json.loads(text)
        except ValueError:
            names = None
        if isinstance(names, list) and all(isinstance(n, str) for n in names):
            return tuple(n for n in names if n)
    return tuple(k for k in text.split(",") if k)
