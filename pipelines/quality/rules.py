"""Configured expectations: the YAML rules (``tables.<db.table>.expectations``) and durations.

Parsed when the configuration loads, so this module needs neither Spark nor Great Expectations and
raises :class:`~pipelines.errors.ConfigError` with messages that name the file, the rule and the field.
Row rules (``not_null``, ``in_set``, ``between``, ``regex``) are checked per micro-batch of changes;
table rules (``unique``, ``row_count_between``) on the mirror after the merge. A SQL rule
(``{name, sql: <boolean over the mirror's columns>, action}``, no ``expect``) is a row rule too: a
change passes when its expression is true. Its text is checked here for what needs no Spark
(balanced brackets and quotes, one expression); :mod:`pipelines.quality.sql_rules` parses it with
Spark's own parser and checks its columns when a run starts.
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NoReturn

from pipelines.errors import ConfigError

#: What a failing rule does: record it, quarantine the offending changes, or stop the stream.
ACTIONS = ("warn", "drop", "fail")
ROW_EXPECTATIONS = ("not_null", "in_set", "between", "regex")
TABLE_EXPECTATIONS = ("unique", "row_count_between")
EXPECTATIONS = ROW_EXPECTATIONS + TABLE_EXPECTATIONS
#: The kind of a rule written as ``sql:`` (a Spark SQL boolean over the mirror's typed columns).
SQL_EXPECTATION = "sql"

#: The built-in CDC checks every mirror gets without configuration (``pipelines.quality.checks``).
CDC_CHECKS = ("key_not_null", "key_unique", "seq_not_backwards", "source_drift", "freshness", "reconcile")
#: A source is stale when its newest event time or heartbeat is older than this: the default of
#: ``sources[].freshness``, the one staleness setting ``lakecdc status`` and the ``cdc_freshness`` check share.
DEFAULT_FRESHNESS_TEXT = "1 hour"
DEFAULT_FRESHNESS = _dt.timedelta(hours=1)

_RULE_NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")


@dataclass(frozen=True)
class Rule:
    """One configured expectation."""

    name: str
    expectation: str  # one of EXPECTATIONS
    columns: tuple[str, ...] = ()
    args: Mapping[str, Any] = field(default_factory=dict)
    action: str = "warn"

    @property
    def column(self) -> str | None:
        return self.columns[0] if self.columns else None

    @property
    def scope(self) -> str:
        """``batch`` (checked on each micro-batch of changes) or ``mirror`` (after the merge)."""
        return "batch" if self.expectation in ROW_EXPECTATIONS or self.is_sql else "mirror"

    @property
    def is_sql(self) -> bool:
        return self.expectation == SQL_EXPECTATION

    @property
    def sql(self) -> str | None:
        """A SQL rule's boolean expression (None for the other kinds)."""
        return self.args.get("sql") if self.is_sql else None


_FIELDS = {
    "not_null": {"column"},
    "in_set": {"column", "values"},
    "between": {"column", "min", "max", "strict_min", "strict_max"},
    "regex": {"column", "pattern"},
    "unique": {"column", "columns"},
    "row_count_between": {"min", "max"},
    SQL_EXPECTATION: {"sql"},
}
_COMMON = {"name", "expect", "action", "description"}


def _fail(at: str, fld: str | None, message: str) -> NoReturn:
    """Raise the error of one rule's field: ``<where>[i] (name).field: message``."""
    raise ConfigError(f"{at}{'.' + fld if fld else ''}: {message}")


def parse_expectations(raw: list[dict] | None, where: str) -> list[Rule]:
    """Validate ``tables.<db.table>.expectations``; errors name ``where``, the rule and the field.

    >>> parse_expectations([{"name": "id_present", "expect": "not_null", "column": "id", "action": "fail"}], "t")
    [Rule(name='id_present', expectation='not_null', columns=('id',), args={}, action='fail')]
    """
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ConfigError(f"{where}: expected a list of expectations, got {type(raw).__name__}")
    rules: list[Rule] = []
    seen: set[str] = set()
    for i, item in enumerate(raw):
        at = f"{where}[{i}]"  # then "<where>[i] (name)" once the rule's name is known
        if not isinstance(item, dict):
            _fail(at, None, f"expected a mapping (name, expect, column, action, ...), got {type(item).__name__}")
        name = item.get("name")
        if not isinstance(name, str) or not _RULE_NAME_RE.match(name):
            _fail(at, "name", f"required: letters, digits, _ . - (got {name!r})")
        at = f"{where}[{i}] ({name})"
        if name in seen:
            _fail(at, "name", "rule names must be unique within a table")
        seen.add(name)
        kind = item.get("expect")
        if "sql" in item:
            if kind is not None:
                _fail(at, "sql", "a SQL rule has no expect: give expect (a fixed rule) or sql, not both")
            kind = SQL_EXPECTATION
        elif kind not in EXPECTATIONS:
            _fail(at, "expect", f"must be one of {', '.join(EXPECTATIONS)}, or give sql: <a boolean>, got {kind!r}")
        allowed = _COMMON - {"expect"} | _FIELDS[kind] if kind == SQL_EXPECTATION else _COMMON | _FIELDS[kind]
        unknown = sorted(set(map(str, item)) - allowed)
        if unknown:
            what = "a sql rule" if kind == SQL_EXPECTATION else f"expect: {kind}"
            _fail(at, unknown[0], f"unknown field for {what}; allowed: {', '.join(sorted(allowed))}")
        action = item.get("action", "warn")
        if action not in ACTIONS:
            _fail(at, "action", f"must be one of {', '.join(ACTIONS)}, got {action!r}")
        if kind in TABLE_EXPECTATIONS and action == "drop":
            _fail(
                at,
                "action",
                f"{kind} is checked on the mirror after the merge, where there is no single "
                f"change to drop; use warn or fail",
            )

        columns: tuple[str, ...] = ()
        if "column" in _FIELDS[kind]:
            col, cols = item.get("column"), item.get("columns")
            if kind == "unique" and cols is not None:
                if col is not None:
                    _fail(at, "columns", "give column or columns, not both")
                if not isinstance(cols, list) or not cols or not all(isinstance(c, str) and c for c in cols):
                    _fail(at, "columns", f"must be a non-empty list of column names, got {cols!r}")
                columns = tuple(cols)
            else:
                if not isinstance(col, str) or not col:
                    _fail(at, "column", f"required: the column name (got {col!r})")
                columns = (col,)

        args: dict[str, Any] = {}
        if kind == SQL_EXPECTATION:
            text = item.get("sql")
            if not isinstance(text, str) or not text.strip():
                _fail(at, "sql", f"required: a SQL boolean over the mirror's columns (got {text!r:.80})")
            problem = sql_syntax_error(text)
            if problem:
                _fail(at, "sql", f"not a SQL expression: {problem}: {text!r:.200}")
            args["sql"] = text.strip()
        elif kind == "in_set":
            values = item.get("values")
            if not isinstance(values, list) or not values:
                _fail(at, "values", f"must be a non-empty list, got {values!r}")
            if not all(isinstance(v, (str, int, float, bool)) for v in values):
                _fail(at, "values", "values must be strings, numbers or booleans")
            args["values"] = list(values)
        elif kind in ("between", "row_count_between"):
            lo, hi = item.get("min"), item.get("max")
            if lo is None and hi is None:
                _fail(at, "min", "give min, max or both")
            for fld, v in (("min", lo), ("max", hi)):
                if v is None:
                    continue
                if isinstance(v, bool) or not isinstance(v, (int, float)):
                    _fail(at, fld, f"must be a number, got {v!r}")
                if kind == "row_count_between" and (not isinstance(v, int) or v < 0):
                    _fail(at, fld, f"must be a non-negative integer, got {v!r}")
            if lo is not None and hi is not None and lo > hi:
                _fail(at, "min", f"min {lo!r} is greater than max {hi!r}")
            args["min"], args["max"] = lo, hi
            for fld in ("strict_min", "strict_max"):
                if fld in item:
                    if not isinstance(item[fld], bool):
                        _fail(at, fld, f"must be true or false, got {item[fld]!r}")
                    args[fld] = item[fld]
        elif kind == "regex":
            pattern = item.get("pattern")
            if not isinstance(pattern, str) or not pattern:
                _fail(at, "pattern", f"required: a regular expression (got {pattern!r})")
            try:
                re.compile(pattern)
            except re.error as exc:
                _fail(at, "pattern", f"not a valid regular expression: {exc}")
            args["pattern"] = pattern
        rules.append(Rule(name=name, expectation=kind, columns=columns, args=args, action=action))
    return rules


#: The closing bracket of each opening one.
_CLOSING = {"(": ")", "[": "]", "{": "}"}


def sql_syntax_error(text: str) -> str | None:
    """What makes ``text`` no single SQL expression, as far as one can tell without Spark's parser:
    an unbalanced bracket, an unterminated string, quoted name or comment, or a ``;`` (None: nothing
    found; :mod:`pipelines.quality.sql_rules` parses it for real when a run starts).

    >>> sql_syntax_error("amount > 0 AND status IN ('NEW', 'PAID')") is None
    True
    >>> sql_syntax_error("(amount > 0")
    'unclosed ( at character 1'
    """
    stack: list[tuple[str, int]] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch in "'\"`":  # a string ('...', "..." with backslash escapes) or a quoted name (`...`)
            j = i + 1
            while j < n and text[j] != ch:
                j += 2 if text[j] == "\\" and ch != "`" else 1
            if j >= n:
                kind = "quoted name" if ch == "`" else "string"
                return f"unterminated {kind} starting at character {i + 1}"
            i = j + 1
            continue
        if text.startswith("--", i):
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
            continue
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                return f"unterminated comment starting at character {i + 1}"
            i = end + 2
            continue
        if ch == ";":
            return f"';' at character {i + 1}: one expression, not statements"
        if ch in _CLOSING:
            stack.append((ch, i))
        elif ch in _CLOSING.values():
            if not stack or _CLOSING[stack[-1][0]] != ch:
                return f"unbalanced {ch} at character {i + 1}"
            stack.pop()
        i += 1
    if stack:
        opened, at = stack[-1]
        return f"unclosed {opened} at character {at + 1}"
    return None


def freshness_seconds(value: Any = None) -> float:
    """A source's ``freshness`` (a duration, seconds, or None: :data:`DEFAULT_FRESHNESS`) in seconds."""
    return parse_duration(DEFAULT_FRESHNESS if value is None else value, "freshness").total_seconds()


def parse_duration(value: Any, where: str) -> _dt.timedelta:
    """``3600`` (seconds), ``"90 minutes"``, ``"1 hour"``, ``"2h"`` → timedelta (freshness thresholds)."""
    if isinstance(value, _dt.timedelta):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        return _dt.timedelta(seconds=value)
    m = re.fullmatch(
        r"\s*(\d+(?:\.\d+)?)\s*(s|sec|secs|seconds?|m|min|mins|minutes?|h|hours?|d|days?)\s*", str(value), re.IGNORECASE
    )
    if not m:
        raise ConfigError(f"{where}: expected a duration like '1 hour', '30 minutes' or seconds, got {value!r}")
    unit = m.group(2).lower()[0]
    seconds = float(m.group(1)) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[unit]
    if seconds <= 0:
        raise ConfigError(f"{where}: must be positive, got {value!r}")
    return _dt.timedelta(seconds=seconds)
