"""Without Spark: what keeps a version from being certified, the report's chart joining only close points,
each check's line in Data Docs, the validations made from stored results, offline assets kept wherever the
site is built from, and the `dq` command's help and options."""

from __future__ import annotations

import datetime as dt

import pytest

from pipelines.cli import build_parser
from pipelines.quality.certify import blocks
from pipelines.quality.docs_assets import ASSETS, name_changes, package_dir, vendor_assets
from pipelines.quality.docs_results import kind, stored_validations
from pipelines.quality.gx_session import describe, rule_text
from pipelines.quality.report import segments
from pipelines.quality.rules import parse_expectations


def _row(name, success, action="warn", etype="expect_column_values_to_not_be_null", **kw):
    return {"expectation": name, "success": success, "action": action, "expectation_type": etype, **kw}


def test_what_keeps_a_version_from_being_certified():
    assert not blocks(_row("a_small", True))
    assert blocks(_row("a_small", False)) and blocks(_row("a_small", None))  # could not run: no verdict
    assert not blocks(_row("cdc_freshness", False))  # a quiet source says nothing against the rows
    assert not blocks(_row("cdc_invalid_value:d", False, etype="cdc_invalid_value"))
    assert not blocks(_row("amount_positive", False, action="drop"))  # its changes went to quarantine
    assert blocks(_row("amount_positive", False, action="drop"), whole=True)  # rows in the mirror break it


def test_the_chart_joins_only_points_close_in_time():
    t0 = dt.datetime(2026, 1, 1, 12)
    times = [t0, t0 + dt.timedelta(minutes=1), t0 + dt.timedelta(minutes=2), t0 + dt.timedelta(hours=5)]
    assert segments(times) == [(0, 3), (3, 4)]
    assert segments([t0, t0 + dt.timedelta(days=1)]) == [(0, 1), (1, 2)]
    assert segments([]) == []


def test_a_rule_shows_under_its_name_and_action():
    [between, regex] = parse_expectations(
        [
            {"name": "amount_positive", "expect": "between", "column": "amount", "min": 0, "max": 10, "action": "drop"},
            {"name": "email_shape", "expect": "regex", "column": "email", "pattern": "^[^@]+@[^@]+$"},
        ],
        "t",
    )
    line = describe(between.name, between.action, rule_text(between), "each change")
    assert (
        line
        == "amount_positive: amount between 0 and 10, on each change · drop: the offending changes go to quarantine"
    )
    assert "$$" in describe(regex.name, regex.action, rule_text(regex))  # a GE template: $ doubled


def test_stored_results_become_validations_of_every_mirror_and_check():
    at = dt.datetime(2026, 1, 1, 12)
    stored = [
        _row("cdc_key_unique", True, run_id="app", batch_id=3, table="inventory.stock", element_count=43,
             unexpected_count=0, etype="expect_column_values_to_be_unique", checked_at=at),
        _row("qty_known", True, run_id="app", batch_id=3, table="inventory.stock", element_count=5,
             unexpected_count=0, checked_at=at),
        _row("cdc_freshness", False, run_id="run-1", batch_id=0, table="inventory.stock", element_count=1,
             unexpected_count=1, etype="expect_column_pair_values_a_to_be_greater_than_b", checked_at=at),
        _row("amount_positive", False, action="drop", run_id="app", batch_id=3, table="shop.orders",
             element_count=10, unexpected_count=2, etype="expect_column_values_to_be_between", checked_at=at),
    ]  # fmt: skip
    covered = {("shop.orders", "app-b3", "amount_positive")}  # GE validated it in this process: not again
    made = {(t, run, res.suite_name): res for t, run, res in stored_validations(stored, covered)}
    assert set(made) == {
        ("inventory.stock", "app-b3", "inventory__stock.mirror"),
        ("inventory.stock", "app-b3", "inventory__stock.changes"),
        ("inventory.stock", "run-1-b0", "inventory__stock.freshness"),
    }
    [check] = made[("inventory.stock", "app-b3", "inventory__stock.changes")].results
    assert check.success and check.expectation_config.meta["rule"] == "qty_known"
    assert check.expectation_config.description.startswith("qty_known: ")
    assert not made[("inventory.stock", "run-1-b0", "inventory__stock.freshness")].success
    assert [kind(r) for r in stored] == ["mirror", "changes", "freshness", "changes"]


def test_an_offline_site_stays_offline_when_built_where_no_cache_is(tmp_path, monkeypatch):
    url = "https://code.jquery.com/jquery-3.7.1.min.js"
    spec, inner, _extra = ASSETS[url]
    site = tmp_path / "site"
    vendored = site / "static" / "vendor" / package_dir(spec, site).name / inner
    vendored.parent.mkdir(parents=True)
    vendored.write_text("/* jquery */")
    (site / "validations" / "t" / "changes" / "r").mkdir(parents=True)
    page = site / "validations" / "t" / "changes" / "r" / "p.html"
    page.write_text(f'<script src="{url}"></script> 3 of 10 total rows.')
    (site / "index.html").write_text(f'<script src="{url}"></script>')
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LAKECDC_DQ_ASSETS", str(tmp_path / "no-cache"))
    monkeypatch.setattr("pipelines.quality.docs_assets.PROJECT_CACHE", tmp_path / "none")
    assert vendor_assets(site) == 1
    assert url not in (site / "index.html").read_text() and "static/vendor/" in (site / "index.html").read_text()
    assert name_changes(site) == 1 and "10 total changes" in page.read_text()


@pytest.mark.parametrize("action", ["report", "check", "certified"])
def test_dq_help_describes_each_action(action, capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["dq", "--help"])
    assert f"  {action} " in capsys.readouterr().out


def test_dq_and_export_options():
    args = build_parser().parse_args(
        ["dq", "check", "--conf", "c.yaml", "--table", "inventory.stock", "--rules", "--json"]
    )
    assert (args.action, args.table, args.rules, args.json) == ("check", "inventory.stock", True, True)
    assert build_parser().parse_args(["dq", "report", "--warehouse", "w", "--since", "6 hours"]).since == "6 hours"
    assert build_parser().parse_args(["export", "--warehouse", "w", "--certified"]).certified
