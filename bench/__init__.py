"""lakecdc benchmark (issue 14): every figure next to its comparison, measured in the same run.

Not part of the wheel (``pyproject.toml`` packages only ``pipelines*``). Run from a source checkout::

    make bench                      # full sizes (long: the many-tables and 10M-row sections take hours on 2 cores)
    make bench-quick                # about 1% of the sizes, a few minutes: proves the harness runs
    python -m bench --quick --only decode,tables   # rerun some sections; the others stay in results.json

Sections (``bench/<section>.py``), each recorded in ``build/bench/results.json`` with its sizes, seconds,
ratio, target and verdict, and drawn in ``build/bench/*.png``:

* ``decode``  messages/s per format through ``pipelines.silver.decode_frame`` (noop sink) against bare
  ``from_json`` with a hand-written schema and ``try_parse_json`` + ``variant_get`` on the same cached bronze.
* ``tables``  the same changes over 1 … 200 tables: gold seconds per batch, and one plain MERGE per table.
* ``apply``   a batch of updates, deletes and inserts into a mirror, against Delta's documented
  ``foreachBatch`` MERGE.
* ``scale``   the apply batch into a 10× larger mirror.
* ``latency`` continuous mode through the local Kafka broker at a steady rate: produce → visible in gold.
* ``memory``  peak RSS of the driver JVM and the Python workers over the whole run (/proc).

Gold is always reached through its public entry point (:func:`pipelines.gold.stage.start_gold`, as
:mod:`pipelines.runner` starts it; the latency section runs :func:`pipelines.runner.run_pipeline`), so the
benchmark measures whatever gold the checkout holds.
"""
