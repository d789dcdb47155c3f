"""Every table's facts as SQL lookups, so that one expression serves all the tables of a batch.

Gold converts canonical text to each mirror column's Delta type to check a value, to name a key and
to hash a row. Written per table, a batch of 200 tables needs 200 expressions and 200 Spark jobs.
Instead, :class:`Lookups` turns the facts of every table of the batch into literal SQL maps, and the
conversion into one ``CASE`` over the few conversions the batch needs (one per distinct Delta type,
:func:`pipelines.sql.convert_expr`), so one pass converts the values of every table:

* ``MIRROR``: source table identity (:data:`~pipelines.gold.profile.SOURCE_TABLE`) → mirror id;
* ``CONVERSION``: mirror id → column → conversion id; a column the map does not know is left as it
  is (text), as gold ignores image columns its mirror does not have;
* ``TARGET``: mirror id → column → the type named in a misfit's quarantine reason;
* ``KEY``: mirror id → its key columns, in order.

Column names come from messages: every name in a literal passes through :func:`~pipelines.sql.lit`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from pipelines.sql import convert_expr, lit
from pipelines.values import spark_type

#: The column gold adds to a batch: the id of the mirror each change writes (:attr:`MirrorIdentity.state_key`).
MIRROR = "_mirror"


def map_sql(entries: Mapping[str, str], value_type: str) -> str:
    """A literal SQL map of string keys to SQL values (``value_type`` types the empty map)."""
    if not entries:
        return f"cast(map() AS map<string,{value_type}>)"
    return "map(" + ", ".join(f"{lit(k)}, {v}" for k, v in entries.items()) + ")"


def canonical_text(value_sql: str, delta_type: str) -> str:
    """SQL of a typed value as the text that names it in a key or a row hash: bytes as Base64, a
    decimal without trailing zeros (so a widened DECIMAL names the same value), a document as JSON, a
    DOUBLE as the MERGE compares it (``-0.0`` is ``0.0``; NaN is one value, spelled ``NaN``), anything
    else cast. Two values the mirror holds as one key name one key here (issue 35)."""
    t = delta_type.upper()
    if t == "BINARY":
        return f"base64({value_sql})"
    if t == "VARIANT":  # keys sorted, numbers by value: equal documents, equal texts
        return f"to_json({value_sql})"
    if t in ("DOUBLE", "FLOAT"):  # as the MERGE compares them: -0.0 = 0.0, NaN = NaN (one spelling: values.numbers)
        return f"CASE WHEN {value_sql} = 0 THEN '0.0' ELSE CAST({value_sql} AS STRING) END"
    if t.startswith("DECIMAL"):
        return f"regexp_replace(regexp_replace(CAST({value_sql} AS STRING), '(\\\\.[0-9]*?)0+$', '$1'), '\\\\.$', '')"
    return f"CAST({value_sql} AS STRING)"


@dataclass
class Lookups:
    """The facts of one batch's tables, and the SQL that reads them."""

    mirror_of: dict[str, str] = field(default_factory=dict)  # source identity → mirror id
    columns: dict[str, dict[str, str | None]] = field(default_factory=dict)  # mirror id → column → source type
    keys: dict[str, tuple[str, ...]] = field(default_factory=dict)  # mirror id → key columns
    #: distinct conversions, in first-seen order: ``convert_expr`` of a placeholder value → id
    _conversions: dict[str, int] = field(default_factory=dict)
    _delta_types: list[str] = field(default_factory=list)

    def add(self, source: str, mirror: str, columns: Mapping[str, str | None], key: Iterable[str]) -> None:
        """One source table of the batch and the mirror it writes (its shape's columns and key)."""
        self.mirror_of[source] = mirror
        self.columns[mirror] = dict(columns)
        self.keys[mirror] = tuple(key)
        for source_type in columns.values():
            self._conversion_id(source_type)

    def _conversion_id(self, source_type: str | None) -> int:
        template = convert_expr("{v}", source_type)
        if template not in self._conversions:
            self._conversions[template] = len(self._conversions)
            self._delta_types.append(spark_type(source_type))
        return self._conversions[template]

    # ---------------------------------------------------------------- the maps

    @property
    def mirror_sql(self) -> str:
        """SQL of a change's mirror id (NULL for a source table the batch refuses)."""
        return f"element_at({map_sql({s: lit(m) for s, m in self.mirror_of.items()}, 'string')}, _source_table)"

    def _column_map(self, value) -> str:
        inner = {
            m: map_sql({c: value(t) for c, t in cols.items()}, "string" if value is self._target else "int")
            for m, cols in self.columns.items()
        }
        return map_sql(inner, "map<string,string>" if value is self._target else "map<string,int>")

    def _target(self, source_type: str | None) -> str:
        return lit(f"{spark_type(source_type)} (source type {source_type})")

    def conversion_sql(self, column_sql: str, mirror_sql: str = MIRROR) -> str:
        """SQL of the conversion id of a column (NULL: a column the mirror does not have)."""
        ids = self._column_map(lambda t: str(self._conversion_id(t)))
        return f"element_at(element_at({ids}, {mirror_sql}), {column_sql})"

    def target_sql(self, column_sql: str, mirror_sql: str = MIRROR) -> str:
        """SQL of the type a column's value must fit, as a quarantine reason names it."""
        return f"element_at(element_at({self._column_map(self._target)}, {mirror_sql}), {column_sql})"

    def key_sql(self, mirror_sql: str = MIRROR) -> str:
        """SQL of the key columns of a change's mirror (an array)."""
        keys = {m: "array(" + ", ".join(lit(k) for k in key) + ")" if key else "cast(array() AS array<string>)"
                for m, key in self.keys.items()}  # fmt: skip
        return f"element_at({map_sql(keys, 'array<string>')}, {mirror_sql})"

    # ---------------------------------------------------------------- converting values

    def fits(self, value_sql: str, conversion_sql: str) -> str:
        """SQL: ``value_sql`` (canonical text, not NULL) converts to its column's type (a column the mirror
        does not have: true)."""
        if not self._conversions:
            return "true"
        branches = " ".join(
            f"WHEN {i} THEN ({template.replace('{v}', value_sql)}) IS NOT NULL"
            for template, i in self._conversions.items()
        )
        return f"CASE {conversion_sql} {branches} ELSE true END"

    def canonical(self, value_sql: str, conversion_sql: str) -> str:
        """SQL of ``value_sql`` converted and named as text (:func:`canonical_text`): equal texts, equal
        values. The text itself where the column is unknown."""
        if not self._conversions:
            return value_sql
        branches = " ".join(
            f"WHEN {i} THEN {canonical_text(template.replace('{v}', value_sql), self._delta_types[i])}"
            for template, i in self._conversions.items()
        )
        return f"CASE {conversion_sql} {branches} ELSE {value_sql} END"

    def key_text(self, image_sql: str, mirror_sql: str = MIRROR) -> str:
        """SQL of the key a row image names, as JSON text (an array of each key column's canonical text):
        the same key gives the same text however the message spelled it (``01`` and ``1`` of an INT)."""
        text = self.canonical(f"({image_sql})[kc]", self.conversion_sql("kc", mirror_sql))
        return f"to_json(transform({self.key_sql(mirror_sql)}, kc -> {text}))"

    def value_hashes(self, image_sql: str, mirror_sql: str = MIRROR) -> str:
        """SQL of a row image's data values as hashes of their canonical text, by column (the mirror's
        columns only): what the drift check compares a before-image with."""
        conv = self.conversion_sql("c", mirror_sql)
        known = f"map_filter(coalesce({image_sql}, cast(map() AS map<string,string>)), (c, v) -> {conv} IS NOT NULL)"
        return f"transform_values({known}, (c, v) -> xxhash64({self.canonical('v', conv)}))"
