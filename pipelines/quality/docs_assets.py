"""Serve Great Expectations Data Docs' CSS and JavaScript from the site itself, when we have them.

GE's pages load Bootstrap, jQuery, bootstrap-table, Font Awesome and Vega from public CDNs;
offline (a locked-down cluster, this project's CI) the pages render unstyled and the index's
list of validations, drawn by bootstrap-table, stays empty. Every one of those assets is a file of
an npm package. When the asset cache (:func:`cache_dir`) already holds those packages, unpacked,
:func:`vendor_assets` copies them into the site under ``static/vendor/`` and points the pages at the
local copies; otherwise the site keeps its CDN links, which is what a connected workspace wants.
Filling the cache (``npm pack``) is a dev tool: :func:`pipelines.testing.dq_assets.fetch_assets`.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

#: CDN URL → (npm package@version, file inside the package, extra folder to copy along).
ASSETS: dict[str, tuple[str, str, str | None]] = {
    "https://maxcdn.bootstrapcdn.com/bootstrap/4.3.1/css/bootstrap.min.css": (
        "bootstrap@4.3.1",
        "dist/css/bootstrap.min.css",
        None,
    ),
    "https://stackpath.bootstrapcdn.com/bootstrap/4.3.1/js/bootstrap.min.js": (
        "bootstrap@4.3.1",
        "dist/js/bootstrap.min.js",
        None,
    ),
    "https://code.jquery.com/jquery-3.7.1.min.js": ("jquery@3.7.1", "dist/jquery.min.js", None),
    "https://cdnjs.cloudflare.com/ajax/libs/popper.js/1.12.9/umd/popper.min.js": (
        "popper.js@1.12.9",
        "dist/umd/popper.min.js",
        None,
    ),
    "https://unpkg.com/bootstrap-table@1.19.1/dist/bootstrap-table.min.js": (
        "bootstrap-table@1.19.1",
        "dist/bootstrap-table.min.js",
        None,
    ),
    "https://unpkg.com/bootstrap-table@1.19.1/dist/bootstrap-table.min.css": (
        "bootstrap-table@1.19.1",
        "dist/bootstrap-table.min.css",
        None,
    ),
    "https://unpkg.com/bootstrap-table@1.19.1/dist/extensions/filter-control/bootstrap-table-filter-control.min.js": (
        "bootstrap-table@1.19.1",
        "dist/extensions/filter-control/bootstrap-table-filter-control.min.js",
        None,
    ),
    "https://unpkg.com/bootstrap-table@1.19.0/dist/extensions/filter-control/bootstrap-table-filter-control.min.css": (
        "bootstrap-table@1.19.1",
        "dist/extensions/filter-control/bootstrap-table-filter-control.min.css",
        None,
    ),
    "https://cdnjs.cloudflare.com/ajax/libs/bootstrap-datepicker/1.9.0/js/bootstrap-datepicker.min.js": (
        "bootstrap-datepicker@1.9.0",
        "dist/js/bootstrap-datepicker.min.js",
        None,
    ),
    "https://cdnjs.cloudflare.com/ajax/libs/bootstrap-datepicker/1.9.0/css/bootstrap-datepicker.min.css": (
        "bootstrap-datepicker@1.9.0",
        "dist/css/bootstrap-datepicker.min.css",
        None,
    ),
    "https://cdnjs.cloudflare.com/ajax/libs/font-awesome/6.6.0/css/all.min.css": (
        "@fortawesome/fontawesome-free@6.6.0",
        "css/all.min.css",
        "webfonts",
    ),
    "https://cdn.jsdelivr.net/npm/@forevolve/bootstrap-dark@1.1.0/dist/css/bootstrap-prefers-dark.css": (
        "@forevolve/bootstrap-dark@1.1.0",
        "dist/css/bootstrap-prefers-dark.css",
        None,
    ),
    "https://cdn.jsdelivr.net/npm/vega@5": ("vega@5", "build/vega.min.js", None),
    "https://cdn.jsdelivr.net/npm/vega-lite@5": ("vega-lite@5", "build/vega-lite.min.js", None),
    "https://cdn.jsdelivr.net/npm/vega-embed@6": ("vega-embed@6", "build/vega-embed.min.js", None),
}
#: The GE logo and newsletter links are decoration; the logo becomes a text link offline.
_LOGO_RE = re.compile(r'<img[^>]+src="https://great-expectations-web-assets[^"]*"[^>]*>')


#: The project's own asset cache (a checkout's ``build/dq-assets``), wherever a command runs from.
PROJECT_CACHE = Path(__file__).resolve().parents[2] / "build" / "dq-assets"


def cache_dir() -> Path:
    """The unpacked npm packages: ``$LAKECDC_DQ_ASSETS``, else ``build/dq-assets`` under the
    current working directory."""
    return Path(os.environ.get("LAKECDC_DQ_ASSETS") or Path.cwd() / "build" / "dq-assets")


def cache_dirs() -> list[Path]:
    """Where :func:`vendor_assets` looks for the packages: :func:`cache_dir`, then the checkout's
    :data:`PROJECT_CACHE` (a command run from another directory still finds it)."""
    return list(dict.fromkeys([cache_dir(), PROJECT_CACHE]))


def package_dir(spec: str, cache: Path | None = None) -> Path:
    """Where the npm package ``name@version`` is (or would be) unpacked in the cache."""
    return (cache or cache_dir()) / re.sub(r"[^A-Za-z0-9_.-]", "_", spec)


def is_unpacked(pkg: Path) -> bool:
    return (pkg / "package.json").exists()


def vendor_assets(site: str | os.PathLike) -> int:
    """Copy the cached CDN assets into ``<site>/static/vendor`` and rewrite every page to use them.

    An asset the caches lack but an earlier build vendored into this site is kept: GE rewrites every
    page on each build, and a site once made to render offline stays so, wherever it is built from.
    Returns how many distinct URLs now point at local files (0 with an empty cache and nothing vendored
    before: the site is left untouched)."""
    site = Path(site)
    vendor = site / "static" / "vendor"
    caches = cache_dirs()
    local: dict[str, Path] = {}
    for url, (spec, inner, extra) in ASSETS.items():
        home = vendor / package_dir(spec, vendor).name
        dest = home / inner
        pkg = next((p for p in (package_dir(spec, c) for c in caches) if is_unpacked(p) and (p / inner).exists()), None)
        if pkg is None:
            if dest.exists():  # vendored by an earlier build
                local[url] = dest
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(pkg / inner, dest)
        if extra and (pkg / extra).is_dir() and not (home / extra).exists():
            shutil.copytree(pkg / extra, home / extra)
        local[url] = dest
    if not local:
        return 0
    for page in site.rglob("*.html"):
        html = page.read_text(encoding="utf-8")
        for url, dest in local.items():
            html = html.replace(f'"{url}"', '"' + os.path.relpath(dest, page.parent).replace(os.sep, "/") + '"')
        html = _LOGO_RE.sub("<strong>Great Expectations</strong>", html)
        page.write_text(html, encoding="utf-8")
    return len(local)


#: GE's words for what a check counted, in the suites whose rows are changes (``<table>.changes``).
_ROWS_RE = re.compile(r"\b(total|unexpected) rows\b")


def name_changes(site: str | os.PathLike) -> int:
    """On the pages of the ``changes`` suites (a batch's changes, not a table's rows), GE's "rows" read
    "changes"; returns the pages changed."""
    changed = 0
    for page in (Path(site) / "validations").rglob("*.html"):
        if not {"changes", "cdc_changes"} & set(page.relative_to(Path(site) / "validations").parts[:-1]):
            continue
        html = page.read_text(encoding="utf-8")
        new = _ROWS_RE.sub(lambda m: f"{m.group(1)} changes", html)
        if new != html:
            page.write_text(new, encoding="utf-8")
            changed += 1
    return changed
