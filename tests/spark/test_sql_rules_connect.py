"""The Spark Connect path of SQL rules (issue 33) decides as the plan does: over Connect no analyzed plan
reaches the client, so the server analyses the condition and the text says which columns it names, whether
it holds a subquery and whether it is deterministic. Run here on a classic session, side by side."""

from __future__ import annotations

import pytest

from pipelines.quality.sql_rules import SYSTEM_COLUMNS, SqlRuleError, _columns_from_text, referenced_columns

RULES = [
    "a > 0 AND id IS NOT NULL",
    "A > 1",
    "`we ird` = 'a > 0 AND rand() > 1 OR id IN (SELECT 1)'",
    "coalesce(`we ird`, '') <> '' OR a BETWEEN 1 AND id",
    "amout > 0",
    "a + 1",
    "sum(a) > 0",
    "rank() OVER (ORDER BY a) = 1",
    "rand() > a",
    "uuid() IS NOT NULL AND a > 0",
    "a IN (SELECT 1)",
    "EXISTS (SELECT 1)",
    "op = 'INSERT'",
    "a >> > 1",
]


def _outcome(find, frame, text):
    try:
        return sorted(find(frame, text))
    except SqlRuleError as exc:
        return str(exc)


@pytest.mark.parametrize("text", RULES)
def test_the_connect_path_decides_as_the_plan_does(spark, text):
    frame = spark.createDataFrame([], "id BIGINT, a INT, `we ird` STRING, op STRING, _seq STRING")
    columns = [c for c in frame.columns if c not in SYSTEM_COLUMNS]
    from_text = _outcome(lambda f, t: _columns_from_text(f, t, columns), frame, text)
    from_plan = _outcome(referenced_columns, frame, text)
    if text == "op = 'INSERT'":  # both refuse a column lakecdc adds; the plan's reason is its shape
        assert isinstance(from_text, str) and isinstance(from_plan, str), (from_text, from_plan)
    else:
        assert from_text == from_plan
