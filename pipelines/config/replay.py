"""The source of a ``lakecdc replay``: the file's messages in a landing directory, read with the options of
the configured source they stand for (its ``type_mapping``, ``ignore_null_updates``, ``include`` /
``exclude``, ``freshness``), so a replay decodes and applies them as the running pipeline would.
"""

from __future__ import annotations

from dataclasses import replace

from pipelines.config.model import PipelineConfig, Source
from pipelines.errors import ConfigError


def replay_source(cfg: PipelineConfig, format_id: str, path: str, source: str | None = None) -> Source:
    """The one source a replay reads: ``path`` (a landing directory) in ``format_id``, named
    ``replay_<format>`` (its checkpoints never those of a running source), with the options of the file's
    source named ``source``, else of the file's only source of that format; the defaults where the file has
    none. Several sources of the format and no ``source``: a ConfigError asking for one."""
    if source is not None:
        named = [s for s in cfg.sources if s.name == source]
        if not named:
            known = ", ".join(s.name for s in cfg.sources) or "none"
            raise ConfigError(f"--source {source!r}: the configuration has no such source (its sources: {known})")
        if named[0].format not in (format_id, "auto"):
            raise ConfigError(
                f"--source {source!r} reads format {named[0].format}, not --format {format_id}: name a source "
                "of that format, or give its format"
            )
        base: Source | None = named[0]
    else:
        same = [s for s in cfg.sources if s.format == format_id]
        if len(same) > 1:
            raise ConfigError(
                f"the configuration has {len(same)} sources of format {format_id} "
                f"({', '.join(s.name for s in same)}): name the one the messages come from with --source"
            )
        base = same[0] if same else None
    name = f"replay_{format_id}"
    if base is None:
        return Source(name=name, format=format_id, path=path)
    return replace(base, name=name, format=format_id, path=path, kafka=None)
