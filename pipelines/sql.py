"""SQL building blocks over silver changes and mirror columns, shared by gold, quality and export.

Names and texts come from messages, so they are hostile until proven otherwise: every name that
reaches SQL passes through :func:`q` and every text through :func:`lit`.
"""

from __future__ import annotations

from pipelines.values import array_element, family, parse_type, spark_type

#: An empty image (``before``/``after`` are ``map<string,string>``).
EMPTY_MAP = "cast(map() AS map<string,string>)"
#: A change that carries only some columns (``changed`` set: SharePlex, Mongo ``$set``, DTS NONE).
PARTIAL_SQL = "op = 'UPDATE' AND changed IS NOT NULL"
#: A change whose after-image is the whole row.
FULL_IMAGE_SQL = "(op IN ('INSERT', 'SNAPSHOT') OR (op = 'UPDATE' AND changed IS NULL)) AND after IS NOT NULL"
#: The row as a change leaves it (canonical text): a partial UPDATE overlays its columns on its
#: before-image (SharePlex ``key``), so a row that moves to a new key keeps the columns the message
#: does not carry; any other change's after-image is the row.
ROW_AFTER_SQL = (
    f"CASE WHEN {PARTIAL_SQL} THEN map_concat(coalesce(before, {EMPTY_MAP}), coalesce(after, {EMPTY_MAP})) "
    f"ELSE coalesce(after, {EMPTY_MAP}) END"
)
#: The image that names a change's row: a DELETE's before-image, any other change's after-image
#: (each falling back to the other where a format sends only one).
ROW_IMAGE_SQL = "CASE WHEN op = 'DELETE' THEN coalesce(before, after) ELSE coalesce(after, before) END"


def q(name: str) -> str:
    """A quoted SQL identifier: any name, backticks included."""
    return "`" + name.replace("`", "``") + "`"


def sql_str(value: str) -> str:
    """The body of a single-quoted SQL string literal."""
    return value.replace("\\", "\\\\").replace("'", "\\'")


def lit(text: str) -> str:
    """A SQL string literal."""
    return "'" + sql_str(text) + "'"


#: A JSON string token (Java regex; possessive, so a long string costs no stack).
JSON_STRING = r'"[^"\\]*+(?:\\.[^"\\]*+)*+"'
#: A JSON number VARIANT would hold as a DOUBLE, not exactly: one with an exponent (``1e5``, ``1.5E400`` is
#: Infinity) or more than 38 digits (a DECIMAL holds 38). Matched in the document with its strings lexed out
#: (:data:`JSON_STRING`), so only numbers can match: ``{"a":"x:1e5"}`` is kept.
INEXACT_IN_VARIANT = r"(^|[\[:,])\s*-?([0-9]+(\.[0-9]*)?[eE]|([0-9]\.?){39})"
#: An escaped backslash (``\\``), removed first so that every ``\u`` left is an escape.
ESCAPED_BACKSLASH = r"\\\\"
#: A surrogate pair written as two escapes (``\ud83d\ude00``): one character.
SURROGATE_PAIR = r"\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}"
#: A surrogate escape left once the pairs are gone: a lone surrogate, which VARIANT would store as ``?``.
LONE_SURROGATE = r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}"


def timestamp_lit(text: str | None) -> str:
    """A SQL TIMESTAMP literal of ``text`` (a source commit time), NULL for None."""
    return "CAST(NULL AS TIMESTAMP)" if text is None else f"CAST({lit(text)} AS TIMESTAMP)"


def variant_expr(text_col: str) -> str:
    """SQL: the JSON document as a VARIANT, NULL (a misfit, quarantined) where it is not JSON, holds a
    number VARIANT would round (:data:`INEXACT_IN_VARIANT`, looked for outside strings only) or a lone
    surrogate escape (``{"a":"\\ud800"}``: VARIANT would keep ``?``)."""
    lexed = f"regexp_replace({text_col}, {lit(JSON_STRING)}, '\"\"')"
    escapes = f"regexp_replace(regexp_replace({text_col}, {lit(ESCAPED_BACKSLASH)}, ''), {lit(SURROGATE_PAIR)}, '')"
    return (
        f"CASE WHEN try_parse_json({text_col}) IS NULL OR {lexed} RLIKE {lit(INEXACT_IN_VARIANT)} "
        f"OR {escapes} RLIKE {lit(LONE_SURROGATE)} THEN NULL ELSE try_parse_json({text_col}) END"
    )


def convert_expr(text_col: str, source_type: str | None) -> str:
    """SQL that turns canonical text into the mirror type, NULL where it does not fit."""
    target = spark_type(source_type)
    if target == "STRING":
        return text_col
    if target.startswith("ARRAY<"):
        return _array_expr(text_col, source_type or "")
    if target == "BINARY":
        return f"try_to_binary({text_col}, 'base64')"
    if target == "VARIANT":
        return variant_expr(text_col)
    if target in ("TIMESTAMP", "TIMESTAMP_NTZ"):
        return f"CASE WHEN {text_col} RLIKE '\\\\.[0-9]{{7,}}' THEN NULL ELSE try_cast({text_col} AS {target}) END"
    if target.startswith("DECIMAL"):
        _, args, _ = parse_type(source_type or "")
        p, s = (list(args) + [0])[:2] if args else (20, 0)
        if family(source_type) == "uint64":
            p, s = 20, 0
        whole = p - s
        int_part = f"(0|[1-9][0-9]{{0,{whole - 1}}})" if whole > 0 else "0?"
        frac_part = f"(\\\\.[0-9]{{0,{s}}}0*)?" if s > 0 else "(\\\\.0*)?"
        return (
            f"CASE WHEN {text_col} RLIKE '^-?{int_part}{frac_part}$' "
            f"THEN try_cast({text_col} AS {target}) ELSE NULL END"
        )
    return f"try_cast({text_col} AS {target})"


def _array_expr(text_col: str, source_type: str) -> str:
    """SQL: a typed array's canonical text (the JSON array of its elements' canonical texts) as an ARRAY of
    the element's type, each element converted as a column of that type would be; NULL (a misfit) where
    the text is no such array or one element does not fit. Each level states its element's conversion
    once (bound by a one-element ``transform``), so nested arrays cost SQL linear in their depth."""
    level = source_type.count("array<")  # one name per level of nesting
    var, got, arr = f"__lakecdc_e{level}", f"__lakecdc_t{level}", f"from_json({text_col}, 'ARRAY<STRING>')"
    conv = convert_expr(var, array_element(source_type))
    a, b = f"a{level}", f"b{level}"
    misfit = f"array_contains(zip_with({arr}, {got}, ({a}, {b}) -> {a} IS NOT NULL AND {b} IS NULL), true)"
    return (
        f"element_at(transform(array(transform({arr}, {var} -> {conv})), "
        f"{got} -> CASE WHEN {misfit} THEN NULL ELSE {got} END), 1)"
    )


def typed(image_sql: str, column: str, source_type: str | None) -> str:
    """SQL of one column of an image (``map<string,string>``) converted to the mirror type."""
    return convert_expr(f"({image_sql})[{lit(column)}]", source_type)


def export_expr(column: str, data_type: str) -> str:
    """SQL that renders a mirror value as canonical text for ``lakecdc export``."""
    return _export_value(q(column), data_type)


def _export_value(c: str, data_type: str) -> str:
    """SQL of the canonical text of the value ``c`` (SQL) of the Delta type ``data_type``."""
    t = data_type.lower()
    if t.startswith("array<") and t.endswith(">"):  # a typed array: the JSON array of its elements' texts
        var = f"__lakecdc_x{t.count('array<')}"
        return f"to_json(transform({c}, {var} -> {_export_value(var, t[6:-1])}))"
    if t == "variant":  # the document as JSON: keys sorted, no spaces, numbers by value (1.10 is 1.1)
        return f"to_json({c})"
    if t == "binary":
        # Spark's base64() breaks lines every 76 characters where spark.sql.chunkBase64String.enabled
        # is on (the default): one unbroken string, whatever the session says.
        return f"regexp_replace(base64({c}), '[\\r\\n]', '')"
    if t == "timestamp":
        return f"concat(replace(CAST({c} AS STRING), ' ', 'T'), 'Z')"
    if t == "timestamp_ntz":
        return f"replace(CAST({c} AS STRING), ' ', 'T')"
    return f"CAST({c} AS STRING)"
