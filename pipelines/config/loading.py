"""Loading: :func:`load_config` reads a YAML file with a loader that refuses an alias bomb before
anything is built, then validates it (:func:`~pipelines.config.validation.parse_config`).
"""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from pipelines.config.model import PipelineConfig
from pipelines.config.validation import parse_config
from pipelines.errors import ConfigError

#: Extra YAML nodes that aliases may add (``<<: *defaults`` for every table stays far below it; a
#: billion-laughs anchor, hundreds of millions of nodes, is refused before anything is built).
YAML_ALIAS_BUDGET = 100_000


def load_config(path: str | os.PathLike) -> PipelineConfig:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read configuration {p}: {getattr(exc, 'strerror', None) or exc}") from None
    loader = _BoundedLoader(text)
    loader.name = str(p)  # errors name the file
    try:
        data = loader.get_single_data()
    except yaml.YAMLError as exc:
        raise ConfigError(f"{p}: not valid YAML: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{p}: YAML nested too deeply") from None
    finally:
        loader.dispose()
    return parse_config(data, origin=str(p))


class _BoundedLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a document whose aliases expand beyond :data:`YAML_ALIAS_BUDGET`
    extra nodes (a billion-laughs anchor: seconds of work and a MemoryError later), or refer to
    themselves; checked on the composed node graph, before any object is built."""

    def compose_document(self):  # noqa: ANN201 - PyYAML's own hook
        node = super().compose_document()
        _check_alias_expansion(node, self.name)
        return node


def _check_alias_expansion(root: yaml.Node, name: str) -> None:
    """Count the nodes of ``root`` with every alias expanded (memoised per node: linear in the graph)."""
    sizes: dict[int, int] = {}
    entered: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, leaving = stack.pop()
        children = (
            [n for pair in node.value for n in pair]
            if isinstance(node, yaml.MappingNode)
            else list(node.value)
            if isinstance(node, yaml.SequenceNode)
            else []
        )
        if leaving:
            sizes[id(node)] = 1 + sum(sizes[id(c)] for c in children)
            entered.discard(id(node))
            continue
        if id(node) in sizes:
            continue
        if id(node) in entered:
            raise ConfigError(f"{name}: a YAML alias refers to the node that contains it (recursive structure)")
        entered.add(id(node))
        stack.append((node, True))
        stack.extend((c, False) for c in children if id(c) not in sizes)
    extra = sizes[id(root)] - len(sizes)
    if extra > YAML_ALIAS_BUDGET:
        raise ConfigError(
            f"{name}: YAML aliases expand to {extra} more nodes, over the limit of "
            f"{YAML_ALIAS_BUDGET} (an alias bomb?); write the repeated parts out"
        )
