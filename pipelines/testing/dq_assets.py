"""Fill the Data Docs asset cache with ``npm pack``, so the docs render offline (a dev tool).

:mod:`pipelines.quality.docs_assets` serves the assets from the cache when it is populated; this
module fetches every package it names, once, into that cache (``$LAKECDC_DQ_ASSETS``, else
``build/dq-assets`` under the current working directory). Needs npm and its registry.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import tarfile
from pathlib import Path

from pipelines.quality.docs_assets import ASSETS, cache_dir, is_unpacked, package_dir

log = logging.getLogger(__name__)


def _fetch(spec: str, cache: Path, npm: str) -> bool:
    """Unpack the npm package ``name@version`` into the cache; False when ``npm pack`` fails."""
    target = package_dir(spec, cache)
    if is_unpacked(target):
        return True
    cache.mkdir(parents=True, exist_ok=True)
    try:
        out = (
            subprocess.run(
                [npm, "pack", "--silent", "--pack-destination", str(cache), spec],
                capture_output=True,
                text=True,
                timeout=120,
                check=True,
            )
            .stdout.strip()
            .splitlines()
        )
    except (subprocess.SubprocessError, OSError) as exc:
        log.warning("Data Docs assets: npm pack %s failed (%s)", spec, exc)
        return False
    tgz = cache / out[-1]
    tmp = target.with_suffix(".part")
    shutil.rmtree(tmp, ignore_errors=True)
    with tarfile.open(tgz) as tar:
        tar.extractall(tmp, filter="data")
    shutil.rmtree(target, ignore_errors=True)
    (tmp / "package").rename(target)
    shutil.rmtree(tmp, ignore_errors=True)
    tgz.unlink(missing_ok=True)
    return True


def fetch_assets() -> Path | None:
    """Fetch every Data Docs asset package not cached yet; the cache directory when all are there,
    None when npm is missing or a package could not be fetched (the docs then keep CDN links)."""
    cache = cache_dir()
    specs = sorted({spec for spec, _inner, _extra in ASSETS.values()})
    if all(is_unpacked(package_dir(spec, cache)) for spec in specs):
        return cache
    npm = shutil.which("npm")
    if npm is None:
        log.warning("Data Docs assets: npm is not installed; the docs keep their CDN links")
        return None
    fetched = [_fetch(spec, cache, npm) for spec in specs]
    return cache if all(fetched) else None
