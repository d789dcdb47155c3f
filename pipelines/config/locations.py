"""Where tables and checkpoints live: the checks that the catalog, schemas, table targets and
checkpoints of a configuration go together (at load, and again after ``--catalog``/``--schema``/
``--checkpoints`` replaced the file's).
"""

from __future__ import annotations

import re

from pipelines.config.model import PipelineConfig
from pipelines.errors import ConfigError
from pipelines.layout import LAYERS

#: With ``catalog:``, checkpoints have no default: ``<warehouse>/_checkpoints`` would be the driver's local
#: disk, lost with the cluster, so every run would read every source again from the start.
CHECKPOINTS_REQUIRED = (
    "required with catalog: give checkpoints a durable path such as a Unity Catalog volume "
    "(/Volumes/<catalog>/<schema>/<volume>/checkpoints); without it checkpoints land on the driver's "
    "local disk and every run reads everything again"
)

#: A catalog or schema name: one part (the warehouse joins them with dots and quotes each).
_CATALOG_NAME = re.compile(r"[^.`\s]+")


def location_errors(cfg: PipelineConfig) -> list[tuple[str, str]]:
    """(field, message) for each way the table and checkpoint locations do not go together."""
    errors = []
    if not cfg.catalog:
        if cfg.schema or cfg.schemas:
            errors.append(("schema", "schema and schemas name catalog tables: set catalog too (or --catalog)"))
        return errors
    named = [("catalog", cfg.catalog), ("schema", cfg.schema)] + [(f"schemas.{k}", n) for k, n in cfg.schemas.items()]
    errors += [(at, f"{name!r} is not one name") for at, name in named if name and not _CATALOG_NAME.fullmatch(name)]
    missing = [layer for layer in LAYERS if not (cfg.schemas.get(layer) or cfg.schema)]
    if missing:
        errors.append(("schema", f"with catalog, every layer needs a schema: set schema (or schemas.{missing[0]})"))
    if not cfg.checkpoints:
        errors.append(("checkpoints", f"{CHECKPOINTS_REQUIRED} (or pass --checkpoints)"))
    for name, table in cfg.tables.items():
        parts = table.target.split(".") if table.target else []
        if len(parts) > 2 or any(not p or p.startswith("_") or not _CATALOG_NAME.fullmatch(p) for p in parts):
            wrong = f"in a catalog, a target is <table> or <schema>.<table>, got {table.target!r}"
            errors.append((f"tables.{name}.target", wrong))
    return errors


def check_locations(cfg: PipelineConfig) -> PipelineConfig:
    """``cfg`` if its table and checkpoint locations go together (also after ``--catalog``/``--schema``/
    ``--checkpoints`` replaced the file's), else ConfigError."""
    errors = location_errors(cfg)
    if errors:
        raise ConfigError("; ".join(f"{cfg.origin}: {where}: {message}" for where, message in errors))
    return cfg
