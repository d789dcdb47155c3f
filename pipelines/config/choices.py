"""What an analyst chooses in the file, checked: the tables kept (``include`` / ``exclude``), a table's
columns (``columns_include`` / ``columns_exclude``), the columns its history tracks, its clustering
columns, ``ignore_null_updates`` and ``gold.naming``.

Each check takes the validator (:class:`~pipelines.config.checker.Checker`), records every error
with the file and the field, and returns what the model keeps.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pipelines.config.checker import Checker
from pipelines.config.fields import HISTORY, NAMING
from pipelines.config.model import DELETE_MODES, MAX_CLUSTER_COLUMNS, TYPE_MAPPINGS
from pipelines.names import DEFAULT_NAMING_TEMPLATE, MirrorNaming, naming_errors
from pipelines.selection import TableFilter, skipped_everywhere

if TYPE_CHECKING:
    from pipelines.config.model import Source, TableConfig


def names(v: Checker, value: Any, where: str, what: str = "names") -> tuple[str, ...]:
    """A list of non-empty strings (one string: a list of one), none twice."""
    items = v.sequence([value] if isinstance(value, str) else value, where)
    out: list[str] = []
    for i, item in enumerate(items):
        if not isinstance(item, str) or not item.strip():
            v.fail(f"{where}[{i}]", f"must be a non-empty string ({what}), got {item!r:.80}")
        elif item in out:
            v.fail(f"{where}[{i}]", f"{item!r:.80} is listed twice")
        else:
            out.append(item)
    return tuple(out)


def table_lists(v: Checker, raw: Mapping, where: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``include`` and ``exclude`` of the top level or of a source: table names or glob patterns."""
    prefix = f"{where}." if where else ""
    include = names(v, raw["include"], f"{prefix}include", "a table name or glob pattern") if "include" in raw else ()
    exclude = names(v, raw["exclude"], f"{prefix}exclude", "a table name or glob pattern") if "exclude" in raw else ()
    if "include" in raw and not include:
        v.fail(f"{prefix}include", "an empty include keeps no table: leave it out to keep every table")
    return include, exclude


def optional_boolean(v: Checker, raw: Mapping, name: str, where: str) -> bool | None:
    return v.boolean(raw[name], f"{where}.{name}") if name in raw and raw[name] is not None else None


def naming(v: Checker, raw: Any) -> MirrorNaming:
    """``gold.naming``: template, prefix, suffix."""
    n = v.mapping(raw or {}, "gold.naming")
    v.only(n, "gold.naming", NAMING.names())
    value = {}
    for name, default in (("template", DEFAULT_NAMING_TEMPLATE), ("prefix", ""), ("suffix", "")):
        given = n.get(name, default)
        if given is None:
            given = default
        if not isinstance(given, str):
            v.fail(f"gold.naming.{name}", f"must be a string, got {given!r:.80}")
            given = default
        value[name] = given
    result = MirrorNaming(**value)
    for name, message in naming_errors(result):
        v.fail(f"gold.naming.{name}", message)
    return result if not naming_errors(result) else MirrorNaming()


def _among(v: Checker, chosen: Sequence[str], columns: Mapping[str, str], where: str, fold: bool) -> None:
    """Each chosen column is one of the configured ``columns`` (when the table gives them)."""
    if not columns:
        return
    known = {c.lower() for c in columns} if fold else set(columns)
    for i, c in enumerate(chosen):
        if (c.lower() if fold else c) not in known:
            v.fail(f"{where}[{i}]", f"column {c!r:.80} is not among the table's columns")


def table_choices(
    v: Checker, t: Mapping, where: str, key: Sequence[str], columns: Mapping[str, str], rules: Sequence
) -> dict[str, Any]:
    """The chosen columns, history columns, clustering and ``ignore_null_updates`` of one table: the
    :class:`~pipelines.config.model.TableConfig` fields they set (``columns``: the mirror's)."""
    out: dict[str, Any] = {}
    include = names(v, t["columns_include"], f"{where}.columns_include", "a column") if "columns_include" in t else None
    exclude = names(v, t["columns_exclude"], f"{where}.columns_exclude", "a column") if "columns_exclude" in t else ()
    if include is not None and "columns_exclude" in t:
        v.fail(where, "give columns_include or columns_exclude, not both")
    if include is not None and not include:
        v.fail(f"{where}.columns_include", "an empty list keeps no column: leave it out to keep every column")
    _among(v, include or (), columns, f"{where}.columns_include", fold=True)
    _among(v, exclude, columns, f"{where}.columns_exclude", fold=True)
    kept_in = None if include is None else {c.lower() for c in include}
    kept_out = {c.lower() for c in exclude}

    def dropped(column: str) -> bool:
        return (kept_in is not None and column.lower() not in kept_in) or column.lower() in kept_out

    field = f"{where}.columns_include" if include is not None else f"{where}.columns_exclude"
    for k in key:
        if dropped(k):
            v.fail(field, f"key column {k!r} cannot be left out: the mirror needs its key")
    for i, rule in enumerate(rules):
        for c in rule.columns:
            if dropped(c):
                v.fail(
                    f"{where}.expectations[{i}] ({rule.name}).column",
                    f"column {c!r} is left out by {field.rsplit('.', 1)[1]}: the rule could never see it",
                )
    if include is not None or exclude:
        out.update(
            columns={c: typ for c, typ in columns.items() if not dropped(c)},
            source_columns=dict(columns),
            columns_include=include,
            columns_exclude=exclude,
        )
    out.update(_history(v, t.get("history", False), f"{where}.history", key, columns, dropped))
    if "cluster_by" in t:
        cluster = names(v, t["cluster_by"], f"{where}.cluster_by", "a column")
        if len(cluster) > MAX_CLUSTER_COLUMNS:
            v.fail(
                f"{where}.cluster_by", f"Delta clusters by at most {MAX_CLUSTER_COLUMNS} columns, got {len(cluster)}"
            )
        _among(v, cluster, columns, f"{where}.cluster_by", fold=False)
        for i, c in enumerate(cluster):
            if dropped(c) and (not columns or c in columns):
                v.fail(f"{where}.cluster_by[{i}]", f"column {c!r} is left out of the mirror ({field.rsplit('.')[-1]})")
        out["cluster_by"] = cluster
    out["ignore_null_updates"] = optional_boolean(v, t, "ignore_null_updates", where)
    out.update(row_options(v, t, where))
    return out


def row_options(v: Checker, t: Mapping, where: str) -> dict[str, Any]:
    """``deletes`` (hard | soft), ``from`` (regular expressions: pipelines.routing) and ``where`` (a non-empty
    Spark SQL boolean; gold parses it and checks its columns against the mirror's, pipelines.gold.where)."""
    out: dict[str, Any] = {}
    if t.get("deletes") is not None:
        if t["deletes"] not in DELETE_MODES:
            v.fail(f"{where}.deletes", f"must be one of {', '.join(DELETE_MODES)}, got {t['deletes']!r:.80}")
        else:
            out["deletes"] = t["deletes"]
    if t.get("where") is not None:
        if not isinstance(t["where"], str) or not t["where"].strip():
            v.fail(f"{where}.where", f"must be a Spark SQL boolean expression, got {t['where']!r:.80}")
        else:
            out["where"] = t["where"].strip()
    if t.get("computed") is not None:
        raw = t["computed"] if isinstance(t["computed"], dict) else None
        if raw is None:
            v.fail(f"{where}.computed", f"must be a mapping column → Spark SQL expression, got {t['computed']!r:.80}")
        for column, text in (raw or {}).items():
            if not isinstance(text, str) or not text.strip():
                v.fail(f"{where}.computed.{column}", f"must be a Spark SQL expression, got {text!r:.80}")
            elif str(column) in (t.get("columns") or {}):
                v.fail(f"{where}.computed.{column}", "is a column of the table: a computed column needs its own name")
        out["computed"] = {str(c): x.strip() for c, x in (raw or {}).items() if isinstance(x, str) and x.strip()}
    if t.get("partition_by") is not None:
        out["partition_by"] = names(v, t["partition_by"], f"{where}.partition_by", "a column")
        if t.get("cluster_by"):
            v.fail(where, "give cluster_by or partition_by, not both (Delta clusters or partitions a table)")
        known = {*(t.get("columns") or {}), *out.get("computed", {}), *(["_source_table"] if t.get("from") else [])}
        for i, c in enumerate(out["partition_by"]):
            if t.get("columns") and c not in known:
                v.fail(f"{where}.partition_by[{i}]", f"column {c!r:.80} is not among the columns or computed columns")
    if "type_mapping" in t:
        out["type_mapping"] = type_mapping(v, t["type_mapping"], f"{where}.type_mapping")
    if t.get("from") is not None:
        out["from_tables"] = names(v, t["from"], f"{where}.from", "a regular expression over db.table")
        if not out["from_tables"]:
            v.fail(f"{where}.from", "an empty list routes no table: leave it out")
    return out


def _history(v: Checker, raw: Any, where: str, key: Sequence[str], columns: Mapping[str, str], dropped) -> dict:
    """``history``: true | false | {columns: [...]} | {except_columns: [...]}."""
    if isinstance(raw, bool) or raw is None:
        return {"history": bool(raw)}
    if not isinstance(raw, dict):
        v.fail(where, f"must be true, false, {{columns: [...]}} or {{except_columns: [...]}}, got {raw!r:.80}")
        return {"history": False}
    v.only(raw, where, HISTORY.names())
    if ("columns" in raw) == ("except_columns" in raw):
        v.fail(where, "give exactly one of columns (the columns tracked) or except_columns (the columns not tracked)")
        return {"history": True}
    field = "columns" if "columns" in raw else "except_columns"
    chosen = names(v, raw[field], f"{where}.{field}", "a column")
    if not chosen:
        v.fail(f"{where}.{field}", "must name at least one column")
    _among(v, chosen, columns, f"{where}.{field}", fold=False)
    for i, c in enumerate(chosen):
        if dropped(c) and (not columns or c in columns):
            v.fail(f"{where}.{field}[{i}]", f"column {c!r} is left out of the mirror")
        elif field == "except_columns" and c in key:
            v.fail(f"{where}.{field}[{i}]", f"key column {c!r} identifies the versions: it is always recorded")
    if field == "columns":
        return {"history": True, "history_columns": chosen}
    return {"history": True, "history_except_columns": chosen}


def skipped_tables(
    v: Checker,
    tables: Mapping[str, TableConfig],
    top: tuple[tuple[str, ...], tuple[str, ...]],
    sources: Sequence[Source],
) -> None:
    """A configured table that every source's lists (and the top level's) skip is a mistake: its entry
    could never apply."""
    top_filter = TableFilter("", *top)
    filters = [TableFilter(f"sources[{i}].", s.include, s.exclude) for i, s in enumerate(sources)]
    for name, tc in tables.items():
        if tc.from_tables:  # a mirror fed by shards: its own name need not be a source table's
            continue
        reason = skipped_everywhere(name, top_filter, filters)
        if reason:
            v.fail(f"tables.{name}", f"is configured but no source keeps it: {reason}")


def type_mapping(v: Checker, raw: Any, where: str) -> tuple[str, ...]:
    """``type_mapping`` (top level, a source's, a table's): a list of :data:`TYPE_MAPPINGS` (empty: none)."""
    chosen = names(v, raw or [], where, "a type mapping")
    for i, m in enumerate(chosen):
        if m not in TYPE_MAPPINGS:
            v.fail(f"{where}[{i}]", f"unknown type mapping {m!r:.80}; known: {', '.join(TYPE_MAPPINGS)}")
    return chosen
