"""What a run checks before any stream starts, beyond the file itself: what needs Spark or the
warehouse. Every error is reported at once, each naming the file and the field.

* every SQL expectation parses and names only columns of its table
  (:func:`~pipelines.quality.sql_rules.validate_sql_rules`);
* no live mirror would get a new name from ``gold.naming`` or a ``target``
  (:func:`~pipelines.mirror_names.check_mirror_names`): gold would start a second mirror beside it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipelines.errors import ConfigError
from pipelines.mirror_names import check_mirror_names, existing_mirrors
from pipelines.quality.sql_rules import validate_sql_rules

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from pipelines.config import PipelineConfig
    from pipelines.warehouse import Warehouse


def preflight(spark: SparkSession, cfg: PipelineConfig, wh: Warehouse) -> None:
    """Raise ConfigError listing every problem a run would meet (see the module's text); the
    warehouse's mirrors are read once, for both checks."""
    mirrors = existing_mirrors(spark, wh)
    errors = validate_sql_rules(spark, cfg, wh, mirrors)
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
