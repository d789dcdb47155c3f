"""Make Great Expectations Data Docs render without the internet.

GE's pages load Bootstrap, jQuery, bootstrap-table, Font Awesome and Vega from public CDNs;
offline (a locked-down cluster, this project's CI) the pages render unstyled and the index's
list of validations, drawn by bootstrap-table, stays empty. Every one of those assets is an npm
package, so we fetch them once with ``npm pack`` into a cache (``build/dq-assets`` in a source
checkout, else ``~/.cache/lakecdc/dq-assets``), copy them into the site under
``static/vendor/`` and point the pages at the local copies. Without npm (or its registry) the
site keeps its CDN links, which is what a connected workspace wants anyway.
"""
from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

log = logging.getLogger(__name__)

#: CDN URL → (npm package@version, file inside the package, extra folder to copy along).
ASSETS: dict[str, tuple[str, str, str | None]] = {
    "https://maxcdn.bootstrapcdn.com/bootstrap/4.3.1/css/bootstrap.min.css":
        ("bootstrap@4.3.1", "dist/css/bootstrap.min.css", None),
    "https://stackpath.bootstrapcdn.com/bootstrap/4.3.1/js/bootstrap.min.js":
        ("bootstrap@4.3.1", "dist/js/bootstrap.min.js", None),
    "https://code.jquery.com/jquery-3.7.1.min.js": ("jquery@3.7.1", "dist/jquery.min.js", None),
    "https://cdnjs.cloudflare.com/ajax/libs/popper.js/1.12.9/umd/popper.min.js":
        ("popper.js@1.12.9", "dist/umd/popper.min.js", None),
    "https://unpkg.com/bootstrap-table@1.19.1/dist/bootstrap-table.min.js":
        ("bootstrap-table@1.19.1", "dist/bootstrap-table.min.js", None),
    "https://unpkg.com/bootstrap-table@1.19.1/dist/bootstrap-table.min.css":
        ("bootstrap-table@1.19.1", "dist/bootstrap-table.min.css", None),
    "https://unpkg.com/bootstrap-table@1.19.1/dist/extensions/filter-control/bootstrap-table-filter-control.min.js":
        ("bootstrap-table@1.19.1", "dist/extensions/filter-control/bootstrap-table-filter-control.min.js", None),
    "https://unpkg.com/bootstrap-table@1.19.0/dist/extensions/filter-control/bootstrap-table-filter-control.min.css":
        ("bootstrap-table@1.19.1", "dist/extensions/filter-control/bootstrap-table-filter-control.min.css", None),
    "https://cdnjs.cloudflare.com/ajax/libs/bootstrap-datepicker/1.9.0/js/bootstrap-datepicker.min.js":
        ("bootstrap-datepicker@1.9.0", "dist/js/bootstrap-datepicker.min.js", None),
    "https://cdnjs.cloudflare.com/ajax/libs/bootstrap-datepicker/1.9.0/css/bootstrap-datepicker.min.css":
        ("bootstrap-datepicker@1.9.0", "dist/css/bootstrap-datepicker.min.css", None),
    "https://cdnjs.cloudflare.com/ajax/libs/font-awesome/6.6.0/css/all.min.css":
        ("@fortawesome/fontawesome-free@6.6.0", "css/all.min.css", "webfonts"),
    "https://cdn.jsdelivr.net/npm/@forevolve/bootstrap-dark@1.1.0/dist/css/bootstrap-prefers-dark.css":
        ("@forevolve/bootstrap-dark@1.1.0", "dist/css/bootstrap-prefers-dark.css", None),
    "https://cdn.jsdelivr.net/npm/vega@5": ("vega@5", "build/vega.min.js", None),
    "https://cdn.jsdelivr.net/npm/vega-lite@5": ("vega-lite@5", "build/vega-lite.min.js", None),
    "https://cdn.jsdelivr.net/npm/vega-embed@6": ("vega-embed@6", "build/vega-embed.min.js", None),
}
#: The GE logo and newsletter links are decoration; the logo becomes a text link offline.
_LOGO_RE = re.compile(r'<img[^>]+src="https://great-expectations-web-assets[^"]*"[^>]*>')


def cache_dir() -> Path:
    """The npm packages' cache (``$LAKECDC_DQ_ASSETS`` overrides)."""
    from pipelines.spark import cache_dir as build_cache

    return build_cache("dq-assets", "LAKECDC_DQ_ASSETS")


def _package_dir(spec: str, cache: Path) -> Path | None:
    """The unpacked npm package ``name@version`` (fetched once with ``npm pack``), or None."""
    target = cache / re.sub(r"[^A-Za-z0-9_.-]", "_", spec)
    if (target / "package.json").exists():
        return target
    npm = shutil.which("npm")
    if npm is None:
        return None
    cache.mkdir(parents=True, exist_ok=True)
    try:
        out = subprocess.run([npm, "pack", "--silent", "--pack-destination", str(cache), spec],
                             capture_output=True, text=True, timeout=120, check=True).stdout.strip().splitlines()
    except (subprocess.SubprocessError, OSError) as exc:
        log.warning("Data Docs assets: npm pack %s failed (%s); keeping CDN links", spec, exc)
        return None
    tgz = cache / out[-1]
    tmp = target.with_suffix(".part")
    shutil.rmtree(tmp, ignore_errors=True)
    with tarfile.open(tgz) as tar:
        tar.extractall(tmp, filter="data")
    shutil.rmtree(target, ignore_errors=True)
    (tmp / "package").rename(target)
    shutil.rmtree(tmp, ignore_errors=True)
    tgz.unlink(missing_ok=True)
    return target


def vendor_assets(site: str | os.PathLike) -> int:
    """Copy the CDN assets into ``<site>/static/vendor`` and rewrite every page to use them.

    Returns how many distinct URLs now point at local files."""
    site = Path(site)
    vendor = site / "static" / "vendor"
    local: dict[str, Path] = {}
    for url, (spec, inner, extra) in ASSETS.items():
        pkg = _package_dir(spec, cache_dir())
        if pkg is None or not (pkg / inner).exists():
            continue
        dest = vendor / pkg.name / inner
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(pkg / inner, dest)
        if extra and (pkg / extra).is_dir() and not (vendor / pkg.name / extra).exists():
            shutil.copytree(pkg / extra, vendor / pkg.name / extra)
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
