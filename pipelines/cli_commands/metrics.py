"""``lakecdc metrics``: the warehouse's per-mirror and per-source figures in the Prometheus text format, printed
once or (``--serve``) served on 127.0.0.1 for a scrape, each scrape a fresh reading (:mod:`pipelines.metrics`)."""

from __future__ import annotations

import argparse
import json
import sys


def _reading(spark, cfg):
    from pipelines.metrics import status_metrics
    from pipelines.status import collect_status

    status = collect_status(spark, cfg)
    return status, status_metrics(status)


def cmd_metrics(args: argparse.Namespace) -> int:
    from pipelines.cli_commands.pipeline import with_locations
    from pipelines.config import load_config
    from pipelines.metrics import text
    from pipelines.spark import get_spark

    cfg = with_locations(load_config(args.conf), args)
    spark = get_spark("lakecdc-metrics", master=args.master)
    if not args.serve:
        status, registry = _reading(spark, cfg)
        if args.json:
            print(json.dumps(_as_json(registry), ensure_ascii=False, indent=2))
        else:
            sys.stdout.write(text(registry))
        return 0
    return _serve(spark, cfg, args.port)


def _as_json(registry) -> list[dict]:
    """Every sample: name, labels, value."""
    return [
        {"name": s.name, "labels": dict(s.labels), "value": s.value}
        for family in registry.collect()
        for s in family.samples
    ]


def _serve(spark, cfg, port: int) -> int:
    """Serve the metrics on 127.0.0.1:``port`` until interrupted; each GET reads the warehouse afresh
    (:func:`pipelines.metrics.metrics_server`)."""
    from pipelines.cli_commands.shared import progress_line
    from pipelines.metrics import metrics_server

    server = metrics_server(lambda: _reading(spark, cfg)[1], port)
    progress_line(f"serving metrics on http://127.0.0.1:{server.server_address[1]}/metrics; Ctrl-C stops")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
