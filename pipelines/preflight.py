"""What a run checks before any stream starts, beyond the file itself: what needs Spark or the
warehouse. Every error is reported at once, each naming the file and the field.

* every SQL expectation parses and names only columns of its table
  (:func:`~pipelines.quality.sql_rules.validate_sql_rules`);
* every ``where`` and ``computed`` expression of a table parses, and where the table configures its
  ``columns``, names only those (:func:`row_expression_errors`; the mirror's columns are checked again when
  a batch plans the table, pipelines.gold.where);
* no live mirror would get a new name from ``gold.naming`` or a ``target``
  (:func:`~pipelines.mirror_names.check_mirror_names`): gold would start a second mirror beside it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipelines.errors import ConfigError
from pipelines.mirror_names import check_mirror_names, existing_mirrors
from pipelines.quality.sql_rules import (
    SqlRuleError,
    empty_frame,
    first_line,
    parse_expression,
    referenced_columns,
    validate_sql_rules,
)
from pipelines.values import spark_type

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from pipelines.config import PipelineConfig
    from pipelines.warehouse import Warehouse


def preflight(spark: SparkSession, cfg: PipelineConfig, wh: Warehouse) -> None:
    """Raise ConfigError listing every problem a run would meet (see the module's text); the
    warehouse's mirrors are read once, for both checks."""
    mirrors = existing_mirrors(spark, wh)
    errors = validate_sql_rules(spark, cfg, wh, mirrors) + row_expression_errors(spark, cfg)
    try:
        check_mirror_names(spark, cfg, wh, mirrors)
    except ConfigError as exc:
        errors.append(str(exc))
    if len(errors) == 1:
        raise ConfigError(errors[0])
    if errors:
        raise ConfigError(
            f"{cfg.origin}: {len(errors)} configuration errors:\n" + "\n".join(f"  - {e}" for e in errors)
        )


def row_expression_errors(spark: SparkSession, cfg: PipelineConfig) -> list[str]:
    """Each table's ``where`` and ``computed`` expressions: one that does not parse, or (for a table that
    configures ``columns``) names another column, is not a boolean (``where``), is an error naming the file,
    the table and the expression."""
    errors = []
    for name, tc in cfg.tables.items():
        exprs = [(f"tables.{name}.where", tc.where, True)] if tc.where else []
        exprs += [(f"tables.{name}.computed.{c}", text, False) for c, text in getattr(tc, "computed", {}).items()]
        frame = empty_frame(spark, {c: spark_type(t) for c, t in tc.columns.items()}) if exprs and tc.columns else None
        for where, text, boolean in exprs:
            try:
                if frame is None:
                    parse_expression(spark, text)
                elif boolean:
                    referenced_columns(frame, text)
                else:
                    frame.selectExpr(text)
            except SqlRuleError as exc:
                errors.append(f"{cfg.origin}: {where} {text!r}: {exc}")
            except Exception as exc:  # noqa: BLE001 - Spark's parse and analysis errors
                errors.append(f"{cfg.origin}: {where} {text!r}: {first_line(exc)}")
    return errors
