"""Regenerate the generated parts of the documentation: ``make docs`` (``python scripts/generate_docs.py``).

A page holds hand-written text and generated regions. A region sits between two comments naming its
generator, and only the text between them is replaced::

    <!-- generated: formats (lakecdc formats --markdown); run `make docs` after changing its source -->
    ...
    <!-- end generated: formats -->

Each generator renders what the code declares, so the page cannot drift from it:

* ``configuration-example``: ``conf/pipeline.example.yaml``, every option commented;
* ``configuration-keys``: every key of the file (``pipelines.config.fields``, ``reference_markdown()``);
* ``formats``: every format as its decoder states it (``lakecdc formats --markdown``);
* ``layers``: the import layers ``tests/unit/test_layers.py`` enforces.

``--check`` writes nothing and exits 1 naming the pages that are out of date; ``tests/unit/test_docs.py``
asserts the same.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # this checkout's pipelines, installed or not

#: Every page that may hold a generated region: README and docs/.
PAGES = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))

#: A region: its opening comment (the generator's name, then anything on that line), its body, its closing comment.
REGION = re.compile(
    r"(?P<begin><!-- generated: (?P<name>[a-z-]+)(?: [^\n]*)? -->\n)"
    r"(?P<body>.*?)"
    r"(?P<end><!-- end generated: (?P=name) -->)",
    re.DOTALL,
)


def configuration_example() -> str:
    text = (ROOT / "conf" / "pipeline.example.yaml").read_text(encoding="utf-8")
    return f"```yaml\n{text.rstrip()}\n```\n"


def configuration_keys() -> str:
    from pipelines.config import reference_markdown

    return reference_markdown()


def formats() -> str:
    from pipelines.cli_commands.formats import formats_markdown

    return formats_markdown()


def layers() -> str:
    """The layers of ``tests/unit/test_layers.py``, bottom first: a module imports its own layer or lower ones."""
    spec = importlib.util.spec_from_file_location("_test_layers", ROOT / "tests" / "unit" / "test_layers.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    lines = ["| layer (bottom first) | modules |", "| --- | --- |"]
    for name, patterns in module.LAYERS:
        lines.append(f"| {name} | {', '.join(f'`{p}`' for p in patterns)} |")
    lines.append(f"| dev tools (not in the wheel) | {', '.join(f'`{p}`' for p in module.DEV_TOOLS)} |")
    return "\n".join(lines) + "\n"


GENERATORS: dict[str, Callable[[], str]] = {
    "configuration-example": configuration_example,
    "configuration-keys": configuration_keys,
    "formats": formats,
    "layers": layers,
}


def render(text: str, page: str = "") -> str:
    """``text`` with every generated region's body replaced by its generator's output."""
    outputs: dict[str, str] = {}

    def fill(match: re.Match) -> str:
        name = match["name"]
        if name not in GENERATORS:
            raise KeyError(f"{page}: no generator named {name!r} (known: {', '.join(GENERATORS)})")
        if name not in outputs:
            outputs[name] = GENERATORS[name]().rstrip("\n") + "\n"
        return match["begin"] + outputs[name] + match["end"]

    return REGION.sub(fill, text)


def regions(text: str) -> list[str]:
    """The names of the generated regions of ``text``, in order."""
    return [match["name"] for match in REGION.finditer(text)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Regenerate the generated regions of README.md and docs/*.md.")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when a page is out of date")
    args = parser.parse_args(argv)
    stale = []
    for path in PAGES:
        text = path.read_text(encoding="utf-8")
        fresh = render(text, str(path.relative_to(ROOT)))
        if fresh != text:
            stale.append(str(path.relative_to(ROOT)))
            if not args.check:
                path.write_text(fresh, encoding="utf-8")
    if args.check:
        print(f"out of date (run make docs): {', '.join(stale)}" if stale else "up to date", file=sys.stderr)
        return 1 if stale else 0
    print(f"regenerated: {', '.join(stale) or 'nothing (all up to date)'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
