"""Every check in Data Docs, the passing ones too: validation results made from ``dq_results`` rows.

Great Expectations renders only the validations it ran, and lakecdc runs it only where a check finds a row:
a passing check is counted in one Spark aggregation (:func:`pipelines.quality.batch.run_checks`), the key
checks come from each write's own counts, freshness from one read for all sources. So the site listed the
failing few and no mirror whose checks all passed. :func:`stored_validations` turns the ``dq_results``
rows of a build's window into GE suite results, one per mirror, run and batch and kind of check, each
check under its configured name and action, for every row no GE validation of this process covers (those
carry their examples).
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from pipelines.quality.gx_session import asset_name, check_text, describe, great_expectations

log = logging.getLogger(__name__)

#: The GE arguments a stored result's type needs to be rebuilt (its description is what Data Docs show).
_KWARGS: dict[str, dict[str, Any]] = {
    "expect_column_values_to_be_in_set": {"value_set": []},
    "expect_column_values_to_be_between": {"min_value": None, "max_value": None},
    "expect_column_values_to_match_regex": {"regex": ".*"},
}
_PAIRS = (
    "expect_column_pair_values_a_to_be_greater_than_b",
    "expect_column_pair_values_to_be_equal",
)
_COLUMN_TYPES = (
    "expect_column_values_to_not_be_null",
    "expect_column_values_to_be_unique",
    "expect_column_values_to_be_in_set",
    "expect_column_values_to_be_between",
    "expect_column_values_to_match_regex",
)


def kind(row: Mapping) -> str:
    """The suite a stored result is listed under: ``changes`` (checked on each change), ``mirror`` (the mirror
    after a write), or ``freshness``
    (a rule on the mirror's current rows, ``dq check --rules``, ran Great Expectations: suite ``rows``)."""
    name, etype = str(row.get("expectation") or ""), str(row.get("expectation_type") or "")
    if name == "cdc_freshness":
        return "freshness"
    if name.startswith(("cdc_key_", "cdc_reconcile")) or etype in (
        "expect_table_row_count_to_be_between",
        "expect_compound_columns_to_be_unique",
        "expect_column_values_to_be_unique",
    ):
        return "mirror"
    if name.startswith("cdc_"):
        return "changes"
    return "changes"


def _config(row: Mapping, on: str) -> Any:
    from great_expectations.expectations.expectation_configuration import ExpectationConfiguration

    name, etype, action = str(row["expectation"]), str(row.get("expectation_type") or ""), str(row.get("action"))
    details = _details(row)
    if name.startswith("cdc_"):
        text = check_text(name, etype)
    else:
        text = details.get("sql") or f"configured rule ({etype.replace('expect_', '').replace('_', ' ')})"
    kw: dict[str, Any]
    if etype in _COLUMN_TYPES:
        kw = {"column": name, **_KWARGS.get(etype, {})}
        if etype == "expect_column_values_to_be_between":
            kw["min_value"] = 0
    elif etype == "expect_compound_columns_to_be_unique":
        kw = {"column_list": [name, f"{name}."]}
    elif etype in _PAIRS:
        kw = {"column_A": "a", "column_B": "b"}
    elif etype == "expect_table_row_count_to_be_between":
        kw = {"min_value": 0}
    elif etype == "unexpected_rows_expectation":
        kw = {"unexpected_rows_query": "SELECT * FROM {batch}"}
    else:  # cdc_invalid_value and any other record: shown as a column check of its name
        etype, kw = "expect_column_values_to_not_be_null", {"column": name}
    meta = {"rule": name, "action": action, "from": "dq_results"}
    return ExpectationConfiguration(type=etype, kwargs=kw, meta=meta, description=describe(name, action, text, on))


def _details(row: Mapping) -> dict:
    try:
        parsed = json.loads(row.get("details") or "{}")
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _result(row: Mapping) -> Any:
    from great_expectations.core import ExpectationValidationResult

    n, u = row.get("element_count"), row.get("unexpected_count")
    details = _details(row)
    result: dict[str, Any] = {}
    if u is None:
        result["observed_value"] = details.get("observed_value", n)
    else:
        result.update(element_count=n or 0, unexpected_count=u, missing_count=0)
        result["unexpected_percent"] = 100.0 * u / n if n else 0.0
        result["partial_unexpected_list"] = []
        if str(row.get("expectation_type")) == "unexpected_rows_expectation":
            result = {"observed_value": u}
    examples = details.get("examples")
    meta = {"examples": examples[:5]} if isinstance(examples, list) and examples else {}
    return ExpectationValidationResult(success=row.get("success") is True, result=result, meta=meta)


#: How each suite's checks read (the ``on`` of their description).
ON = {
    "changes": "each change",
    "mirror": "the mirror after the write",
    "freshness": "each source",
    "rows": "each row of the mirror",
}


def stored_validations(rows: Iterable[Mapping], covered: set[tuple[str, str, str]]) -> list[tuple[str, str, Any]]:
    """(table, run name, GE suite result) for the ``dq_results`` ``rows`` no GE validation covers: ``covered``
    holds (table, run name, check) of those this process ran. One suite result per table, run, batch and
    :func:`kind`; its run time is the group's first ``checked_at``, so a build made again stores it under the
    same key."""
    from great_expectations.core import ExpectationSuiteValidationResult
    from great_expectations.core.run_identifier import RunIdentifier

    great_expectations()
    groups: dict[tuple, list[Mapping]] = {}
    for r in rows:
        run_name = f"{r['run_id']}-b{r['batch_id']}"
        if (r["table"], run_name, r["expectation"]) in covered:
            continue
        groups.setdefault((r["table"], run_name, kind(r)), []).append(r)
    out = []
    for (table, run_name, suite), items in sorted(groups.items(), key=lambda kv: kv[0]):
        results = []
        for r in sorted(items, key=lambda r: str(r["expectation"])):
            try:
                res = _result(r)
                res.expectation_config = _config(r, ON[suite])
            except Exception as exc:  # noqa: BLE001 - a row GE cannot rebuild is left out of the docs, not the run
                log.warning("Data Docs: %s %s left out: %s", table, r.get("expectation"), exc)
                continue
            results.append(res)
        if not results:
            continue
        ok = sum(1 for x in results if x.success)
        at = min(_utc(r["checked_at"]) for r in items if r.get("checked_at") is not None)
        res = ExpectationSuiteValidationResult(
            success=ok == len(results),
            results=results,
            suite_name=f"{asset_name(table)}.{suite}",
            statistics={
                "evaluated_expectations": len(results),
                "successful_expectations": ok,
                "unsuccessful_expectations": len(results) - ok,
                "success_percent": 100.0 * ok / len(results),
            },
            meta={
                "run_id": RunIdentifier(run_name=run_name, run_time=at),
                "batch_spec": {"data_asset_name": table},
                "lakecdc_run": run_name,
                "lakecdc_table": table,
            },
        )
        out.append((table, run_name, res))
    return out


def _utc(t: _dt.datetime) -> _dt.datetime:
    return t.astimezone(_dt.timezone.utc) if t.tzinfo else t.astimezone().astimezone(_dt.timezone.utc)
