"""Shape: the mirror's columns, and how they follow the source table's schema.

Schema changes are read from the row images and the types messages state, not parsed from DDL
text: several formats deliver no DDL at all (Debezium, DataWorks Kafka, Mongo), and DDL dialects
differ. ``silver.ddl_log`` keeps the statements for people.

====================  =====================================================================
ADD COLUMN            always evolves the mirror; older rows read NULL.
type widening         always evolves where Delta's type widening allows it: INT → BIGINT,
                      DOUBLE or a DECIMAL wide enough; DECIMAL(p,s) → more digits on both
                      sides; DATE → TIMESTAMP_NTZ.
narrowing             a new type whose values all fit the mirror's type (BIGINT → INT,
                      DECIMAL(38,24) → DECIMAL(10,2), anything → a text column).
retype                an unrelated type (VARCHAR → INT, INT → DATETIME).
DROP COLUMN           a full after-image newer than the column's first incremental sighting
                      no longer carries it (formats whose documents may lack fields never
                      count: ``Decoder.schemaless``).
RENAME COLUMN         in the same images one column disappears and one of the same type
                      appears (one pair per batch; several at once read as drops and adds).
====================  =====================================================================

The last four follow the table's ``schema_changes`` policy:

* ``fail`` (the default): the stream stops, naming the table, the column and the setting. The
  micro-batch is not committed, so after the policy is edited a restart applies it, nothing lost.
* ``quarantine``: the changes that show the schema change go to quarantine with the reason; the
  table's other changes apply.
* ``evolve``: narrowing keeps the mirror's wider type; retype turns the column into text (its
  values rewritten as canonical text); DROP drops the mirror column and RENAME renames it (Delta
  column mapping by name: a streaming read of the mirror's change feed stops at that version).
* ``ignore``: the mirror keeps its shape. Values convert to the mirror's type (one that does not
  fit is quarantined, as always); a dropped column keeps the values it had and full images no
  longer write it (rows inserted later read NULL there).
Longer than 400 lines because every schema-change decision of the table above is made in one
place (:class:`SchemaEvolution`), next to the type relations it uses.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pipelines.gold.describe import declare_key, declares_key, mirror_comment, restore_not_null
from pipelines.gold.identity import (
    SOURCE_IDENTITY_PROPERTY,
    TABLE_FEATURES_PROPERTY,
    MirrorIdentity,
    feature_properties,
    readable_type,
)
from pipelines.layout import LINEAGE_DDL, ROW_ID_COLUMN, SYSTEM_COLUMNS
from pipelines.mirror_columns import (
    SOURCE_TYPES_PROPERTY,
    TEXT_SOURCE_TYPE,
    column_ddl,
    mirror_schema,
    properties_sql,
    source_types_json,
    table_comment,
)
from pipelines.mirror_key import KEY_PROPERTY, key_property
from pipelines.sql import EMPTY_MAP, FULL_IMAGE_SQL, export_expr, lit, q
from pipelines.values import spark_type

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


log = logging.getLogger(__name__)

SINCE_PROPERTY = "lakecdc.column_since"  # column → lowest sequence of an incremental change carrying it
CLUSTER_PROPERTY = "lakecdc.cluster_by"  # the clustering columns configured when gold last set them (JSON)
DROPPED_PROPERTY = "lakecdc.dropped_columns"  # column → sequence of the first image without it
RENAMED_PROPERTY = "lakecdc.renamed_columns"  # old name → new name


class SchemaChangeError(RuntimeError):
    """A schema change the table's policy says to stop on."""


# ---------------------------------------------------------------- what a batch says


@dataclass
class ColumnSighting:
    """One column as a batch's images carry it."""

    types: set[str] = field(default_factory=set)  # source types the messages state
    first_seq: str | None = None  # lowest non-empty sequence of a change carrying it
    last_seq: str | None = None  # highest one
    #: the type the newest change stating one gives (by ``ord``): the type a new column is created with
    newest: str | None = None


@dataclass(frozen=True)
class ImageShape:
    """The column set of a batch's full after-images with a sequence, and the range of those sequences."""

    columns: frozenset[str]
    first_seq: str
    last_seq: str


@dataclass
class MirrorShape:
    """What gold needs to know about the mirror for one batch."""

    columns: dict[str, str | None]  # column → source type (key and data columns, mirror order)
    keyless: bool = False
    unwritten: set[str] = field(default_factory=set)  # dropped columns the ignore policy keeps
    renames: dict[str, str] = field(default_factory=dict)  # old name → new name, for older images
    rejects: list[tuple[str, str]] = field(default_factory=list)  # (SQL predicate on a change, reason)
    altered: bool = False  # gold created the mirror or changed its metadata for this batch


# ---------------------------------------------------------------- type relations

_INT_DIGITS = {"int": 10, "bigint": 20}
_DECIMAL_RE = re.compile(r"decimal\((\d+),(\d+)\)")


def _decimal_args(t: str) -> tuple[int, int] | None:
    m = _DECIMAL_RE.fullmatch(t)
    return (int(m.group(1)), int(m.group(2))) if m else None


def _normal(spark_type_name: str) -> str:
    """One spelling per Spark type name (``DECIMAL(10, 2)`` = ``decimal(10,2)``)."""
    return spark_type_name.lower().replace(" ", "")


def same_type(a: str, b: str) -> bool:
    return _normal(a) == _normal(b)


def widens(old: str, new: str) -> bool:
    """Delta type widening can change a column from ``old`` to ``new`` (Spark type names)."""
    old, new = _normal(old), _normal(new)
    if old == new:
        return False
    if old == "int" and new in ("bigint", "double"):
        return True
    if old == "date" and new == "timestamp_ntz":
        return True
    dn = _decimal_args(new)
    if dn is None:
        return False
    if old in _INT_DIGITS:
        return dn[0] - dn[1] >= _INT_DIGITS[old]
    do = _decimal_args(old)
    return do is not None and dn[1] >= do[1] and dn[0] - dn[1] >= do[0] - do[1]


def fits(new: str, old: str) -> bool:
    """Every value of Spark type ``new`` is exactly representable in a column of type ``old``."""
    return _normal(old) == "string" or same_type(new, old) or widens(new, old)


# ---------------------------------------------------------------- shaping the mirror


def shape_mirror(
    spark: SparkSession,
    ident: MirrorIdentity,
    props: dict[str, str] | None,
    key: tuple[str, ...],
    configured: dict[str, str],
    sightings: dict[str, ColumnSighting],
    shapes: list[ImageShape],
    schemaless: bool,
    keyless: bool,
    sources: Sequence[str] = (),
    formats: Sequence[str] = (),
    existing: dict[str, tuple[str, str | None]] | None = None,
    new_props: dict[str, str] | None = None,
    cluster_by: Sequence[str] = (),
    sharded: bool = False,
) -> MirrorShape:
    """Create the mirror (``props`` None: it does not exist yet) or follow the source's schema
    changes (see the module table); ``props`` are its table properties as the batch began, ``existing``
    its columns (:func:`~pipelines.mirror_columns.mirror_schema`; read when not given).
    ``sources`` and ``formats`` (those of the batch's changes) go into a new mirror's table comment, and
    ``new_props`` into its properties; ``cluster_by`` columns (Delta liquid clustering) into a new mirror,
    and into an existing one whose clustering the configuration changed; ``sharded``: a ``from`` mirror."""
    comment = mirror_comment(ident.source_table, sources, formats, key)
    if props is not None and existing is None:
        existing = mirror_schema(spark, ident.ref, props)
    held = [c for c in (existing or {}) if c not in SYSTEM_COLUMNS]
    renamed = set(json.loads((props or {}).get(RENAMED_PROPERTY) or "{}"))  # old names older images still carry
    sightings, shapes, clashes = refuse_name_clashes(held, [*key, *configured], sightings, shapes, renamed)
    if props is None:
        shape = _create(spark, ident, key, configured, sightings, keyless, comment, new_props or {}, cluster_by)
    else:
        evolution = SchemaEvolution(
            spark, ident, props, existing or {}, key, configured, sightings, schemaless, comment, sharded
        )
        evolution.run(shapes)
        if json.loads(props.get(CLUSTER_PROPERTY) or "[]") != list(cluster_by):
            evolution.cluster(cluster_by)
        shape = evolution.shape
    shape.rejects[:0] = clashes
    return shape


def _folded(name: str) -> str:
    """A column name as Delta compares it: without case."""
    return name.upper().lower()


def refuse_name_clashes(
    held: Sequence[str],
    preferred: Sequence[str],
    sightings: dict[str, ColumnSighting],
    shapes: list[ImageShape],
    renamed: set[str] = frozenset(),
) -> tuple[dict[str, ColumnSighting], list[ImageShape], list[tuple[str, str]]]:
    """Columns Delta cannot hold apart (it compares names without case), found before any DDL: a name
    carried in one spelling while the mirror holds (``held``), the key or the configuration names
    (``preferred``), or an earlier change carries, another; and a name of a lineage column gold adds
    (``_seq``, ``_op`` ...). The first spelling keeps the column (the mirror's, else the key's or the
    configuration's, else the one of the lowest sequence, then name order); a change that carries another
    is quarantined with a reason naming both spellings. A name the mirror renamed (``renamed``) is read as
    its new name, as before. Returns the sightings and image shapes without the
    refused names, and the rejects (SQL predicate, reason). Within one message, silver already refused it
    (:func:`pipelines.formats.base.check_changes`)."""
    owner: dict[str, str] = {_folded(c): c for c in SYSTEM_COLUMNS}
    for name in [*held, *preferred]:
        owner.setdefault(_folded(name), name)
    for name in sorted(sightings, key=lambda c: (sightings[c].first_seq or "", c)):
        owner.setdefault(_folded(name), name)
    refused = {
        c: owner[_folded(c)] for c in sightings if c not in renamed and (owner[_folded(c)] != c or c in SYSTEM_COLUMNS)
    }
    rejects = []
    for name, other in sorted(refused.items()):
        what = "a lineage column gold adds to every mirror" if other in SYSTEM_COLUMNS else "the column"
        carried = " OR ".join(f"map_contains_key(coalesce({i}, {EMPTY_MAP}), {lit(name)})" for i in ("after", "before"))
        reason = (
            f"column name {name!r} clashes with {what} {other!r} (Delta compares column names without case); "
            "rename one of them at the source, or map the table to another target"
        )
        rejects.append((carried, reason))
        log.warning("gold: column %r clashes with %r; changes carrying it are quarantined", name, other)
    kept = {c: s for c, s in sightings.items() if c not in refused}
    kept_shapes = [s for s in shapes if not refused.keys() & s.columns]
    return kept, kept_shapes, rejects


def _clustering(columns: Sequence[str]) -> str:
    """``CLUSTER BY (...)`` for a new table (``PARTITIONED BY`` for :class:`PartitionBy`; nothing without columns)."""
    word = "PARTITIONED BY" if type(columns).__name__ == "PartitionBy" else "CLUSTER BY"
    return f"{word} ({', '.join(q(c) for c in columns)}) " if columns else ""


def _wanted_type(column: str, configured: dict[str, str], sightings: dict[str, ColumnSighting]) -> str | None:
    """The type a column is created with: the configured one, else the newest change's (the source's schema
    as it is now; changes of other types convert to it or are quarantined as misfits, value by value)."""
    if configured.get(column):
        return configured[column]
    sighting = sightings.get(column)
    if sighting is None or not sighting.types:
        return None
    return sighting.newest if sighting.newest in sighting.types else min(sighting.types)


def _create(
    spark: SparkSession,
    ident: MirrorIdentity,
    key: tuple[str, ...],
    configured: dict[str, str],
    sightings: dict[str, ColumnSighting],
    keyless: bool,
    comment: str,
    new_props: dict[str, str],
    cluster_by: Sequence[str] = (),
) -> MirrorShape:
    """A new mirror: its columns' Delta types, their source types (:data:`SOURCE_TYPES_PROPERTY`), its
    comment, and in a catalog its key columns NOT NULL and declared the primary key."""
    columns: dict[str, str | None] = {}
    for c in [*configured, *sorted(set(sightings) - set(configured))]:
        columns[c] = _wanted_type(c, configured, sightings)
    for k in key:
        columns.setdefault(k, _wanted_type(k, configured, sightings))
    columns = {c: readable_type(t, ident.table_features) for c, t in columns.items()}
    since = {c: s.first_seq for c, s in sightings.items() if s.first_seq}
    props = {
        "lakecdc.source_table": ident.source_table,
        "lakecdc.mirror_name": ident.mirror_name,
        SOURCE_IDENTITY_PROPERTY: ident.source_key,
        KEY_PROPERTY: key_property(key),
        "delta.enableChangeDataFeed": "true",
        SINCE_PROPERTY: json.dumps(since, sort_keys=True),
        SOURCE_TYPES_PROPERTY: source_types_json(columns),
        **feature_properties(ident.table_features, columns),
        **new_props,
        CLUSTER_PROPERTY: json.dumps(list(cluster_by)),
    }
    declared = declares_key(ident.ref, key)
    cols = [column_ddl(c, t, not_null=declared and c in key) for c, t in columns.items()]
    cols += [f"{n} {t}" for n, t in LINEAGE_DDL]
    if keyless:
        cols.append(f"{ROW_ID_COLUMN} STRING")
    spark.sql(
        f"CREATE TABLE IF NOT EXISTS {ident.ref.sql} ({', '.join(cols)}) USING DELTA {_clustering(cluster_by)}"
        f"COMMENT {lit(comment)} TBLPROPERTIES ({properties_sql(props)})"
    )
    if declared:
        declare_key(spark, ident.ref, key)
    return MirrorShape(columns=columns, keyless=keyless, altered=True)


class SchemaEvolution:
    """One batch's comparison of an existing mirror with what the messages carry."""

    def __init__(
        self,
        spark: SparkSession,
        ident: MirrorIdentity,
        props: dict[str, str],
        existing: dict[str, tuple[str, str | None]],
        key: tuple[str, ...],
        configured: dict[str, str],
        sightings: dict[str, ColumnSighting],
        schemaless: bool,
        comment: str = "",
        sharded: bool = False,  # a ``from`` mirror: no DROP, no narrowing, a retype quarantined under fail
    ) -> None:
        self.spark, self.ident, self.key = spark, ident, tuple(key)
        self.configured, self.sightings, self.schemaless, self.sharded = configured, sightings, schemaless, sharded
        self.spark_types = {c: t for c, (t, _src) in existing.items() if c not in SYSTEM_COLUMNS}
        self.shape = MirrorShape(
            columns={c: src for c, (_t, src) in existing.items() if c not in SYSTEM_COLUMNS},
            keyless=ROW_ID_COLUMN in existing,
        )
        self.since: dict[str, str] = json.loads(props.get(SINCE_PROPERTY) or "{}")
        self.dropped: dict[str, str] = json.loads(props.get(DROPPED_PROPERTY) or "{}")
        self.shape.renames = json.loads(props.get(RENAMED_PROPERTY) or "{}")
        self.props_before = (dict(self.since), dict(self.dropped), dict(self.shape.renames))
        # the source types as the property records them (None: a mirror an earlier version wrote, which
        # kept them in column comments, gets the property, and a table comment, on its first write)
        recorded = props.get(SOURCE_TYPES_PROPERTY)
        self.recorded: dict[str, str | None] | None = json.loads(recorded) if recorded is not None else None
        self.comment = comment
        self.features = props.get(TABLE_FEATURES_PROPERTY) or "full"  # as created: docs/readers.md

    @property
    def where(self) -> str:
        return self.ident.source_table

    def run(self, shapes: list[ImageShape]) -> None:
        shapes = self._forget_renamed_names(shapes)
        new = [c for c in self._carried() if c not in self.shape.columns]
        gone = {} if self.schemaless or self.sharded else self._gone(shapes)
        renamed = self._rename_pair(gone, new, shapes)
        if renamed:
            old, new_name = renamed
            new.remove(new_name)
            del gone[old]
            self._decide(
                f"column {old!r} renamed to {new_name!r}",
                predicate=self._lacking_sql(old),
                evolve=lambda: self._rename(old, new_name),
                ignore=lambda: self._ignore_rename(old, new_name),
            )
        for column, seq in sorted(gone.items()):
            self._decide(
                f"column {column!r} dropped (an image of sequence {seq} no longer carries it)",
                predicate=self._lacking_sql(column),
                evolve=lambda c=column, s=seq: self._drop(c, s),
                ignore=lambda c=column: self.shape.unwritten.add(c),
            )
        if new:
            self._add(new)
        for column in sorted(set(self.shape.columns) & set(self.sightings)):
            if column not in self.configured:
                self._retype(column)
        self._remember()

    # -- what the batch carries
    def _carried(self) -> list[str]:
        """Columns the batch's images carry, minus names the mirror has dropped for older images."""
        out = []
        for c in sorted(self.sightings):
            if c in self.dropped:
                last = self.sightings[c].last_seq
                if not (last and last > self.dropped[c]):
                    continue  # only older images still carry it
                log.info("gold: %s: column %r is back (carried at sequence %s)", self.where, c, last)
                del self.dropped[c]
            out.append(c)
        return out

    def _forget_renamed_names(self, shapes: list[ImageShape]) -> list[ImageShape]:
        """Older images may still carry a renamed column's old name: read it as the new one."""
        renames = self.shape.renames
        for old, new in renames.items():
            if old in self.sightings:
                moved = self.sightings.pop(old)
                self.sightings.setdefault(new, ColumnSighting()).types |= moved.types
        return [ImageShape(frozenset(renames.get(c, c) for c in s.columns), s.first_seq, s.last_seq) for s in shapes]

    def _gone(self, shapes: list[ImageShape]) -> dict[str, str]:
        """Mirror columns that full images newer than the column's first sighting no longer carry."""
        gone: dict[str, str] = {}
        for shape in shapes:
            for c in self.shape.columns:
                since = self.since.get(c)
                if c in self.key or c in self.shape.unwritten or not since or c in shape.columns:
                    continue
                if shape.last_seq > since:
                    gone[c] = max(gone.get(c, ""), shape.last_seq)
        return gone

    def _rename_pair(self, gone: dict[str, str], new: list[str], shapes: list[ImageShape]) -> tuple[str, str] | None:
        if len(gone) != 1 or len(new) != 1:
            return None
        old, candidate = next(iter(gone)), new[0]
        new_type = spark_type(_wanted_type(candidate, self.configured, self.sightings))
        if not same_type(new_type, self.spark_types.get(old, "")):
            return None
        lacking = [s for s in shapes if old not in s.columns and s.last_seq > self.since.get(old, "")]
        return (old, candidate) if lacking and all(candidate in s.columns for s in lacking) else None

    def _lacking_sql(self, column: str) -> str:
        return (
            f"{FULL_IMAGE_SQL} AND NOT map_contains_key(after, {lit(column)}) "
            f"AND seq > {lit(self.since.get(column, ''))}"
        )

    # -- the policy
    def _decide(self, what: str, predicate: str, evolve: Callable[[], None], ignore: Callable[[], None]) -> None:
        policy = self.ident.policy
        if policy == "fail" and self.sharded:  # shards differ: that shard's changes wait, never the stream
            policy, what = "quarantine", f"{what}; under fail a sharded mirror quarantines instead of stopping"
        if policy == "fail":
            raise SchemaChangeError(
                f"gold: {self.where}: {what}. The table's schema_changes policy is fail: set "
                f"tables.{self.where}.schema_changes (or the top-level schema_changes) to evolve, ignore or "
                f"quarantine and run again; this micro-batch was not applied"
            )
        if policy == "quarantine":
            self.shape.rejects.append((predicate, f"schema change: {what} (schema_changes: quarantine)"))
        elif policy == "evolve":
            evolve()
        else:
            ignore()
        log.warning("gold: %s: %s; policy %s", self.where, what, policy)

    # -- the changes to the mirror
    def _alter(self, sql: str) -> None:
        self.spark.sql(f"ALTER TABLE {self.ident.ref.sql} {sql}")
        self.shape.altered = True

    def _column_mapping(self) -> None:
        self._alter(
            "SET TBLPROPERTIES ('delta.columnMapping.mode' = 'name', 'delta.minReaderVersion' = '2', "
            "'delta.minWriterVersion' = '5')"
        )

    def _add(self, new: list[str]) -> None:
        types = {c: readable_type(_wanted_type(c, self.configured, self.sightings), self.features) for c in new}
        log.info("gold: %s gains columns %s", self.where, ", ".join(new))
        self._record({**self.shape.columns, **types})
        self._alter(f"ADD COLUMNS ({', '.join(column_ddl(c, t) for c, t in types.items())})")
        self.shape.columns.update(types)
        self.spark_types.update({c: spark_type(t).lower() for c, t in types.items()})

    def cluster(self, columns: Sequence[str]) -> None:
        """Cluster the mirror by ``columns`` (Delta liquid clustering; none: stop clustering), as configured.
        Files written before keep their layout until ``OPTIMIZE`` clusters them."""
        self._alter(f"CLUSTER BY ({', '.join(q(c) for c in columns)})" if columns else "CLUSTER BY NONE")
        self._set_properties({CLUSTER_PROPERTY: json.dumps(list(columns))})
        log.info("gold: %s clustered by %s", self.where, ", ".join(columns) or "nothing")

    def _drop(self, column: str, seq: str) -> None:
        if self.features == "compatible":  # no column mapping: the column stays, as under `ignore`
            log.warning("gold: %s: column %r kept (table_features compatible: no DROP in place)", self.where, column)
            self.shape.unwritten.add(column)
            return
        self._column_mapping()
        self._alter(f"DROP COLUMN {q(column)}")
        del self.shape.columns[column]
        self.since.pop(column, None)
        self.dropped[column] = seq

    def _rename(self, old: str, new: str) -> None:
        if self.features == "compatible":  # no column mapping: a new column, as under `ignore`
            log.warning("gold: %s: %r kept, %r added (table_features compatible: no RENAME)", self.where, old, new)
            self._ignore_rename(old, new)
            return
        self._column_mapping()
        self._record({**self.shape.columns, new: self.shape.columns[old]})
        self._alter(f"RENAME COLUMN {q(old)} TO {q(new)}")
        self.shape.columns = {(new if c == old else c): t for c, t in self.shape.columns.items()}
        self.spark_types[new] = self.spark_types.pop(old)
        self.since[new] = self.since.pop(old, "") or (self.sightings[new].first_seq or "")
        self.shape.renames = {o: (new if n == old else n) for o, n in self.shape.renames.items()}
        self.shape.renames[old] = new
        self.sightings.pop(old, None)

    def _ignore_rename(self, old: str, new: str) -> None:
        self.shape.unwritten.add(old)
        self._add([new])

    def _retype(self, column: str) -> None:
        """Follow the types the messages state for a column the configuration does not type."""
        for source_type in sorted(self.sightings[column].types):
            old, new = self.spark_types[column], spark_type(source_type).lower()
            if same_type(new, old) or (old == "string" and new == "variant"):  # older mirrors keep documents as text
                continue
            if widens(old, new):
                log.info("gold: %s: column %r widens %s → %s", self.where, column, old, new)
                if self.features == "compatible":  # no type widening: the column rewritten, each value cast exactly
                    self._rewrite(column, source_type, f"CAST({q(column)} AS {new})")
                else:
                    self._record({**self.shape.columns, column: source_type})
                    self._alter("SET TBLPROPERTIES ('delta.enableTypeWidening' = 'true')")
                    self._alter(f"ALTER COLUMN {q(column)} TYPE {new.upper()}")
                self.shape.columns[column], self.spark_types[column] = source_type, new
                continue
            kind = "narrowed" if fits(new, old) else "retyped"
            if kind == "narrowed" and self.sharded:  # another shard's narrower type: its values fit the column
                continue
            if kind == "retyped" and column in self.key and self.ident.policy == "evolve":
                raise SchemaChangeError(
                    f"gold: {self.where}: key column {column!r} changed type from {old} to "
                    f"{new}; a key cannot become text in place: rebuild the mirror from bronze"
                )
            predicate = f"{lit(source_type)} <=> col_types[{lit(column)}]"
            self._decide(
                f"column {column!r} {kind} from {old} to {new} (source type {source_type})",
                predicate,
                evolve=(lambda: None) if kind == "narrowed" else (lambda c=column: self._as_text(c)),
                ignore=lambda: None,
            )

    def _as_text(self, column: str) -> None:
        """Rewrite one column as canonical text (``evolve`` of an unrelated type change)."""
        self._rewrite(column, TEXT_SOURCE_TYPE, export_expr(column, self.spark_types[column]))

    def _rewrite(self, column: str, source_type: str, value_sql: str) -> None:
        """Rewrite the mirror with one column's values as ``value_sql`` gives them, of ``source_type``."""
        from pyspark.sql import functions as F

        value = F.expr(value_sql)
        df = self.ident.ref.read(self.spark)
        comment = (df.schema[column].metadata or {}).get("comment")  # an analyst's comment stays
        rewritten = df.withColumn(column, value.alias(column, metadata={"comment": comment} if comment else {}))
        self._record({**self.shape.columns, column: source_type})
        # Under column mapping Delta refuses a schema-changing overwrite while the change data feed is on
        # (DELTA_BLOCK_COLUMN_MAPPING_AND_CDC_OPERATION). The rewrite is a schema change, which stops a
        # feed reader anyway, so the feed is paused around this one commit (a crash in between leaves it
        # paused, and the rerun of the batch, finding the column still typed, does the same again).
        self._alter("SET TBLPROPERTIES ('delta.enableChangeDataFeed' = 'false')")
        self.ident.ref.save(rewritten.write.format("delta").mode("overwrite").option("overwriteSchema", "true"))
        restore_not_null(self.spark, self.ident.ref, [f.name for f in df.schema.fields if not f.nullable])
        self._alter("SET TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true')")
        self.shape.columns[column], self.spark_types[column] = source_type, spark_type(source_type).lower()

    def _record(self, types: dict[str, str | None]) -> None:
        """Write the source types property, before the schema change it describes: should the change
        not commit, the property names a column the mirror lacks or a type it does not have, and
        readers go by the mirror's Delta types (:func:`~pipelines.mirror_columns.source_types`)
        until the batch, run again, makes the change."""
        self._set_properties({SOURCE_TYPES_PROPERTY: source_types_json(types)})
        self.recorded = dict(types)

    def _set_properties(self, values: dict[str, str]) -> None:
        """One ``SET TBLPROPERTIES``; a mirror written by an earlier version gets its table comment with
        its first source types property, unless someone gave it one."""
        if self.recorded is None and self.comment and not table_comment(self.spark, self.ident.ref):
            values = {**values, "comment": self.comment}  # Delta keeps it as the table comment
        self._alter(f"SET TBLPROPERTIES ({properties_sql(values)})")

    def _remember(self) -> None:
        """Record first sightings, drops, renames and source types as table properties (they outlive the
        batch). A mirror whose property records other types than it has (a column dropped, a schema
        change committed without its property, an earlier version's mirror) gets it rewritten."""
        for c, s in self.sightings.items():
            if c in self.shape.columns and s.first_seq and (c not in self.since or s.first_seq < self.since[c]):
                self.since[c] = s.first_seq
        values = {}
        if (self.since, self.dropped, self.shape.renames) != self.props_before:
            values = {
                k: json.dumps(v, sort_keys=True)
                for k, v in {
                    SINCE_PROPERTY: self.since,
                    DROPPED_PROPERTY: self.dropped,
                    RENAMED_PROPERTY: self.shape.renames,
                }.items()
            }
        if self.shape.columns != self.recorded:
            values[SOURCE_TYPES_PROPERTY] = source_types_json(self.shape.columns)
        if values:
            self._set_properties(values)
            self.recorded = dict(self.shape.columns)
