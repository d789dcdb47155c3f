"""SQL expectations (``{name, sql: <boolean>, action}``): a Spark SQL boolean over the mirror's typed
columns; a change passes when it is true (NULL fails: write ``x IS NULL OR x > 0`` to let NULLs pass).

They run through Great Expectations' ``UnexpectedRowsExpectation`` (:func:`sql_check` builds its
``unexpected_rows_query`` over ``{batch}``, the batch's typed changes), beside the fixed rules, so
dq_results and Data Docs show them like the others. As the fixed rules do, a SQL rule skips DELETE and
TRUNCATE changes (they carry no new row), and a partial UPDATE is checked only when it carries every
column the expression names.

An expression must parse, name only the mirror's columns (never ``op``, ``bronze_position`` or the
other columns :func:`~pipelines.quality.batch.typed_changes` adds), be deterministic and hold no
subquery; :func:`validate_sql_rules` checks every table's rules when a run starts, so a typo stops the
run with the file, the table and the rule named, not a micro-batch later.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pipelines.layout import SYSTEM_COLUMNS as MIRROR_SYSTEM_COLUMNS
from pipelines.mirror_names import RecordedMirror, existing_mirrors
from pipelines.quality.gx_session import MAX_EXAMPLES
from pipelines.quality.rules import Rule
from pipelines.spark_logs import is_connect
from pipelines.sql import lit, q
from pipelines.values import spark_type

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from pipelines.config import PipelineConfig, TableConfig
    from pipelines.warehouse import Warehouse

#: The columns :func:`~pipelines.quality.batch.typed_changes` adds to the mirror's: no expression's.
SYSTEM_COLUMNS = ("op", "bronze_position", "change_index", "_seq", "_carried")
#: The change identity every unexpected row carries (as the fixed rules' index columns).
INDEX_COLUMNS = ("bronze_position", "change_index")
#: The loggers PySpark reports an analysis error to before it raises it.
_PYSPARK_ERROR_LOGGERS = ("SQLQueryContextLogger", "DataFrameQueryContextLogger")
#: Expressions Spark evaluates as plans of their own: not a row's condition.
_SUBQUERY_CLASSES = ("ScalarSubquery", "Exists", "ListQuery", "InSubquery", "LateralSubquery")


#: Spark's functions whose value is not one of the row's (``deterministic`` false in the plan), as
#: :func:`_columns_from_text` reads them where no plan is at hand (Spark Connect).
_NONDETERMINISTIC = frozenset(
    ("rand", "randn", "random", "uuid", "shuffle", "monotonically_increasing_id", "spark_partition_id",
     "input_file_name", "input_file_block_start", "input_file_block_length", "randstr", "uniform", "reflect",
     "java_method", "try_reflect")
)  # fmt: skip
#: A SQL string literal (single or double quotes, backslash escapes): no names inside.
_STRING = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")
#: A backquoted name, or a word (and whether a call's parenthesis follows it).
_NAME = re.compile(r"`((?:[^`]|``)+)`|\b([A-Za-z_][A-Za-z0-9_]*)\b(\s*\()?")


class SqlRuleError(ValueError):
    """A SQL rule that cannot run on a table: the reason, as a person can act on it."""


@dataclass(frozen=True)
class SqlCheck:
    """One SQL rule made ready for a batch frame: the mirror columns it names, the rows it applies to
    and the rows it finds unexpected (Spark SQL over the typed frame), and the query GE runs."""

    rule: Rule
    columns: tuple[str, ...]
    applies: str
    unexpected: str

    @property
    def select(self) -> list[str]:
        return [q(c) for c in dict.fromkeys([*INDEX_COLUMNS, *self.columns])]

    @property
    def query(self) -> str:
        """GE's ``unexpected_rows_query``; ``{batch}`` is the batch's typed changes (GE formats the
        query, so the expression's own braces are doubled)."""
        where = self.unexpected.replace("{", "{{").replace("}", "}}")
        return f"SELECT {', '.join(self.select)} FROM {{batch}}\nWHERE {where}"


def first_line(exc: BaseException) -> str:
    text = getattr(exc, "getMessage", None)
    message = text() if callable(text) else str(exc)
    return " ".join(message.strip().splitlines()[:1])[:400] or type(exc).__name__


def _walk_classes(expr: Any) -> set[str]:
    """The class names of a JVM expression tree (py4j)."""
    seen, stack = set(), [expr]
    while stack:
        node = stack.pop()
        seen.add(node.getClass().getSimpleName())
        children = node.children()
        stack.extend(children.apply(i) for i in range(children.size()))
    return seen


@contextmanager
def _quiet_analysis_errors() -> Iterator[None]:
    """PySpark logs every analysis error with its query context, JVM stack included, before it raises
    it; a rule's typo is reported once, by whoever catches :class:`SqlRuleError`."""
    loggers = [logging.getLogger(name) for name in _PYSPARK_ERROR_LOGGERS]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def parse_expression(spark: SparkSession, text: str) -> None:
    """Raise the parser's error if ``text`` is not a SQL expression. Spark Connect has no parser on the client:
    there the server parses it, analysing a query over no columns (a column it cannot resolve is then no
    parse error, and passes)."""
    from pyspark.errors import AnalysisException, ParseException

    with _quiet_analysis_errors():
        if not is_connect(spark):
            spark._jsparkSession.sessionState().sqlParser().parseExpression(text)
            return
        try:
            spark.range(0).selectExpr(text).schema  # noqa: B018 - the analysis is the check
        except ParseException:
            raise
        except AnalysisException:
            pass


def referenced_columns(frame: DataFrame, text: str) -> tuple[str, ...]:
    """The columns of ``frame`` (less :data:`SYSTEM_COLUMNS`) the boolean ``text`` names, as the frame
    spells them; :class:`SqlRuleError` when it does not parse, names another column, is not a boolean,
    holds an aggregate, a window, a subquery, or is not deterministic."""
    from pyspark.sql import functions as F

    columns = [c for c in frame.columns if c not in SYSTEM_COLUMNS]
    if is_connect(frame):
        return _columns_from_text(frame, text, columns)
    try:
        with _quiet_analysis_errors():
            condition = F.expr(text)
            probe = frame.select(*[F.col(q(c)) for c in columns]).where(condition)
            plan = probe._jdf.queryExecution().analyzed()
    except Exception as exc:  # noqa: BLE001 - Spark's parse and analysis errors, each named
        raise SqlRuleError(first_line(exc)) from None
    if plan.getClass().getSimpleName() != "Filter":
        raise SqlRuleError("must be a condition on one row (no aggregate or window function)")
    cond = plan.condition()
    classes = _walk_classes(cond)
    if classes & set(_SUBQUERY_CLASSES):
        raise SqlRuleError("must use the row's columns only, not a subquery")
    if not cond.deterministic():
        raise SqlRuleError("must be deterministic (the same row must always pass or fail)")
    refs = cond.references().toSeq()
    names = {refs.apply(i).name().lower() for i in range(refs.size())}  # as written: `A > 1` names a
    return tuple(c for c in columns if c.lower() in names)


def _columns_from_text(frame: DataFrame, text: str, columns: list[str]) -> tuple[str, ...]:
    """:func:`referenced_columns` over Spark Connect, where no analyzed plan reaches the client: the server
    analyses the condition (a parse error, an unknown column, a non-boolean, an aggregate or a window in a
    WHERE fail there); a subquery and a non-deterministic function are read off the text, string literals
    aside, and so are the columns it names (Spark resolves names case-insensitively)."""
    from pyspark.sql import functions as F

    try:
        with _quiet_analysis_errors():
            frame.select(*[F.col(q(c)) for c in columns]).where(F.expr(text)).schema  # noqa: B018 - analysed
    except Exception as exc:  # noqa: BLE001 - Spark's parse and analysis errors, each named
        raise SqlRuleError(first_line(exc)) from None
    names, calls = set(), set()
    for quoted, word, call in _NAME.findall(_STRING.sub("''", text)):
        if quoted:
            names.add(quoted.replace("``", "`").lower())
        else:
            (calls if call else names).add(word.lower())
    if "select" in names | calls:
        raise SqlRuleError("must use the row's columns only, not a subquery")
    if calls & _NONDETERMINISTIC:
        raise SqlRuleError("must be deterministic (the same row must always pass or fail)")
    added = sorted(names & {c.lower() for c in frame.columns if c not in columns})
    if added:  # Spark resolves them from the frame below the select: the plan path refuses that plan
        raise SqlRuleError(f"must name the mirror's columns only, not {', '.join(added)}")
    return tuple(c for c in columns if c.lower() in names)


def sql_check(frame: DataFrame, rule: Rule) -> SqlCheck:
    """``rule`` made ready for ``frame`` (typed changes, :func:`~pipelines.quality.batch.typed_changes`);
    :class:`SqlRuleError` when it cannot run there."""
    columns = referenced_columns(frame, rule.sql or "")
    applies = []
    if "op" in frame.columns:
        applies.append("op NOT IN ('DELETE', 'TRUNCATE')")
    if "_carried" in frame.columns and columns:
        carried = " AND ".join(f"array_contains(_carried, {lit(c)})" for c in columns)
        applies.append(f"(_carried IS NULL OR ({carried}))")
    applies_sql = " AND ".join(applies) or "TRUE"
    # the expression on lines of its own: a trailing -- comment in it ends with its line
    unexpected = f"{applies_sql}\n  AND NOT coalesce((\n{rule.sql}\n), FALSE)"
    return SqlCheck(rule, columns, applies_sql, unexpected)


@dataclass
class SqlOutcome:
    """What a SQL rule found in a batch: the changes it applied to, GE's count of unexpected ones, and
    the unexpected rows themselves (every one for ``drop``, else up to :data:`MAX_EXAMPLES`), read with
    the same SQL GE ran."""

    check: SqlCheck
    checked: int
    unexpected: int | None
    rows: list[dict]

    def details(self, er: Any) -> str:
        parts: dict[str, Any] = {"sql": self.check.rule.sql}
        if er.exception_info and er.exception_info.get("raised_exception"):
            parts["error"] = str(er.exception_info.get("exception_message"))[:500]
        parts["observed_value"] = self.unexpected
        if self.rows:
            parts["examples"] = self.rows[:MAX_EXAMPLES]
        return json.dumps(parts, default=str, ensure_ascii=False)

    def message(self, table: str, er: Any) -> str:
        rule = self.check.rule
        lines = [
            f"data quality check {rule.name!r} (sql: {rule.sql}) failed on table {table}: "
            f"{self.unexpected} of {self.checked} changes unexpected"
        ]
        if er.exception_info and er.exception_info.get("raised_exception"):
            lines.append(f"  error: {er.exception_info.get('exception_message')}")
        lines += [f"  e.g. {json.dumps(r, default=str, ensure_ascii=False)}" for r in self.rows[:MAX_EXAMPLES]]
        return "\n".join(lines)


def sql_outcomes(frame: DataFrame, checks: Sequence[SqlCheck], res: Any) -> dict[str, SqlOutcome]:
    """Each SQL rule's outcome in ``frame`` after GE validated it (``res``): one aggregation counts the
    changes each applies to; a failing rule's unexpected rows are read with its own SQL."""
    from pyspark.sql import functions as F

    if not checks:
        return {}
    totals = frame.agg(*[F.count_if(F.expr(c.applies)).alias(f"n{i}") for i, c in enumerate(checks)]).first()
    observed = {
        er.expectation_config.meta["rule"]: (er.result or {}).get("observed_value")
        for er in res.results
        if er.expectation_config.meta.get("sql") is not None
    }
    out = {}
    for i, c in enumerate(checks):
        unexpected = observed.get(c.rule.name)
        rows: list[dict] = []
        if unexpected:
            found = frame.where(F.expr(c.unexpected)).select(*[F.col(x) for x in c.select])
            if c.rule.action != "drop":
                found = found.limit(MAX_EXAMPLES)
            rows = [r.asDict() for r in found.collect()]
        out[c.rule.name] = SqlOutcome(c, int(totals[f"n{i}"]), unexpected, rows)
    return out


# ---------------------------------------------------------------- when a run starts


def _configured_types(tc: TableConfig) -> dict[str, str]:
    return {c: spark_type(t) for c, t in tc.columns.items()}


def empty_frame(spark: SparkSession, types: Mapping[str, str]) -> DataFrame:
    from pyspark.sql.types import StructType

    schema = StructType.fromDDL(", ".join(f"{q(c)} {t}" for c, t in types.items()))
    return spark.createDataFrame([], schema)


def validate_sql_rules(
    spark: SparkSession, cfg: PipelineConfig, wh: Warehouse, mirrors: list[RecordedMirror] | None = None
) -> list[str]:
    """Every SQL rule of the configuration checked against its table: the columns it may name are the
    table's configured ``columns`` and the columns its mirror has, if it has one. Returns the errors,
    each naming the file, the table and the rule (empty: every rule can run). A table that configures
    no column and has no mirror yet has its rules parsed only: their columns are checked on its first
    batch (a failed result naming the column, or the stream stopped for a ``fail`` rule). ``mirrors``:
    the warehouse's, when the caller has read them already (:func:`~pipelines.mirror_names.existing_mirrors`)."""
    tables = {name: tc for name, tc in cfg.tables.items() if any(r.is_sql for r in tc.expectations)}
    if not tables:
        return []
    mirrored: dict[str, dict[str, str]] = {}
    for m in existing_mirrors(spark, wh) if mirrors is None else mirrors:
        if m.source is None:
            continue
        tc = cfg.table_for(m.source.name)
        if tc is not None and tc.name in tables:
            schema = m.ref.read(spark).schema
            types = {f.name: f.dataType.simpleString() for f in schema.fields if f.name not in MIRROR_SYSTEM_COLUMNS}
            mirrored.setdefault(tc.name, {}).update(types)
    errors = []
    for name, tc in tables.items():
        types = {**mirrored.get(name, {}), **_configured_types(tc)}
        left_out = {c.lower() for c in tc.columns_exclude}
        if tc.columns_include is not None:
            left_out |= {c.lower() for c in types if c.lower() not in {i.lower() for i in tc.columns_include}}
        types = {c: t for c, t in types.items() if c.lower() not in left_out}
        frame = empty_frame(spark, types) if types else None
        for i, rule in enumerate(tc.expectations):
            if not rule.is_sql:
                continue
            where = f"{cfg.origin}: tables.{name}.expectations[{i}] ({rule.name}).sql"
            try:
                if frame is None:
                    parse_expression(spark, rule.sql or "")
                else:
                    referenced_columns(frame, rule.sql or "")
            except SqlRuleError as exc:
                hint = _left_out_hint(rule.sql or "", tc) if "resolve" in str(exc) else ""
                errors.append(f"{where}: {exc}{hint}")
            except Exception as exc:  # noqa: BLE001 - the parser's ParseException
                errors.append(f"{where}: {first_line(exc)}")
    return errors


def _left_out_hint(text: str, tc: TableConfig) -> str:
    """Where an unknown name is a column the table leaves out, say so."""
    lowered = text.lower()
    for c in tc.columns_exclude:
        if c.lower() in lowered:
            return f" (column {c!r} is left out by tables.{tc.name}.columns_exclude)"
    if tc.columns_include is not None:
        return f" (tables.{tc.name}.columns_include keeps only {', '.join(tc.columns_include)})"
    return (
        f" (the columns known now: tables.{tc.name}.columns and its mirror's; a column its messages bring "
        "can be listed under columns)"
    )
