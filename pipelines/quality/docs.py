"""Great Expectations Data Docs (static HTML) of the validations quality ran.

Data Docs need stored validation results, which the ephemeral context of
:mod:`pipelines.quality.gx_session` does not keep; so :func:`build_data_docs` uses a separate
*file-backed* context under ``<warehouse>/dq/gx`` only for the docs: it adds this process's
validation results to that context's validation-results store (so history accumulates across runs)
and builds a filesystem site whose ``base_directory`` is ``<warehouse>/dq/data_docs``.

Every check is listed, the passing ones too: the ``dq_results`` rows stored since the last build that no
validation of this process covers become validation results of their own
(:mod:`pipelines.quality.docs_results`); the batches' suites are named ``changes`` and their pages count
changes, not rows.
"""

from __future__ import annotations

import datetime as _dt
import logging
import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipelines.quality.batch import BatchQuality
from pipelines.quality.docs_assets import name_changes, vendor_assets
from pipelines.quality.docs_results import stored_validations
from pipelines.quality.gx_session import GXSession, asset_name, great_expectations, utc_now
from pipelines.quality.storage import dq_dir, dq_results_ref

if TYPE_CHECKING:
    from pipelines.warehouse import Warehouse

log = logging.getLogger(__name__)


#: (site directory, id of a validation result) already stored in that site by this process: a run that
#: validated nothing new leaves the site as it is (rendering it costs seconds).
_PUBLISHED: set[tuple[str, int]] = set()


def _validations(results: Iterable | None) -> list[tuple[str, str, Any]]:
    """(table, run name, GE validation result) of ``results``, or of every validation this process ran."""
    if results is None:
        return GXSession.recent_results()
    items = []
    for r in results:
        if isinstance(r, BatchQuality):
            if r.validation is not None:
                items.append((r.table, r.validation.meta.get("lakecdc_run", ""), r.validation))
        elif r is not None:
            items.append((r.meta.get("lakecdc_table", ""), r.meta.get("lakecdc_run", ""), r))
    return items


#: The ``checked_at`` of the newest ``dq_results`` row a build listed (in the GE project directory).
THROUGH_FILE = "lakecdc_docs_through.txt"
#: How far back the first build of a site lists stored results.
FIRST_WINDOW = _dt.timedelta(days=1)


def _through(project: Path) -> _dt.datetime | None:
    try:
        return _dt.datetime.fromisoformat((project / THROUGH_FILE).read_text(encoding="utf-8").strip())
    except (OSError, ValueError):
        return None


def _stored(warehouse: Warehouse | str, through: _dt.datetime | None) -> tuple[list[dict], _dt.datetime | None]:
    """The ``dq_results`` rows checked after ``through`` (first build: within :data:`FIRST_WINDOW`), and the
    newest one's time; none without an active Spark session or the table."""
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    spark = SparkSession.getActiveSession()
    ref = dq_results_ref(warehouse)
    if spark is None or not ref.exists(spark):
        return [], None
    since = through if through is not None else _dt.datetime.now() - FIRST_WINDOW
    rows = [r.asDict() for r in ref.read(spark).where(F.col("checked_at") > F.lit(since)).collect()]
    newest = max((r["checked_at"] for r in rows if r["checked_at"] is not None), default=None)
    return rows, newest


def build_data_docs(
    results: Iterable | None = None,
    out_dir: str | os.PathLike | None = None,
    *,
    warehouse: Warehouse | str | None = None,
    project_dir: str | os.PathLike | None = None,
) -> str:
    """Render Great Expectations Data Docs; returns the path of ``index.html``.

    results      validation results (GE ``ExpectationSuiteValidationResult`` or :class:`BatchQuality`);
                 default: every validation this process ran.
    out_dir      the site's directory; default ``<warehouse>/dq/data_docs``.
    project_dir  the file-backed GE project that keeps results between runs; default
                 ``<out_dir>/../gx`` (``<warehouse>/dq/gx``).

    GE links its CSS and JavaScript from CDNs; when the asset cache is populated
    (:mod:`pipelines.quality.docs_assets`) the site serves local copies instead.
    """
    gx = great_expectations()
    from great_expectations.core.run_identifier import RunIdentifier
    from great_expectations.data_context.types.resource_identifiers import (
        ExpectationSuiteIdentifier,
        ValidationResultIdentifier,
    )

    if out_dir is None:
        if warehouse is None:
            raise ValueError("give out_dir or warehouse")
        out_dir = dq_dir(warehouse) / "data_docs"
    out = Path(out_dir).resolve()
    project = Path(project_dir).resolve() if project_dir else out.parent / "gx"
    project.mkdir(parents=True, exist_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    index = out / "index.html"
    items = [i for i in _validations(results) if (str(out), id(i[2])) not in _PUBLISHED]
    through = _through(project)
    stored, newest = _stored(warehouse, through) if warehouse is not None else ([], None)
    if stored:
        covered = {
            (t, run, er.expectation_config.meta.get("rule"))
            for t, run, res in GXSession.recent_results() + items
            for er in res.results
            if er.expectation_config is not None and er.expectation_config.meta
        }
        items += stored_validations(stored, covered)
    if not items and index.exists():  # nothing validated since the last build: the site shows it all already
        return str(index)
    fctx = gx.get_context(mode="file", project_root_dir=str(project))
    site = {
        "class_name": "SiteBuilder",
        "show_how_to_buttons": False,
        "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
        "store_backend": {"class_name": "TupleFilesystemStoreBackend", "base_directory": str(out)},
    }
    sites = fctx.get_config().data_docs_sites or {}
    if "lakecdc" not in sites:
        fctx.add_data_docs_site(site_name="lakecdc", site_config=site)
    elif sites["lakecdc"].get("store_backend", {}).get("base_directory") != str(out):
        fctx.update_data_docs_site(site_name="lakecdc", site_config=site)
    for table, run_name, res in items:
        rid = res.meta.get("run_id")
        if not isinstance(rid, RunIdentifier):
            rid = RunIdentifier(run_name=run_name or "lakecdc", run_time=utc_now())
            res.meta["run_id"] = rid
        key = ValidationResultIdentifier(
            expectation_suite_identifier=ExpectationSuiteIdentifier(name=res.suite_name),
            run_id=rid,
            batch_identifier=asset_name(table or "table"),
        )
        fctx.validation_results_store.set(key, res)
    urls = fctx.build_data_docs(site_names=["lakecdc"])
    _PUBLISHED.update((str(out), id(res)) for _table, _run, res in items)
    if newest is not None:
        (project / THROUGH_FILE).write_text(newest.isoformat(), encoding="utf-8")
    name_changes(out)
    vendored = vendor_assets(out)
    log.info("quality: Data Docs at %s (%d assets served locally)", urls.get("lakecdc", index), vendored)
    return str(index)
