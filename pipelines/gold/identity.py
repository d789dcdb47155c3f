"""Which mirror a source table writes, and the guard that keeps two source tables out of one mirror.

A source table is its exact identity (:class:`~pipelines.warehouse.SourceTable`); its mirror's file
and catalog name is :func:`~pipelines.warehouse.safe_name`, injective over names. A mirror records
the identity it holds (``lakecdc.source_identity``), and :func:`identity_conflict` refuses any other
source table, such as two configured ``target`` names alike.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pipelines.config import DEFAULT_SCHEMA_POLICY, DEFAULT_TABLE_FEATURES
from pipelines.mirror_columns import TEXT_SOURCE_TYPE
from pipelines.values import spark_type
from pipelines.warehouse import HASH_MARK, SOURCE_IDENTITY_PROPERTY, safe_name, state_key

if TYPE_CHECKING:
    from pipelines.warehouse import TableRef


@dataclass
class MirrorIdentity:
    """Which mirror a source table goes to: its tables, and the schema policy it follows.

    ``source_key`` is the source table's exact identity (JSON ``[db, schema, table]`` as silver's
    rows give it); the mirror records it as ``lakecdc.source_identity`` and gold refuses to write a
    mirror that records another (:func:`identity_conflict`). ``name_parts`` is the mirror's name
    as parts; its file and catalog name is :func:`~pipelines.warehouse.safe_name` of them.
    """

    source_table: str  # the source table for people: db.schema.table
    mirror_name: str  # the mirror for people: the configured target, else the source table's name
    ref: TableRef
    tombstones: TableRef
    policy: str = DEFAULT_SCHEMA_POLICY
    source_key: str = ""
    name_parts: tuple[str, ...] = ()
    target: bool = False  # the name is a configured target (in a catalog, ``schema.table`` picks the schema)
    table_features: str = DEFAULT_TABLE_FEATURES  # gold.table_features when gold creates the mirror

    @property
    def slug(self) -> str:
        """The mirror's name in paths and catalog names: one per mirror."""
        return safe_name(self.name_parts or self.mirror_name)

    @property
    def state_key(self) -> str:
        """The mirror's id in gold's shared state (:func:`~pipelines.warehouse.state_key`)."""
        return state_key(self.ref) if self.ref is not None else self.slug

    @property
    def stamp_name(self) -> str:
        """The mirror's name in write stamps: its dotted name where that is plain (the stamps written
        before identities, so a retried batch stays recognised), else its slug, so two source tables
        whose names read alike (``a.b`` + ``c``, ``a`` + ``b.c``) never share a stamp on the
        quarantine table. Plain dotted names hold no ``___``, hashed slugs always do."""
        return self.slug if HASH_MARK in self.slug else self.mirror_name


#: Every table gold creates keeps source column names as they are (spaces, dots, backticks, ``$% ^,& *(``).
COLUMN_MAPPING = {"delta.columnMapping.mode": "name"}
#: Mirrors and tombstones take MERGEs of a few rows into many files: with deletion vectors a MERGE marks
#: the rows it replaces or deletes instead of rewriting every file that holds one (Delta 3.1+; Databricks
#: and Delta 4 readers read them; OPTIMIZE/auto-compaction purges them). A table of a few small files is
#: rewritten instead, as is a MERGE that touches a large share of its rows
#: (:func:`pipelines.delta_writes.rewrites_files`).
DELETION_VECTORS = {"delta.enableDeletionVectors": "true"}
#: The mirror property recording ``gold.table_features`` as gold created the mirror: its later schema
#: changes keep to it, whatever the configuration says then.
TABLE_FEATURES_PROPERTY = "lakecdc.table_features"
#: What Delta refuses in a column name without column mapping (its ``checkFieldNames``).
_NEEDS_COLUMN_MAPPING = re.compile(r"[ ,;{}()\n\t=]")


def feature_properties(features: str, columns: Iterable[str]) -> dict[str, str]:
    """The table features a new mirror enables. ``full``: deletion vectors, column mapping (DROP and RENAME
    in place, any column name) and type widening. ``compatible``: none of them, for readers without them
    (docs/readers.md), except column mapping where a column's name needs it (a space, a comma, ...)."""
    if features != "compatible":
        return {
            "delta.enableTypeWidening": "true",
            **COLUMN_MAPPING,
            **DELETION_VECTORS,
            TABLE_FEATURES_PROPERTY: features,
        }
    odd = any(_NEEDS_COLUMN_MAPPING.search(c) for c in columns)
    return {**(COLUMN_MAPPING if odd else {}), TABLE_FEATURES_PROPERTY: features}


def readable_type(source_type: str | None, features: str) -> str | None:
    """A column's source type in a mirror of ``features``: a document (VARIANT under ``full``) is its exact
    JSON text under ``compatible``, which readers without VARIANT open."""
    if features == "compatible" and source_type and spark_type(source_type) == "VARIANT":
        return TEXT_SOURCE_TYPE
    return source_type


def identity_conflict(ident: MirrorIdentity, props: dict[str, str] | None) -> str | None:
    """Why this source table may not write the existing mirror (None: it may).

    A mirror written before identities were recorded is adopted when its recorded source name is
    this table's name."""
    if props is None:
        return None
    recorded = props.get(SOURCE_IDENTITY_PROPERTY)
    if recorded is not None:
        if json.loads(recorded) == json.loads(ident.source_key):
            return None
        holder = ".".join(p for p in json.loads(recorded) if p is not None)
    else:
        holder = props.get("lakecdc.source_table", "")
        if holder == ident.source_table:
            return None
    return (
        f"mirror {ident.mirror_name!r} ({ident.slug}) already holds source table {holder!r}; source table "
        f"{ident.source_table!r} may not write it (give one of them its own tables.<name>.target)"
    )
