"""Data quality on real Spark DataFrames with a real (ephemeral) Great Expectations context.

Every built-in CDC check is run once on clean data (must pass: no false alarms) and once
with a fault injected on purpose (must catch exactly that fault).
"""

from __future__ import annotations

import datetime as dt
import gc
import re
import shutil
import subprocess
import weakref
from pathlib import Path

import pytest

from pipelines.delta_writes import quarantine_frame
from pipelines.quality.batch import QualityFailure, check_batch, check_mirror, run_checks, typed_changes
from pipelines.quality.checks import CHANGE_COUNTS, cdc_checks, seq_not_backwards, source_drift
from pipelines.quality.docs import build_data_docs
from pipelines.quality.report import chart, report
from pipelines.quality.rules import parse_expectations
from pipelines.quality.storage import DQ_RESULT_COLUMNS, result_row, write_results
from pipelines.testing.dq_assets import fetch_assets

ROOT = Path(__file__).resolve().parents[2]
TABLE = "shop.orders"
COLUMNS = {"id": "bigint", "amount": "decimal(12,2)", "status": "varchar(16)", "email": "varchar(64)"}
CHANGES_DDL = (
    "op STRING, key_columns ARRAY<STRING>, before MAP<STRING, STRING>, after MAP<STRING, STRING>, "
    "changed ARRAY<STRING>, seq STRING, queue_pos STRING, change_index INT, bronze_position STRING, "
    "source STRING"
)

RULES = parse_expectations(
    [
        {
            "name": "amount_positive",
            "expect": "between",
            "column": "amount",
            "min": 0,
            "max": 1000000,
            "action": "drop",
        },
        {
            "name": "status_known",
            "expect": "in_set",
            "column": "status",
            "values": ["NEW", "PAID", "SHIPPED"],
            "action": "warn",
        },
        {"name": "email_shape", "expect": "regex", "column": "email", "pattern": "^[^@]+@[^@]+$", "action": "warn"},
        {"name": "id_present", "expect": "not_null", "column": "id", "action": "warn"},
    ],
    "tables.shop.orders.expectations",
)


def seq(n: int) -> str:
    return f"{n:020d}"


def change(op, pos, idx, n, after=None, before=None, changed=None):
    return (op, ["id"], before, after, changed, seq(n), f"0:{n}", idx, pos, "shop_default")


def row(i, amount, status, email):
    return {"id": None if i is None else str(i), "amount": amount, "status": status, "email": email}


def by_name(rows):
    return {r["expectation"]: r for r in rows}


# ---------------------------------------------------------------- configured rules: warn / drop / fail


def test_drop_quarantines_exactly_the_offending_changes_and_warn_records(spark):
    changes = spark.createDataFrame(
        [
            change("INSERT", "p0", 0, 1, row(1, "10.00", "NEW", "a@x.io")),
            change("INSERT", "p1", 0, 2, row(2, "-5.00", "PAID", "b@x.io")),  # drop: amount < 0
            change("INSERT", "p1", 1, 3, row(3, "2000000.00", "LOST", "c@x.io")),  # drop + warn status
            change(
                "UPDATE",
                "p2",
                0,
                4,
                row(1, "11.00", "PAID", "not-an-email"),  # warn email
                before=row(1, "10.00", "NEW", "a@x.io"),
            ),
            change("DELETE", "p3", 0, 5, None, before=row(4, "-1.00", "NEW", "d@x.io")),  # DELETE: never dropped
            change("UPDATE", "p4", 0, 6, {"id": "5", "status": "SHIPPED"}, changed=["status"]),  # partial: no amount
        ],
        CHANGES_DDL,
    )
    typed = typed_changes(changes, COLUMNS)
    bq = check_batch(spark, TABLE, typed, RULES, "run1", 7)

    dropped = {(r.bronze_position, r.change_index): (r.rule, r.bad_value) for r in bq.dropped.collect()}
    assert dropped == {("p1", 0): ("amount_positive", "-5.00"), ("p1", 1): ("amount_positive", "2000000.00")}
    assert bq.dropped_count == 2

    res = by_name(bq.results)
    assert set(res) == {"amount_positive", "status_known", "email_shape", "id_present"}
    assert res["amount_positive"]["success"] is False and res["amount_positive"]["unexpected_count"] == 2
    assert res["amount_positive"]["action"] == "drop"
    assert res["status_known"]["success"] is False and res["status_known"]["unexpected_count"] == 1
    assert res["email_shape"]["success"] is False and res["email_shape"]["unexpected_count"] == 1
    assert res["id_present"]["success"] is True
    assert res["amount_positive"]["expectation_type"] == "expect_column_values_to_be_between"
    assert all(r["run_id"] == "run1" and r["batch_id"] == 7 and r["table"] == TABLE for r in bq.results)
    assert any("status_known" in w for w in bq.warnings)

    keep, bad = bq.split(changes)
    assert sorted((r.bronze_position, r.change_index) for r in keep.collect()) == [
        ("p0", 0),
        ("p2", 0),
        ("p3", 0),
        ("p4", 0),
    ]
    quarantined = quarantine_frame(bad.withColumn("stage", quality_lit("gold"))).collect()
    assert {(r.rule, r.bad_value, r.bronze_position) for r in quarantined} == {
        ("amount_positive", "-5.00", "p1"),
        ("amount_positive", "2000000.00", "p1"),
    }
    assert all("amount_positive" in r.reason for r in quarantined)
    assert bq.validation is not None and bq.validation.success is False  # the GE suite result


def quality_lit(v):
    from pyspark.sql import functions as F

    return F.lit(v)


def test_fail_raises_naming_table_rule_and_five_examples(spark):
    rules = parse_expectations([{"name": "id_present", "expect": "not_null", "column": "id", "action": "fail"}], "t")
    typed = spark.createDataFrame(
        [(None if i % 2 else i, "INSERT", f"pos{i}", 0) for i in range(16)],
        "id BIGINT, op STRING, bronze_position STRING, change_index INT",
    )
    with pytest.raises(QualityFailure) as info:
        check_batch(spark, TABLE, typed, rules, "run1", 3)
    msg = str(info.value)
    assert "id_present" in msg and TABLE in msg and "8 of 16" in msg
    assert msg.count("e.g.") == 5 and "pos1" in msg
    assert info.value.results and info.value.results[0]["success"] is False


def test_great_expectations_keeps_no_checked_frame_after_a_rule_fails(spark):
    """GE's engine keeps the last batch of every asset (one per table) while its context lives; the
    driver then held a checked DataFrame per table, and the plan and Delta snapshots under it."""
    rules = parse_expectations([{"name": "id_present", "expect": "not_null", "column": "id", "action": "warn"}], "t")
    typed = spark.createDataFrame(
        [(None, "INSERT", "pos1", 0), (2, "INSERT", "pos2", 0)],
        "id BIGINT, op STRING, bronze_position STRING, change_index INT",
    )
    [row] = [r for r in check_batch(spark, TABLE, typed, rules, "run1", 5).results if r["expectation"] == "id_present"]
    assert row["success"] is False and row["unexpected_count"] == 1, "GE validated the frame"
    checked = weakref.ref(typed)
    del typed
    gc.collect()
    assert checked() is None, "a DataFrame GE validated is still referenced"


def test_a_rule_on_a_missing_column_is_a_failed_result_naming_it(spark):
    """Batch and mirror rules share one error row; ``fail`` raises with the same message."""
    warn = parse_expectations([{"name": "ghost", "expect": "not_null", "column": "nope", "action": "warn"}], "t")
    typed = spark.createDataFrame(
        [(1, "INSERT", "pos1", 0)], "id BIGINT, op STRING, bronze_position STRING, change_index INT"
    )
    [row] = [r for r in check_batch(spark, TABLE, typed, warn, "run1", 4).results if r["expectation"] == "ghost"]
    assert row["success"] is False and "'nope' is not a column of shop.orders" in row["details"]
    fail = parse_expectations([{"name": "ghost", "expect": "unique", "column": "nope", "action": "fail"}], "t")
    with pytest.raises(QualityFailure, match="'nope' is not a column of shop.orders") as info:
        check_mirror(spark, TABLE, typed, fail, "run1", 4)
    assert info.value.results[0]["details"] == row["details"]


def test_mirror_rules_unique_and_row_count(spark):
    mirror = spark.createDataFrame([(1, "a"), (2, "a"), (3, "b")], "id BIGINT, status STRING")
    warn = parse_expectations(
        [
            {"name": "status_unique", "expect": "unique", "column": "status", "action": "warn"},
            {"name": "pair_unique", "expect": "unique", "columns": ["id", "status"], "action": "warn"},
            {"name": "size_ok", "expect": "row_count_between", "min": 1, "max": 10, "action": "fail"},
        ],
        "t",
    )
    res = by_name(check_mirror(spark, TABLE, mirror, warn, "run1", 1, key_cols=["id"]))
    assert res["status_unique"]["success"] is False and res["status_unique"]["unexpected_count"] == 2
    assert res["pair_unique"]["success"] is True
    assert res["size_ok"]["success"] is True and res["size_ok"]["element_count"] == 3
    fail = parse_expectations([{"name": "tiny", "expect": "row_count_between", "max": 2, "action": "fail"}], "t")
    with pytest.raises(QualityFailure, match=r"'tiny'.*shop\.orders.*observed 3"):
        check_mirror(spark, TABLE, mirror, fail, "run1", 1)


# ---------------------------------------------------------------- built-in CDC checks

MIRROR_DDL = "id BIGINT, amount DECIMAL(12,2), status STRING, _seq STRING, _source STRING, _event_time TIMESTAMP"
MCOLS = {"id": "bigint", "amount": "decimal(12,2)", "status": "varchar(16)"}


def _mirror(spark, rows):
    return spark.createDataFrame(rows, MIRROR_DDL)


def _t(hours_ago: float):
    return dt.datetime.now() - dt.timedelta(hours=hours_ago)  # naive local, as Spark returns it


def _dec(v):
    from decimal import Decimal

    return Decimal(v)


@pytest.fixture(scope="module")
def cdc_case(spark):
    """A full load of 3 rows, then a batch with one UPDATE and one DELETE."""
    snapshot = spark.createDataFrame(
        [
            change("SNAPSHOT", "s0", 0, 1, {"id": "1", "amount": "10.00", "status": "NEW"}),
            change("SNAPSHOT", "s0", 1, 1, {"id": "2", "amount": "20.50", "status": "PAID"}),
            change("SNAPSHOT", "s0", 2, 1, {"id": "3", "amount": "30", "status": "NEW"}),
        ],
        CHANGES_DDL,
    )
    before = _mirror(
        spark,
        [
            (1, _dec("10.00"), "NEW", seq(1), "src", _t(0.2)),
            (2, _dec("20.50"), "PAID", seq(1), "src", _t(0.2)),
            (3, _dec("30.00"), "NEW", seq(1), "src", _t(0.2)),
        ],
    )
    batch = spark.createDataFrame(
        [
            change(
                "UPDATE",
                "b0",
                0,
                5,
                {"id": "1", "amount": "11.00", "status": "PAID"},
                before={"id": "1", "amount": "10.00", "status": "NEW"},
            ),
            change("DELETE", "b1", 0, 6, None, before={"id": "3", "amount": "30.00", "status": "NEW"}),
        ],
        CHANGES_DDL,
    )
    after = _mirror(
        spark, [(1, _dec("11.00"), "PAID", seq(5), "src", _t(0.1)), (2, _dec("20.50"), "PAID", seq(1), "src", _t(0.2))]
    )
    return {"snapshot": snapshot, "before": before, "batch": batch, "after": after}


def test_cdc_checks_pass_on_clean_data(spark, cdc_case):
    rows = cdc_checks(spark, TABLE, cdc_case["after"], ["id"], run_id="r", batch_id=2, columns=MCOLS)
    res = by_name(rows)
    assert set(res) == {"cdc_key_not_null", "cdc_key_unique", "cdc_freshness"}
    assert all(r["success"] for r in rows), rows
    # reconciliation right after the full load: the mirror is exactly the snapshot ("30" == 30.00)
    rec = by_name(
        cdc_checks(
            spark,
            TABLE,
            cdc_case["before"],
            ["id"],
            snapshot_df=cdc_case["snapshot"],
            columns=MCOLS,
            checks=("reconcile",),
        )
    )
    assert rec["cdc_reconcile_count"]["success"] and rec["cdc_reconcile_checksum"]["success"], rec


def test_cdc_key_null_and_duplicate_are_caught(spark):
    bad = _mirror(
        spark,
        [
            (1, None, "NEW", seq(1), "src", _t(0)),
            (None, None, "NEW", seq(1), "src", _t(0)),
            (2, None, "NEW", seq(1), "src", _t(0)),
            (2, None, "PAID", seq(2), "src", _t(0)),
        ],
    )
    res = by_name(cdc_checks(spark, TABLE, bad, ["id"], checks=("key_not_null", "key_unique")))
    assert res["cdc_key_not_null"]["success"] is False and res["cdc_key_not_null"]["unexpected_count"] == 1
    assert res["cdc_key_unique"]["success"] is False and res["cdc_key_unique"]["unexpected_count"] == 2
    with pytest.raises(QualityFailure, match="cdc_key_unique"):
        cdc_checks(spark, TABLE, bad, ["id"], checks=("key_unique",), fail_on=("cdc_key_unique",))


PROBE_DDL = "bronze_position STRING, seq STRING, prev_seq STRING, row_matches BOOLEAN, check_drift BOOLEAN"
#: change probe rows with every NULL the counts must treat as GE does (pair missing, condition NULL)
PROBE_ROWS = [
    ("b0", seq(5), seq(4), True, True),  # passes both
    ("b1", seq(5), None, False, False),  # no previous sequence; not a drift candidate
    ("b2", None, seq(4), True, None),  # no sequence: skipped by the pair; NULL condition
    ("b3", seq(6), seq(6), True, True),  # equal sequence: not backwards
    ("b4", seq(7), seq(1), None, True),  # no verdict on the row
]
BAD_PROBE_ROWS = [
    ("b5", seq(2), seq(3), True, False),  # backwards
    ("b6", seq(8), seq(1), False, True),  # drift
    ("b7", seq(1), seq(9), False, True),  # both
]


@pytest.mark.parametrize(
    "rows",
    [PROBE_ROWS, PROBE_ROWS + BAD_PROBE_ROWS[1:2], PROBE_ROWS + BAD_PROBE_ROWS],
    ids=["passing", "one failing", "both failing"],
)
def test_the_change_checks_counted_in_one_aggregation_agree_with_great_expectations(spark, rows):
    """gold counts the change checks in one Spark aggregation and runs GE only when one finds a row
    unexpected: the counts must be GE's own, NULLs included, and a passing batch's rows the same."""
    from pyspark.sql import functions as F

    probe = spark.createDataFrame(rows, PROBE_DDL)
    items = seq_not_backwards() + source_drift()
    run = {"run_id": "r", "batch_id": 1, "index_columns": ["bronze_position"]}
    by_ge = by_name(run_checks(TABLE, "cdc_changes", probe, items, **run))
    for name, (rows_sql, unexpected_sql) in CHANGE_COUNTS.items():
        counted = probe.agg(F.count_if(F.expr(rows_sql)), F.count_if(F.expr(unexpected_sql))).first()
        assert (by_ge[name]["element_count"], by_ge[name]["unexpected_count"]) == tuple(counted), name
    fast = by_name(run_checks(TABLE, "cdc_changes", probe, items, counted=CHANGE_COUNTS, **run))
    if rows is PROBE_ROWS:
        assert all(r["success"] for r in by_ge.values())
    elif len(rows) == len(PROBE_ROWS) + 1:  # the sequence check counted, the drift check by GE
        assert by_ge["cdc_seq_not_backwards"]["success"] and by_ge["cdc_source_drift"]["unexpected_count"] == 1
        assert "b6" in fast["cdc_source_drift"]["details"]
    else:
        assert by_ge["cdc_seq_not_backwards"]["unexpected_count"] == 2
        assert by_ge["cdc_source_drift"]["unexpected_count"] == 2
        assert "b7" in fast["cdc_source_drift"]["details"]  # failing: GE's report, with the examples
    for name in CHANGE_COUNTS:
        assert {k: v for k, v in fast[name].items() if k != "checked_at"} == {
            k: v for k, v in by_ge[name].items() if k != "checked_at"
        }


@pytest.mark.parametrize("key", ["a`b", "$% ^,& *("])
def test_odd_column_names_pass_through_typed_changes(spark, key):
    """(The drift check with such names, through gold: tests/spark/test_gold_semantics.py.)"""
    other = "$% ^,& *(" if key == "a`b" else "a`b"  # each name once as the key, once as a compared column
    cols = {key: "bigint", other: "varchar(16)"}
    batch = spark.createDataFrame(
        [
            change("UPDATE", "b0", 0, 5, {key: "1", other: "new"}, before={key: "1", other: "old"}),
            change("UPDATE", "b1", 0, 6, {key: "2", other: "x"}, before={key: "2", other: "stale"}),
            change("DELETE", "b2", 0, 7, None, before={key: "3", other: "three"}),
        ],
        CHANGES_DDL,
    )
    typed = typed_changes(batch, cols)
    assert typed.columns[:2] == [key, other]
    assert sorted((r[key], r[other]) for r in typed.collect()) == [(1, "new"), (2, "x"), (3, "three")]


def test_cdc_freshness_is_caught_with_per_source_threshold(spark):
    stale = _mirror(spark, [(1, None, "NEW", seq(1), "slow_src", _t(3)), (2, None, "NEW", seq(1), "fast_src", _t(0.1))])
    res = cdc_checks(spark, TABLE, stale, ["id"], checks=("freshness",))
    assert res[0]["expectation"] == "cdc_freshness" and res[0]["success"] is False
    assert res[0]["unexpected_count"] == 1 and "slow_src" in res[0]["details"]
    # a heartbeat of the slow source counts as progress
    hb = quality_heartbeats(spark, "slow_src", _t(0.5))
    ok = cdc_checks(spark, TABLE, stale, ["id"], checks=("freshness",), heartbeats_df=hb)
    assert ok[0]["success"] is True
    # or a per-source threshold (configurable) allows the slow one 4 hours
    ok2 = cdc_checks(
        spark, TABLE, stale, ["id"], checks=("freshness",), freshness_threshold={"slow_src": "4 hours", "*": "1 hour"}
    )
    assert ok2[0]["success"] is True


def quality_heartbeats(spark, source, when):
    return spark.createDataFrame([(source, when)], "source STRING, event_time TIMESTAMP")


def test_cdc_reconciliation_catches_lost_and_changed_rows(spark, cdc_case):
    lost = cdc_case["before"].where("id != 3")
    changed = cdc_case["before"].selectExpr(
        "id",
        "CASE WHEN id = 2 THEN CAST(20.51 AS DECIMAL(12,2)) ELSE amount END AS amount",
        "status",
        "_seq",
        "_source",
        "_event_time",
    )
    r1 = by_name(
        cdc_checks(spark, TABLE, lost, ["id"], snapshot_df=cdc_case["snapshot"], columns=MCOLS, checks=("reconcile",))
    )
    assert r1["cdc_reconcile_count"]["success"] is False and r1["cdc_reconcile_checksum"]["success"] is False
    r2 = by_name(
        cdc_checks(
            spark, TABLE, changed, ["id"], snapshot_df=cdc_case["snapshot"], columns=MCOLS, checks=("reconcile",)
        )
    )
    assert r2["cdc_reconcile_count"]["success"] is True and r2["cdc_reconcile_checksum"]["success"] is False


# ---------------------------------------------------------------- reports: dq_results, Data Docs, chart


def test_results_report_chart_and_data_docs(spark, tmp_path, warehouse, monkeypatch):
    now = dt.datetime.now()
    rows = []
    for b in range(3):
        for tbl, ok in ((TABLE, b != 1), ("shop.users", True)):
            rows.append(
                result_row(
                    "run9",
                    b,
                    tbl,
                    "amount_positive",
                    "expect_column_values_to_be_between",
                    "drop",
                    ok,
                    10,
                    0 if ok else 3,
                    None,
                    now + dt.timedelta(minutes=b),
                )
            )
            rows.append(
                result_row(
                    "run9",
                    b,
                    tbl,
                    "cdc_key_unique",
                    "expect_column_values_to_be_unique",
                    "warn",
                    True,
                    10,
                    0,
                    None,
                    now + dt.timedelta(minutes=b),
                )
            )
    assert write_results(spark, str(warehouse), rows) == 12
    assert write_results(spark, str(warehouse), rows[:2], app_id="a", version=1) == 2
    write_results(spark, str(warehouse), rows[:2], app_id="a", version=1)  # a retry: written once
    stored = spark.read.format("delta").load(str(warehouse / "dq" / "dq_results"))
    assert stored.count() == 14
    assert stored.columns == list(DQ_RESULT_COLUMNS)

    text = report(spark, str(warehouse))
    assert "shop.orders" in text and "shop.users" in text and "pass rate" in text
    cells = next(ln for ln in text.splitlines() if ln.startswith("shop.orders ")).split()
    # 6 rows + 2 rows written again under app_id "a" (written once): 8 checks, 1 failure, 3 quarantined
    assert cells[:5] == ["shop.orders", "8", "87.5%", "1", "3"], text
    assert "amount_positive (drop) failed" in text

    png = chart(spark, str(warehouse), tmp_path / "chart.png")
    assert Path(png).stat().st_size > 5000
    (ROOT / "build").mkdir(exist_ok=True)
    shutil.copy(png, ROOT / "build" / "dq_chart.png")

    # Data Docs from real validations of this process (run one more here so the test stands alone)
    typed = spark.createDataFrame(
        [(1, "NEW", "p0", 0, "INSERT"), (None, "X", "p1", 0, "INSERT")],
        "id BIGINT, status STRING, bronze_position STRING, change_index INT, op STRING",
    )
    bq = check_batch(spark, TABLE, typed, RULES[1:], "run9", 4)
    fetch_assets()  # GE links its CSS/JS from CDNs: with the asset cache filled the site serves local copies
    index = build_data_docs([bq], warehouse=str(warehouse))
    assert index == str((warehouse / "dq" / "data_docs" / "index.html").resolve())
    html = Path(index).read_text()
    assert "shop__orders.changes" in html
    pages = list((warehouse / "dq" / "data_docs" / "validations").rglob("*.html"))
    page = "".join(p.read_text() for p in pages)
    # each rule under its configured name, what it expects and its action; a batch's pages count changes
    assert "status_known: status in NEW, PAID, SHIPPED, on each change · warn: recorded" in page, page[:2000]
    of_changes = "".join(p.read_text() for p in pages if "changes" in p.parts)
    assert "run9-b4" in page and "total changes" in of_changes and "total rows" not in of_changes
    # the stored results GE never validated (passing checks, counted): every mirror, every check
    assert "shop__users.changes" in html and "shop__users.mirror" in html
    assert "amount_positive: " in page and "drop: the offending changes go to quarantine" in page
    assert "cdc_key_unique: no two rows of the mirror share a key" in page
    # a later build keeps the earlier results (file-backed store under dq/gx) and adds this process's
    check_mirror(
        spark,
        TABLE,
        typed,
        parse_expectations([{"name": "few", "expect": "row_count_between", "max": 10}], "t"),
        "run9",
        5,
    )
    monkeypatch.chdir(tmp_path)  # built from another working directory: the site stays offline-ready
    build_data_docs(None, warehouse=str(warehouse))
    monkeypatch.chdir(ROOT)
    assert all(p.exists() for p in pages)
    assert len(list((warehouse / "dq" / "data_docs" / "validations").rglob("*.html"))) > len(pages)
    assert "https://unpkg.com" not in Path(index).read_text() and "static/vendor/" in Path(index).read_text()

    chromium = Path("/usr/bin/chromium")
    if not chromium.exists():
        pytest.skip("chromium is not installed (apt-get install -y chromium)")

    def screenshot(html: Path, png: Path) -> None:
        subprocess.run(
            [
                str(chromium),
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                f"--user-data-dir={tmp_path / 'chrome'}",
                f"--screenshot={png}",
                "--window-size=1280,900",
                f"file://{html}",
            ],
            check=True,
            timeout=120,
            capture_output=True,
        )
        assert png.exists() and png.stat().st_size > 10000

    # The index's result list is drawn by bootstrap-table in the browser, from assets vendored into
    # the site (no CDN needed): the DOM after its scripts ran must link every validation page.
    assert "https://unpkg.com" not in html and "static/vendor/" in Path(index).read_text()
    dom = subprocess.run(
        [
            str(chromium),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={tmp_path / 'chrome-dom'}",
            "--virtual-time-budget=5000",
            "--dump-dom",
            f"file://{index}",
        ],
        check=True,
        timeout=120,
        capture_output=True,
        text=True,
    ).stdout
    rendered = set(re.findall(r'validations/[^"]+?\.html', dom))
    on_disk = {
        str(p.relative_to(warehouse / "dq" / "data_docs"))
        for p in (warehouse / "dq" / "data_docs" / "validations").rglob("*.html")
    }
    assert rendered == on_disk and len(rendered) >= 2
    screenshot(Path(index), tmp_path / "docs.png")
    shutil.copy(tmp_path / "docs.png", ROOT / "build" / "dq_screenshot.png")
    screenshot(pages[0], tmp_path / "page.png")
    assert (tmp_path / "page.png").stat().st_size > 40000  # a page with content, not a blank one
    shutil.copy(tmp_path / "page.png", ROOT / "build" / "dq_screenshot_validation.png")
