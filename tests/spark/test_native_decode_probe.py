"""The benchmark's Spark SQL decode of OMS Canal (``bench/native_decode_probe.py``) agrees with the Python
decoder, change by change and field by field, on a simulated stream of every type the simulator writes.

The probe's speed figure (docs/benchmark.md, *A native decoder, measured*) means something only while it decodes
exactly what silver decodes; this keeps it so."""

from __future__ import annotations

import yaml

from bench.decode import bronze_frame
from bench.native_decode_probe import COMPARED, agreement
from pipelines.config import parse_config
from pipelines.testing.simulator import generate_history, pipeline_yaml_many


def test_the_sql_decode_of_oms_canal_equals_the_python_decoder(spark, tmp_path):
    history = generate_history("oms_canal", 5, n_changes=300, n_tables=4, composite_keys=False, db="probe")
    doc = yaml.safe_load(pipeline_yaml_many([history], str(tmp_path / "wh"), {"oms_canal": str(tmp_path / "none")}))
    cfg = parse_config(doc, origin="test")
    bronze, n = bronze_frame(spark, {"oms_canal": history.messages}, len(history.messages))
    try:
        for generated in (False, True):
            result = agreement(spark, bronze, cfg, generated=generated)
            assert result["python_changes"] >= n - 5, result  # a change per message, quarantined ones aside
            assert result["native_changes"] == result["python_changes"], result
            assert result["fields"] == dict.fromkeys(COMPARED, 0), result
            assert result["changes_equal"] == result["python_changes"], result
    finally:
        bronze.unpersist()
