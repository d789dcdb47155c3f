"""Data quality that users can act on: configured expectations and built-in CDC checks, validated by
Great Expectations on Spark DataFrames, recorded in ``dq_results``.

Import the module you need; this package re-exports nothing, so loading the configuration never
pulls in Spark or Great Expectations.

* :mod:`~pipelines.quality.rules`: the YAML rules (``tables.<db.table>.expectations``) and durations,
  parsed when the configuration loads (:class:`Rule`, ``parse_expectations``, ``parse_duration``).
* :mod:`~pipelines.quality.gx_session`: the one ephemeral Great Expectations context of the process;
  builds GE expectations from rules and reads GE results back.
* :mod:`~pipelines.quality.batch`: what gold calls per micro-batch: row rules on the typed changes
  (``warn`` / ``drop`` to quarantine / ``fail`` with :class:`QualityFailure`) and table rules on the
  mirror after the merge.
* :mod:`~pipelines.quality.checks`: the built-in CDC checks every mirror gets (key not NULL and
  unique, sequences never backwards, source drift, freshness, reconciliation after a full load).
* :mod:`~pipelines.quality.storage`: the ``dq_results`` Delta table the checks append to.
* :mod:`~pipelines.quality.docs`: Great Expectations Data Docs (static HTML) under ``<warehouse>/dq``;
  :mod:`~pipelines.quality.docs_assets` serves their CSS/JS locally when the asset cache has them.
* :mod:`~pipelines.quality.report`: ``lakecdc dq report``: the per-table summary and its chart.
"""
