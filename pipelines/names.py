"""Names: a source table as its messages name it, and the injective name of its mirror.

Source table names come from messages, so they are hostile until proven otherwise. A source table is
:class:`SourceTable` (db, schema, table) exactly as the source names it, case kept; :func:`mirror_parts`
gives its mirror's name parts under the configured naming (``gold.naming``), and :func:`safe_name` maps
those to ``[a-z0-9_]`` INJECTIVELY: two different source tables never share a mirror, and no name can
leave the warehouse (``..``, ``/``) or break SQL.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

#: A part that maps to itself: lowercase letters and digits, single ``_`` inside (never ``__``).
_PLAIN_PART = re.compile(r"[a-z0-9]+(?:_[a-z0-9]+)*")
_NOT_SLUG = re.compile(r"[^a-z0-9]+")
#: Only hashed names contain it: plain names join plain parts with ``__``, so never hold ``___``.
HASH_MARK = "___"


@dataclass(frozen=True)
class SourceTable:
    """A source table as its messages name it: database, schema (PostgreSQL, Oracle, GaussDB) and
    table, case kept. MySQL-family formats report the database again as the schema; a schema equal
    to the database is the same table as no schema (:meth:`of` folds it)."""

    db: str | None
    schema: str | None
    table: str

    @classmethod
    def of(cls, db: str | None, schema: str | None, table: str) -> SourceTable:
        db, schema = db or None, schema or None
        return cls(db, None if schema == db else schema, table)

    @property
    def parts(self) -> tuple[str, ...]:
        return tuple(p for p in (self.db, self.schema, self.table) if p is not None)

    @property
    def name(self) -> str:
        """``db.schema.table`` for people and configuration (ambiguous where a part holds a dot)."""
        return ".".join(self.parts)

    @property
    def key(self) -> str:
        """The exact identity as text (JSON): equal for the same table only."""
        return json.dumps([self.db, self.schema, self.table], ensure_ascii=False)

    @classmethod
    def from_key(cls, key: str) -> SourceTable:
        db, schema, table = json.loads(key)
        return cls(db, schema, table)


def safe_name(name: str | Sequence[str], max_len: int = 96) -> str:
    """A mirror's file and catalog name, injective over names.

    ``name`` is the parts of a name (``("shop", "orders")``), or a dotted string split at its dots.
    Parts that are plain (lowercase, digits, single ``_`` inside) join with ``__``: ``shop__orders``.
    Anything else (case, other characters, ``__`` inside, too long) becomes a slug plus ``___`` and
    a 64-bit hash of the exact parts: ``Shop.Orders`` → ``shop_orders___<hash>``. Plain names never
    contain ``___``, so the two kinds cannot meet, and a crafted plain name cannot equal a hashed one.
    """
    parts = tuple(name.split(".")) if isinstance(name, str) else tuple(name)
    plain = "__".join(parts)
    if parts and all(_PLAIN_PART.fullmatch(p) for p in parts) and len(plain) <= max_len:
        return plain
    exact = json.dumps(list(parts), ensure_ascii=False).encode("utf-8", "surrogatepass")
    digest = hashlib.sha256(exact).hexdigest()[:16]
    slug = _NOT_SLUG.sub("_", "_".join(parts).lower()).strip("_")[: max_len - len(HASH_MARK) - 16] or "t"
    return f"{slug}{HASH_MARK}{digest}"


#: The placeholders of a ``gold.naming`` template, and the template that gives every mirror the name it
#: had before templates (``safe_name`` of the source table's parts).
NAMING_FIELDS = ("db", "schema", "table")
DEFAULT_NAMING_TEMPLATE = "{db}__{schema}__{table}"
#: A prefix: a plain part, optionally ending in one ``_``; a suffix: the same, optionally starting with one.
_NAMING_PREFIX = re.compile(r"(?:[a-z0-9]+(?:_[a-z0-9]+)*_?)?")
_NAMING_SUFFIX = re.compile(r"(?:_?[a-z0-9]+(?:_[a-z0-9]+)*)?")


@dataclass(frozen=True)
class MirrorNaming:
    """How a mirror is named after its source table (``gold.naming``): a template of ``{db}``,
    ``{schema}`` and ``{table}`` joined by ``__``, plus a constant prefix and suffix.

    The default template names every mirror as it was named before templates existed."""

    template: str = DEFAULT_NAMING_TEMPLATE
    prefix: str = ""
    suffix: str = ""

    @property
    def fields(self) -> tuple[str, ...]:
        """The template's placeholders in order (``("db", "table")`` for ``{db}__{table}``)."""
        return tuple(piece[1:-1] for piece in self.template.split("__"))

    @property
    def is_default(self) -> bool:
        return (self.template, self.prefix, self.suffix) == (DEFAULT_NAMING_TEMPLATE, "", "")


def naming_errors(naming: MirrorNaming) -> list[tuple[str, str]]:
    """(field, message) for each thing wrong with a naming (``gold.naming.<field>``): the template is
    placeholders joined by ``__``, each at most once, ``{db}`` and ``{table}`` among them (a name
    without the database would give two databases' tables one mirror); prefix and suffix keep names
    plain (lowercase letters, digits, single ``_``) and never start a name with ``_`` (side tables do)."""
    errors = []
    pieces = naming.template.split("__")
    fields = naming.fields
    if any(not (p.startswith("{") and p.endswith("}")) or p[1:-1] not in NAMING_FIELDS for p in pieces):
        errors.append(
            (
                "template",
                "must be placeholders {db}, {schema} and {table} joined by __ (such as {db}__{table}), "
                f"got {naming.template!r:.80}; put fixed text in prefix or suffix",
            )
        )
    elif len(set(fields)) != len(fields):
        errors.append(("template", f"names a placeholder twice: {naming.template!r:.80}"))
    elif not {"db", "table"} <= set(fields):
        errors.append(
            (
                "template",
                f"must contain {{db}} and {{table}}, got {naming.template!r:.80}: without one of them two source "
                "tables could get one mirror (a hand-picked name is tables.<name>.target)",
            )
        )
    if not _NAMING_PREFIX.fullmatch(naming.prefix):
        errors.append(("prefix", f"lowercase letters, digits and single _ (may end with _), got {naming.prefix!r:.80}"))
    if not _NAMING_SUFFIX.fullmatch(naming.suffix):
        errors.append(
            ("suffix", f"lowercase letters, digits and single _ (may start with _), got {naming.suffix!r:.80}")
        )
    return errors


def mirror_parts(source: SourceTable, naming: MirrorNaming | None = None) -> tuple[str, ...]:
    """The name parts of a source table's mirror under ``naming``; :func:`safe_name` of them is the
    mirror's file and catalog name (as of any parts). The default naming gives ``source.parts``: every
    mirror keeps the name it had before namings existed.

    ``{db}`` stands for the database; in a template without ``{schema}`` a database written with dots
    (OceanBase's ``tenant.database`` in OMS messages) is one part per piece, so ``demo_tenant.shop`` +
    ``customers`` under ``{db}__{table}`` is ``demo_tenant__shop__customers``. Injective for every
    configured naming, with the guarantees of :func:`safe_name`: the template fixes where each part of
    a plain name comes from, so a plain name names one source table. Where a name would be ambiguous
    it is hashed, as any name :func:`safe_name` cannot keep: a database with dots under a template with
    ``{schema}`` (is ``a__b__c`` the database ``a.b`` or the schema ``b`` of ``a``?), a source table
    with a schema under a template without ``{schema}``, and one with a schema but no database (the
    default naming keeps its old name, which a table of that name as database can share: the mirror's
    identity guard refuses the second)."""
    naming = naming or MirrorNaming()
    if naming.is_default:
        return source.parts
    fields = naming.fields
    if source.schema is not None and ("schema" not in fields or source.db is None):
        return _unmappable(source, naming)
    if source.db is None:
        db: tuple[str, ...] = ()
    else:
        db = (source.db,) if "schema" in fields else tuple(source.db.split("."))
    values = {"db": db, "schema": () if source.schema is None else (source.schema,), "table": (source.table,)}
    parts = [part for f in fields for part in values[f]]
    parts[0] = naming.prefix + parts[0]
    parts[-1] = parts[-1] + naming.suffix
    return tuple(parts)


def _unmappable(source: SourceTable, naming: MirrorNaming) -> tuple[str, ...]:
    """Parts no source table gets from :func:`mirror_parts` otherwise, which :func:`safe_name` hashes:
    four parts, each with a dot. Under a template with ``{schema}`` other parts are at most three; under
    one without, at most one of them holds a dot (the table; database pieces are split at dots)."""
    return (f"{naming.prefix}.", ".", ".", f".{source.key}{naming.suffix}")
