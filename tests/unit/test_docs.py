"""README is the front door and docs/ the reference (issue 25): README stays short and links every page,
every relative link and anchor of README and docs/ resolves, README's format list names every format, and
each generated region equals its generator's output (``scripts/generate_docs.py``, ``make docs``)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from urllib.parse import unquote

import pytest

from pipelines.formats import ALL_FORMAT_IDS

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [README, *DOCS]
MAX_README_LINES = 250

_spec = importlib.util.spec_from_file_location("generate_docs", ROOT / "scripts" / "generate_docs.py")
generate_docs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(generate_docs)

FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.DOTALL | re.MULTILINE)
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1", re.DOTALL)
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HTML_ID = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"")


def prose(text: str) -> str:
    """``text`` without fenced blocks and code spans: what Markdown reads as links and headings."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def anchors(path: Path) -> set[str]:
    """The anchors GitHub gives a page: each heading's text, lowercased, punctuation dropped, spaces as
    hyphens, a repeated one numbered (``-1``, ``-2``); and explicit ``<a id>`` targets."""
    text = path.read_text(encoding="utf-8")
    seen: dict[str, int] = {}
    found = set(HTML_ID.findall(text))
    for line in FENCE.sub("", text).splitlines():
        heading = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not heading:
            continue
        words = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading[1])  # a link in a heading: its text
        slug = re.sub(r"[^\w\- ]", "", words.lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def links(path: Path) -> list[str]:
    return LINK.findall(prose(path.read_text(encoding="utf-8")))


def test_readme_is_short_and_starts_with_the_two_commands():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines: reference belongs in docs/"
    top = "\n".join(lines[:8])
    assert "make demo" in top and "make test" in top


def test_readme_links_every_page_of_docs():
    linked = {Path(unquote(target.split("#")[0])).name for target in links(README) if target.startswith("docs/")}
    assert {page.name for page in DOCS} - linked == set(), "pages README does not link"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_anchor_resolves(page):
    broken = []
    for target in links(page):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:: not this repository's
            continue
        where, _, anchor = unquote(target).partition("#")
        resolved = (page.parent / where).resolve() if where else page
        if not resolved.exists():
            broken.append(f"{target}: no {resolved.relative_to(ROOT)}")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(f"{target}: no heading #{anchor} in {resolved.relative_to(ROOT)}")
    assert broken == []


def test_readme_lists_every_format_with_a_link_to_its_section():
    listed = re.findall(r"^\* \[`([a-z0-9_]+)`\]\(docs/formats\.md#\1\)", README.read_text(encoding="utf-8"), re.M)
    assert listed == list(ALL_FORMAT_IDS), "README's format list: one line per format, in `lakecdc formats` order"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_generated_regions_equal_their_generators_output(page):
    text = page.read_text(encoding="utf-8")
    assert generate_docs.render(text, page.name) == text, f"{page.name} is out of date: run `make docs`"


def test_each_generator_fills_a_region_and_each_page_its_own():
    placed = {name: page.name for page in PAGES for name in generate_docs.regions(page.read_text(encoding="utf-8"))}
    assert placed == {
        "configuration-keys": "configuration.md",
        "configuration-example": "configuration.md",
        "formats": "formats.md",
        "layers": "architecture.md",
    }
    assert set(placed) == set(generate_docs.GENERATORS)


def test_the_checker_sees_a_stale_region_and_a_broken_anchor(tmp_path):
    """The two checks above catch what they claim to: an edited generated line, a link to a missing heading."""
    formats = (ROOT / "docs" / "formats.md").read_text(encoding="utf-8")
    edited = formats.replace("### `oms_canal`", "### `oms_canal` (edited by hand)", 1)
    assert edited != formats and generate_docs.render(edited) == formats
    assert "oms_canal" in anchors(ROOT / "docs" / "formats.md")
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n## Two words\n\n## Two words\n\n```\n## not a heading\n```\n", encoding="utf-8")
    assert anchors(page) == {"title", "two-words", "two-words-1"}
