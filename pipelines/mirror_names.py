"""Where each source table's mirror is, and the guard that a change of ``gold.naming`` (or of a
``target``) never moves a live mirror silently.

A mirror records the source table it holds (``lakecdc.source_identity``), so the mirrors that exist
can be matched with the names the configuration gives their source tables now
(:func:`mirror_renames`). A mirror whose name would change is not followed by gold: gold would start
a second mirror under the new name, holding only the changes from then on, beside the old one. So a
run refuses to start while any would (:func:`check_mirror_names`); ``docs/analysts-options.md`` tells
how to move them (``lakecdc rebuild``, or renaming each mirror with its side tables).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pipelines.errors import ConfigError
from pipelines.mirror_columns import table_properties
from pipelines.warehouse import SOURCE_IDENTITY_PROPERTY, SourceTable, TableRef, Warehouse, mirror_parts

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from pipelines.config import PipelineConfig


@dataclass(frozen=True)
class RecordedMirror:
    """A mirror of the warehouse, its properties, and the source table it records (None: a mirror
    written before identities were recorded)."""

    ref: TableRef
    props: dict[str, str]
    source: SourceTable | None


@dataclass(frozen=True)
class MirrorRename:
    """A live mirror the configuration would now name differently."""

    source: SourceTable
    current: TableRef
    wanted: TableRef

    def describe(self) -> str:
        return f"{self.source.name}: {where(self.current)} → {where(self.wanted)}"


def where(ref: TableRef) -> str:
    return ref.path or ref.name or "?"


def existing_mirrors(spark: SparkSession, wh: Warehouse) -> list[RecordedMirror]:
    """Every mirror of the warehouse with its properties and recorded source table."""
    refs = wh.catalog_gold_tables(spark)[0] if wh.catalog else [TableRef(path=p) for p in wh.mirror_paths()]
    out = []
    for ref in refs:
        props = table_properties(spark, ref)
        recorded = props.get(SOURCE_IDENTITY_PROPERTY)
        out.append(RecordedMirror(ref, props, SourceTable.from_key(recorded) if recorded else None))
    return out


def mirror_of(cfg: PipelineConfig, wh: Warehouse, source: SourceTable) -> TableRef:
    """The mirror the configuration gives a source table: its ``target``, else the name
    ``gold.naming`` gives it (:func:`~pipelines.warehouse.mirror_parts`), as gold places mirrors."""
    tc = cfg.table_for(source.name)
    if tc is not None and tc.target:
        return wh.mirror(tuple(tc.target.split(".")), target=True)
    return wh.mirror(mirror_parts(source, cfg.gold_naming))


def _same(a: TableRef, b: TableRef) -> bool:
    if a.path is not None and b.path is not None:
        return a.path.rstrip("/") == b.path.rstrip("/")
    return (a.name or "").lower() == (b.name or "").lower()


def mirror_renames(
    spark: SparkSession, cfg: PipelineConfig, wh: Warehouse, mirrors: list[RecordedMirror] | None = None
) -> list[MirrorRename]:
    """The live mirrors whose source table the configuration now names differently (``gold.naming``
    or a ``target`` changed), in name order. Mirrors that record no source table are left alone."""
    found = []
    for m in existing_mirrors(spark, wh) if mirrors is None else mirrors:
        if m.source is None:
            continue
        wanted = mirror_of(cfg, wh, m.source)
        if not _same(wanted, m.ref):
            found.append(MirrorRename(m.source, m.ref, wanted))
    return sorted(found, key=lambda r: where(r.current))


def check_mirror_names(
    spark: SparkSession, cfg: PipelineConfig, wh: Warehouse, mirrors: list[RecordedMirror] | None = None
) -> None:
    """Raise ConfigError naming the file, ``gold.naming`` and each live mirror the configuration would
    rename: gold would fork it (see the module's text). Nothing to do when no mirror moves."""
    renames = mirror_renames(spark, cfg, wh, mirrors)
    if not renames:
        return
    shown = "\n".join(f"  - {r.describe()}" for r in renames[:20])
    more = f"\n  ... and {len(renames) - 20} more" if len(renames) > 20 else ""
    raise ConfigError(
        f"{cfg.origin}: gold.naming: {len(renames)} live mirror(s) would get a new name (a changed gold.naming "
        f"or tables.<name>.target); gold does not move a mirror, it would start a second one:\n{shown}{more}\n"
        "Move them first: `lakecdc rebuild --conf <file> --yes` replays bronze into mirrors under the new names, "
        "or rename each mirror and its side tables (docs/analysts-options.md); or keep the old gold.naming."
    )
